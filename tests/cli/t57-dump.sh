# bcachefs dump / undump (issue 33, metadata dump for bug reports):
#   - a tree image (treetool.py) and a two-device image: dump, undump, and
#     fsck -f -n of the restored images prints what the original's does (the
#     device names in the last line are normalised: they are the only thing
#     that must differ);
#   - no file data: every file holds a unique marker, which is in the
#     original image and in neither the plain dump nor the restored image
#     (the decompressed metadata); fsck -c of the restored image reports the
#     zeroed data;
#   - --json summary, --no-compress, refusals: OUT exists, wrong number of
#     OUT-IMG, existing OUT-IMG, damaged and truncated dumps (exit 1, a
#     message naming what is wrong, no file written);
#   - a filesystem not closed cleanly (journal replayed) and one with a
#     damaged btree node: fsck of the restored images prints the same;
#   - a mounted filesystem is refused;
#   - nodes are cut after the block following their last bset: stale bytes
#     past it are in no dump, fsck of the restored image is the same; a
#     node with a damaged appended bset (bad checksum, damaged seq) is kept
#     whole and fsck reports the same;
#   - metadata_replicas=2: the second copy of each node is a copy record,
#     the restored image equals the one of the plain dump;
#   - --scramble-names: no name of the tree (5 bytes or longer) and no
#     user.* xattr value is in the restored image (the original holds them),
#     lost+found is kept, the same counts of files and directories; fsck of
#     the restored image is clean and it takes writes; the original is
#     unchanged; no scratch file is left in TMPDIR; a filesystem with a
#     journal to replay, its copy made in memory (no TMPDIR).
need jq python3 setfattr
tree="$here/treetool.py"

# fsck_same ORIG RESTORED: fsck -f -n output equal, device names normalised
fsck_same() {
	$B fsck -f -n "$1" 2>&1 | sed "s|$1|DEV|g" > f.orig
	$B fsck -f -n "$2" 2>&1 | sed "s|$2|DEV|g" > f.rest
	diff f.orig f.rest > f.diff || fail "fsck of $2 differs from $1's: $(cat f.diff)"
	expect_in f.orig "0 problems found"
}

# ---- a tree image, with a marker in every regular file
python3 "$tree" gen tree 57 300 >/dev/null || fail "treetool gen"
n=0
find tree -type f | while read -r f; do
	n=$((n + 1)); printf 'QZXMARKER57-%s-%06d\n' "data" "$n" >> "$f"
done
# a known user xattr (the tree's own are binary), for --scramble-names
xf=$(find tree -type f | sort | head -1)
setfattr -n user.qzxname57 -v QZXVALUE57 "$xf" || fail "setfattr (user xattrs in TMPDIR)"
expect_rc 0 $B format -q --source tree --fs-size=64M a.img
# (encrypted, the data on disk is ciphertext: the marker cannot be seen in any case)
encrypted || grep -c QZXMARKER57 a.img >/dev/null || fail "the marker is not in the original image"

expect_rc 0 $B dump a.img a.dump
expect_in out "a.dump: 1 devices"
expect_rc 0 $B dump --no-compress --json a.img plain.dump
[ "$(jq -r .devices out)" = 1 ] || fail "json devices: $(cat out)"
[ "$(jq -r .btree_bytes out)" -gt 0 ] || fail "json btree_bytes: $(cat out)"
[ "$(jq -r .dump_bytes out)" = "$(stat -c %s plain.dump)" ] || fail "json dump_bytes"
[ "$(stat -c %s a.dump)" -lt "$(stat -c %s plain.dump)" ] || fail "zstd did not pay"
! grep -q QZXMARKER57 plain.dump || fail "file data in the plain dump"
! grep -q QZXMARKER57 a.dump || fail "file data in the dump"
# names are metadata: they are in the dump (without --scramble-names)
encrypted || grep -q f00052 plain.dump || fail "a file name is not in the dump"

