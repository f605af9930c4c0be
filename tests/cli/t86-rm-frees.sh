# fusemount frees the files an rm -rf unlinks in batches (issue 32): FORGET
# queues the inode, and the queue is freed 64 at a time (fs_ops.h,
# bch_fs_inodes_free(): the small ones of one subvolume in one transaction;
# one with xattrs or many extents alone).  What must not change with it:
#   statfs right after the rm -rf counts the freed space (a request other
#   than an rm -rf's frees the queue before it runs), and so does a write
#   that needs it;
#   an unmount right after frees what is queued (fsck -f -n: 0 problems,
#   no unlinked inode left);
#   a file open while its name goes stays readable until closed, and a
#   second name keeps a file;
#   files of two subvolumes removed in one rm -rf each go from their own.
# The background thread is off (norebalance,nocopygc): only the requests
# and the unmount run the queue.  Seeded data: seed 86, printed.
need_fuse
expect_rc 0 $B format -q --fs-size=128M img
mkdir mnt
mnt=$PWD/mnt
ulimit -f 400000	# 200 MiB: no runaway write through the mount
echo "seed 86"

mount_fs() {
	$B fusemount -f -o norebalance,nocopygc img mnt 2>daemon.err & pid=$!
	trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null; kill $pid 2>/dev/null' EXIT
	for i in $(seq 100); do mountpoint -q mnt && return; sleep 0.05; done
	fail "fusemount: $(cat daemon.err)"
}
unmount_fs() {
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "daemon exited $?: $(cat daemon.err)"
	trap - EXIT
	expect_rc 0 $B fsck -f -n img
	expect_in out ' 0 problems found'
	expect_not_in out 'unlinked'
}
free_blocks() { stat -f -c %f mnt; }

# make_tree DIR N: N files of 64 KiB (seeded bytes), a tenth with an xattr,
# in subdirectories of 50, and one file of 40 separate extents
make_tree() {
	python3 - "$1" "$2" <<'PY' || fail "making $1"
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(86)
for i in range(n):
    d = os.path.join(root, "d%d" % (i // 50))
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "f%d" % i)
    with open(p, "wb") as f:
        f.write(rnd.randbytes(64 << 10))
    if i % 10 == 0:
        os.setxattr(p, "user.t86", b"x" * 40)
fd = os.open(os.path.join(root, "frag"), os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(40):		# every other 4 KiB block: extents that do not merge
    os.pwrite(fd, rnd.randbytes(4096), 2 * i * 4096)
os.fsync(fd)
os.close(fd)
PY
}

mountpoint -q mnt && fail "mnt is mounted before the test"
mount_fs
mountpoint -q mnt || fail "not mounted"
free0=$(free_blocks)
mkdir mnt/t
make_tree mnt/t 300
free1=$(free_blocks)
used=$((free0 - free1))
[ "$used" -gt 4000 ] || fail "300 files of 64 KiB took only $used blocks"
# ---- statfs right after the rm -rf: the space is back
rm -rf mnt/t || fail "rm -rf"
free2=$(free_blocks)
[ $((free2 - free1)) -ge $((used * 95 / 100)) ] ||
	fail "statfs after rm -rf: $((free2 - free1)) of $used blocks back"
[ "$(ls -A mnt)" = "lost+found" ] || fail "left after rm -rf: $(ls -A mnt)"

# ---- a write right after an rm -rf gets the space it freed
python3 - "$mnt" <<'PY' || fail "filling the filesystem"
import errno, os, sys
fd = os.open(sys.argv[1] + "/fill", os.O_WRONLY | os.O_CREAT, 0o644)
buf = b"\x5a" * (1 << 20)
try:
    while True:
        os.write(fd, buf)
except OSError as e:
    assert e.errno == errno.ENOSPC, e
os.close(fd)
PY
fill=$(stat -c %s mnt/fill)
mkdir mnt/t
python3 - "$mnt/t" <<'PY' || fail "small files into the last space"
import errno, os, sys
for i in range(5000):
    try:
        with open("%s/g%d" % (sys.argv[1], i), "wb") as f:
            f.write(b"g" * (16 << 10))
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
        break
else:
    raise SystemExit("no ENOSPC")
PY
rm -rf mnt/fill mnt/t || fail "rm -rf on a full filesystem"
python3 - "$mnt/again" "$fill" <<'PY' || fail "a write of the freed space after rm -rf"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
buf, want, n = b"\xa5" * (1 << 20), int(sys.argv[2]), 0
while n < want:
    n += os.write(fd, buf)
os.close(fd)
PY
rm -f mnt/again

# ---- an open file keeps its data, a second name keeps its file
mkdir mnt/o
make_tree mnt/o 80
ln mnt/o/d0/f1 mnt/keep || fail "ln"
sum1=$(sha mnt/o/d0/f1)
exec 7< mnt/o/d1/f60
rm -rf mnt/o || fail "rm -rf with an open file"
stat -f mnt >/dev/null
[ "$(sha /dev/fd/7)" = "$(python3 -c "
import random; r = random.Random(86)
for i in range(61): b = r.randbytes(65536)
import hashlib; print(hashlib.sha256(b).hexdigest())")" ] || fail "an open unlinked file lost its data"
exec 7<&-
[ "$(sha mnt/keep)" = "$sum1" ] || fail "the second name lost its file"
rm -f mnt/keep
unmount_fs
expect_in out '2 inodes checked'

# ---- unmount right after rm -rf; then two subvolumes in one rm -rf
mount_fs
mkdir mnt/u
make_tree mnt/u 100
rm -rf mnt/u || fail "rm -rf"
unmount_fs
expect_in out '2 inodes checked'
mount_fs
expect_rc 0 $B subvolume create mnt/sv
mkdir mnt/top
make_tree mnt/sv 70
make_tree mnt/top 70
rm -rf mnt/sv/d0 mnt/top mnt/sv/d1 || fail "rm -rf across subvolumes"
free3=$(free_blocks)
rm -rf mnt/sv/frag
# its FORGET may come after the next request (the kernel sends it when the
# inode leaves its cache, encrypted mounts later): wait for it
for i in $(seq 50); do [ "$(free_blocks)" -gt "$free3" ] && break; sleep 0.1; done
[ "$(free_blocks)" -gt "$free3" ] || fail "rm of a fragmented file in a subvolume freed nothing"
unmount_fs
