#!/bin/sh
# make bench-crypt (issue 21): what encryption costs.
# 1. bench/fuse.sh's workloads (untar of a /usr/include tarball, find+stat,
#    fio seq write / seq read of SIZE (BENCH_CRYPT_SIZE, default 1G) bs=1M,
#    fio 4k randwrite of 64 MiB with fsync every 32, rm -rf) through
#      enc       bcachefs fusemount of an encrypted image (ChaCha20-Poly1305)
#      plain     bcachefs fusemount of an unencrypted image
#      gocryptfs gocryptfs (a FUSE layer encrypting each file, AES-GCM) over
#                a directory of kernel ext4 on a loop device (root and
#                losetup; without them over a directory of $TMPDIR)
#    each image 4G, fresh for each.  Ratios: plain/enc (goal >= 0.9 on seq
#    write and seq read, issue 32) and gocryptfs/enc (goal > 1 on every row:
#    we are ahead), both >1 when the encrypted filesystem is faster.
#    The cipher: libcrypto's ChaCha20 and Poly1305 where libcrypto.so.3
#    loads, libsodium's otherwise (crypt.c), a write's units on a worker
#    pool too, each written while the next is encrypted, and their
#    writeback starts on a worker done with the ciphers (io.c); a
#    sequential read's next 4 MiB of extents read (uncached, 1 MiB at a
#    time), MAC-checked and decrypted after each reply, so a later read
#    only copies (fs_read.h: the read-ahead; since session 29 a plain
#    file's extents are read ahead so too, checksum-verified, so the seq
#    read row's plain/enc is the cipher's cost alone: plain's daemon CPU
#    halved, 770-920 -> 400-490 ms a GiB, enc's stayed 700-790); on a
#    loaded machine the daemon's CPU time is its read time, so the read
#    rows are compared by it too (bench/crypt_read.sh); the parallel part
#    helps only while a core is free: run on a loaded machine the rows
#    move by tens of percent from run to run: compare builds in one
#    sitting, and name the load (the load average is printed before and
#    after).
#    The seq rows add each daemon's CPU time (user + system, all threads)
#    in that workload and its plain/enc: on a loaded machine the clock
#    follows the share of a core the daemon gets, its CPU far less.
# 2. format --source of the benchmark tree of bench/run.sh (a copy of
#    /usr/share and /usr/include; BENCH_TREE=generated for a treetool tree
#    of BENCH_FILES files) encrypted vs unencrypted, best of REPS (3):
#    plain/enc (goal >= 0.8), and the CPU time (user + system, all threads)
#    of each: the copy is one thread (a file's cipher on the pool only from
#    256 KiB up, each unit stored while the next is encrypted, io.c), so on
#    a loaded machine the wall time follows it.
# BCH=PATH measures another build's binary with this script (before and
# after a change in one sitting).  PARTS="fuse format" (the default both)
# picks: PARTS=fuse alone for the mounts' rows, a tenth of the time.
# Needs /dev/fuse, fio and gocryptfs ("SKIP: ..." and exit 0 without them).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${BCH:-$root/bcachefs}	# BCH: another build's binary (before/after in one sitting)
SRC=${BENCH_FUSE_SRC:-/usr/include}
SIZE=${BENCH_CRYPT_SIZE:-1G}
REPS=${REPS:-3}
PARTS=${PARTS:-fuse format}
[ -c /dev/fuse ] && command -v fio >/dev/null && command -v gocryptfs >/dev/null || {
	echo "SKIP: crypt bench needs /dev/fuse, fio and gocryptfs"; exit 0; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-cryptbench.XXXXXX")
mnt="$dir/mnt"
loop=
cleanup() {
	cd /
	fusermount3 -uz "$mnt" 2>/dev/null || true
	if [ -n "$loop" ]; then
		# a lazily unmounted gocryptfs keeps ext4 busy until it has exited
		for i in $(seq 20); do umount "$dir/ext4" 2>/dev/null && break; sleep 0.5; done
		losetup -d "$loop" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$mnt"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'crypt bench passphrase\n' > "$dir/pass"
export BCACHEFS_PASSPHRASE_FILE="$dir/pass"
tar -C "$(dirname "$SRC")" -cf "$dir/src.tar" "$(basename "$SRC")"

ms() { t0=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 1; }; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }

# cpu PID: the user and system time of PID (all its threads) so far, in ms (0 when gone)
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($14 + $15) * 1000 / hz }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# run_all MOUNT_CMD...: the workload of bench/fuse.sh on a fresh mount; "ms ..." on stdout,
# then the daemon's CPU ms in the seq write and in the seq read
run_all() {
	"$@" >/dev/null
	for i in $(seq 50); do mountpoint -q "$mnt" && break; sleep 0.1; done
	mountpoint -q "$mnt" || { echo "FAILED: mount: $*" >&2; return 1; }
	pid=$(pgrep -n -f -- " $mnt\$" || echo 0)	# the daemon (it forked: the newest)
	r_untar=$(ms sh -c "tar -C '$mnt' -xf '$dir/src.tar' && sync -f '$mnt'")
	r_find=$(ms sh -c "find '$mnt' -exec stat -c %s {} + >/dev/null")
	c0=$(cpu "$pid")
	r_seqw=$(ms fio --name=w --directory="$mnt" --size="$SIZE" --bs=1M --rw=write --ioengine=psync --end_fsync=1)
	c1=$(cpu "$pid")
	sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
	c2=$(cpu "$pid")
	r_seqr=$(ms fio --name=w --directory="$mnt" --size="$SIZE" --bs=1M --rw=read --ioengine=psync)
	c3=$(cpu "$pid")
	r_rand=$(ms fio --name=r --directory="$mnt" --size=64M --bs=4k --rw=randwrite --ioengine=psync --fsync=32)
	r_rm=$(ms rm -rf "$mnt/$(basename "$SRC")" "$mnt/w.0.0" "$mnt/r.0.0")
	# busy for a moment after the last request on a loaded machine: set -e
	# would end the whole bench here without a word
	for i in $(seq 20); do fusermount3 -u "$mnt" 2>/dev/null && break; sleep 0.5; done
	mountpoint -q "$mnt" && { echo "FAILED: unmount $mnt" >&2; return 1; }
	sleep 0.5
	echo "$r_untar $r_find $r_seqw $r_seqr $r_rand $r_rm $((c1 - c0)) $((c3 - c2))"
}

