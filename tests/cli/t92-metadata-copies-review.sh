# Metadata copies on one device (format version 2), review cases: what
# happens to a filesystem with two copies on one device when devices come
# and go, and the options that name copies.  Deterministic: treetool.py
# seed 48.
tree=$ROOT/tests/cli/treetool.py
python3 "$tree" gen src 48 40 || fail "treetool gen"

same() {
	python3 "$tree" compare src got > cmp.log || fail "$1: $(tail -5 cmp.log)"
}
extract() {
	rm -rf got && mkdir got
	expect_rc 0 $B image extract "$@" got
}
# every node listed in ./out has copies on N distinct devices
nodes_on_devs() {
	grep ' ptr ' out > nodes || fail "no nodes listed"
	awk -v want="$1" '/ ptr /{ delete d; n = 0
		for (i = 1; i <= NF; i++) if ($i == "ptr") { split($(i + 1), a, ":"); if (!(a[1] in d)) n++; d[a[1]] = 1 }
		if (n != want) { print; bad = 1 } } END { exit bad }' nodes > wrong ||
		fail "$2: nodes not on $1 distinct devices: $(head -3 wrong)"
}

# 1. two copies on one device, a second device added, rereplicate: every
# node gets its copies on the two devices (two copies on the first device
# count as one device), and the first device alone can then be lost
expect_rc 0 $B format -q --metadata-replicas=2 --fs-size=64M --btree-node-size=32k --source=src a.img
truncate -s 64M b.img
expect_rc 0 $B device add a.img b.img
expect_rc 0 $B set-fs-option --data-replicas=2 a.img:b.img
expect_rc 0 $B data rereplicate a.img:b.img
expect_rc 0 $B list -m nodes a.img:b.img
nodes_on_devs 2 "device added, rereplicate"
expect_rc 0 $B fsck -n -f a.img:b.img
# (the replicas table keeps its one-device entries: very_degraded, as
# after any rereplicate; every read must still succeed)
extract -o very_degraded b.img
same "the first device lost after rereplicate"

# 2. set-fs-option takes two copies on one device as format does, and
# rereplicate gives the nodes written with one copy their second
expect_rc 0 $B format -q --fs-size=64M --btree-node-size=32k --source=src c.img
expect_rc 0 $B set-fs-option --metadata-replicas=2 c.img
expect_rc 0 $B data rereplicate c.img
expect_rc 0 $B list -m nodes c.img
grep ' ptr ' out | awk '{ n = 0; for (i = 1; i <= NF; i++) if ($i == "ptr") n++; if (n != 2) bad = 1 } END { exit bad }' ||
	fail "metadata_replicas=2 set, rereplicate: a node without two copies: $(grep ' ptr ' out | head -3)"
expect_rc 0 $B fsck -n -f c.img
expect_rc 1 $B set-fs-option --metadata-replicas=3 c.img
expect_in err "metadata_replicas=3"

# 3. the second device removed again (from case 1): no --force-metadata
# needed (one member holds two copies), and the nodes moved off it get
# their two copies on the first device
expect_rc 0 $B set-fs-option --data-replicas=1 a.img:b.img
expect_rc 0 $B device remove a.img:b.img 1
expect_rc 0 $B list -m nodes a.img
nodes_on_devs 1 "second device removed"
grep ' ptr ' out | awk '{ n = 0; for (i = 1; i <= NF; i++) if ($i == "ptr") n++; if (n != 2) bad = 1 } END { exit bad }' ||
	fail "second device removed: a node without two copies: $(grep ' ptr ' out | head -3)"
expect_rc 0 $B fsck -n -f a.img
extract a.img
same "second device removed"

