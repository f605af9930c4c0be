# fsync lets the engine lock go while the journal entry is written and
# flushed (issue 32; journal.h bch_journal_flush_step(), fusemount_ops.c
# op_fsync()).  The image's flushes are made slow (BCACHEFS_TEST_FLUSH_DELAY,
# 3 s each): a writer writes a file and fsyncs it; once its fsync's flush
# is under way (polled, bounded), another process makes 20 files and stats
# them, and must be done while the fsync
# has not returned yet (its marker file not there).  The state waited
# for: a thread of the daemon asleep in the flush delay
# (/proc/PID/task/*/syscall).  Without the mechanism the fsync holds the
# lock through both flushes and the creates come after.
# Then durability: two more fsyncs at once, each of its own file, both
# return; kill -9 the daemon; every fsync'd file reads back from the image
# and fsck -n is clean.  Data: python's random.Random, seed 88.
need_fuse
need python3
echo "seed: 88"
mkdir m
trap 'cd /; [ -z "${pid:-}" ] || kill -9 $pid 2>/dev/null; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=64M a.img
cat > w.py <<'PY'
import os, random, sys
name, seed, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = random.Random(seed).randbytes(300000)
open(name + ".want", "wb").write(d)
fd = os.open("m/" + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert os.write(fd, d) == len(d)
os.fsync(fd)
open(marker, "w").close()
os.close(fd)
PY
ulimit -f 200000
BCACHEFS_TEST_FLUSH_DELAY="$PWD/a.img=3000000" $B fusemount -f "$PWD/a.img" m 2>daemon.err & pid=$!
for i in $(seq 300); do mountpoint -q m && break; sleep 0.1; done
mountpoint -q m || fail "not mounted: $(cat daemon.err)"
expect_rc 0 $B fs timestats --reset m

# a thread of the daemon asleep in a flush (nanosleep, clock_nanosleep):
# the fsync's preflush has begun (the image is flushed by nothing else here)
in_flush() {
	for t in /proc/$pid/task/*/syscall; do
		case $(cat "$t" 2>/dev/null) in "35 "*|"230 "*) return 0 ;; esac
	done
	return 1
}
# the mount's own flushes over first (polled, bounded)
for i in $(seq 300); do in_flush || break; sleep 0.1; done
in_flush && fail "a flush still under way 30 s after the mount"
python3 w.py f1 881 f1.done & w=$!
# wait for the state: the fsync's flush under way (polled, bounded)
for i in $(seq 600); do
	in_flush && break
	[ -e f1.done ] && fail "the fsync returned before its flush was seen"
	sleep 0.1
done
in_flush || fail "no flush under way in 60 s"
mountpoint -q m || fail "mount gone"
for i in $(seq 20); do
	: > m/c$i || fail "create c$i"
	stat m/c$i >/dev/null || fail "stat c$i"
done
[ -e f1.done ] && fail "20 creates waited for the fsync's flushes (engine lock held through them)"
wait $w || fail "writer f1"
[ -e f1.done ] || fail "no marker"

# two fsyncs at once, then a kill: what they made durable is there
python3 w.py f2 882 f2.done & w2=$!
python3 w.py f3 883 f3.done & w3=$!
wait $w2 || fail "writer f2"
wait $w3 || fail "writer f3"
kill -9 $pid
wait $pid 2>/dev/null
pid=
fusermount3 -uz m
for f in f1 f2 f3; do
	$B image cat a.img /$f > $f.got 2>err || fail "image cat /$f: $(cat err)"
	cmp $f.want $f.got || fail "$f differs after the kill"
done
expect_rc 0 $B fsck -n a.img
expect_in out ' 0 problems found'
