# Helpers for the tiering benchmarks (bench/tiering.sh, rebalance.sh,
# copygc.sh, fuse-latency.sh); sourced, not run.  Sets $root, $B, $LAT4K and
# $dir (a temp dir, removed at exit, with every mount of ours unmounted and
# every daemon of ours stopped by its PID first).
#
# The instruments: per-device I/O counters (`fs usage --json`: reads,
# read_bytes, writes, write_bytes; `fusemount -o iostats` at unmount) and
# the simulated slow device (BCACHEFS_TEST_DEVICE_DELAY=PATH=USEC), both
# in libbcachefs/blockdev.h.  A missing feature prints "SKIP: ..." and the
# script exits 0 (so `make bench` goes on), never hangs.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B="$root/bcachefs"
LAT4K="$root/build/lat4k"
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-tier.XXXXXX")
name=$(basename "$0" .sh)
mnt_pid=
mnt_dir=

cleanup() {
	if [ -n "$mnt_dir" ]; then
		fusermount3 -u "$mnt_dir" 2>/dev/null || fusermount3 -uz "$mnt_dir" 2>/dev/null || true
	fi
	if [ -n "$mnt_pid" ]; then
		for i in $(seq 300); do kill -0 "$mnt_pid" 2>/dev/null || break; sleep 0.1; done
		kill "$mnt_pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

skip() { echo "$name: SKIP: $*"; exit 0; }
die() { echo "$name: FAILED: $*" >&2; exit 1; }

need_root_fuse() {
	[ "$(id -u)" = 0 ] || skip "needs root (drop_caches)"
	[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or fusermount3"
	command -v jq >/dev/null || skip "no jq"
}
need_lat4k() {
	[ -x "$LAT4K" ] || make -s -C "$root" build/lat4k >/dev/null || skip "cannot build build/lat4k"
}
# The offline pass that moves pending work: $REBALANCE DEVS.
need_rebalance_cmd() {
	"$B" data rebalance --help >/dev/null 2>&1 || skip "no 'bcachefs data rebalance' command"
	REBALANCE="$B data rebalance --wait"
	REBALANCE_VIA="bcachefs data rebalance --wait"
}

now_ns() { date +%s%N; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# ratio A B: B / A with two decimals ("-" when A is 0)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == 0) print "-"; else printf "%.2f", b / a }'; }
# mbs BYTES NS: MB/s
mbs() { awk -v b="$1" -v t="$2" 'BEGIN { if (t == 0) t = 1; printf "%.1f", b / 1e6 / (t / 1e9) }'; }
# bytes 64M -> 67108864
bytes() { numfmt --from=iec "$1"; }

# mount_fs DEVS MNT [OPTS]: fusemount in the foreground (with -o iostats) in
# the background of this shell; its stderr in $dir/daemon.err.  The
# environment (BCACHEFS_TEST_DEVICE_DELAY) is the caller's.
mount_fs() {
	mkdir -p "$2"
	mnt_dir=$(cd "$2" && pwd)
	"$B" fusemount -f -o "iostats${3:+,$3}" "$1" "$2" 2>"$dir/daemon.err" &
	mnt_pid=$!
	for i in $(seq 200); do
		grep -q " $mnt_dir fuse.bcachefs" /proc/mounts && return 0
		kill -0 "$mnt_pid" 2>/dev/null || break
		sleep 0.05
	done
	die "fusemount $1 $2 did not mount: $(cat "$dir/daemon.err")"
}

# umount_fs: unmount, wait for the daemon to close (at most 5 min)
umount_fs() {
	fusermount3 -u "$mnt_dir" || die "fusermount3 -u $mnt_dir"
	for i in $(seq 3000); do kill -0 "$mnt_pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$mnt_pid" 2>/dev/null && die "the fusemount daemon did not exit within 5 min"
	wait "$mnt_pid" || die "fusemount exited $?: $(cat "$dir/daemon.err")"
	mnt_pid= mnt_dir=
}

# iostat_end DEVICE KEY: a counter from the last unmount's iostats lines
iostat_end() {
	sed -n "s|^bcachefs fusemount: iostats $1 .*\\<$2=\\([0-9]*\\).*|\\1|p" "$dir/daemon.err" | tail -1
}

# usage_json TARGET > FILE: fs usage --json of a mountpoint or devices
usage_json() { "$B" fs usage --json "$1"; }
# dev_key FILE INDEX KEY: a device's number from a usage_json file (KEY may
# be a path such as cached.bytes)
dev_key() { jq -r ".devices[$2].$3 // 0" "$1"; }
