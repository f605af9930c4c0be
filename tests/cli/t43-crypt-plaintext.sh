# No plaintext on an encrypted filesystem (issue 21).  Distinctive random
# strings (seeded, printed) become file contents, file names and xattr values,
# and distinctive sizes (> 4 GiB, so 5 significant little-endian bytes) the
# sizes of sparse files, put in three ways: `format --source DIR`, `image put`
# and a fusemount (written through the mountpoint).  The raw image files are
# then searched for every string and for the 5-byte little-endian encoding of
# every size: on encrypted images none may be found; the same build on
# unencrypted images must find every one (the search works).
# Tampering through the CLI: one byte flipped in a data extent (found with
# `bcachefs list`) and one in a btree leaf: `fsck -n` reports damage, `image
# cat` fails with an error and never returns other bytes.
# (Inode numbers are small counters from 4096 up: their encodings are not
# distinctive enough to search for.)
need python3
plain_only "makes its own encrypted and unencrypted filesystems"
BIN=${BCH_BIN:-$B}
export BCACHEFS_PASSPHRASE_FILE=pf
SEED=${SEED:-4321}
echo "seed $SEED"
printf 'plaintext test passphrase\n' > pf
mnt=
trap 'cd /; [ -n "$mnt" ] && fusermount3 -u "$mnt" 2>/dev/null' EXIT
# the fusemount way: a counted skip only without /dev/fuse
fuse=false
fuse_part "the fusemount way (written through the mountpoint)" && fuse=true

# strings: for each way W (src, put, fuse): C_W content, N_W name, X_W xattr
# value, S_W a size; printed so a failure can be looked for by hand
python3 - "$SEED" > strings <<'PY'
import random, sys
r = random.Random(int(sys.argv[1]))
a = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
for w in ("src", "put", "fuse"):
    for k in ("C", "N", "X"):
        print(f"{k}_{w}=Q{''.join(r.choice(a) for _ in range(23))}")
    # 5 significant bytes, none of them zero
    print(f"S_{w}=" + str(sum(r.randrange(1, 256) << (8 * i) for i in range(5))))
PY
cat strings
. ./strings

# build ENC IMG_PREFIX: the three images, encrypted when ENC is 1
build() {
	encopt=
	[ "$1" = 1 ] && encopt="--encrypted --passphrase-file pf"
	rm -rf src && mkdir src
	# content repeated so one file is several blocks
	python3 -c "import sys; sys.stdout.write(('$C_src\n') * 2000)" > "src/$N_src"
	setfattr -n user.t43 -v "$X_src" "src/$N_src" 2>/dev/null ||
		python3 -c "import os; os.setxattr('src/$N_src', 'user.t43', b'$X_src')" || fail "setfattr on the host"
	truncate -s "$S_src" "src/sparse_src"
	expect_rc 0 $BIN format -q $encopt --fs-size=64M --source src "$2-src.img"

	python3 -c "import sys; sys.stdout.write(('$C_put\n') * 2000)" > put.txt
	truncate -s "$S_put" sparse_put
	expect_rc 0 $BIN format -q $encopt --fs-size=64M "$2-put.img"
	expect_rc 0 $BIN image put "$2-put.img" put.txt "/$N_put"
	expect_rc 0 $BIN image put "$2-put.img" sparse_put /sparse_put
	expect_rc 0 $BIN image setfattr -n user.t43 -v "$X_put" "$2-put.img" "/$N_put"

	$fuse || return 0
	expect_rc 0 $BIN format -q $encopt --fs-size=64M "$2-fuse.img"
	mkdir -p mnt && mnt=$PWD/mnt
	$BIN fusemount "$2-fuse.img" mnt 2>mount.err || fail "fusemount: $(cat mount.err)"
	python3 - "$C_fuse" "$N_fuse" "$X_fuse" "$S_fuse" <<'PY' || fail "writing through the mountpoint"
import os, sys
c, n, x, s = sys.argv[1:]
with open("mnt/" + n, "w") as f:
    f.write((c + "\n") * 2000)
os.setxattr("mnt/" + n, "user.t43", x.encode())
with open("mnt/sparse_fuse", "w") as f:
    f.truncate(int(s))
PY
	fusermount3 -u mnt || fail "unmount"
	mnt=
}

