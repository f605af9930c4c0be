#!/bin/sh
# bench/fuse-latency.sh: foreground 4 KiB write latency through fusemount
# while rebalance moves data in the daemon's background thread, against
# idle.  Two devices, ssd.img and hdd.img (no delay), foreground_target=ssd.
# Before mounting, BIG bytes (default 1G, random) are put on the SSD offline.
# Idle: no background_target, so nothing moves.  Busy: background_target=hdd,
# so at mount the daemon's rebalance starts moving BIG to hdd.img while
# build/lat4k does N (default 2000) random 4 KiB writes, each followed by
# fdatasync, into a 64 MiB file (seed 1).  The hdd's write counter during the
# run shows how much rebalance moved meanwhile; if it moved (almost) nothing,
# the comparison would be idle against idle and the script says SKIP.
# Prints p50/p99/max of both and busy/idle; goal (issue 19): p99 <= 2x idle.
. "$(dirname "$0")/tierlib.sh"
BIG=${BIG:-1G}
N=${N:-2000}
big_bytes=$(bytes "$BIG")
need_root_fuse
need_lat4k
cd "$dir"
head -c "$big_bytes" /dev/urandom > big

# run MODE: sets p50 p99 max mbs hdd_w (bytes hdd.img wrote during lat4k) and
# still (1: hdd.img was still being written after lat4k ended)
run() {
	rm -f ssd.img hdd.img
	truncate -s "$(( big_bytes + big_bytes / 2 + (512 << 20) ))" ssd.img hdd.img
	bg=
	[ "$1" = busy ] && bg="--background-target=hdd"
	"$B" format -q --label ssd.a ssd.img --label hdd.b hdd.img --foreground-target=ssd $bg >/dev/null
	"$B" image put ssd.img:hdd.img big /big
	mount_fs ssd.img:hdd.img mnt
	"$LAT4K" -q -n 1 -S 64M mnt/lat >/dev/null || die "$1: lat4k could not create its file"
	usage_json mnt > before.json
	"$LAT4K" -q -y -s 1 -n "$N" mnt/lat > lat.out 2> lat.err || die "$1: lat4k: $(cat lat.err)"
	usage_json mnt > after.json
	sleep 0.5
	usage_json mnt > after2.json	# still moving after the run: it covered all of it
	still=$(( $(dev_key after2.json 1 write_bytes) > $(dev_key after.json 1 write_bytes) ))
	umount_fs
	read -r p50 p99 max mbs < lat.out
	hdd_w=$(( $(dev_key after.json 1 write_bytes) - $(dev_key before.json 1 write_bytes) ))
}

run idle
i50=$p50 i99=$p99 imax=$max imbs=$mbs ihdd=$hdd_w
run busy
b50=$p50 b99=$p99 bmax=$max bmbs=$mbs bhdd=$hdd_w

echo "fuse-latency: $N random 4 KiB writes + fdatasync through fusemount (lat4k, seed 1),"
echo "idle vs while rebalance moves $BIG from ssd.img to hdd.img in the daemon"
printf '%-10s %10s %10s %10s %10s %16s\n' "" p50 p99 max "MB/s" "hdd written"
printf '%-10s %8sus %8sus %8sus %10s %14sMB\n' idle "$i50" "$i99" "$imax" "$imbs" "$((ihdd >> 20))"
printf '%-10s %8sus %8sus %8sus %10s %14sMB\n' busy "$b50" "$b99" "$bmax" "$bmbs" "$((bhdd >> 20))"
if [ "$bhdd" -lt $(( big_bytes / 10 )) ]; then
	echo "fuse-latency: SKIP: rebalance moved only $bhdd bytes to hdd during the run:" \
		"no background rebalance in fusemount yet (issue 19); the busy row is not busy"
	exit 0
fi
[ "$still" = 1 ] || echo "NOTE: rebalance ended before lat4k did: part of the busy run was idle (raise BIG)"
echo "busy/idle: p50 $(ratio "$i50" "$b50")x, p99 $(ratio "$i99" "$b99")x (goal p99 <= 2x)"
