# The control channel to a fusemount daemon (issue 20; cmd/ctl.c): `data
# rebalance` and `set-fs-option` on a mountpoint (and on the devices a
# daemon holds) while a writer runs; a user without rights (nobody) is
# refused and nothing changes; a client killed with SIGKILL leaves its job
# running to the end (seen through fs usage and "busy"); SIGINT cancels it
# at a safe point and a rerun finishes it; a hostile client (malformed
# frames: huge lengths, bad types, truncated, too many arguments, ...) gets
# errors and the daemon goes on serving, also past 32 connections; unmount
# cancels a running job and removes the socket; a daemon killed mid-job is
# reported by its client; a read-only mount refuses set-fs-option; a
# filesystem mounted by nobody can be changed by nobody only while nobody
# owns its devices (private mount namespace).  The hdd image is slowed down
# (BCACHEFS_TEST_DEVICE_DELAY, blockdev.h) so a job runs long enough to be
# killed.
# Data: python's random.Random with fixed seeds 311 (a.bin), 312 (b.bin),
# 313 (c.bin), 314 + i (the writer's files), printed below.
need_fuse
need_root "allow_other, a second user"
need python3 setpriv getfattr unshare
echo "seeds: 311 (a.bin), 312 (b.bin), 313 (c.bin), 314+i (writer file i)"

gen() {
	python3 -c 'import random, sys
a = sys.argv[1:]
for i in range(0, len(a), 3):
	open(a[i], "wb").write(random.Random(int(a[i + 1])).randbytes(int(a[i + 2])))' "$@" ||
		fail "gen $*"
}
jget() {
	v=$(grep -o "\"$1\": [^,}]*" out | head -1 | sed 's/^[^:]*: //')
	[ -n "$v" ] || fail "jget $1: $(head -c 1000 out)"
	echo "$v"
}
pending() {
	expect_rc 0 $B fs usage --json mnt
	jget target
}
# as nobody: the test directory must be reachable
chmod 755 .
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

gen a.bin 311 $((16 << 20)) b.bin 312 $((16 << 20)) c.bin 313 $((4 << 20))
expect_rc 0 $B format -q --fs-size=256M --label=ssd ssd.img --fs-size=512M --label=hdd hdd.img \
	--foreground-target=ssd --background-target=hdd
mkdir mnt
mnt=$PWD/mnt
pid= wpid= cpid=
trap 'cd /; [ -n "$wpid" ] && kill $wpid 2>/dev/null; [ -n "$cpid" ] && kill -9 $cpid 2>/dev/null;
	[ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null; fusermount3 -uz "${mnt%/mnt}/rm" 2>/dev/null;
	fusermount3 -uz "${mnt%/mnt}/m2" 2>/dev/null' EXIT
# norebalance: only our commands move data; hdd requests take 20 ms each
BCACHEFS_TEST_DEVICE_DELAY="$PWD/hdd.img=20000" \
	$B fusemount -f -o norebalance,allow_other ssd.img:hdd.img mnt 2>fuse.err & pid=$!
for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"

# ---- the socket: named by the root's xattr, 0666 in /run/bcachefs
sock=$(getfattr -n bcachefs.ctl --only-values mnt) || fail "no bcachefs.ctl xattr"
echo "socket: $sock"
[ -S "$sock" ] || fail "$sock is not a socket"
case $sock in /run/bcachefs/fusemount-$pid.sock) ;; *) fail "socket at $sock" ;; esac

# ---- a writer runs the whole time: 64 KiB files w/N, checked at the end;
# they stay on ssd (their own background_target), so "pending" counts only ours
mkdir mnt/w
setfattr -n bcachefs.background_target -v ssd mnt/w || fail "setfattr on mnt/w"
python3 -c 'import random, sys, os, time
for i in range(400):
	if os.path.exists("stop"):
		break
	with open("mnt/w/%d" % i, "wb") as f:
		f.write(random.Random(314 + i).randbytes(65536))
	time.sleep(0.02)
' & wpid=$!

# ---- data rebalance through the mountpoint, then through the devices
cp a.bin mnt/a.bin || fail "write a.bin"
[ "$(pending)" -ge $((16 << 20)) ] || fail "nothing pending: $(cat out)"
expect_rc 0 $B data rebalance mnt
expect_in out '^Moved: +[1-9][0-9]* extents'
expect_in out '^Pending: +0 off target'
[ "$(pending)" = 0 ] || fail "still pending after data rebalance mnt: $(cat out)"
cp c.bin mnt/c.bin || fail "write c.bin"
expect_rc 0 $B data rebalance --json hdd.img ssd.img
expect_in out '"done": true'
[ "$(pending)" = 0 ] || fail "still pending after data rebalance DEVS: $(cat out)"

