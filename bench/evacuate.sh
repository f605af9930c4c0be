#!/bin/sh
# bench/evacuate.sh: `bcachefs device evacuate` throughput against cp -a.
# A tree of mixed files holding SIZE bytes (default 2G; bench/mixtree.py,
# seed SEED, default 1: many small files, some medium and large, 40%
# compressible) is put on member A of a filesystem of two image files
# (format --source of A.img, then device add B.img; each image SIZE*1.25 +
# 256M), then `bcachefs device evacuate A.img:B.img A.img` (offline) moves it
# all to B.img.  The peer: cp -a of the same tree from one filesystem to
# another, each on an image file of the same size: kernel ext4 on loop
# devices (root), timed up to a `sync -f` of the target, so both end durable;
# without root it says SKIP for ext4.  Always also cp -a between two
# directories of the host filesystem (then sync): the goal's peer without
# root, a second reference with it.  Page cache dropped before each
# timed run when root.  Best of REPS (default 3).  COMPRESSION=lz4|zstd
# formats with --compression (the ext4 figure stays uncompressed).
# After the last run: member A holds no data, fsck -n is clean and (VERIFY=1,
# the default) image extract of the filesystem equals the tree (diff -r).
# Prints MB/s (bytes of file data / wall time) of both and the ratio
# evacuate/cp; goal >= 0.7.  Also the command's own "Moved ... in S s" time,
# so the cost of opening and closing the filesystem shows apart.
. "$(dirname "$0")/tierlib.sh"
SIZE=${SIZE:-2G}
SEED=${SEED:-1}
REPS=${REPS:-3}
VERIFY=${VERIFY:-1}
COMPRESSION=${COMPRESSION:-}
size_bytes=$(bytes "$SIZE")
img_bytes=$(( size_bytes + size_bytes / 4 + (256 << 20) ))
command -v python3 >/dev/null || skip "no python3 (bench/mixtree.py builds the tree)"
command -v jq >/dev/null || skip "no jq"
"$B" device evacuate --help >/dev/null 2>&1 || skip "no 'bcachefs device evacuate' command"
is_root=; [ "$(id -u)" = 0 ] && is_root=1

# ext4 peer state, undone at exit (our loop devices by name, our mounts)
loops= mnts=
ext4_cleanup() {
	for m in $mnts; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	for l in $loops; do losetup -d "$l" 2>/dev/null || true; done
}
trap 'ext4_cleanup; cleanup' EXIT
maybe_drop_caches() { if [ -n "$is_root" ]; then drop_caches; else sync; fi; }

cd "$dir"
echo "evacuate: building the tree (bench/mixtree.py seed $SEED, $size_bytes bytes)"
tree_info=$(python3 "$root/bench/mixtree.py" tree "$SEED" "$size_bytes") || die "bench/mixtree.py failed"
fmt_opts=${COMPRESSION:+--compression=$COMPRESSION}

best_ev= best_ev_inner= best_cp=
for i in $(seq "$REPS"); do
	rm -f A.img B.img
	truncate -s "$img_bytes" A.img B.img
	# shellcheck disable=SC2086
	"$B" format -q $fmt_opts --label a A.img --source tree >/dev/null 2>fmt.err ||
		die "format --source: $(cat fmt.err)"
	"$B" device add --label b A.img B.img >/dev/null 2>add.err || die "device add: $(cat add.err)"
	usage_json A.img:B.img > u0.json
	[ "$(dev_key u0.json 1 user.bytes)" = 0 ] || die "B.img holds data before the evacuation"
	maybe_drop_caches
	t0=$(now_ns)
	"$B" device evacuate A.img:B.img A.img >ev.out 2>ev.err || die "device evacuate: $(cat ev.err ev.out)"
	t=$(( $(now_ns) - t0 ))
	inner=$(sed -n 's/^Moved .* in \([0-9.]*\) s,.*/\1/p' ev.out)
	[ -z "$best_ev" ] || [ "$t" -lt "$best_ev" ] && best_ev=$t best_ev_inner=$inner
	usage_json A.img:B.img > u1.json
	[ "$(dev_key u1.json 0 user.bytes)" = 0 ] && [ "$(dev_key u1.json 0 btree.bytes)" = 0 ] ||
		die "member A still holds $(dev_key u1.json 0 user.bytes) bytes of data, $(dev_key u1.json 0 btree.bytes) of btree"