expect_rc 0 $B undump --json a.dump r.img
[ "$(jq -r .devices out)" = 1 ] || fail "undump json: $(cat out)"
[ "$(stat -c %s r.img)" = "$(stat -c %s a.img)" ] || fail "restored image size"
! grep -q QZXMARKER57 r.img || fail "file data in the restored image"
fsck_same a.img r.img
expect_rc 0 $B undump plain.dump p.img
cmp -s r.img p.img || fail "the plain and compressed dumps restore differently"
# the data is zeroed: fsck -c says so (exit 4: errors left uncorrected)
run $B fsck -n -c r.img
[ "$rc" != 0 ] || fail "fsck -c of the restored image found the zeroed data fine"

# ---- two devices
expect_rc 0 $B format -q --fs-size=32M d0.img d1.img
expect_rc 0 $B image mkdir d0.img:d1.img /x /x/y
for i in 1 2 3 4 5; do
	printf 'QZXMARKER57-two-%d\n' $i > m$i
	expect_rc 0 $B image put d0.img:d1.img m$i /x/y/file$i
done
expect_rc 0 $B dump d0.img d1.img two.dump
expect_in out "2 devices"
expect_rc 16 $B undump two.dump only.img
expect_in err "holds 2 devices"
[ ! -e only.img ] || fail "undump wrote an image after a refusal"
expect_rc 0 $B undump two.dump r0.img:r1.img
fsck_same d0.img:d1.img r0.img:r1.img
$B image ls r0.img:r1.img /x/y > ls.out 2>&1 || fail "image ls of the restored images: $(cat ls.out)"
expect_in ls.out file5
! cat r0.img r1.img | grep -q QZXMARKER57 || fail "file data in the restored two-device images"

# ---- not closed cleanly: the journal is replayed alike
expect_rc 0 $B kv --no-clean-close d0.img:d1.img put 3:1 first 3:2 second
expect_rc 0 $B dump d0.img:d1.img u.dump
expect_rc 0 $B undump u.dump u0.img:u1.img
fsck_same d0.img:d1.img u0.img:u1.img
expect_in f.rest "not closed cleanly"

# ---- a damaged node: the dump keeps it as it is, fsck finds the same
cp a.img dmg.img
ptr=$($B list -m nodes -b dirents dmg.img | sed -n 's/.* ptr 0:\([0-9]*\) .*/\1/p' | head -1)
[ -n "$ptr" ] || fail "no dirents node listed"
printf 'XXXX' | dd of=dmg.img bs=1 seek=$((ptr * 512 + 4196)) conv=notrunc status=none
expect_rc 0 $B dump dmg.img dmg.dump
expect_rc 0 $B undump dmg.dump rdmg.img
$B fsck -f -n dmg.img 2>&1 | sed "s|dmg.img|DEV|g" > f.orig
$B fsck -f -n rdmg.img 2>&1 | sed "s|rdmg.img|DEV|g" > f.rest
diff f.orig f.rest > f.diff || fail "fsck of the damaged image and of its dump differ: $(cat f.diff)"
expect_in f.orig "bad checksum|bad MAC"

