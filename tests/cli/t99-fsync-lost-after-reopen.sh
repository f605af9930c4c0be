# An fsync that begins after a replacement of the filesystem (mount -o
# remount here; device add, remove, online likewise) which lost the file's
# last changes: the close failed, and the read-only open found an older
# journal.  As Linux reports a writeback error (errseq_t), fsync returns
# EIO once to every descriptor open when the loss happened, and to each
# opened later before one was told (t103); then 0 (fusemount_req.c
# fm_changes_judge(), fm_lost_check()).  Before, such an fsync returned 0:
# nothing was left to flush on the read-only filesystem.
# BCACHEFS_TEST_GATE (fusemount.h): every device write and flush fails
# while DIR/io-fail exists.
#   f0: written and fsynced before (f1, f2, d with it): its descriptor's
#       fsync is 0 (no EIO for a file that lost nothing).
#   f1: descriptors a (opened before the write) and b (after): EIO each,
#       once; a third fsync of a is 0.
#   f2: descriptor d open across; c opened after the loss: c EIO (none
#       told yet), d EIO (open then), e opened after that: 0, d again: 0.
#   dir: a descriptor of a directory a file was created in: EIO, then 0.
#   after remount rw: a new write and fsync of f3 are 0, a still 0.
# fsck -n clean at the end.  Data: python's random.Random, seed 991.
. "$ROOT/tests/cli/fsync_lost.sh"
fl_setup 991
cat >> w.py <<'PY'
ro = lambda name: os.open("m/" + name, os.O_RDONLY)
# durable first: f0, f1, f2 and d (c and e open f2 after the loss: it must be there)
for name in ("f0", "f1", "f2"):
    write(name)
os.mkdir("m/d")
f0 = ro("f0")
os.fsync(f0)
# then changed, not durable
dfd = os.open("m/d", os.O_RDONLY | os.O_DIRECTORY)
a = ro("f1")
write("f1")
b = ro("f1")
d = ro("f2")
write("f2")
write("d/x")
open("ready", "w").close()
wait_for("go")
fsync("f0", f0)
fsync("f1.a", a)
fsync("f1.b", b)
fsync("f1.a.again", a)
c = ro("f2")
fsync("f2.c", c)
fsync("f2.d", d)
e = ro("f2")
fsync("f2.e", e)
fsync("f2.d.again", d)
fsync("dir", dfd)
fsync("dir.again", dfd)
open("done1", "w").close()
wait_for("go2")
write("f3")
f3 = os.open("m/f3", os.O_RDWR)
os.write(f3, b"more")
fsync("f3", f3)
fsync("f1.a.rw", a)
out.close()
PY

fl_mount

python3 w.py & w=$!
wait_for ready "the writes"
fl_lose
: > go
wait_for done1 "the fsyncs after the reopen"
want f0 ok "f0 lost nothing: durable before"
want f1.a EIO "open before its write"
want f1.b EIO "open when the change was lost"
want f1.a.again ok "told once"
want f2.c EIO "opened after the loss, none told yet"
want f2.d EIO "open when the change was lost"
want f2.e ok "opened after the loss, another told"
want f2.d.again ok "told once"
want dir EIO "a name created in it was lost"
want dir.again ok "told once"

expect_rc 0 $B fusemount -o remount,rw a.img m
: > go2
wait $w || fail "the python side: $(cat results)"
w=
want f3 ok "written after the reopen"
want f1.a.rw ok "told already"

fusermount3 -u m || fail "unmount"
wait $pid 2>/dev/null
pid=
# the changes were lost indeed
run $B image cat a.img /d/x
[ "$rc" = 0 ] && fail "d/x survived the failed close: the test lost nothing"
expect_rc 0 $B fsck -n a.img
expect_in out ' 0 problems found'
