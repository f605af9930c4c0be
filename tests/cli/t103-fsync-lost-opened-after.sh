# fsync after a replacement that lost a file's change (as t99), for the
# descriptors opened after the loss: Linux samples the file's errseq_t at
# open (errseq_sample(): 0 while no one has seen the error), so EVERY
# descriptor opened before the first fsync that reports it gets EIO once,
# not only the first of them; one opened after that report gets 0.  A dup
# is the same open file: told once between them.  An O_WRONLY open (the
# daemon's direct_io handle) counts as any other.
#   f: c1 (O_RDONLY), c2 (O_WRONLY), c3 = dup(c1), all opened after the loss,
#      none told yet: c1 EIO, c3 0 (its open file was told), c2 EIO,
#      c2 again 0; c4 opened after c1's report: 0.
# k is open across the loss and never fsynced: without a descriptor the
# kernel forgets f at the remount (shrink_dcache_sb()), and its loss with
# it, as Linux forgets an evicted inode's error.
# The loss is at a remount ro; a remount rw follows (nothing more lost)
# before the opens, for the O_WRONLY one.
# Before the fix c2 got 0: only the first handle opened after was told.
# fsck -n clean at the end.  Data: python's random.Random, seed 1031.
. "$ROOT/tests/cli/fsync_lost.sh"
fl_setup 1031
cat >> w.py <<'PY'
write("f")                      # durable: f is there after the loss
fd = os.open("m/f", os.O_RDONLY)
os.fsync(fd)
os.close(fd)
k = os.open("m/f", os.O_RDONLY)  # open across the loss (held), never fsynced
write("f")                      # then changed, not durable
open("ready", "w").close()
wait_for("go")
c1 = os.open("m/f", os.O_RDONLY)
c2 = os.open("m/f", os.O_WRONLY)
c3 = os.dup(c1)
fsync("c1", c1)
fsync("c3", c3)
fsync("c2", c2)
fsync("c2.again", c2)
c4 = os.open("m/f", os.O_RDONLY)
fsync("c4", c4)
out.close()
PY

fl_mount

python3 w.py & w=$!
wait_for ready "the writes"
fl_lose
expect_rc 0 $B fusemount -o remount,rw a.img m	# for the O_WRONLY open; loses nothing more
: > go
wait $w || fail "the python side: $(cat results)"
w=
want c1 EIO "opened after the loss, none told yet"
want c3 ok "a dup of c1: its open file was told"
want c2 EIO "opened after the loss before any was told (errseq_sample() gave 0)"
want c2.again ok "told once"
want c4 ok "opened after c1 was told"

fusermount3 -u m || fail "unmount"
wait $pid 2>/dev/null
pid=
expect_rc 0 $B fsck -n a.img
expect_in out ' 0 problems found'
