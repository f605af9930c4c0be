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
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- "$root/bcachefs"
R=${ROUNDS:-3}
[ -c /dev/fuse ] && command -v fio >/dev/null && [ "$(id -u)" = 0 ] || {
	echo "SKIP: crypt_seq bench needs /dev/fuse, fio and root (drop_caches)"; exit 0; }
d=$(mktemp -d "${TMPDIR:-/tmp}/bch-cryptseq.XXXXXX")
mnt=$d/mnt
mkdir "$mnt"
cleanup() { fusermount3 -uz "$mnt" 2>/dev/null || true; rm -rf "$d"; }
trap cleanup EXIT
printf 'crypt bench passphrase\n' > "$d/pass"
export BCACHEFS_PASSPHRASE_FILE="$d/pass"
ulimit -f 9000000
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($14 + $15) * 1000 / hz }' "/proc/$1/stat"; }
now() { date +%s%N; }
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
			"$b" fusemount "$d/i.img" "$mnt" >/dev/null
			for i in $(seq 50); do mountpoint -q "$mnt" && break; sleep 0.1; done
			mountpoint -q "$mnt" || { echo "FAILED: mount" >&2; exit 1; }
			pid=$(pgrep -n -f "fusemount $d/i.img")
			c0=$(cpu "$pid"); t0=$(now)
			fio --name=w --directory="$mnt" --size=1G --bs=1M --rw=write --ioengine=psync --end_fsync=1 >/dev/null
			t1=$(now); c1=$(cpu "$pid")
			sync; echo 3 > /proc/sys/vm/drop_caches
			c2=$(cpu "$pid"); t2=$(now)
			fio --name=w --directory="$mnt" --size=1G --bs=1M --rw=read --ioengine=psync >/dev/null
			t3=$(now); c3=$(cpu "$pid")
			for i in $(seq 20); do fusermount3 -u "$mnt" 2>/dev/null && break; sleep 0.5; done
			! mountpoint -q "$mnt" || { echo "FAILED: unmount" >&2; exit 1; }
			printf 'round %s build %s %-5s write %5s ms cpu %5s ms | read %5s ms cpu %5s ms | load %s\n' \
				"$r" "$n" "$img" $(( (t1 - t0) / 1000000 )) $((c1 - c0)) $(( (t3 - t2) / 1000000 )) \
				$((c3 - c2)) "$(cut -d' ' -f1 /proc/loadavg)"
		done
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
