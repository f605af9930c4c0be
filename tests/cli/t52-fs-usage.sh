# fs usage and device stats (issue 35): every member with its state and
# whether it is online (an offline member stays listed); the space figures
# as man bcachefs defines them, summed from the per-device JSON; fs usage of
# a path inside a mount; statfs (df) against fs usage; the device error
# counters: a planted checksum error is counted, persists across a remount,
# --reset clears it, -c exits 64; the rebalance summary agrees with its exit.
# Deterministic: fixed file contents (seed 52).
need python3 jq
python3 -c 'import jsonschema' 2>/dev/null ||
	fail "no python3-jsonschema: make check installs it (scripts/install-deps.sh test)"
S=$ROOT/docs/json
echo "seed 52"

# schema FILE NAME: FILE validates against docs/json/NAME.schema.json
schema() {
	python3 -c 'import json, sys
from jsonschema import Draft202012Validator
errs = list(Draft202012Validator(json.load(open(sys.argv[2]))).iter_errors(json.load(open(sys.argv[1]))))
for e in errs[:5]:
    print("%s: %s" % (list(e.path), e.message))
sys.exit(1 if errs else 0)' "$1" "$S/$2.schema.json" >schema.err || fail "$1 against $2: $(cat schema.err)"
}

# sums FILE: the space figures of fs usage --json obey their definitions
cat > sums.py <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
types = ["free", "sb", "journal", "btree", "user", "cached"]
on = [m for m in d["devices"] if m["online"]]
def check(ok, what):
    if not ok:
        sys.exit("%s: %s" % (what, json.dumps(d)[:1500]))
for m in on:
    check(sum(m[t]["space"] for t in types) == m["size"], "device %d: per-type space != size" % m["index"])
    check(sum(m[t]["buckets"] for t in types) * m["bucket_size"] == m["size"], "device %d: buckets" % m["index"])
    check(m["free"]["space"] == m["free_buckets"] * m["bucket_size"], "device %d: free space" % m["index"])
    check(m["free"]["bytes"] == 0 and m["cached"]["bytes"] == 0, "device %d: free/cached live bytes" % m["index"])
    check(sum(m[t]["cached_bytes"] for t in types) == m["cached_data"], "device %d: cached_data" % m["index"])
    for t in types:
        check(m[t]["bytes"] + m[t]["cached_bytes"] <= m[t]["space"] or t == "sb", "device %d: %s over its space" % (m["index"], t))
check(sum(m["size"] for m in on) == d["size"], "size != sum of online members")
check(sum(m["free"]["space"] for m in on) == d["free"], "free != sum of free space")
check(d["used"] == d["size"] - d["free"], "used != size - free")
check(d["reserved"] == d["promised"], "reserved != promised")
take = d["free"] - d["reserve"] + d["reclaimable"] - d["promised"]
check(d["available"] == max(take, 0) // d["data_replicas"], "available != (free - reserve + reclaimable - promised) / replicas")
check(d["reserve"] <= d["free"] + d["reclaimable"], "reserve larger than free + reclaimable")
# every extent with data_replicas copies, all members online: the live user
# bytes of the devices are the file data on disk times the copies
if len(sys.argv) > 2 and sys.argv[2] == "all-copies":
    check(sum(m["user"]["bytes"] for m in on) == d["data_disk_bytes"] * d["data_replicas"],
          "user bytes != data_disk_bytes x data_replicas")
print("sums ok: size %d used %d free %d reserve %d reclaimable %d available %d"
      % (d["size"], d["used"], d["free"], d["reserve"], d["reclaimable"], d["available"]))
EOF

python3 -c 'import random
r = random.Random(52)
open("data.bin", "wb").write(r.randbytes(3 << 20))'

# ---- offline: both members, then one left out (-o degraded), then ro
truncate -s 64M a.img b.img
expect_rc 0 $B format -q --replicas 2 a.img b.img
expect_rc 0 $B image put a.img:b.img data.bin /data.bin
expect_rc 0 $B fs usage --json a.img:b.img
cp out both.json
schema both.json fs-usage
python3 sums.py both.json all-copies || fail "sums (both members)"
expect_rc 0 jq -e '(.devices | length) == 2 and all(.devices[]; .state == "rw" and .online
	and .errors.checksum == 0 and .errors.reset_time == null)' both.json
