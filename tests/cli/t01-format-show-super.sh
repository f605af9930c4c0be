# format one image (created by --fs-size), show-super in text and JSON
expect_rc 0 $B format --fs-size=64M -L mylabel a.img
[ "$(stat -c %s a.img)" = $((64 << 20)) ] || fail "image not created at 64M"
expect_in out 'UUID'
expect_rc 0 $B show-super a.img
[ "$(field Label)" = mylabel ] || fail "label: $(field Label)"
[ "$(field Version)" = 3 ] || fail "version $(field Version), want 3"
[ "$(field Devices)" = 1 ] || fail "devices"
[ "$(field 'Superblock checksum')" = crc32c ] || fail "csum"
[ "$(field 'Block size')" = 4k ] || fail "block size"
[ "$(field 'Btree node size')" = 256k ] || fail "btree node size"
expect_in out 'Journal buckets: +[0-9]+'
expect_in out 'sector 8: +valid, seq [0-9]+ \(used\)'
expect_in out 'sector 136: +valid'
expect_not_in out 'BAD'
expect_rc 0 $B show-super --json a.img
jq -e '.label == "mylabel" and (.members | length) == 1 and .members[0].bucket_size > 0' out >/dev/null ||
	fail "json: $(cat out)"
jq -e '[.superblock_copies[] | select(.valid)] | length == 3' out >/dev/null || fail "json copies"
# journal buckets reserved and counted in the member
jb=$(jq '.members[0].journal_buckets' out)
[ "$jb" -ge 4 ] || fail "journal buckets $jb"
