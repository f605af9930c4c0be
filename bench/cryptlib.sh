# Helpers for the encrypted sequential I/O benchmarks (bench/crypt_seq.sh,
# crypt_read.sh); sourced, not run.  Needs /dev/fuse, fio and root (the
# page cache is dropped between write and read): without them prints
# "SKIP: ..." and the script exits 0, so `make bench` goes on.  Sets $root,
# $d (a temp dir, removed at exit, with the mountpoint unmounted first),
# $mnt, and the passphrase file $d/pass, exported as
# BCACHEFS_PASSPHRASE_FILE.  up BIN IMAGE mounts IMAGE at $mnt with BIN;
# down unmounts it; cpu_ms PID is a process's user + system CPU in ms;
# now_ns the clock.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
name=$(basename "$0" .sh)
[ -c /dev/fuse ] && command -v fio >/dev/null && [ "$(id -u)" = 0 ] || {
	echo "SKIP: $name bench needs /dev/fuse, fio and root (drop_caches)"; exit 0; }
d=$(mktemp -d "${TMPDIR:-/tmp}/bch-$name.XXXXXX")
mnt=$d/mnt
mkdir "$mnt"
cleanup() { fusermount3 -uz "$mnt" 2>/dev/null || true; rm -rf "$d"; }
trap cleanup EXIT
printf 'crypt bench passphrase\n' > "$d/pass"
export BCACHEFS_PASSPHRASE_FILE="$d/pass"
ulimit -f 9000000

cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($14 + $15) * 1000 / hz }' "/proc/$1/stat"; }
now_ns() { date +%s%N; }
up() {
	"$1" fusemount "$2" "$mnt" >/dev/null
	for i in $(seq 50); do mountpoint -q "$mnt" && return 0; sleep 0.1; done
	echo "FAILED: mount $2" >&2; return 1
}
down() {
	for i in $(seq 20); do fusermount3 -u "$mnt" 2>/dev/null && break; sleep 0.5; done
	! mountpoint -q "$mnt" || { echo "FAILED: unmount" >&2; return 1; }
}
