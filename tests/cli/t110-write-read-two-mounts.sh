# Writes through one mountpoint while the same file is read through
# another: each write's reply first tells the other sessions to drop the
# written pages (notify_inval_inode), and the kernel holds a read's pages
# locked until that read is replied to.  A daemon thread that sends such a
# notice while it still owes a reply to a read of the same file waits for
# itself (fm_notify_sessions(): "Called after the reply, without lock").
# Session 29 tried handing small writes' ends and replies to the holder of
# the engine lock; this test deadlocked it 4 times of 4, and keeps any
# such scheme honest.
# Two mountpoints of one daemon (m1, m2), one file: four writers of 4 KiB
# blocks through m1 (opened write-only), two readers
# of 64 KiB through m2 (page cache), for 20 s; every process must finish,
# and the daemon must still answer.  Then the file against the writers'
# model (each block the last of its one writer: writer w writes only the
# blocks b with b % 4 == w), fsck clean.
# Data: python's random.Random, seed 110.
need_fuse
need python3
need timeout
echo "seed: 110"
mkdir m1 m2
daemon= conns=
# a deadlocked daemon has a thread in D state (a page lock): only aborting
# its two connections (fusectl) frees it and the processes waiting on it
cleanup() {
	cd /
	if [ -n "$daemon" ] && [ -n "$conns" ]; then
		fusectl=
		[ -d /sys/fs/fuse/connections/${conns%% *} ] ||
			{ mount -t fusectl none /sys/fs/fuse/connections && fusectl=1; }
		for n in $conns; do echo 1 > /sys/fs/fuse/connections/$n/abort; done
		[ -n "$fusectl" ] && { sleep 1; umount /sys/fs/fuse/connections; }
	fi
	for d in m1 m2; do fusermount3 -uz "$OLDPWD/$d" 2>/dev/null; done
	[ -n "$daemon" ] && kill -9 $daemon 2>/dev/null
}
trap cleanup EXIT

cat > rw.py <<'PY'
import os, random, sys, time
mode, w = sys.argv[1], int(sys.argv[2])
rnd = random.Random(110 * 10 + w)
NB = 256
end = time.time() + float(sys.argv[3])
if mode == "write":
    fd = os.open("m1/x", os.O_WRONLY)
    last = {}
    n = 0
    while time.time() < end:
        b = rnd.randrange(0, NB // 4) * 4 + w
        n += 1
        v = bytes([(n * 4 + w) % 251 + 1]) * 4096
        assert os.pwrite(fd, v, b * 4096) == 4096
        last[b] = v[0]
    os.close(fd)
    with open(f"model{w}", "w") as f:
        for b, v in sorted(last.items()):
            f.write(f"{b} {v}\n")
else:
    fd = os.open("m2/x", os.O_RDONLY)
    while time.time() < end:
        off = rnd.randrange(0, NB // 16) * 65536
        assert len(os.pread(fd, 65536, off)) == 65536
    os.close(fd)
PY

expect_rc 0 $B format -q --fs-size=256M img
expect_rc 0 $B fusemount "$PWD/img" m1
expect_rc 0 $B fusemount "$PWD/img" m2
daemon=$(pgrep -f "fusemount $PWD/img m1" | head -1)
[ -n "$daemon" ] || fail "no daemon pid"
conns="$(mountpoint -d m1 | cut -d: -f2) $(mountpoint -d m2 | cut -d: -f2)"
python3 -c 'import os; fd = os.open("m1/x", os.O_WRONLY | os.O_CREAT, 0o644); os.pwrite(fd, bytes(256 * 4096), 0)' ||
	fail "create x"

pids=
for w in 0 1 2 3; do python3 rw.py write $w 20 & pids="$pids $!"; done
for r in 0 1; do python3 rw.py read $r 20 & pids="$pids $!"; done
# every process ends within 60 s of the start (each runs 20 s)
for i in $(seq 600); do
	alive=
	for p in $pids; do kill -0 $p 2>/dev/null && alive="$alive $p"; done
	[ -z "$alive" ] && break
	sleep 0.1
done
if [ -n "$alive" ]; then
	for p in $alive; do echo "stuck: $(cat /proc/$p/cmdline | tr '\0' ' ') wchan=$(cat /proc/$p/wchan)"; done
	for t in /proc/$daemon/task/*; do
		case $(cat $t/wchan) in fuse_dev_do_read|futex_do_wait|poll_schedule_timeout*) continue ;; esac
		echo "daemon thread $(basename $t): $(head -c 300 $t/stack 2>/dev/null | tr '\n' ' ')"
	done
	kill -9 $alive 2>/dev/null
	fail "writers/readers not done 60 s after the start (each runs 20 s): a deadlock (a write's notice waiting for the pages of a read its thread has not replied to)"
fi
for p in $pids; do wait $p || fail "a writer or reader failed"; done
expect_rc 0 timeout 10 $B fs timestats --json m1
python3 - <<'PY' || fail "contents differ from the writers' model"
d = open("m2/x", "rb").read()
want = bytearray(256 * 4096)
for w in range(4):
    for line in open(f"model{w}"):
        b, v = map(int, line.split())
        want[b * 4096:(b + 1) * 4096] = bytes([v]) * 4096
for b in range(256):
    assert d[b * 4096:(b + 1) * 4096] == want[b * 4096:(b + 1) * 4096], f"block {b}"
PY
fusermount3 -u m2 || fail "unmount m2"
fusermount3 -u m1 || fail "unmount m1"
for i in $(seq 50); do kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
daemon=
expect_rc 0 $B fsck -n -f img
expect_in out ' 0 problems found'
