# Device commands on a mounted filesystem, end to end (issue 20, first item
# of its Tests): three image files (replicas=2) fusemounted; a WRITER
# (creates, appends, overwrites, renames, deletes, fsyncs; it keeps the
# expected content on the host) and a READER (reads and checks the files the
# writer finished) run the whole time while, through the mountpoint, a
# fourth image is added, one member removed, a third shrunk so data must
# move, data rereplicated, set-state/set-label/offline/online/scrub given;
# then every file is compared, the filesystem unmounted and fsck -fn run on
# the members it has now (show-super says which).  The same commands are
# also given the member devices the daemon holds.  A client of a slowed
# `device evacuate` (BCACHEFS_TEST_DEVICE_DELAY) killed with SIGKILL leaves
# the job running to its end; SIGINT stops it and a rerun completes it.
# nobody is refused `device add` and nothing changes.  Then shrinks that
# would leave a member without its reserve or go below the minimum (refused
# before anything moves), and a daemon in the background with relative
# member paths.
# Data: python's random.Random, seeds 3600+i (bulk file i), 3650 (the
# writer's choices and contents), 3660 (e.bin), 3661 (after-add), printed below.
# SOAK=1: more bulk data and a longer writer.
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or fusermount3"
[ "$(id -u)" = 0 ] || skip "needs root (allow_other, a second user)"
command -v getfattr >/dev/null || skip "no getfattr"
command -v python3 >/dev/null || skip "no python3"
command -v setpriv >/dev/null || skip "no setpriv"
echo "seeds: 3600+i (bulk/i), 3650 (writer), 3660 (e.bin), 3661 (after-add)"
soak=${SOAK:-0}
nbulk=12
[ "$soak" = 1 ] && nbulk=24
chmod 755 .
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# jdev FILE IDX FIELD: a member's field from fs usage --json output in FILE
jdev() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for m in d["devices"]:
	if m["index"] == int(sys.argv[2]):
		f = m
		for k in sys.argv[3].split("."):
			f = f[k]
		print(f)
		sys.exit(0)
