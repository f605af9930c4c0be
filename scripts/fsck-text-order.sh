#!/bin/sh
# scripts/fsck-text-order.sh [BCH]: write scripts/fsck-text-order.txt, the
# functions `fsck -f -n` of an undamaged filesystem runs, one text section a
# line (.text.NAME), sorted by name.  The link lays these out first and
# together (Makefile: gold's --section-ordering-file, objects built with
# -ffunction-sections): their pages are then a few contiguous 64 KiB
# blocks of the binary rather than pieces of most of its 900 KiB of text,
# and the kernel maps (fault-around) and fsck's peak RSS counts only those
# (1M files: the binary's resident text and read-only data 990 KB -> 640
# KB).  A function missing from the list still runs, only from the rest of
# the text; run this again after large changes to fsck's path.
# Needs valgrind (callgrind lists the functions run) and python3.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$root/bcachefs}
B=$(cd "$(dirname "$B")" && pwd)/$(basename "$B")	# as callgrind names it
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-textorder.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"
# a tree as bench/fsck_scale.sh's (files of a few bytes in directories of
# 1000), with some hard links so the passes over link counts run as well
python3 - <<'PY'
import os
for d in range(20):
    os.makedirs("tree/d%d" % d)
for i in range(20000):
    p = "tree/d%d/f%d" % (i % 20, i)
    with open(p, "w") as f:
        f.write("x" * (i % 200))
    if i % 10 == 0:
        os.link(p, "tree/d%d/g%d" % ((i * 7) % 20, i))
PY
"$B" format -q --fs-size=2G --source tree a.img
valgrind --tool=callgrind --callgrind-out-file=cg.out "$B" fsck -f -n a.img >/dev/null 2>cg.err
callgrind_annotate --threshold=100 cg.out | python3 -c '
import re, sys
names = set()
for line in sys.stdin:
    m = re.search(r":([A-Za-z_][A-Za-z0-9_.]*)(?:\x27[0-9]+)? \[(.*)\]$", line.rstrip())
    if m and m.group(2) == sys.argv[1]:
        names.add(m.group(1))
for n in sorted(names):
    print(".text." + n)
' "$B" > "$root/scripts/fsck-text-order.txt"
echo "$(wc -l < "$root/scripts/fsck-text-order.txt") functions in scripts/fsck-text-order.txt"
