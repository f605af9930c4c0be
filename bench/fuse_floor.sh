#!/bin/sh
# What FUSE on this kernel allows (issue 32): bench/fuse.sh's workloads, the
# same commands, on three filesystems:
#   ext4    the kernel's ext4 on a loop device (fuse.sh's "kernel ext4")
#   floor   build/fuse-floor (bench/fuse_floor.c): a FUSE daemon that keeps
#           everything in memory and does the least work per request, with
#           fusemount's init options, timeouts, open flags and thread loop
#   ours    bcachefs fusemount -f of a fresh 4G image
# Prints the times (median of REPS rounds, default 1; each round runs the
# three one after the other, fresh) and the speed ratios floor/ext4 (what
# any daemon negotiating as ours can reach), ours/floor (what is ours to
# cut) and ours/ext4 (fuse.sh's figure).  >1: the first is faster.  Also
# each daemon's CPU time per row (/proc/PID/stat, user + system), which the
# load of a shared machine sways less than wall time.
#
# Then (COUNTS=1, the default) the requests per row: floor and ours again,
# untimed, with the kernel's fuse_request_send tracepoint counting every
# request the connection sends, per opcode (a tracing instance of our own;
# FORGETs do not pass there: the floor counts its own, ours' fs timestats
# counts its lock holds per type).  Per file for untar, find+stat and rm -rf
# (the tarball's entries), totals for the fio rows.
#
# FLOOR_OPTS: -o list for the floor daemon (fuse_floor.c's header: wbc,
# killpriv, noacl, nodirect, flush, noneg, noxattr, noopen, ...), to measure
# what a change of fusemount's options would save.  PARTS="time counts"
# picks.  BENCH_FUSE_SRC, BENCH_FUSE_SIZE as fuse.sh.  Root, /dev/fuse, fio,
# losetup; prints "SKIP: ..." and exits 0 without them.  BCH: the bcachefs
# binary to measure (default: this tree's).  After each mount of ours its
# image is checked (fsck -n): not clean, the script fails.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}	# BCH: another build to measure
F="$root/build/fuse-floor"
SRC=${BENCH_FUSE_SRC:-/usr/include}
SIZE=${BENCH_FUSE_SIZE:-1G}
REPS=${REPS:-1}
PARTS=${PARTS:-time counts}
FLOOR_OPTS=${FLOOR_OPTS:-}
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] && command -v fio >/dev/null && command -v losetup >/dev/null || {
	echo "SKIP: fuse_floor.sh needs root, /dev/fuse, fio and losetup"; exit 0; }