print("absent")' "$@" || fail "jdev $*: $(head -c 1000 "$1")"
}
# idx IMG: a member image's index (show-super; of a mounted member it
# shows every member's superblock, each after its "Device:" line)
idx() {
	expect_rc 0 $B show-super "$1"
	v=$(awk -v n="$1" '/^Device: / { d = ($2 == n || $2 ~ "/" n "$") }
		d && /^Device index:/ { print $3; exit }' out)
	[ -n "$v" ] || fail "no index for $1: $(head -c 1000 out)"
	echo "$v"
}

cat > writer.py <<'EOF'
# The writer: ops on mnt/w with random.Random(3650); every op is fsynced,
# then the host manifest (name -> sha256 of the finished files, which are
# never written again, only renamed or deleted) is replaced atomically.  On
# "stop" it writes expect.json: every file in mnt/w with its sha256.
import hashlib, json, os, random, sys, time
r = random.Random(3650)
W = "mnt/w"
files = {}		# name -> bytes, every file the writer has
done = set()		# finished (immutable) names
n = 0
ops = {}
def put(path, data):
	with open(path + ".tmp", "w") as f:
		json.dump(data, f)
	os.replace(path + ".tmp", path)
def manifest():
	put("manifest.json", {k: hashlib.sha256(files[k]).hexdigest() for k in done})
def fsync_dir():
	fd = os.open(W, os.O_RDONLY)
	os.fsync(fd)
	os.close(fd)
def op(name):
	ops[name] = ops.get(name, 0) + 1
limit = int(sys.argv[1])
t0 = time.time()
while not os.path.exists("stop") and time.time() - t0 < limit:
	open_ = [k for k in files if k not in done]
	c = r.random()
	if c < 0.3 or not files:
		name = "t%d" % n
		n += 1
		data = r.randbytes(r.randrange(1, 200000))
		with open(W + "/" + name, "wb") as f:
			f.write(data)
			os.fsync(f.fileno())
		files[name] = data
		fsync_dir()
		op("create")
	elif c < 0.45 and open_:
		name = r.choice(open_)
		data = r.randbytes(r.randrange(1, 70000))
		with open(W + "/" + name, "ab") as f:
			f.write(data)
			os.fsync(f.fileno())
		files[name] += data
		op("append")
	elif c < 0.6 and open_:
		name = r.choice(open_)
		old = files[name]
		off = r.randrange(0, len(old) + 1)
		data = r.randbytes(r.randrange(1, 50000))
		with open(W + "/" + name, "r+b") as f:
			f.seek(off)
			f.write(data)
			os.fsync(f.fileno())
		files[name] = old[:off] + data + old[off + len(data):]
		op("overwrite")
	elif c < 0.75 and open_:
		# finished: renamed to f*, never written again
		name = r.choice(open_)
		new = "f" + name[1:]
		os.rename(W + "/" + name, W + "/" + new)
		fsync_dir()
		files[new] = files.pop(name)
		done.add(new)
		op("finish")
	elif c < 0.85 and done:
		name = r.choice(sorted(done))
		new = "g%d" % n
		n += 1
		done.discard(name)
		manifest()		# the reader stops looking for it first
		os.rename(W + "/" + name, W + "/" + new)
		fsync_dir()
		files[new] = files.pop(name)
		done.add(new)
		op("rename")
	elif len(files) > 30:
		name = r.choice(sorted(files))
		done.discard(name)
		manifest()
		os.unlink(W + "/" + name)
		fsync_dir()
		del files[name]
		op("delete")
	else:
		continue
	manifest()
	time.sleep(0.005)
put("expect.json", {k: hashlib.sha256(v).hexdigest() for k, v in files.items()})
print("writer: %d files, %d bytes, ops %s" % (len(files), sum(map(len, files.values())),
	" ".join("%s=%d" % kv for kv in sorted(ops.items()))))
EOF
cat > reader.py <<'EOF'
# The reader: reads the finished files named in the manifest and checks
# them; a file gone (renamed, deleted since) is skipped when the newest
# manifest no longer names it.  Exit 1 at the first difference.
import hashlib, json, os, sys, time
checked = 0
while not os.path.exists("stop"):
	try:
		m = json.load(open("manifest.json"))
	except (OSError, ValueError):
		time.sleep(0.05)
		continue
	for name, h in sorted(m.items()):
		try:
			with open("mnt/w/" + name, "rb") as f:
				got = hashlib.sha256(f.read()).hexdigest()
		except FileNotFoundError:
			if name in json.load(open("manifest.json")):
				sys.exit("reader: mnt/w/%s is missing" % name)
			continue
		if got != h:
			sys.exit("reader: mnt/w/%s differs" % name)
		checked += 1
	time.sleep(0.1)
print("reader: %d reads checked" % checked)
EOF

# ---- three members, replicas=2, mounted; bulk data so every member holds some
expect_rc 0 $B format -q --replicas=2 --fs-size=128M a.img --fs-size=128M b.img --fs-size=128M c.img
truncate -s 128M d.img
mkdir mnt
mnt=$PWD/mnt
pid= wpid= rpid= cpid= epid=
trap 'cd /; touch "${mnt%/mnt}/stop"; for p in $wpid $rpid $cpid; do kill -9 $p 2>/dev/null; done;
	[ -n "$pid" ] && kill $pid 2>/dev/null; [ -n "$epid" ] && kill $epid 2>/dev/null;
	fusermount3 -uz "$mnt" 2>/dev/null; fusermount3 -uz "${mnt%/mnt}/m2" 2>/dev/null' EXIT
mount_main() {
	$B fusemount -f -o allow_other "$@" mnt 2>>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount $*: $(cat fuse.err)"
}
mount_main a.img:b.img:c.img
mkdir mnt/bulk mnt/w
python3 -c 'import random, sys
for i in range(int(sys.argv[1])):
	open("mnt/bulk/%d" % i, "wb").write(random.Random(3600 + i).randbytes(3 << 20))' $nbulk ||
	fail "bulk files"
secs=900
[ "$soak" = 1 ] && secs=3600
python3 writer.py $secs > writer.out 2>&1 & wpid=$!
python3 reader.py > reader.out 2>&1 & rpid=$!
ia=$(idx a.img) ib=$(idx b.img) ic=$(idx c.img)
alive() {
	kill -0 $wpid 2>/dev/null || fail "the writer stopped: $(cat writer.out)"
	kill -0 $rpid 2>/dev/null || fail "the reader stopped: $(cat reader.out)"
}
sleep 1
alive

# ---- device add through the mountpoint: a 4th member, used at once
expect_rc 0 $B device add --label=new mnt d.img
expect_in out "^Added .*/d.img as member [0-9]+ "
echo "add: $(head -1 out)"
id=$(sed -n 's/^Added .* as member \([0-9]*\) .*/\1/p' out)
expect_rc 0 $B show-super a.img
expect_in out '^Devices: +4$'
# a file written right after (the allocator fills members in index order,
# so d.img gets data only from the removal below)
python3 -c 'import random; open("mnt/after-add", "wb").write(random.Random(3661).randbytes(4 << 20))' ||
	fail "write mnt/after-add"
expect_rc 0 $B fs usage --json mnt
[ "$(jdev out $id path)" != absent ] || fail "d.img not in fs usage: $(cat out)"
alive

# ---- device remove of b: everything moved off, superblocks wiped
expect_rc 0 $B fs usage --json mnt
bdata=$(jdev out $ib user.bytes)
[ "$bdata" -gt 0 ] || fail "b.img holds no data before its removal"
expect_rc 0 $B device remove mnt b.img
expect_in out '^Moved [1-9].*extents'
expect_in out "^Removed member $ib"
echo "remove: $(head -1 out)"
echo "removed b.img: $bdata bytes of user data moved"
expect_rc 0 $B fs usage --json mnt
[ "$(jdev out $ib path)" = absent ] || fail "b.img still a member: $(cat out)"
expect_rc 1 $B show-super b.img
expect_in err 'no bcachefs superblock'
alive

# ---- device resize (shrink) of c below where its data lies: data moves
# the first half of the bulk files go: they lie in c's lowest buckets, so
# what is left lies higher up
keep=$((nbulk / 2))
for i in $(seq 0 $((keep - 1))); do rm mnt/bulk/$i || fail "rm mnt/bulk/$i"; done
expect_rc 0 $B fs usage --json mnt
cdata=$(jdev out $ic user.bytes)
cbk=$(jdev out $ic user.buckets)
# to the buckets it uses plus 16 (superblock, journal) and 40 free: what
# lies past that end moves
csize=$(( (cbk + 16 + 40) * 256 ))
echo "c.img holds $cdata bytes of user data in $cbk buckets; shrunk to ${csize}k"
expect_rc 0 $B device resize mnt c.img ${csize}k
expect_in out '^Moved [1-9]'
expect_in out "^Member $ic now has "
echo "shrink: $(head -1 out)"
expect_rc 0 $B fs usage --json mnt
[ "$(jdev out $ic size)" -le $((csize << 10)) ] || fail "c.img still $(jdev out $ic size) bytes"
alive

# ---- data rereplicate: every key has its two copies
expect_rc 0 $B data rereplicate mnt
expect_in out '^Copied '
alive

# ---- set-state, set-label
expect_rc 0 $B device set-state ro mnt c.img
expect_in out "^Member $ic is ro"
expect_rc 0 $B show-super a.img
expect_in out 'State: +ro'
expect_rc 0 $B device set-state rw mnt c.img
expect_in out "^Member $ic is rw"
expect_rc 0 $B device set-label mnt d.img fast
expect_in out "^Member $id has label fast"
alive

# ---- offline / online of a member: the writer and reader go on meanwhile
expect_rc 0 $B device offline mnt c.img
expect_in out 'is offline \(the filesystem runs degraded\)'
sleep 2
alive
expect_rc 0 $B device online mnt c.img
expect_in out 'c.img is online'
# what was written while c was away gets its copies back
expect_rc 0 $B data rereplicate mnt
alive

# ---- data scrub: every copy read and checked, nothing bad
expect_rc 0 $B data scrub mnt
echo "scrub: $(head -1 out)"
expect_in out '^  bad copies +0$'
expect_in out '^  unrepairable +0 '
alive

# ---- the same, given the member devices the daemon holds
devs=a.img:c.img:d.img
expect_rc 0 $B device set-label $devs d.img fast2
expect_in out "^Member $id has label fast2"
expect_rc 0 $B device set-state ro a.img c.img d.img d.img
expect_in out "^Member $id is ro"
expect_rc 0 $B device set-state rw $devs $id
expect_rc 0 $B device set-state rw $devs d.img
expect_in out "^Member $id is rw"
expect_rc 0 $B device resize $devs c.img $((csize + 1024))k
expect_in out "^Member $ic now has "
expect_rc 0 $B data rereplicate $devs
expect_rc 0 $B data scrub $devs
expect_in out '^  bad copies +0$'
expect_rc 0 $B device offline $devs c.img
expect_rc 0 $B device online $devs c.img
expect_rc 0 $B data rereplicate $devs
alive

# ---- nobody: device add refused, nothing changes
python3 -c 'import random; open("e.bin", "wb").write(random.Random(3660).randbytes(1 << 20))'
truncate -s 128M e.img
dd if=e.bin of=e.img conv=notrunc status=none
before=$(sha e.img)
expect_rc 1 nobody $B device add mnt "$PWD/e.img"
expect_in err '^bcachefs device add: .*permission denied'
expect_rc 1 nobody $B device add $devs "$PWD/e.img"
expect_in err 'permission denied'
[ "$(sha e.img)" = "$before" ] || fail "e.img written by nobody's device add"
expect_rc 0 $B show-super a.img
expect_in out '^Devices: +4$'

# ---- device add and remove given the member devices (SOAK=1: 5 rounds)
rounds=1
[ "$soak" = 1 ] && rounds=5
for r in $(seq $rounds); do
	expect_rc 0 $B device add -f $devs e.img
	expect_in out "^Added .*/e.img as member [0-9]+ "
	expect_rc 0 $B fs usage --json mnt
	[ "$(jdev out $id user.bytes)" -gt 0 ] || fail "d.img took no data: $(cat out)"
	head -c $((4 << 20)) /dev/zero > mnt/w.zero.$r || fail "write mnt/w.zero.$r"
	expect_rc 0 $B device remove $devs e.img
	expect_in out '^Removed member [0-9]+'
	rm mnt/w.zero.$r
	alive
done
echo "device add/remove through $devs: $rounds rounds"

# ---- stop the writer and reader; every file compared
touch stop
wait $wpid || fail "the writer failed: $(cat writer.out)"
wpid=
wait $rpid || fail "the reader failed: $(cat reader.out)"
rpid=
cat writer.out reader.out
expect_in reader.out '^reader: [1-9][0-9]* reads checked'
check_all() {	# ROOT: bulk/ and w/ under it as expected
	python3 -c 'import hashlib, json, os, random, sys
root = sys.argv[1]
e = json.load(open("expect.json"))
got = sorted(os.listdir(root + "/w"))
if got != sorted(e):
	sys.exit("w/: files %s, expected %s" % (got, sorted(e)))
for k, h in e.items():
	if hashlib.sha256(open(root + "/w/" + k, "rb").read()).hexdigest() != h:
		sys.exit("w/%s differs" % k)
for i in range(int(sys.argv[2]), int(sys.argv[3])):
	if open(root + "/bulk/%d" % i, "rb").read() != random.Random(3600 + i).randbytes(3 << 20):
		sys.exit("bulk/%d differs" % i)
print("%d writer files and bulk/%s..%s as expected" % (len(e), sys.argv[2], sys.argv[3]))' "$@"
}
check_all mnt $keep $nbulk || fail "after the device commands"

# ---- unmount; fsck -fn on the members show-super names
fusermount3 -u mnt || fail "unmount"
wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
pid=
grep -q "$mnt" /proc/mounts && fail "still mounted"
expect_rc 0 $B show-super a.img
expect_not_in out "^  Device $ib:"
expect_in out "^  Device $id:"
members=
for m in a.img b.img c.img d.img; do
	$B show-super $m >out 2>err || continue
	members="$members $m"
done
[ "$members" = " a.img c.img d.img" ] || fail "members now:$members"
# (a member offline while files changed: its alloc keys are recounted at
# the next open, as a degraded close does not call them current)
expect_rc 0 $B fsck -fn $members
expect_in out ': 0 problems found'
# and the content, offline once more
mount_main $(echo $members | tr ' ' :)
check_all mnt $keep $nbulk || fail "after a remount"
python3 -c 'import random, sys
sys.exit(open("mnt/after-add", "rb").read() != random.Random(3661).randbytes(4 << 20))' ||
	fail "mnt/after-add differs"
fusermount3 -u mnt || fail "unmount"
wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
pid=

# ---- a slowed evacuate: SIGKILL of the client, then SIGINT and a rerun
expect_rc 0 $B format -q --replicas=2 --fs-size=64M e1.img --fs-size=64M e2.img --fs-size=64M e3.img
mkdir m2
BCACHEFS_TEST_DEVICE_DELAY="$PWD/e1.img=3000" \
	$B fusemount -f -o allow_other e1.img:e2.img:e3.img m2 2>m2fuse.err & epid=$!
for i in $(seq 100); do mountpoint -q m2 && break; sleep 0.1; done
mountpoint -q m2 || fail "fusemount m2: $(cat m2fuse.err)"
i1=$(idx e1.img)
python3 -c 'import random
for i in range(4):
	open("m2/%d" % i, "wb").write(random.Random(3600 + i).randbytes(3 << 20))' || fail "m2 files"
e1data() {
	expect_rc 0 $B fs usage --json m2
	jdev out $i1 user.bytes
}
# probe: "busy" while a changing job runs, else done
probe() {
	$B device set-label m2 e2.img x >probe.out 2>probe.err && return 1
	grep -q 'busy: device evacuate is running' probe.err && return 0
	fail "probe: $(cat probe.err)"
}
# start_evac: device evacuate m2 e1.img in the background ($cpid), running;
# started again when it met a probe's own (brief) busy mark
start_evac() {
	for i in $(seq 200); do
		if [ -z "$cpid" ]; then
			$B device evacuate m2 e1.img >client.out 2>client.err & cpid=$!
		fi
		probe && return
		if ! kill -0 $cpid 2>/dev/null; then
			wait $cpid
			grep -q 'busy: device set-label is running' client.err ||
				fail "the evacuate ended before it was seen: $(cat client.err)"
			cpid=
		fi
		sleep 0.05
	done
	fail "the evacuate did not start: $(cat client.err)"
}
before=$(e1data)
[ "$before" -gt 0 ] || fail "e1.img holds nothing"
start_evac
kill -9 $cpid
wait $cpid 2>/dev/null
cpid=
probe || fail "the evacuate stopped with its client (SIGKILL)"
for i in $(seq 600); do probe || break; sleep 0.1; done
probe && fail "the evacuate of the killed client still runs after 60 s"
[ "$(e1data)" = 0 ] || fail "e1.img still holds data after the killed client's evacuate: $(cat out)"
expect_rc 0 $B show-super e1.img
awk '/^  Device '$i1':/ { d = 1 } d && /State:/ { print; exit }' out > state
expect_in state 'State: +ro'
echo "SIGKILL: $before bytes moved off e1.img after the client was killed"

# SIGINT: rw again, new data on e1, an evacuate stopped, then rerun
expect_rc 0 $B device set-state rw m2 e1.img
python3 -c 'import random
for i in range(4, 8):
	open("m2/%d" % i, "wb").write(random.Random(3600 + i).randbytes(3 << 20))' || fail "m2 files"
before=$(e1data)
[ "$before" -gt 0 ] || fail "e1.img holds nothing after set-state rw"
start_evac
kill -INT $cpid
wait $cpid; rc=$?
cpid=
[ "$rc" = 1 ] || fail "interrupted evacuate exited $rc: $(cat client.err)"
expect_in client.err 'interrupted'
left=$(e1data)
[ "$left" -gt 0 ] || fail "SIGINT: nothing left on e1.img, the job was not stopped"
probe && fail "busy after the interrupted evacuate"
expect_rc 0 $B device evacuate m2 e1.img
[ "$(e1data)" = 0 ] || fail "the rerun left data on e1.img: $(cat out)"
echo "SIGINT: $left of $before bytes left by the interrupted evacuate, moved by the rerun"
python3 -c 'import random, sys
for i in range(8):
	if open("m2/%d" % i, "rb").read() != random.Random(3600 + i).randbytes(3 << 20):
		sys.exit("m2/%d differs" % i)' || fail "m2 files differ"
fusermount3 -u m2 || fail "unmount m2"
wait $epid || fail "fusemount m2 exited $?: $(cat m2fuse.err)"
epid=
expect_rc 0 $B fsck -fn e1.img e2.img e3.img

# ---- a shrink that leaves a member no empty bucket; a shrink refused
rm -f e1.img e2.img e3.img
expect_rc 0 $B format -q --replicas=2 --fs-size=64M e1.img --fs-size=64M e2.img --fs-size=64M e3.img
$B fusemount -f -o allow_other e1.img:e2.img:e3.img m2 2>m2fuse.err & epid=$!
for i in $(seq 100); do mountpoint -q m2 && break; sleep 0.1; done
mountpoint -q m2 || fail "fusemount m2: $(cat m2fuse.err)"
python3 -c 'import random
for i in range(8):
	open("m2/%d" % i, "wb").write(random.Random(3600 + i).randbytes(3 << 20))' || fail "m2 files"
j1=$(idx e1.img)
# a shrink that would leave the member without its reserve of empty
# buckets is refused (else every later update could fail with ENOSPC)
run $B device resize m2 e1.img 26M
if [ "$rc" = 0 ]; then
	touch m2/after-shrink 2>touch.err || fail "after device resize m2 e1.img 26M: $(cat touch.err)"
else
	expect_in err '^bcachefs device resize: '
fi
# below the minimum: refused before anything moves
expect_rc 1 $B device resize m2 e3.img 1M
expect_in err '^bcachefs device resize: member [0-9]+ '
expect_in err 'cannot be smaller than [0-9.]+M \(its superblocks, journal and 64 buckets\)'
expect_not_in out '^Moved'
python3 -c 'import random, sys
for i in range(8):
	if open("m2/%d" % i, "rb").read() != random.Random(3600 + i).randbytes(3 << 20):
		sys.exit("m2/%d differs" % i)' || fail "m2 files differ after the shrinks"
fusermount3 -u m2 || fail "unmount m2"
wait $epid || fail "fusemount m2 exited $?: $(cat m2fuse.err)"
epid=
expect_rc 0 $B fsck -fn e1.img e2.img e3.img

# bgumount: unmount m2 and wait for its background daemon (named by its socket) to end
bgumount() {
	sock=$(getfattr -n bcachefs.ctl --only-values m2) || fail "no bcachefs.ctl on m2"
	dpid=${sock##*/fusemount-}
	dpid=${dpid%.sock}
	fusermount3 -u m2 || fail "unmount m2"
	for i in $(seq 100); do kill -0 "$dpid" 2>/dev/null || return 0; sleep 0.1; done
	fail "the daemon $dpid did not end after unmount"
}
# ---- a daemon in the background (no -f), members named relative
# (the daemon makes them absolute: its cwd is /)
$B fusemount -o allow_other e1.img:e2.img:e3.img m2 2>m2fuse.err || fail "fusemount m2: $(cat m2fuse.err)"
for m in e2.img "$PWD/e2.img"; do
	expect_rc 0 $B device set-label m2 $m bg
done
bgumount	# the daemon gone
$B fusemount -o allow_other "$PWD/e1.img:$PWD/e2.img:$PWD/e3.img" m2 2>m2fuse.err || fail "fusemount m2: $(cat m2fuse.err)"
expect_rc 0 $B device set-label m2 e2.img bg2
bgumount	# the daemon gone
expect_rc 0 $B show-super e2.img
expect_in out 'Label: +bg2$'
trap - EXIT
