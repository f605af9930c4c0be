# A create in a directory with a default ACL makes the name, then the new
# file's access ACL (fusemount_ops.c create_acl()).  When the ACL fails
# (the test hook: BCACHEFS_TEST_GATE's DIR/acl-fail, fusemount.h) the
# create returns EIO and leaves no name (as a kernel filesystem's; before,
# the name stayed, hidden behind the kernel's negative entry), yet the
# directory changed.  A replacement (remount ro with a failed close, as
# t99) that loses the change must be reported by the directory's next
# fsync (EIO, once: fm_changed(), errseq_t as t99), as for a create that
# succeeded.  Before, the failed create left the directory unmarked and its
# fsync answered 0.  fsck -n clean at the end (no inode left behind).
# Data: python's random.Random, seed 1181.
. "$ROOT/tests/cli/fsync_lost.sh"
need setfacl
fl_setup 1181
cat >> w.py <<'PY'
d = os.open("m/d", os.O_RDONLY | os.O_DIRECTORY)
write("f0")
fsync("d.before", d)            # the mkdir and setfacl durable: nothing to lose yet
open("gate/acl-fail", "w").close()
try:
    os.close(os.open("m/d/x", os.O_WRONLY | os.O_CREAT, 0o644))
    out.write("create ok\n")
except OSError as e:
    out.write("create %s\n" % errno.errorcode.get(e.errno, str(e.errno)))
os.unlink("gate/acl-fail")
out.flush()
open("ready", "w").close()
wait_for("go")
fsync("d", d)
fsync("d.again", d)
out.close()
PY

fl_mount
mkdir m/d && setfacl -d -m u:nobody:rwx m/d || fail "mkdir, setfacl -d"
python3 w.py & w=$!
wait_for ready "the failed create"
want create EIO "the test hook failed its ACL"
[ -e m/d/x ] && fail "the failed create left its name"
ls m/d | grep -q x && fail "the failed create left its name (readdir)"
fl_lose
: > go
wait $w || fail "the python side: $(cat results)"
w=
want d.before ok "nothing lost yet"
want d EIO "the change a failed create made was lost"
want d.again ok "told once"

fusermount3 -u m || fail "unmount"
wait $pid 2>/dev/null
pid=
run $B image ls a.img /d
expect_not_in out x
expect_rc 0 $B fsck -n a.img
expect_in out ' 0 problems found'
