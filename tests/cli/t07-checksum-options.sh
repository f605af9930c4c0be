# checksum, compression and replica options are validated and recorded
for c in crc32c crc64 xxhash64; do
	expect_rc 0 $B format -f --fs-size=32M --metadata-checksum=$c --data-checksum=$c a.img
	expect_rc 0 $B show-super --json a.img
	jq -e --arg c $c '.superblock_checksum == $c and .options.metadata_checksum == $c and
		.options.data_checksum == $c' out >/dev/null || fail "checksum $c: $(cat out)"
done
expect_rc 0 $B format -f --fs-size=32M --compression=zstd:3 --background-compression=lz4 \
	--encoded-extent-max=256k --errors=continue --inodes-32bit a.img
expect_rc 0 $B show-super --json a.img
jq -e '.options.compression == "zstd:3" and .options.background_compression == "lz4" and
	.options.encoded_extent_max == 262144 and .options.errors == "continue" and
	.options.inodes_32bit == true' out >/dev/null || fail "options: $(jq .options out)"
# block and node sizes
expect_rc 0 $B format -f --fs-size=64M --block-size=512 --btree-node-size=64k a.img
expect_rc 0 $B show-super a.img
[ "$(field 'Block size')" = 512 ] || fail "block size $(field 'Block size')"
[ "$(field 'Btree node size')" = 64k ] || fail "node size"
