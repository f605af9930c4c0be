# The plain-file read-ahead (7e9e73a: uncached reads into the daemon's
# slots, replied from there) under changes to what it read: every byte a
# reader gets is one the file held at some time during that read.
# Part 1, two mountpoints of one daemon (--replicas=2, --data-checksum=none:
# only c->data_reuse_seq tells a slot stale, no checksum does; 256 KiB
# buckets: space reused soon): through m1 four writers change 4 KiB blocks
# of a 24 MiB file, each block stamped (block, version): pwrite, mmap,
# punch (FALLOC_FL_PUNCH_HOLE), copy_file_range from a file overwritten
# after; through m2 two readers read it sequentially (page cache dropped
# before each pass) and check each block against the versions acknowledged
# before and begun after their read; a third reads a 36 MiB file over and
# over (slots evicted under the others); meanwhile scrub, rebalance with
# background_compression set and unset, replicas 1 <-> 2 and rereplicate.
# The daemon must hold an O_DIRECT descriptor of an image (else the
# uncached read-ahead was not exercised: d254848's binary fails here).
# Part 2, one mountpoint, crc32c: unaligned writes, truncates, punches,
# reflinks, renames over, mmap and O_DIRECT writes, each followed by a
# whole read (128 KiB and 1 MiB requests) against a model.  fsck clean.
# Part 1 read a punched block's older bytes about one run in four (also
# with d254848's binary) until fallocate and copy_file_range told the
# other mountpoint before their reply, as write does (session 29).
# Data: python's random.Random, seeds 112, 113.
need_fuse
need python3
need timeout
plain_only "the read-ahead of plain files"
echo "seeds: 112 113"
mkdir m1 m2
trap 'cd /; for d in m1 m2; do fusermount3 -uz "$OLDPWD/$d" 2>/dev/null; done' EXIT

cat > ra.py <<'PY'
import os, random, sys, threading, time, mmap, ctypes
libc = ctypes.CDLL(None, use_errno=True)
def punch(fd, off, n):
    if libc.fallocate(fd, 3, ctypes.c_long(off), ctypes.c_long(n)):
        raise OSError(ctypes.get_errno(), 'fallocate')
