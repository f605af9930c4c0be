#!/bin/sh
# bench/fuse-latency.sh: foreground 4 KiB write latency through fusemount
# while rebalance moves data in the daemon's background thread, against
# idle.  Two devices, ssd.img and hdd.img (no delay), foreground_target=ssd.
# Before mounting, BIG bytes (default 1G, random) are put on the SSD offline.
# Idle: no background_target, so nothing moves.  Busy: background_target=hdd,
# so at mount the daemon's rebalance starts moving BIG to hdd.img while
# build/lat4k does N (default 2000) random 4 KiB writes into a 64 MiB file,
# and N more each followed by fdatasync, in alternating chunks of CHUNK
# (default 100).
# Between chunks the hdd's data bytes (fs usage of the mountpoint) tell
# whether rebalance moved data during the chunk: only such chunks count, and
# the busy run stops when rebalance has finished (a NOTE says so); if no
# chunk qualifies the script says SKIP rather than compare idle with idle.
# Prints p50/p99/max of both and busy/idle; goal (issue 19): p99 <= 2x idle.
. "$(dirname "$0")/tierlib.sh"
BIG=${BIG:-1G}
N=${N:-2000}
CHUNK=${CHUNK:-100}
big_bytes=$(bytes "$BIG")
need_root_fuse
need_lat4k
cd "$dir"
head -c "$big_bytes" /dev/urandom > big

# pct FILE P: nearest-rank percentile P of the numbers in FILE ("max": the largest)
pct() {
	sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END {
		if (!NR) { print "-"; exit } if (p == "max") { print v[NR]; exit }
		r = int((NR * p + 99) / 100); if (r < 1) r = 1; print v[r] }'
}

# hdd_data: bytes of file data on hdd.img: grows only as rebalance moves data
# there (foreground writes go to the ssd; the journal, on both, is not data)
hdd_data() { usage_json mnt > c.json; dev_key c.json 1 user.bytes; }

# run MODE: two kinds of write (w: plain pwrite, each reaching the daemon,
# which takes the engine lock; s: pwrite + fdatasync, adding a journal flush
# and the host disk's flush latency, noisy on a shared machine), each N
# writes in chunks of CHUNK (seeds 1, 2, ...; the kinds alternate chunk by
# chunk), raw times in raw.MODE.KIND.  Busy: a chunk counts only if data
# reached hdd.img during it (rebalance was moving); both stop at the first
# chunk during which none did.  Sets ${MODE}_KIND_n (writes
# counted), ${MODE}_hdd (data bytes moved to hdd.img during counted chunks).
run() {
	rm -f ssd.img hdd.img raw.$1.*
	truncate -s "$(( big_bytes + big_bytes / 2 + (512 << 20) ))" ssd.img hdd.img
	bg=
	[ "$1" = busy ] && bg="--background-target=hdd"
	"$B" format -q --label ssd.a ssd.img --label hdd.b hdd.img --foreground-target=ssd $bg >/dev/null
	"$B" image put ssd.img:hdd.img big /big
	mount_fs ssd.img:hdd.img mnt
	"$LAT4K" -q -n 1 -S 64M mnt/lat >/dev/null || die "$1: lat4k could not create its file"
	moved=0 w_got=0 s_got=0 seed=1 stop=
	: > raw.$1.w
	: > raw.$1.s
	# the kinds alternate chunk by chunk, so both sample the same stretch
	while [ -z "$stop" ] && { [ "$w_got" -lt "$N" ] || [ "$s_got" -lt "$N" ]; }; do
		for kind in w s; do
			eval "got=\$${kind}_got"
			[ "$got" -lt "$N" ] && [ -z "$stop" ] || continue
			y=
			[ $kind = s ] && y=-y
			h0=$(hdd_data)
			"$LAT4K" -q $y -s $seed -n "$CHUNK" -r chunk.raw mnt/lat >/dev/null 2>lat.err ||
				die "$1: lat4k: $(cat lat.err)"
			h1=$(hdd_data)
			seed=$((seed + 1))
			if [ "$1" = busy ] && [ "$h1" = "$h0" ]; then
				rm -f chunk.raw
				stop=1
				continue
			fi
			cat chunk.raw >> raw.$1.$kind && rm -f chunk.raw
			moved=$((moved + h1 - h0))
			eval "${kind}_got=$((got + CHUNK))"
		done
	done
	eval "${1}_w_n=$w_got ${1}_s_n=$s_got"
	eval "${1}_hdd=$moved"
	umount_fs
}

run idle
run busy

echo "fuse-latency: random 4 KiB writes through fusemount (lat4k, seeds 1.. in chunks of $CHUNK), without"
echo "and with fdatasync after each, idle vs while rebalance moves $BIG from ssd.img to hdd.img in the daemon"
printf '%-26s %8s %10s %10s %10s\n' "" writes p50 p99 max
for m in idle busy; do
	for kind in w s; do
		label="$m, write"
		[ $kind = s ] && label="$m, write+fdatasync"
		eval "n=\$${m}_${kind}_n"
		printf '%-26s %8s %8sus %8sus %8sus\n' "$label" "$n" "$(pct raw.$m.$kind 50)" \
			"$(pct raw.$m.$kind 99)" "$(pct raw.$m.$kind max)"
	done
done
echo "rebalance moved $((busy_hdd >> 20)) MiB of data to hdd.img during the counted busy chunks"
if [ "$busy_w_n" = 0 ]; then
	echo "fuse-latency: SKIP: no data reached hdd.img during the busy runs:" \
		"no background rebalance in fusemount yet (issue 19), or it ended first (raise BIG)"
	exit 0
fi
[ "$busy_s_n" -ge "$N" ] ||
	echo "NOTE: rebalance ended after $busy_s_n of $N writes+fdatasync (BIG=2G or more for all)"
echo "busy/idle, write: p50 $(ratio "$(pct raw.idle.w 50)" "$(pct raw.busy.w 50)")x," \
	"p99 $(ratio "$(pct raw.idle.w 99)" "$(pct raw.busy.w 99)")x;" \
	"write+fdatasync: p50 $(ratio "$(pct raw.idle.s 50)" "$(pct raw.busy.s 50)")x," \
	"p99 $(ratio "$(pct raw.idle.s 99)" "$(pct raw.busy.s 99)")x (goal p99 <= 2x)"
