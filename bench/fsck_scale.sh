#!/bin/sh
# make bench (fsck part): how fsck -f grows with the number of files.
# For each N in BENCH_FSCK_SIZES (default 10000 100000; add 1000000 for the
# full curve), a tree of N small files in N/1000 directories is built into an
# image and checked; e2fsck -f on ext4 images of the same trees for comparison.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B="$root/bcachefs"
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-fsckscale.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
printf '%-10s %12s %10s %12s %10s %s\n' files "fsck -f" RSS "e2fsck -f" RSS "e2fsck/ours"
for n in ${BENCH_FSCK_SIZES:-10000 100000}; do
	rm -rf tree && mkdir tree
	python3 - "$n" <<'PY'
import os, sys
n = int(sys.argv[1])
for d in range(max(1, n // 1000)):
    os.mkdir("tree/d%d" % d)
for i in range(n):
    with open("tree/d%d/f%d" % (i % max(1, n // 1000), i), "w") as f:
        f.write("x" * (i % 200))
PY
	size=$(( n / 1000 * 64 + 512 ))M
	rm -f a.img b.img
	"$B" format -q --fs-size=$size --source tree a.img
	truncate -s $size b.img && mke2fs -q -F -t ext4 -N $((n + 1000)) -d tree b.img
	/usr/bin/time -f "%e %M" -o t1 "$B" fsck -f -n a.img >/dev/null
	/usr/bin/time -f "%e %M" -o t2 e2fsck -f -n b.img >/dev/null 2>&1 || true
	read s1 m1 < t1; read s2 m2 < t2
	printf '%-10s %11ss %8sMB %11ss %8sMB %s\n' "$n" "$s1" $((m1 / 1024)) "$s2" $((m2 / 1024)) \
		"$(awk -v a="$s1" -v b="$s2" 'BEGIN { if (a == 0) a = 0.01; printf "%.2f", b / a }')"
done
