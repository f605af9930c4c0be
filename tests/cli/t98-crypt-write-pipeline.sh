# Encrypted writes through the cipher's pipeline (io.c pool_run_ordered():
# each unit's cipher and MAC a job of the pool or the calling thread, its
# store on the calling thread in order once that job is done; a planned
# write's writeback starts after jobs on a worker):
#  - format --source of files around the pipeline's sizes (bch_data_write()'s
#    groups from 256 KiB, 2 MiB groups of 16 units, a file with a hole
#    between two runs of data): fsck is clean and the tree comes back exactly;
#  - through the mount: a 24 MiB file in 1 MiB writes (planned: the pool's
#    pipeline and its writeback starts), rewritten in part with 768 KiB and
#    256 KiB writes, and one appended in 3 MiB writes: each reads back after
#    a remount, and fsck is clean.
# A unit stored before its cipher finished is not the ciphertext its MAC
# covers: fsck and the reads fail.
need python3
BIN=${BCH_BIN:-$B}	# the binary itself: this test formats encrypted on its own
printf 'passphrase of t98\n' > pf
export BCACHEFS_PASSPHRASE_FILE="$PWD/pf"
T="python3 $ROOT/tests/cli/treetool.py"

mkdir src
for n in 262143 262144 262145 393216 524287 524288 2097151 2097152 2097153 2228224 4194305 9437184; do
	head -c "$n" /dev/urandom > "src/s$n" || fail "make s$n"
done
head -c 1500000 /dev/urandom > src/hole && truncate -s 4M src/hole &&
	head -c 1300000 /dev/urandom >> src/hole
expect_rc 0 $BIN format -q --encrypted --passphrase-file pf --fs-size=192M --source src img
expect_rc 0 $BIN fsck -n img
expect_rc 0 $BIN image extract img xd
expect_rc 0 $T compare src xd

fuse_part "the writes through the mount" || exit 0
head -c 25165824 /dev/urandom > big
head -c 9437184 /dev/urandom > app
cp big want
mkdir m
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $BIN fusemount "$PWD/img" m
mountpoint -q m || fail "not mounted"
(
	ulimit -f 200000
	dd if=big of=m/big bs=1M status=none &&
	# rewrites inside it: 768 KiB at 5 MiB, 256 KiB pieces at 13 MiB
	dd if=app of=m/big bs=768K count=2 seek=$((5 * 4 / 3)) conv=notrunc status=none &&
	dd if=app of=m/big bs=256K count=7 skip=9 seek=52 conv=notrunc status=none &&
	dd if=app of=m/app bs=3M status=none
) || fail "writes through the mount"
dd if=app of=want bs=768K count=2 seek=$((5 * 4 / 3)) conv=notrunc status=none
dd if=app of=want bs=256K count=7 skip=9 seek=52 conv=notrunc status=none
fusermount3 -u m || fail "unmount"
expect_rc 0 $BIN fsck -n img
expect_rc 0 $BIN fusemount "$PWD/img" m
mountpoint -q m || fail "not mounted again"
cmp want m/big || fail "big differs after the remount"
cmp app m/app || fail "app differs after the remount"
fusermount3 -u m || fail "unmount"
