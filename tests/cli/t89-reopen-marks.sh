# Commands that reopen the filesystem under a mount (device offline,
# online, resize, remove, ...) leave the new opens as the mount's own (cmd_fusemount.c
# invariants 1 and 4): each member still carries the mount's mark (an OFD
# read lock at 2^60 + the mount's device number, /proc/locks), so a
# command after the unmount waits for the daemon's close; and a file
# unlinked while open stays readable through its descriptor (its free is
# deferred to its last forget).  The new bch_fs may be allocated at the old
# one's address: the daemon took it for the old one, left the devices
# unmarked and the unlinked files freed at once (t49 failed under load).
# Data: python's random.Random(89).
need_fuse
need python3
echo "seed: 89"
mkdir m
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=64M a.img --fs-size=64M b.img --fs-size=64M c.img
expect_rc 0 $B fusemount "$PWD/a.img:$PWD/b.img:$PWD/c.img" m

# marked: an OFD lock at or past 2^60 on the file's inode
marked() {
	ino=$(stat -c %i "$1")
	awk -v ino="$ino" '$2 == "OFDLCK" && $4 == "READ" {
		n = split($6, a, ":"); if (a[n] == ino && length($7) >= 19 && $7 >= 1152921504606846976) f = 1 }
		END { exit !f }' /proc/locks
}
# open, write, unlink, read back through the descriptor, close
cat > unl.py <<'PY'
import os, random, sys
d = random.Random(89).randbytes(200000)
p = sys.argv[1]
fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
assert os.write(fd, d) == len(d)
os.unlink(p)
os.lseek(fd, 0, 0)
got = b""
while len(got) < len(d):
    b = os.read(fd, len(d) - len(got))
    assert b, "short read of the unlinked file"
    got += b
assert got == d, "the unlinked file's bytes differ"
os.close(fd)
PY
marked a.img && marked b.img || fail "not marked at the mount: $(cat /proc/locks)"
python3 unl.py m/u0 || fail "unlinked open file, before any reopen"

# each command, as t49 runs them; after each, the marks and the deferred free
step() {
	expect_rc 0 $B "$@"
	marked a.img || fail "a.img not marked after $*: $(cat /proc/locks)"
	marked b.img || fail "b.img not marked after $*: $(cat /proc/locks)"
	n=$((n + 1))
	python3 unl.py m/u$n || fail "unlinked open file after $*"
}
n=0
step device offline c.img
step device online c.img
step device set-state ro c.img
step device set-state rw c.img
step device set-label c.img fast
step device resize c.img 48M
step device evacuate c.img
step device remove c.img
fusermount3 -u m || fail "unmount"
# the daemon closes after the unmount returns: fsck waits for it (the mark)
expect_rc 0 $B fsck -n -f a.img:b.img
expect_in out ' 0 problems found'
