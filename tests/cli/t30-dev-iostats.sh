# Per-device I/O counters and the simulated slow device (test hooks used by
# bench/): `fs usage` shows each device's reads and writes since open (an
# offline run: its own reads, no writes); `fusemount -o iostats` prints the
# totals at unmount; BCACHEFS_TEST_DEVICE_DELAY slows the device it names and
# only that one, and a malformed value refuses every open, writing nothing.
need jq
expect_rc 0 $B format -q --fs-size=128M --label ssd.a a.img --label hdd.b b.img \
	--foreground-target ssd
expect_rc 0 $B image put a.img:b.img /etc/services /f

# ---- offline fs usage: reads counted, nothing written
ha=$(sha a.img) hb=$(sha b.img)
expect_rc 0 $B fs usage --json a.img:b.img
cp out usage.json
expect_rc 0 jq -e '(.devices | length) == 2 and all(.devices[]; .reads > 0 and .read_bytes >= 4096
	and .writes == 0 and .write_bytes == 0)' out
reads_b=$(jq '.devices[1].reads' usage.json)
expect_rc 0 $B fs usage a.img:b.img
expect_in out '^  I/O since open: [0-9]+ reads \([0-9]+\), 0 writes \(0\)$'

# ---- the delay: named device only, by any name of the same file
delay=20000
t0=$(date +%s%N)
BCACHEFS_TEST_DEVICE_DELAY=$PWD/./b.img=$delay expect_rc 0 $B fs usage --json a.img:b.img
t1=$(date +%s%N)
want_ms=$((reads_b * delay / 1000))
got_ms=$(( (t1 - t0) / 1000000 ))
[ "$got_ms" -ge "$want_ms" ] || fail "b.img delayed ${delay}us x $reads_b reads: took ${got_ms}ms < ${want_ms}ms"
echo "delayed fs usage: ${got_ms}ms for $reads_b reads of b.img at ${delay}us (>= ${want_ms}ms)"
# a.img alone, not named: no delay at all (far under one delay per read)
t0=$(date +%s%N)
BCACHEFS_TEST_DEVICE_DELAY=$PWD/b.img=2000000 expect_rc 0 $B format -q --fs-size=64M c.img
t1=$(date +%s%N)
[ $(( (t1 - t0) / 1000000 )) -lt 2000 ] || fail "an undelayed device was delayed"

# ---- malformed: refused, named in the message, nothing written
for bad in junk "b.img=" "b.img=5ms" "b.img=20000000"; do
	BCACHEFS_TEST_DEVICE_DELAY=$bad expect_rc 1 $B image put a.img:b.img /etc/hostname /g
	expect_in err 'BCACHEFS_TEST_DEVICE_DELAY is not PATH=USEC'
done
[ "$(sha a.img)" = "$ha" ] && [ "$(sha b.img)" = "$hb" ] || fail "an image changed"

# ---- fusemount: live counters through fs usage MOUNTPOINT, totals at unmount
fuse_part "the fusemount part (live counters, totals at unmount)" || exit 0
mkdir mnt
mnt=$PWD/mnt
$B fusemount -f -o iostats a.img:b.img mnt 2>daemon.err &
pid=$!
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null; kill $pid 2>/dev/null' EXIT
for i in $(seq 100); do grep -q " $mnt fuse.bcachefs" /proc/mounts && break; sleep 0.1; done
grep -q " $mnt fuse.bcachefs" /proc/mounts || fail "not mounted: $(cat daemon.err)"
dd if=/dev/urandom of=mnt/big bs=1M count=4 conv=fsync status=none || fail "dd"
expect_rc 0 $B fs usage --json mnt
live_a=$(jq '.devices[0].write_bytes' out)
expect_rc 0 jq -e '.devices[0].write_bytes >= 4194304 and .devices[0].writes > 0' out
fusermount3 -u mnt || fail "unmount"
wait $pid || fail "daemon exited $?: $(cat daemon.err)"
trap - EXIT
cat daemon.err
[ "$(grep -c '^bcachefs fusemount: iostats ' daemon.err)" = 2 ] || fail "want 2 iostats lines"
expect_in daemon.err "^bcachefs fusemount: iostats (.*/)?a.img reads=[0-9]+ read_bytes=[0-9]+ writes=[0-9]+ write_bytes=[0-9]+$"
end_a=$(sed -n 's/^bcachefs fusemount: iostats .*a.img .*write_bytes=\([0-9]*\)$/\1/p' daemon.err)
[ "$end_a" -ge "$live_a" ] || fail "totals at unmount ($end_a) below the live figure ($live_a)"
expect_rc 0 $B fsck -n a.img:b.img
