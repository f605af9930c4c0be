# usage errors exit 16 with a message and write nothing
truncate -s 64M a.img
before=$(sha a.img)
bad() {
	expect_rc 16 $B format "$@"
	[ -s err ] || fail "no message for: $*"
	[ "$(sha a.img)" = "$before" ] || fail "a.img modified by: $*"
	[ ! -e new.img ] || fail "new.img created by: $*"
}
bad --block-size=3000 a.img
bad --block-size=128k a.img
bad --btree-node-size=3k a.img
bad --bucket-size=5000 a.img
bad --block-size=64k --btree-node-size=32k a.img
bad --bucket-size=4k --btree-node-size=256k a.img
bad --metadata-replicas=9 a.img
bad --data-replicas=0 a.img
bad --compression=rar a.img
bad --metadata-checksum=md5 a.img
bad --durability=7 a.img
bad --no-such-option a.img
bad -U not-a-uuid a.img
bad -L 0123456789012345678901234567890123 a.img
bad --foreground-target=nosuchlabel a.img
bad --fs-size=12q new.img
bad
expect_in err 'no devices'
bad a.img a.img
# --help is not an error
expect_rc 0 $B format --help
expect_in out 'Usage: bcachefs format'
# failures that are not usage errors exit 1 and create nothing
expect_rc 1 $B format missing.img
expect_in err 'missing\.img'
[ ! -e missing.img ] || fail "missing.img created"
expect_rc 1 $B format --fs-size=1M tiny.img
expect_in err 'tiny\.img'
expect_in err 'small'
