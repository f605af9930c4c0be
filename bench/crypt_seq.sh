#!/bin/sh
# bench/crypt_seq.sh (issue 32): crypt.sh's seq write and seq read alone,
# builds alternated in one sitting, with the daemon's CPU.  For each of
# ROUNDS (3) rounds, each build, an encrypted and an unencrypted image
# (4G, fresh): mount, fio write 1 GiB bs=1M psync with end_fsync, sync and
# drop caches, fio read it back bs=1M, unmount.  Prints per run the wall ms
# and the daemon's CPU ms (user + system, all threads) of each, and the
# load: on a loaded machine the CPU per GiB is what to compare (the clock
# follows the share of a core the daemon gets).
# Usage: bench/crypt_seq.sh [BIN...] (default ./bcachefs); root, fio.
. "$(dirname "$0")/cryptlib.sh"
[ $# -gt 0 ] || set -- "$root/bcachefs"
R=${ROUNDS:-3}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$R"); do
	n=0
	for b; do
		n=$((n + 1))
		for img in enc plain; do
			rm -f "$d/i.img"
			if [ $img = enc ]; then
				"$b" format -q --encrypted --passphrase-file "$d/pass" --fs-size=4G "$d/i.img"
			else
				"$b" format -q --fs-size=4G "$d/i.img"
			fi
			up "$b" "$d/i.img"
			pid=$(pgrep -n -f "fusemount $d/i.img")
			c0=$(cpu_ms "$pid"); t0=$(now_ns)
			fio --name=w --directory="$mnt" --size=1G --bs=1M --rw=write --ioengine=psync --end_fsync=1 >/dev/null
			t1=$(now_ns); c1=$(cpu_ms "$pid")
			sync; echo 3 > /proc/sys/vm/drop_caches
			c2=$(cpu_ms "$pid"); t2=$(now_ns)
			fio --name=w --directory="$mnt" --size=1G --bs=1M --rw=read --ioengine=psync >/dev/null
			t3=$(now_ns); c3=$(cpu_ms "$pid")
			down
			printf 'round %s build %s %-5s write %5s ms cpu %5s ms | read %5s ms cpu %5s ms | load %s\n' \
				"$r" "$n" "$img" $(( (t1 - t0) / 1000000 )) $((c1 - c0)) $(( (t3 - t2) / 1000000 )) \
				$((c3 - c2)) "$(cut -d' ' -f1 /proc/loadavg)"
		done
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
