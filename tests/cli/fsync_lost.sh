# Shared by the CLI tests of an fsync after a replacement that lost a change
# (t99, t103, t104), sourced after lib.sh: a 64M image a.img, mountpoint m,
# the test hook's directory gate (BCACHEFS_TEST_GATE, fusemount.h), and a
# python side w.py whose first lines fl_setup writes; the test appends its
# own steps (cat >> w.py) and drives them with ready/go files.
#   fl_setup SEED   the image, the trap, w.py's preamble: rnd (seeded),
#                   wait_for(name), write(name) (100000 random bytes,
#                   O_TRUNC), fsync(what, fd) (a line "what ok|EIO|..." in
#                   results), out
#   fl_mount        fusemount -f with the gate, waits for the mount
#   fl_lose         the close of a remount ro fails (gate/io-fail while it
#                   runs): what was not durable is lost
#   wait_for FILE WHAT, want NAME RESULT WHY   (the shell side)
fl_setup() {
	need_fuse
	need_root "mount -o remount (mount(2) MS_REMOUNT)"
	need python3
	echo "seed: $1"
	mkdir m gate
	trap 'cd /; [ -z "${w:-}" ] || kill $w 2>/dev/null; [ -z "${pid:-}" ] || kill -9 $pid 2>/dev/null; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
	expect_rc 0 $B format -q --fs-size=64M a.img
	cat > w.py <<PY
import errno, os, random, sys, time
rnd = random.Random($1)

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
PY
}

# wait_for FILE WHAT: FILE there within 60 s (polled), else fail
wait_for() {
	for i in $(seq 600); do [ -e "$1" ] && return 0; sleep 0.1; done
	fail "$2: $1 not there in 60 s; daemon: $(cat daemon.err)"
}

# want NAME RESULT WHY: the fsync NAME gave RESULT
want() {
	got=$(sed -n "s/^$1 //p" results)
	[ "$got" = "$2" ] || fail "fsync $1: '$got', want $2 ($3); results: $(cat results)"
}

fl_mount() {
	ulimit -f 200000
	BCACHEFS_TEST_GATE="$PWD/gate" $B fusemount -f -o norebalance,nocopygc "$PWD/a.img" m 2>daemon.err & pid=$!
	for i in $(seq 300); do mountpoint -q m && break; sleep 0.1; done
	mountpoint -q m || fail "not mounted: $(cat daemon.err)"
}

# the close fails (nothing of the last entry reaches the disk); the read-only open finds what was durable
fl_lose() {
	: > gate/io-fail
	expect_rc 0 $B fusemount -o remount,ro a.img m
	grep -q "closing:" err || fail "the remount's close did not fail: $(cat err)"
	rm gate/io-fail
	mountpoint -q m || fail "mount gone"
}
