#!/bin/sh
# bench/reflink.sh: what sharing a file costs against copying it (issue 31).
#
# An image of IMG_MIB (3072) MiB holding one file of FILE_MIB (1024) MiB of
# incompressible data; on a fresh copy of it each run (the copy not timed):
#   reflink  `image cp --reflink /f /g`: the first sharing of the file (its
#            extents become indirect), then a second one (`/f` to `/h`, the
#            extents indirect already)
#   copy     `image cp /f /g`: every byte read and written again
# Best of REPS (3) runs of each, wall seconds (open and close included, as a
# user's command pays them), and the data space each took: the growth of
# the live user bytes `fs usage --json` reports (summed over devices).
# Figures go to stdout, one line each, with the ratio copy/reflink.
# Then through fusemount (MOUNT=0 skips it), best of REPS, wall ms of cp(1)
# (copy_file_range), the file written through the mount WRITE_BS at a time
# (default 1M; dd):
#   cp, just written  the first cp, right after writing (atime due: the open
#                     drops whatever the kernel caches of the file)
#   cp, remounted     the first cp of another image, after a remount
#                     (nothing cached)
#   cp, again         a second cp there (the extents already indirect)
# and fs timestats' engine time for copy_file_range of the remounted one.
set -eu
MOUNT=${MOUNT:-1}
WRITE_BS=${WRITE_BS:-1M}
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}
REPS=${REPS:-3}
FILE_MIB=${FILE_MIB:-1024}
IMG_MIB=${IMG_MIB:-3072}
dir=$(mktemp -d "${TMPDIR:-/dev/shm}/bch-bench-reflink.XXXXXX")
trap 'fusermount3 -u "$dir/m" 2>/dev/null || :; rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM

now() { date +%s.%N; }
user_bytes() {
	"$B" fs usage --json "$1" | grep -o '"user": {"buckets": [0-9]*, "bytes": [0-9]*' |
		sed 's/.*bytes": //' | awk '{ s += $1 } END { printf "%.0f\n", s }'
}
# run NAME PREP CMD...: best of REPS runs of CMD on a fresh copy of the image
# after PREP (a command or :), and the user bytes the last run added
run() {
	name=$1 prep=$2
	shift 2
	b=
	for i in $(seq "$REPS"); do
		cp --sparse=always "$dir/base.img" "$dir/a.img"
		$prep
		u0=$(user_bytes "$dir/a.img")
		t0=$(now)
		"$@" >/dev/null 2>"$dir/err" || { echo "failed: $* ($(cat "$dir/err"))" >&2; exit 1; }
		t1=$(now)
		u1=$(user_bytes "$dir/a.img")
		t=$(echo "$t1 - $t0" | bc)
		if [ -z "$b" ] || [ "$(echo "$t < $b" | bc)" = 1 ]; then b=$t; fi
	done
	grown=$((u1 - u0))
	printf '%-22s %8.3f s  %12d bytes of new data\n' "$name" "$b" "$grown"
	eval "t_$(echo "$name" | tr -c 'a-z0-9\n' _)=$b"
}

head -c $((FILE_MIB << 20)) /dev/urandom > "$dir/f.bin"
"$B" format -q --fs-size=${IMG_MIB}M "$dir/base.img"
"$B" image put "$dir/base.img" "$dir/f.bin" /f
rm -f "$dir/f.bin"
echo "file: $FILE_MIB MiB of random data in a $IMG_MIB MiB image; best of $REPS"

run "cp --reflink (first)" : "$B" image cp --reflink "$dir/a.img" /f /g
share_first() { "$B" image cp --reflink "$dir/a.img" /f /g; }
run "cp --reflink (again)" share_first "$B" image cp --reflink "$dir/a.img" /f /h
run "cp (copy)" : "$B" image cp "$dir/a.img" /f /g
"$B" image cp --reflink "$dir/a.img" /f /x >/dev/null
"$B" fsck -n -f "$dir/a.img" >/dev/null || { echo "fsck after the runs found problems" >&2; exit 1; }
echo "ratio copy/reflink (first): $(echo "scale=1; $t_cp__copy_ / $t_cp___reflink__first_" | bc)x"

[ "$MOUNT" = 1 ] || exit 0
mkdir "$dir/m"
ms_since() { echo "($(date +%s%N) - $1) / 1000000" | bc; }
head -c $((FILE_MIB << 20)) /dev/urandom > "$dir/f.bin"
best() { sort -n "$1" | head -1; }
: > "$dir/t.warm"; : > "$dir/t.cold"; : > "$dir/t.again"; : > "$dir/t.eng"
for i in $(seq "$REPS"); do
	rm -f "$dir/m.img"
	"$B" format -q --fs-size=${IMG_MIB}M "$dir/m.img"
	"$B" fusemount "$dir/m.img" "$dir/m"
	dd if="$dir/f.bin" of="$dir/m/f" bs="$WRITE_BS" status=none
	t0=$(date +%s%N); cp "$dir/m/f" "$dir/m/w"; ms_since "$t0" >> "$dir/t.warm"
	fusermount3 -u "$dir/m"
	# a fresh image for the remounted one: its cp makes the extents indirect too
	rm -f "$dir/m.img"
	"$B" format -q --fs-size=${IMG_MIB}M "$dir/m.img"
	"$B" fusemount "$dir/m.img" "$dir/m"
	dd if="$dir/f.bin" of="$dir/m/f" bs="$WRITE_BS" status=none
	fusermount3 -u "$dir/m"
	"$B" fusemount "$dir/m.img" "$dir/m"
	"$B" fs timestats --reset "$dir/m" > /dev/null
	t0=$(date +%s%N); cp "$dir/m/f" "$dir/m/c"; ms_since "$t0" >> "$dir/t.cold"
	"$B" fs timestats --json "$dir/m" | python3 -c 'import json, sys
d = json.load(sys.stdin)
print(round(sum(r["wait_ns"] + r["hold_ns"] for r in d["requests"] if r["type"] == "copy_file_range") / 1e6))' >> "$dir/t.eng"
	t0=$(date +%s%N); cp "$dir/m/f" "$dir/m/c2"; ms_since "$t0" >> "$dir/t.again"
	cmp "$dir/m/f" "$dir/m/c2" || { echo "the copy differs" >&2; exit 1; }
	fusermount3 -u "$dir/m"
done
"$B" fsck -n -f "$dir/m.img" >/dev/null || { echo "fsck after the mounted runs found problems" >&2; exit 1; }
echo "through the mount (fusemount, written $WRITE_BS at a time), best of $REPS, load $(cut -d' ' -f1 /proc/loadavg):"
printf '%-22s %8s ms\n' "cp, just written" "$(best "$dir/t.warm")"
printf '%-22s %8s ms  (engine %s ms)\n' "cp, remounted" "$(best "$dir/t.cold")" "$(best "$dir/t.eng")"
printf '%-22s %8s ms\n' "cp, again" "$(best "$dir/t.again")"
