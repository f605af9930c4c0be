#!/bin/sh
# bench/scale.sh: throughput through fusemount with 1, 2 and 4 clients, and
# the same on kernel ext4 (a loop device) for reference (issue 32: "dbench
# and fio with 4 clients at least 1.6x the throughput of 1 client").
# Each load runs RUNTIME (default 8) seconds per client count, on a fresh
# 4 GiB image:
#   randread   fio, 4 KiB random reads with O_DIRECT (every read reaches the
#              daemon: the page cache would measure the kernel alone) of
#              per-client 64 MiB files written first
#   randwrite  fio, 4 KiB random writes (no writeback cache: each reaches the
#              daemon) into per-client 64 MiB files, psync
#   seqwrite   fio, 1 MiB sequential writes, per-client files, psync
#   dbench     dbench's default (NetBench) load, N clients, MB/s
# Prints each throughput (IOPS, or MB/s for seqwrite and dbench) and the
# ratio N clients / 1 client, for ours and for ext4.  The load average at
# the start is printed: on a shared machine, compare within one run.
# LOADS picks the loads (default "randread randwrite seqwrite dbench"),
# CLIENTS the client counts (default "1 2 4"), BCH= another build.  FLOOR=1
# (the default; FLOOR=0 leaves it out) adds build/fuse-floor (bench/fuse_floor.c,
# a FUSE daemon in memory doing the least work a request allows): how far
# FUSE itself scales on this kernel and these cores, the ceiling of ours'
# ratio.  Needs root, /dev/fuse, fio, dbench; the ext4 rows are "-" without
# losetup.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}	# BCH=PATH: another build to measure
RUNTIME=${RUNTIME:-8}
LOADS=${LOADS:-randread randwrite seqwrite dbench}
CLIENTS=${CLIENTS:-1 2 4}
FLOOR=${FLOOR:-1}
F="$root/build/fuse-floor"
[ -c /dev/fuse ] && command -v fio >/dev/null && command -v dbench >/dev/null || {
	echo "scale bench: needs /dev/fuse, fio and dbench; skipped"; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-scalebench.XXXXXX")
mnt="$dir/mnt"
loop=
fpid=
cleanup() {
	cd /
	fusermount3 -uz "$mnt" 2>/dev/null || true
	[ -z "$fpid" ] || wait "$fpid" 2>/dev/null || true
	if [ -n "$loop" ]; then umount "$mnt" 2>/dev/null || true; losetup -d "$loop"; fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$mnt"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores), ${RUNTIME} s a run"

# fio_rate LOAD N: IOPS (randread, randwrite) or MB/s (seqwrite) of N clients in $mnt
fio_rate() {
	case $1 in
	randread)  a="--rw=randread --bs=4k --direct=1" ;;
	randwrite) a="--rw=randwrite --bs=4k" ;;
	seqwrite)  a="--rw=write --bs=1M" ;;
	esac
	# the files first (not timed), then the timed run over them
	fio --name=s --directory="$mnt" --numjobs="$2" --size=64M --rw=write --bs=1M \
		--ioengine=psync --end_fsync=1 >/dev/null 2>&1
	out=$(fio --name=s --directory="$mnt" --numjobs="$2" --size=64M $a --ioengine=psync \
		--time_based --runtime="$RUNTIME" --group_reporting --output-format=terse \
		--terse-version=3 2>/dev/null) || { echo FAILED; return; }
	rm -f "$mnt"/s.*
	# terse v3: field 8 read IOPS, 49 write IOPS; 7 read KiB/s, 48 write KiB/s
	echo "$out" | awk -F';' -v l="$1" '{
		if (l == "randread") print $8; else if (l == "randwrite") print $49;
		else printf "%.0f\n", $48 / 1024 }'
}
dbench_rate() {
	(cd "$mnt" && dbench -D "$mnt" -t "$RUNTIME" "$1" 2>/dev/null) |
		sed -n 's/^Throughput \([0-9.]*\) MB\/sec.*/\1/p' | tail -1
}

# run_all LABEL MOUNT_CMD...: every load and client count on a fresh mount;
# results in $res_LABEL_LOAD_N
run_all() {
	label=$1; shift
	"$@"
	for i in $(seq 50); do mountpoint -q "$mnt" && break; sleep 0.1; done
	for l in $LOADS; do
		for n in $CLIENTS; do
			if [ "$l" = dbench ]; then v=$(dbench_rate "$n"); else v=$(fio_rate "$l" "$n"); fi
			rm -rf "$mnt/clients" "$mnt"/s.* 2>/dev/null || true
			eval "res_${label}_${l}_$n=\${v:--}"
		done
	done
	$unmount "$mnt"
	sleep 0.5
}

unmount="fusermount3 -u"
"$B" format -q --fs-size=4G "$dir/ours.img"
run_all ours "$B" fusemount "$dir/ours.img" "$mnt"
have_floor=0
if [ "$FLOOR" = 1 ] && { [ -x "$F" ] && [ "$F" -nt "$root/bench/fuse_floor.c" ] ||
	make -C "$root" --no-print-directory build/fuse-floor >/dev/null 2>&1; }; then
	"$F" "$mnt" 2>/dev/null & fpid=$!
	run_all floor true	# mounted by the daemon started above
	wait "$fpid" 2>/dev/null || true
	fpid=
	have_floor=1
fi
have_ext4=0
if command -v losetup >/dev/null && truncate -s 4G "$dir/kext4.img" &&
   mke2fs -q -F -t ext4 "$dir/kext4.img" && loop=$(losetup -f --show "$dir/kext4.img"); then
	unmount=umount
	run_all ext4 mount -t ext4 "$loop" "$mnt"
	losetup -d "$loop"; loop=
	have_ext4=1
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || a == 0) print "-"; else printf "%.2f", b / a }'; }
first=$(echo $CLIENTS | cut -d' ' -f1)
printf '%-10s %-8s' load clients
printf ' %12s %8s' ours "x$first" floor "x$first" ext4 "x$first"
echo
for l in $LOADS; do
	case $l in seqwrite|dbench) unit=MB/s ;; *) unit=IOPS ;; esac
	for n in $CLIENTS; do
		eval "o=\$res_ours_${l}_$n o1=\$res_ours_${l}_$first"
		k=- k1=- f=- f1=-
		[ $have_ext4 = 1 ] && eval "k=\$res_ext4_${l}_$n k1=\$res_ext4_${l}_$first"
		[ $have_floor = 1 ] && eval "f=\$res_floor_${l}_$n f1=\$res_floor_${l}_$first"
		printf '%-10s %-8s %12s %8s %12s %8s %12s %8s\n' "$l" "$n" "$o $unit" "$(ratio "$o1" "$o")" \
			"$f" "$(ratio "$f1" "$f")" "$k" "$(ratio "$k1" "$k")"
	done
done
echo "(xN: throughput against $first client$([ "$first" = 1 ] || echo s); the issue asks 4 clients >= 1.6x;"
echo " floor: build/fuse-floor, FUSE with no filesystem work, what any daemon negotiating as ours can reach)"
