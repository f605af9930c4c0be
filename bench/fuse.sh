#!/bin/sh
# make bench (FUSE part): bcachefs fusemount against two peers on the same
# machine, images of the same size, same workload: fuse2fs (ext4 through
# FUSE, the like-for-like peer) and the kernel's ext4 on a loop device (what
# a FUSE filesystem costs against an in-kernel one):
#   untar     a tarball of /usr/include (BENCH_FUSE_SRC to change)
#   find+stat every file
#   seq write / seq read  fio, 1 GiB (BENCH_FUSE_SIZE), bs=1M
#   randwrite 4k          fio, 64 MiB, fsync every 32 writes
#   rm -rf    the untarred tree
# Prints each time and peer/ours for both peers (>1: we are faster).  The
# seq write row also gets a raw-disk column (issue 32): dd of the same size,
# bs=1M, conv=fsync, to a file beside the images (same filesystem), run
# just before ours' seq write; dd/ours says how close ours comes to what the disk
# under the image allows (1.00: as fast as the raw write).  Needs
# root and /dev/fuse; the ext4 row is left out ("-") without losetup.
# BENCH_FUSE_FLUSH_US=N: every flush of ours' image sleeps N microseconds
# after its fdatasync (BCACHEFS_TEST_FLUSH_DELAY, blockdev.h): a device
# whose cache flush is slow, as an SSD's (~1-5 ms) or a disk's, where this
# machine's image files flush in ~0.3 ms.  The peers are not slowed: it is
# for comparing two builds of ours (BCH=), not for the peer ratios.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}	# BCH: another build to measure
SRC=${BENCH_FUSE_SRC:-/usr/include}
SIZE=${BENCH_FUSE_SIZE:-1G}
[ -c /dev/fuse ] && command -v fuse2fs >/dev/null && command -v fio >/dev/null || {
	echo "fuse bench: needs /dev/fuse, fuse2fs and fio; skipped"; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-fusebench.XXXXXX")
mnt="$dir/mnt"
loop=
cleanup() {
	cd /
	fusermount3 -uz "$mnt" 2>/dev/null || true
	if [ -n "$loop" ]; then umount "$mnt" 2>/dev/null || true; losetup -d "$loop"; fi
	rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$mnt"
tar -C "$(dirname "$SRC")" -cf "$dir/src.tar" "$(basename "$SRC")"

ms() { t0=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 1; }; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }

# run_all MOUNT_CMD...: the workload on a fresh mount; results in r_*.
# $unmount is the command that unmounts it.
unmount="fusermount3 -u"
run_all() {
	"$@"
	for i in $(seq 50); do mountpoint -q "$mnt" && break; sleep 0.1; done
	r_untar=$(ms sh -c "tar -C '$mnt' -xf '$dir/src.tar' && sync -f '$mnt'")
	r_find=$(ms sh -c "find '$mnt' -exec stat -c %s {} + >/dev/null")
	[ -z "$with_dd" ] || raw_dd
	r_seqw=$(ms fio --name=w --directory="$mnt" --size="$SIZE" --bs=1M --rw=write --ioengine=psync --end_fsync=1)
	sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
	r_seqr=$(ms fio --name=w --directory="$mnt" --size="$SIZE" --bs=1M --rw=read --ioengine=psync)
	r_rand=$(ms fio --name=r --directory="$mnt" --size=64M --bs=4k --rw=randwrite --ioengine=psync --fsync=32)
	r_rm=$(ms rm -rf "$mnt/$(basename "$SRC")" "$mnt/w.0.0" "$mnt/r.0.0")
	$unmount "$mnt"
	sleep 0.5
}

# raw: dd of $SIZE (bs=1M) with conv=fsync beside the images, the disk's own pace
raw_dd() {
	n=$(numfmt --from=iec "$SIZE"); n=$(( (n + 1048575) / 1048576 ))
	r_dd=$(ms dd if=/dev/zero of="$dir/dd.raw" bs=1M count="$n" conv=fsync)
	rm -f "$dir/dd.raw"
}
with_dd=1	# ours' run only: dd just before its seq write
rm -f "$dir/ours.img" && "$B" format -q --fs-size=4G "$dir/ours.img"
[ -z "${BENCH_FUSE_FLUSH_US:-}" ] || export BCACHEFS_TEST_FLUSH_DELAY="$dir/ours.img=$BENCH_FUSE_FLUSH_US"
run_all "$B" fusemount "$dir/ours.img" "$mnt"
unset BCACHEFS_TEST_FLUSH_DELAY
with_dd=
o="$r_untar $r_find $r_seqw $r_seqr $r_rand $r_rm"
truncate -s 4G "$dir/ext4.img" && mke2fs -q -F -t ext4 "$dir/ext4.img"
run_all fuse2fs -o rw "$dir/ext4.img" "$mnt"
p="$r_untar $r_find $r_seqw $r_seqr $r_rand $r_rm"
k="- - - - - -"
if command -v losetup >/dev/null && truncate -s 4G "$dir/kext4.img" && mke2fs -q -F -t ext4 "$dir/kext4.img" &&
   loop=$(losetup -f --show "$dir/kext4.img"); then
	unmount=umount
	run_all mount -t ext4 "$loop" "$mnt"
	k="$r_untar $r_find $r_seqw $r_seqr $r_rand $r_rm"
	losetup -d "$loop"; loop=
fi

# ratio OURS PEER: PEER/OURS, or - when a row is missing
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "-") { print "-"; exit } if (a == 0) a = 1; printf "%.2f", b / a }'; }
echo "FUSE: bcachefs fusemount vs fuse2fs (ext4 through FUSE) and kernel ext4 (loop device), $(du -sh "$dir/src.tar" | cut -f1) tarball of $SRC, fio $SIZE"
printf '%-24s %9s %9s %9s %13s %11s %9s %8s\n' workload ours fuse2fs ext4 fuse2fs/ours ext4/ours dd dd/ours
set -- untar "find+stat" "seq write" "seq read" "4k randwrite+fsync/32" "rm -rf"
for name; do
	ov=$(echo $o | cut -d' ' -f1); o=$(echo $o | cut -d' ' -f2-)
	pv=$(echo $p | cut -d' ' -f1); p=$(echo $p | cut -d' ' -f2-)
	kv=$(echo $k | cut -d' ' -f1); k=$(echo $k | cut -d' ' -f2-)
	dv=- dr=
	[ "$name" != "seq write" ] || { dv=${r_dd}ms; dr=$(ratio "$ov" "$r_dd"); }
	printf '%-24s %7sms %7sms %7sms %13s %11s %9s %8s\n' "$name" "$ov" "$pv" "$kv" "$(ratio "$ov" "$pv")" "$(ratio "$ov" "$kv")" "$dv" "$dr"
done
echo "(peer/ours: >1 means we are faster; dd: raw write of $SIZE with conv=fsync beside the images)"