# ---- set-fs-option through the mountpoint: the live filesystem uses it
expect_rc 0 $B set-fs-option --compression=lz4 mnt
expect_in out '^compression: none -> lz4 \(applies to what is written from now on\)'
expect_rc 0 $B set-fs-option --compression=lz4 ssd.img:hdd.img
expect_in out '^compression: lz4 -> lz4 \(unchanged\)'
# a refusal through the daemon: its message, exit 1
expect_rc 1 $B set-fs-option --background-target=nvme mnt
expect_in err "^bcachefs set-fs-option: .*ssd.img:.*hdd.img: background_target: no label or device 'nvme' \(nothing written\)"
# usage errors stay in the front
expect_rc 16 $B set-fs-option --no-such=1 mnt
expect_rc 16 $B data rebalance --bogus mnt
# a directory that is not one of our mounts
mkdir plain
expect_rc 1 $B data rebalance plain
expect_in err '^bcachefs data rebalance: plain: not a bcachefs mount'

# ---- nobody: refused, nothing changes
expect_rc 1 nobody $B set-fs-option --data-checksum=none mnt
expect_in err '^bcachefs set-fs-option: .*/mnt: permission denied: changing the filesystem needs root'
expect_rc 1 nobody $B data rebalance mnt
expect_in err 'permission denied'
expect_rc 1 nobody $B set-fs-option --data-checksum=none ssd.img
expect_in err 'permission denied'

# probe: "busy" while a changing job runs, else the label refusal (nothing written)
probe() {
	$B set-fs-option --background-target=nvme ${pm:-mnt} >probe.out 2>probe.err
	grep -q '^bcachefs set-fs-option: .*: busy: data rebalance is running' probe.err && return 0
	grep -q "no label or device 'nvme'" probe.err || fail "probe: $(cat probe.err)"
	return 1
}
# wait_busy: until the job started by the client in the background runs
# (the probe's own set-fs-option may hold the daemon just when the client
# asks, which refuses the client: it is then started again)
wait_busy() {
	for i in $(seq 200); do
		probe && return
		if ! kill -0 $cpid 2>/dev/null && grep -q 'busy: set-fs-option is running' client.err; then
			wait $cpid 2>/dev/null
			$B data rebalance ${pm:-mnt} >client.out 2>client.err & cpid=$!
		fi
		sleep 0.05
	done
	fail "the job did not start: $(cat client.err)"
}

# ---- SIGKILL of the client: the job runs to its end
cp b.bin mnt/b.bin || fail "write b.bin"
before=$(pending)
[ "$before" -ge $((16 << 20)) ] || fail "b.bin not pending: $before"
$B data rebalance mnt >client.out 2>client.err & cpid=$!
wait_busy
kill -9 $cpid
wait $cpid 2>/dev/null
cpid=
probe || fail "the job stopped with its client"
for i in $(seq 300); do [ "$(pending)" = 0 ] && break; sleep 0.1; done
[ "$(pending)" = 0 ] || fail "the job of the killed client did not finish: $(cat out)"
# the job ends with a last walk of the pending work and its summary
for i in $(seq 100); do probe || break; sleep 0.05; done
probe && fail "still busy after the job finished"
echo "SIGKILL: $before bytes moved by the job after its client was killed"

# ---- SIGINT: the job stops at a safe point; a rerun finishes it
rm mnt/a.bin
cp a.bin mnt/a2.bin || fail "write a2.bin"
$B data rebalance mnt >client.out 2>client.err & cpid=$!
wait_busy
kill -INT $cpid
wait $cpid; rc=$?
cpid=
[ "$rc" = 1 ] || fail "interrupted client exited $rc: $(cat client.err)"
expect_in client.err 'interrupted: asking the daemon to stop'
expect_in client.err '^bcachefs data rebalance: .*: interrupted; the work left stays recorded'
left=$(pending)
[ "$left" -gt 0 ] || fail "SIGINT: nothing left, the job was not stopped"
probe && fail "busy after the cancelled job"
expect_rc 0 $B data rebalance mnt
[ "$(pending)" = 0 ] || fail "the rerun left work: $(cat out)"
echo "SIGINT: $left bytes left by the cancelled job, moved by the rerun"

