# damage with --metadata-checksum=none (issue 29, item 5): nothing but the
# node format stands between a flipped byte and the commands, so none may hang,
# crash or trust an absurd value.
#   1. aimed cases: an extent moved to sector 0x1a00000000000000 (its byte
#      offset overflowed: image extract looped forever), an extent past its
#      file's end, two pointers of an interior node at one child (iterators
#      went backwards forever: list, fsck and extract hung);
#   2. a seeded campaign: random bytes flipped in every node (header, keys,
#      values) of a small image with interior nodes; each of fsck -n -f,
#      fsck -y -f, list -m nodes, list extents, image extract runs under
#      `timeout 30` (a timeout or an exit >= 128 fails), and when fsck -n
#      finds nothing, no extent may lie past its file's end or the largest
#      file (an absurd value must be reported, not trusted).
plain_only "the flips aim at plaintext keys"
SEED=${T48_SEED:-48}
FLIPS=${T48_FLIPS:-3}
echo "seed $SEED, $FLIPS flips per node"
T="timeout 30"

mkdir src
python3 - "$SEED" <<'EOF' || fail "generating files"
import random, sys
r = random.Random(int(sys.argv[1]))
for f in range(160):
    open("src/f%03d" % f, "wb").write(bytes(r.getrandbits(8) for _ in range(r.randint(1, 3000))))
EOF
expect_rc 0 $B format -q --metadata-checksum=none --btree-node-size=4k --fs-size=32M \
	--source=src nc.img
expect_rc 0 $B list -m nodes nc.img
cp out nodes
grep -q 'level 1' nodes || fail "no interior node to damage"

# the tools: the keys of a node (byte offset in the image, u64s), one byte flipped
cat > nodekeys.py <<'EOF'
import struct
def keys(img, sector, written, block=4096):
    with open(img, "rb") as f:
        f.seek(sector * 512)
        n = f.read(written * 512)
    seq = struct.unpack_from("<Q", n, 48)[0]
    out = []
    def walk(start, u64s):
        p = start
        while p < start + u64s * 8 and p + 8 <= len(n):
            ku = struct.unpack_from("<H", n, p)[0]
            if not ku:
                break
            out.append((sector * 512 + p, ku))
            p += ku * 8
    u = struct.unpack_from("<I", n, 128)[0]
    walk(136, u)
    off = (136 + u * 8 + block - 1) // block * block
    while off + 48 <= len(n) and struct.unpack_from("<Q", n, off + 16)[0] == seq:
        u = struct.unpack_from("<I", n, off + 40)[0]
        walk(off + 48, u)
        off = (off + 48 + u * 8 + block - 1) // block * block
    return out
def flip(img, pos, x):
    with open(img, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ x]))
