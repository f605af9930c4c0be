#!/bin/sh
# make bench (fsck part): how fsck -f grows with the number of files.
# For each N in BENCH_FSCK_SIZES (default 10000 100000 100000h; add 1000000
# for the full curve), a tree of N small files in N/1000 directories is built
# into an image and checked (Nh: each file has a second name, a hard link in
# another set of directories); e2fsck -f -n on an ext4 image and btrfs check --readonly
# on a btrfs image of the same tree for comparison.  Time: best of REPS (5)
# runs each; memory: the median of their peak RSS.
# A run that exits other than the check's clean exit (0: these images are
# undamaged) is a failure, not a fast run: its row says "failed (exit N)"
# instead of figures, and the script exits 1 at the end.
# BENCH_FSCK_BASELINE=PATH: another bcachefs binary (say main's) checks the
# same image, its runs alternating with ours (the same load for both); a
# line under the row gives its figures and ours/its.
# Where the time goes: BCACHEFS_FSCK_TIMES=1 bcachefs fsck -f -n IMG prints
# each pass's wall time, the CPU time of all threads and of the checking
# thread alone (the read-ahead thread works beside it), and the peak RSS so
# far, on stderr.  A fresh copy of a binary (just linked or copied) shows a
# higher peak RSS than the same bytes read back from disk: its page cache
# holds larger folios, and the kernel maps its text in larger pieces (1M
# files: 0.1-0.2 MB more).  So the script drops both binaries' page cache
# first (posix_fadvise DONTNEED: read again by the first run), and the
# runs compare like with like.
# BENCH_FSCK_CACHE=DIR: the images of each size are kept in DIR/N/ (made
# by this script with BCH's format, mke2fs and mkfs.btrfs) and used again
# by the next run instead of building the tree and the images (1M files:
# minutes); remove DIR to build them afresh (say after a format change).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}	# BCH=PATH: another binary as ours
case $B in /*) ;; *) B=$PWD/$B ;; esac	# the runs are made from a directory of their own
X=${BENCH_FSCK_BASELINE:-}
case $X in ""|/*) ;; *) X=$PWD/$X ;; esac
C=${BENCH_FSCK_CACHE:-}
case $C in ""|/*) ;; *) C=$PWD/$C ;; esac
REPS=${REPS:-5}
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-fsckscale.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"

# best CMD...: sets ms (best wall time) and mb (median peak RSS of the runs);
# a run that exits non-zero sets both to "failed (exit N)", with its output
# in run.err, and marks the whole script failed
failed=0
best() {
	ms=
	: > rsslist
	for i in $(seq "$REPS"); do
		t0=$(date +%s%N)
		rc=0
		/usr/bin/time -f "%M" -o rss "$@" >run.err 2>&1 || rc=$?
		t1=$(date +%s%N)
		if [ "$rc" != 0 ]; then
			echo "$*: exited $rc (not timed):" >&2
			tail -5 run.err >&2
			ms="failed (exit $rc)" mb=$ms failed=1
			return
		fi
		t=$(( (t1 - t0) / 1000000 ))
		[ -z "$ms" ] || [ "$t" -lt "$ms" ] && ms=$t
		tail -1 rss >> rsslist
	done
	mb=$(sort -n rsslist | awk '{ a[NR] = $1 } END { printf "%.2f", a[int((NR + 1) / 2)] / 1024 }')
}
# ratio A B: B / A, or - when either is not a figure (a failed run)
ratio() {
	case "$1$2" in *[!0-9.]*) echo -; return ;; esac
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == 0) a = 1; printf "%.2f", b / a }'
}

# both binaries' pages out of the page cache (see above), read back by their first runs
for bin in "$B" ${X:+"$X"}; do
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$bin" || true
done
printf '%-8s %16s %16s %16s %s\n' files "bcachefs fsck" "e2fsck -f -n" "btrfs check" \
	"time e2fsck/ours btrfs/ours (>1: we are faster), memory e2fsck/ours btrfs/ours (>1: we use less)"
for spec in ${BENCH_FSCK_SIZES:-10000 100000 100000h}; do
	n=${spec%h}
	size=$(( n / 1000 * 64 + 512 ))M
	cache=${C:+$C/$spec}
	if [ -n "$cache" ] && [ -f "$cache/done" ]; then
		ln -sf "$cache/a.img" a.img && ln -sf "$cache/b.img" b.img
		[ ! -f "$cache/c.img" ] || ln -sf "$cache/c.img" c.img
	else
	rm -rf tree && mkdir tree
	python3 - "$spec" <<'PY'
import os, sys
links = sys.argv[1].endswith("h")
n = int(sys.argv[1].rstrip("h"))
dirs = max(1, n // 1000)
for d in range(dirs):
    os.mkdir("tree/d%d" % d)
    if links:
        os.mkdir("tree/l%d" % d)
for i in range(n):
    p = "tree/d%d/f%d" % (i % dirs, i)
    with open(p, "w") as f:
        f.write("x" * (i % 200))
    if links:
        os.link(p, "tree/l%d/g%d" % ((i * 7) % dirs, i))
PY
	rm -f a.img b.img c.img
	"$B" format -q --fs-size=$size --source tree a.img
	truncate -s $size b.img && mke2fs -q -F -t ext4 -N $((n + 1000)) -d tree b.img
	if command -v mkfs.btrfs >/dev/null; then
		truncate -s $size c.img && mkfs.btrfs -q -f --rootdir tree c.img >/dev/null 2>&1 || rm -f c.img
	fi
	rm -rf tree
	if [ -n "$cache" ]; then
		mkdir -p "$cache" && mv a.img b.img "$cache"/ && { [ ! -f c.img ] || mv c.img "$cache"/; }
		touch "$cache/done"
		ln -sf "$cache/a.img" a.img && ln -sf "$cache/b.img" b.img
		[ ! -f "$cache/c.img" ] || ln -sf "$cache/c.img" c.img
	fi
	fi
	if [ -n "$X" ]; then
		# alternate: each of REPS rounds runs ours, then the baseline, once
		o_all= x_all= o_rss= x_rss= reps=$REPS REPS=1
		for r in $(seq "$reps"); do
			best "$B" fsck -f -n a.img; o_all="$o_all $ms" o_rss="$o_rss $mb"
			best "$X" fsck -f -n a.img; x_all="$x_all $ms" x_rss="$x_rss $mb"
		done
		REPS=$reps
		pick() { echo $1 | tr ' ' '\n' | sort -n | awk -v m=$2 '{ a[NR] = $1 } END { print m == "min" ? a[1] : a[int((NR + 1) / 2)] }'; }
		o_ms=$(pick "$o_all" min) o_mb=$(pick "$o_rss" med) x_ms=$(pick "$x_all" min) x_mb=$(pick "$x_rss" med)
		case "$o_all$x_all" in *failed*) o_ms="failed" x_ms=failed ;; esac
	else
		best "$B" fsck -f -n a.img; o_ms=$ms o_mb=$mb
	fi
	best e2fsck -f -n b.img; e_ms=$ms e_mb=$mb
	b_ms=- b_mb=- b_r=- b_mr=-
	if command -v btrfs >/dev/null && [ -e c.img ]; then
		best btrfs check --readonly c.img; b_ms=$ms b_mb=$mb b_r=$(ratio "$o_ms" "$b_ms")
		b_mr=$(ratio "$o_mb" "$b_mb")
	fi
	if [ "$o_ms" != "${o_ms#failed}" ]; then
		printf '%-8s bcachefs fsck -f -n %s: no figures\n' "$spec" "$o_ms"
	else
		printf '%-8s %7sms %6sMB %7sms %6sMB %7sms %6sMB time %s %s, memory %s %s\n' "$spec" "$o_ms" "$o_mb" \
			"$e_ms" "$e_mb" "$b_ms" "$b_mb" "$(ratio "$o_ms" "$e_ms")" "$b_r" "$(ratio "$o_mb" "$e_mb")" "$b_mr"
		[ -z "$X" ] ||
			printf '%-8s baseline %s: %sms %sMB; ours/baseline: time %s, memory %s (runs ours:%s, baseline:%s ms)\n' \
				"" "$X" "$x_ms" "$x_mb" "$(ratio "$x_ms" "$o_ms")" "$(ratio "$x_mb" "$o_mb")" \
				"$o_all" "$x_all"
	fi
	rm -rf tree a.img b.img c.img	# links only, with a cache
done
[ "$failed" = 0 ] || { echo "fsck_scale: a checker failed (above): those rows have no figures" >&2; exit 1; }
