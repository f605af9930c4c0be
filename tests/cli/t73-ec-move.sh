# moving striped data (issue 34, ec_move.h): six images with --replicas=3
# and erasure coding, striped RS(4,2) by data rebalance.
#  - device evacuate / remove of a member: every stripe with a block there is
#    dissolved (its data written replicated elsewhere, the stripe deleted),
#    data rebalance stripes it again RS(3,2) on the five left; every file
#    byte-identical, fsck clean, the striped space at most 0.7x replicas=3.
#  - a member gone (degraded open): data rereplicate dissolves the stripes
#    that lost a block; with a second member gone too everything still
#    reads; restriped on the four present (RS(2,2)), a third still reads;
#    then the lost member is removed.
#  - whole stripes deleted offline (image rm): the close deletes the
#    stripes nothing points into (ec_move.h: bch_ec_close_unused), fsck
#    is clean at once, the other files byte-identical.
#  - background_compression set after striping: data rebalance rewrites
#    the striped extents compressed (out of their stripes), stripes them
#    again, exits 0; files byte-identical, fsck clean.  A background_target
#    set then moves no striped data, and nothing waits.
#  - stripe compaction: 20 of 32 files deleted, data rebalance dissolves the
#    stripes mostly deleted and stripes the rest anew: the space comes back,
#    a second run compacts nothing (no churn), fsck clean.
#  - mounted: device evacuate and remove through the daemon; a file
#    deleted on the mount, the daemon's background compacts its stripes.
#  - snapshots: a striped file overwritten in places after a snapshot (its
#    pieces shared), evacuated: both versions read back, fsck clean.
# Data: treetool gen seed 73, python random.Random(73), (74), (77) and (78).
need python3
tree=$ROOT/tests/cli/treetool.py
python3 "$tree" gen src 73 40 || fail "treetool gen"
python3 -c 'import random, sys; r = random.Random(73); sys.stdout.buffer.write(r.randbytes(2 * 1024 * 1024 + 11))' > src/big.bin

imgs() { for i in 0 1 2 3 4 5; do printf '%s%s%d.img' "$([ $i = 0 ] || echo :)" "$1" $i; done; }
user_bytes() {	# user data space over every member, from fs usage --json
	$B fs usage --json "$1" | python3 -c 'import json, sys; print(sum(d["user"]["space"] for d in json.load(sys.stdin)["devices"]))'
}
check_tree() {	# OPTS FS WHAT: every file of src byte-identical in FS
	rm -rf out.d && mkdir out.d
	expect_rc 0 $B image extract ${1:+-o $1} "$2" out.d
	python3 "$tree" compare src out.d >cmp.log || fail "$3: $(tail -5 cmp.log)"
	[ ! -e src/big.bin ] || cmp -s src/big.bin out.d/big.bin || fail "$3: big.bin differs"
}
fsck_clean() {	# FS [OPTS]
	expect_rc 0 $B fsck -n -f ${2:+-o $2} "$1"
	expect_in out ': 0 problems found'
}
stripes() {	# FS [OPTS]: the stripes btree into ./stripes
	$B list ${2:+-o $2} -b stripes "$1" > stripes 2>/dev/null || fail "list stripes"
}
# no block of any stripe on member $2 (list output in $1)
no_block_on() { ! grep -Eq " (data|parity) $2:" "$1" || fail "a stripe still has a block on member $2: $(grep -E " (data|parity) $2:" "$1" | head -2)"; }

mkfs6() {	# PREFIX SOURCE
	for i in 0 1 2 3 4 5; do truncate -s 64M $1$i.img; done
	expect_rc 0 $B format -q --erasure-code --replicas=3 --source=$2 $(imgs $1 | tr : ' ')
	expect_rc 0 $B data rebalance --wait "$(imgs $1)"
	stripes "$(imgs $1)"
	grep -q ' stripe 4+2 ' stripes || fail "no RS(4,2) stripe built: $(head -2 stripes)"
}

# the same tree with replicas=3, for the space figure
for i in 0 1 2 3 4 5; do truncate -s 64M r$i.img; done
expect_rc 0 $B format -q --replicas=3 --source=src $(imgs r | tr : ' ')
rep=$(user_bytes "$(imgs r)")