expect_rc 0 $B fs usage a.img:b.img
expect_in out '^Device 0: a.img rw, online$'
expect_in out '^Device 1: b.img rw, online$'
expect_in out '^Available: +[0-9]+$'
expect_in out '^Reserve: +[0-9]+$'
expect_in out '^  available = \(free - reserve \+ reclaimable - promised\) / 2 \(data_replicas\)$'
expect_in out '^  errors: 0 read, 0 write, 0 checksum$'

expect_rc 0 $B fs usage --json -o degraded a.img
cp out degraded.json
schema degraded.json fs-usage
python3 sums.py degraded.json || fail "sums (degraded)"
expect_rc 0 jq -e '(.devices | length) == 2 and .devices[1].online == false and .devices[1].path == null
	and .devices[1].state == "rw" and .devices[1].size > 0 and (.devices[1] | has("free") | not)' degraded.json
expect_rc 0 $B fs usage -o degraded a.img
expect_in out '^Device 1: \(not open\) rw, offline$'

expect_rc 0 $B device set-state --force ro a.img:b.img 1
expect_rc 0 $B fs usage --json a.img:b.img
cp out ro.json
expect_rc 0 jq -e '.devices[0].state == "rw" and .devices[1].state == "ro"' ro.json
python3 sums.py ro.json || fail "sums (a member ro)"
# an ro member's free space is all reserve: new data cannot go there
expect_rc 0 jq -e '.reserve >= .devices[1].free.space' ro.json
expect_rc 0 $B fs usage a.img:b.img
expect_in out '^Device 1: b.img ro, online$'
expect_rc 0 $B device set-state rw a.img:b.img 1

# ---- device stats offline: zeros, the shapes
expect_rc 0 $B device stats a.img:b.img
expect_in out '^\[a.img\]\.read_errors 0$'
expect_in out '^\[b.img\]\.checksum_errors 0$'
expect_rc 0 $B device stats -c a.img:b.img
expect_rc 0 $B device stats --json a.img:b.img
cp out stats.json
schema stats.json device-stats
expect_rc 16 $B device stats --bogus a.img
expect_in err '^bcachefs device stats: '
expect_rc 16 $B device stats
expect_rc 0 $B device stats --help
expect_in out '^Usage: bcachefs device stats'

# ---- on disk: the counters are superblock field 7 (dev_errors), one 32-byte
# entry per member, written by a read-write session of a version-2
# filesystem; a version-1 filesystem never gets it (the older tool opens it)
cat > sbfields.py <<'EOF'
import struct, sys
sb = open(sys.argv[1], "rb").read(8 * 512 + 65536)[8 * 512:]
version, u64s = struct.unpack_from("<H", sb, 24)[0], struct.unpack_from("<I", sb, 160)[0]
p, fields = 512, {}
while p < 512 + u64s * 8:
    n, t = struct.unpack_from("<II", sb, p)
    fields[t] = n
    p += n * 8
