# fsync of the mountpoint's root directory after a replacement that lost a
# name created in it (as t99's directory d): EIO once, then 0.  The root is
# never looked up by the kernel, so it had no held entry (fusemount.h,
# struct held) where fm_changed() could note the change: its loss went
# unseen and the fsync answered 0, while the same steps in a subdirectory
# gave EIO.  Its descriptor is opened before the loss and another after
# (errseq_t: both told, as t103).  Then (2) the caches the root now has as
# a held inode (nosgid, nodefacl) forget what a chmod or setfacl of the
# root changes.  fsck -n clean at the end.
# Data: python's random.Random, seed 1049.
. "$ROOT/tests/cli/fsync_lost.sh"
need setfacl getfacl
fl_setup 1049
cat >> w.py <<'PY'
fd = os.open("m/f0", os.O_WRONLY | os.O_CREAT, 0o644)  # durable data first (fsck: its replicas entry is used)
os.write(fd, rnd.randbytes(10000))
os.fsync(fd)
os.close(fd)
root = os.open("m", os.O_RDONLY | os.O_DIRECTORY)
fsync("root.before", root)      # nothing lost yet
fd = os.open("m/x", os.O_WRONLY | os.O_CREAT, 0o644)   # a name in the root, not durable
os.write(fd, rnd.randbytes(10000))
os.close(fd)
open("ready", "w").close()
wait_for("go")
root2 = os.open("m", os.O_RDONLY | os.O_DIRECTORY)
fsync("root", root)
fsync("root.again", root)
fsync("root2", root2)
out.close()
PY

fl_mount

python3 w.py & w=$!
wait_for ready "the create"
fl_lose
: > go
wait $w || fail "the python side: $(cat results)"
w=
want root.before ok "nothing lost yet"
want root EIO "a name created in it was lost"
want root.again ok "told once"
want root2 EIO "opened after the loss, before it was told"

# 2. the root held has the caches of struct held: each learnt, then made
# false through the root itself, and the next create sees the change
expect_rc 0 $B fusemount -o remount,rw a.img m
: > m/a				# root read: no S_ISGID (nosgid), no default ACL (nodefacl)
chgrp 4242 m && chmod g+s m || fail "chgrp, chmod g+s of the root"
: > m/b
[ "$(stat -c %g m/b)" = 4242 ] || fail "b after chmod g+s of the root: group $(stat -c %g m/b), want 4242"
chmod g-s m
: > m/c
[ "$(stat -c %g m/c)" = "$(id -g)" ] || fail "c after chmod g-s of the root: group $(stat -c %g m/c), want $(id -g)"
setfacl -d -m u:nobody:rwx m || fail "setfacl -d of the root"
: > m/e
getfacl -c m/e > out 2>&1
grep -q '^user:nobody:' out || fail "e did not inherit the root's default ACL: '$(tr '\n' ' ' < out)'"

fusermount3 -u m || fail "unmount"
wait $pid 2>/dev/null
pid=
run $B image cat a.img /x
[ "$rc" = 0 ] && fail "x survived the failed close: the test lost nothing"
expect_rc 0 $B fsck -n a.img
expect_in out ' 0 problems found'
