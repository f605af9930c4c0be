# image update IMG DIR and hard links: the names of one host inode come out
# as one image inode with that many names, as format --source makes them,
# wherever the names are: in new directories, across two new directories,
# a new name of a file the image keeps (which keeps its inode number and
# extents), files the image has apart that the host now links, a link the
# host broke, and a linked file whose data changed.  --dry-run counts what
# the update does; extract gives the links back; fsck is clean.
need python3
need jq
T="python3 $ROOT/tests/cli/treetool.py"

mkdir -p src/a src/b src/c
printf 'kept file\n' > src/a/f
printf 'b one\n' > src/b/one
printf 'b two\n' > src/b/two
printf 'linked\n' > src/c/x
ln src/c/x src/c/y
printf 'changing\n' > src/a/w
expect_rc 0 $B format -q --fs-size=64M --source src img

# ino PATH...: the image inode numbers, one a line
ino() {
	expect_rc 0 $B image stat --json img "$@"
	jq -r '.files[].inode' out
}
nlink() {
	expect_rc 0 $B image stat --json img "$1"
	jq -r '.files[0].nlink' out
}
[ "$(ino /c/x)" = "$(ino /c/y)" ] || fail "format --source: c/x and c/y are two inodes"
f_ino=$(ino /a/f)
w_ino=$(ino /a/w)
one_ino=$(ino /b/one)
expect_rc 0 $B list -b extents -s $f_ino:0:0 -e $f_ino:18446744073709551615:4294967295 img
grep "^$f_ino:" out > f_before || fail "no extent for a/f"

# the edits
mkdir -p src/new/deeper src/p src/q
ln src/a/f src/new/deeper/f-link          # a new name, in a new directory, of a kept file
printf 'pair\n' > src/new/pair1           # a pair, both in a new directory
ln src/new/pair1 src/new/pair2
printf 'across\n' > src/p/x               # a pair across two new directories
ln src/p/x src/q/y
rm src/b/two && ln src/b/one src/b/two    # apart in the image, linked now
rm src/c/y && cp -p src/c/x src/c/y       # linked in the image, apart now
printf 'changed and linked\n' >> src/a/w  # data changed, and a new name
ln src/a/w src/new/w-link

expect_rc 0 $B image update --dry-run --json img src
dry=$(jq -c 'del(.dry_run)' out)
expect_rc 0 $B image update --json img src
real=$(jq -c 'del(.dry_run)' out)
[ "$dry" = "$real" ] || fail "--dry-run counted otherwise:
 dry:  $dry
 real: $real"
jq -e '.written == 1 and .replaced == 2 and .removed == 0' out >/dev/null ||
	fail "counts: $(cat out)"

# one inode per host inode
[ "$(ino /a/f /new/deeper/f-link | sort -u | wc -l)" = 1 ] || fail "a/f and its new link differ"
[ "$(ino /a/f)" = "$f_ino" ] || fail "a/f did not keep its inode"
[ "$(nlink /a/f)" = 2 ] || fail "a/f: nlink $(nlink /a/f)"
[ "$(ino /new/pair1 /new/pair2 | sort -u | wc -l)" = 1 ] || fail "new/pair1 and pair2 differ"
[ "$(nlink /new/pair1)" = 2 ] || fail "new/pair1: nlink $(nlink /new/pair1)"
[ "$(ino /p/x /q/y | sort -u | wc -l)" = 1 ] || fail "p/x and q/y differ"
[ "$(ino /b/one /b/two | sort -u | wc -l)" = 1 ] || fail "b/one and b/two differ"
[ "$(ino /b/one)" = "$one_ino" ] || fail "b/one did not keep its inode"
[ "$(ino /c/x /c/y | sort -u | wc -l)" = 2 ] || fail "c/x and c/y still one inode"
[ "$(nlink /c/x)" = 1 ] || fail "c/x: nlink $(nlink /c/x)"
[ "$(ino /a/w /new/w-link | sort -u | wc -l)" = 1 ] || fail "a/w and its new link differ"
[ "$(ino /a/w)" = "$w_ino" ] || fail "a/w did not keep its inode"
expect_rc 0 $B image cat img /new/w-link
expect_in out 'changed and linked'

# a kept file keeps its extents
expect_rc 0 $B list -b extents -s $f_ino:0:0 -e $f_ino:18446744073709551615:4294967295 img
grep "^$f_ino:" out > f_after
cmp -s f_before f_after || fail "a/f's extents changed: $(diff f_before f_after)"

expect_rc 0 $B fsck -n img
expect_rc 0 $B image extract img xd
expect_rc 0 $T compare src xd
[ "$(stat -c %i xd/a/f)" = "$(stat -c %i xd/new/deeper/f-link)" ] || fail "extract: a/f not linked"
[ "$(stat -c %i xd/p/x)" = "$(stat -c %i xd/q/y)" ] || fail "extract: p/x, q/y not linked"

# an equal tree: nothing to do, and the image is not written
s0=$(sha img)
expect_rc 0 $B image update --json img src
jq -e '.created == 0 and .replaced == 0 and .written == 0 and .metadata_only == 0 and
	(.changes | length) == 0' out >/dev/null || fail "second update: $(cat out)"
[ "$(sha img)" = "$s0" ] || fail "an update with nothing to do wrote to the image"

# the same as format --source makes: the link structure of a fresh image
expect_rc 0 $B format -q --fs-size=64M --source src fresh.img
for pair in "/a/f /new/deeper/f-link" "/new/pair1 /new/pair2" "/p/x /q/y" "/b/one /b/two" \
	    "/c/x /c/y" "/a/w /new/w-link"; do
	n1=$(ino $pair | sort -u | wc -l)
	expect_rc 0 $B image stat --json fresh.img $pair
	n2=$(jq -r '.files[].inode' out | sort -u | wc -l)
	[ "$n1" = "$n2" ] || fail "$pair: $n1 inodes after update, $n2 from format --source"
done