# ---- evacuate, then remove, member 0
mkfs6 e src
E=$(imgs e)
expect_rc 0 $B device evacuate --json "$E" 0
python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["completed"] and d["extents_moved"] > 0 and d["stripes_dissolved"] > 0 else 1)' ||
	fail "evacuate: $(cat out)"
stripes "$E"
no_block_on stripes 0
expect_rc 0 $B list -b extents "$E"
expect_not_in out 'ptr 0:'
check_tree "" "$E" "evacuated"
fsck_clean "$E"
expect_rc 0 $B device remove "$E" 0
expect_in out 'Removed member 0'
E=e1.img:e2.img:e3.img:e4.img:e5.img
expect_rc 0 $B data rebalance --wait --json "$E"
python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["done"] and d["pending"]["stripe"] == 0 else 1)' ||
	fail "restripe: $(cat out)"
stripes "$E"
grep -q ' stripe 3+2 ' stripes || fail "not striped again RS(3,2): $(head -2 stripes)"
check_tree "" "$E" "removed, striped again"
fsck_clean "$E"
ec=$(user_bytes "$E")
python3 -c "import sys; sys.exit(0 if $ec <= 0.7 * $rep else 1)" ||
	fail "after the remove, striped data takes $ec bytes, replicas=3 $rep (more than 0.7x)"
echo "space after remove: $ec bytes, replicas=3 $rep" >&2

# big.bin shared (reflink): its striped extents become indirect ones, which
# the degraded part below moves out of their stripes too
expect_rc 0 $B image cp --reflink "$E" /big.bin /big2
rm -rf out.d && mkdir out.d
expect_rc 0 $B image extract "$E" out.d
cmp -s out.d/big2 src/big.bin || fail "the reflinked copy differs"
cp -p out.d/big2 src/big2	# its mtime is the copy's: compared from here on
expect_rc 0 $B list -b reflink "$E"
expect_in out 'reflink_v .* stripe [0-9]+/'

# ---- a member gone: rereplicate; a second gone still reads
mkdir -p gone
mv e2.img gone/
E=e1.img:e3.img:e4.img:e5.img
expect_rc 0 $B data rereplicate -o degraded "$E"
stripes "$E" degraded
no_block_on stripes 2
expect_rc 0 $B list -o degraded -b extents "$E"
expect_not_in out ' stripe [0-9]+/'
expect_rc 0 $B list -o degraded -b reflink "$E"
expect_not_in out ' stripe [0-9]+/'
mv e4.img gone/
check_tree degraded,read_only e1.img:e3.img:e5.img "rereplicated, then a second member gone"
mv gone/e4.img .
# striped again on the four present; then two of them gone still reads
expect_rc 0 $B data rebalance -o degraded --wait "$E"
stripes "$E" degraded
grep -q ' stripe 2+2 ' stripes || fail "not striped RS(2,2) on four: $(head -2 stripes)"
fsck_clean "$E" degraded
mv e5.img gone/
check_tree degraded,read_only e1.img:e3.img:e4.img "striped on four, a third member gone"
mv gone/e5.img .
# the lost member removed for good: nothing left to open degraded
expect_rc 0 $B device remove -o degraded "$E" 2
expect_in out 'Removed member 2 \(it was missing\)'
fsck_clean "$E"
check_tree "" "$E" "member 2 removed"

# ---- whole stripes deleted offline: the close of image rm deletes the
# stripes nothing points into any more (parity freed, nothing moved), so
# fsck is clean at once, before any rebalance
mkdir src3
python3 -c 'import random
r = random.Random(77)
for i in range(16):
	open("src3/g%02d" % i, "wb").write(r.randbytes(300 * 1024))'
mkfs6 u src3
U=$(imgs u)
u0=$(grep -c ' stripe ' stripes)
ub0=$(user_bytes "$U")
expect_rc 0 $B image rm "$U" $(for i in $(seq 0 11); do printf '/g%02d ' $i; done)
for i in $(seq 0 11); do rm src3/$(printf 'g%02d' $i); done
fsck_clean "$U"
stripes "$U"
u1=$(grep -c ' stripe ' stripes)
[ "$u1" -lt "$u0" ] && [ "$u1" -ge 1 ] || fail "image rm of whole stripes: $u0 stripes before, $u1 after"
ub1=$(user_bytes "$U")
echo "whole stripes deleted offline: $u0 stripes, $u1 left; $ub0 bytes, $ub1 after" >&2
rm -rf out3.d && mkdir out3.d
expect_rc 0 $B image extract "$U" out3.d
rmdir out3.d/lost+found 2>/dev/null
diff -r src3 out3.d >/dev/null || fail "files differ after the rm: $(diff -r src3 out3.d | head -3)"

