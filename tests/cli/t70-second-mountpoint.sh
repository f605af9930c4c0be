# Several mountpoints, one filesystem (issue 31): a second fusemount (or
# mount -t fuse.bcachefs) of a mounted filesystem joins its daemon, as a
# kernel filesystem shares one superblock between mounts:
#   one daemon serves both; what one mountpoint changes the other sees at
#   once (data read before from the page cache, a name, a negative name, a
#   mode; 200 times in a row), not after the kernel's cache timeout
#   as the kernel: the atime rules are each mountpoint's (noatime on one,
#   relatime on the other); -o ro of a read-write filesystem is refused
#   (exit 32), a read-write mount of a read-only one is made read-only
#   refused by name (exit 32): the same mountpoint again, filesystem options
#   (lazytime, norebalance, compression=...) other than the daemon's
#   unmounting either leaves the other working (commands through it too);
#   a file open on one keeps its data when the other removes its last name
#   SIGTERM ends every mountpoint and closes the filesystem
# fsck -n -f clean after each daemon's end; data compared with its source.
# Data: python's random.Random, seed 69 (printed).
need_fuse
need python3
echo "seed: 69"
python3 -c 'import random; open("src.bin", "wb").write(random.Random(69).randbytes(3 << 20))' ||
	fail "gen"

mkdir m1 m2 m3
trap 'cd /; for d in m1 m2 m3; do fusermount3 -uz "$OLDPWD/$d" 2>/dev/null; done' EXIT
daemons() { pgrep -f "fusemount.*$PWD/img" | wc -l; }
# wait_gone: the daemon ended (it closes after the last unmount)
wait_gone() {
	for i in $(seq 50); do [ "$(daemons)" = 0 ] && return; sleep 0.1; done
	fail "the daemon did not end: $(pgrep -fa "fusemount.*$PWD/img")"
}
fsck_clean() {
	expect_rc 0 $B fsck -n -f img
	expect_in out ' 0 problems found'
}

expect_rc 0 $B format -q --fs-size=128M img
expect_rc 0 $B fusemount "$PWD/img" m1
expect_rc 0 $B fusemount "$PWD/img" m2
[ ! -s err ] || fail "the second mount printed: $(cat err)"
[ "$(daemons)" = 1 ] || fail "$(daemons) daemons for one filesystem"
[ "$(grep -c " fuse.bcachefs $PWD/img " /proc/self/mountinfo)" = 2 ] ||
	fail "mountinfo: $(grep bcachefs /proc/self/mountinfo)"

# ---- coherence: each side sees the other's change at once
cp src.bin m1/data || fail "cp"
cmp -s m2/data src.bin || fail "m2 reads other data than m1 wrote"
# m1 holds the page in its cache (an open file keeps it), m2 writes over it
python3 -c 'import os
fd = os.open("m1/data", os.O_RDONLY)
before = os.pread(fd, 4, 4096)
w = os.open("m2/data", os.O_WRONLY)
os.pwrite(w, b"tail", 4096)
os.close(w)
after = os.pread(fd, 4, 4096)
assert after == b"tail", "m1 read %r from its page cache after m2 wrote" % after' ||
	fail "m1 reads stale data after m2 wrote"
stat m2/later >/dev/null 2>&1 && fail "m2/later before it exists"
echo later > m1/later
[ "$(cat m2/later 2>&1)" = later ] || fail "m2 kept a negative entry: $(cat m2/later 2>&1)"
chmod 600 m1/later
[ "$(stat -c %a m2/later)" = 600 ] || fail "m2's mode after chmod on m1: $(stat -c %a m2/later)"
mv m2/later m2/moved
[ -e m1/later ] && fail "m1 still has the old name after rename on m2"
[ "$(cat m1/moved)" = later ] || fail "m1 lacks the new name"
rm m1/moved
[ -e m2/moved ] && fail "m2 still has a removed name"
mkdir m2/dir && echo x > m2/dir/f
[ "$(ls m1/dir)" = f ] || fail "m1 does not list m2's new directory"
# the same, many times at once: the other mountpoint's kernel keeps no name
# while both are mounted (the daemon's notice comes after its reply: main's
# binary before cache_timeout() missed 6 of 300 on a quiet machine)
miss=0 stale=0
for i in $(seq 200); do
	stat m2/n$i >/dev/null 2>&1
	echo x > m1/n$i
	[ -e m2/n$i ] || miss=$((miss + 1))
	chmod 600 m1/n$i
	[ "$(stat -c %a m2/n$i 2>/dev/null)" = 600 ] || stale=$((stale + 1))
	rm m1/n$i
	[ -e m2/n$i ] && stale=$((stale + 1))
