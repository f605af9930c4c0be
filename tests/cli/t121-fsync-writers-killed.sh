# Eight writers through the FUSE mount, each rewriting random 4 KiB blocks
# of its own file and fsyncing after every write (fdatasync every other),
# so the journal's writer has entries queued behind the one in flight
# while fsyncs wait for them.  The daemon is killed (SIGKILL) in the
# middle.  After mounting again, every block holds what its last fsynced
# write put there or what a later write did (one not yet synced): no
# fsynced change is lost, nothing appears that was never written.  Then
# the same once more from that state.  Round 2: 400 writes each while
# the filesystem is replaced under them (device add, then remove, each a
# close and reopen with entries in flight), then a clean unmount: every
# write is there, synced or not.  fsck -n clean.
# Found nothing on h-journal40 when written (review h-review40a); the
# journal's lost-entry bugs are t120's.
# Data: python's random.Random, seed 1211 + writer.
need_fuse
need python3
echo "seed: 1211"
mkdir m
trap 'cd /; [ -z "${pid:-}" ] || kill -9 $pid 2>/dev/null; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=256M img

cat > w.py <<'PY'
import os, random, sys
w, rnd_round = int(sys.argv[1]), int(sys.argv[2])
nops = int(sys.argv[3]) if len(sys.argv) > 3 else 100000
rnd = random.Random(1211 + w + 100 * rnd_round)
log = open(f"log{w}.{rnd_round}", "w")
try:
    fd = os.open(f"m/f{w}", os.O_WRONLY | os.O_CREAT, 0o644)
    os.fsync(fd)
    for j in range(nops):
        k = rnd.randrange(64)
        b = rnd.randbytes(4096)
        os.pwrite(fd, b, k * 4096)
        (os.fdatasync if j % 2 else os.fsync)(fd)
        log.write(f"{j}\n")
        log.flush()
except OSError:
    pass	# the daemon is gone
PY
cat > check.py <<'PY'
import os, random, sys
rounds = int(sys.argv[1])
bad = 0
for w in range(8):
    # what every round wrote, in order: (block, bytes, synced)
    ops = []
    for r in range(rounds):
        rnd = random.Random(1211 + w + 100 * r)
        synced = [int(l) for l in open(f"log{w}.{r}")]
        last = synced[-1] if synced else -1
        exact = r == rounds - 1 and len(sys.argv) > 2	# a clean unmount: every write is there
        for j in range(last + (1 if exact else 2)):	# after the last sync logged: one more written at most
            k = rnd.randrange(64)
            ops.append((k, rnd.randbytes(4096), j <= last, r))
    data = open(f"m/f{w}", "rb").read()
    for k in range(64):
        got = data[k * 4096:(k + 1) * 4096]
        mine = [i for i, o in enumerate(ops) if o[0] == k]
        synced = [i for i in mine if ops[i][2]]
        ok = []
        if not synced:
            ok.append(b"\0" * 4096)
            ok.append(b"")
        start = synced[-1] if synced else -1
        ok += [ops[i][1] for i in mine if i >= start]
        if len(sys.argv) > 2 and mine and ops[mine[-1]][3] == rounds - 1:
            ok = [ops[mine[-1]][1]]	# written after a clean mount, before a clean unmount
        if got not in ok and got.rstrip(b"\0") != b"" or (synced and got not in ok):
            print(f"f{w} block {k}: not its last synced write nor a later one "
                  f"({len(synced)} synced writes of {len(mine)})")
            bad += 1
    print(f"f{w}: {sum(len(open(f'log{w}.{r}').readlines()) for r in range(rounds))} synced writes")
sys.exit(1 if bad else 0)
PY

mount_f() {
	$B fusemount -f -o norebalance,nocopygc "$PWD/img" m 2>daemon.err & pid=$!
	for i in $(seq 300); do mountpoint -q m && break; sleep 0.1; done
	mountpoint -q m || fail "not mounted: $(cat daemon.err)"
}
for round in 0 1; do
	mount_f
	pids=
	for w in 0 1 2 3 4 5 6 7; do python3 w.py $w $round & pids="$pids $!"; done
	sleep 4
	kill -9 $pid
	wait $pid 2>/dev/null
	pid=
	fusermount3 -uz m
	for p in $pids; do wait $p; done
	echo "round $round: $(cat log*.$round | wc -l) synced writes"
	mount_f
	python3 check.py $((round + 1)) || fail "round $round: an fsynced write lost"
	fusermount3 -u m || fail "unmount"
	for i in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
	pid=
done
# round 2: the filesystem replaced under the writers (device add, then
# remove: each closes and reopens it, entries queued or not), then a clean
# unmount: every write is there, synced or not
truncate -s 256M d1.img
mount_f
pids=
for w in 0 1 2 3 4 5 6 7; do python3 w.py $w 2 400 2>w$w.err & pids="$pids $!"; done
sleep 1
expect_rc 0 $B device add m "$PWD/d1.img"
expect_rc 0 $B device remove m "$PWD/d1.img"
for p in $pids; do wait $p; done
cat w*.err
echo "round 2: $(cat log*.2 | wc -l) synced writes"
[ "$(cat log*.2 | wc -l)" = 3200 ] || fail "a writer stopped early: $(cat w*.err)"
fusermount3 -u m || fail "unmount"
for i in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
pid=
mount_f
python3 check.py 3 exact || fail "round 2: a write lost across device add and remove"
fusermount3 -u m || fail "unmount"
for i in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
pid=
expect_rc 0 $B fsck -n img
expect_in out ' 0 problems found'
