#!/bin/sh
# bench/update.sh: `image update` after changing NCHANGE (default 100) files
# of a large tree, against rebuilding the image with `format --source`
# (issue 33; goal: update at least 20x faster).
#
# The tree: SRC if set, else a copy of /usr/include and /usr/share (the
# 55k-file tree of bench/run.sh; BENCH_TREE="/usr/include" for a smaller
# one).  An image is built from it; then NCHANGE regular files, picked with
# a fixed seed (1), each get a line appended (new size and mtime).  Each
# of REPS (default 3) rounds times, with a warm page cache:
#   rebuild   format --source of the changed tree into a fresh image file
#   update    image update of a copy of the old image (the copy, and its
#             writeback to disk, not timed: an image file being updated has
#             been on disk for a while; otherwise update's first flush pays
#             for writing the whole copy)
#   compare   image update --dry-run: the walk alone (DIR and the image's
#             metadata read, compared; nothing opened read-write)
# and the best of each is printed with the ratio rebuild / update (and the
# medians, with their ratio: on a shared machine the best is luck).  The
# update's --json counts show that it wrote only what changed.  Then, once
# and untimed, what the rest of update's time (update - walk: the
# read-write open, the changes, the close) is made of: its opens of the
# image, its flushes, and what it read through the read-write descriptor
# (strace -f, when strace is there).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}
REPS=${REPS:-3}
NCHANGE=${NCHANGE:-100}
FS_SIZE=${FS_SIZE:-4G}
BENCH_TREE=${BENCH_TREE:-/usr/include /usr/share}
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-bench-update.XXXXXX")
trap 'rm -rf "$dir"' EXIT

if [ -n "${SRC:-}" ]; then
	mkdir "$dir/tree"
	cp -a "$SRC/." "$dir/tree/"
else
	mkdir "$dir/tree"
	for t in $BENCH_TREE; do cp -a "$t" "$dir/tree/" 2>/dev/null || true; done
fi
src=$dir/tree
nfiles=$(find "$src" | wc -l)
bytes=$(du -sb "$src" | cut -f1)
echo "tree: $nfiles files, $((bytes / 1048576)) MiB; changing $NCHANGE files"

"$B" format -q --fs-size="$FS_SIZE" --source "$src" "$dir/base.img"
python3 - "$src" "$NCHANGE" <<'PY'
import os, random, stat, sys
root, n = sys.argv[1], int(sys.argv[2])
files = []
for dp, dns, fns in os.walk(root):
    for f in fns:
        p = os.path.join(dp, f)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o200:
            files.append(p)
files.sort()
for p in random.Random(1).sample(files, min(n, len(files))):
    with open(p, 'a') as f:
        f.write('\n/* changed by bench/update.sh */\n')
PY
# the tree's and the base image's writeback is theirs, not the first rebuild's
sync -f "$dir"

# timed CMD...: "wall cpu" seconds (cpu: user + system, of every thread), so
# a run on a busy machine can be read: wall grows with the load, cpu less
timed() {
	/usr/bin/time -f '%e %U %S' -o "$dir/time" "$@" || exit 1
	awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$dir/time"
}
best_rebuild= best_update= cpu_rebuild= cpu_update= best_compare= cpu_compare=
for i in $(seq "$REPS"); do
	rm -f "$dir/new.img"
	set -- $(timed "$B" format -q --fs-size="$FS_SIZE" --source "$src" "$dir/new.img")
	r=$1 rc=$2
	echo "$r" >> "$dir/all.rebuild"
	cp --sparse=always "$dir/base.img" "$dir/upd.img"
	sync "$dir/upd.img"	# the copy's writeback is the copy's, not the update's
	set -- $(timed sh -c '"$1" image update --json "$2" "$3" > "$4"' sh "$B" "$dir/upd.img" \
		"$src" "$dir/json")
	u=$1 uc=$2
	echo "$u" >> "$dir/all.update"
	if [ -z "$best_rebuild" ] || [ "$(echo "$r < $best_rebuild" | bc)" = 1 ]; then
		best_rebuild=$r cpu_rebuild=$rc
	fi
	if [ -z "$best_update" ] || [ "$(echo "$u < $best_update" | bc)" = 1 ]; then
		best_update=$u cpu_update=$uc
	fi
	cp --sparse=always "$dir/base.img" "$dir/cmp.img"
	sync "$dir/cmp.img"
	set -- $(timed sh -c '"$1" image update --dry-run "$2" "$3" > /dev/null' sh "$B" \
		"$dir/cmp.img" "$src")
	echo "$1" >> "$dir/all.compare"
	if [ -z "$best_compare" ] || [ "$(echo "$1 < $best_compare" | bc)" = 1 ]; then
		best_compare=$1 cpu_compare=$2
	fi
done
# the counts (the list of changes is one element per file changed here)
echo "update counts: $(python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); n = len(d.pop("changes", []))
print(json.dumps(d), "and", n, "changes listed")' "$dir/json")"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
printf '%-28s %10s %10s\n' "" "seconds" "cpu s"
printf '%-28s %10.3f %10.2f\n' "format --source (rebuild)" "$best_rebuild" "$cpu_rebuild"
printf '%-28s %10.3f %10.2f\n' "image update" "$best_update" "$cpu_update"
printf '%-28s %10.3f %10.2f\n' "  of it the walk (--dry-run)" "$best_compare" "$cpu_compare"
printf 'ratio rebuild / update: %.1fx (goal >= 20x)\n' "$(echo "$best_rebuild / $best_update" | bc -l)"
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mr=$(median "$dir/all.rebuild") mu=$(median "$dir/all.update") mc=$(median "$dir/all.compare")
printf 'medians of %s: rebuild %.3f, update %.3f (walk %.3f): ratio %.1fx\n' "$REPS" "$mr" "$mu" "$mc" \
	"$(echo "$mr / $mu" | bc -l)"
# what the rest is made of (untimed): opens of the image, flushes
if command -v strace >/dev/null; then
	cp --sparse=always "$dir/base.img" "$dir/upd.img"
	sync "$dir/upd.img"
	strace -f -qq --seccomp-bpf -e trace=openat,fdatasync,fsync,pread64 -o "$dir/strace" \
		"$B" image update "$dir/upd.img" "$src" > /dev/null
	# what the read-write descriptor read (the read-write start and the
	# changes: the superblocks again, and with a second open every journal
	# bucket head and node the check pass had read already)
	rw_read=$(awk '/upd.img", O_RDWR/ { fd = $NF + 0; on = 1; next }
		on && $2 ~ "^pread64\\(" fd "," { n++; b += $NF }
		END { printf "%d reads, %d KiB", n, b / 1024 }' "$dir/strace")
	echo "update: $(grep -c 'upd.img' "$dir/strace") opens of the image," \
		"$(grep -c -E 'fdatasync|fsync' "$dir/strace") fdatasync/fsync calls;" \
		"read-write descriptor: $rw_read"
fi
