#!/bin/sh
# bench/fuse-latency.sh: foreground 4 KiB write latency through fusemount
# while rebalance moves data in the daemon's background thread, against
# idle.  Two devices, ssd.img and hdd.img (no delay), foreground_target=ssd.
# Before mounting, BIG bytes (default 1G, random) are put on the SSD offline.
# Idle: no background_target, so nothing moves.  Busy: background_target=hdd,
# so at mount the daemon's rebalance starts moving BIG to hdd.img while
# build/lat4k does N (default 2000) random 4 KiB writes into a 64 MiB file
# (seed 1), then N more each followed by fdatasync.  The hdd's write counter during the
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

# run MODE: for each kind of write (w: plain pwrite, each reaching the daemon,
# which takes the engine lock; s: pwrite + fdatasync, adding a journal flush
# and the host disk's flush latency, noisy on a shared machine) sets
# ${MODE}_${kind}_{p50,p99,max,mbs}; ${MODE}_hdd: bytes hdd.img wrote during
# both runs; ${MODE}_still: 1 if it was still being written after them
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
	for kind in w s; do
		y=
		[ $kind = s ] && y=-y
		"$LAT4K" -q $y -s 1 -n "$N" mnt/lat > lat.out 2> lat.err || die "$1: lat4k: $(cat lat.err)"
		read -r p50 p99 max mbs < lat.out
		eval "${1}_${kind}_p50=$p50 ${1}_${kind}_p99=$p99 ${1}_${kind}_max=$max ${1}_${kind}_mbs=$mbs"
	done
	usage_json mnt > after.json
	sleep 0.5
	usage_json mnt > after2.json
	eval "${1}_still=$(( $(dev_key after2.json 1 write_bytes) > $(dev_key after.json 1 write_bytes) ))"
	umount_fs
	eval "${1}_hdd=$(( $(dev_key after.json 1 write_bytes) - $(dev_key before.json 1 write_bytes) ))"
}

run idle
run busy

echo "fuse-latency: $N random 4 KiB writes through fusemount (lat4k, seed 1), without and with"
echo "fdatasync after each, idle vs while rebalance moves $BIG from ssd.img to hdd.img in the daemon"
printf '%-26s %10s %10s %10s %10s\n' "" p50 p99 max "MB/s"
for m in idle busy; do
	for kind in w s; do
		label="$m, write"
		[ $kind = s ] && label="$m, write+fdatasync"
		eval "printf '%-26s %8sus %8sus %8sus %10s\n' \"\$label\" \"\$${m}_${kind}_p50\" \"\$${m}_${kind}_p99\" \"\$${m}_${kind}_max\" \"\$${m}_${kind}_mbs\""
	done
	eval "echo \"  hdd.img wrote \$(( ${m}_hdd >> 20 )) MiB during the $m runs\""
done
if [ "$busy_hdd" -lt $(( big_bytes / 10 )) ]; then
	echo "fuse-latency: SKIP: rebalance moved only $busy_hdd bytes to hdd during the runs:" \
		"no background rebalance in fusemount yet (issue 19); the busy rows are not busy"
	exit 0
fi
[ "$busy_still" = 1 ] || echo "NOTE: rebalance ended before lat4k did: part of the busy run was idle (raise BIG)"
echo "busy/idle, write: p50 $(ratio "$idle_w_p50" "$busy_w_p50")x, p99 $(ratio "$idle_w_p99" "$busy_w_p99")x;" \
	"write+fdatasync: p50 $(ratio "$idle_s_p50" "$busy_s_p50")x, p99 $(ratio "$idle_s_p99" "$busy_s_p99")x (goal p99 <= 2x)"
