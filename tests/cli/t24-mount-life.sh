# fusemount lifecycle: a command run right after `umount` or `fusermount3 -u`
# waits for the closing daemon (50 cycles each of umount;fsck -n and
# umount;mount, no sleep between, fsck clean every time); a mounted
# filesystem is still refused at once; file handles (name_to_handle_at /
# open_by_handle_at) survive dropped caches; SEEK_DATA/SEEK_HOLE; direct and
# buffered I/O see each other's writes.
need_fuse
need_root "umount, open_by_handle_at, drop_caches"
need python3
expect_rc 0 $B format -q --fs-size=256M img
mkdir mnt
mnt=$PWD/mnt
$B fusemount img mnt 2>mount.err || fail "fusemount: $(cat mount.err)"
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null' EXIT

# ---- the python helpers (name_to_handle_at/open_by_handle_at by ctypes; O_DIRECT
# with mmap-aligned buffers)
cat > handles.py <<'PY'
import ctypes, os, sys
mnt = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
class FH(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("h", ctypes.c_ubyte * 128)]
def handle(path):
    fh, mid = FH(), ctypes.c_int()
    fh.bytes = 128
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(fh), ctypes.byref(mid), 0):
        e = ctypes.get_errno(); raise OSError(e, "name_to_handle_at: " + os.strerror(e), path)
    return fh
def by_handle(mfd, fh, flags, what):
    fd = libc.open_by_handle_at(mfd, ctypes.byref(fh), flags)
    if fd < 0:
        e = ctypes.get_errno(); raise OSError(e, "open_by_handle_at %s: %s" % (what, os.strerror(e)))
    return fd
def drop():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f: f.write("2\n")
os.chdir(mnt)
if len(sys.argv) > 3:  # reopen: the handles saved before a remount
    mfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    raw = open(sys.argv[2], "rb").read()
    for p, flags in [("hd/file", os.O_RDONLY), ("hd/link2", os.O_RDONLY), ("hd/sub", os.O_RDONLY | os.O_DIRECTORY)]:
        fh = FH.from_buffer_copy(raw[:ctypes.sizeof(FH)].ljust(ctypes.sizeof(FH), b"\0"))
        raw = raw[8 + fh.bytes:]
        fd = by_handle(mfd, fh, flags, p + " after remount")
        if os.fstat(fd).st_ino != os.stat(p).st_ino: sys.exit("FAIL: %s: handle names another inode after remount" % p)
        os.close(fd)
    print("handles after remount: ok")
    sys.exit(0)
os.makedirs("hd/sub", exist_ok=True)
with open("hd/file", "w") as f: f.write("plain\n")
with open("hd/sub/linked", "w") as f: f.write("linked\n")
if not os.path.exists("hd/link2"): os.link("hd/sub/linked", "hd/link2")
with open("hd/gone", "w") as f: f.write("gone\n")
hs = {p: handle(p) for p in ["hd/file", "hd/sub/linked", "hd/link2", "hd/sub", "hd", "hd/gone", "."]}
os.unlink("hd/gone")
mfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
want = {"hd/file": b"plain\n", "hd/sub/linked": b"linked\n", "hd/link2": b"linked\n"}
for phase in ["cached", "after drop_caches", "after drop_caches again"]:
    if phase != "cached": drop()
    for p, data in want.items():
        fd = by_handle(mfd, hs[p], os.O_RDONLY, p + " " + phase)
        got = os.read(fd, 100); os.close(fd)
        if got != data: sys.exit("FAIL: %s %s: read %r" % (p, phase, got))
    for p in ["hd/sub", "hd", "."]:
        fd = by_handle(mfd, hs[p], os.O_RDONLY | os.O_DIRECTORY, p + " " + phase)
        names = sorted(os.listdir(fd)); os.close(fd)
        if sorted(os.listdir(p)) != names: sys.exit("FAIL: %s %s: lists %r" % (p, phase, names))
    try:
        fd = by_handle(mfd, hs["hd/gone"], os.O_RDONLY, "gone")
        sys.exit("FAIL: a deleted file opened by handle (%s)" % phase)
    except OSError as e:
        if e.errno != 116: sys.exit("FAIL: deleted file: %s, want ESTALE" % e)
