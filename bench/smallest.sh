#!/bin/bash
# The smallest image of a tree (issue 33): `format --source SRC IMG` with no
# --fs-size (read-write, default --headroom=5%, and with --headroom=0) against
# `mkfs.btrfs --rootdir --shrink` (read-write), `mkfs.erofs` (read-only,
# uncompressed) and `mksquashfs` (read-only, compressed): image bytes (the
# file's size; what a CI artifact or a partition needs), seconds, and each
# size as a ratio to btrfs's (goal: ours at most 1.05x while read-write).
# Then `image shrink` of that image after deleting half its files.
# A tool that is missing is named as missing, never timed.  SRC (default
# /usr/include), REPS (3: the median), TMPDIR (where the images go).
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${B:-$here/../bcachefs}
SRC=${SRC:-/usr/include}
REPS=${REPS:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/bch-smallest.XXXXXX")
trap 'rm -rf "$work"' EXIT
die() { echo "smallest: $*" >&2; exit 1; }
[ -x "$B" ] || die "build $B first"
[ -d "$SRC" ] || die "no $SRC"

now() { date +%s.%N; }
# best NAME CMD...: run CMD REPS times on a fresh $work/NAME; the median
# seconds into $secs, the image's size into $bytes; "" when it fails
median_run() {
	local name=$1 ts=() t0 i; shift
	for ((i = 0; i < REPS; i++)); do
		rm -f "$work/$name"
		t0=$(now)
		if ! "$@" >"$work/out" 2>&1; then
			echo "smallest: $name: '$*' failed: $(tail -2 "$work/out")" >&2
			secs= bytes=
			return 1
		fi
		ts+=("$(echo "$(now) - $t0" | bc)")
	done
	secs=$(printf '%s\n' "${ts[@]}" | sort -n | sed -n "$(((REPS + 1) / 2))p")
	bytes=$(stat -c %s "$work/$name")
}

tree_bytes=$(du -s -B1 --apparent-size "$SRC" | cut -f1)
files=$(find "$SRC" | wc -l)
printf 'tree %s: %d entries, %d bytes (apparent), REPS=%d\n\n' "$SRC" "$files" "$tree_bytes" "$REPS"
declare -A size time
row() {	# NAME KIND CMD...
	local name=$1 kind=$2; shift 2
	if median_run "$name" "$@"; then
		size[$name]=$bytes time[$name]=$secs
	else
		size[$name]=failed
	fi
	printf '%s\n' "$name $kind" >>"$work/rows"
}
row bcachefs rw "$B" format -q --source "$SRC" "$work/bcachefs"
row bcachefs-h0 rw "$B" format -q --headroom=0 --source "$SRC" "$work/bcachefs-h0"
if command -v mkfs.btrfs >/dev/null; then
	row btrfs rw mkfs.btrfs -q --rootdir "$SRC" --shrink "$work/btrfs"
else
	echo "btrfs rw missing" >>"$work/rows"; size[btrfs]="missing (btrfs-progs)"
fi
if command -v mkfs.erofs >/dev/null; then
	row erofs ro mkfs.erofs "$work/erofs" "$SRC"
else
	echo "erofs ro missing" >>"$work/rows"; size[erofs]="missing (erofs-utils)"
fi
if command -v mksquashfs >/dev/null; then
	row squashfs ro-compressed mksquashfs "$SRC" "$work/squashfs" -quiet -no-progress -noappend
else
	echo "squashfs ro missing" >>"$work/rows"; size[squashfs]="missing (squashfs-tools)"
fi

ref=${size[btrfs]:-}
printf '%-13s %-14s %14s %10s %9s %9s\n' image kind bytes MiB seconds "x btrfs"
while read -r name kind rest; do
	s=${size[$name]}
	case $s in
	''|*[!0-9]*) printf '%-13s %-14s %s\n' "$name" "$kind" "$s" ;;
	*)	ratio=-
		case $ref in ''|*[!0-9]*) ;; *) ratio=$(echo "scale=3; $s / $ref" | bc) ;; esac
		printf '%-13s %-14s %14d %10.1f %9.3f %9s\n' "$name" "$kind" "$s" \
			"$(echo "scale=1; $s / 1048576" | bc)" "${time[$name]}" "$ratio" ;;
	esac
done <"$work/rows"

# image shrink: the bcachefs image after removing every other top-level entry
img=$work/bcachefs
if [ "${size[bcachefs]}" != failed ]; then
	n=0
	for p in $("$B" image ls "$img" / | grep -v '^lost+found$'); do
		n=$((n + 1))
		[ $((n % 2)) = 0 ] && { "$B" image rm -r "$img" "/$p" >/dev/null 2>&1 || die "image rm /$p"; }
	done
	before=$(stat -c %s "$img")
	t0=$(now)
	"$B" image shrink "$img" >"$work/out" 2>"$work/err" || die "image shrink: $(cat "$work/err")"
	t=$(echo "$(now) - $t0" | bc)
	after=$(stat -c %s "$img")
	printf '\nimage shrink after removing half the top-level entries: %d -> %d bytes (%.3f x) in %.3f s\n' \
		"$before" "$after" "$(echo "scale=3; $after / $before" | bc)" "$t"
fi
