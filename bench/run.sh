#!/bin/sh
# make bench: our tool against its peers on the same input, printing ratios.
# Timing lives here, never in tests.  Each row: best of $REPS runs.
#   format   bcachefs format vs mke2fs vs mkfs.btrfs on the same image size
#   btree    our engine vs LMDB: 1M keys (BTREE_N), durable transactions of 1000
#   image    format --source vs mke2fs -d, mkfs.btrfs --rootdir and
#            mkfs.erofs on one tree (a copy of /usr/share and /usr/include),
#            time, peak RSS and image size; image extract vs cp -a;
#            fsck -f of the built image vs e2fsck -f of ext4's and
#            btrfs check of btrfs's
#   fsck     fsck -f at 10k and 100k small files (and 100k with a hard link
#            each) vs e2fsck -f and btrfs check
#            (bench/fsck_scale.sh; BENCH_FSCK_SIZES for other sizes)
#   scan     fsck's node scan (extents root zeroed) vs cat of the image
#            (bench/node_scan.sh; BENCH_SCAN_MB, BENCH_SCAN_SRC for others)
#   scrub    data scrub of a 1 GiB two-image replicated filesystem vs cat of
#            the image files (bench/scrub.sh; DATA_MB for another size)
#   fuse     bcachefs fusemount vs fuse2fs and kernel ext4 (bench/fuse.sh): untar, find+stat,
#            fio sequential and 4k random, rm -rf
#   floor    the same rows on kernel ext4, an in-memory FUSE daemon that does
#            nothing (build/fuse-floor) and fusemount, with the FUSE requests
#            per row (bench/fuse_floor.sh)
#   scale    fusemount with 1, 2 and 4 clients vs build/fuse-floor and kernel ext4 (bench/scale.sh)
#   tiering  promote, rebalance vs cp, copygc write amplification, write
#            latency under rebalance (bench/tiering.sh, rebalance.sh,
#            copygc.sh, fuse-latency.sh; see bench/README)
#   devices  device evacuate vs cp -a, device add time at 10k/100k files
#            and 1G/8G members (bench/evacuate.sh, device-add.sh)
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

# image build from a directory tree (same tree for everyone): a copy of
# /usr/share and /usr/include when they are there (BENCH_TREE=generated for a
# treetool tree of BENCH_FILES files)
if [ "${BENCH_TREE:-usr}" = usr ] && [ -d /usr/share ] && [ -d /usr/include ]; then
	mkdir tree && cp -a /usr/share /usr/include tree/
elif command -v python3 >/dev/null; then
	python3 "$root/tests/cli/treetool.py" gen tree 5 "${BENCH_FILES:-20000}"
