#!/bin/sh
# make bench (dump part; issue 33): bcachefs dump of a filesystem with many
# files against e2image -Q (qcow2 metadata image) of ext4 built from the
# same tree.  N files (default 100000; the issue's figure: N=1000000) of 20
# to 300 bytes, 100 to a directory, are built once under TMPDIR; then
#   format --source  -> bcachefs image; mke2fs -t ext4 -d -> ext4 image
#                       (both SIZE = N x 8 KiB + 256 MiB, sparse files)
#   bcachefs dump IMG OUT                (zstd where it pays)
#   bcachefs dump --no-compress IMG OUT
#   e2image -Q EXT4 OUT.qcow2
#   bcachefs dump --scramble-names IMG OUT   (once: SCRAMBLE=0 skips it)
# Each best of REPS (3) wall times, and the CPU seconds (user + system) of
# that run (on shared cores, where other work makes wall times wander, the
# steadier figure), images in the page cache; sizes are the output files'
# bytes (du: allocated, ls: apparent, the same here).  The
# dump must restore: undump, then fsck -n of the restored image exits 0
# (checked once, not timed).  KEEP=DIR builds the tree and images in DIR
# and keeps them, and a later run with the same KEEP and N reuses them.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B="$root/bcachefs"
N=${N:-100000}
REPS=${REPS:-3}
command -v mke2fs >/dev/null && command -v e2image >/dev/null ||
	{ echo "SKIP: no mke2fs/e2image (e2fsprogs)"; exit 0; }
if [ -n "${KEEP:-}" ]; then
	mkdir -p "$KEEP"
	dir=$(cd "$KEEP" && pwd)
	trap 'rm -f "$dir"/*.dump "$dir"/e.qcow2 "$dir"/r.img "$dir"/times.out' EXIT
	[ "$(cat "$dir/N" 2>/dev/null)" = "$N" ] || rm -rf "$dir/tree" "$dir/b.img" "$dir/e.img" "$dir/N"
else
	dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-dump.XXXXXX")
	trap 'rm -rf "$dir"' EXIT
fi
cd "$dir"
rm -f ./*.dump e.qcow2 r.img

size=$(( (N * 8 + 262144) / 1024 ))M
if [ ! -e N ]; then
python3 - "$N" <<'PY'
import os, random, sys
n = int(sys.argv[1]); rnd = random.Random(33)
for i in range(n):
    d = "tree/d%05d" % (i // 100)
    if i % 100 == 0:
        os.makedirs(d)
    with open("%s/file-%07d" % (d, i), "w") as f:
        f.write("x%07d " % i * rnd.randint(2, 30))
PY
t0=$(date +%s%N)
"$B" format -q --source tree --fs-size="$size" b.img
t1=$(date +%s%N)
mke2fs -q -t ext4 -N $((N + N / 10 + 1000)) -d tree e.img "$size" >/dev/null 2>&1
t2=$(date +%s%N)
echo "N=$N files, images of $size: format --source $(( (t1 - t0) / 1000000 )) ms, mke2fs -d $(( (t2 - t1) / 1000000 )) ms"
echo "$N" > N
else
	echo "N=$N files, images of $size (kept in $dir)"
fi

# best OUT CMD...: ms = best wall time of REPS runs (OUT removed before
# each), cpu = that run's user + system seconds
best() {
	out=$1; shift
	ms=
	for i in $(seq "$REPS"); do
		rm -f "$out"
		t0=$(date +%s%N)
		cpu_now; c0=$now
		"$@" >/dev/null
		t=$(( ($(date +%s%N) - t0) / 1000000 ))
		cpu_now
		c=$(awk -v a="$now" -v b="$c0" 'BEGIN { printf "%.2f", a - b }')
		if [ -z "$ms" ] || [ "$t" -lt "$ms" ]; then ms=$t; cpu=$c; fi
	done
	bytes=$(stat -c %s "$out")
}
# now = user + system seconds of the finished children of this shell
# (times runs here, not in a subshell, which would count its own)
cpu_now() {
	times > times.out
	now=$(awk 'NR == 2 { gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4 }' times.out)
}
e2image_q() { e2image -Q e.img e.qcow2 2>/dev/null; }
cat b.img e.img >/dev/null
best b.dump "$B" dump b.img b.dump;			d_ms=$ms; d_b=$bytes; d_cpu=$cpu
best p.dump "$B" dump --no-compress b.img p.dump;	p_ms=$ms; p_b=$bytes; p_cpu=$cpu
best e.qcow2 e2image_q;			e_ms=$ms; e_b=$bytes; e_cpu=$cpu

"$B" undump b.dump r.img >/dev/null
"$B" fsck -n r.img >/dev/null || { echo "FAIL: fsck -n of the restored image"; exit 1; }

if [ "${SCRAMBLE:-1}" != 0 ]; then
	REPS=1 best s.dump "$B" dump --scramble-names b.img s.dump;	s_ms=$ms; s_b=$bytes; s_cpu=$cpu
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }
f='%-34s %9s %7s %12s %9s %9s\n'
printf "$f" "" "ms" "cpu s" "bytes" "time/e2i" "size/e2i"
printf "$f" "bcachefs dump (zstd)" "$d_ms" "$d_cpu" "$d_b" "$(ratio "$d_ms" "$e_ms")" "$(ratio "$d_b" "$e_b")"
printf "$f" "bcachefs dump --no-compress" "$p_ms" "$p_cpu" "$p_b" "$(ratio "$p_ms" "$e_ms")" "$(ratio "$p_b" "$e_b")"
printf "$f" "e2image -Q (ext4)" "$e_ms" "$e_cpu" "$e_b" "1.00" "1.00"
[ -z "${s_ms:-}" ] ||
	printf "$f" "bcachefs dump --scramble-names" "$s_ms" "$s_cpu" "$s_b" "$(ratio "$s_ms" "$e_ms")" "$(ratio "$s_b" "$e_b")"
