# a real block device: format and show-super on a loop device
[ "$(id -u)" = 0 ] || skip "needs root for losetup"
truncate -s 128M a.img
loop=$(losetup -f --show a.img 2>/dev/null) || skip "no loop devices"
trap 'losetup -d "$loop"' EXIT
expect_rc 0 $B format "$loop"
expect_rc 0 $B show-super --json "$loop"
jq -e '.Members[0].Size > 100000000' out >/dev/null || fail "size from BLKGETSIZE64: $(cat out)"
# reformat refused, then forced
expect_rc 1 $B format "$loop"
expect_rc 0 $B format -f --block-size=4k "$loop"
# the image file shows the same superblock
expect_rc 0 $B show-super a.img

# a 4k-sector device refuses a block size below its logical block size
truncate -s 64M b.img
loop4k=$(losetup -f --show --sector-size 4096 b.img 2>/dev/null) || { echo "no 4k loop device; part skipped"; exit 0; }
trap 'losetup -d "$loop"; losetup -d "$loop4k"' EXIT
before=$(sha b.img)
expect_rc 16 $B format --block-size=512 "$loop4k"
expect_in err 'logical block size'
[ "$(sha b.img)" = "$before" ] || fail "4k device written"
expect_rc 0 $B format --block-size=4k "$loop4k"