# ---- background_compression set after striping: rebalance takes each
# striped extent out of its stripe, compressed and replicated, and the
# builder stripes it again (it used to park them: exit 2)
mkdir src4
python3 -c 'import random
r = random.Random(78)
w = [bytes(r.choice(b"abcdefghij") for _ in range(r.randint(2, 9))) for _ in range(400)]
for i in range(8):
	open("src4/z%d" % i, "wb").write(b" ".join(r.choice(w) for _ in range(60000))[:300 * 1024])'
mkfs6 z src4
Z=$(imgs z)
zb0=$(user_bytes "$Z")
expect_rc 0 $B set-fs-option --background_compression=zstd "$Z"
expect_rc 0 $B data rebalance --wait --json "$Z"
python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["done"] and d["extents_moved"] > 0 and d["pending"]["stripe"] == 0 and d["pending"]["compression"] == 0 else 1)' ||
	fail "rebalance of striped data to zstd: $(cat out)"
expect_rc 0 $B list -b extents "$Z"
expect_not_in out ' comp [0124] '
expect_in out 'comp 3 .* stripe [0-9]+/'
expect_not_in out 'ptr [0-9]+:[0-9]+ gen [0-9]+ ptr '	# striped again: one pointer each
zb1=$(user_bytes "$Z")
python3 -c "import sys; sys.exit(0 if $zb1 * 2 < $zb0 else 1)" ||
	fail "compressed and striped again: $zb1 bytes, $zb0 before"
echo "striped, then zstd: $zb0 bytes, $zb1 after" >&2
fsck_clean "$Z"
rm -rf out4.d && mkdir out4.d
expect_rc 0 $B image extract "$Z" out4.d
rmdir out4.d/lost+found 2>/dev/null
diff -r src4 out4.d >/dev/null || fail "files differ after the recompression: $(diff -r src4 out4.d | head -3)"
# a background_target set after striping does not move striped data (the
# builder ignores targets: the move would be undone), and nothing parks
expect_rc 0 $B set-fs-option --background_target=0 "$Z"
expect_rc 0 $B data rebalance --wait --json "$Z"
python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["done"] and d["extents_moved"] == 0 and d["pending"]["target"] == 0 and d["pending"]["waiting_for_space"] == 0 else 1)' ||
	fail "rebalance to a target with striped data: $(cat out)"

# ---- stripe compaction
mkdir src2
python3 -c 'import random
r = random.Random(74)
for i in range(32):
	open("src2/f%02d" % i, "wb").write(r.randbytes(200 * 1024 + 512 * i))'
mkfs6 c src2
C=$(imgs c)
before=$(user_bytes "$C")
n0=$(grep -c ' stripe ' stripes)
expect_rc 0 $B image rm "$C" $(for i in $(seq 0 2 31) 1 5 9 13; do printf '/f%02d ' $i; done)
for i in $(seq 0 2 31) 1 5 9 13; do rm src2/$(printf 'f%02d' $i); done
deleted=$(user_bytes "$C")
expect_rc 0 $B data rebalance --wait --json "$C"
python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["done"] and d["stripes_compacted"] > 0 and d["stripe_space_freed"] > 0 and d["pending"]["stripes_to_compact"] == 0 else 1)' ||
	fail "compaction: $(cat out)"
after=$(user_bytes "$C")
# 12 of 32 files are left: compacted, the space comes near that share of
# what the 32 took (the deletes alone free whole blocks of stripes in place,
# so what compaction gives back is judged against the start, not the deletes)
python3 -c "import sys; sys.exit(0 if $after < $deleted and $after <= 0.4 * $before else 1)" ||
	fail "compaction gave back too little: $before bytes striped, $deleted after the deletes, $after after"
echo "compaction: $before bytes, $deleted after deleting 20 of 32 files, $after compacted" >&2
stripes "$C"
n1=$(grep -c ' stripe ' stripes)
[ "$n1" -lt "$n0" ] || fail "$n0 stripes before, $n1 after"
expect_rc 0 $B data rebalance --wait --json "$C"
python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["done"] and d["stripes_compacted"] == 0 and d["extents_moved"] == 0 else 1)' ||
	fail "a second rebalance moved data again: $(cat out)"
