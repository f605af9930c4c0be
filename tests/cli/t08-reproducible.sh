# -U and SOURCE_DATE_EPOCH: the same command gives a byte-identical image
plain_only "an encrypted format draws a random key and nonces: no two images alike"
u=2c1a8b5e-77f1-4c1b-9d7e-0d1f5e7a9b01
expect_rc 0 env SOURCE_DATE_EPOCH=1700000000 $B format -q -U $u --fs-size=64M a.img
expect_rc 0 env SOURCE_DATE_EPOCH=1700000000 $B format -q -U $u --fs-size=64M b.img
cmp -s a.img b.img || fail "images differ: $(cmp a.img b.img)"
expect_rc 0 $B show-super --json a.img
[ "$(jq -r '.uuid' out)" = $u ] || fail "uuid not honoured"
jq -e '.created | startswith("2023-11-14T")' out >/dev/null || fail "time not from SOURCE_DATE_EPOCH"
# without -U, two formats differ (random UUIDs)
expect_rc 0 $B format -q --fs-size=64M c.img
expect_rc 0 $B format -q --fs-size=64M d.img
! cmp -s c.img d.img || fail "random formats are identical"