fi
if [ -d tree ]; then
	echo
	echo "image build: $(du -sh tree | cut -f1) in $(find tree | wc -l) entries; best of $REPS"
	printf '%-34s %9s %10s %10s %s\n' tool time "peak RSS" "image" "time/ours"
	# run_build NAME CMD...: best time, and the RSS and allocated size of the last run
	run_build() {
		name=$1; shift
		best= rss= size=
		for i in $(seq "$REPS"); do
			rm -f img
			case "$name" in *erofs*) ;; *) truncate -s 4G img ;; esac
			/usr/bin/time -f "%e %M" -o tm "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 0; }
			ms=$(awk '{ printf "%d", $1 * 1000 }' tm)
			rss=$(awk '{ printf "%d", $2 / 1024 }' tm)
			[ -z "$best" ] || [ "$ms" -lt "$best" ] && best=$ms
		done
		size=$(du -m img | cut -f1)
		[ -n "${ours_build:-}" ] || ours_build=$best
		printf '%-34s %7sms %8sMB %8sMB %s\n' "$name" "$best" "$rss" "$size" "$(ratio "$ours_build" "$best")"
	}
	ours_build=
	run_build "bcachefs format --source" "$B" format -q -f --source tree img
	run_build "bcachefs format --source (zstd)" "$B" format -q -f --compression=zstd --source tree img
	command -v mke2fs >/dev/null && run_build "mke2fs -t ext4 -d" mke2fs -q -F -t ext4 -d tree img
	command -v mkfs.btrfs >/dev/null && run_build "mkfs.btrfs --rootdir" mkfs.btrfs -q -f --rootdir tree img
	command -v mkfs.erofs >/dev/null && run_build "mkfs.erofs (read-only fs)" mkfs.erofs img tree
	# fsck -f of the image just built from the tree, against e2fsck -f of ext4's
	rm -f img img_e
	"$B" format -q -f --fs-size=4G --source tree img >/dev/null
	truncate -s 4G img_e && mke2fs -q -F -t ext4 -d tree img_e
	# best_check CMD...: bestc = best time (ms) of REPS runs, rssc = median peak RSS (MB)
	best_check() {
		bestc=
		: > rsslist
		for i in $(seq "$REPS"); do
			t0=$(date +%s%N)
			/usr/bin/time -f "%M" -o tm "$@" >/dev/null 2>&1
			t1=$(date +%s%N)
			ms=$(( (t1 - t0) / 1000000 )); tail -1 tm >> rsslist
			[ -z "$bestc" ] || [ "$ms" -lt "$bestc" ] && bestc=$ms
		done
		rssc=$(sort -n rsslist | awk '{ a[NR] = $1 } END { printf "%.2f", a[int((NR + 1) / 2)] / 1024 }')
	}
	echo
	printf '%-34s %9s %10s %s\n' "fsck of the same tree" time "peak RSS" \
		"time peer/ours, memory peer/ours (>1: we are faster, use less)"
	best_check "$B" fsck -f -n img; f_ours=$bestc; r_ours=$rssc
	best_check e2fsck -f -n img_e; f_e2=$bestc; r_e2=$rssc
	printf '%-34s %7sms %8sMB\n' "bcachefs fsck -f -n" "$f_ours" "$r_ours"
	printf '%-34s %7sms %8sMB %s %s\n' "e2fsck -f -n (same tree)" "$f_e2" "$r_e2" \
		"$(ratio "$f_ours" "$f_e2")" "$(ratio "$r_ours" "$r_e2")"
	if command -v mkfs.btrfs >/dev/null; then
		rm -f img_e && truncate -s 4G img_e
		if mkfs.btrfs -q -f --rootdir tree img_e >/dev/null 2>&1; then
			best_check btrfs check --readonly img_e
			printf '%-34s %7sms %8sMB %s %s\n' "btrfs check --readonly (same tree)" \
				"$bestc" "$rssc" "$(ratio "$f_ours" "$bestc")" "$(ratio "$r_ours" "$rssc")"
		fi
	fi
	best_check "$B" fsck -f -n -c img
	printf '%-34s %7sms %8sMB\n' "bcachefs fsck -f -n --data" "$bestc" "$rssc"
	rm -f img_e
	t_ours= t_cp=
	for i in $(seq "$REPS"); do
		rm -rf x; t0=$(date +%s%N); "$B" image extract img x; t1=$(date +%s%N)
		ms=$(( (t1 - t0) / 1000000 )); [ -z "$t_ours" ] || [ "$ms" -lt "$t_ours" ] && t_ours=$ms
		rm -rf x; t0=$(date +%s%N); cp -a tree x; t1=$(date +%s%N)
		ms=$(( (t1 - t0) / 1000000 )); [ -z "$t_cp" ] || [ "$ms" -lt "$t_cp" ] && t_cp=$ms
	done
	rm -rf x tree
	printf '%-34s %7sms %10s %10s %s\n' "bcachefs image extract" "$t_ours" "" "" ""
	printf '%-34s %7sms %10s %10s %s\n' "cp -a of the tree" "$t_cp" "" "" "$(ratio "$t_ours" "$t_cp")"
fi

echo
"$root/build/btree-bench" "$dir" "${BTREE_N:-1000000}"

echo
"$root/bench/fuse.sh"

echo
sh "$root/bench/fuse_floor.sh"

echo
sh "$root/bench/scale.sh"

echo
sh "$root/bench/fsck_scale.sh"

echo
sh "$root/bench/node_scan.sh"

echo
sh "$root/bench/scrub.sh"

for t in tiering rebalance copygc fuse-latency evacuate device-add; do
	echo
	sh "$root/bench/$t.sh" || echo "bench/$t.sh: FAILED (exit $?)"
done
