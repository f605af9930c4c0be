# The daemon's work per request (issue 32), counted in the system calls
# strace sees the daemon make while a client works through the mount:
#   - 600 small files written one after the other do not wake the background
#     thread once per write (it naps after each look, deaf to writes'
#     kicks): fewer futex calls than half the writes (main before: about
#     2,700, several per write; quiet, about 20; under make check's two
#     lanes libfuse's own thread handoffs reach 120 and more);
#   - a file appended to in 10 KiB writes (tar's records: every other one
#     starts in the block the last one ended in) reads that block once per
#     such write, at its plan: the end checks the extent keys there, not
#     the bytes again (50 preads for 100 writes; before: 100);
#   - the kernel asks for security.capability once per file, not before
#     every write (FUSE_HANDLE_KILLPRIV_V2, taken at INIT; main before: one
#     GETXATTR per write to a file once fallocated, as fio's are), counted
#     by `fs timestats`;
#   - 1 MiB writes start their device writeback at once (sync_file_range,
#     at least one per write; before: none).
# The files hold what was written (sha256, again after a remount), fsck -f
# is clean.  Data: python's random.Random, seed 83.
need_fuse
need strace
need python3
echo "seed: 83"
mkdir m
dpid= spid=
trap 'cd /; [ -n "$spid" ] && kill "$spid" 2>/dev/null; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT

cat > work.py <<'PY'
import hashlib, os, random, sys
mode, mnt = sys.argv[1], sys.argv[2]
rnd = random.Random(83)
h = hashlib.sha256()
if mode == "small":
    os.mkdir(f"{mnt}/small")
    for i in range(600):
        d = rnd.randbytes(rnd.randrange(100, 4000))
        fd = os.open(f"{mnt}/small/{i}", os.O_WRONLY | os.O_CREAT, 0o644)
        assert os.write(fd, d) == len(d)
        os.close(fd)
        h.update(d)
elif mode == "append":
    fd = os.open(f"{mnt}/append", os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(100):
        d = rnd.randbytes(10240)
        assert os.write(fd, d) == len(d)
        h.update(d)
    os.close(fd)
elif mode == "big":
    fd = os.open(f"{mnt}/big", os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(8):
        d = rnd.randbytes(1 << 20)
        assert os.write(fd, d) == len(d)
        h.update(d)
    os.close(fd)
elif mode == "falloc":
    fd = os.open(f"{mnt}/falloc", os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, 1 << 20)
    for i in range(100):
        assert os.pwrite(fd, rnd.randbytes(4096), 4096 * (i * 7 % 256)) == 4096
    os.close(fd)
    h.update(open(f"{mnt}/falloc", "rb").read())
elif mode == "check":
    for m2 in ("small", "append", "big", "falloc"):
        h = hashlib.sha256()
        if m2 == "small":
            for i in range(600):
                h.update(open(f"{mnt}/small/{i}", "rb").read())
        else:
            h.update(open(f"{mnt}/{m2}", "rb").read())
        assert h.hexdigest() == open(f"{m2}.sha").read(), f"{m2}: content differs"
    sys.exit(0)
open(f"{mode}.sha", "w").write(h.hexdigest())
PY

expect_rc 0 $B format -q --fs-size=256M a.img
$B fusemount -f "$PWD/a.img" m 2> daemon.err & dpid=$!
for i in $(seq 100); do mountpoint -q m && break; sleep 0.1; done
mountpoint -q m || fail "fusemount: $(cat daemon.err)"

# count(MODE SYSCALL): run work.py MODE under strace -c of the daemon; the calls of SYSCALL
traced() {
	rm -f sc sc.err
	strace -f -c -p $dpid -o sc 2> sc.err & spid=$!
	for i in $(seq 100); do grep -q attached sc.err 2>/dev/null && break; sleep 0.05; done
	grep -q attached sc.err || fail "strace did not attach: $(cat sc.err)"
	python3 work.py $1 m || fail "work.py $1"
	kill -INT $spid; wait $spid; spid=
	cp sc sc.$1
}
calls() { awk -v s="$2" '$NF == s { print ($4 ~ /^[0-9]+$/) ? $4 : $3; f = 1 } END { if (!f) print 0 }' sc.$1; }

traced small
futex=$(calls small futex)
echo "600 small files: $futex futex calls"
[ "$futex" -lt 300 ] || fail "600 small files made $futex futex calls (a wakeup per write?): $(cat sc.small)"

traced append
pread=$(calls append pread64)
echo "100 appends of 10 KiB: $pread preads"
[ "$pread" -ge 40 ] || fail "100 appends read only $pread times: no partial block read? $(cat sc.append)"
[ "$pread" -le 75 ] || fail "100 appends made $pread preads (the partial block read twice?)"

traced big
sfr=$(calls big sync_file_range)
echo "8 writes of 1 MiB: $sfr sync_file_range calls"
[ "$sfr" -ge 8 ] || fail "8 writes of 1 MiB started writeback $sfr times"

expect_rc 0 $B fs timestats --reset m
python3 work.py falloc m || fail "work.py falloc"
expect_rc 0 $B fs timestats m
getxattr=$(awk '$1 == "getxattr" { print $2; f = 1 } END { if (!f) print 0 }' out)
echo "100 writes of 4 KiB after fallocate: $getxattr GETXATTR requests"
[ "$getxattr" -le 5 ] ||
	fail "100 writes: $getxattr GETXATTR requests (security.capability asked before each: no KILLPRIV_V2?)"

python3 work.py check m || fail "content"
fusermount3 -u m || fail "unmount"
wait $dpid || fail "the daemon exited with an error: $(cat daemon.err)"
expect_rc 0 $B fsck -n -f a.img
expect_in out ' 0 problems found'
expect_rc 0 $B fusemount "$PWD/a.img" m
python3 work.py check m || fail "content after a remount"
fusermount3 -u m || fail "unmount"
