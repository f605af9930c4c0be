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
need_fuse
need_root "mount -o remount (mount(2) MS_REMOUNT)"
need python3
echo "seed: 1031"
mkdir m gate
trap 'cd /; [ -z "${w:-}" ] || kill $w 2>/dev/null; [ -z "${pid:-}" ] || kill -9 $pid 2>/dev/null; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=64M a.img
cat > w.py <<'PY'
import errno, os, random, sys, time
rnd = random.Random(1031)

def wait_for(name):
    for i in range(6000):
        if os.path.exists(name):
            return
        time.sleep(0.01)
    sys.exit("no " + name + " in 60 s")

def write(name):
    fd = os.open("m/" + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    assert os.write(fd, rnd.randbytes(100000)) == 100000
    os.close(fd)

def fsync(what, fd):
    try:
        os.fsync(fd)
        r = "ok"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    out.write("%s %s\n" % (what, r))
    out.flush()

out = open("results", "w")
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
wait_for() {
	for i in $(seq 600); do [ -e "$1" ] && return 0; sleep 0.1; done
	fail "$2: $1 not there in 60 s; daemon: $(cat daemon.err)"
}
want() {
	got=$(sed -n "s/^$1 //p" results)
	[ "$got" = "$2" ] || fail "fsync $1: '$got', want $2 ($3); results: $(cat results)"
}

ulimit -f 200000
BCACHEFS_TEST_GATE="$PWD/gate" $B fusemount -f -o norebalance,nocopygc "$PWD/a.img" m 2>daemon.err & pid=$!
for i in $(seq 300); do mountpoint -q m && break; sleep 0.1; done
mountpoint -q m || fail "not mounted: $(cat daemon.err)"

python3 w.py & w=$!
wait_for ready "the writes"
: > gate/io-fail
expect_rc 0 $B fusemount -o remount,ro a.img m
grep -q "closing:" err || fail "the remount's close did not fail: $(cat err)"
rm gate/io-fail
mountpoint -q m || fail "mount gone"
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
