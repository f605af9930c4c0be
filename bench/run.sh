#!/bin/sh
# make bench: our tool against its peers on the same input, printing ratios.
# Timing lives here, never in tests.  Each row: best of $REPS runs.
#   format   bcachefs format vs mke2fs vs mkfs.btrfs on the same image size
#   btree    our engine vs LMDB: 1M keys (BTREE_N), durable transactions of 1000
#   image    format --source vs mke2fs -d vs mkfs.btrfs --rootdir on one
#            generated tree (BENCH_FILES files, tests/cli/treetool.py), and
#            image extract of the result vs cp -a of the tree
# Later issues add rows (fsck, FUSE) as the features land.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B="$root/bcachefs"
REPS=${REPS:-5}
SIZE=${SIZE:-8G}
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"

# best wall time in ms of REPS runs of "$@" (each on a fresh sparse image)
best_ms() {
	best=
	for i in $(seq "$REPS"); do
		rm -f img; truncate -s "$SIZE" img
		t0=$(date +%s%N)
		"$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 1; }
		t1=$(date +%s%N)
		ms=$(( (t1 - t0) / 1000000 ))
		[ -z "$best" ] || [ "$ms" -lt "$best" ] && best=$ms
	done
	echo "$best"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == 0) a = 1; printf "%.2f", b / a }'; }

printf '%-28s %10s %10s %s\n' "benchmark ($SIZE image)" ours peer "peer/ours (>1: we are faster)"
ours=$(best_ms "$B" format -q -f img)
if command -v mke2fs >/dev/null; then
	peer=$(best_ms mke2fs -q -F -t ext4 img)
	printf '%-28s %8sms %8sms %s\n' "format vs mke2fs" "$ours" "$peer" "$(ratio "$ours" "$peer")"
fi
if command -v mkfs.btrfs >/dev/null; then
	peer=$(best_ms mkfs.btrfs -q -f img)
	printf '%-28s %8sms %8sms %s\n' "format vs mkfs.btrfs" "$ours" "$peer" "$(ratio "$ours" "$peer")"
fi

# image build from a directory tree (same tree for everyone)
if command -v python3 >/dev/null; then
	python3 "$root/tests/cli/treetool.py" gen tree 5 "${BENCH_FILES:-20000}"
	echo
	printf '%-28s %10s %10s %s\n' "image build ($(du -sh tree | cut -f1), $(find tree | wc -l) entries)" ours peer "peer/ours"
	ours=$(best_ms "$B" format -q -f --source tree img)
	if command -v mke2fs >/dev/null; then
		peer=$(best_ms mke2fs -q -F -t ext4 -d tree img)
		printf '%-28s %8sms %8sms %s\n' "format --source vs mke2fs -d" "$ours" "$peer" "$(ratio "$ours" "$peer")"
	fi
	if command -v mkfs.btrfs >/dev/null; then
		peer=$(best_ms mkfs.btrfs -q -f --rootdir tree img)
		printf '%-28s %8sms %8sms %s\n' "  vs mkfs.btrfs --rootdir" "$ours" "$peer" "$(ratio "$ours" "$peer")"
	fi
	zstd=$(best_ms "$B" format -q -f --compression=zstd --source tree img)
	printf '%-28s %8sms\n' "format --source, zstd" "$zstd"
	"$B" format -q -f --source tree img >/dev/null
	REPS_SAVED=$REPS
	t_ours= t_cp=
	for i in $(seq "$REPS"); do
		rm -rf x; t0=$(date +%s%N); "$B" image extract img x; t1=$(date +%s%N)
		ms=$(( (t1 - t0) / 1000000 )); [ -z "$t_ours" ] || [ "$ms" -lt "$t_ours" ] && t_ours=$ms
		rm -rf x; t0=$(date +%s%N); cp -a tree x; t1=$(date +%s%N)
		ms=$(( (t1 - t0) / 1000000 )); [ -z "$t_cp" ] || [ "$ms" -lt "$t_cp" ] && t_cp=$ms
	done
	rm -rf x
	printf '%-28s %8sms %8sms %s\n' "image extract vs cp -a" "$t_ours" "$t_cp" "$(ratio "$t_ours" "$t_cp")"
	REPS=$REPS_SAVED
	rm -rf tree
fi

echo
"$root/build/btree-bench" "$dir" "${BTREE_N:-1000000}"
