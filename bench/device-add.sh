#!/bin/sh
# bench/device-add.sh: time of `bcachefs device add` (offline, image files)
# against the number of files in the filesystem and the sizes of the
# filesystem and of the new member.  Trees of small files (0-4 KiB,
# bench/mixtree.py -n, seed SEED, default 1) of FILES (default 100000) and
# FEW (default 10000) files are put in image files by format --source; each
# row copies its base image (cp --sparse=always, not timed), truncates a new
# sparse image file and times `bcachefs device add A.img NEW.img`, wall clock
# of the whole command (open, format of the new member, superblock edits,
# reopen, close), median of REPS (default 5) runs, page cache dropped before
# each when root.  Beside it the command's own figure ("... in S s": from
# after the first open to the end of the add).  Rows:
#   FEW files,   FS_SMALL (default 1G) filesystem, FS_SMALL new member
#   FILES files, FS_SMALL filesystem, FS_SMALL new member
#   FILES files, FS_SMALL filesystem, BIG (default 8G) new member
#   FILES files, BIG filesystem,      BIG new member
# Goal: under 0.1 s whatever the size.  After the last run of each row: the
# filesystem has two members and fsck -n is clean.
. "$(dirname "$0")/tierlib.sh"
FILES=${FILES:-100000}
FEW=${FEW:-10000}
FS_SMALL=${FS_SMALL:-1G}
BIG=${BIG:-8G}
REPS=${REPS:-5}
SEED=${SEED:-1}
command -v python3 >/dev/null || skip "no python3 (bench/mixtree.py builds the trees)"
command -v jq >/dev/null || skip "no jq"
"$B" device add --help >/dev/null 2>&1 || skip "no 'bcachefs device add' command"
is_root=; [ "$(id -u)" = 0 ] && is_root=1
maybe_drop_caches() { if [ -n "$is_root" ]; then drop_caches; else sync; fi; }
# median of the numbers on stdin
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

cd "$dir"
echo "device-add: building trees of $FEW and $FILES files (bench/mixtree.py -n, seed $SEED)"
python3 "$root/bench/mixtree.py" -n few "$SEED" "$FEW" >/dev/null || die "bench/mixtree.py failed"
python3 "$root/bench/mixtree.py" -n many "$SEED" "$FILES" >/dev/null || die "bench/mixtree.py failed"

# base TREE FSSIZE: base-TREE-FSSIZE.img, built once
base() {
	b="base-$1-$2.img"
	if [ ! -f "$b" ]; then
		truncate -s "$2" "$b"
		"$B" format -q "$b" --source "$1" >/dev/null 2>fmt.err || die "format --source $1: $(cat fmt.err)"
	fi
	echo "$b"
}

printf '%-44s %10s %10s %s\n' "device add, median of $REPS" wall "own time" "(goal < 100 ms)"
# row LABEL TREE FSSIZE NEWSIZE
row() {
	b=$(base "$2" "$3")
	: > wall.txt; : > own.txt
	for i in $(seq "$REPS"); do
		rm -f A.img N.img
		cp --sparse=always "$b" A.img
		truncate -s "$4" N.img
		maybe_drop_caches
		t0=$(now_ns)
		"$B" device add A.img N.img >add.out 2>add.err || die "device add ($1): $(cat add.err)"
		echo $(( ($(now_ns) - t0) / 1000 )) >> wall.txt
		sed -n 's/.* in \([0-9.]*\) s$/\1/p' add.out | awk '{ printf "%d\n", $1 * 1e6 }' >> own.txt
	done
	usage_json A.img:N.img > u.json
	[ "$(jq '.devices | length' u.json)" = 2 ] || die "$1: the filesystem does not have two members"
	"$B" fsck -n A.img:N.img >fsck.out 2>&1 || die "$1: fsck -n after device add is not clean: $(cat fsck.out)"
	w=$(median < wall.txt) o=$(median < own.txt)
	printf '%-44s %7d ms %7d ms %s\n' "$1" $((w / 1000)) $((o / 1000)) \
		"$( [ "$w" -lt 100000 ] && echo ok || echo "MISSED (runs, us: $(tr '\n' ' ' < wall.txt))")"
}
row "$FEW files, $FS_SMALL fs, $FS_SMALL new member" few "$FS_SMALL" "$FS_SMALL"
row "$FILES files, $FS_SMALL fs, $FS_SMALL new member" many "$FS_SMALL" "$FS_SMALL"
row "$FILES files, $FS_SMALL fs, $BIG new member" many "$FS_SMALL" "$BIG"
row "$FILES files, $BIG fs, $BIG new member" many "$BIG" "$BIG"
echo "caches $( [ -n "$is_root" ] && echo "dropped before each run" || echo "NOT dropped (not root)" ); seed $SEED"
