# a destroyed primary copy (and layout) must not stop the filesystem being found
expect_rc 0 $B format --fs-size=64M a.img
expect_rc 0 $B show-super --json a.img
uuid=$(jq -r '.uuid' out)
# zero the primary copy at sector 8
dd if=/dev/zero of=a.img bs=512 seek=8 count=8 conv=notrunc status=none
expect_rc 0 $B show-super a.img
expect_in out 'sector 8: +BAD'
expect_in out 'sector 136: +valid, seq [0-9]+ \(used\)'
expect_rc 0 $B show-super --json a.img
[ "$(jq -r '.uuid' out)" = "$uuid" ] || fail "uuid from backup"
# flip one byte inside copy 1's fields: checksum catches it
dd if=/dev/zero of=a.img bs=512 seek=7 count=1 conv=notrunc status=none
expect_rc 0 $B show-super a.img
expect_in out 'Layout \(sector 7\): +BAD'
printf '\377' | dd of=a.img bs=1 seek=$((136 * 512 + 600)) conv=notrunc status=none
expect_rc 0 $B show-super a.img
expect_in out 'sector 136: +BAD.*(checksum|csum)'
expect_in out 'valid, seq [0-9]+ \(used\)'
# all copies gone: a clear error, exit 1
size=$(stat -c %s a.img)
dd if=/dev/zero of=a.img bs=512 seek=$((size / 512 - 128)) count=128 conv=notrunc status=none
expect_rc 1 $B show-super a.img
expect_in err 'a\.img: no bcachefs superblock found'
# not a bcachefs device at all
head -c 1M /dev/zero > z.img
expect_rc 1 $B show-super z.img
expect_rc 1 $B show-super nonexistent.img
expect_in err 'nonexistent\.img'
