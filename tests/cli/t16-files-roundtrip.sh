# format --source, image extract, and tar import/export of a generated tree:
# everything comes back (content, sparseness, hard links, symlinks, fifos,
# devices, xattrs, owners, modes, ns times), with every compression type,
# fsck stays clean, and the same input builds a byte-identical image.
# make check runs it a second time encrypted (ENCRYPTED=1, tests/cli/run.sh).
T="python3 $ROOT/tests/cli/treetool.py"
command -v python3 >/dev/null || skip "python3 missing"
N=${FILES_N:-$([ -n "${SOAK:-}" ] && echo 40000 || echo 4000)}
$T gen src 16 "$N" || fail "gen"

for comp in none lz4 gzip zstd; do
	rm -rf xd img
	expect_rc 0 $B format -q --fs-size=1G --compression=$comp --source src img
	expect_rc 0 $B fsck -n img
	expect_rc 0 $B image extract img xd
	expect_rc 0 $T compare src xd
done

# tar: GNU tar archive in, our archive out, GNU tar extracts it
tar --xattrs --xattrs-include='*' -S -cf in.tar -C src . || fail "tar c"
rm -rf xd img
expect_rc 0 $B format -q --fs-size=1G img
expect_rc 0 $B image import-tar img in.tar
expect_rc 0 $B fsck -n img
expect_rc 0 $B image extract img xd
expect_rc 0 $T compare src xd
expect_rc 0 $B image export-tar img out.tar
rm -rf xd && mkdir xd
tar --xattrs --xattrs-include='*' -xpf out.tar -C xd 2>/dev/null || fail "tar x"
expect_rc 0 $T compare src xd
# and stdin/stdout
rm -f img2
expect_rc 0 $B format -q --fs-size=1G img2
$B image export-tar img - | $B image import-tar img2 - || fail "pipe"
rm -rf xd && expect_rc 0 $B image extract img2 xd
expect_rc 0 $T compare src xd
# libarchive is dlopen'd, not linked: a libarchive.so.13 without its
# functions is named in the message, exit 1, and the image is not opened
mkdir stub && echo 'int not_libarchive;' > stub/s.c
cc -shared -fPIC -o stub/libarchive.so.13 stub/s.c || fail "cc stub library"
h=$(sha img2)
for verb in import-tar export-tar; do
	expect_rc 1 env LD_LIBRARY_PATH="$PWD/stub" $B image $verb img2 in.tar
	expect_in err "^bcachefs image: $verb: cannot load libarchive.so.13: .*undefined symbol: archive_"
done
[ "$(sha img2)" = "$h" ] || fail "image written without libarchive"
expect_rc 0 env LD_LIBRARY_PATH="$PWD/stub" $B image ls img2 /

# reproducible: same tree, -U and SOURCE_DATE_EPOCH give identical bytes
U=4a7b0c8e-2b0f-4d61-9d0e-1f8f3f1c2a55
SOURCE_DATE_EPOCH=1700000000 expect_rc 0 $B format -q -U $U --fs-size=1G --source src r1.img
SOURCE_DATE_EPOCH=1700000000 expect_rc 0 $B format -q -U $U --fs-size=1G --source src r2.img
# (encrypted: a fresh random key each time, so the bytes must differ)
if encrypted; then
	! cmp -s r1.img r2.img || fail "two encrypted formats gave the same bytes (the same key?)"
else
	cmp -s r1.img r2.img || fail "format --source is not reproducible"
fi

# two devices, two replicas: a damaged copy is read from the other one
rm -f d1 d2
expect_rc 0 $B format -q --replicas=2 --fs-size=512M d1 --fs-size=512M d2
printf 'precious data %0600d\n' 7 > p.txt
expect_rc 0 $B image put d1:d2 p.txt /p.txt
expect_rc 0 $B list -b extents d1:d2
ptr=$(sed -n 's/.* ptr 0:\([0-9]*\) gen.*/\1/p' out | head -1)
[ -n "$ptr" ] || fail "no extent pointer: $(cat out)"
flip_byte d1 $((ptr * 512 + 10))
expect_rc 0 $B image cat d1:d2 /p.txt
expect_in err "1 damaged copies of file data"
cmp -s out p.txt || fail "replica fallback returned wrong data"
# one device, damaged: EIO, and nothing else is lost
rm -f s1
expect_rc 0 $B format -q --fs-size=256M s1
expect_rc 0 $B image put s1 p.txt /p.txt
seq 1 30000 > o.txt
expect_rc 0 $B image put s1 o.txt /other
expect_rc 0 $B list -b extents s1
ptr=$(sed -n 's/^4098:.* ptr 0:\([0-9]*\) gen.*/\1/p' out | head -1)
[ -n "$ptr" ] || fail "no extent pointer: $(cat out)"
flip_byte s1 $((ptr * 512 + 10))
expect_rc 1 $B image cat s1 /p.txt
expect_in err 'Input/output error'
expect_in err 'no good copy'
expect_rc 0 $B image cat s1 /other
cmp -s out o.txt || fail "an undamaged file changed"
