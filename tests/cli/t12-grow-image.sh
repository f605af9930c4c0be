# --fs-size extends an existing smaller image file; a larger file keeps its size
truncate -s 10M a.img
expect_rc 0 $B format --fs-size=64M a.img
[ "$(stat -c %s a.img)" = $((64 << 20)) ] || fail "not grown: $(stat -c %s a.img)"
truncate -s 256M b.img
expect_rc 0 $B format --fs-size=64M b.img
[ "$(stat -c %s b.img)" = $((256 << 20)) ] || fail "b.img size changed"
expect_rc 0 $B show-super --json b.img
jq -e '.members[0].size <= 67108864' out >/dev/null || fail "fs bigger than --fs-size: $(jq .members out)"