[ -x "$F" ] && [ "$F" -nt "$root/bench/fuse_floor.c" ] || make -C "$root" --no-print-directory build/fuse-floor >/dev/null
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-floor.XXXXXX")
mnt="$dir/mnt"
loop= fpid= inst=
cleanup() {
	cd /
	if mountpoint -q "$mnt"; then
		if [ -n "$loop" ]; then umount "$mnt"; else fusermount3 -u "$mnt" 2>/dev/null || true; fi
	fi
	[ -n "$fpid" ] && kill "$fpid" 2>/dev/null || true
	[ -n "$loop" ] && losetup -d "$loop"
	[ -n "$inst" ] && rmdir "$inst" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$mnt"
tar -C "$(dirname "$SRC")" -cf "$dir/src.tar" "$(basename "$SRC")"
nfiles=$(tar -tf "$dir/src.tar" | wc -l)

# fuse.sh's helper and commands, unchanged
ms() { t0=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 1; }; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }
ROWS="untar find seqw seqr rand rm"
row_cmd() {
	case $1 in
	untar)	echo "sh -c \"tar -C '$mnt' -xf '$dir/src.tar' && sync -f '$mnt'\"" ;;
	find)	echo "sh -c \"find '$mnt' -exec stat -c %s {} + >/dev/null\"" ;;
	seqw)	echo "fio --name=w --directory='$mnt' --size='$SIZE' --bs=1M --rw=write --ioengine=psync --end_fsync=1" ;;
	seqr)	echo "fio --name=w --directory='$mnt' --size='$SIZE' --bs=1M --rw=read --ioengine=psync" ;;
	rand)	echo "fio --name=r --directory='$mnt' --size=64M --bs=4k --rw=randwrite --ioengine=psync --fsync=32" ;;
	rm)	echo "rm -rf '$mnt/$(basename "$SRC")' '$mnt/w.0.0' '$mnt/r.0.0'" ;;
	esac
}
row_name() {
	case $1 in untar) echo untar ;; find) echo "find+stat" ;; seqw) echo "seq write" ;;
	seqr) echo "seq read" ;; rand) echo "4k randwrite+fsync/32" ;; rm) echo "rm -rf" ;; esac
}
# before each row (fuse.sh drops the caches before seq read only)
pre_row() {
	[ "$1" != seqr ] || { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
}

wait_mounted() {
	for i in $(seq 50); do mountpoint -q "$mnt" && return 0; sleep 0.1; done
	echo "fuse_floor.sh: $mnt did not mount" >&2; return 1
}
# mount_fs KIND: a fresh filesystem of that kind on $mnt
mount_fs() {
	case $1 in
	ext4)	rm -f "$dir/kext4.img"; truncate -s 4G "$dir/kext4.img"; mke2fs -q -F -t ext4 "$dir/kext4.img"
		loop=$(losetup -f --show "$dir/kext4.img"); mount -t ext4 "$loop" "$mnt" ;;
	floor)	"$F" ${FLOOR_OPTS:+-o "$FLOOR_OPTS"} "$mnt" 2>>"$dir/floor.log" & fpid=$!
		wait_mounted ;;
	ours)	rm -f "$dir/ours.img"; "$B" format -q --fs-size=4G "$dir/ours.img"
		"$B" fusemount -f "$dir/ours.img" "$mnt" 2>>"$dir/ours.log" & fpid=$!
		wait_mounted ;;
	esac
}
umount_fs() {
	case $1 in
	ext4)	umount "$mnt"; losetup -d "$loop"; loop= ;;
	floor)	fusermount3 -u "$mnt"; wait "$fpid" || true; fpid= ;;
	ours)	fusermount3 -u "$mnt"; wait "$fpid" || true; fpid=
		# not traded for speed: the image fsck-clean after every run
		"$B" fsck -n "$dir/ours.img" > "$dir/fsck.out" 2>&1 ||
			{ echo "FAILED: fsck -n after ours' run:" >&2; tail -5 "$dir/fsck.out" >&2; exit 1; } ;;
	esac
	sleep 0.5
}

# the daemon's CPU time so far (user + system, ms): less swayed by the load than wall time
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%d", ($12 + $13) * 1000 / hz }' "/proc/$fpid/stat"; }

# ---------------------------------------------------------------- times
KINDS="ext4 floor ours"
if echo "$PARTS" | grep -qw time; then
	for rep in $(seq "$REPS"); do
		for k in $KINDS; do
			mount_fs "$k"
			for r in $ROWS; do
				pre_row "$r"
				c0=$(cpu_ms)
				eval "ms $(row_cmd "$r")" >> "$dir/t.$k.$r"
				[ "$k" = ext4 ] || echo $(( $(cpu_ms) - c0 )) >> "$dir/cpu.$k.$r"
			done
			umount_fs "$k"
		done
	done
	med() { sort -n "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
	ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == 0) a = 1; printf "%.2f", b / a }'; }
	echo "FUSE floor: kernel ext4 (loop device), build/fuse-floor (in memory${FLOOR_OPTS:+, -o $FLOOR_OPTS}), bcachefs fusemount;"
	echo "$(du -sh "$dir/src.tar" | cut -f1) tarball of $SRC ($nfiles entries), fio $SIZE; median of $REPS; load $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-24s %8s %8s %8s %11s %11s %10s %18s\n' workload ext4 floor ours floor/ext4 ours/floor ours/ext4 \
		"daemon CPU f/o"
	for r in $ROWS; do
		e=$(med "$dir/t.ext4.$r"); f=$(med "$dir/t.floor.$r"); o=$(med "$dir/t.ours.$r")
		printf '%-24s %6sms %6sms %6sms %11s %11s %10s %8sms/%6sms\n' "$(row_name "$r")" "$e" "$f" "$o" \
			"$(ratio "$f" "$e")" "$(ratio "$o" "$f")" "$(ratio "$o" "$e")" \
			"$(med "$dir/cpu.floor.$r")" "$(med "$dir/cpu.ours.$r")"
	done
	echo "(speed ratios: >1 means the first named is faster; daemon CPU: user + system of the floor's and ours' daemon, medians)"