# ---- nodes are cut after their last bset; damaged appends keep them whole
cp a.img app.img
printf 'QZXAPPEND57\n' > app.f
expect_rc 0 $B image put app.img app.f /appended	# appends a bset to the dirents leaf (plain)
nodes=$($B list -m nodes -b dirents app.img)
ptr=$(echo "$nodes" | sed -n 's/.* ptr 0:\([0-9]*\) .*/\1/p' | head -1)
written=$(echo "$nodes" | sed -n 's/.* written \([0-9]*\) sectors.*/\1/p' | head -1)
[ -n "$ptr" ] && [ "$written" -gt 8 ] || fail "no appended dirents leaf: $nodes"
nsec=$($B show-super app.img | sed -n 's/^Btree node size: *\([0-9]*\)k$/\1/p')
nsec=$((nsec * 2))
# stale bytes two blocks past the last bset: no reader looks there
[ $((written + 16)) -lt "$nsec" ] || fail "node too full for the stale-bytes check"
printf 'QZXSTALE57' | dd of=app.img bs=1 seek=$(((ptr + written + 16) * 512 + 64)) conv=notrunc status=none
expect_rc 0 $B dump --no-compress app.img app.dump
! grep -q QZXSTALE57 app.dump || fail "bytes past a node's last bset are in the dump"
expect_rc 0 $B undump app.dump rapp.img
fsck_same app.img rapp.img
# the appended bset (the last block written) damaged: in its keys, in its seq
for at in 100 16; do
	cp app.img dapp.img
	printf 'XXXX' | dd of=dapp.img bs=1 seek=$(((ptr + written - 8) * 512 + at)) conv=notrunc status=none
	rm -f dapp.dump rdapp.img
	expect_rc 0 $B dump --no-compress dapp.img dapp.dump
	grep -q QZXSTALE57 dapp.dump || fail "a node with a damaged bset was not kept whole"
	expect_rc 0 $B undump dapp.dump rdapp.img
	$B fsck -f -n dapp.img 2>&1 | sed "s|dapp.img|DEV|g" > f.orig
	$B fsck -f -n rdapp.img 2>&1 | sed "s|rdapp.img|DEV|g" > f.rest
	diff f.orig f.rest > f.diff || fail "damaged append at +$at: fsck differs: $(cat f.diff)"
	# (encrypted, a node is rewritten whole rather than appended to)
	encrypted && expect_in f.orig "bad MAC" || expect_in f.orig "bset at sector $((written - 8))"
done

# ---- two copies of every node on one device: the second is a copy record
expect_rc 0 $B format -q --metadata-replicas=2 --source tree --fs-size=64M rep.img
expect_rc 0 $B dump --json rep.img rep.dump
[ "$(jq -r .copy_records out)" -gt 0 ] || fail "no copy records: $(cat out)"
expect_rc 0 $B dump --no-compress rep.img rep-plain.dump
expect_rc 0 $B undump rep.dump rrep.img
expect_rc 0 $B undump rep-plain.dump prep.img
cmp -s rrep.img prep.img || fail "copy records restore differently from the plain dump"
fsck_same rep.img rrep.img
# a copy record naming no record before it: refused, nothing written
python3 - rep.dump refbad.dump <<'PY' || fail "no copy record found in rep.dump"
import sys
d = bytearray(open(sys.argv[1], 'rb').read())
i = d.find(b'REF1')
while i >= 0 and (i < 64 or int.from_bytes(d[i + 20:i + 24], 'little') != 16):
    i = d.find(b'REF1', i + 1)
if i < 0:
    sys.exit(1)
d[i + 32] ^= 0x10	# the source's offset, 4 KiB off
open(sys.argv[2], 'wb').write(d)
PY
expect_rc 1 $B undump refbad.dump rrefbad.img
expect_in err "copies no record before it"
[ ! -e rrefbad.img ] || fail "undump of a bad copy record wrote an image"

# ---- --scramble-names
find tree -mindepth 1 -printf '%f\n' | awk 'length($0) >= 5' | sort -u > names.txt
[ "$(wc -l < names.txt)" -gt 100 ] || fail "too few names to look for"
encrypted || grep -a -q -F -f names.txt a.img || fail "the names are not in the original"
cp a.img a-before.img
mkdir scratch
expect_rc 0 env TMPDIR="$PWD/scratch" $B dump --scramble-names --json a.img s.dump
[ "$(jq -r .scrambled_names out)" -gt 300 ] || fail "scrambled_names: $(cat out)"
[ "$(jq -r .journal_bytes out)" = 0 ] || fail "a scrambled dump holds the journal: $(cat out)"
[ -z "$(ls scratch)" ] || fail "scratch files left: $(ls scratch)"
cmp -s a.img a-before.img || fail "--scramble-names changed the original"
expect_rc 0 $B undump s.dump rs.img
if grep -a -o -F -f names.txt rs.img > found.txt; then
	fail "original names in the scrambled image: $(sort -u found.txt | head -5)"
