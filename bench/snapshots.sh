#!/bin/sh
# bench/snapshots.sh: what snapshots cost (issue 30).
#
#   create   `subvolume snapshot` of / with SIZES files in the source (default
#            "10000 1000000"; each an image built with format --source from a
#            tree of empty and small files): best of REPS (3) runs, each on
#            a fresh copy of the image (the copy not timed).  A snapshot
#            copies no key, so the ratio largest/smallest should stay near
#            1 (the goal: at most 1.2; btrfs snapshots are constant time).
#            Offline the time includes opening and closing the filesystem,
#            as a user's command does (a larger filesystem opens slower);
#            mounted (fusemount, when /dev/fuse is there) it is the snapshot
#            alone, through the daemon's control channel.
#   behind   the cost of snapshots behind a subvolume: put -r of TREE
#            (default /usr/include) into an image, then extract it, on a
#            plain image and on one whose root subvolume has NSNAP (100)
#            snapshots behind it (every lookup climbs that chain); best of
#            REPS, wall and user CPU seconds, ratio plain/snapshots (goal:
#            at least 0.9).
#   mounted  bench/fuse.sh's workloads through fusemount (untar of TREE, find+stat,
#            fio sequential write and read of FUSE_SIZE (256M), 4k random
#            writes with fsync every 32 (16M), rm -rf), each on a fresh mount
#            of a copy of a plain image and of one whose root has NSNAP
#            snapshots behind it; per row the wall milliseconds and the
#            daemon's CPU milliseconds, and both ratios plain/snapshots
#            (goal: at least 0.9).  Needs /dev/fuse and fio.
#   delete   deleting a snapshot that alone holds DELETE_MIB (1024) MiB in
#            64 MiB files (the files removed from / after the snapshot),
#            against `image rm -r` of the same files from an image without
#            snapshots.
# PARTS picks parts (default "create behind mounted delete").
# Figures go to stdout, one line each, with the ratio.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}
REPS=${REPS:-3}
SIZES=${SIZES:-10000 1000000}
DELETE_MIB=${DELETE_MIB:-1024}
NSNAP=${NSNAP:-100}
TREE=${TREE:-/usr/include}
PARTS=${PARTS:-create behind mounted delete}
FUSE_SIZE=${FUSE_SIZE:-256M}
part() { case " $PARTS " in *" $1 "*) return 0;; esac; return 1; }
dir=$(mktemp -d "${TMPDIR:-/dev/shm}/bch-bench-snap.XXXXXX")
trap 'fusermount3 -uz "$dir/mnt" 2>/dev/null || true; rm -rf "$dir"' EXIT

now() { date +%s.%N; }
# a snapshot of the mounted root under a new name each time (a counter: a
# listing of the mount's root would be timed too, and grows with the tree)
mk=0
snap_mounted() {
	mk=$((mk + 1))
	"$B" subvolume snapshot "$dir/mnt" "$dir/mnt/m$mk"
}
best() {	# best CMD...: the shortest of REPS runs, in seconds
	b=
	for i in $(seq "$REPS"); do
		$prep
		t0=$(now); "$@" >/dev/null 2>"$dir/err" || { echo "failed: $* ($(cat "$dir/err"))" >&2; exit 1; }; t1=$(now)
		t=$(echo "$t1 - $t0" | bc)
		if [ -z "$b" ] || [ "$(echo "$t < $b" | bc)" = 1 ]; then b=$t; fi
	done
	echo "$b"
}

# ---- create
first=
part create || SIZES=
for n in $SIZES; do
	rm -rf "$dir/tree"
	python3 - "$dir/tree" "$n" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per = 1000
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // per))
    if i % per == 0:
        os.makedirs(d)
    with open(os.path.join(d, "f%06d" % i), "wb") as f:
        if i % 10 == 0:
            f.write(b"x" * 100)
