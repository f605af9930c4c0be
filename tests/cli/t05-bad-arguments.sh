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
# more copies than devices to hold them: refused before any image is made
bad --replicas=2 --fs-size=256M new.img
expect_in err 'data_replicas=2 needs 2 devices of durability 1 or more'
bad --data-replicas=2 a.img
expect_in err 'data_replicas=2 needs 2 devices'
# a device of durability 2 still holds two copies of metadata at most
bad --durability=2 --metadata-replicas=3 a.img
expect_in err 'metadata_replicas=3 needs 2 devices .*two copies per device at most'
# small nodes with buckets too small for a 1 MiB write's keys, or for the journal
bad --btree-node-size=4k --bucket-size=16k a.img
expect_in err 'bucket size 16k is too small .*half a btree node.*--bucket-size=64k'
bad --btree-node-size=16k --bucket-size=16k a.img
expect_in err 'journal entry'
truncate -s 64M b.img
bsum=$(sha b.img)
bad --btree-node-size=4k --bucket-size=64k --replicas=2 a.img b.img
expect_in err 'use --bucket-size=128k'
[ "$(sha b.img)" = "$bsum" ] || fail "b.img modified"
bad --replicas=2 a.img --durability=0 b.img
expect_in err 'not counting durability 0'
[ "$(sha b.img)" = "$bsum" ] || fail "b.img modified"
bad --block-size=16k --btree-node-size=32k --bucket-size=32k a.img
expect_in err 'at least 4 blocks'
bad --btree-node-size=4k --encoded-extent-max=4k a.img
bad --btree-node-size=4k --bucket-size=16k --fs-size=256M new.img
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

# small nodes without --bucket-size get buckets that work: format, a 4 MiB
# write (4 transactions of 1 MiB), a clean fsck (these failed with "journal
# full: nothing left to reclaim" when the bucket was picked from the size alone)
head -c 4194304 /dev/zero | tr '\0' 'x' > big
for ns in 4k 8k 16k; do
	rm -f s.img
	expect_rc 0 $B format -q --fs-size=256M --btree-node-size=$ns s.img
	expect_rc 0 $B image put s.img big /big
	expect_rc 0 $B fsck -n -f s.img
	expect_rc 0 $B image cat s.img /big
	cmp -s out big || fail "$ns nodes: /big reads back different"
done
