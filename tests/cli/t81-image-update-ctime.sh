# format --source and image update give each image inode its host file's
# ctime (not with SOURCE_DATE_EPOCH: then that time, for reproducible
# images); image update trusts a ctime equal to the nanosecond on both sides
# to mean that neither side's xattrs changed since, and reads them only for
# the others (cmd_image_update.c, "Ctimes").
#  - the ctimes: copied without SOURCE_DATE_EPOCH, the epoch with it;
#  - an xattr set or removed on the host (its ctime moves): found, written;
#  - an xattr set or removed in the image (the image inode's ctime moves):
#    found, put back as the host has it;
#  - the skip itself: a dry run over an unchanged tree of 4,000 names asks
#    the kernel for xattrs (listxattrat) for far fewer names than it has.
need python3
need setfattr strace
T="python3 $ROOT/tests/cli/treetool.py"
ctime_ns() { python3 -c 'import os, sys; print(os.lstat(sys.argv[1]).st_ctime_ns)' "$1"; }
img_ctime() {	# IMG PATH
	expect_rc 0 $B image stat --json "$1" "$2"
	python3 -c 'import json, sys; print(json.load(open("out"))["files"][0]["ctime_ns"])'	# jq: doubles
}

mkdir -p src/d && echo one > src/a && echo two > src/d/b && ln -s a src/l
setfattr -n user.k -v v1 src/d/b
expect_rc 0 $B format -q --fs-size=64M --source src img
for p in a d/b l d; do
	[ "$(img_ctime img /$p)" = "$(ctime_ns src/$p)" ] || fail "/$p: image ctime $(img_ctime img /$p), host $(ctime_ns src/$p)"
done
SOURCE_DATE_EPOCH=1700000000 expect_rc 0 $B format -q --fs-size=64M --source src sde.img
[ "$(img_ctime sde.img /a)" = 1700000000000000000 ] || fail "SOURCE_DATE_EPOCH: ctime $(img_ctime sde.img /a)"

# host side
setfattr -n user.k -v v2 src/d/b
setfattr -n user.new -v x src/a
expect_rc 0 $B image update img src
expect_in out '^M /d/b$'
expect_in out '^M /a$'
expect_rc 0 $B image getfattr -n user.k img /d/b
expect_in out 'v2'
[ "$(img_ctime img /d/b)" = "$(ctime_ns src/d/b)" ] || fail "update did not record the host ctime of /d/b"
setfattr -x user.new src/a
expect_rc 0 $B image update img src
expect_in out '^M /a$'
expect_rc 0 $B image update --dry-run img src
[ ! -s out ] || fail "an equal tree listed changes: $(cat out)"

# image side
expect_rc 0 $B image setfattr -n user.extra -v y img /a
expect_rc 0 $B image setfattr -x user.k img /d/b
expect_rc 0 $B image update img src
expect_in out '^M /a$'
expect_in out '^M /d/b$'
rm -rf xd && expect_rc 0 $B image extract img xd
expect_rc 0 $T compare src xd
expect_rc 0 $B image getfattr img /a
expect_not_in out 'user.extra'

# the skip (strace names syscall 465, listxattrat, as syscall_0x1d1)
python3 - big <<'PY'
import os, sys
for d in range(100):
    os.makedirs(f"{sys.argv[1]}/d{d}")
    for f in range(40):
        open(f"{sys.argv[1]}/d{d}/f{f}", "w").write(str(f))
PY
expect_rc 0 $B format -q --fs-size=64M --source big big.img
# (LeakSanitizer cannot run under ptrace: off for this one run of a sanitizer build)
ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0 \
strace -f -qq -e trace=all -o trace $B image update --dry-run big.img big > out 2> err ||
	fail "update under strace: $(cat err)"
[ ! -s out ] || fail "an equal tree listed changes: $(head out)"
n=$(grep -c 'syscall_0x1d1\|listxattrat(' trace || true)
[ "$n" -lt 2000 ] || fail "$n of 4,100 names had their xattrs listed"