# a handle opened by path name: the same inode (fstat)
fd = by_handle(mfd, hs["hd/link2"], os.O_RDONLY, "link2")
if os.fstat(fd).st_ino != os.stat("hd/sub/linked").st_ino: sys.exit("FAIL: link2 handle names another inode")
os.close(fd)
# save the handles for after a remount
with open(sys.argv[2], "wb") as f:
    for p in ["hd/file", "hd/link2", "hd/sub"]:
        f.write(bytes(hs[p])[:8 + hs[p].bytes])
print("handles: ok")
PY
cat > seek.py <<'PY'
import os, sys, errno
mnt = sys.argv[1]
SD, SH = os.SEEK_DATA, os.SEEK_HOLE
K = 1024
def seek(fd, off, whence):
    try: return os.lseek(fd, off, whence)
    except OSError as e: return -e.errno
def check(name, fd, cases):
    for off, whence, want in cases:
        got = seek(fd, off, whence)
        w = "DATA" if whence == SD else "HOLE"
        print("%s: SEEK_%s %d -> %d" % (name, w, off, got))
        if got != want: sys.exit("FAIL: %s: SEEK_%s from %d gave %d, want %d" % (name, w, off, got, want))
p = os.path.join(mnt, "seek")
os.makedirs(p, exist_ok=True)
# 1. only data: SEEK_HOLE is EOF
fd = os.open(p + "/data", os.O_CREAT | os.O_RDWR | os.O_TRUNC)
os.write(fd, b"x" * (10 * K + 123)); os.fsync(fd)
E = 10 * K + 123
check("data only", fd, [(0, SD, 0), (0, SH, E), (5000, SD, 5000), (5000, SH, E),
                        (E - 1, SD, E - 1), (E, SD, -errno.ENXIO), (E, SH, -errno.ENXIO),
                        (E + K, SD, -errno.ENXIO), (E + K, SH, -errno.ENXIO)])
os.close(fd)
# 2. hole, data, hole, data, hole at the end (truncate)
fd = os.open(p + "/sparse", os.O_CREAT | os.O_RDWR | os.O_TRUNC)
os.pwrite(fd, b"a" * (4 * K), 64 * K)       # data [64K, 68K)
os.pwrite(fd, b"b" * (8 * K), 256 * K)      # data [256K, 264K)
os.ftruncate(fd, 1024 * K); os.fsync(fd)
S = 1024 * K
check("sparse", fd, [(0, SD, 64 * K), (0, SH, 0), (10, SH, 10), (64 * K, SH, 68 * K),
                     (65 * K, SD, 65 * K), (66 * K, SH, 68 * K), (68 * K, SD, 256 * K),
                     (100 * K, SD, 256 * K), (260 * K, SH, 264 * K), (264 * K, SD, -errno.ENXIO),
                     (264 * K, SH, 264 * K), (S - 1, SH, S - 1), (S, SH, -errno.ENXIO)])
os.close(fd)
# 3. empty file: ENXIO both ways
fd = os.open(p + "/empty", os.O_CREAT | os.O_RDWR | os.O_TRUNC)
check("empty", fd, [(0, SD, -errno.ENXIO), (0, SH, -errno.ENXIO)])
os.close(fd)
# 4. preallocated (unwritten) ranges read as zeroes: holes to SEEK_DATA, like ext4 and XFS
fd = os.open(p + "/prealloc", os.O_CREAT | os.O_RDWR | os.O_TRUNC)
os.posix_fallocate(fd, 0, 64 * K)
os.pwrite(fd, b"c" * 4096, 16 * K); os.fsync(fd)
check("prealloc", fd, [(0, SD, 16 * K), (0, SH, 0), (16 * K, SH, 20 * K), (17 * K, SD, 17 * K),
                       (20 * K, SD, -errno.ENXIO), (20 * K, SH, 20 * K), (63 * K, SH, 63 * K)])
