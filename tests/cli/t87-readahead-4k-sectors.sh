# The read-ahead (fs_read.h) reads a file's extents uncached (O_DIRECT,
# blockdev.h bch_dev_readv_uncached()) where the image's file allows, on an
# encrypted filesystem and (since session 29) on a plain one.  A file on a
# filesystem over 4 KiB sectors refuses O_DIRECT reads at 512-byte offsets
# (EINVAL): the read-ahead then goes back to the page cache for good, and
# every byte still reads back.  strace of the daemon shows the refused
# read, and that it was the only one.  Both cases, each on its own loop
# device: "encrypted", then "plain" (t109's until it joined this one).
need_fuse
need_root "a loop device with 4 KiB sectors"
need strace
need mkfs.ext4
BIN=${BCH_BIN:-$B}	# the binary itself: this test chooses encrypted or not on its own
printf 'passphrase of t87\n' > pass
export BCACHEFS_PASSPHRASE_FILE="$PWD/pass"
loop= spid=
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null; [ -z "$spid" ] || wait "$spid"; umount "$OLDPWD/ext" 2>/dev/null; [ -z "$loop" ] || losetup -d "$loop"' EXIT
head -c 6000000 /dev/urandom > r
mkdir -p ext m

# refused_once NAME FORMAT-OPTION...: the case on a fresh loop device
refused_once() {
	name=$1; shift
	truncate -s 160M back
	loop=$(losetup -f --show --sector-size 4096 back) || fail "$name: no loop device with 4 KiB sectors"
	mkfs.ext4 -q -F "$loop" || fail "$name: mkfs.ext4"
	mount "$loop" ext || fail "$name: mount ext4"
	# 512-byte blocks: extents start at 512-byte offsets the 4 KiB sectors refuse
	expect_rc 0 $BIN format -q "$@" --block-size=512 --fs-size=96M ext/img
	expect_rc 0 $BIN fusemount "$PWD/ext/img" m
	# written in odd pieces, so extents start anywhere in a 4 KiB sector
	python3 - <<'PY' || fail "$name: write"
import os
data = open("r", "rb").read()
fd = os.open("m/r", os.O_WRONLY | os.O_CREAT, 0o644)
off, n = 0, 1
while off < len(data):
    step = 65536 + 512 * (n % 7)
    os.pwrite(fd, data[off:off + step], off)
    off += step; n += 1
os.fsync(fd); os.close(fd)
PY
	fusermount3 -u m || fail "$name: unmount"

	# a fresh mount, traced: every read reaches the daemon, in order
	traced_mount preadv "$PWD/ext/img" m $BIN
	cmp r m/r || fail "$name: read back differs"
	fusermount3 -u m || fail "$name: unmount"
	wait "$spid"; spid=
	refused=$(grep -c 'preadv(.*= -1 EINVAL' trace)
	[ "$refused" -ge 1 ] || fail "$name: no uncached read was refused: $(grep -c preadv trace) preadv calls; $(head -c 1500 trace)"
	after=$(awk '/= -1 EINVAL/ { seen = 1; next } seen && /preadv\(/ && !/resumed/' trace | grep -c 'preadv(' || true)
	echo "$name: refused $refused, preadv after the first refusal: $after"
	[ "$refused" -le 2 ] && [ "$after" -le 1 ] || fail "$name: $refused uncached reads refused, $after after the first: the first should end them"
	expect_rc 0 $BIN fsck -n ext/img
	umount ext || fail "$name: umount ext4"
	losetup -d "$loop" || fail "$name: losetup -d"
	loop=
}

refused_once encrypted --encrypted --passphrase-file pass
refused_once plain
