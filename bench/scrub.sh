#!/bin/sh
# make bench (scrub part): `data scrub` of a two-image --replicas=2
# filesystem holding DATA_MB MiB of file data (default 1024: each image
# holds a copy of it) against `cat` of the same two image files to
# /dev/null, the read limit.  Best of REPS (3) runs each; as root the page
# cache is dropped before every run (cold reads from the disk), otherwise
# both read from the page cache.  Prints the times and the throughput ratio
# cat/scrub (the issue's goal: >= 0.7).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B="$root/bcachefs"
REPS=${REPS:-3}
MB=${DATA_MB:-1024}
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-scrub.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cd "$dir"

cold=false
[ "$(id -u)" = 0 ] && [ -w /proc/sys/vm/drop_caches ] && cold=true
drop() { if $cold; then sync; echo 3 > /proc/sys/vm/drop_caches; fi; }

# best CMD...: ms = best wall time of REPS runs
best() {
	ms=
	for i in $(seq "$REPS"); do
		drop
		t0=$(date +%s%N)
		"$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; exit 1; }
		t1=$(date +%s%N)
		t=$(( (t1 - t0) / 1000000 ))
		if [ -z "$ms" ] || [ "$t" -lt "$ms" ]; then ms=$t; fi
	done
}

# DATA_MB of incompressible files (64 MiB each, different content), 2 copies
fs_mb=$(( MB + MB / 4 + 64 ))
"$B" format -q --replicas=2 --fs-size="${fs_mb}M" d0.img --fs-size="${fs_mb}M" d1.img
n=$(( (MB + 63) / 64 ))
for i in $(seq "$n"); do
	head -c $((64 << 20)) /dev/urandom > chunk
	"$B" image put d0.img:d1.img chunk "/f$i"
done
rm -f chunk
"$B" data scrub --json d0.img:d1.img > first.json
read_mb=$(sed -n 's/.*"bytes_read":\([0-9]*\),.*/\1/p' first.json)
read_mb=$(( read_mb >> 20 ))
img_mb=$(( ( $(du -k d0.img | cut -f1) + $(du -k d1.img | cut -f1) ) >> 10 ))

best cat d0.img d1.img; cat_ms=$ms
best "$B" data scrub d0.img:d1.img; scrub_ms=$ms
printf 'data %s MiB x 2 copies on two images (%s MiB allocated); %s page cache\n' "$MB" "$img_mb" \
	"$($cold && echo "cold (dropped before each run)" || echo "warm (not root: caches not dropped)")"
printf '%-40s %8s ms  %6s MiB/s\n' "cat d0.img d1.img >/dev/null" "$cat_ms" \
	"$(( img_mb * 1000 / (cat_ms ? cat_ms : 1) ))" \
	"data scrub d0.img:d1.img" "$scrub_ms" "$(( read_mb * 1000 / (scrub_ms ? scrub_ms : 1) ))"
awk -v a="$cat_ms" -v b="$scrub_ms" 'BEGIN { printf "scrub vs cat (time ratio cat/scrub, goal >= 0.7): %.2f\n", a / (b ? b : 1) }'