fi

# ---------------------------------------------------------------- counts
echo "$PARTS" | grep -qw -e counts -e variants || exit 0
T=/sys/kernel/tracing
[ -d "$T/events/fuse/fuse_request_send" ] || T=/sys/kernel/debug/tracing
if [ ! -d "$T/events/fuse/fuse_request_send" ] || ! mkdir "$T/instances/bch-floor.$$" 2>/dev/null; then
	echo "SKIP: request counts need the fuse_request_send tracepoint (Linux 6.16+) and tracefs"; exit 0
fi
inst="$T/instances/bch-floor.$$"
echo 32768 > "$inst/buffer_size_kb"
# trace_on: count the requests of the connection now on $mnt
trace_on() {
	d=$(mountpoint -d "$mnt")
	echo "connection == $(( (${d%%:*} << 20) | ${d#*:} ))" > "$inst/events/fuse/fuse_request_send/filter"
	echo 1 > "$inst/events/fuse/fuse_request_send/enable"
}
# trace_take FILE: the opcodes sent since the last take, "NAME COUNT" lines; clears
trace_take() {
	grep -o 'opcode [0-9]* ([A-Z_0-9]*)' "$inst/trace" | awk '{ gsub(/[()]/, "", $3); sub(/^FUSE_/, "", $3); n[tolower($3)]++ }
		END { for (k in n) print k, n[k] }' > "$1"
	cat "$inst"/per_cpu/cpu*/stats | awk '$1 == "overrun:" && $2 > 0 { print "fuse_floor.sh: trace overrun: counts are short" > "/dev/stderr" }'
	echo > "$inst/trace"
}
if echo "$PARTS" | grep -qw counts; then
for k in floor ours; do
	mount_fs "$k"
	trace_on
	case $k in
	floor)	setfattr -n user.floor.reset -v 1 "$mnt" ;;
	ours)	"$B" fs timestats --reset "$mnt" >/dev/null ;;
	esac
	trace_take /dev/null
	for r in $ROWS; do
		pre_row "$r"
		eval "ms $(row_cmd "$r")" >/dev/null
		trace_take "$dir/c.$k.$r"
		case $k in
		floor)	getfattr --absolute-names --only-values -n user.floor.counts "$mnt" > "$dir/d.$k.$r"
			setfattr -n user.floor.reset -v 1 "$mnt" ;;
		ours)	"$B" fs timestats --json --reset "$mnt" > "$dir/d.$k.$r" ;;
		esac
		trace_take /dev/null	# the counters' own requests
	done
	echo 0 > "$inst/events/fuse/fuse_request_send/enable"
	umount_fs "$k"
done
echo
echo "FUSE requests per row (kernel tracepoint fuse_request_send, per opcode; /file: per entry of the tarball, $nfiles)"
echo "forget: the daemon's own count (floor: requests; ours: fs timestats lock holds of forget + forget_multi)"
for r in $ROWS; do
	# ours' forgets from fs timestats' JSON
	python3 - "$dir/d.ours.$r" > "$dir/c.ours.$r.forget" <<'EOF' || true
import json, sys
j = json.load(open(sys.argv[1]))
reqs = j.get("requests", j)
n = 0
if isinstance(reqs, list):
    for q in reqs:
        if q.get("type") in ("forget", "forget_multi"):
            n += q.get("calls", 0)
elif isinstance(reqs, dict):
    for t in ("forget", "forget_multi"):
        v = reqs.get(t)
        if isinstance(v, dict):
            n += v.get("calls", 0)
