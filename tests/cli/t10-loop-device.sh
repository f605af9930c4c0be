# a real block device: format and show-super on a loop device
[ "$(id -u)" = 0 ] || skip "needs root for losetup"
truncate -s 128M a.img
loop=$(losetup -f --show a.img 2>/dev/null) || skip "no loop devices"
trap 'losetup -d "$loop"' EXIT
expect_rc 0 $B format "$loop"
expect_rc 0 $B show-super --json "$loop"
jq -e '.members[0].size > 100000000' out >/dev/null || fail "size from BLKGETSIZE64: $(cat out)"
# reformat refused, then forced
expect_rc 1 $B format "$loop"
expect_rc 0 $B format -f --block-size=4k "$loop"
# the image file shows the same superblock
expect_rc 0 $B show-super a.img

# the exclusive open covers both names of one image: while a writer holds
# the image file, its loop device is refused for writing, and the other way
# round (the backing file, from sysfs, is locked as well)
holder=
trap 'mountpoint -q mnt && umount mnt; [ -z "$holder" ] || wait "$holder"; losetup -d "$loop"' EXIT
mkdir mnt
# hold NAME: a fusemount of NAME (a read-write open of it) until release
hold() {
	$B fusemount -f "$1" mnt 2>hold.out &
	holder=$!
	for i in $(seq 100); do
		mountpoint -q mnt && return 0
		kill -0 "$holder" 2>/dev/null || fail "holder could not open $1: $(cat hold.out)"
		sleep 0.1
	done
	fail "holder did not mount $1"
}
release() { umount mnt; wait "$holder"; holder=; }
printf 'hello\n' > f
hold a.img
before=$(sha a.img)
expect_rc 1 $B image put "$loop" f /f
expect_in err "^bcachefs image( put)?: $loop: (device is open elsewhere|mounted \(fusemount\))"
expect_rc 8 $B fsck -y -f "$loop"
expect_in err "$loop: device is open elsewhere"
[ "$(sha a.img)" = "$before" ] || fail "image written through its loop device while held"
release
expect_rc 1 $B image stat a.img /f
hold "$loop"
expect_rc 1 $B image put a.img f /f
expect_in err "^bcachefs image( put)?: a.img: (device is open elsewhere|mounted \(fusemount\))"
release
# reading is not a write: allowed; and once released, writing works
expect_rc 0 $B image put "$loop" f /f
expect_rc 0 $B fsck -n -f a.img

# a 4k-sector device refuses a block size below its logical block size
truncate -s 64M b.img
loop4k=$(losetup -f --show --sector-size 4096 b.img 2>/dev/null) || { echo "no 4k loop device; part skipped"; exit 0; }
trap 'losetup -d "$loop"; losetup -d "$loop4k"' EXIT
before=$(sha b.img)
expect_rc 16 $B format --block-size=512 "$loop4k"
expect_in err 'logical block size'
[ "$(sha b.img)" = "$before" ] || fail "4k device written"
expect_rc 0 $B format --block-size=4k "$loop4k"