# ---- a hostile client: errors, and the daemon goes on
cat > hostile.py <<'EOF'
import os, random, socket, struct, sys
path = sys.argv[1]
def frame(t, payload):
	return struct.pack("<II", t, len(payload)) + payload
def request(args, version=1, flags=0, argc=None):
	p = b"".join(a + b"\0" for a in args)
	return frame(1, struct.pack("<III", version, flags, len(args) if argc is None else argc) + p)
def talk(name, data, close_write=True):
	s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	s.settimeout(20)
	s.connect(path)
	s.sendall(data)
	if close_write:
		s.shutdown(socket.SHUT_WR)
	buf = b""
	while True:
		try:
			d = s.recv(65536)
		except ConnectionResetError:
			print("%s: connection reset" % name)
			break
		if not d:
			break
		buf += d
	s.close()
	msgs, code = [], None
	while len(buf) >= 8:
		t, n = struct.unpack("<II", buf[:8])
		body, buf = buf[8:8 + n], buf[8 + n:]
		if t == 5:
			code = struct.unpack("<I", body)[0]
		else:
			msgs.append(body.decode(errors="replace").strip())
	print("%s: exit %s: %s" % (name, code, " | ".join(msgs)))
# a connection that says nothing: the others are served meanwhile
idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
idle.connect(path)
talk("huge", struct.pack("<II", 1, 0xffffffff))
talk("badtype", frame(77, b""))
talk("cancel-first", frame(2, b""))
talk("truncated", struct.pack("<II", 1, 100) + b"0123456789")
talk("short", frame(1, b"\1\0\0\0"))
talk("version", request([b"data rebalance"], version=9))
talk("flags", request([b"data rebalance"], flags=0x80))
talk("noargs", request([], argc=0))
talk("manyargs", request([b"data rebalance"] + [b"--json"] * 300))
talk("argc", request([b"data rebalance", b"--json"], argc=3))
talk("nonul", frame(1, struct.pack("<III", 1, 0, 1) + b"data rebalance"))
talk("trailing", frame(1, struct.pack("<III", 1, 0, 1) + b"data rebalance\0xx"))
talk("longarg", request([b"data rebalance", b"x" * 5000]))
talk("unknown", request([b"rm -rf /\x1b[2J"]))
talk("badopt", request([b"set-fs-option", b"--block-size=8k"]))
talk("devs-in-body", request([b"set-fs-option", b"/etc/passwd"]))
talk("garbage", bytes(random.Random(315).randbytes(3000)))
idle.close()
# more connections than the daemon takes at once: the extra ones are told so
import time, select
# replies(CONNS, WANT): what each connection got, once WANT of them got a
# reply (however long a loaded daemon takes: up to 60 s) and then 1 s more
# without the count changing, for any reply beyond WANT
def replies(conns, want):
	got, end, quiet = {}, time.time() + 60, None
	while time.time() < end:
		left = [c for c in conns if c not in got]
		r = select.select(left, [], [], 0.1)[0] if left else time.sleep(0.1) or []
		for c in r:
			got[c] = c.recv(65536)
		if r:
			quiet = None
		if len([d for d in got.values() if d]) >= want:
			quiet = quiet or time.time() + 1
			if time.time() >= quiet:
				break
	return got
many = []
for i in range(40):
	c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	c.connect(path)
	many.append(c)
refused, msg = 0, ""
for d in replies(many, 8).values():
	if d:
		refused += 1
		msg = d[8:].decode(errors="replace").strip()
for c in many:
	c.close()
print("maxconns: %d refused: %s" % (refused, msg))
EOF
python3 hostile.py "$sock" > hostile.out 2>&1 || fail "hostile.py: $(cat hostile.out)"
cat hostile.out
for c in huge badtype cancel-first truncated short version flags noargs manyargs argc nonul \
	 trailing longarg unknown; do
	expect_in hostile.out "^$c: exit 16: bcachefs [a-z -]+: $mnt: "
