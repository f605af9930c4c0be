#!/bin/sh
# fuse.sh's "seq read" row alone (issue 32), for A/B of read-path changes:
# per KIND, a fresh filesystem, fio's 1 GiB write (bs=1M, end_fsync), sync
# and drop_caches, then the timed fio read (bs=1M, psync), fuse.sh's very
# commands.  KINDs, run in the order given, ROUNDS times (alternate them):
#   PATH    a bcachefs binary: fusemount (a daemon, as in fuse.sh) of a
#           fresh 4G image; also its CPU ms (user + system) and context
#           switches (every thread's, voluntary or not) during the read:
#           less swayed by the machine's load than the wall time
#   floor   build/fuse-floor (FLOOR to pick another): FUSE with no
#           filesystem work, what this kernel's FUSE allows
#   ext4    the kernel's ext4 on a loop device (fuse.sh's "kernel ext4")
# One line per read: round, kind, ms, cpu ms, switches, 1-minute load.
# NICE=-20 runs it all at that niceness (fio and the daemons; not ext4's
# loop workers).  Root, /dev/fuse, fio, losetup.
#   bench/seq_read.sh /work/h-old/bcachefs ./bcachefs floor ext4
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-2}
SIZE=${BENCH_FUSE_SIZE:-1G}
FLOOR=${FLOOR:-$root/build/fuse-floor}
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] && command -v fio >/dev/null && command -v losetup >/dev/null || {
	echo "SKIP: seq_read.sh needs root, /dev/fuse, fio and losetup"; exit 0; }
[ $# -gt 0 ] || set -- "$root/bcachefs"
[ -z "${NICE:-}" ] || renice -n "$NICE" -p $$ >/dev/null
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-seqread.XXXXXX")
mnt=$dir/mnt
loop= fpid= pid=
cleanup() {
	cd /
	if mountpoint -q "$mnt"; then
		if [ -n "$loop" ]; then umount "$mnt"; else fusermount3 -u "$mnt" 2>/dev/null || true; fi
	fi
	[ -n "$fpid" ] && kill "$fpid" 2>/dev/null || true
	[ -n "$loop" ] && losetup -d "$loop"
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$mnt"

ms() { t0=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 1; }; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }
cpu_ms() {
	[ -n "$pid" ] || { echo 0; return; }
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%d", ($12 + $13) * 1000 / hz }' "/proc/$pid/stat"
}
switches() {
	[ -n "$pid" ] || { echo 0; return; }
	cat /proc/"$pid"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { n += $2 } END { print n + 0 }'
}
wait_mounted() {
	for i in $(seq 50); do mountpoint -q "$mnt" && return 0; sleep 0.1; done
	echo "seq_read.sh: $mnt did not mount" >&2; return 1
}

for r in $(seq "$ROUNDS"); do
	for k; do
		pid=
		case $k in
		ext4)	truncate -s 4G "$dir/img"; mke2fs -q -F -t ext4 "$dir/img"
			loop=$(losetup -f --show "$dir/img"); mount -t ext4 "$loop" "$mnt" ;;
		floor)	"$FLOOR" -f "$mnt" 2>/dev/null & fpid=$!
			wait_mounted; pid=$fpid ;;
		*)	"$k" format -q --fs-size=4G "$dir/img"; "$k" fusemount "$dir/img" "$mnt"
			wait_mounted; pid=$(pgrep -n -f "fusemount $dir/img") ;;
		esac
		ms fio --name=w --directory="$mnt" --size="$SIZE" --bs=1M --rw=write --ioengine=psync --end_fsync=1 >/dev/null
		sync; echo 3 > /proc/sys/vm/drop_caches
		c0=$(cpu_ms) x0=$(switches)
		t=$(ms fio --name=w --directory="$mnt" --size="$SIZE" --bs=1M --rw=read --ioengine=psync)
		echo "$r $k ${t} ms cpu $(( $(cpu_ms) - c0 )) ms switches $(( $(switches) - x0 )) load $(cut -d' ' -f1 /proc/loadavg)"
		case $k in
		ext4)	umount "$mnt"; losetup -d "$loop"; loop= ;;
		floor)	fusermount3 -u "$mnt"; wait "$fpid" || true; fpid= ;;
		*)	fusermount3 -u "$mnt" ;;
		esac
		sleep 0.5
		rm -f "$dir/img"
	done
done
