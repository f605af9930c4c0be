#!/bin/sh
# bench/copygc.sh: write amplification of random 4 KiB overwrites on a nearly
# full filesystem.  For each fill level u in FILLS (default "80 90 95"
# percent): a fresh FS_SIZE image (default 256M), one file of u% of the space
# available for data (random bytes), then random 4 KiB overwrites inside it
# through fusemount with build/lat4k (fixed seed 1) totalling MULT times the
# file's size (default 3; the issue's figure is 10: MULT=10).  Write
# amplification = bytes the device wrote during the overwrites (per-device
# counters: fs usage of the mountpoint before, fusemount -o iostats totals
# after the unmount, so what the close writes is counted) / bytes the user
# wrote.  The device bytes include btree and journal writes, not only data
# moved by copygc.  An ENOSPC during the overwrites is reported as such
# (live data never exceeds u%, so it means space was not reclaimed).
# MOUNT_OPTS adds fusemount options (nocopygc, norebalance) to compare.
#
# Beside it, two figures from the log-structured file system literature, both
# counting writes only (user bytes + live bytes the cleaner moves, over user
# bytes), for uniformly random overwrites:
#   LFS u=fill  Rosenblum & Ousterhout, "The Design and Implementation of a
#               Log-Structured File System" (SOSP 1991, TOCS 1992), section
#               3.4: cleaning segments whose live fraction is u costs, per
#               byte of new data, reading the segments and writing back their
#               live part: write cost 2/(1-u) with reads.  Without the reads,
#               1/(1-u).  Taking u as the whole disk's fill is the case where
#               the cleaner can find nothing emptier than average.
#   greedy      the cleaner picks emptier segments than the average: under
#               uniform random overwrites the live fraction u_c of the segments
#               it cleans (oldest-first, which greedy matches or beats) solves
#               fill = (u_c - 1) / ln(u_c) (the survival of a block over one
#               pass of the log, e^-((1-u_c)/fill), is u_c; the analysis of
#               Desnoyers, "Analytic modeling of SSD write performance",
#               SYSTOR 2012); write amplification 1/(1-u_c).
. "$(dirname "$0")/tierlib.sh"
FS_SIZE=${FS_SIZE:-256M}
FILLS=${FILLS:-80 90 95}
MULT=${MULT:-3}
MOUNT_OPTS=${MOUNT_OPTS:-}	# e.g. nocopygc: copygc only when a write finds no space
need_root_fuse
need_lat4k
cd "$dir"

# lfs_greedy FILL_PERCENT: 1/(1-u_c) with fill = (u_c-1)/ln(u_c), by bisection
lfs_greedy() {
	awk -v a="$1" 'BEGIN { a /= 100; lo = 1e-9; hi = 1 - 1e-9
		for (i = 0; i < 200; i++) { m = (lo + hi) / 2; if ((m - 1) / log(m) < a) lo = m; else hi = m }
		printf "%.2f", 1 / (1 - lo) }'
}
lfs_naive() { awk -v a="$1" 'BEGIN { printf "%.2f", 1 / (1 - a / 100) }'; }

echo "copygc: random 4 KiB overwrites (lat4k, seed 1) of one file filling u% of a $FS_SIZE filesystem,"
echo "${MULT}x the file's size; write amplification = device bytes written / user bytes written${MOUNT_OPTS:+ (fusemount -o $MOUNT_OPTS)}"
printf '%6s %10s %10s %12s %10s %10s %10s %14s %s\n' fill "file" "user" "device" "WA" "LFS u=fill" "greedy" "p99 write" "result"
for fill in $FILLS; do
	rm -f img
	"$B" format -q --fs-size="$FS_SIZE" img >/dev/null
	mount_fs img mnt "$MOUNT_OPTS"
	avail=$(stat -f -c '%a * %S' mnt/ | sed 's/ //g')
	avail=$(( $avail ))
	file_bytes=$(( avail / 100 * fill / 4096 * 4096 ))
	# 1 MiB writes: large extents, as a file copied in would have
	if ! dd if=/dev/urandom of=mnt/file bs=1M count=$(( file_bytes >> 20 )) iflag=fullblock \
		status=none 2>fill.err || ! dd if=/dev/urandom of=mnt/file bs=4096 \
		count=$(( (file_bytes & ((1 << 20) - 1)) / 4096 )) seek=$(( (file_bytes >> 20) << 8 )) \
		conv=notrunc status=none 2>>fill.err; then
		printf '%5s%% %8sMB %s\n' "$fill" "$((file_bytes >> 20))" \
			"ENOSPC while filling: statfs said $avail bytes available; $(stat -c %s mnt/file) fit"
		umount_fs
		continue
	fi
	sync mnt/file
	[ "$(stat -c %s mnt/file)" = "$file_bytes" ] || die "$fill%: the file is $(stat -c %s mnt/file) bytes, not $file_bytes"
	usage_json mnt > before.json
	dev_before=$(dev_key before.json 0 write_bytes)
	n=$(( file_bytes * MULT / 4096 ))
	result=ok
	"$LAT4K" -q -s 1 -n "$n" mnt/file > lat.out 2> lat.err || result="FAILED: $(head -1 lat.err)"
	umount_fs
	dev_after=$(iostat_end img write_bytes)
	user=$(( n * 4096 ))
	done_n=$(sed -n 's/^lat4k: .*: write \([0-9]*\) at .*/\1/p' lat.err | head -1)
	[ -z "$done_n" ] || user=$(( done_n * 4096 ))
	dev=$(( dev_after - dev_before ))
	p99=-
	[ "$result" = ok ] && p99="$(cut -d' ' -f2 lat.out) us"
	case $result in *"No space"*) result="ENOSPC (space not reclaimed): $(head -1 lat.err)" ;; esac
	printf '%5s%% %8sMB %8sMB %10sMB %10s %10s %10s %14s %s\n' "$fill" "$((file_bytes >> 20))" "$((user >> 20))" \
		"$((dev >> 20))" "$(ratio "$user" "$dev")" "$(lfs_naive "$fill")" "$(lfs_greedy "$fill")" "$p99" "$result"
	"$B" fsck -n img >/dev/null 2>&1 || echo "  fsck -n after the $fill% run is not clean"
done
echo "(an ENOSPC row's WA counts only the writes done before it)"
