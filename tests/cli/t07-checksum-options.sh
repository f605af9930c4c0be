# checksum, compression and replica options are validated and recorded
for c in crc32c crc64 xxhash64; do
	expect_rc 0 $B format -f --fs-size=32M --metadata-checksum=$c --data-checksum=$c a.img
	expect_rc 0 $B show-super --json a.img
	jq -e --arg c $c '."Superblock checksum" == $c and .Options.metadata_checksum == $c and
		.Options.data_checksum == $c' out >/dev/null || fail "checksum $c: $(cat out)"
done
expect_rc 0 $B format -f --fs-size=32M --compression=zstd:3 --background-compression=lz4 \
	--encoded-extent-max=256k --errors=continue --inodes-32bit a.img
expect_rc 0 $B show-super --json a.img
jq -e '.Options.compression == "zstd:3" and .Options.background_compression == "lz4" and
	.Options.encoded_extent_max == 262144 and .Options.errors == "continue" and
	.Options.inodes_32bit == true' out >/dev/null || fail "options: $(jq .Options out)"
# block and node sizes
expect_rc 0 $B format -f --fs-size=64M --block-size=512 --btree-node-size=64k a.img
expect_rc 0 $B show-super a.img
[ "$(field 'Block size')" = 512 ] || fail "block size $(field 'Block size')"
[ "$(field 'Btree node size')" = 64k ] || fail "node size"
