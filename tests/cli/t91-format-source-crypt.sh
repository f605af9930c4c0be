# format --source of an encrypted filesystem: every file's extents through
# the cipher (libcrypto from 2 KiB up, libsodium below: crypt.c) and back.
#  - a generated tree (seed printed) comes back exactly (content, holes, hard
#    links, xattrs, modes, ns times), and fsck is clean;
#  - files at the copy's 1 MiB write boundaries (one write each side, the last
#    one with a partial block) and empty ones, a trailing and a middle hole;
#  - a hard link made right after its file: one inode, two names, its data
#    and mtime kept;
#  - no space: the failing file named, exit 1;
#  - a format killed during the copy (its key not wrapped yet: the scrypt runs
#    beside the copy) is named as such when opened, before any passphrase is
#    read, and nothing is written to it.
need python3
BIN=${BCH_BIN:-$B}	# the binary itself: this test formats encrypted on its own
printf 'passphrase of t88\n' > pf
export BCACHEFS_PASSPHRASE_FILE="$PWD/pf"
T="python3 $ROOT/tests/cli/treetool.py"
SEED=${SEED:-88}
echo "seed $SEED"
$T gen src "$SEED" 600 || fail "gen"

# sizes around the copy's 1 MiB writes, and holes
mkdir src/edges
for n in 0 1 4095 4096 4097 1048575 1048576 1048577 3145733; do
	head -c "$n" /dev/urandom > "src/edges/s$n" || fail "make s$n"
done
head -c 100000 /dev/urandom > src/edges/tailhole && truncate -s 5M src/edges/tailhole
head -c 70000 /dev/urandom > src/edges/midhole &&
	dd if=/dev/urandom of=src/edges/midhole bs=4096 seek=700 count=40 conv=notrunc status=none
# "a" then its link "b" in the same directory
mkdir src/links
head -c 300000 /dev/urandom > src/links/a && ln src/links/a src/links/b
touch -d '2001-02-03 04:05:06.123456789' src/links/a
setfattr -n user.t88 -v linked src/links/a 2>/dev/null || true

expect_rc 0 $BIN format -q --encrypted --passphrase-file pf --fs-size=256M --source src img
expect_rc 0 $BIN fsck -n img
expect_rc 0 $BIN image extract img xd
expect_rc 0 $T compare src xd
[ "$(stat -c %h xd/links/a)" = 2 ] && [ "$(stat -c %i xd/links/a)" = "$(stat -c %i xd/links/b)" ] ||
	fail "links/a and links/b are not one inode with two names"
[ "$(stat -c %Y.%y xd/links/b)" = "$(stat -c %Y.%y src/links/a)" ] || fail "the linked file's mtime"

# no space: the file that does not fit is named, exit 1
mkdir big
for i in $(seq 24); do head -c 2000000 /dev/urandom > "big/f$i"; done
truncate -s 32M small.img
expect_rc 1 $BIN format -q --fs-size=32M --encrypted --passphrase-file pf --source big small.img
expect_in err "^bcachefs format: writing big/f[0-9]+: No space left on device"

# killed during the copy (slow device writes): the superblock is there, the key not
mkdir kill
for i in $(seq 40); do head -c 200000 /dev/urandom > "kill/f$i"; done
BCACHEFS_TEST_DEVICE_DELAY="k.img=20000" $BIN format -q --encrypted --passphrase-file pf \
	--fs-size=64M --source kill k.img 2>kill.err & kpid=$!
for i in $(seq 100); do
	sleep 0.1
	$BIN show-super k.img > /dev/null 2>&1 && break
done
sleep 0.3
kill -9 $kpid
wait $kpid
krc=$?
[ $krc = 137 ] || fail "the format ended ($krc) before the kill (it takes ~4 s here)"
[ -s k.img ] || fail "the format wrote nothing before the kill"
sum=$(sha256sum < k.img)
expect_rc 8 $BIN fsck -y k.img
expect_in err 'no key recorded: its format --source did not finish'
expect_rc 1 $BIN image ls k.img /
expect_in err 'no key recorded'
[ "$(sha256sum < k.img)" = "$sum" ] || fail "opening the unfinished image wrote to it"
