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
need_fuse
need_root "mount -o remount (mount(2) MS_REMOUNT)"
need python3 setfacl getfacl
echo "seed: 1049"
mkdir m gate
trap 'cd /; [ -z "${w:-}" ] || kill $w 2>/dev/null; [ -z "${pid:-}" ] || kill -9 $pid 2>/dev/null; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=64M a.img
cat > w.py <<'PY'
import errno, os, random, sys, time
rnd = random.Random(1049)

def wait_for(name):
    for i in range(6000):
        if os.path.exists(name):
            return
        time.sleep(0.01)
    sys.exit("no " + name + " in 60 s")

def fsync(what, fd):
    try:
        os.fsync(fd)
        r = "ok"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e.errno))
    out.write("%s %s\n" % (what, r))
    out.flush()

out = open("results", "w")
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
wait_for ready "the create"
: > gate/io-fail
expect_rc 0 $B fusemount -o remount,ro a.img m
grep -q "closing:" err || fail "the remount's close did not fail: $(cat err)"
rm gate/io-fail
mountpoint -q m || fail "mount gone"
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
