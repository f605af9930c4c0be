#!/bin/sh
# bench/ec.sh: erasure coding against replication of the same fault
# tolerance (issue 34), offline, on six image files of IMG_MIB (256) MiB.
#
# One file of DATA_MIB (96) MiB of incompressible data put by format
# --source; then:
#   space     live user bytes (`fs usage --json`, summed over members) of
#             --replicas=3, and of --erasure-code --replicas=3 once `data
#             rebalance` built the RS(4,2) stripes; the ratio (the issue
#             asks for at most 0.55)
#   build     `data rebalance`: the stripe builder's wall time and MB/s of
#             file data striped (read from a copy, verified, written with
#             parity)
#   read      `image cat` of the file, healthy and with two of the six
#             images gone (-o degraded: rebuilt from the stripes); MB/s and
#             the ratio
# Wall seconds of one run each (open and close included).  Figures go to
# stdout, one line each.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}
DATA_MIB=${DATA_MIB:-96}
IMG_MIB=${IMG_MIB:-256}
dir=$(mktemp -d "${TMPDIR:-/dev/shm}/bch-bench-ec.XXXXXX")
trap 'rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM

now() { date +%s.%N; }
user_bytes() {
	"$B" fs usage --json "$1" | grep -o '"user": {"buckets": [0-9]*, "bytes": [0-9]*, "space": [0-9]*' |
		sed 's/.*space": //' | awk '{ s += $1 } END { printf "%.0f\n", s }'
}
imgs() { for i in 0 1 2 3 4 5; do printf '%s%s/%s%d.img' "$([ $i = 0 ] || echo :)" "$dir" "$1" $i; done; }
mbs() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / s / 1e6 }'; }

mkdir "$dir/src"
head -c $((DATA_MIB << 20)) /dev/urandom > "$dir/src/f"
bytes=$((DATA_MIB << 20))
for p in r e; do
	for i in 0 1 2 3 4 5; do truncate -s ${IMG_MIB}M "$dir/$p$i.img"; done
done
"$B" format -q --replicas=3 --source="$dir/src" $(imgs r | tr : ' ')
"$B" format -q --erasure-code --replicas=3 --source="$dir/src" $(imgs e | tr : ' ')
rep=$(user_bytes "$(imgs r)")

t0=$(now)
"$B" data rebalance "$(imgs e)" >/dev/null
t1=$(now)
build=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
ec=$(user_bytes "$(imgs e)")
echo "space: replicas=3 $rep bytes, RS(4,2) $ec bytes, ratio $(awk -v a="$ec" -v b="$rep" 'BEGIN { printf "%.3f", a / b }')"
echo "build: $DATA_MIB MiB striped in $build s ($(mbs $bytes $build) MB/s)"

t0=$(now)
"$B" image cat "$(imgs e)" /f > "$dir/out"
t1=$(now)
cmp -s "$dir/out" "$dir/src/f" || { echo "healthy read differs" >&2; exit 1; }
healthy=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
mkdir "$dir/gone"
mv "$dir/e1.img" "$dir/e2.img" "$dir/gone/"
t0=$(now)
"$B" image cat -o degraded "$(imgs e | tr : '\n' | grep -v -e /e1.img -e /e2.img | paste -sd:)" /f \
	> "$dir/out" 2>/dev/null
t1=$(now)
cmp -s "$dir/out" "$dir/src/f" || { echo "degraded read differs" >&2; exit 1; }
degraded=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
echo "read: healthy $healthy s ($(mbs $bytes $healthy) MB/s), two of six gone $degraded s" \
     "($(mbs $bytes $degraded) MB/s), ratio $(awk -v a="$healthy" -v b="$degraded" 'BEGIN { printf "%.2f", a / b }')"