done
expect_in hostile.out '^huge: .*a message of 4294967295 bytes'
expect_in hostile.out '^badtype: .*message type 77'
expect_in hostile.out '^truncated: .*truncated'
expect_in hostile.out '^version: .*protocol version 9'
expect_in hostile.out '^manyargs: .*301 arguments'
expect_in hostile.out '^unknown: .*rm -rf /\?\[2J. is not a command'
expect_in hostile.out '^badopt: exit 1: bcachefs set-fs-option: block_size cannot be changed'
expect_in hostile.out "^devs-in-body: exit 16: bcachefs set-fs-option: unexpected argument '/etc/passwd'"
expect_in hostile.out '^garbage: exit 16: '
expect_in hostile.out '^maxconns: ([89]|10) refused: bcachefs ctl: .*: busy: 32 connections already'
# another user holds at most 4 connections: it cannot shut root out (a
# python nobody can run: root's own may live under /root)
npy=
for p in /usr/bin/python3 /usr/local/bin/python3; do nobody $p -c '' 2>/dev/null && { npy=$p; break; }; done
[ -n "$npy" ] || fail "no python3 that nobody can run"
nobody $npy -c 'import socket, sys, time, select
many = []
for i in range(10):
	c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	c.connect(sys.argv[1])
	many.append(c)
# the 6 refusals, however long a loaded daemon takes (up to 60 s), then 1 s for any more
got, end, quiet = {}, time.time() + 60, None
while time.time() < end:
	left = [c for c in many if c not in got]
	r = select.select(left, [], [], 0.1)[0] if left else time.sleep(0.1) or []
	for c in r:
		got[c] = c.recv(65536)
	if r:
		quiet = None
	if len(got) >= 6:
		quiet = quiet or time.time() + 1
		if time.time() >= quiet:
			break
refused = sum(b"busy: 4 connections already" in d for d in got.values())
print("nobody: %d of 10 refused" % refused, flush=True)
while not __import__("os").path.exists("release"):
	time.sleep(0.05)
for c in many:
	c.close()' "$sock" > nobody.out 2>&1 & npid=$!
for i in $(seq 700); do grep -q refused nobody.out && break; sleep 0.1; done
expect_rc 0 $B set-fs-option --compression=lz4 mnt
touch release
wait $npid || fail "nobody's connections: $(cat nobody.out)"
expect_in nobody.out '^nobody: 6 of 10 refused'
kill -0 $pid || fail "the daemon died: $(cat fuse.err)"
# and it still serves
expect_rc 0 $B set-fs-option --compression=lz4 mnt
expect_in out 'unchanged'

# ---- the writer's files, and everything else, as written
touch stop
wait $wpid || fail "the writer failed"
wpid=
n=$(ls mnt/w | wc -l)
[ "$n" -ge 10 ] || fail "the writer wrote only $n files"
python3 -c 'import random, os, sys
for name in os.listdir("mnt/w"):
	if open("mnt/w/" + name, "rb").read() != random.Random(314 + int(name)).randbytes(65536):
		sys.exit("mnt/w/%s differs" % name)' || fail "writer files differ"
echo "writer: $n files checked"

# ---- unmount while a job runs: it is cancelled, the client told, the socket removed
cp b.bin mnt/b2.bin || fail "write b2.bin"
$B data rebalance mnt >client.out 2>client.err & cpid=$!
wait_busy
fusermount3 -u mnt || fail "unmount"
wait $cpid; rc=$?
cpid=
[ "$rc" = 1 ] || fail "client of a job cut by unmount exited $rc: $(cat client.err)"
expect_in client.err 'interrupted; the work left stays recorded'
wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
pid=
[ -e "$sock" ] && fail "the socket $sock is left after unmount"
grep -q "$mnt" /proc/mounts && fail "still mounted"

