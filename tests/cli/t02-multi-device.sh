# three devices with per-device options; every device carries the whole superblock
truncate -s 128M d0.img d1.img
expect_rc 0 $B format --label=ssd.fast --durability=2 d0.img --label=hdd --discard d1.img \
	--fs-size=96M --bucket-size=512k d2.img --metadata-replicas=2 --data-replicas=2 \
	--foreground-target=ssd --background-target=hdd
[ "$(stat -c %s d2.img)" = $((96 << 20)) ] || fail "d2 not created"
uuid=
for i in 0 1 2; do
	expect_rc 0 $B show-super --json d$i.img
	[ "$(jq '."Device index"' out)" = $i ] || fail "dev index of d$i"
	[ "$(jq '.Devices' out)" = 3 ] || fail "nr devices on d$i"
	u=$(jq -r '."External UUID"' out)
	[ -z "$uuid" ] || [ "$u" = "$uuid" ] || fail "uuid differs on d$i"
	uuid=$u
done
jq -e '.Members[0].Label == "ssd.fast" and .Members[0].Durability == 2' out >/dev/null || fail "m0 $(cat out)"
jq -e '.Members[1].Label == "hdd" and .Members[1].Discard == true' out >/dev/null || fail "m1"
jq -e '.Members[2].Label == "hdd" and .Members[2]."Bucket size" == 524288' out >/dev/null || fail "m2"
jq -e '.Options.foreground_target == "ssd" and .Options.background_target == "hdd"' out >/dev/null || fail "targets"
jq -e '.Options.metadata_replicas == 2 and .Options.data_replicas == 2' out >/dev/null || fail "replicas"
# a journal on every device
jq -e '[.Members[]."Journal buckets" > 0] | all' out >/dev/null || fail "journal per device"