done
moved_line=$(head -1 ev.out)
"$B" fsck -n A.img:B.img >fsck.out 2>&1 || die "fsck -n after evacuate is not clean: $(cat fsck.out)"
if [ "$VERIFY" = 1 ]; then
	"$B" image extract A.img:B.img x 2>ex.err || die "image extract: $(cat ex.err)"
	diff -r -x lost+found tree x >/dev/null || die "the evacuated filesystem differs from the tree (diff -r -x lost+found tree x)"
	rm -rf x
fi
rm -f A.img B.img

# the peers.  host_cp: cp -a between two directories of the host filesystem
# (always: a second reference, and the only one without root)
best_host=
for i in $(seq "$REPS"); do
	rm -rf ca cb; cp -a tree ca
	maybe_drop_caches
	t0=$(now_ns)
	cp -a ca cb && sync || die "cp -a ca cb"
	t=$(( $(now_ns) - t0 ))
	[ -z "$best_host" ] || [ "$t" -lt "$best_host" ] && best_host=$t
done
rm -rf ca cb
if [ -n "$is_root" ] && command -v mke2fs >/dev/null && command -v losetup >/dev/null; then
	for i in $(seq "$REPS"); do
		rm -f A.ext4 B.ext4
		truncate -s "$img_bytes" A.ext4 B.ext4
		mke2fs -q -F -t ext4 -d tree A.ext4 || die "mke2fs -d tree A.ext4"
		mke2fs -q -F -t ext4 B.ext4 || die "mke2fs B.ext4"
		la=$(losetup -f --show A.ext4) && loops="$loops $la" || die "losetup A.ext4"
		lb=$(losetup -f --show B.ext4) && loops="$loops $lb" || die "losetup B.ext4"
		mkdir -p ma mb
		mount -t ext4 "$la" ma && mnts="$mnts $dir/ma" || die "mount $la"
		mount -t ext4 "$lb" mb && mnts="$mnts $dir/mb" || die "mount $lb"
		maybe_drop_caches
		t0=$(now_ns)
		cp -a ma/. mb/ && sync -f mb/ || die "cp -a ma/. mb/"
		t=$(( $(now_ns) - t0 ))
		[ -z "$best_cp" ] || [ "$t" -lt "$best_cp" ] && best_cp=$t
		ext4_cleanup
		loops= mnts=
	done
	rm -f A.ext4 B.ext4
else
	echo "evacuate: SKIP: ext4 on loop devices (needs root, mke2fs, losetup); the peer is cp -a between two host directories"
fi

echo "evacuate: $SIZE of mixed files ($tree_info), seed $SEED${COMPRESSION:+, --compression=$COMPRESSION}; images of $img_bytes bytes"
echo "best of $REPS, $( [ -n "$is_root" ] && echo "caches dropped" || echo "caches NOT dropped (not root)" ); evacuate said: $moved_line"
printf '%-50s %8s %12s\n' "" time throughput
printf '%-50s %6sms %7s MB/s\n' "bcachefs device evacuate A.img:B.img A.img" "$((best_ev / 1000000))" "$(mbs "$size_bytes" "$best_ev")"
printf '%-50s %6sms %7s MB/s\n' "  (its own move time, without open and close)" \
	"$(awk -v s="$best_ev_inner" 'BEGIN { printf "%d", s * 1000 }')" \
	"$(awk -v b="$size_bytes" -v s="$best_ev_inner" 'BEGIN { if (s == 0) s = 0.001; printf "%.1f", b / 1e6 / s }')"
[ -n "$best_cp" ] && printf '%-50s %6sms %7s MB/s\n' "cp -a + sync, ext4 on loop to ext4 on loop" \
	"$((best_cp / 1000000))" "$(mbs "$size_bytes" "$best_cp")"
printf '%-50s %6sms %7s MB/s\n' "cp -a + sync, host dir to host dir" "$((best_host / 1000000))" "$(mbs "$size_bytes" "$best_host")"
if [ -n "$best_cp" ]; then
	echo "evacuate throughput / cp -a (ext4 loop) throughput (goal >= 0.7): $(ratio "$best_ev" "$best_cp")"
	echo "evacuate throughput / cp -a (host dirs) throughput: $(ratio "$best_ev" "$best_host")"
else
	echo "evacuate throughput / cp -a (host dirs) throughput (goal >= 0.7): $(ratio "$best_ev" "$best_host")"
fi