print("version %d dev_errors %s" % (version, (fields[7] * 8 - 8) // 32 if 7 in fields else "absent"))
EOF
expect_rc 0 python3 sbfields.py a.img
expect_in out '^version 3 dev_errors 2$'
need zstd
zstd -q -dc "$ROOT/tests/compat/v1/checksums.img.zst" > v1.img || fail "zstd"
expect_rc 0 $B kv v1.img put 3:3 v1
expect_rc 0 python3 sbfields.py v1.img
expect_in out '^version 1 dev_errors absent$'
expect_rc 0 $B device stats -c v1.img

# ---- the rebalance summary agrees with its exit status and names the problem
python3 -c 'import random
r = random.Random(520)
open("full-a.bin", "wb").write(r.randbytes(10 << 20))
open("full-b.bin", "wb").write(r.randbytes(10 << 20))'
expect_rc 0 $B format -q --fs-size=64M --label=ssd fs.img --fs-size=20M --label=hdd fh.img \
	--foreground-target=ssd --background-target=hdd
F=fs.img:fh.img
expect_rc 0 $B image put $F full-a.bin /a.bin
expect_rc 0 $B image put $F full-b.bin /b.bin
expect_rc 2 $B data rebalance --json $F
cp out rb2.json
schema rb2.json data-rebalance
echo "rebalance, target full: $(cat rb2.json)"
expect_rc 0 jq -e '.done == false and (.last_problem | length) > 0
	and .extents_no_space > 0
	and .extents_moved + .extents_raced + .extents_no_good_copy + .extents_no_space <= .extents_seen' rb2.json
# run again at once: nothing was freed, so the work is parked, and still named
expect_rc 2 $B data rebalance --json $F
expect_rc 0 jq -e '.done == false and (.last_problem | test("space"))' out
expect_rc 2 $B data rebalance $F
expect_in err '^bcachefs data rebalance: .*space'
expect_rc 0 $B image rm $F /a.bin
expect_rc 0 $B data rebalance --json $F
expect_rc 0 jq -e '.done == true and .last_problem == ""' out

# ---- pending is right before the scan reaches the files (the progress line's
# figure): an option change schedules a scan, and the data it will move is
# pending at once
expect_rc 0 $B format -q --fs-size=64M --label=ssd s1.img --fs-size=64M --label=hdd s2.img \
	--foreground-target=ssd
expect_rc 0 $B image put s1.img:s2.img data.bin /data.bin
expect_rc 0 $B set-fs-option --background_target=hdd s1.img:s2.img
expect_rc 0 $B fs usage --json s1.img:s2.img
cp out scan.json
expect_rc 0 jq -e '.rebalance_pending.scan == true and .rebalance_pending.target == 3145728' scan.json
expect_rc 0 $B data rebalance --json s1.img:s2.img
expect_rc 0 jq -e '.done == true and .moved == 3145728 and .pending.target == 0' out

# ---- kv on a mount is refused as list refuses it (below, once mounted)

# ---- a planted checksum error (plain data only: the pattern is found in the image)
plant=true
encrypted && { skip_part "planted checksum error: data is encrypted"; plant=false; }
if $plant; then
	mkdir src
	python3 -c 'open("src/pat", "wb").write(b"T52-PLANTED-PATTERN-0123456789ab" * 2048)'
	expect_rc 0 $B format -q --fs-size=64M --source=src c.img
	python3 - <<'EOF' || fail "planting the damage"
d = open("c.img", "rb").read()
i = d.find(b"T52-PLANTED-PATTERN-0123456789ab" * 8)
assert i > 0, "pattern not found"
with open("c.img", "r+b") as f:
    f.seek(i + 1000)
    f.write(b"!")
print("damaged byte at", i + 1000)
EOF
	expect_rc 0 $B device stats -c c.img
	# an offline read counts it, but a read-only open writes nothing
	expect_rc 1 $B image cat c.img /pat
	expect_rc 0 $B device stats -c c.img
fi

fuse_part "the mounted part (path inside a mount, statfs, offline member, counters across a remount)" || exit 0
mkdir mnt
mnt=$PWD/mnt
pid=
trap 'cd /; [ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
mount_fs() {
	$B fusemount -f "$1" mnt 2>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && return; sleep 0.1; done
	fail "fusemount $1: $(cat fuse.err)"
}
umount_fs() {
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	pid=
}

mount_fs a.img:b.img
mkdir -p mnt/sub/deeper || fail "mkdir"
cp data.bin mnt/sub/f || fail "cp"
sync
# any path inside the mount names it
expect_rc 0 $B fs usage --json mnt/sub/deeper
cp out sub.json
schema sub.json fs-usage
python3 sums.py sub.json || fail "sums (mounted)"
expect_rc 0 $B fs usage mnt/sub/f
expect_in out '^Filesystem: '
expect_rc 0 $B device stats mnt/sub
expect_in out 'checksum_errors 0$'
# kv refuses a mount whatever the verb, with list's message
expect_rc 1 $B list mnt
cp err list.err
expect_rc 1 $B kv mnt get 1:1
expect_in err '^bcachefs kv: .*mnt: mounted \(fusemount\): unmount it first$'
expect_rc 1 $B kv a.img get 1:1
expect_in err 'mounted \(fusemount\): unmount it first$'

# statfs against fs usage: df's Size, Used and Avail are size, used and
# available, to within a block; Used + Avail x replicas falls short of Size
# by reserve + promised - reclaimable (man bcachefs, fs usage)
cat > statfs.py <<'EOF'
import json, os, subprocess, sys
B, mnt = sys.argv[1], sys.argv[2]
for attempt in range(5):	# the daemon may move something between the two looks
    a = os.statvfs(mnt)
    d = json.loads(subprocess.run([B, "fs", "usage", "--json", mnt], capture_output=True, check=True).stdout)
    b = os.statvfs(mnt)
    if (a.f_blocks, a.f_bfree, a.f_bavail) == (b.f_blocks, b.f_bfree, b.f_bavail):
        break
bs = b.f_frsize
size, free, avail = b.f_blocks * bs, b.f_bfree * bs, b.f_bavail * bs
print("statfs: size %d free %d avail %d; fs usage: size %d free %d available %d reserve %d"
      % (size, free, avail, d["size"], d["free"], d["available"], d["reserve"]))
def near(x, y):
    return y - bs < x <= y
if not (near(size, d["size"]) and near(free, d["free"]) and near(avail, d["available"])):
    sys.exit("statfs and fs usage disagree")
used = size - free
n = d["data_replicas"]
short = size - used - avail * n
want = d["reserve"] + d["promised"] - d["reclaimable"]
if abs(short - want) > (n + 1) * bs:
    sys.exit("df Size - Used - Avail x %d = %d, want reserve + promised - reclaimable = %d" % (n, short, want))
EOF
python3 statfs.py "$B" mnt || fail "statfs vs fs usage"

# an offline member stays listed, offline, with its state
expect_rc 0 $B device offline mnt b.img
expect_rc 0 $B fs usage --json mnt
cp out off.json
schema off.json fs-usage
expect_rc 0 jq -e '(.devices | length) == 2 and .devices[1].online == false and .devices[1].state == "rw"
	and .devices[0].online == true' off.json
python3 sums.py off.json || fail "sums (a member offline)"
expect_rc 0 $B fs usage mnt
expect_in out '^Device 1: \(not open\) rw, offline$'
expect_rc 0 $B device stats mnt
expect_in out '^\[member 1 \(offline\)\]\.checksum_errors 0$'
expect_rc 0 $B device online mnt $PWD/b.img
expect_rc 0 $B fs usage --json mnt
expect_rc 0 jq -e 'all(.devices[]; .online)' out
umount_fs

# ---- the planted error, mounted: counted, persists across a remount, --reset clears
$plant || exit 0
mount_fs c.img
cat mnt/pat >/dev/null 2>&1 && fail "reading the damaged file succeeded"
expect_rc 64 $B device stats -c mnt
expect_in out 'checksum_errors [1-9]'
expect_rc 0 $B fs usage --json mnt
n1=$(jq '.devices[0].errors.checksum' out)
[ "$n1" -ge 1 ] || fail "fs usage: checksum errors $n1"
umount_fs
# persisted by the unmount's superblock write
expect_rc 64 $B device stats -c --json c.img
[ "$(jq '.devices[0].checksum_errors' out)" = "$n1" ] || fail "offline: $(cat out), want $n1"
mount_fs c.img
expect_rc 0 $B device stats --json mnt
[ "$(jq '.devices[0].checksum_errors' out)" = "$n1" ] || fail "after a remount: $(cat out), want $n1"
expect_rc 0 $B device stats --reset mnt
expect_in out "checksum_errors $n1\$"
expect_rc 0 $B device stats -c mnt
expect_in out 'checksum_errors 0$'
umount_fs
expect_rc 0 $B device stats -c --json c.img
expect_rc 0 jq -e '.devices[0].checksum_errors == 0 and .devices[0].reset_time != null' out
expect_rc 0 $B fs usage c.img
expect_in out '^  errors: 0 read, 0 write, 0 checksum \(since the last reset\)$'