os.close(fd)
print("seek: ok")
PY
cat > dio.py <<'PY'
import mmap, os, random, sys
mnt = sys.argv[1]
K = 4096
def aligned(data):
    m = mmap.mmap(-1, len(data)); m.write(data); return m
def pattern(tag, n):
    return (tag * (n // len(tag) + 1))[:n]
p = os.path.join(mnt, "dio")
# 1. buffered write, then O_DIRECT overwrite of the middle, then buffered read (page cache warm)
with open(p, "wb") as f: f.write(pattern(b"B", 64 * K))
with open(p, "rb") as f: assert f.read() == pattern(b"B", 64 * K)       # cached now
fd = os.open(p, os.O_RDWR | os.O_DIRECT)
assert os.pwritev(fd, [aligned(pattern(b"D", 16 * K))], 16 * K) == 16 * K
os.close(fd)
with open(p, "rb") as f: got = f.read()
want = pattern(b"B", 16 * K) + pattern(b"D", 16 * K) + pattern(b"B", 32 * K)
if got != want:
    bad = next(i for i in range(len(want)) if got[i] != want[i])
    sys.exit("FAIL: buffered read after a direct write: stale from byte %d (%r)" % (bad, got[bad:bad + 8]))
# 2. buffered write (cached, maybe not yet written back), then O_DIRECT read
with open(p, "r+b") as f:
    f.seek(40 * K); f.write(pattern(b"W", 8 * K))
    f.flush()
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
    m = mmap.mmap(-1, 64 * K)
    n = os.preadv(fd, [m], 0)
    os.close(fd)
want = want[:40 * K] + pattern(b"W", 8 * K) + want[48 * K:]
if n != 64 * K or m[:] != want:
    bad = next(i for i in range(len(want)) if m[i] != want[i])
    sys.exit("FAIL: direct read after a buffered write: stale from byte %d" % bad)
# 3. both descriptors open at once: direct write through one, buffered read through the other
b = os.open(p, os.O_RDWR)
d = os.open(p, os.O_RDWR | os.O_DIRECT)
for r in range(20):
    os.pread(b, 64 * K, 0)                                  # warm the cache
    data = pattern(bytes([65 + r]), 8 * K)
    os.pwritev(d, [aligned(data)], (r % 8) * 8 * K)
    if os.pread(b, 8 * K, (r % 8) * 8 * K) != data:
        sys.exit("FAIL: round %d: buffered read through an open descriptor after a direct write is stale" % r)
    os.pwrite(b, pattern(b"z", 4 * K), (r % 8) * 8 * K)    # buffered write, then direct read
    m = mmap.mmap(-1, 8 * K)
    os.preadv(d, [m], (r % 8) * 8 * K)
    if m[:4 * K] != pattern(b"z", 4 * K) or m[4 * K:] != data[4 * K:]:
        sys.exit("FAIL: round %d: direct read after a buffered write is stale" % r)
os.close(b); os.close(d)
# 4. a direct write past EOF (extends, leaves a hole) seen by a buffered reader
with open(p, "wb") as f: f.write(b"a" * 16 * K)
b = os.open(p, os.O_RDWR)
os.pread(b, 64 * K, 0)
d = os.open(p, os.O_RDWR | os.O_DIRECT)
os.pwritev(d, [aligned(b"e" * 16 * K)], 32 * K)
if os.pread(b, 64 * K, 0) != b"a" * 16 * K + b"\0" * 16 * K + b"e" * 16 * K:
    sys.exit("FAIL: buffered read after an extending direct write")
os.close(b); os.close(d)
# 5. random mix of 512-byte-aligned direct and unaligned buffered I/O, checked against a model
seed = int(sys.argv[2])
print("direct/buffered random mix: seed", seed)
random.seed(seed)
p = os.path.join(mnt, "dio3")
N = 256 * 1024
model = bytearray(random.randbytes(N))
with open(p, "wb") as f: f.write(model)
b = os.open(p, os.O_RDWR)
d = os.open(p, os.O_RDWR | os.O_DIRECT)
for r in range(400):
    op = random.randrange(4)
    off = random.randrange(0, N // 512) * 512
    ln = min(random.randrange(1, 33) * 512, N - off)
    if op == 0:
        data = random.randbytes(ln); os.pwritev(d, [aligned(data)], off); model[off:off+ln] = data
    elif op == 1:
        o2 = random.randrange(N); l2 = min(random.randrange(1, 20000), N - o2)
        data = random.randbytes(l2); os.pwrite(b, data, o2); model[o2:o2+l2] = data
    elif op == 2:
        got = os.pread(b, ln, off)
        if got != model[off:off+ln]: sys.exit("FAIL op %d buffered read stale at %d+%d" % (r, off, ln))
    else:
        m = mmap.mmap(-1, ln)
        try:
            n = os.preadv(d, [m], off)
        except OSError as e:
            sys.exit("FAIL op %d direct read %d+%d: %s" % (r, off, ln, e))
        if m[:n] != model[off:off+n]: sys.exit("FAIL op %d direct read stale at %d+%d" % (r, off, ln))
os.close(b); os.close(d)
# 6. data changed by the daemon (hole punch, zero range, copy_file_range) over cached pages
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
p = os.path.join(mnt, "dio4")
with open(p, "wb") as f: f.write(b"x" * 64 * K)
fd = os.open(p, os.O_RDWR)
for name, mode in [("PUNCH_HOLE", 3), ("ZERO_RANGE", 0x10), ("ZERO_RANGE|KEEP_SIZE", 0x11)]:
    os.pwrite(fd, b"x" * 64 * K, 0)
    os.pread(fd, 64 * K, 0)
    if libc.fallocate(fd, mode, 8 * K + 100, 8 * K):
        sys.exit("FAIL: fallocate %s: %s" % (name, os.strerror(ctypes.get_errno())))
    if os.pread(fd, 64 * K, 0) != b"x" * (8 * K + 100) + b"\0" * 8 * K + b"x" * (48 * K - 100):
        sys.exit("FAIL: buffered read after fallocate %s is stale" % name)
os.pwrite(fd, b"x" * 64 * K, 0); os.pread(fd, 64 * K, 0)
with open(p + "src", "wb") as f: f.write(b"C" * 8 * K)
src = os.open(p + "src", os.O_RDONLY)
if os.copy_file_range(src, fd, 8 * K, 0, 4 * K) != 8 * K or \
   os.pread(fd, 64 * K, 0) != b"x" * 4 * K + b"C" * 8 * K + b"x" * 52 * K:
    sys.exit("FAIL: buffered read after copy_file_range is stale")
os.close(src); os.close(fd)
print("direct/buffered: ok")
PY

# ---- a live mount is refused at once (no wait): only an unmounted one is waited for
t0=$(date +%s)
expect_rc 1 $B image put img /etc/hostname /h
expect_in err 'img: mounted \(fusemount\) at .*: use the files there, or unmount first'
expect_not_in err 'waiting'
[ $(($(date +%s) - t0)) -lt 5 ] || fail "a live mount made the writer wait"

# ---- unmount, then at once fsck -n or mount: 50 cycles each, files written every time
cycle() {	# cycle N UNMOUNT-COMMAND...
	n=$1; shift
	mkdir -p "mnt/c$n"
	for j in 1 2 3; do head -c $((j * 40000 + n)) /dev/urandom > "mnt/c$n/f$j"; done
	sha256sum mnt/c$n/f* > "sums.$n"
	"$@" "$mnt" || fail "cycle $n: $* failed"
}
waited=0
start=$(date +%s.%N)
for n in $(seq 1 50); do
	cycle "$n" umount
	$B fsck -n -f img > fsck.out 2> fsck.err || fail "cycle $n: fsck -n after umount: $(cat fsck.out fsck.err)"
	grep -q ' 0 problems found' fsck.out || fail "cycle $n: fsck -n: $(cat fsck.out)"
	grep -q "^bcachefs fsck: img: waiting for the unmounted filesystem's daemon to close it" fsck.err &&
		waited=$((waited + 1))
	$B fusemount img mnt || fail "cycle $n: mount after fsck"
done
t_fsck=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.3f", a - b }')
start=$(date +%s.%N)
for n in $(seq 51 100); do
	if [ $((n % 2)) = 0 ]; then cycle "$n" umount; else cycle "$n" fusermount3 -u; fi
	$B fusemount img mnt 2> mount.err || fail "cycle $n: mount right after unmount: $(cat mount.err)"
	grep -q "waiting for the unmounted" mount.err && waited=$((waited + 1))
	sha256sum -c --quiet "sums.$n" || fail "cycle $n: data changed across the remount"
done
t_mount=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.3f", a - b }')
echo "50 x (write 3 files; umount; fsck -n -f; mount): ${t_fsck}s"
echo "50 x (write 3 files; umount or fusermount3 -u; mount): ${t_mount}s"
echo "of the 100 commands run right after an unmount, $waited waited for the close"
# every file of every cycle is still there
for n in $(seq 1 100); do sha256sum -c --quiet "sums.$n" || fail "cycle $n: data lost"; done

# ---- the same through a loop device: mounted by the device's name, the image
# file opened at once (the wait is found through the backing file's mark)
# (skipped, and counted, only where the machine has no loop devices at all)
loop=
if [ ! -e /dev/loop-control ]; then
	skip_part "loop device cycles: no /dev/loop-control on this machine"
else
	loop=$(losetup -f --show img 2>losetup.err) || fail "losetup: $(cat losetup.err)"
fi
if [ -n "$loop" ]; then
	umount "$mnt"
	trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null; losetup -d "$loop"' EXIT
	for n in $(seq 101 110); do
		$B fusemount "$loop" mnt || fail "cycle $n: mount of $loop"
		cycle "$n" umount
		$B fsck -n -f img > fsck.out 2> fsck.err || fail "cycle $n: fsck -n img after umount of $loop: $(cat fsck.out fsck.err)"
		grep -q ' 0 problems found' fsck.out || fail "cycle $n: fsck -n: $(cat fsck.out)"
	done
	losetup -d "$loop"
	trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
	$B fusemount img mnt || fail "mount after the loop device cycles"
	for n in $(seq 101 110); do sha256sum -c --quiet "sums.$n" || fail "cycle $n: data lost"; done
fi

# ---- file handles: a file, a hard-linked file, directories, after drop_caches;
# a deleted file's handle is ESTALE; the handles still work after a remount
python3 handles.py "$mnt" handles.bin || fail "file handles"
umount "$mnt"
$B fusemount img mnt || fail "remount"
python3 handles.py "$mnt" handles.bin reopen || fail "file handles after a remount"

# ---- SEEK_DATA/SEEK_HOLE answered by the daemon (FUSE_LSEEK): data only,
# holes, past EOF, empty, preallocated ranges (holes, as on ext4 and XFS)
python3 seek.py "$mnt" > seek.out || fail "SEEK_DATA/SEEK_HOLE: $(tail -3 seek.out)"

# ---- direct and buffered I/O on one file see each other's writes (fixed seed),
# and buffered readers see what the daemon changes (fallocate, copy_file_range)
python3 dio.py "$mnt" 7 || fail "direct/buffered coherence"

umount "$mnt"
expect_rc 0 $B fsck -n -f img
expect_in out ' 0 problems found'
