# t87's case on a plain filesystem: the read-ahead reads a plain file's
# extents uncached (O_DIRECT, blockdev.h bch_dev_readv_uncached()) as an
# encrypted one's.  A file on a filesystem over 4 KiB sectors refuses
# O_DIRECT reads at 512-byte offsets (EINVAL): the read-ahead then goes
# back to the page cache for good, and every byte still reads back.
# strace of the daemon shows the refused read, and that it was the only one.
need_fuse
need_root "a loop device with 4 KiB sectors"
need strace
need mkfs.ext4
truncate -s 160M back
loop=$(losetup -f --show --sector-size 4096 back) || fail "no loop device with 4 KiB sectors"
mkdir -p ext m
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null; [ -z "$spid" ] || wait "$spid"; umount "$OLDPWD/ext" 2>/dev/null; losetup -d "$loop"' EXIT
mkfs.ext4 -q -F "$loop" || fail "mkfs.ext4"
mount "$loop" ext || fail "mount ext4"
# 512-byte blocks: extents start at 512-byte offsets the 4 KiB sectors refuse
expect_rc 0 $B format -q --block-size=512 --fs-size=96M ext/img
head -c 6000000 /dev/urandom > r
expect_rc 0 $B fusemount "$PWD/ext/img" m
# written in odd pieces, so extents start anywhere in a 4 KiB sector
python3 - <<'PY' || fail "write"
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
fusermount3 -u m || fail "unmount"

# a fresh mount, traced: every read reaches the daemon, in order
strace -f -qq -e trace=preadv -o trace $B fusemount -f "$PWD/ext/img" m 2>strace.err &
spid=$!
for i in $(seq 100); do mountpoint -q m && break; sleep 0.1; done
mountpoint -q m || fail "not mounted: $(cat strace.err)"
cmp r m/r || fail "read back differs"
fusermount3 -u m || fail "unmount"
wait "$spid"; spid=
refused=$(grep -c 'preadv(.*= -1 EINVAL' trace)
[ "$refused" -ge 1 ] || fail "no uncached read was refused: $(grep -c preadv trace) preadv calls; $(head -c 1500 trace)"
after=$(awk '/= -1 EINVAL/ { seen = 1; next } seen && /preadv\(/ && !/resumed/' trace | grep -c 'preadv(' || true)
echo "refused $refused, preadv after the first refusal: $after"
[ "$refused" -le 2 ] && [ "$after" -le 1 ] || fail "$refused uncached reads refused, $after after the first: the first should end them"
expect_rc 0 $B fsck -n ext/img
