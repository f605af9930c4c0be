# A create's reply is what it wrote (h-daemon40: bch_fs_create_stat(), the
# entry's attributes from the inode written, not read back): what the kernel
# caches from the reply (one mountpoint: attributes for TIMEOUT) equals what
# a stat shows after a remount, field by field (mode, uid, gid, size,
# blocks, nlink, rdev, atime, mtime, ctime, ino), for every type (file by
# open(O_CREAT) and by mknod, directory, symlinks of 1 to 4095 bytes, fifo,
# socket, char device), under umasks 022 and 077, in a plain directory, a
# setgid one owned by another group, one with a default ACL (the reply is
# read back there), one as another user (uid 1234 via setpriv), and in a
# subvolume and a writable snapshot (st_ino: the view's handle).
# h-review40b, session 30.  Runs encrypted too (tests/encrypted.sh).
need_fuse
need python3 setfacl setpriv
mkdir m
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
chmod 755 .
expect_rc 0 $B format -q --fs-size=128M img
expect_rc 0 $B subvolume create img /sv
expect_rc 0 $B subvolume snapshot img / /snap
expect_rc 0 $B fusemount -o allow_other "$PWD/img" m
chmod 1777 m
mkdir m/plain m/sgid m/acl m/user
chown 0:4321 m/sgid && chmod 2775 m/sgid || fail "setgid dir"
setfacl -d -m u::rwx,g::r-x,o::--- m/acl || fail "default ACL"
chmod 777 m/user

cat > mk.py <<'PY'
import json, os, socket, stat, sys
d, out = sys.argv[1], sys.argv[2]
F = ("st_mode", "st_uid", "st_gid", "st_size", "st_blocks", "st_nlink", "st_rdev",
     "st_atime_ns", "st_mtime_ns", "st_ctime_ns", "st_ino")
res = {}
def rec(name):
    st = os.lstat(os.path.join(d, name))	# from the create's reply, cached
    res[name] = [getattr(st, f) for f in F]
for um in (0o022, 0o077):
    os.umask(um)
    t = "u%o_" % um
    os.close(os.open(os.path.join(d, t + "f"), os.O_CREAT | os.O_WRONLY, 0o666)); rec(t + "f")
    os.mknod(os.path.join(d, t + "n"), stat.S_IFREG | 0o640); rec(t + "n")
    os.mkdir(os.path.join(d, t + "d"), 0o777); rec(t + "d")
    os.mkfifo(os.path.join(d, t + "p"), 0o666); rec(t + "p")
    if os.geteuid() == 0:
        os.mknod(os.path.join(d, t + "c"), stat.S_IFCHR | 0o600, os.makedev(1, 3)); rec(t + "c")
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.path.join(d, t + "s")); s.close(); rec(t + "s")
    for n in (1, 59, 60, 61, 100, 255, 256, 1000, 2048, 4000, 4095):
        os.symlink("x" * n, os.path.join(d, t + "l%d" % n)); rec(t + "l%d" % n)
json.dump({"fields": F, "files": res}, open(out, "w"))
PY

: > before-user.json && chmod 666 before-user.json
for d in plain sgid acl sv snap; do python3 mk.py m/$d before-$d.json || fail "make in $d"; done
setpriv --reuid 1234 --regid 1234 --clear-groups /usr/bin/python3 mk.py m/user before-user.json || fail "make as uid 1234"
fusermount3 -u m || fail "unmount"
for i in $(seq 50); do pgrep -f "fusemount.*$PWD/img" >/dev/null || break; sleep 0.1; done
expect_rc 0 $B fusemount -o allow_other "$PWD/img" m

cat > cmp.py <<'PY'
import json, os, sys
bad = 0
for d in sys.argv[1:]:
    b = json.load(open("before-%s.json" % d))
    F = b["fields"]
    for name, was in sorted(b["files"].items()):
        st = os.lstat("m/%s/%s" % (d, name))
        now = [getattr(st, f) for f in F]
        diff = ["%s %s != %s" % (f, w, n) for f, w, n in zip(F, was, now) if w != n]
        if diff:
            bad += 1
            print("%s/%s: reply vs disk: %s" % (d, name, ", ".join(diff)))
print("differing:", bad)
sys.exit(1 if bad else 0)
PY
python3 cmp.py plain sgid acl user sv snap > cmp.txt 2>&1 || fail "a create's reply differs from the inode after a remount:
$(head -40 cmp.txt)"
cat cmp.txt
fusermount3 -u m || fail "unmount"
for i in $(seq 50); do pgrep -f "fusemount.*$PWD/img" >/dev/null || break; sleep 0.1; done
expect_rc 0 $B fsck -n -f img
expect_in out ' 0 problems found'
