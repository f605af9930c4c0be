# an existing filesystem or partition table is refused without -f, and not touched
mkfs.ext4 -q -F e.img 32M >/dev/null 2>&1 || skip "mkfs.ext4 unavailable"
before=$(sha e.img)
expect_rc 1 $B format e.img
expect_in err 'e\.img'
expect_in err 'ext4'
expect_in err '--force'
[ "$(sha e.img)" = "$before" ] || fail "ext4 image was modified"
expect_rc 0 $B format -f e.img
expect_rc 0 $B show-super e.img

# our own filesystem too
expect_rc 1 $B format e.img
expect_in err 'bcachefs filesystem'

# a partition table
truncate -s 32M p.img
echo 'label: dos
,,83' | sfdisk -q p.img >/dev/null 2>&1 || skip "sfdisk unavailable"
before=$(sha p.img)
expect_rc 1 $B format p.img
expect_in err 'partition table'
[ "$(sha p.img)" = "$before" ] || fail "partitioned image was modified"

# one bad device among several: nothing is written to the good ones
truncate -s 64M good.img
before=$(sha good.img)
expect_rc 1 $B format good.img p.img
[ "$(sha good.img)" = "$before" ] || fail "good.img written although p.img was refused"
