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
# Each best of REPS (3) wall times, images in the page cache; sizes are the
# output files' bytes (du: allocated, ls: apparent, the same here).  The
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
	trap 'rm -f "$dir"/*.dump "$dir"/e.qcow2 "$dir"/r.img' EXIT
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

# best OUT CMD...: ms = best wall time of REPS runs (OUT removed before each)
best() {
	out=$1; shift
	ms=
	for i in $(seq "$REPS"); do
		rm -f "$out"
		t0=$(date +%s%N)
		"$@" >/dev/null
		t=$(( ($(date +%s%N) - t0) / 1000000 ))
		[ -z "$ms" ] || [ "$t" -lt "$ms" ] && ms=$t
	done
	bytes=$(stat -c %s "$out")
}
e2image_q() { e2image -Q e.img e.qcow2 2>/dev/null; }
cat b.img e.img >/dev/null
best b.dump "$B" dump b.img b.dump;			d_ms=$ms; d_b=$bytes
best p.dump "$B" dump --no-compress b.img p.dump;	p_ms=$ms; p_b=$bytes
best e.qcow2 e2image_q;			e_ms=$ms; e_b=$bytes

"$B" undump b.dump r.img >/dev/null
"$B" fsck -n r.img >/dev/null || { echo "FAIL: fsck -n of the restored image"; exit 1; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }
printf '%-34s %9s %12s %9s %9s\n' "" "ms" "bytes" "time/e2i" "size/e2i"
printf '%-34s %9s %12s %9s %9s\n' "bcachefs dump (zstd)" "$d_ms" "$d_b" "$(ratio "$d_ms" "$e_ms")" "$(ratio "$d_b" "$e_b")"
printf '%-34s %9s %12s %9s %9s\n' "bcachefs dump --no-compress" "$p_ms" "$p_b" "$(ratio "$p_ms" "$e_ms")" "$(ratio "$p_b" "$e_b")"
printf '%-34s %9s %12s %9s %9s\n' "e2image -Q (ext4)" "$e_ms" "$e_b" "1.00" "1.00"
