#!/bin/sh
# bench/snapshot_diff.sh: `subvolume diff` of NCHANGE (default 100) changed
# files in a tree of NFILES (default 1000000) small files, against
# `rsync -an --delete --itemize-changes` of the two trees extracted on the
# host (issue 30; goal: diff at least 100x faster).
#
# The tree: bench/mixtree.py -n (0-4 KiB files, 500 a directory), put into
# a subvolume /base of a fresh image; a read-only snapshot /old of it; then
# NCHANGE files of /base changed in one `image shell` (picked with seed 1):
# a third rewritten (rm + put: deleted and added), a third chmod'ed, a third
# given an xattr, plus one new file per ten.  The two trees are extracted to
# the host (not timed).  Each of REPS (default 3) rounds times, warm cache:
#   diff    bcachefs subvolume diff IMG /old /base
#   rsync   rsync -an --delete --itemize-changes old/ base/
# and the best of each is printed with the ratio rsync / diff, and the
# counts of both (the diff's lines, rsync's itemized lines).
# NFILES=100000 for a run of a few minutes; with 1M files the build and
# the extraction (about 2000 files/s) take most of the time: EXTRACT=0.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}
REPS=${REPS:-3}
NFILES=${NFILES:-1000000}
NCHANGE=${NCHANGE:-100}
FS_SIZE=${FS_SIZE:-16G}
command -v rsync >/dev/null || { echo "bench/snapshot_diff.sh: needs rsync (apt-get install rsync)" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-bench-sdiff.XXXXXX")
[ -n "${KEEP:-}" ] && echo "keeping $dir" || trap 'rm -rf "$dir"' EXIT
now() { date +%s.%N; }
t0=$(now)
python3 "$root/bench/mixtree.py" -n "$dir/src" 1 "$NFILES" >/dev/null
t1=$(now)
"$B" format -q --fs-size="$FS_SIZE" "$dir/img"
"$B" subvolume create "$dir/img" /base
"$B" image put -r "$dir/img" "$dir/src" /base/tree
t2=$(now)
"$B" subvolume snapshot -r "$dir/img" /base /old
echo "tree: $NFILES files; host tree built in $(echo "$t1 - $t0" | bc) s, image in $(echo "$t2 - $t1" | bc) s"

phase() { echo "  $(date +%T) $*" >&2; }
# the changes, listed from the image (only /base/tree's files)
phase "listing"
"$B" image ls -R "$dir/img" /old/tree > "$dir/ls.txt"
python3 - "$dir" "$NCHANGE" <<'PY'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
files, cur = [], None
for line in open(os.path.join(d, "ls.txt")):
    line = line.rstrip("\n")
    if line.endswith(":"):
        cur = line[:-1]
    elif line and cur is not None:
        files.append(cur + "/" + line)
files = [f for f in files if os.path.basename(f).startswith("f")] or files
rnd = random.Random(1)
pick = rnd.sample(sorted(files), min(n, len(files)))
os.makedirs(os.path.join(d, "put"), exist_ok=True)
sh, host = [], []
for i, p in enumerate(pick):
    p = "/base" + p[len("/old"):]
    hp = os.path.join(d, "base", p[len("/base/"):])	# the same file in the host copy
    if i % 3 == 0:
        h = os.path.join(d, "put", "r%d" % i)
        open(h, "wb").write(rnd.randbytes(rnd.randrange(1, 4096)))
        sh += ["rm " + p, "put %s %s" % (h, p)]
        host.append(("copy", h, hp))
    elif i % 3 == 1:
        sh.append("chmod 600 " + p)
        host.append(("chmod", hp))
    else:
        sh.append("setfattr -n user.bench -v %d %s" % (i, p))
        host.append(("xattr", hp, b"%d" % i))
    if i % 10 == 0:
        sh.append("put %s %s.new" % (os.path.join(d, "put", "r0"), p))
        host.append(("copy", os.path.join(d, "put", "r0"), hp + ".new"))
open(os.path.join(d, "edits.sh"), "w").write("\n".join(sh) + "\n")
import pickle
pickle.dump(host, open(os.path.join(d, "host.pickle"), "wb"))
PY
phase "changing"
"$B" image shell "$dir/img" < "$dir/edits.sh"
if [ "${EXTRACT:-1}" = 1 ]; then
	phase "extracting"
	rm -rf "$dir/src"
	"$B" image extract "$dir/img" "$dir/old" /old
	"$B" image extract "$dir/img" "$dir/base" /base
else	# the host trees made on the host: the source, and a copy with the same edits
	phase "copying on the host (EXTRACT=0)"
	mkdir "$dir/old"
	mv "$dir/src" "$dir/old/tree"
	cp -a "$dir/old" "$dir/base"
	python3 - "$dir" <<'PY'
import os, pickle, shutil, sys
for op in pickle.load(open(os.path.join(sys.argv[1], "host.pickle"), "rb")):
    if op[0] == "copy":
        if os.path.exists(op[2]):
            os.unlink(op[2])
        shutil.copy(op[1], op[2])
    elif op[0] == "chmod":
        os.chmod(op[1], 0o600)
    else:
        os.setxattr(op[1], "user.bench", op[2])
PY
fi

phase "timing"
# best of REPS by wall time, with the CPU time (user + sys) of that run:
# a loaded machine stretches wall times, CPU times much less
tm() { # tm OUT CMD...: run with stdout to OUT; print "wall cpu" in seconds
	python3 -c '
import os, resource, subprocess, sys, time
r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t0 = time.monotonic()
subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w"), check=True)
t1 = time.monotonic(); r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.4f %.4f" % (t1 - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime))' "$@"
}
: > "$dir/t.open"; : > "$dir/t.diff"; : > "$dir/t.rsync"
for i in $(seq "$REPS"); do
	tm /dev/null "$B" image stat "$dir/img" / >> "$dir/t.open"
	tm "$dir/diff.out" "$B" subvolume diff "$dir/img" /old /base >> "$dir/t.diff"
	tm "$dir/rsync.out" rsync -an --delete --itemize-changes "$dir/old/" "$dir/base/" >> "$dir/t.rsync"
done
"$B" subvolume diff --json "$dir/img" /old /base > "$dir/diff.json"
set -- $(sort -n "$dir/t.diff" | head -1) $(sort -n "$dir/t.rsync" | head -1) $(sort -n "$dir/t.open" | head -1)
printf 'subvolume diff:  %7.3f s wall, %6.3f s cpu  (%d lines; %s inodes compared)\n' "$1" "$2" \
	"$(wc -l < "$dir/diff.out")" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["inodes_compared"])' "$dir/diff.json")"
printf 'rsync -an:       %7.3f s wall, %6.3f s cpu  (%d itemized lines)\n' "$3" "$4" "$(wc -l < "$dir/rsync.out")"
printf 'open+close only: %7.3f s wall, %6.3f s cpu  (image stat /)\n' "$5" "$6"
printf 'ratio rsync / diff: %.1fx wall, %.1fx cpu (goal: at least 100x)\n' \
	"$(echo "$3 / $1" | bc -l)" "$(echo "$4 / $2" | bc -l)"
