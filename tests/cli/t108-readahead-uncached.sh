# A file read sequentially through the mount is read ahead into the
# daemon's slots (fs_read.h), uncached (O_DIRECT) where the image's file
# allows, plain files as encrypted ones: the image's page cache does not
# fill with the file (before, a plain file's every extent was read through
# it: the kernel filled its pages and the daemon copied them out), and
# every byte reads back, also with two readers at once and reads of an
# odd size.  The read-ahead verifies each extent's checksum before any
# read takes it: a plain file with a byte flipped on disk fails with EIO
# at that extent, the bytes before it right, as without read-ahead.
need_fuse
need fincore python3
# On tmpfs (make check's TMPDIR) every page of a file is resident: fincore
# cannot tell a read through the page cache from one past it.  There the
# test runs in a directory of its own under the tree's build/ (a disk).
work=
if [ "$(stat -f -c %T .)" = tmpfs ]; then
	work=$(mktemp -d "$ROOT/build/t108.XXXXXX") || fail "mktemp under $ROOT/build"
	cd "$work"
fi
expect_rc 0 $B format -q --fs-size=160M img
head -c 24000000 /dev/urandom > r
head -c 9000000 /dev/urandom > q
mkdir m
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null; [ -z "$work" ] || rm -rf "$work"' EXIT
expect_rc 0 $B fusemount "$PWD/img" m
(ulimit -f 100000; cp r m/r && cp q m/q) || fail "cp"
fusermount3 -u m || fail "unmount"
# drop_image_cache: the image's pages out of the page cache (written back first)
drop_image_cache() {
	python3 -c 'import os; fd = os.open("img", os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' ||
		fail "posix_fadvise"
}
drop_image_cache
expect_rc 0 $B fusemount "$PWD/img" m
cmp r m/r || fail "sequential read differs"
cached=$(fincore -b -n -o RES img)
cmp q m/q & c1=$!
dd if=m/r bs=77777 status=none | cmp - r & c2=$!
wait $c1 || fail "q read beside r differs"
wait $c2 || fail "r read in 77777-byte pieces differs"
fusermount3 -u m || fail "unmount"
echo "image bytes in the page cache after a sequential read of 24000000: $cached"
if [ "$(stat -f -c %T .)" != tmpfs ] &&
   python3 -c 'import os; os.close(os.open("img", os.O_RDONLY | os.O_DIRECT))' 2>/dev/null; then
	# metadata, and the file's first extents (read before the read is seen to be sequential)
	[ "$cached" -lt 8000000 ] || fail "$cached bytes of the image cached: the file was read through the page cache"
else
	skip_part "no O_DIRECT here, or tmpfs (the tree too): the image's page cache"
fi
expect_rc 0 $B fsck -n img

encrypted && exit 0	# the plaintext is not on the image to find and damage
# a byte of the extent holding r's byte 12000000 flipped on the image
off=$(python3 -c '
d = open("img", "rb").read(); r = open("r", "rb").read()
print(d.find(r[12000000:12004096]))')
[ "$off" -gt 0 ] || fail "r's bytes not found on the image"
flip_byte img $((off + 100))
drop_image_cache
expect_rc 0 $B fusemount "$PWD/img" m
dd if=m/r of=got bs=128k status=none 2>dd.err && fail "a read over the damaged extent succeeded"
grep -q "Input/output error" dd.err || fail "not EIO: $(cat dd.err)"
fusermount3 -u m || fail "unmount"
n=$(stat -c %s got)
echo "read $n bytes before the damaged extent"
[ "$n" -ge 11000000 ] && [ "$n" -le 12000000 ] || fail "$n bytes read before the damage at 12000000"
cmp -n "$n" got r || fail "the bytes before the damaged extent differ"