# ratio A B: A/B
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) b = 1; printf "%.2f", a / b }'; }
if echo "$PARTS" | grep -qw fuse; then
rm -f "$dir/enc.img" && "$B" format -q --encrypted --passphrase-file "$dir/pass" --fs-size=4G "$dir/enc.img"
e=$(run_all "$B" fusemount "$dir/enc.img" "$mnt")
rm -f "$dir/enc.img"
rm -f "$dir/plain.img" && "$B" format -q --fs-size=4G "$dir/plain.img"
p=$(run_all "$B" fusemount "$dir/plain.img" "$mnt")
rm -f "$dir/plain.img"

# gocryptfs over kernel ext4 on a loop device (over ${TMPDIR:-/tmp} without one)
under="a directory of ${TMPDIR:-/tmp}"
mkdir "$dir/ext4"
if [ "$(id -u)" = 0 ] && command -v losetup >/dev/null && truncate -s 4G "$dir/kext4.img" &&
   mke2fs -q -F -t ext4 "$dir/kext4.img" && loop=$(losetup -f --show "$dir/kext4.img"); then
	mount -t ext4 "$loop" "$dir/ext4"
	under="kernel ext4 on a loop device"
fi
mkdir "$dir/ext4/cipher"
gocryptfs -q -nosyslog -init -passfile "$dir/pass" "$dir/ext4/cipher" >/dev/null
g=$(run_all gocryptfs -q -nosyslog -passfile "$dir/pass" "$dir/ext4/cipher" "$mnt")
if [ -n "$loop" ]; then
	for i in $(seq 20); do umount "$dir/ext4" 2>/dev/null && break; sleep 0.5; done
	losetup -d "$loop"; loop=
