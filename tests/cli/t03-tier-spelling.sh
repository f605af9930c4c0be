# the 2015 spelling: -C DEV and --tier N map onto labels tierN and targets
truncate -s 128M ssd.img hdd.img
expect_rc 0 $B format -C ssd.img --tier 1 -C hdd.img
expect_rc 0 $B show-super --json hdd.img
jq -e '.members[0].label == "tier0" and .members[1].label == "tier1"' out >/dev/null || fail "labels $(cat out)"
jq -e '.options.foreground_target == "tier0" and .options.promote_target == "tier0" and
       .options.metadata_target == "tier0" and .options.background_target == "tier1"' out >/dev/null ||
	fail "targets: $(jq .options out)"
# a single -C device: no tiers, no targets
truncate -s 64M one.img
expect_rc 0 $B format -C one.img
expect_rc 0 $B show-super --json one.img
jq -e '.options.foreground_target == "none" and .members[0].label == null' out >/dev/null || fail "single"
# metadata goes to the metadata target: tier 0 here, "hdd" (and hdd.*) below
expect_rc 0 $B list -m nodes -b test ssd.img:hdd.img
expect_in out 'ptr 0:'
truncate -s 128M a.img b.img
expect_rc 0 $B format --label=ssd a.img --label=hdd.slow b.img --metadata-target=hdd
expect_rc 0 $B kv a.img:b.img put 1:1 x
expect_rc 0 $B list -m nodes -b test a.img:b.img
expect_in out 'ptr 1:'
expect_not_in out 'ptr 0:'
