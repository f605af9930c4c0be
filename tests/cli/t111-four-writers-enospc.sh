# Four writers at once near a full filesystem: 4 KiB blocks, each into its own
# file, append until write(2) says ENOSPC, then each rewrites random blocks
# of its file 200 times (a copy-on-write overwrite may get ENOSPC too: then
# nothing of it is written).  No write acknowledged is lost and none refused
# changed its block: each file reads back as its writer's model, before and
# after a remount; fsck clean; space left after the fill printed (statfs).
# Then a write past the end still gets ENOSPC (no space was made up).
# Data: python's random.Random, seed 111 (+ writer).
need_fuse
need python3
echo "seed: 111"
mkdir m
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT

cat > fill.py <<'PY'
import errno, hashlib, os, random, sys
w = int(sys.argv[1])
rnd = random.Random(111 + w)
fd = os.open(f"m/f{w}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
blocks = []
while True:
    b = rnd.randbytes(4096)
    try:
        n = os.pwrite(fd, b, len(blocks) * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
        break
    assert n == 4096, n
    blocks.append(b)
assert len(blocks) > 100, len(blocks)
ok = 0
for i in range(200):
    k = rnd.randrange(0, len(blocks))
    b = rnd.randbytes(4096)
    try:
        assert os.pwrite(fd, b, k * 4096) == 4096
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
        continue	# nothing written: the block stays the old one
    blocks[k] = b
    ok += 1
os.close(fd)
open(f"f{w}.sha", "w").write(hashlib.sha256(b"".join(blocks)).hexdigest())
print(f"writer {w}: {len(blocks)} blocks, {ok} of 200 rewrites")
PY
cat > check.py <<'PY'
import hashlib
for w in range(4):
    assert hashlib.sha256(open(f"m/f{w}", "rb").read()).hexdigest() == open(f"f{w}.sha").read(), f"f{w} differs"
PY

expect_rc 0 $B format -q --fs-size=64M img
expect_rc 0 $B fusemount "$PWD/img" m
pids=
for w in 0 1 2 3; do python3 fill.py $w & pids="$pids $!"; done
for p in $pids; do wait $p || fail "a writer failed"; done
python3 -c 'import os; s = os.statvfs("m"); print("free after the fill: %d KiB" % (s.f_bavail * s.f_frsize >> 10))'
python3 check.py || fail "contents before the remount"
fusermount3 -u m || fail "unmount"
for i in $(seq 50); do pgrep -f "fusemount $PWD/img m" >/dev/null || break; sleep 0.1; done
expect_rc 0 $B fsck -n -f img
expect_in out ' 0 problems found'
expect_rc 0 $B fusemount "$PWD/img" m
python3 check.py || fail "contents after the remount"
python3 -c '
import errno, os
fd = os.open("m/f0", os.O_WRONLY)
try:
    os.pwrite(fd, bytes(1 << 20), os.fstat(fd).st_size)
except OSError as e:
    assert e.errno == errno.ENOSPC, e
else:
    raise SystemExit("1 MiB more written on a full filesystem")
' || fail "a write past the end of a full filesystem"
fusermount3 -u m || fail "unmount"