done
[ $miss = 0 ] && [ $stale = 0 ] || fail "of 200 names made, changed and removed on m1: $miss missing on m2, $stale stale"

# ---- atime per mountpoint: a read through m3 (noatime) leaves it, through m1 (relatime) not
expect_rc 0 $B fusemount -o noatime "$PWD/img" m3
echo a > m1/at
A0=$(stat -c %x m1/at)
cat m3/at >/dev/null
[ "$(stat -c %x m1/at)" = "$A0" ] || fail "a read through the noatime mountpoint changed atime"
cat m1/at >/dev/null
[ "$(stat -c %x m1/at)" != "$A0" ] || fail "a read through the relatime mountpoint left atime"
awk -v d="$PWD/m3" '$5 == d { print $6 }' /proc/self/mountinfo | grep -q noatime ||
	fail "m3 not noatime in mountinfo"
fusermount3 -u m3 || fail "fusermount3 -u m3"

# ---- refusals, by name, nothing mounted
expect_rc 32 $B fusemount "$PWD/img" m1
expect_in err "already mounted on $PWD/m1"
expect_rc 32 $B fusemount "$PWD/img" m2
expect_in err "m2: already mounted there"
expect_rc 32 $B fusemount -o ro "$PWD/img" m3
expect_in err "m3: already mounted read-write on $PWD/m1"
expect_rc 32 $B fusemount -o lazytime "$PWD/img" m3
expect_in err "option 'lazytime' is the filesystem's"
expect_rc 32 $B fusemount -o compression=zstd "$PWD/img" m3
expect_in err "option 'compression=zstd' is the filesystem's"
expect_rc 32 $B fusemount -o norebalance "$PWD/img" m3
expect_in err "option 'norebalance' is the filesystem's"
expect_rc 16 $B fusemount -o compression=nosuch "$PWD/img" m3
expect_rc 16 $B fusemount "$PWD/img" nosuchdir
expect_in err "nosuchdir: not a directory"
grep -q " $PWD/m3 " /proc/self/mountinfo && fail "a refused mount is mounted"

# ---- a file open on m2 keeps its data when m1 removes its last name
cp src.bin m1/open || fail "cp open"
exec 3< m2/open
rm m1/open
cmp -s /dev/fd/3 src.bin 2>/dev/null || { exec 3<&-; fail "open file lost its data"; }
exec 3<&-

# ---- the first goes, the second stays: writes, commands
cp src.bin m2/again || fail "cp again"
fusermount3 -u m1 || fail "fusermount3 -u m1"
sleep 0.3
[ "$(daemons)" = 1 ] || fail "the daemon ended with m2 still mounted"
cmp -s m2/again src.bin || fail "m2 after m1 went: data differs"
echo after > m2/after || fail "m2 write after m1 went"
expect_rc 0 $B fs usage --json m2
expect_rc 0 $B subvolume create m2/sv
[ -d m2/sv ] || fail "subvolume create through m2"
fusermount3 -u m2 || fail "fusermount3 -u m2"
wait_gone
fsck_clean
expect_rc 0 $B image cat img /again
cmp -s out src.bin || fail "image cat /again differs from its source"

# ---- read-only filesystem: a second mount is read-only too (as mount(8) retries)
expect_rc 0 $B fusemount -o ro "$PWD/img" m1
expect_rc 0 $B fusemount "$PWD/img" m2
expect_in err "m2: the filesystem is read-only .mounted on $PWD/m1.: mounted read-only"
touch m2/new 2>/dev/null && fail "m2 took a write on a read-only filesystem"
awk -v d="$PWD/m2" '$5 == d { print $6 }' /proc/self/mountinfo | grep -q '^ro' ||
	fail "m2 not ro in mountinfo"
[ "$(cat m2/after)" = after ] || fail "ro second mount reads"
fusermount3 -u m2 && fusermount3 -u m1 || fail "unmount ro pair"
wait_gone

# ---- SIGTERM ends every mountpoint
expect_rc 0 $B fusemount "$PWD/img" m1
expect_rc 0 $B fusemount "$PWD/img" m2
echo term > m2/term
kill -TERM $(pgrep -f "fusemount.*$PWD/img") || fail "kill"
wait_gone
grep -q "fuse.bcachefs $PWD/img " /proc/self/mountinfo &&
	fail "mounts left after SIGTERM: $(grep bcachefs /proc/self/mountinfo)"
fsck_clean
expect_rc 0 $B image cat img /term
[ "$(cat out)" = term ] || fail "the write before SIGTERM: $(cat out)"