# 4. fsck -f checks every copy of a node: a second copy damaged past the
# end of what the first holds (an append only it has, with a bad checksum,
# outside any replay) is reported, although both copies hold the same bytes
# as far as the first goes
expect_rc 0 $B format -q --metadata-replicas=2 --fs-size=64M --btree-node-size=32k --source=src d.img
expect_rc 0 $B list -m nodes d.img
set -- $(grep ' ptr ' out | head -1 | sed 's/.* written \([0-9]*\) sectors ptr 0:\([0-9]*\) gen.* ptr 0:\([0-9]*\) gen.*/\1 \2 \3/')
[ $# = 3 ] || fail "no node with two copies listed: $(head -3 out)"
python3 - d.img "$1" "$3" <<'PY'
import struct, sys
img, written, second = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(img, 'r+b') as f:
    f.seek(second * 512 + 48); seq = struct.unpack('<Q', f.read(8))[0]
    # bch_btree_node_entry: csum (16, wrong), bset: seq, journal_seq,
    # flags, version, pad, u64s, journal_seq_span; then the keys
    e = b'\xa5' * 16 + struct.pack('<QQIHHII', seq, 1, 0, 2, 0, 4, 0) + b'\x5a' * 32
    f.seek((second + written) * 512); f.write(e + b'\0' * (4096 - len(e)))
PY
run $B fsck -n -f d.img
[ "$rc" != 0 ] || fail "fsck -n -f: a damaged second copy not reported: $(tail -3 out)"
run $B fsck -y -f d.img
[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "fsck -y, damaged second copy: exit $rc: $(tail -5 out err)"
expect_rc 0 $B fsck -n -f d.img
extract d.img
same "damaged second copy repaired"

# 5. a device shrunk below where the second stream was: the nodes moved
# keep their two copies far apart (a quarter of the device or more), not in
# neighbouring buckets
expect_rc 0 $B format -q --metadata-replicas=2 --fs-size=64M --btree-node-size=32k --source=src z.img
expect_rc 0 $B device resize z.img 0 24M
expect_rc 0 $B list -m nodes z.img
awk '/ ptr /{ n = 0; for (i = 1; i <= NF; i++) if ($i == "ptr") { split($(i + 1), a, ":"); o[++n] = a[2] }
	d = o[2] - o[1]; if (d < 0) d = -d; if (d < 12288) { print; bad = 1 } } END { exit bad }' out > near ||
	fail "shrunk: two copies of a node less than 6M apart: $(head -3 near)"
expect_rc 0 $B fsck -n -f z.img
extract z.img
same "shrunk"

# 6. a version-1 filesystem written by this binary stays version 1: no
# node with two copies on one device, no journal stubs, no lanes (the
# compat corpus' plain image, fsync'd writes through fusemount)
command -v zstd > /dev/null || { skip_part "v1 writes" "no zstd"; exit 0; }
[ -c /dev/fuse ] || { skip_part "v1 writes" "no /dev/fuse"; exit 0; }
zstd -q -d -c "$ROOT/tests/compat/v1/plain.img.zst" > v1.img || fail "zstd -d"
mkdir -p mnt
$B fusemount -f v1.img mnt 2> daemon.err & pid=$!
for t in $(seq 50); do mountpoint -q mnt && break; sleep 0.1; done
mountpoint -q mnt || { kill $pid; fail "fusemount v1.img: $(cat daemon.err)"; }
python3 - <<'PY' || { fusermount3 -u -z mnt; fail "fsync workload on v1.img"; }
import os
for i in range(200):
    fd = os.open('mnt/v1-%d' % (i % 40), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, b'v1 %d\n' % i); os.fsync(fd); os.close(fd)
PY
fusermount3 -u mnt; wait $pid
expect_rc 0 $B show-super v1.img
[ "$(field Version)" = 1 ] && [ "$(field 'Oldest version')" = 1 ] ||
	fail "v1.img: version $(field Version), oldest $(field 'Oldest version') after writes"
expect_rc 0 $B list -m nodes v1.img
expect_not_in out " ptr 0:[0-9]+ gen [0-9]+ ptr 0:"
# jset headers (magic at 16, flags at 60): some, none a stub (BCH_JSET_STUB)
python3 - v1.img > jsets <<'PY'
import struct, sys
M = 0x534c4f4f54686362 ^ 3
d = open(sys.argv[1], 'rb').read()
js = [o for o in range(0, len(d), 4096) if struct.unpack_from('<Q', d, o + 16)[0] == M]
print(len(js), sum(1 for o in js if struct.unpack_from('<I', d, o + 60)[0] & 32))
PY
read -r nj ns < jsets
[ "$nj" -gt 0 ] || fail "v1.img: no journal entry found"
[ "$ns" = 0 ] || fail "v1.img: $ns journal stubs written to a version-1 filesystem"
expect_rc 0 $B fsck -n -f v1.img