# ---- offline: the options persisted, nobody's changes did not; fsck clean
expect_rc 0 $B show-super ssd.img
expect_in out '^ *compression: *lz4'
expect_in out '^ *data_checksum: *crc32c'
expect_rc 0 $B fsck -n ssd.img hdd.img
expect_rc 0 $B data rebalance ssd.img:hdd.img
for f in b.bin:b.bin a2.bin:a.bin c.bin:c.bin b2.bin:b.bin; do
	expect_rc 0 $B image cat ssd.img:hdd.img /${f%%:*}
	cmp -s out ${f#*:} || fail "/${f%%:*} differs"
done

# ---- the daemon killed while a job runs: the client says so (exit 1)
expect_rc 0 $B format -q --fs-size=64M --label=ssd s2.img --fs-size=64M --label=hdd h2.img \
	--foreground-target=ssd --background-target=hdd
mkdir m2
BCACHEFS_TEST_DEVICE_DELAY="$PWD/h2.img=20000" \
	$B fusemount -f -o norebalance s2.img:h2.img m2 2>m2fuse.err & pid=$!
for i in $(seq 100); do mountpoint -q m2 && break; sleep 0.1; done
mountpoint -q m2 || fail "fusemount m2: $(cat m2fuse.err)"
cp b.bin m2/b.bin || fail "write m2/b.bin"
$B data rebalance m2 >client.out 2>client.err & cpid=$!
pm=m2 wait_busy
kill -9 $pid
wait $pid 2>/dev/null
pid=
wait $cpid; rc=$?
cpid=
[ "$rc" = 1 ] || fail "client of a killed daemon exited $rc: $(cat client.err)"
expect_in client.err '^bcachefs data rebalance: .*m2: the daemon went away before the command finished'
fusermount3 -u m2 || fail "unmount of the dead mount m2"

# ---- a read-only mount: set-fs-option refused, nothing written
expect_rc 0 $B format -q --fs-size=64M r.img
mkdir rm
$B fusemount -f -o ro r.img rm 2>rfuse.err & pid=$!
for i in $(seq 100); do mountpoint -q rm && break; sleep 0.1; done
mountpoint -q rm || fail "fusemount -o ro: $(cat rfuse.err)"
expect_rc 1 $B set-fs-option --compression=lz4 rm
expect_in err '^bcachefs set-fs-option: .*r.img: open read-only \(mounted with -o ro\?\): nothing written'
fusermount3 -u rm || fail "unmount rm"
wait $pid || fail "fusemount -o ro exited $?: $(cat rfuse.err)"
pid=
expect_rc 0 $B show-super r.img
expect_in out '^ *compression: *none'

# ---- mounted by a user (nobody): that user may change it while owning every
# member device (socket in /tmp/bcachefs-65534, 0700); without allow_other
# the mount is private to it, which root is told.
# /dev/fuse is 0600 here: a private mount namespace binds an open node over it.
# (a container may refuse new mount namespaces: that part is then a counted skip)
if unshare -m true 2>/dev/null; then
	expect_rc 0 $B format -q --fs-size=64M u.img
	mkdir um
	chown nobody u.img um
	cat > ns.sh <<'EOF'
B=$1
N="setpriv --reuid=65534 --regid=65534 --clear-groups env -u XDG_RUNTIME_DIR"
mknod fusedev c 10 229 && chmod 666 fusedev && mount --bind fusedev /dev/fuse || exit 1
$N $B fusemount -f u.img um 2>ufuse.err & upid=$!
for i in $(seq 100); do $N mountpoint -q um && break; sleep 0.1; done
$N mountpoint -q um || { echo "not mounted: $(cat ufuse.err)"; exit 1; }
$N getfattr -n bcachefs.ctl --only-values um > u.sock; echo >> u.sock
$N $B set-fs-option --compression=lz4 um > u1.out 2>&1; echo "owner: $?" >> u.rc
$B set-fs-option --compression=zstd um > u2.out 2>&1; echo "root: $?" >> u.rc
chown root u.img
$N $B set-fs-option --compression=none um > u3.out 2>&1; echo "not-owner: $?" >> u.rc
chown nobody u.img
$N fusermount3 -u um
wait $upid; echo "daemon: $?" >> u.rc
EOF
	unshare -m --propagation private sh ns.sh "$B" > ns.out 2>&1 || fail "ns.sh: $(cat ns.out)"
	cat u.rc u.sock
	expect_in u.sock '^/tmp/bcachefs-65534/fusemount-[0-9]+\.sock$'
	expect_in u.rc '^owner: 0$'
	expect_in u1.out '^compression: none -> lz4'
	expect_in u.rc '^root: 1$'
	expect_in u2.out '^bcachefs set-fs-option: um: a bcachefs mount private to the user who mounted it \(no -o allow_other\): run the command as that user'
	expect_in u.rc '^not-owner: 1$'
	expect_in u3.out 'permission denied: .*/u.img is not owned by uid 65534'
	expect_in u.rc '^daemon: 0$'
	[ -e "$(cat u.sock)" ] && fail "nobody's socket left after unmount"
	expect_rc 0 $B show-super u.img
	expect_in out '^ *compression: *lz4'
	rmdir /tmp/bcachefs-65534 2>/dev/null
else
	skip_part "the user-mounted steps: unshare -m refused here (no mount namespaces)"
fi
trap - EXIT
