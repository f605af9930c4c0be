#!/bin/bash
# The cost of metadata copies on one device (issue 29): the same work with
# --metadata-replicas=1 and =2 on one image file, and the ratio (goal: at most
# 1.2x on the metadata-heavy rows).
#   format    format --source SRC into a SIZE image
#   fsck      fsck -n -f of that image
#   untar     tar x of SRC's tarball into a fusemount of an empty SIZE image
#   find      find -exec stat of the untarred tree (after a remount: cold
#             daemon, warm page cache)
#   rm        rm -rf of it
# Each row is the median of REPS runs; a run that fails stops the script
# (exit 1) rather than being timed.  SRC (default /usr/include), SIZE (2G),
# REPS (3), TMPDIR (where the images go; default /tmp).
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${B:-$here/../bcachefs}
SRC=${SRC:-/usr/include}
SIZE=${SIZE:-2G}
REPS=${REPS:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/bch-metacopies.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
	mountpoint -q "$mnt" && umount "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT
die() { echo "metacopies: $*" >&2; exit 1; }

[ -x "$B" ] || die "build $B first"
[ -c /dev/fuse ] || die "no /dev/fuse"
tar cf "$work/src.tar" -C "$(dirname "$SRC")" "$(basename "$SRC")" 2>/dev/null || die "tar of $SRC"

now() { date +%s.%N; }
# timed VAR CMD...: seconds of CMD into VAR; a failure stops the script
timed() {
	local var=$1 t0 rc; shift
	t0=$(now)
	"$@" >"$work/out" 2>&1; rc=$?
	[ $rc = 0 ] || die "'$*' exited $rc: $(tail -3 "$work/out")"
	printf -v "$var" '%s' "$(echo "$(now) - $t0" | bc)"
}
median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }

declare -A res
for mr in 1 2; do
	f=() k=() u=() s=() r=()
	for rep in $(seq "$REPS"); do
		img=$work/m$mr.img
		rm -f "$img"
		timed t $B format -q --metadata-replicas=$mr --fs-size=$SIZE --source="$SRC" "$img"; f+=("$t")
		timed t $B fsck -n -f "$img"; k+=("$t")
		rm -f "$img"
		$B format -q --metadata-replicas=$mr --fs-size=$SIZE "$img" || die "format"
		$B fusemount "$img" "$mnt" || die "fusemount"
		timed t tar xf "$work/src.tar" -C "$mnt"; u+=("$t")
		umount "$mnt" || die "umount"
		$B fusemount "$img" "$mnt" || die "fusemount"
		timed t find "$mnt" -exec stat --format=%s {} +; s+=("$t")
		timed t rm -rf "$mnt/$(basename "$SRC")"; r+=("$t")
		umount "$mnt" || die "umount"
		$B fsck -n -f "$img" >/dev/null || die "fsck after the FUSE rows (mr=$mr)"
	done
	res[format,$mr]=$(median "${f[@]}") res[fsck,$mr]=$(median "${k[@]}")
	res[untar,$mr]=$(median "${u[@]}") res[find,$mr]=$(median "${s[@]}")
	res[rm,$mr]=$(median "${r[@]}")
done

echo "metadata copies on one device: $SRC, $SIZE image, median of $REPS"
printf '%-8s %12s %12s %8s\n' row "1 copy (s)" "2 copies (s)" ratio
for row in format fsck untar find rm; do
	a=${res[$row,1]} b=${res[$row,2]}
	printf '%-8s %12.3f %12.3f %7.2fx\n' "$row" "$a" "$b" "$(echo "$b / $a" | bc -l)"
done
