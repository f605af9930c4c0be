# three devices with per-device options; every device carries the whole superblock
truncate -s 128M d0.img d1.img
expect_rc 0 $B format --label=ssd.fast --durability=2 d0.img --label=hdd --discard d1.img \
	--fs-size=96M --bucket-size=512k d2.img --metadata-replicas=2 --data-replicas=2 \
	--foreground-target=ssd --background-target=hdd
[ "$(stat -c %s d2.img)" = $((96 << 20)) ] || fail "d2 not created"
uuid=
for i in 0 1 2; do
	expect_rc 0 $B show-super --json d$i.img
	[ "$(jq '.device_index' out)" = $i ] || fail "dev index of d$i"
	[ "$(jq '.nr_devices' out)" = 3 ] || fail "nr devices on d$i"
	u=$(jq -r '.uuid' out)
	[ -z "$uuid" ] || [ "$u" = "$uuid" ] || fail "uuid differs on d$i"
	uuid=$u
done
jq -e '.members[0].label == "ssd.fast" and .members[0].durability == 2' out >/dev/null || fail "m0 $(cat out)"
jq -e '.members[1].label == "hdd" and .members[1].discard == true' out >/dev/null || fail "m1"
jq -e '.members[2].label == "hdd" and .members[2].bucket_size == 524288' out >/dev/null || fail "m2"
jq -e '.options.foreground_target == "ssd" and .options.background_target == "hdd"' out >/dev/null || fail "targets"
jq -e '.options.metadata_replicas == 2 and .options.data_replicas == 2' out >/dev/null || fail "replicas"
# a journal on every device
jq -e '[.members[].journal_buckets > 0] | all' out >/dev/null || fail "journal per device"