def nodes(listing):
    import re
    out, bt = [], None
    for l in open(listing):
        m = re.match(r"btree (\w+):", l)
        if m:
            bt = m.group(1)
            continue
        m = re.search(r"level (\d+) .* written (\d+) sectors ptr 0:(\d+)", l)
        if m:
            out.append((bt, int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return out
EOF

# no_hang IMG: every command finishes in time and does not crash
no_hang() {
	for c in "fsck -n -f" "list -m nodes" "list -b extents"; do
		$T $B $c "$1" >/dev/null 2>&1
		r=$?
		[ $r -lt 124 ] || fail "$1: '$c' exited $r (timeout or crash)"
	done
	rm -rf xdir
	$T $B image extract "$1" xdir >/dev/null 2>&1
	r=$?
	[ $r -lt 124 ] || fail "$1: image extract exited $r (timeout or crash)"
	cp "$1" y.img
	$T $B fsck -y -f y.img >/dev/null 2>&1
	r=$?
	[ $r -lt 124 ] || fail "$1: fsck -y -f exited $r (timeout or crash)"
}

last_leaf=$(python3 -c '
import nodekeys
n = [x for x in nodekeys.nodes("nodes") if x[0] == "extents" and x[1] == 0]
print(n[-1][3], n[-1][2])')
ext_root=$(python3 -c '
import nodekeys
n = [x for x in nodekeys.nodes("nodes") if x[0] == "extents" and x[1] == 1]
print(n[0][3], n[0][2])')

# 1a. the last extent of the last leaf (its range ends at max) moved to
# sector 0x1a00000000000008: past the largest file
cp nc.img a.img
python3 -c "
import nodekeys
k = nodekeys.keys('a.img', *map(int, '$last_leaf'.split()))
nodekeys.flip('a.img', k[-1][0] + 16 + 8 + 7, 0x1a)"
no_hang a.img
expect_rc 4 $T $B fsck -n -f a.img
expect_in out 'past the largest file'
expect_in out 'bkey_invalid'
expect_rc 1 $T $B fsck -y -f a.img
expect_rc 0 $T $B fsck -n -f a.img

# 1b. an extent moved past its file's end, within the largest file
cp nc.img b.img
python3 -c "
import nodekeys
k = nodekeys.keys('b.img', *map(int, '$last_leaf'.split()))
nodekeys.flip('b.img', k[-1][0] + 16 + 8 + 3, 0x01)"
no_hang b.img
expect_rc 4 $T $B fsck -n -f b.img
expect_in out 'extent_past_eof'

# 1c. two pointers of the extents root at one child
cp nc.img c.img
python3 -c "
import nodekeys
k = nodekeys.keys('c.img', *map(int, '$ext_root'.split()))
f = open('c.img', 'r+b')
f.seek(k[1][0] + 40); seq = f.read(8); f.seek(k[1][0] + 80); ptr = f.read(16)
f.seek(k[3][0] + 40); f.write(seq); f.seek(k[3][0] + 80); f.write(ptr)"
no_hang c.img
expect_rc 4 $T $B fsck -n -f c.img
# fsck -n streams leaves past the cache (btree_prefetch.h): the second pointer
# then reads the node from disk and finds another range in it; list finds the
# node cached by the first pointer and says so
expect_in out 'reached for another key range|stale or misplaced node'
expect_in out 'btree_node_unreadable'
expect_rc 1 $T $B list -b extents c.img
expect_in err 'reached for another key range'

# 2. the campaign
python3 - "$SEED" "$FLIPS" "$B" <<'EOF' || fail "campaign"
import os, random, shutil, subprocess, sys
import nodekeys
seed, flips, B = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = random.Random(seed)
SECTORS_MAX = 1 << 54
def run(args):
    try:
        p = subprocess.run(["timeout", "30", B] + args, capture_output=True, text=True, errors="replace")
    except Exception as e:
        sys.exit("%s: %s" % (args, e))
    if p.returncode >= 124:
        sys.exit("FAIL: %s exited %d (timeout or crash)" % (" ".join(args), p.returncode))
    return p
def extents_sane(img):
    # when fsck -n finds nothing, every extent lies inside its file
    sizes = {}
    for l in run(["list", "-b", "inodes", img]).stdout.splitlines():
        w = l.split()
        if len(w) > 5 and w[1] == "inode" and w[4] == "size":
            sizes[int(w[0].split(":")[1])] = int(w[5])
    for l in run(["list", "-b", "extents", img]).stdout.splitlines():
        w = l.split()
        if len(w) > 3 and w[1] in ("extent",):
            ino, end = int(w[0].split(":")[0]), int(w[0].split(":")[1])
            start = end - int(w[3])
            lim = (sizes.get(ino, 0) + 4095) // 4096 * 8
            if end > SECTORS_MAX or (sizes.get(ino) and start >= lim):
                return "extent %s of inode %d (size %s) trusted" % (w[0], ino, sizes.get(ino))
    return None
n = 0
for bt, level, written, sector in nodekeys.nodes("nodes"):
    keys = nodekeys.keys("nc.img", sector, written)
    for i in range(flips):
        shutil.copy("nc.img", "t.img")
        if keys and r.random() < 0.8:
            p, ku = r.choice(keys)
            pos = p + r.randrange(ku * 8)
        else:
            pos = sector * 512 + r.randrange(136)
        x = r.randrange(1, 256)
        nodekeys.flip("t.img", pos, x)
        what = "%s level %d node at %d: byte %d ^ 0x%02x" % (bt, level, sector, pos, x)
        for args in (["list", "-m", "nodes", "t.img"], ["list", "-b", "extents", "t.img"]):
            run(args)
        shutil.rmtree("x", ignore_errors=True)
        run(["image", "extract", "t.img", "x"])
        p = run(["fsck", "-n", "-f", "t.img"])
        if p.returncode == 0:
            bad = extents_sane("t.img")
            if bad:
                sys.exit("FAIL: %s: fsck -n exit 0, %s" % (what, bad))
        run(["fsck", "-y", "-f", "t.img"])
        n += 1
print("campaign: %d damaged images, no hang, no crash" % n)
EOF