fi

echo "encryption: bcachefs fusemount encrypted vs unencrypted vs gocryptfs $(gocryptfs -version | cut -d' ' -f2 | tr -d ';') over $under; $(du -sh "$dir/src.tar" | cut -f1) tarball of $SRC, fio $SIZE"
printf '%-24s %9s %9s %9s %11s %15s\n' workload enc plain gocryptfs plain/enc gocryptfs/enc
# the daemons' CPU in the seq rows (fields 7 and 8): on a loaded machine the clock
# follows the CPU share the daemon gets, its CPU time far less
cpu_of() { echo "$1" | cut -d' ' -f"$2"; }
ecw=$(cpu_of "$e" 7) ecr=$(cpu_of "$e" 8) pcw=$(cpu_of "$p" 7) pcr=$(cpu_of "$p" 8)
set -- untar "find+stat" "seq write" "seq read" "4k randwrite+fsync/32" "rm -rf"
for name; do
	ev=$(echo $e | cut -d' ' -f1); e=$(echo $e | cut -d' ' -f2-)
	pv=$(echo $p | cut -d' ' -f1); p=$(echo $p | cut -d' ' -f2-)
	gv=$(echo $g | cut -d' ' -f1); g=$(echo $g | cut -d' ' -f2-)
	extra=
	case $name in
	"seq write") extra="  daemon CPU ${ecw}/${pcw}ms plain/enc $(ratio "$pcw" "$ecw")" ;;
	"seq read") extra="  daemon CPU ${ecr}/${pcr}ms plain/enc $(ratio "$pcr" "$ecr")" ;;
	esac
	printf '%-24s %7sms %7sms %7sms %11s %15s%s\n' "$name" "$ev" "$pv" "$gv" "$(ratio "$pv" "$ev")" "$(ratio "$gv" "$ev")" "$extra"
done
echo "(plain/enc: goal >= 0.9 on seq write and seq read; gocryptfs/enc: goal > 1 on every row)"
fi

# format --source of the benchmark tree, encrypted vs not, best of REPS
echo "$PARTS" | grep -qw format || { echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"; exit 0; }
cd "$dir"
if [ "${BENCH_TREE:-usr}" = usr ] && [ -d /usr/share ] && [ -d /usr/include ]; then
	mkdir tree && cp -a /usr/share /usr/include tree/
else
	python3 "$root/tests/cli/treetool.py" gen tree 5 "${BENCH_FILES:-20000}"
fi
# ms_cpu CMD...: "WALL_MS CPU_MS", CPU the user and system time of CMD (all
# its threads; in a $(...) subshell of its own, whose children it alone is)
ms_cpu() {
	t0=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "FAILED: $*" >&2; return 1; }; t1=$(date +%s%N)
	times > "$dir/times"
	echo "$(( (t1 - t0) / 1000000 )) $(tail -n 1 "$dir/times" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); n += a[1] * 60 + a[2] } printf "%d", n * 1000 }')"
}
# best CMD...: the fastest of REPS runs, "WALL_MS CPU_MS"
best() {
	b=
	for i in $(seq "$REPS"); do
		rm -f img && truncate -s 4G img
		t=$(ms_cpu "$@")
		[ -z "$b" ] || [ "${t% *}" -lt "${b% *}" ] && b=$t
	done
	echo "$b"
}
f_p=$(best "$B" format -q -f --source tree img)
f_e=$(best "$B" format -q -f --encrypted --passphrase-file "$dir/pass" --source tree img)
echo "format --source of $(du -sh tree | cut -f1) in $(find tree | wc -l) entries, best of $REPS:" \
	"encrypted ${f_e% *}ms (CPU ${f_e#* }ms), unencrypted ${f_p% *}ms (CPU ${f_p#* }ms)," \
	"plain/enc $(ratio "${f_p% *}" "${f_e% *}") (goal >= 0.8)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
