# naming a filesystem (fsname.h): member devices as separate arguments or
# joined by ':'; UUID=<uuid> found by scanning block devices (two loop
# devices of our own; a copy of a member claiming the same index is
# refused); UUID= not found, malformed, or with other arguments; a plain
# directory and a nonexistent path refused; a fusemount's mountpoint and
# UUID= of a mounted filesystem reach the daemon or are refused by the
# commands that read the devices.

expect_rc 0 $B format -q --fs-size=64M a.img b.img
sum_a=$(sha a.img) sum_b=$(sha b.img)

# ---- devices: separate arguments and DEV1:DEV2, same result
for fs in "a.img b.img" "a.img:b.img" "a.img:b.img:"; do
	expect_rc 0 $B show-super $fs
	[ "$(grep -Ec '^Device: +(a|b)\.img$' out)" = 2 ] || fail "show-super $fs: $(cat out)"
	expect_rc 0 $B fsck -n -f $fs
	expect_rc 0 $B list -b inodes $fs
	expect_in out '^0:4096:0 inode mode 40755'
	expect_rc 0 $B list-journal $fs
	expect_in out '^entry seq'
	expect_rc 0 $B fs usage --json $fs
	expect_rc 0 jq -e '(.devices | length) == 2' out
done
expect_rc 0 $B show-super --json a.img:b.img
expect_rc 0 jq -e '(. | length) == 2 and .[1].Device == "b.img"' out
[ "$(sha a.img)$(sha b.img)" = "$sum_a$sum_b" ] || fail "reading wrote to the images"

# ---- a nonexistent path: said so, exit 1 (fsck: 8)
expect_rc 8 $B fsck -n a.img:nope.img
expect_in err '^bcachefs fsck: nope\.img: No such file or directory$'
for c in "list" "list-journal" "fs usage" "show-super"; do
	expect_rc 1 $B $c nope.img
	expect_in err "^bcachefs $c: nope\\.img: No such file or directory$"
done
expect_rc 1 $B fs usage nope.d/

# ---- a plain directory: not a bcachefs mount
mkdir d
for c in "list" "list-journal" "fs usage" "show-super"; do
	expect_rc 1 $B $c d
	expect_in err "^bcachefs $c: d: not a bcachefs mount"
done
expect_rc 8 $B fsck -n d
expect_in err '^bcachefs fsck: d: not a bcachefs mount'
expect_rc 16 $B list a.img d
expect_in err 'd: is a directory'

# ---- UUID=: malformed, mixed with devices, not found
expect_rc 16 $B show-super UUID=not-a-uuid
expect_in err 'UUID=not-a-uuid: not a UUID'
expect_rc 16 $B fsck -n UUID=0123
expect_rc 16 $B list a.img UUID=01234567-89ab-cdef-0123-456789abcdef
expect_in err 'names the whole filesystem'
# image files are not scanned: the images' own UUID is not found without loop devices
U=$($B show-super a.img | sed -n 's/^External UUID: *//p')
echo "filesystem UUID $U"
if ! losetup -j "$PWD/a.img" | grep -q .; then
	expect_rc 1 $B show-super UUID=$U
	expect_in err "^bcachefs show-super: no device with filesystem UUID=$U found \\(image files are not scanned: name them\\)$"
fi
expect_rc 1 $B fs usage UUID=ffffffff-0000-4000-8000-0123456789ab
expect_in err 'no device with filesystem UUID=ffffffff-0000-4000-8000-0123456789ab found'

# ---- UUID= with two loop devices of our own
[ "$(id -u)" = 0 ] && command -v losetup >/dev/null || skip "UUID= on loop devices needs root and losetup"
L1=$(losetup -f --show a.img 2>/dev/null) || skip "losetup not possible here"
loops="$L1"
mnt=$PWD/mnt
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null; fusermount3 -uz "${mnt%/mnt}/d" 2>/dev/null; for l in $loops; do losetup -d "$l"; done' EXIT
L2=$(losetup -f --show b.img) || fail "losetup b.img"
loops="$loops $L2"
echo "loop devices $L1 $L2"

UU=$(echo "$U" | tr a-f A-F)
for u in "$U" "$UU"; do
	expect_rc 0 $B show-super UUID=$u
	[ "$(grep -E '^Device: ' out | awk '{print $2}' | tr '\n' ' ')" = "$L1 $L2 " ] ||
		fail "UUID=$u: want $L1 $L2 in member order: $(grep ^Device: out)"
done
expect_rc 0 $B fsck -n -f UUID=$U
expect_in out "^$L1:$L2: 0 problems found"
expect_rc 0 $B list -b inodes UUID=$U
expect_rc 0 $B fs usage --json UUID=$U
expect_rc 0 jq -e '(.devices | length) == 2' out

# a copy of member 0 on a third loop device: two devices claim member 0
cp a.img c.img
L3=$(losetup -f --show c.img) || fail "losetup c.img"
loops="$loops $L3"
expect_rc 8 $B fsck -n UUID=$U
expect_in err "UUID=$U: $L1 and $L3 both claim to be member 0|UUID=$U: $L3 and $L1 both claim to be member 0"
losetup -d "$L3"
loops="$L1 $L2"
expect_rc 0 $B show-super UUID=$U

# ---- mounted by UUID=: the daemon answers or the command refuses
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or fusermount3"
mkdir mnt
$B fusemount UUID=$U mnt 2>fuse.err || fail "fusemount UUID=$U: $(cat fuse.err)"
grep -q "^$L1:$L2 $mnt fuse.bcachefs" /proc/mounts || fail "mount source: $(grep bcachefs /proc/mounts)"
echo hello > mnt/f
for fs in "UUID=$U" "mnt" "$L2"; do
	expect_rc 0 $B fs usage --json $fs
	expect_rc 0 jq -e '(.devices | length) == 2' out
	expect_rc 8 $B fsck -n $fs
	expect_in err "^bcachefs fsck: $mnt: mounted \\(fusemount\\): unmount it first$"
	expect_rc 1 $B list $fs
	expect_in err "^bcachefs list: $mnt: mounted"
done
# the image files behind the loop devices the daemon holds: mounted too
expect_rc 0 $B fs usage --json a.img
expect_rc 0 jq -e '(.devices | length) == 2' out
expect_rc 8 $B fsck -n b.img:a.img
expect_in err "^bcachefs fsck: $mnt: mounted \\(fusemount\\): unmount it first$"
expect_rc 0 $B show-super mnt
[ "$(grep -Ec '^Device: ' out)" = 2 ] || fail "show-super mnt: $(cat out)"
expect_rc 32 $B fusemount UUID=$U mnt
expect_in err "^bcachefs fusemount: UUID=$U: already mounted on $mnt$"
# elsewhere: the daemon mounts it there too (t70), found by UUID as well
expect_rc 0 $B fusemount UUID=$U d
[ "$(cat d/f)" = hello ] || fail "second mountpoint: $(ls d)"
fusermount3 -u d || fail "fusermount3 -u d"
fusermount3 -u mnt || fail "fusermount3 -u"
expect_rc 0 $B fsck -n -f UUID=$U
expect_rc 0 $B fsck -n -f a.img:b.img