# ra.py MNT SECONDS SEED READMNT NCHURN: stamps every 4 KiB block with (block, version);
# one writer thread changes blocks, reader threads read the file sequentially
# and check every block against what was acknowledged before and started
# after their read.
mnt, secs, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rmnt = sys.argv[4] if len(sys.argv) > 4 else mnt
NCHURN = int(sys.argv[5]) if len(sys.argv) > 5 else 0
BS = 4096
NB = 24 * 256			# 24 MiB
path = os.path.join(mnt, "f")
lock = threading.Lock()
acked = [0] * NB		# last version whose write returned
started = [0] * NB		# last version whose write began
kind = {}			# (b, v) -> 'z' for a punch
def blk(b, v):
    if v == 0 or kind.get((b, v)) == 'z':
        return bytes(BS)
    h = b"%08d:%08d;" % (b, v)
    return (h * (BS // len(h) + 1))[:BS]
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.ftruncate(fd, NB * BS)
errors = []
stop = time.time() + secs
ver = [1]
def writer(w):
    rnd = random.Random(seed * 100 + w)
    cfr_src = os.open(os.path.join(mnt, "src%d" % w), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    n = 0
    while time.time() < stop and not errors:
        n += 1
        op = rnd.random()
        nb = rnd.choice([1, 1, 4, 16, 32, 64, 100])
        if nb == 1:	# singles in the upper half, each writer its own blocks
            b0 = NB // 2 + rnd.randrange(0, NB // 8) * 4 + w
        else:		# runs (writer 0 only) in the lower half
            b0 = rnd.randrange(0, NB // 2 - nb)
        with lock:
            if nb > 1 and w != 0:
                continue	# only writer 0 writes runs (no two writers on a block)
            v = ver[0]; ver[0] += 1
            for b in range(b0, b0 + nb):
                started[b] = v
        if op < 0.15 and nb >= 4:
            kind.update({(b, v): 'z' for b in range(b0, b0 + nb)})
            punch(fd, b0 * BS, nb * BS)	# PUNCH_HOLE | KEEP_SIZE
        elif op < 0.3 and nb >= 4:
            data = b"".join(blk(b, v) for b in range(b0, b0 + nb))
            os.pwrite(cfr_src, data, 0)
            done = 0
            while done < nb * BS:
                done += os.copy_file_range(cfr_src, fd, nb * BS - done, done, b0 * BS + done)
            os.pwrite(cfr_src, bytes(nb * BS), 0)	# overwrite the source after the reflink
        elif op < 0.4:
            m = mmap.mmap(fd, nb * BS + (b0 * BS) % mmap.ALLOCATIONGRANULARITY,
                          offset=b0 * BS - (b0 * BS) % mmap.ALLOCATIONGRANULARITY)
            o = (b0 * BS) % mmap.ALLOCATIONGRANULARITY
            m[o:o + nb * BS] = b"".join(blk(b, v) for b in range(b0, b0 + nb))
            m.flush(); m.close()
        else:
            os.pwrite(fd, b"".join(blk(b, v) for b in range(b0, b0 + nb)), b0 * BS)
        if rnd.random() < 0.05:
            os.fsync(fd)
        with lock:
            for b in range(b0, b0 + nb):
                acked[b] = max(acked[b], v)
def reader(r):
    rfd = os.open(os.path.join(rmnt, "f"), os.O_RDONLY)
    passes = 0
    while time.time() < stop and not errors:
        os.posix_fadvise(rfd, 0, 0, os.POSIX_FADV_DONTNEED)
        off = 0
        chunk = random.Random(r).choice([131072, 65536, 1 << 20])
        while off < NB * BS:
            with lock:
                lo = acked[off // BS: off // BS + chunk // BS]
            d = os.pread(rfd, chunk, off)
            with lock:
                hi = started[off // BS: off // BS + chunk // BS]
            if len(d) != min(chunk, NB * BS - off):
                errors.append("short read at %d: %d" % (off, len(d))); return
            for i in range(len(d) // BS):
                b = off // BS + i
                got = d[i * BS:(i + 1) * BS]
                ok = any(got == blk(b, v) for v in range(lo[i], hi[i] + 1)) if hi[i] - lo[i] < 64 else \
                     got == bytes(BS) or got[:9] == b"%08d:" % b and lo[i] <= int(got[9:17]) <= hi[i] and got == blk(b, int(got[9:17]))
                if not ok:
                    errors.append("reader %d pass %d block %d: got %r, versions %d..%d allowed" %
                                  (r, passes, b, got[:40], lo[i], hi[i])); return
            off += chunk
        passes += 1
    print("reader", r, "passes", passes)
def churn(k):	# readers of other files: the slots evicted under the checked readers
    q = os.path.join(mnt, "c%d" % k)
    data = random.Random(k).randbytes(36 << 20)
    with open(q, "wb") as f: f.write(data)
    cfd = os.open(os.path.join(rmnt, "c%d" % k), os.O_RDONLY)
    while time.time() < stop and not errors:
        os.posix_fadvise(cfd, 0, 0, os.POSIX_FADV_DONTNEED)
        for off in range(0, len(data), 262144):
            if os.pread(cfd, 262144, off) != data[off:off + 262144]:
                errors.append("churn file %d differs at %d" % (k, off)); return
ts = [threading.Thread(target=churn, args=(k,)) for k in range(NCHURN)]
ts += [threading.Thread(target=writer, args=(w,)) for w in range(4)]
ts += [threading.Thread(target=reader, args=(r,)) for r in range(2)]
for t in ts: t.start()
for t in ts: t.join()
# a last quiet pass: every block exactly its last version
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
for off in range(0, NB * BS, 1 << 20):
    d = os.pread(fd, 1 << 20, off)
    for i in range(len(d) // BS):
        b = off // BS + i
        if d[i * BS:(i + 1) * BS] != blk(b, acked[b]):
            errors.append("final block %d: got %r want version %d" % (b, d[i*BS:i*BS+40], acked[b])); break
print("versions", ver[0])
if errors:
    print("\n".join(errors[:5])); sys.exit(1)
PY
cat > ra2.py <<'PY'
import os, random, sys, ctypes, mmap, time
# ra2.py MNT SECONDS SEED: one file changed by unaligned writes, truncates,
# punches, reflink copies, renames over it; after each change, the whole
# file read sequentially (page cache dropped) and compared with the model.
libc = ctypes.CDLL(None, use_errno=True)
mnt, secs, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
p = os.path.join(mnt, "g")
MAX = 40 << 20
model = bytearray(rnd.randbytes(8 << 20))
with open(p, "wb") as f: f.write(model)
fd = os.open(p, os.O_RDWR)
stop = time.time() + secs
n = 0
def rd(fd, size, chunk):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    out = bytearray()
    while True:
        d = os.pread(fd, chunk, len(out))
        if not d: break
        out += d
    return out
while time.time() < stop:
    n += 1
    op = rnd.random(); L = len(model)
    off = rnd.randrange(0, L + 1); ln = rnd.choice([1, 511, 4097, 65535, 300000, 2 << 20])
    if op < 0.35:
        d = rnd.randbytes(ln); os.pwrite(fd, d, off)
        if off + ln > L: model += bytes(off + ln - L)
        model[off:off + ln] = d
    elif op < 0.45:
        nl = rnd.randrange(0, min(MAX, L * 2 + 4096)); os.ftruncate(fd, nl)
        model = model[:nl] + bytes(max(0, nl - L))
    elif op < 0.55 and off < L:
        ln = min(ln, L - off)
        if libc.fallocate(fd, 3, ctypes.c_long(off), ctypes.c_long(ln)): raise OSError(ctypes.get_errno(), "punch")
        model[off:off + ln] = bytes(ln)
    elif op < 0.7 and L > 0:
        s = rnd.randrange(0, L); ln = min(ln, L - s); off = rnd.randrange(0, L)
        c = 0
        while c < ln:
            k = os.copy_file_range(fd, fd, ln - c, s + c, off + c) if abs(s - off) >= ln else 0
            if k == 0: break
            c += k
        src = bytes(model[s:s + c])
        if off + c > L: model += bytes(off + c - L)
        model[off:off + c] = src
    elif op < 0.8:	# a copy renamed over the file (the old fd keeps the old file)
        q = os.path.join(mnt, "g.new")
        d = bytes(model); d = d[:len(d) // 2] + rnd.randbytes(len(d) - len(d) // 2)
        with open(q, "wb") as f: f.write(d)
        os.rename(q, p); os.close(fd); fd = os.open(p, os.O_RDWR); model = bytearray(d)
    elif op < 0.88 and L > 65536:	# an O_DIRECT write through the mount
        off = rnd.randrange(0, L // 4096) * 4096; ln = min(rnd.choice([4096, 65536, 1 << 20]), (L - off) // 4096 * 4096)
        if ln:
            buf = mmap.mmap(-1, ln); d = rnd.randbytes(ln); buf[:] = d
            dfd = os.open(p, os.O_WRONLY | os.O_DIRECT)
            assert os.pwritev(dfd, [buf], off) == ln
            os.close(dfd); buf.close()
            model[off:off + ln] = d
    elif L > 4096:
        ln = min(ln, L - off) if off < L else 0
        if ln:
            base = off - off % mmap.ALLOCATIONGRANULARITY
            m = mmap.mmap(fd, off + ln - base, offset=base)
            d = rnd.randbytes(ln); m[off - base:off - base + ln] = d; m.close()
            model[off:off + ln] = d
    if rnd.random() < 0.1: os.fsync(fd)
    for chunk in (131072, 1 << 20):
        got = rd(fd, len(model), chunk)
        if got != model:
            i = next((i for i in range(min(len(got), len(model))) if got[i] != model[i]), min(len(got), len(model)))
            print("op %d (%.2f): read of %d B chunks differs at byte %d (size got %d want %d)" % (n, op, chunk, i, len(got), len(model)))
            sys.exit(1)
print("ops", n, "size", len(model))
PY
cat > admin.sh <<'SH'
end=$(($(date +%s) + $1)) i=0
while [ ! -e m1/f ] && [ $(date +%s) -lt $end ]; do sleep 0.1; done
while [ $(date +%s) -lt $end ]; do
	i=$((i + 1))
	case $((i % 4)) in
	0) $B setattr --background_compression=lz4 m1/f && $B data rebalance m1 ;;
	1) $B setattr --background_compression=none m1/f && $B data scrub m1 ;;
	2) $B setattr --data_replicas=1 m1/f && $B data rereplicate m1 ;;
	3) $B setattr --data_replicas=2 m1/f && $B data rereplicate m1 ;;
	esac >> admin.log 2>&1
	rc=$?
	# rebalance may leave work (2)
	[ $rc = 0 ] || [ $rc = 2 ] || { echo "admin job $i: rc $rc"; tail -5 admin.log; }
done
SH

expect_rc 0 $B format -q --replicas=2 --data-checksum=none --fs-size=160M --bucket-size=256k img \
	--fs-size=160M --bucket-size=256k img2
expect_rc 0 $B fusemount "$PWD/img:$PWD/img2" m1
expect_rc 0 $B fusemount "$PWD/img:$PWD/img2" m2
daemon=$(pgrep -f "fusemount $PWD/img:$PWD/img2 m1" | head -1)
[ -n "$daemon" ] || fail "no daemon pid"
sh admin.sh 10 > admin.out &
admin=$!
timeout 90 python3 ra.py m1 10 112 m2 1 || fail "part 1: a read returned bytes the file never held there (or the run failed)"
wait $admin
[ -s admin.out ] && { cat admin.out; fail "an admin job failed"; }
direct=
for f in /proc/$daemon/fd/*; do
	case $(readlink "$f") in "$PWD"/img*)
		fl=$(sed -n 's/^flags:[[:space:]]*//p' /proc/$daemon/fdinfo/${f##*/})
		[ $((0$fl & 040000)) != 0 ] && direct=1 ;;
	esac
done
[ -n "$direct" ] || fail "the daemon holds no O_DIRECT descriptor of an image: no uncached read-ahead ran"
fusermount3 -u m2 || fail "unmount m2"
fusermount3 -u m1 || fail "unmount m1"
for i in $(seq 50); do kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
expect_rc 0 $B fsck -n -f img img2
expect_in out ' 0 problems found'

rm -f img img2
expect_rc 0 $B format -q --fs-size=192M --bucket-size=256k img
expect_rc 0 $B fusemount "$PWD/img" m1
timeout 60 python3 ra2.py m1 6 113 || fail "part 2: a whole read differs from the model"
fusermount3 -u m1 || fail "unmount m1"
sleep 0.5
expect_rc 0 $B fsck -n -f img
expect_in out ' 0 problems found'
