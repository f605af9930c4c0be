# Sequential writes through the mount, one copy and two (io.c
# bch_data_write_plan_run(): a planned write's units are written one by
# one, and the writeback of each run of units lying back to back on a
# device is started once, after the run's writes; encrypted, the after job
# starts every unit written by then):
#  - one image: a 24 MiB file in 1 MiB writes, rewritten in part with
#    768 KiB and 256 KiB writes (partial runs), and one appended in 3 MiB
#    writes (a write of several chunks);
#  - two images with --replicas=2: the same, each unit on both devices (a
#    run must be back to back on every copy).
# Each file reads back after a remount, and fsck is clean.  A unit written
# to the wrong place or left out reads back wrong or fails its checksum.
fuse_part "sequential writes through the mount" || exit 0
head -c 25165824 /dev/urandom > big
head -c 9437184 /dev/urandom > app
cp big want
dd if=app of=want bs=768K count=2 seek=$((5 * 4 / 3)) conv=notrunc status=none
dd if=app of=want bs=256K count=7 skip=9 seek=52 conv=notrunc status=none
mkdir m
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT

# writes DEVS: the writes through a mount of DEVS, read back after a remount
writes() {
	expect_rc 0 $B fusemount "$1" m
	mountpoint -q m || fail "$1: not mounted"
	(
		ulimit -f 200000
		dd if=big of=m/big bs=1M status=none &&
		dd if=app of=m/big bs=768K count=2 seek=$((5 * 4 / 3)) conv=notrunc status=none &&
		dd if=app of=m/big bs=256K count=7 skip=9 seek=52 conv=notrunc status=none &&
		dd if=app of=m/app bs=3M status=none
	) || fail "$1: writes through the mount"
	fusermount3 -u m || fail "$1: unmount"
	expect_rc 0 $B fsck -n $(echo "$1" | tr : ' ')
	expect_rc 0 $B fusemount "$1" m
	mountpoint -q m || fail "$1: not mounted again"
	cmp want m/big || fail "$1: big differs after the remount"
	cmp app m/app || fail "$1: app differs after the remount"
	fusermount3 -u m || fail "$1: unmount"
}

expect_rc 0 $B format -q --fs-size=96M one.img
writes "$PWD/one.img"
truncate -s 96M a.img b.img
expect_rc 0 $B format -q --replicas=2 a.img b.img
writes "$PWD/a.img:$PWD/b.img"
