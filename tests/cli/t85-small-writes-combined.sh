# Small writes outside the engine lock, their ends combined (issue 32;
# fusemount_ops.c plan_write(), end_write()).  Through the mount: 4 KiB
# writes of whole blocks run outside the lock (fs timestats writes_unlocked
# counts each), 100-byte ones do not; the bytes are all there.  Then, with
# BCACHEFS_TEST_WRITE_HOLD making every write hold the lock 2 ms at its
# begin, four writers at once, each 4 KiB random writes into its own file
# and into one shared file: some writes are ended in another's hold of the
# lock (writes_combined), none redone; each own file has the bytes its
# writer wrote (sha256, also after a remount), each 4 KiB block of the
# shared file is one write's whole; fsck -f clean.  Then near full, the
# same: four writers append 4 KiB writes until ENOSPC (twice in a row):
# each file holds exactly what its writes were told, their sum fits what
# `fs usage` said was free, a further 4 KiB write fails with ENOSPC.  Data:
# python's random.Random, seed 85.
need_fuse
need python3
echo "seed: 85"
mkdir m
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT

cat > writer.py <<'PY'
import hashlib, os, random, sys
mode, mnt, w = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(85 * 10 + w)
if mode == "small":
    # 64 writes of one whole block, 64 of 100 bytes at odd offsets
    fd = os.open(f"{mnt}/small", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    data = bytearray(256 * 4096)
    for i in range(64):
        blk = rnd.randrange(0, 256)
        b = rnd.randbytes(4096)
        assert os.pwrite(fd, b, blk * 4096) == 4096
        data[blk * 4096:(blk + 1) * 4096] = b
    for i in range(64):
        off = rnd.randrange(0, 256 * 4096 - 100) | 1
        b = rnd.randbytes(100)
        assert os.pwrite(fd, b, off) == 100
        data[off:off + 100] = b
    os.close(fd)
    open("small.sha", "w").write(hashlib.sha256(data[:os.stat(f"{mnt}/small").st_size]).hexdigest())
elif mode == "own":
    # 1 MiB written whole, then 300 random 4 KiB rewrites
    fd = os.open(f"{mnt}/own{w}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    data = bytearray(rnd.randbytes(1 << 20))
    assert os.pwrite(fd, data, 0) == len(data)
    for i in range(300):
        blk = rnd.randrange(0, 256)
        b = rnd.randbytes(4096)
        assert os.pwrite(fd, b, blk * 4096) == 4096
        data[blk * 4096:(blk + 1) * 4096] = b
    os.close(fd)
    open(f"own{w}.sha", "w").write(hashlib.sha256(data).hexdigest())
elif mode == "shared":
    # 4 KiB writes of one byte value (writer, round) into the shared file's 64 blocks
    fd = os.open(f"{mnt}/shared", os.O_WRONLY)
    for r in range(200):
        assert os.pwrite(fd, bytes([16 * w + r % 16 + 1]) * 4096, rnd.randrange(0, 64) * 4096) == 4096
    os.close(fd)
elif mode == "fill":
    # append 4 KiB until ENOSPC twice in a row; each stored write in fillN.chunks
    fd = os.open(f"{mnt}/fill{w}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    chunks = open(f"fill{w}.chunks", "w")
    stored, nospc = 0, 0
    while nospc < 2:
        buf = random.Random(w * 1000003 + stored).randbytes(4096)
        try:
            k = os.pwrite(fd, buf, stored)
        except OSError as e:
            assert e.errno == 28, e
            nospc += 1
            continue
        assert k == 4096, k
        chunks.write(f"{stored}\n")
        chunks.flush()
        stored += k
        nospc = 0
    os.close(fd)
PY

cat > check.py <<'PY'
import hashlib, random, sys
mode, mnt = sys.argv[1], sys.argv[2]
if mode == "own":
    for w in range(4):
        h = hashlib.sha256(open(f"{mnt}/own{w}", "rb").read()).hexdigest()
        assert h == open(f"own{w}.sha").read(), f"own{w}: content differs"
elif mode == "shared":
    d = open(f"{mnt}/shared", "rb").read()
    assert len(d) == 64 * 4096, len(d)
    for b in range(64):
        blk = d[b * 4096:(b + 1) * 4096]
        assert blk == blk[:1] * 4096, (b, sorted(set(blk)))
elif mode == "fill":
    total = 0
    for w in range(4):
        d = open(f"{mnt}/fill{w}", "rb").read()
        want = b"".join(random.Random(w * 1000003 + int(at)).randbytes(4096)
                        for at in open(f"fill{w}.chunks"))
        assert d == want, f"fill{w}: {len(d)} bytes, want {len(want)}"
        total += len(d)
    print(total)
PY

# whole blocks outside the lock, 100-byte writes not
expect_rc 0 $B format -q --fs-size=128M a.img
expect_rc 0 $B fusemount "$PWD/a.img" m
expect_rc 0 $B fs timestats --reset m
python3 writer.py small m 0 || fail "the small writer failed"
expect_rc 0 $B fs timestats --json m
python3 -c 'import json; j = json.load(open("out")); assert j["writes_unlocked"] == 64 and j["writes_redone"] == 0, j' ||
	fail "4 KiB writes not all outside the lock: $(cat out)"
[ "$(sha256sum < m/small | cut -d' ' -f1)" = "$(cat small.sha)" ] || fail "small: content differs"

# four writers, each write holding the lock 2 ms: ends combined
fusermount3 -u m || fail "unmount"
BCACHEFS_TEST_WRITE_HOLD=2000 expect_rc 0 $B fusemount "$PWD/a.img" m
python3 -c 'import os; fd = os.open("m/shared", os.O_WRONLY | os.O_CREAT, 0o644); os.pwrite(fd, bytes(64 * 4096), 0)' ||
	fail "create shared"
expect_rc 0 $B fs timestats --reset m
pids=
for w in 0 1 2 3; do
	python3 writer.py own m $w & pids="$pids $!"
	python3 writer.py shared m $w & pids="$pids $!"
done
for p in $pids; do wait $p || fail "a writer failed"; done
expect_rc 0 $B fs timestats --json m
python3 - <<'PY' || fail "timestats: $(cat out)"
import json
j = json.load(open("out"))
print("writes outside the lock %d, ended in another's hold %d" % (j["writes_unlocked"], j["writes_combined"]))
assert j["writes_combined"] > 0 and j["writes_redone"] == 0, j
assert j["writes_unlocked"] >= 4 * 300 + 4 * 200, j
PY
python3 check.py own m || fail "own files differ"
python3 check.py shared m || fail "a torn write in the shared file"
fusermount3 -u m || fail "unmount"
expect_rc 0 $B fsck -n -f a.img
expect_in out ' 0 problems found'
expect_rc 0 $B fusemount "$PWD/a.img" m
python3 check.py own m || fail "own files differ after a remount"
fusermount3 -u m || fail "unmount"

# near full: ENOSPC at write(2), exact, with ends combined
expect_rc 0 $B format -q --fs-size=40M b.img
BCACHEFS_TEST_WRITE_HOLD=300 expect_rc 0 $B fusemount "$PWD/b.img" m
expect_rc 0 $B fs usage --json m
avail=$(python3 -c 'import json; print(json.load(open("out"))["available"])' 2>/dev/null) ||
	fail "fs usage --json: no available: $(head -c 500 out)"
pids=
for w in 0 1 2 3; do
	python3 writer.py fill m $w & pids="$pids $!"
done
for p in $pids; do wait $p || fail "a filler failed"; done
total=$(python3 check.py fill m) || fail "a filled file differs from what its writes returned"
echo "stored $total of $avail bytes available"
[ "$total" -le "$avail" ] || fail "stored $total, more than the $avail available"
[ "$total" -ge $((avail * 9 / 10)) ] || fail "stored $total of $avail: space lost"
dd if=/dev/zero of=m/fill0 bs=4096 count=1 seek=$(($(stat -c %s m/fill0) / 4096)) \
	conv=notrunc status=none 2>err && fail "a write after ENOSPC succeeded"
expect_in err 'No space left'
fusermount3 -u m || fail "unmount"
expect_rc 0 $B fsck -n -f b.img
expect_in out ' 0 problems found'
