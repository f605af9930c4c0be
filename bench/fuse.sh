#!/bin/sh
# make bench (FUSE part): bcachefs fusemount against fuse2fs on an ext4 image
# of the same size, both through FUSE on this machine, same workload:
#   untar     a tarball of /usr/include (BENCH_FUSE_SRC to change)
#   find+stat every file
#   seq write / seq read  fio, 1 GiB (BENCH_FUSE_SIZE), bs=1M
#   randwrite 4k          fio, 64 MiB, fsync every 32 writes
#   rm -rf    the untarred tree
# Prints each time and peer/ours (>1: we are faster).  Needs root and /dev/fuse.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B="$root/bcachefs"
SRC=${BENCH_FUSE_SRC:-/usr/include}
SIZE=${BENCH_FUSE_SIZE:-1G}
[ -c /dev/fuse ] && command -v fuse2fs >/dev/null && command -v fio >/dev/null || {
	echo "fuse bench: needs /dev/fuse, fuse2fs and fio; skipped"; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-fusebench.XXXXXX")
mnt="$dir/mnt"
cleanup() { cd /; fusermount3 -uz "$mnt" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
mkdir "$mnt"
tar -C "$(dirname "$SRC")" -cf "$dir/src.tar" "$(basename "$SRC")"

ms() { t0=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 1; }; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }

# run_all MOUNT_CMD...: the workload on a fresh mount; results in r_*
run_all() {
	"$@"
	for i in $(seq 50); do mountpoint -q "$mnt" && break; sleep 0.1; done
	r_untar=$(ms sh -c "tar -C '$mnt' -xf '$dir/src.tar' && sync -f '$mnt'")
	r_find=$(ms sh -c "find '$mnt' -exec stat -c %s {} + >/dev/null")
	r_seqw=$(ms fio --name=w --directory="$mnt" --size="$SIZE" --bs=1M --rw=write --ioengine=psync --end_fsync=1)
	sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
	r_seqr=$(ms fio --name=w --directory="$mnt" --size="$SIZE" --bs=1M --rw=read --ioengine=psync)
	r_rand=$(ms fio --name=r --directory="$mnt" --size=64M --bs=4k --rw=randwrite --ioengine=psync --fsync=32)
	r_rm=$(ms rm -rf "$mnt/$(basename "$SRC")" "$mnt/w.0.0" "$mnt/r.0.0")
	fusermount3 -u "$mnt"
	sleep 0.5
}

rm -f "$dir/ours.img" && "$B" format -q --fs-size=4G "$dir/ours.img"
run_all "$B" fusemount "$dir/ours.img" "$mnt"
o="$r_untar $r_find $r_seqw $r_seqr $r_rand $r_rm"
truncate -s 4G "$dir/ext4.img" && mke2fs -q -F -t ext4 "$dir/ext4.img"
run_all fuse2fs -o rw "$dir/ext4.img" "$mnt"
p="$r_untar $r_find $r_seqw $r_seqr $r_rand $r_rm"

echo "FUSE: bcachefs fusemount vs fuse2fs (ext4), $(du -sh "$dir/src.tar" | cut -f1) tarball of $SRC, fio $SIZE"
printf '%-26s %10s %10s %s\n' workload ours fuse2fs "fuse2fs/ours (>1: we are faster)"
set -- untar "find+stat" "seq write" "seq read" "4k randwrite+fsync/32" "rm -rf"
for name; do
	ov=$(echo $o | cut -d' ' -f1); o=$(echo $o | cut -d' ' -f2-)
	pv=$(echo $p | cut -d' ' -f1); p=$(echo $p | cut -d' ' -f2-)
	printf '%-26s %8sms %8sms %s\n' "$name" "$ov" "$pv" "$(awk -v a="$ov" -v b="$pv" 'BEGIN { if (a == 0) a = 1; printf "%.2f", b / a }')"
done