# search IMG WAY: for each string and size of WAY, "NAME COUNT" of its
# occurrences in the raw bytes of IMG
search() {
	python3 - "$1" "$2" <<'PY'
import sys
img, w = sys.argv[1:]
data = open(img, "rb").read()
vals = dict(l.strip().split("=", 1) for l in open("strings"))
for k in ("C", "N", "X"):
    print(f"{k}_{w}", data.count(vals[f"{k}_{w}"].encode()))
print(f"S_{w}", data.count(int(vals[f"S_{w}"]).to_bytes(5, "little")))
PY
}

ways="src put"
! $fuse || ways="$ways fuse"
for enc in 0 1; do
	build $enc e$enc
	for w in $ways; do
		search e$enc-$w.img $w > found || fail "search"
		echo "encrypted=$enc $w: $(tr '\n' ' ' < found)"
		while read name n; do
			if [ $enc = 1 ]; then
				[ "$n" = 0 ] || fail "e1-$w.img (encrypted) holds $name in the clear ($n times)"
			else
				[ "$n" -gt 0 ] || fail "e0-$w.img (not encrypted) does not hold $name: the search does not work"
			fi
		done < found
	done
done
# what was put in comes back out of the encrypted images
expect_rc 0 $BIN image cat e1-put.img "/$N_put"
cmp -s out put.txt || fail "e1-put.img: /$N_put read back differs"
expect_rc 0 $BIN image getfattr -n user.t43 e1-src.img "/$N_src"
expect_in out "$X_src"
if $fuse; then
	expect_rc 0 $BIN image stat --json e1-fuse.img /sparse_fuse
	expect_in out "\"size\": $S_fuse"
fi
for w in $ways; do expect_rc 0 $BIN fsck -n e1-$w.img; done

# ---- tampering
# flip IMG OFFSET: invert the lowest bit of the byte at OFFSET of IMG
flip() {
	python3 -c "
import sys
f = open(sys.argv[1], 'r+b'); f.seek(int(sys.argv[2])); b = f.read(1)
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 1]))" "$1" "$2" || fail "flip $1 $2"
}
# one byte of a data extent
cp e1-put.img t1.img
ino=$($BIN image stat --json t1.img "/$N_put" | sed -n 's/.*"inode": \([0-9]*\),.*/\1/p')
[ -n "$ino" ] || fail "no inode number for /$N_put"
expect_rc 0 $BIN list -b extents t1.img
ptr=$(sed -n "s/^$ino:.* ptr 0:\([0-9]*\) .*/\1/p" out | head -1)
[ -n "$ptr" ] || fail "no extent pointer of inode $ino: $(cat out)"
flip t1.img $((ptr * 512 + 100))
run $BIN fsck -f -n -c t1.img
[ $((rc & 4)) = 4 ] || fail "fsck -f -n -c of a tampered extent exited $rc: $(cat out err)"
expect_in out 'data_unreadable|bad checksum|bad MAC'
run $BIN image cat t1.img "/$N_put"
[ "$rc" = 1 ] || fail "image cat of a tampered extent exited $rc"
expect_in err "bcachefs image: .*Input/output error"
# never other bytes: what it printed, if anything, is a true prefix
cmp -s out put.txt && fail "image cat returned the whole file from a tampered extent"
[ ! -s out ] || cmp -s -n "$(stat -c %s out)" out put.txt || fail "image cat returned bytes that were never written"

# one byte of a btree leaf (the dirents: names are looked up there)
cp e1-put.img t2.img
expect_rc 0 $BIN list -b dirents -m nodes t2.img
ptr=$(sed -n 's/^node level 0 .* ptr 0:\([0-9]*\) .*/\1/p' out | head -1)
[ -n "$ptr" ] || fail "no dirents leaf: $(cat out)"
flip t2.img $((ptr * 512 + 200))
run $BIN fsck -f -n t2.img
[ $((rc & 4)) = 4 ] || fail "fsck -f -n of a tampered btree node exited $rc: $(cat out err)"
expect_in out 'bad MAC'
run $BIN image cat t2.img "/$N_put"
[ "$rc" = 1 ] || fail "image cat through a tampered btree node exited $rc"
[ ! -s out ] || fail "image cat through a tampered btree node printed $(wc -c < out) bytes"
