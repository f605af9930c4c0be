# A journal entry lost while the filesystem is mounted (every device write
# fails while the fsync's entry is written: gate/io-fail, BCACHEFS_TEST_GATE
# in fusemount.h), then the devices work again.  Two files were changed and
# not synced; the entry that carries both is lost.  fsync of the first:
# EIO.  fsync of the second, whose change went with it: EIO too (as Linux
# reports a writeback error to every descriptor open at the loss,
# errseq_t), not 0.  After unmount and mount, a file whose fsync said 0
# holds what was written.  fsck -n clean at the end.
# Found by review (h-review40a): the second fsync answered 0.
# Data: python's random.Random, seed 1201.
. "$ROOT/tests/cli/fsync_lost.sh"
fl_setup 1201
cat >> w.py <<'PY'
write("f0")
f0 = os.open("m/f0", os.O_RDONLY)
fsync("f0", f0)
data = {}
for name in ("f1", "f2"):
    write(name)
a = os.open("m/f1", os.O_RDONLY)
b = os.open("m/f2", os.O_RDONLY)
open("ready", "w").close()
wait_for("go")
fsync("f1", a)
open("ready2", "w").close()
wait_for("go2")
fsync("f2", b)
open("done", "w").close()
PY
fl_mount
python3 w.py 2>w.err & w=$!
wait_for ready "the writes"
: > gate/io-fail
: > go
wait_for ready2 "the first fsync"
rm gate/io-fail
: > go2
wait_for done "the second fsync"
wait $w || fail "w.py: $(cat w.err)"
want f0 ok "synced before the failure"
want f1 EIO "its entry lost"
f2=$(sed -n 's/^f2 //p' results)
fusermount3 -u m || fail "unmount"
for i in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
pid=
expect_rc 0 $B fsck -n a.img
expect_in out ' 0 problems found'
fl_mount
# what the fsyncs said, against what the disk has
python3 - <<'PY' || fail "a file whose fsync said ok lost its change"
import random
rnd = random.Random(1201)
want = {n: rnd.randbytes(100000) for n in ("f0", "f1", "f2")}
res = dict(l.split() for l in open("results"))
for n in ("f0", "f1", "f2"):
    got = open("m/" + n, "rb").read() if __import__("os").path.exists("m/" + n) else None
    print(n, res[n], "kept" if got == want[n] else "lost")
    if res[n] == "ok":
        assert got == want[n], n
PY
want f2 EIO "its change was in the lost entry (got $f2)"
fusermount3 -u m || fail "unmount"
