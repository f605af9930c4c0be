# Libraries loaded on first use (libbcachefs/dl.h): zlib, liblz4, libzstd,
# libxxhash, libfuse3 and libblkid are not linked.  With a stand-in that lacks their
# functions (like t16 does for libarchive): a command that does not need one
# works; one that does fails with a message naming it and a failure exit (1,
# fsck 8), never a crash, and writes nothing; no missing library is taken
# for damage on disk.
command -v cc >/dev/null || skip "cc missing"
echo 'int not_the_library;' > s.c
for so in libz.so.1 liblz4.so.1 libzstd.so.1 libxxhash.so.0 libfuse3.so.3 libblkid.so.1; do
	d=stub-${so%%.so*}
	mkdir "$d" && cc -shared -fPIC -o "$d/$so" s.c || fail "cc stub $so"
	mkdir -p stub-all && cp "$d/$so" stub-all/
done
mkdir -p src/d && seq 1 20000 > src/d/numbers && printf 'hello\n' > src/hello
without() { lib=$1; shift; env LD_LIBRARY_PATH="$PWD/stub-$lib" "$@"; }

# what most commands do needs none of them (libxxhash only to write)
expect_rc 0 without all $B version
expect_rc 0 $B format -q --fs-size=256M --source src plain.img
h=$(sha plain.img)
expect_rc 0 without all $B fsck -f -n plain.img
expect_rc 0 without all $B fsck -f -n -c plain.img
expect_rc 0 without all $B image cat plain.img /d/numbers
cmp -s out src/d/numbers || fail "plain file read back wrong"
expect_rc 0 without all $B show-super plain.img
[ "$(sha plain.img)" = "$h" ] || fail "read-only commands wrote"

# compressed data: each type needs its library to be read or written
for c in gzip:libz lz4:liblz4 zstd:libzstd; do
	type=${c%%:*} lib=${c#*:}
	so=$(ls stub-$lib)
	rm -f c.img
	expect_rc 0 $B format -q --fs-size=256M --compression=$type --source src c.img
	h=$(sha c.img)
	expect_rc 0 without $lib $B fsck -f -n c.img		# metadata only
	expect_rc 8 without $lib $B fsck -f -n -c c.img	# reads the data
	expect_in err "cannot load $so"
	expect_not_in out "unreadable|bad checksum"
	expect_rc 1 without $lib $B image cat c.img /d/numbers
	expect_in err "^bcachefs image: cat: /d/numbers: .*cannot load $so \\($type compression\\)"
	[ "$(sha c.img)" = "$h" ] || fail "$type: image changed"
	expect_rc 0 $B image cat c.img /d/numbers
	cmp -s out src/d/numbers || fail "$type: read back wrong"
	rm -f w.img
	expect_rc 1 without $lib $B format -q --fs-size=256M --compression=$type --source src w.img
	expect_in err "cannot load $so"
done

# xxhash64: metadata checksummed with it cannot be checked without it (an
# error, not a bad checksum), and nothing opens read-write (new nodes' seqs)
rm -f x.img
expect_rc 0 $B format -q --fs-size=256M --metadata_checksum=xxhash64 --source src x.img
h=$(sha x.img)
expect_rc 8 without libxxhash $B fsck -f -n x.img
expect_in err "cannot load libxxhash.so.0"
expect_not_in out "unreadable|bad checksum"
expect_rc 1 without libxxhash $B image ls x.img /
expect_in err "cannot load libxxhash.so.0"
expect_rc 0 without libxxhash $B image ls plain.img /
expect_rc 1 without libxxhash $B image put plain.img src/hello /new
expect_in err "opening read-write: cannot load libxxhash.so.0"
rm -f n.img
expect_rc 1 without libxxhash $B format -q --fs-size=256M n.img
expect_in err "^bcachefs format: cannot load libxxhash.so.0"
[ ! -e n.img ] || fail "format created the image without libxxhash"
[ "$(sha x.img)" = "$h" ] || fail "xxhash64 image changed"
expect_rc 0 $B fsck -f -n x.img
# the superblock's own checksum crc32c, journal entries written with xxhash64
# (encrypted, journal entries carry MACs whatever metadata_checksum says)
if encrypted; then
	skip_part "journal entries checksummed with xxhash64: an encrypted journal has MACs"
else
	cp plain.img j.img
	expect_rc 0 $B image put -o metadata_checksum=xxhash64 j.img src/hello /h2
	h=$(sha j.img)
	expect_rc 8 without libxxhash $B fsck -f -n j.img
	expect_in err "journal bucket [0-9]+: cannot load libxxhash.so.0"
	expect_not_in out "unreadable|bad checksum"
	[ "$(sha j.img)" = "$h" ] || fail "journal image changed"
	expect_rc 0 $B fsck -f -n j.img
fi

# fusemount: checked before the filesystem is opened
mkdir mnt
h=$(sha plain.img)
expect_rc 1 without libfuse3 $B fusemount -f plain.img mnt
expect_in err "^bcachefs fusemount: cannot load libfuse3.so.3: .*undefined symbol: fuse_"
[ "$(sha plain.img)" = "$h" ] || fail "fusemount opened the image without libfuse3"

# libblkid: format looks for an existing filesystem with it (not when the
# image does not exist yet); --force does not look
command -v mke2fs >/dev/null || skip "mke2fs missing"
rm -f e.img && truncate -s 64M e.img && mke2fs -q -F -t ext4 e.img || fail "mke2fs"
h=$(sha e.img)
expect_rc 1 without libblkid $B format -q e.img
expect_in err "^bcachefs format: cannot load libblkid.so.1 to look for an existing filesystem on e.img: "
[ "$(sha e.img)" = "$h" ] || fail "format wrote without libblkid"
expect_rc 1 $B format -q e.img
expect_in err "e.img contains a filesystem of type ext4"
expect_rc 0 without libblkid $B format -q --force e.img
expect_rc 0 without all $B fsck -f -n e.img
rm -f new.img
expect_rc 0 without libblkid $B format -q --fs-size=64M new.img
