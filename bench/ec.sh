#!/bin/sh
# bench/ec.sh: erasure coding against replication of the same fault
# tolerance (issue 34), on six image files of IMG_MIB (256) MiB.
# PARTS (default "offline fuse") picks the parts; REPS (3) runs of the FUSE
# part, alternating the two layouts, median taken.
#
# offline: one file of DATA_MIB (96) MiB of incompressible data put by
# format --source; then:
#   space     live user bytes (`fs usage --json`, summed over members) of
#             --replicas=3, and of --erasure-code --replicas=3 once `data
#             rebalance` built the RS(4,2) stripes; the ratio (the issue
#             asks for at most 0.55)
#   build     `data rebalance`: the stripe builder's wall time and MB/s of
#             file data striped (format --source wrote one copy to stripe
#             candidate buckets: read, verified, parity written)
#   read      `image cat` of the file, healthy and with two of the six
#             images gone (-o degraded: rebuilt from the stripes); MB/s and
#             the ratio
# fuse: the same six images, empty, --replicas=3 against --erasure-code
# --replicas=3 (RS(4,2)), each through `fusemount -f`:
#   write     dd of the DATA_MIB file into the mount, bs=1M conv=fsync
#             (the data is written replicated first in both layouts; with
#             RS(4,2) one copy goes to stripe candidate buckets, which the
#             daemon's background rebalance makes the data blocks of
#             stripes in place, writing only parity, while the write goes on)
#   stripe    then `data rebalance --wait MNT` (the rest of the stripes;
#             RS(4,2) only): write + stripe is the time until the data
#             sits in stripes, its MB/s the striped write's throughput
#   deferred  RS(4,2) again mounted -o norebalance: the write alone (no
#             builder beside it), then data rebalance --wait builds every
#             stripe: where the time goes
#   read      after an unmount and a new mount (no page cache): dd of the
#             file to /dev/null, bs=1M (RS(4,2): from the data blocks)
#   the ratios RS(4,2)/replicas=3 of MB/s (the issue asks for at least 0.8),
#   and the space each takes (fs usage --json of the mount).
# Wall seconds (open and close included offline).  Figures go to stdout,
# one line each, with the load average at the start.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}
DATA_MIB=${DATA_MIB:-96}
IMG_MIB=${IMG_MIB:-256}
PARTS=${PARTS:-offline fuse}
REPS=${REPS:-3}
dir=$(mktemp -d "${TMPDIR:-/dev/shm}/bch-bench-ec.XXXXXX")
pid=
trap 'if [ -n "$pid" ]; then fusermount3 -uz "$dir/mnt" 2>/dev/null; wait "$pid"; fi; rm -rf "$dir"' EXIT
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
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

offline() {
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
}

# mount_fs PREFIX: fusemount -f of the six images PREFIXn.img at $dir/mnt
mount_fs() {
	mkdir -p "$dir/mnt"
	"$B" fusemount -f ${mopts:+-o $mopts} "$(imgs "$1")" "$dir/mnt" 2>>"$dir/fuse.log" &
	pid=$!
	for _ in $(seq 100); do
		mountpoint -q "$dir/mnt" && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "fusemount of $1 failed: $(tail -3 "$dir/fuse.log")" >&2
	exit 1
}
umount_fs() {
	fusermount3 -u "$dir/mnt"
	wait "$pid" || { echo "fusemount exited $?: $(tail -3 "$dir/fuse.log")" >&2; exit 1; }
	pid=
}