PY
	"$B" format -q --source "$dir/tree" "$dir/base.img"	# the smallest image (5% free)
	rm -rf "$dir/tree"
	prep="cp $dir/base.img $dir/t.img"
	t=$(best "$B" subvolume snapshot "$dir/t.img" / /snap)
	"$B" image ls "$dir/t.img" /snap/d0000 | grep -q f000001 || { echo "the snapshot does not hold the tree" >&2; exit 1; }
	echo "snapshot create offline, $n files: $t s"
	[ -n "$first" ] || first=$t
	last=$t
	fpid=
	if [ -c /dev/fuse ] && mkdir -p "$dir/mnt"; then
		"$B" fusemount -f "$dir/t.img" "$dir/mnt" 2>/dev/null & fpid=$!
		for i in $(seq 100); do mountpoint -q "$dir/mnt" && break; sleep 0.1; done
		mountpoint -q "$dir/mnt" || { kill $fpid 2>/dev/null; wait $fpid; fpid=; }
	fi
	if [ -n "$fpid" ]; then
		prep=:
		tm=$(best snap_mounted)
		fusermount3 -u "$dir/mnt"
		wait $fpid	# the daemon closes the image before it goes
		echo "snapshot create mounted, $n files: $tm s"
		[ -n "${mfirst:-}" ] || mfirst=$tm
		mlast=$tm
	fi
	rm -f "$dir/base.img" "$dir/t.img"
done
[ -z "$first" ] || echo "snapshot create ratio offline (largest/smallest tree): $(echo "scale=2; $last / $first" | bc)"
[ -z "${mfirst:-}" ] || echo "snapshot create ratio mounted (largest/smallest tree): $(echo "scale=2; $mlast / $mfirst" | bc)"

# ---- behind
if part behind; then
"$B" format -q --fs-size=2G "$dir/plain0.img"
cp "$dir/plain0.img" "$dir/snap0.img"
for i in $(seq "$NSNAP"); do echo "subvolume-snapshot / /s$i"; done | "$B" image shell "$dir/snap0.img"
for kind in plain snap; do
	prep="cp $dir/${kind}0.img $dir/t.img"
	eval "put_$kind=\$(best \"\$B\" image put -r \"\$dir/t.img\" \"\$TREE\" /tree)"
	cp "$dir/${kind}0.img" "$dir/${kind}1.img"
	"$B" image put -r "$dir/${kind}1.img" "$TREE" /tree
	prep="rm -rf $dir/ex"
	eval "ext_$kind=\$(best \"\$B\" image extract \"\$dir/${kind}1.img\" \"\$dir/ex\" /tree)"
done
rm -rf "$dir/ex" "$dir"/plain?.img "$dir"/snap?.img
echo "put -r $TREE: plain $put_plain s, $NSNAP snapshots behind $put_snap s; ratio $(echo "scale=2; $put_plain / $put_snap" | bc)"
echo "extract: plain $ext_plain s, $NSNAP snapshots behind $ext_snap s; ratio $(echo "scale=2; $ext_plain / $ext_snap" | bc)"
fi