rm -rf out2.d && mkdir out2.d
expect_rc 0 $B image extract "$C" out2.d
rmdir out2.d/lost+found 2>/dev/null
diff -r src2 out2.d >/dev/null || fail "files differ after compaction: $(diff -r src2 out2.d | head -3)"
fsck_clean "$C"

# ---- mounted: evacuate and remove through the daemon, compaction in its background
if fuse_part "t73 mounted evacuate"; then
	mkfs6 m src
	M=$(imgs m)
	mkdir mnt
	pid=
	trap 'cd /; [ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$OLDPWD/mnt" 2>/dev/null' EXIT
	$B fusemount -f "$M" mnt 2>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
	expect_rc 0 $B device evacuate --json mnt m3.img
	python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["completed"] and d["extents_moved"] > 0 and d["stripes_dissolved"] > 0 else 1)' ||
		fail "mounted evacuate: $(cat out)"
	python3 "$tree" compare src mnt >cmp.log || fail "mounted, evacuated: $(tail -5 cmp.log)"
	expect_rc 0 $B device remove mnt m3.img
	expect_in out 'Removed member 3'
	expect_rc 0 $B data rebalance --wait mnt
	python3 "$tree" compare src mnt >cmp.log || fail "mounted, removed: $(tail -5 cmp.log)"
	# big.bin deleted: stripes that held only its data are empty; the
	# daemon's background compaction deletes them (their parity freed)
	rm mnt/big.bin src/big.bin mnt/big2 src/big2 2>/dev/null
	u1=$(user_bytes mnt)
	for i in $(seq 60); do [ "$(user_bytes mnt)" -lt "$u1" ] && break; sleep 0.5; done
	u2=$(user_bytes mnt)
	[ "$u2" -lt "$u1" ] || fail "the background did not compact the emptied stripes ($u1 bytes after rm, $u2 30 s later)"
	echo "mounted: $u1 bytes after rm, $u2 after the background's compaction" >&2
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	pid=
	M=m0.img:m1.img:m2.img:m4.img:m5.img
	stripes "$M"
	no_block_on stripes 3
	grep -q ' stripe 3+2 ' stripes || fail "not striped again RS(3,2) on the mount: $(head -2 stripes)"
	fsck_clean "$M"		# no stripe left with nothing in it
	check_tree "" "$M" "mounted, compacted"
fi

# ---- snapshots: pieces of a striped extent in a snapshot (an overwrite in
# the live file after the snapshot) move out of the stripe with it
if fuse_part "t73 snapshots"; then
	python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(75).randbytes(4 << 20))' > big
	for i in 0 1 2 3 4 5; do truncate -s 64M s$i.img; done
	expect_rc 0 $B format -q --erasure-code --replicas=3 $(imgs s | tr : ' ')
	S=$(imgs s)
	expect_rc 0 $B image put "$S" big /big
	expect_rc 0 $B data rebalance --wait "$S"
	expect_rc 0 $B subvolume snapshot "$S" / /snap
	rm -rf mnt && mkdir mnt
	pid=
	trap 'cd /; [ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$OLDPWD/mnt" 2>/dev/null' EXIT
	$B fusemount -f "$S" mnt 2>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
	cp big live
	python3 -c 'import os, random
r = random.Random(76)
f = os.open("mnt/big", os.O_WRONLY)
l = open("live", "r+b")
for i in range(32):
	d = r.randbytes(4096)
	os.pwrite(f, d, i * 131072 + 61440)
	l.seek(i * 131072 + 61440)
	l.write(d)
os.close(f)' || fail "overwrites through the mount"
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	pid=
	expect_rc 0 $B device evacuate --json "$S" 2
	python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["completed"] and d["stripes_dissolved"] > 0 else 1)' ||
		fail "evacuate with snapshots: $(cat out)"
	expect_rc 0 $B list -b extents "$S"
	expect_not_in out ' stripe [0-9]+/'
	fsck_clean "$S"
	expect_rc 0 $B image cat "$S" /big
	cmp -s out live || fail "the live file differs after the evacuate"
	expect_rc 0 $B image cat "$S" /snap/big
	cmp -s out big || fail "the snapshot's file differs after the evacuate"
fi
