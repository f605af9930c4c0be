#!/bin/sh
# bench/tiering.sh: promote.  An SSD image in front of a "hard disk" image
# slowed by the device layer's test hook (BCACHEFS_TEST_DEVICE_DELAY, DELAY
# microseconds a request, default 5000).  A working set of SET bytes (default
# 64M, one file of random bytes) is put on the HDD, then read twice through
# fusemount with caches dropped before each read.  Three rows:
#   promote   written straight to the HDD (foreground_target=hdd),
#             promote_target=ssd: the first read adds cached copies on the
#             SSD, the second is served from them
#   none      the same without promote_target: both reads from the HDD
#   rebalance written to the SSD and moved to the HDD by rebalance (`data
#             rebalance --wait`) with promote_target=ssd: the moved data may stay
#             cached on the SSD (demote), so even the first read is fast
# Prints MB/s of each read, the per-device read requests behind them (I/O
# counters, ssd/hdd), and the ratios; goal (issue 19): the second read,
# promote against none, >= 5x.
. "$(dirname "$0")/tierlib.sh"
SET=${SET:-64M}
DELAY=${DELAY:-5000}
set_bytes=$(bytes "$SET")
need_root_fuse
have_rebalance=$(need_rebalance_cmd >/dev/null && echo 1 || true)
[ -z "$have_rebalance" ] || need_rebalance_cmd

head -c "$set_bytes" /dev/urandom > "$dir/set"
cd "$dir"

# run MODE PLACE: sets r1_ns r2_ns ssd1 hdd1 ssd2 hdd2 (reads per device per
# pass), cached (bytes of cached copies on the SSD after the first read), reb_ms
run() {
	PLACE=$2
	rm -f ssd.img hdd.img
	truncate -s "$(( set_bytes * 4 + (256 << 20) ))" ssd.img
	truncate -s "$(( set_bytes * 4 + (512 << 20) ))" hdd.img
	promote=
	[ "$1" = promote ] && promote="--promote-target=ssd"
	fg=ssd
	[ "$PLACE" = direct ] && fg=hdd
	"$B" format -q --label ssd.a ssd.img --label hdd.b hdd.img \
		--foreground-target=$fg --background-target=hdd $promote >/dev/null
	"$B" image put ssd.img:hdd.img set /set
	t0=$(now_ns)
	[ "$PLACE" = direct ] || $REBALANCE ssd.img:hdd.img >/dev/null 2>rebalance.err ||
		die "$REBALANCE_VIA: $(cat rebalance.err)"
	reb_ms=$(( ($(now_ns) - t0) / 1000000 ))
	usage_json ssd.img:hdd.img > u0.json
	on_hdd=$(dev_key u0.json 1 user.bytes)
	[ "$on_hdd" -ge "$set_bytes" ] ||
		die "$1: after rebalance --wait only $on_hdd of $set_bytes bytes are on hdd"

	BCACHEFS_TEST_DEVICE_DELAY="$dir/hdd.img=$DELAY" mount_fs ssd.img:hdd.img mnt
	for pass in 1 2; do
		drop_caches
		usage_json mnt > before.json
		t0=$(now_ns)
		cmp mnt/set set || die "$1: read $pass: the file differs"
		t1=$(now_ns)
		usage_json mnt > after.json
		eval "r${pass}_ns=$((t1 - t0))"
		eval "ssd$pass=$(( $(dev_key after.json 0 reads) - $(dev_key before.json 0 reads) ))"
		eval "hdd$pass=$(( $(dev_key after.json 1 reads) - $(dev_key before.json 1 reads) ))"
		if [ "$pass" = 1 ] && [ -n "$promote" ]; then
			# promote may write its copies in the background: wait until
			# the whole set is cached, or nothing more came for 3 s
			last=-1 still=0
			while [ "$still" -lt 30 ]; do
				usage_json mnt > c.json
				cached=$(dev_key c.json 0 cached_data)
				[ "$cached" -ge "$set_bytes" ] && break
				if [ "$cached" = "$last" ]; then still=$((still + 1)); else still=0; fi
				last=$cached
				sleep 0.1
			done
		fi
	done
	umount_fs
}

echo "tiering: promote.  hdd.img delayed ${DELAY} us per request (BCACHEFS_TEST_DEVICE_DELAY),"
echo "working set $SET ($set_bytes bytes, one file), caches dropped before each read"
printf '%-10s %12s %12s %12s %12s %12s %12s\n' "" "read 1" "read 2" "reads 1 s/h" "reads 2 s/h" "read2/read1" "ssd cached"
row() {
	printf '%-10s %7s MB/s %7s MB/s %12s %12s %12s %12s\n' "$1" "$(mbs "$set_bytes" "$r1_ns")" \
		"$(mbs "$set_bytes" "$r2_ns")" "$ssd1/$hdd1" "$ssd2/$hdd2" "$(ratio "$r2_ns" "$r1_ns")" "$cached"
}
cached=-
run promote direct
row promote
p_r2=$r2_ns p_hdd1=$hdd1 p_hdd2=$hdd2
cached=-
run none direct
row none
n_r2=$r2_ns
if [ -n "$have_rebalance" ]; then
	cached=-
	run promote rebalance
	row rebalance
	echo "rebalance row: the set moved to hdd by $REBALANCE_VIA in ${reb_ms} ms"
else
	echo "rebalance row: SKIP: no 'data rebalance' command"
fi
echo "hot set, promoted vs not (second read, goal >= 5x): $(ratio "$p_r2" "$n_r2")x"
[ "$p_hdd2" = 0 ] || [ "$p_hdd2" -lt "$p_hdd1" ] ||
	echo "NOTE: the second read with promote still read hdd as often ($p_hdd2 vs $p_hdd1 requests): no promote"
