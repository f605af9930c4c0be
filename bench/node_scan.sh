#!/bin/sh
# make bench (node scan part): what the node scan of fsck costs against the
# limit, reading the image once.  An image of BENCH_SCAN_MB MiB (default
# 2048) is filled from BENCH_SCAN_SRC (default /usr/share) with format
# --source; then, best of REPS (3) runs each, with the image in the page
# cache for every row:
#   cat IMG >/dev/null                 reading every byte once (the limit)
#   fsck -f -n IMG                     the undamaged image
#   fsck -f -n IMG, extents root bad   pass 3 finds the root unreadable and
#                                      scans the buckets for its leaves (not
#                                      those of user data or never allocated)
#   the same, not closed cleanly       bucket generations are not trusted:
#                                      every bucket but user data is read
#   fsck -f -n IMG, one leaf zeroed    a middle extents leaf destroyed: the
#                                      issue's bound is 2x the undamaged row
# The scan's own cost is the third row less the time fsck spends before it
# stops (the files passes do not run on a btree left damaged by -n).
# Each row's command must exit as it should (fsck -n: 0 on the undamaged
# image, 4 -- damage found, left -- on the damaged ones): any other exit is
# a failed run, never timed as a fast one; the script then prints no figure
# for that row and exits 1.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B="$root/bcachefs"
REPS=${REPS:-3}
MB=${BENCH_SCAN_MB:-2048}
SRC=${BENCH_SCAN_SRC:-/usr/share}
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-nodescan.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"

# best WANT CMD...: ms = best wall time of REPS runs, each of which must exit
# WANT; else ms = "failed (exit N)" and the script fails at the end
failed=0
best() {
	want=$1; shift
	ms=
	for i in $(seq "$REPS"); do
		t0=$(date +%s%N)
		rc=0
		"$@" >run.out 2>&1 || rc=$?
		t1=$(date +%s%N)
		if [ "$rc" != "$want" ]; then
			echo "$*: exited $rc, want $want (not timed):" >&2
			tail -5 run.out >&2
			ms="failed (exit $rc)" failed=1
			return
		fi
		t=$(( (t1 - t0) / 1000000 ))
		if [ -z "$ms" ] || [ "$t" -lt "$ms" ]; then ms=$t; fi
	done
}

"$B" format -q --fs-size="${MB}M" --source "$SRC" good.img 2>format.err ||
	{ echo "format --source $SRC: $(tail -1 format.err)"; exit 1; }
cp good.img bad.img
cp good.img unclean.img
cp good.img leaf.img
"$B" kv --no-clean-close unclean.img put 1:1 x
# every copy of a node (metadata_replicas 2 keeps two on one device): the
# sectors of each "ptr 0:SECTOR" of a `list -m nodes` line
ptr_sectors() { grep -o ' ptr 0:[0-9]*' | sed 's/.*://'; }
# zero IMG SECTORS...: 8 sectors of zeroes at each
zero() {
	img=$1; shift
	for s in "$@"; do dd if=/dev/zero of="$img" bs=512 seek="$s" count=8 conv=notrunc status=none; done
}
"$B" list -b extents -m nodes good.img > nodes.txt
root_sectors=$(sed -n 1p nodes.txt | ptr_sectors)
nodes=$(grep -c '^node level 0' nodes.txt)
leaf_sectors=$(grep '^node level 0' nodes.txt | sed -n "$(( (nodes + 1) / 2 ))p" | ptr_sectors)
[ -n "$root_sectors" ] && [ -n "$leaf_sectors" ] || { echo "no extents nodes listed in good.img"; exit 1; }
zero bad.img $root_sectors
zero unclean.img $root_sectors
zero leaf.img $leaf_sectors
"$B" fsck -f -n bad.img > scan.out 2>&1 || true
grep -q 'btree_node_scan_found' scan.out || { echo "the scan found nothing:"; cat scan.out; exit 1; }
found=$(sed -n 's/^extents btree level [0-9]* node .*: \([0-9]* lea[a-z]* found ([0-9]* keys)\).*/\1/p' scan.out)

best 0 cat good.img; cat_ms=$ms
best 0 "$B" fsck -f -n good.img; good_ms=$ms
best 4 "$B" fsck -f -n bad.img; scan_ms=$ms
best 4 "$B" fsck -f -n unclean.img; unclean_ms=$ms
best 4 "$B" fsck -f -n leaf.img; leaf_ms=$ms
printf 'image %s MiB from %s, %s extents leaves; the scan: %s\n' "$MB" "$SRC" "$nodes" "$found"
printf '%-40s %8s ms\n' "cat IMG >/dev/null" "$cat_ms" \
	"fsck -f -n (undamaged)" "$good_ms" \
	"fsck -f -n (extents root zeroed: scan)" "$scan_ms" \
	"the same, not closed cleanly" "$unclean_ms" \
	"fsck -f -n (one extents leaf zeroed)" "$leaf_ms"
if [ "$failed" != 0 ]; then
	echo "node_scan: a run failed (above): no figure for it, and no ratio" >&2
	exit 1
fi
awk -v a="$leaf_ms" -v b="$good_ms" 'BEGIN { printf "one leaf zeroed / undamaged: %.2f\n", a / (b ? b : 1) }'
