# An fsync whose journal write ends while a command body waits for the
# engine lock: the body goes first and may close the filesystem and open it
# again (mount -o remount,ro here; device add, remove, online likewise).
# The fsync's answer must say whether its entry survived (fusemount_ops.c
# op_fsync(), fm_fsync_across()), not trust the old filesystem's close.
# BCACHEFS_TEST_GATE (fusemount.h) parks the fsync after its journal write
# (DIR/fsync-park; the state waited for is DIR/fsync-parked) and fails
# every device write and flush while DIR/io-fail exists.
#   1. the fsync's entry write fails (io-fail), the remount's close fails
#      too, the read-only open finds an older journal: fsync gets EIO
#      (it returned 0 when the loop only saw m->c change).
#   2. the entry is written and flushed, then the close fails (io-fail):
#      the old filesystem had it durable, fsync returns 0, the file reads
#      back from the read-only mount and, after the unmount, from the image.
# fsck -n clean at the end.  Data: python's random.Random, seeds 951, 952.
need_fuse
need_root "mount -o remount (mount(2) MS_REMOUNT)"
need python3
echo "seeds: 951 952"
mkdir m gate
trap 'cd /; rm -f "$OLDPWD/gate/fsync-park"; [ -z "${pid:-}" ] || kill -9 $pid 2>/dev/null; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=64M a.img
cat > w.py <<'PY'
import errno, os, random, sys, time
name, seed = sys.argv[1], int(sys.argv[2])
d = random.Random(seed).randbytes(200000)
open(name + ".want", "wb").write(d)
fd = os.open("m/" + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert os.write(fd, d) == len(d)
os.close(fd)
fd = os.open("m/" + name, os.O_RDONLY)	# a file open for writing refuses remount ro
open(name + ".written", "w").close()
for i in range(6000):
    if os.path.exists("go." + name):
        break
    time.sleep(0.01)
else:
    sys.exit("no go in 60 s")
try:
    os.fsync(fd)
    r = "ok"
except OSError as e:
    r = errno.errorcode.get(e.errno, str(e.errno))
open(name + ".rc", "w").write(r + "\n")
PY
# wait_for FILE WHAT: FILE there within 60 s (polled), else fail
wait_for() {
	for i in $(seq 600); do [ -e "$1" ] && return 0; sleep 0.1; done
	fail "$2: $1 not there in 60 s; daemon: $(cat daemon.err)"
}
# fsync_parked NAME SEED [fail]: NAME written (then, with fail, every write
# and flush failing), its fsync's journal write over, parked
fsync_parked() {
	python3 w.py $1 $2 & w=$!
	wait_for $1.written "writer $1"
	[ -n "${3:-}" ] && : > gate/io-fail
	: > gate/fsync-park
	: > go.$1
	wait_for gate/fsync-parked "fsync of $1 parked"
	[ -e $1.rc ] && fail "the fsync of $1 returned without parking"
	rm gate/fsync-parked
}
# unpark NAME: the fsync goes on; its result in $got
unpark() {
	rm gate/fsync-park
	wait $w || fail "writer $1"
	got=$(cat $1.rc)
}

ulimit -f 200000
BCACHEFS_TEST_GATE="$PWD/gate" $B fusemount -f -o norebalance,nocopygc "$PWD/a.img" m 2>daemon.err & pid=$!
for i in $(seq 300); do mountpoint -q m && break; sleep 0.1; done
mountpoint -q m || fail "not mounted: $(cat daemon.err)"

# 1: the entry never written, the close failing: EIO
fsync_parked f1 951 fail
expect_rc 0 $B fusemount -o remount,ro a.img m
grep -q "closing:" err || fail "the remount's close did not fail: $(cat err)"
rm gate/io-fail
unpark f1
[ "$got" = EIO ] || fail "fsync of f1 across the reopen: $got, want EIO (its entry was never written)"

# 2: the entry durable before the body, the close failing: 0
expect_rc 0 $B fusemount -o remount,rw a.img m
mountpoint -q m || fail "mount gone"
fsync_parked f2 952
: > gate/io-fail
expect_rc 0 $B fusemount -o remount,ro a.img m
grep -q "closing:" err || fail "the remount's close did not fail: $(cat err)"
rm gate/io-fail
unpark f2
[ "$got" = ok ] || fail "fsync of f2 across the reopen: $got, want ok (its entry was durable)"
cmp f2.want m/f2 || fail "f2 differs on the read-only mount"

fusermount3 -u m || fail "unmount"
wait $pid 2>/dev/null
pid=
$B image cat a.img /f2 > f2.got 2>err || fail "image cat /f2: $(cat err)"
cmp f2.want f2.got || fail "f2 differs in the image"
grep -q "Success" daemon.err && fail "a reopen's error count misread: $(cat daemon.err)"
expect_rc 0 $B fsck -n a.img
expect_in out ' 0 problems found'