print("forget", n)
EOF
	awk '$1 == "forget"' "$dir/d.floor.$r" > "$dir/c.floor.$r.forget"
	case $r in untar|find|rm) per=$nfiles ;; *) per= ;; esac
	echo
	printf '%-24s %9s %9s %9s %9s\n' "$(row_name "$r")" floor ours "${per:+floor/file}" "${per:+ours/file}"
	cat "$dir/c.floor.$r" "$dir/c.ours.$r" "$dir/c.floor.$r.forget" "$dir/c.ours.$r.forget" | awk '{ print $1 }' | sort -u |
	while read -r op; do
		fv=$(awk -v o="$op" '$1 == o { s += $2 } END { print s + 0 }' "$dir/c.floor.$r" "$dir/c.floor.$r.forget")
		ov=$(awk -v o="$op" '$1 == o { s += $2 } END { print s + 0 }' "$dir/c.ours.$r" "$dir/c.ours.$r.forget")
		if [ -n "$per" ]; then
			printf '  %-22s %9s %9s %9s %9s\n' "$op" "$fv" "$ov" \
				"$(awk -v a="$fv" -v n="$per" 'BEGIN { printf "%.2f", a / n }')" \
				"$(awk -v a="$ov" -v n="$per" 'BEGIN { printf "%.2f", a / n }')"
		else
			printf '  %-22s %9s %9s\n' "$op" "$fv" "$ov"
		fi
	done
	tf=$(awk '{ s += $2 } END { print s + 0 }' "$dir/c.floor.$r"); to=$(awk '{ s += $2 } END { print s + 0 }' "$dir/c.ours.$r")
	printf '  %-22s %9s %9s\n' "total (no forget)" "$tf" "$to"
	python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
print("  ours: engine lock held %.0f ms, waited %.0f ms (fs timestats)" % (
    sum(q["hold_ns"] for q in j["requests"]) / 1e6, sum(q["wait_ns"] for q in j["requests"]) / 1e6))' "$dir/d.ours.$r" || true
done
fi

# ---------------------------------------------------------------- variants
# The floor with one option changed at a time (VARIANTS, each a -o list),
# against the floor as fusemount negotiates, alternating, REPS rounds:
# median time and requests (tracepoint, no forgets) per row.  Both are
# traced, so both carry the tracepoint's small cost.
echo "$PARTS" | grep -qw variants || exit 0
VARIANTS=${VARIANTS:-killpriv nokillpriv2 noxattr noacl,noperm noxattr,noacl,noperm nodirect wbc,nodirect rwdirect flush noopen nocreate,noopen noplusauto cachedir noneg}
base_opts=$FLOOR_OPTS
for rep in $(seq "$REPS"); do
	for v in base $VARIANTS; do
		if [ "$v" = base ]; then FLOOR_OPTS=$base_opts; else FLOOR_OPTS=$base_opts${base_opts:+,}$v; fi
		mount_fs floor
		trace_on
		trace_take /dev/null
		for r in $ROWS; do
			pre_row "$r"
			eval "ms $(row_cmd "$r")" >> "$dir/v.$v.$r"
			trace_take "$dir/vc.$v.$r"
		done
		echo 0 > "$inst/events/fuse/fuse_request_send/enable"
		umount_fs floor
	done
done
FLOOR_OPTS=$base_opts
med() { sort -n "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo
echo "Floor variants: build/fuse-floor -o VARIANT against the floor as fusemount negotiates${base_opts:+ (-o $base_opts)}; median of $REPS; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "per row: ms (speed vs base, >1 faster) / requests of the last round (no forgets)"
printf '%-16s' variant
for r in $ROWS; do printf ' %21s' "$(row_name "$r" | cut -c1-21)"; done
echo
for v in base $VARIANTS; do
	printf '%-16s' "$v"
	for r in $ROWS; do
		t=$(med "$dir/v.$v.$r"); tb=$(med "$dir/v.base.$r")
		n=$(awk '{ s += $2 } END { print s + 0 }' "$dir/vc.$v.$r")
		printf ' %6s %5s /%7s' "$t" "$(awk -v a="$t" -v b="$tb" 'BEGIN { if (a == 0) a = 1; printf "%.2f", b / a }')" "$n"
	done
	echo
done
echo "requests changed against base, per opcode (last round):"
for v in $VARIANTS; do
	for r in $ROWS; do
		cat "$dir/vc.base.$r" "$dir/vc.$v.$r" | awk '{ print $1 }' | sort -u | while read -r op; do
			a=$(awk -v o="$op" '$1 == o { print $2 }' "$dir/vc.base.$r"); b=$(awk -v o="$op" '$1 == o { print $2 }' "$dir/vc.$v.$r")
			a=${a:-0}; b=${b:-0}
			# ignore noise of a few requests
			[ $(( a > b ? a - b : b - a )) -le 8 ] ||
				printf '  %-16s %-22s %-12s %7s -> %7s\n' "$v" "$(row_name "$r")" "$op" "$a" "$b"
		done
	done
done