fi
# the user xattr: its name and value are gone
encrypted || grep -a -q QZXVALUE57 a.img || fail "the xattr value is not in the original"
encrypted || grep -a -q qzxname57 a.img || fail "the xattr name is not in the original"
! grep -a -q -e QZXVALUE57 -e qzxname57 rs.img || fail "the user xattr is in the scrambled image"
$B fsck -f -n rs.img > f.rest 2>&1 || fail "fsck of the scrambled image: $(cat f.rest)"
expect_in f.rest "0 problems found"
$B fsck -f -n a.img > f.orig 2>&1
grep "inodes checked" f.orig > c.orig; grep "inodes checked" f.rest > c.rest
cmp -s c.orig c.rest || fail "scrambled counts differ: $(cat c.orig c.rest)"
expect_rc 0 $B image ls rs.img /
expect_in out "lost\+found"
expect_rc 0 $B image put rs.img app.f /after-scramble
expect_rc 0 $B fsck -n rs.img
expect_in out "0 problems found"
# a filesystem with its journal to replay: the copy replays it, the original is untouched
expect_rc 0 $B kv --no-clean-close d0.img:d1.img put 3:7 seven
cp d0.img d0-before.img
# (without TMPDIR the copy is made in memory, memfd)
expect_rc 0 env -u TMPDIR $B dump --scramble-names d0.img:d1.img s2.dump
cmp -s d0.img d0-before.img || fail "--scramble-names wrote to the original"
expect_rc 0 $B undump s2.dump s0.img:s1.img
expect_rc 0 $B fsck -f -n s0.img:s1.img
expect_in out "0 problems found"
expect_rc 0 $B image ls s0.img:s1.img /
! grep -q "^x$" out || fail "the directory x kept its name"

# ---- refusals
expect_rc 1 $B dump a.img a.dump
expect_in err "exists"
expect_rc 1 $B undump a.dump r.img
expect_in err "r.img: exists"
expect_rc 16 $B dump a.img
expect_rc 16 $B dump --bogus a.img x.dump
expect_rc 1 env TMPDIR=/nonexistent $B dump --scramble-names a.img x.dump
expect_in err "TMPDIR"
[ ! -e x.dump ] || fail "a refused dump wrote x.dump"

# damaged: one byte flipped in the middle, in the header, truncated, trailing bytes
size=$(stat -c %s a.dump)
damage() { # damage NAME OFFSET: a copy with the byte at OFFSET inverted
	cp a.dump "$1"
	b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	printf "$(printf '\\%03o' $((255 - b)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
damage mid.dump $((size / 2))
damage head.dump 20
head -c $((size - 7)) a.dump > trunc.dump
head -c $((size / 3)) a.dump > trunc2.dump
{ cat a.dump; echo x; } > tail.dump
seq 1 100 > junk.dump
for d in mid head trunc trunc2 tail junk; do
	expect_rc 1 $B undump $d.dump out-$d.img
	expect_in err "$d.dump: "
	[ ! -e out-$d.img ] || fail "undump of $d.dump wrote out-$d.img"
done
expect_in err "not a dump file"
$B undump trunc.dump x.img 2>&1 | grep -q "truncated" || fail "truncated dump: no 'truncated'"
$B undump head.dump x.img 2>&1 | grep -q "header checksum" || fail "damaged header: no 'header checksum'"
$B undump tail.dump x.img 2>&1 | grep -q "after the end record" || fail "trailing bytes not named"
[ ! -e x.img ] || fail "undump wrote x.img from a damaged dump"

# ---- a mounted filesystem is refused (its daemon changes the metadata under us)
if fuse_part "dump of a mounted filesystem"; then
	mkdir mnt
	trap 'fusermount3 -uz "$PWD/mnt" 2>/dev/null' EXIT
	$B fusemount -f a.img mnt 2>fuse.err & pid=$!
	for i in $(seq 50); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
	expect_rc 1 $B dump a.img m.dump
	expect_in err "mounted"
	[ ! -e m.dump ] || fail "dump of a mounted filesystem wrote m.dump"
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?"
fi
exit 0