# fuse_one PREFIX FORMAT-ARGS...: one run (mount options in $mopts); sets w (write s),
# s (stripe s), r (read s), sp (space)
fuse_one() {
	pfx=$1; shift
	for i in 0 1 2 3 4 5; do rm -f "$dir/$pfx$i.img"; truncate -s ${IMG_MIB}M "$dir/$pfx$i.img"; done
	"$B" format -q "$@" $(imgs "$pfx" | tr : ' ')
	mount_fs "$pfx"
	t0=$(now)
	dd if="$dir/src/f" of="$dir/mnt/f" bs=1M conv=fsync status=none
	t1=$(now)
	w=$(secs "$t0" "$t1")
	s=0
	if [ "$pfx" != fr ]; then
		t0=$(now)
		"$B" data rebalance --wait "$dir/mnt" >/dev/null
		t1=$(now)
		s=$(secs "$t0" "$t1")
		ecd=$("$B" fs usage --json "$dir/mnt" | python3 -c 'import json, sys; print(json.load(sys.stdin)["erasure_coded"]["data"])')
		[ "$ecd" -ge "$bytes" ] || { echo "RS(4,2): only $ecd bytes striped" >&2; exit 1; }
	fi
	sp=$("$B" fs usage --json "$dir/mnt" | python3 -c 'import json, sys; print(sum(d["user"]["space"] for d in json.load(sys.stdin)["devices"]))')
	umount_fs
	mopts= mount_fs "$pfx"
	t0=$(now)
	dd if="$dir/mnt/f" of=/dev/null bs=1M status=none
	t1=$(now)
	r=$(secs "$t0" "$t1")
	cmp -s "$dir/mnt/f" "$dir/src/f" || { echo "$pfx: the file reads back other data" >&2; exit 1; }
	umount_fs
}

fuse() {
	command -v fusermount3 >/dev/null && [ -c /dev/fuse ] || { echo "fuse: needs /dev/fuse and fusermount3" >&2; exit 1; }
	rw= rr= ew= es= ews= er= dw= ds=
	for n in $(seq "$REPS"); do
		mopts= fuse_one fr --replicas=3
		rw="$rw $w" rr="$rr $r" rsp=$sp
		mopts=norebalance fuse_one fd --erasure-code --replicas=3
		dw="$dw $w" ds="$ds $s"
		mopts= fuse_one fe --erasure-code --replicas=3
		ew="$ew $w" es="$es $s" ews="$ews $(awk -v a="$w" -v b="$s" 'BEGIN { printf "%.3f", a + b }')" er="$er $r" esp=$sp
		echo "fuse run $n: replicas=3 write $(mbs $bytes $(echo $rw | awk '{ print $NF }')) MB/s," \
		     "read $(mbs $bytes $(echo $rr | awk '{ print $NF }')) MB/s; RS(4,2) write $(mbs $bytes $w) MB/s," \
		     "write+stripe $(mbs $bytes $(echo $ews | awk '{ print $NF }')) MB/s, read $(mbs $bytes $r) MB/s;" \
		     "deferred: write $(mbs $bytes $(echo $dw | awk '{ print $NF }')) MB/s, then stripe" \
		     "$(echo $ds | awk '{ print $NF }') s"
	done
	mdw=$(echo $dw | median) mds=$(echo $ds | median)
	mrw=$(echo $rw | median) mrr=$(echo $rr | median) mew=$(echo $ew | median)
	mews=$(echo $ews | median) mer=$(echo $er | median)
	echo "fuse write: replicas=3 $(mbs $bytes $mrw) MB/s, RS(4,2) $(mbs $bytes $mew) MB/s" \
	     "(ratio $(awk -v a="$mrw" -v b="$mew" 'BEGIN { printf "%.2f", a / b }')), RS(4,2) write + stripe" \
	     "$(mbs $bytes $mews) MB/s (ratio $(awk -v a="$mrw" -v b="$mews" 'BEGIN { printf "%.2f", a / b }'))"
	echo "fuse deferred (RS(4,2) -o norebalance): write $(mbs $bytes $mdw) MB/s" \
	     "(ratio $(awk -v a="$mrw" -v b="$mdw" 'BEGIN { printf "%.2f", a / b }') to replicas=3), then" \
	     "data rebalance --wait $mds s ($(mbs $bytes $mds) MB/s of data striped)"
	echo "fuse read: replicas=3 $(mbs $bytes $mrr) MB/s, RS(4,2) $(mbs $bytes $mer) MB/s" \
	     "(ratio $(awk -v a="$mrr" -v b="$mer" 'BEGIN { printf "%.2f", a / b }'))"
	echo "fuse space: replicas=3 $rsp bytes, RS(4,2) $esp bytes, ratio $(awk -v a="$esp" -v b="$rsp" 'BEGIN { printf "%.3f", a / b }')"
	echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
}

for part in $PARTS; do
	case $part in
	offline|fuse) "$part" ;;
	*) echo "unknown part $part (offline, fuse)" >&2; exit 1 ;;
	esac
done