# ---- mounted: bench/fuse.sh's rows in a subvolume with snapshots behind it
# Each row: wall milliseconds and the daemon's CPU milliseconds (user +
# system, from /proc/PID/stat) while it ran: on shared cores the wall time
# swings with the other load, the daemon's CPU much less.
hz=$(getconf CLK_TCK)
dticks() { awk '{ print $14 + $15 }' "/proc/$dpid/stat"; }
ms() {
	c0=$(dticks); t0=$(date +%s%N)
	"$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; exit 1; }
	t1=$(date +%s%N); c1=$(dticks)
	echo "$(( (t1 - t0) / 1000000 )) $(( (c1 - c0) * 1000 / hz ))"
}
fuse_rows() {	# fuse_rows IMAGE: the rows' milliseconds (wall, daemon CPU) on a fresh mount of IMAGE
	m="$dir/mnt"
	mkdir -p "$m"
	"$B" fusemount -f "$1" "$m" >/dev/null 2>"$dir/daemon.err" & dpid=$!
	for i in $(seq 100); do mountpoint -q "$m" && break; sleep 0.1; done
	mountpoint -q "$m" || { echo "fusemount $1 failed: $(cat "$dir/daemon.err")" >&2; exit 1; }
	u=$(ms sh -c "tar -C '$m' -xf '$dir/src.tar' && sync -f '$m'")
	# the untarred tree, as rm -rf takes it: the snapshot roots /s1... are not in a plain image
	f=$(ms sh -c "find '$m/$(basename "$TREE")' -exec stat -c %s {} + >/dev/null")
	w=$(ms fio --name=w --directory="$m" --size="$FUSE_SIZE" --bs=1M --rw=write --ioengine=psync --end_fsync=1)
	sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
	r=$(ms fio --name=w --directory="$m" --size="$FUSE_SIZE" --bs=1M --rw=read --ioengine=psync)
	x=$(ms fio --name=r --directory="$m" --size=16M --bs=4k --rw=randwrite --ioengine=psync --fsync=32)
	d=$(ms rm -rf "$m/$(basename "$TREE")" "$m/w.0.0" "$m/r.0.0")
	fusermount3 -u "$m"
	wait $dpid	# the daemon closes the image before it goes
	echo "$u $f $w $r $x $d"
}
ratio() { [ "$2" -gt 0 ] && echo "scale=2; $1 / $2" | bc || echo -; }
if part mounted && [ -c /dev/fuse ] && command -v fio >/dev/null; then
	tar -C "$(dirname "$TREE")" -cf "$dir/src.tar" "$(basename "$TREE")"
	"$B" format -q --fs-size=2G "$dir/plain.img"
	cp "$dir/plain.img" "$dir/snaps.img"
	for i in $(seq "$NSNAP"); do echo "subvolume-snapshot / /s$i"; done | "$B" image shell "$dir/snaps.img"
	for rep in $(seq "$REPS"); do
		cp "$dir/plain.img" "$dir/t.img"
		pl_rows=$(fuse_rows "$dir/t.img")
		cp "$dir/snaps.img" "$dir/t.img"
		set -- $pl_rows $(fuse_rows "$dir/t.img")
		echo "mounted, $NSNAP snapshots behind against plain (ms, daemon CPU ms; ratios plain/snapshots), run $rep:"
		for row in untar find+stat seq_write seq_read 4k_rand+fsync rm_rf; do
			eval "pl=\${1} plc=\${2} sn=\${13} snc=\${14}"
			echo "  $row: plain $pl (CPU $plc), snapshots $sn (CPU $snc), ratio $(ratio "$pl" "$sn"), CPU ratio $(ratio "$plc" "$snc")"
			shift 2
		done
	done
	rm -f "$dir/plain.img" "$dir/snaps.img" "$dir/t.img" "$dir/src.tar"
fi

# ---- delete
part delete || exit 0
mkdir "$dir/data"
for i in $(seq $((DELETE_MIB / 64))); do
	head -c $((64 << 20)) /dev/urandom > "$dir/data/f$i"
done
size=$(( DELETE_MIB * 2 + 256 ))
"$B" format -q --fs-size="${size}M" "$dir/plain.img"
"$B" image put -r "$dir/plain.img" "$dir/data" /data
cp "$dir/plain.img" "$dir/snapbase.img"
"$B" subvolume snapshot "$dir/snapbase.img" / /snap
"$B" image rm -r "$dir/snapbase.img" /data
rm -rf "$dir/data"
prep="cp $dir/snapbase.img $dir/t.img"
td=$(best "$B" subvolume delete "$dir/t.img" /snap)
prep="cp $dir/plain.img $dir/t.img"
tr=$(best "$B" image rm -r "$dir/t.img" /data)
echo "delete a snapshot holding $DELETE_MIB MiB alone: $td s; image rm -r of the same files: $tr s; ratio $(echo "scale=2; $td / $tr" | bc)"
