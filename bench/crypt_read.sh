#!/bin/sh
# bench/crypt_read.sh (issue 32): the sequential read of bench/crypt.sh
# alone, repeated, builds alternated in one sitting: an encrypted and an
# unencrypted image (4G) each get one 1 GiB file (fio bs=1M, written by the
# first build); then ROUNDS (5) times, for each build on the encrypted
# image and the first on the plain one: mount, sync and drop the caches,
# fio read bs=1M psync, unmount.  Prints each read's ms, the daemon's CPU
# ms (utime+stime during the read: on a loaded machine the daemon's CPU is
# its read time, and it moves far less from run to run than the clock),
# the load, then the medians and plain/enc of each build.
# Usage: bench/crypt_read.sh [BIN...] (default ./bcachefs); root, fio.
. "$(dirname "$0")/cryptlib.sh"
[ $# -gt 0 ] || set -- "$root/bcachefs"
R=${ROUNDS:-5}
B0=$1
"$B0" format -q --encrypted --passphrase-file "$d/pass" --fs-size=4G "$d/enc.img"
"$B0" format -q --fs-size=4G "$d/plain.img"
for img in enc plain; do
	up "$B0" "$d/$img.img"
	fio --name=w --directory="$mnt" --size=1G --bs=1M --rw=write --ioengine=psync --end_fsync=1 >/dev/null
	down
done
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$R"); do
	for img in enc plain; do
		n=0
		for b; do
			n=$((n + 1))
			[ $img = plain ] && [ $n -gt 1 ] && continue
			up "$b" "$d/$img.img"
			pid=$(pgrep -f "fusemount $d/$img.img" | head -1)
			sync; echo 3 > /proc/sys/vm/drop_caches
			c0=$(cpu_ms "$pid"); t0=$(now_ns)
			fio --name=w --directory="$mnt" --size=1G --bs=1M --rw=read --ioengine=psync >/dev/null
			t1=$(now_ns); c1=$(cpu_ms "$pid")
			down
			echo "$img $n $(( (t1 - t0) / 1000000 )) $((c1 - c0))" >> "$d/res"
			printf 'round %s %-5s build %s: read %5s ms, daemon cpu %5s ms, load %s\n' "$r" "$img" "$n" \
				"$(( (t1 - t0) / 1000000 ))" "$((c1 - c0))" "$(cut -d' ' -f1 /proc/loadavg)"
		done
	done
done
med() { grep "^$1 $2 " "$d/res" | awk -v f="$3" '{print $f}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
pr=$(med plain 1 3); pc=$(med plain 1 4)
echo "medians of $R: plain (build 1) read ${pr} ms, cpu ${pc} ms"
n=0
for b; do
	n=$((n + 1))
	er=$(med enc $n 3); ec=$(med enc $n 4)
	echo "build $n ($b): enc read ${er} ms, cpu ${ec} ms; plain/enc read" \
		"$(awk -v a="$pr" -v b="$er" 'BEGIN { printf "%.2f", a / b }'), cpu" \
		"$(awk -v a="$pc" -v b="$ec" 'BEGIN { printf "%.2f", a / b }')"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
