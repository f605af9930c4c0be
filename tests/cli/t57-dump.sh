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
#   - a mounted filesystem is refused.
need jq python3
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
# names are metadata: they are in the dump (no --scramble-names yet)
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

# ---- refusals
expect_rc 1 $B dump a.img a.dump
expect_in err "exists"
expect_rc 1 $B undump a.dump r.img
expect_in err "r.img: exists"
expect_rc 16 $B dump a.img
expect_rc 16 $B dump --bogus a.img x.dump
expect_rc 16 $B dump --scramble-names a.img x.dump
expect_in err "not supported yet"
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
