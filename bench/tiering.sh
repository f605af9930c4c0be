#!/bin/sh
# bench/tiering.sh: promote.  An SSD image in front of a "hard disk" image
# slowed by the device layer's test hook (BCACHEFS_TEST_DEVICE_DELAY, DELAY
# microseconds a request, default 5000).  A working set of SET bytes (default
# 64M, one file of random bytes) is written to the SSD, moved to the HDD by
# `bcachefs data rebalance --wait` (background_target=hdd; until that command
# exists, build/rebalance-run, see tierlib.sh), then read twice
# through fusemount with caches dropped before each read: with
# promote_target=ssd the first read adds cached copies on the SSD and the
# second is served from them; without it both come from the HDD.  Prints
# MB/s of each read, the per-device reads (counters) behind them, and the
# ratios; goal (issue 19): second read with promote >= 5x without.
# PLACE=direct writes the set straight to the HDD (foreground_target=hdd)
# instead of through rebalance: promote measured without `data rebalance`.
. "$(dirname "$0")/tierlib.sh"
SET=${SET:-64M}
DELAY=${DELAY:-5000}
set_bytes=$(bytes "$SET")
need_root_fuse
PLACE=${PLACE:-rebalance}
[ "$PLACE" = direct ] || need_rebalance_cmd

head -c "$set_bytes" /dev/urandom > "$dir/set"
cd "$dir"

# run MODE: sets r1_ns r2_ns hdd1 ssd2 hdd2 (reads per device per pass)
run() {
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
				cached=$(dev_key c.json 0 cached.bytes)
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
echo "working set $SET ($set_bytes bytes, one file, placed on hdd by: $PLACE), caches dropped before each read"
cached=0
run promote
p_r1=$r1_ns p_r2=$r2_ns p_ssd1=$ssd1 p_hdd1=$hdd1 p_ssd2=$ssd2 p_hdd2=$hdd2 p_cached=$cached p_reb=$reb_ms
run none
n_r1=$r1_ns n_r2=$r2_ns n_ssd1=$ssd1 n_hdd1=$hdd1 n_ssd2=$ssd2 n_hdd2=$hdd2 n_reb=$reb_ms

printf '%-22s %10s %10s %12s %12s %14s\n' "promote_target" "read 1" "read 2" "reads 1 s/h" "reads 2 s/h" "read2/read1"
printf '%-22s %7s MB/s %5s MB/s %12s %12s %14s\n' "ssd" "$(mbs "$set_bytes" "$p_r1")" "$(mbs "$set_bytes" "$p_r2")" \
	"$p_ssd1/$p_hdd1" "$p_ssd2/$p_hdd2" "$(ratio "$p_r2" "$p_r1")"
printf '%-22s %7s MB/s %5s MB/s %12s %12s %14s\n' "(none)" "$(mbs "$set_bytes" "$n_r1")" "$(mbs "$set_bytes" "$n_r2")" \
	"$n_ssd1/$n_hdd1" "$n_ssd2/$n_hdd2" "$(ratio "$n_r2" "$n_r1")"
echo "cached bytes on ssd after the first read with promote: $p_cached"
[ "$PLACE" = direct ] || echo "moving the set to hdd ($REBALANCE_VIA): ${p_reb} ms, ${n_reb} ms"
echo "hot set, promoted vs not (second read, goal >= 5x): $(ratio "$p_r2" "$n_r2")x"
[ "$p_hdd2" -lt "$p_hdd1" ] ||
	echo "NOTE: the second read with promote still read hdd as often ($p_hdd2 vs $p_hdd1 requests): no promote"
