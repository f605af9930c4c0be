# per-file erasure_code (issue 34): four images with --replicas=2 and no
# filesystem-wide erasure coding.  `image setattr --erasure-code=1` on a
# directory (feature bit inode_ec set with it), inherited by what is made in
# it later (a subdirectory and its file), =0 on one file in it, nothing on a
# directory beside it; data rebalance --wait stripes exactly the files whose
# effective value is on (every extent of theirs one striped pointer, the
# others two copies); fs usage --json: erasure-coded data = those files'
# encoded bytes, parity = p blocks of each stripe, data + reclaimable = the
# stripes' data blocks, the members sum to the totals; the files read back
# and fsck is clean; a striped file deleted moves its bytes from data to
# reclaimable.  Bad values are usage errors (exit 16), =- removes the
# option.  Through a fusemount: setattr on a path in the mount, a file copied
# in, data rebalance --wait MNT, fs usage MNT (the daemon's answer) counts
# it.
need python3
for i in 0 1 2 3; do truncate -s 48M e$i.img; done
E=e0.img:e1.img:e2.img:e3.img
expect_rc 0 $B format -q --replicas=2 e0.img e1.img e2.img e3.img
python3 -c 'import random, sys
r = random.Random(74)
for n, size in (("a", 1536 * 1024 + 5), ("b", 700 * 1024), ("c", 900 * 1024), ("off", 600 * 1024), ("m", 1200 * 1024)):
	open(n, "wb").write(bytes(r.getrandbits(8) for _ in range(size)))'

expect_rc 0 $B image mkdir $E /ec
expect_rc 0 $B image mkdir $E /plain
expect_rc 0 $B show-super e0.img
expect_not_in out '^Features:.*inode_ec'
expect_rc 16 $B image setattr $E --erasure-code=2 /ec
expect_in err 'erasure.code'
expect_rc 0 $B image setattr $E --erasure-code=1 /ec
expect_rc 0 $B show-super e0.img
expect_in out '^Features:.*[ ,]inode_ec'
expect_rc 0 $B image mkdir $E /ec/sub
expect_rc 0 $B image put $E a /ec/a
expect_rc 0 $B image put $E b /ec/sub/b
expect_rc 0 $B image put $E off /ec/off
expect_rc 0 $B image setattr $E --erasure-code=0 /ec/off
expect_rc 0 $B image put $E c /plain/c
for f in /ec/sub /ec/sub/b /ec/a; do
	expect_rc 0 $B image getfattr $E -n bcachefs.erasure_code $f
	expect_in out 'bcachefs.erasure_code="yes"'
done
expect_rc 0 $B image getfattr $E -d /ec/off
expect_in out 'bcachefs.erasure_code="no"'
expect_in out 'bcachefs_effective.erasure_code="no"'
expect_rc 0 $B image getfattr $E -d /plain/c
expect_not_in out 'bcachefs.erasure_code='
expect_rc 0 $B image getfattr $E -n bcachefs_effective.erasure_code /plain/c
expect_in out 'bcachefs_effective.erasure_code="no"'
echo "per-file option: set, inherited, off on one file, feature bit inode_ec" >&2

# pending: the two files with it on (stripe), nothing striped yet
expect_rc 0 $B fs usage --json $E
python3 -c 'import json, sys; d = json.load(open("out")); p = d["rebalance_pending"]["stripe"]; e = d["erasure_coded"]
sys.exit(0 if p == (1536 * 1024 + 4096 + 700 * 1024) and e["stripes"] == 0 and e["data"] == 0 else 1)' ||
	fail "before: $(python3 -c 'import json; d = json.load(open("out")); print(d["rebalance_pending"], d["erasure_coded"])')"
expect_rc 0 $B data rebalance --wait --json $E
python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["done"] and d["pending"]["stripe"] == 0 else 1)' ||
	fail "rebalance: $(cat out)"

inum() { $B image stat $E "$1" | sed -n 's/^ *Inode: *\([0-9]*\).*/\1/p'; }
expect_rc 0 $B list -b extents $E
cp out extents
for f in /ec/a /ec/sub/b; do
	n=$(inum $f)
	[ "$(grep -c "^$n:" extents)" -gt 0 ] || fail "$f ($n) has no extents"
	grep "^$n:" extents | grep -v ' stripe [0-9]*/[0-9]*$' | grep -q . && fail "$f ($n) not all striped:
$(grep "^$n:" extents | head -5)"
	grep "^$n:" extents | grep -q ' ptr .* ptr ' && fail "$f ($n) keeps a second pointer"
done
for f in /ec/off /plain/c; do
	n=$(inum $f)
	[ "$(grep -c "^$n:" extents)" -gt 0 ] || fail "$f ($n) has no extents"
	grep "^$n:" extents | grep -q ' stripe ' && fail "$f ($n) striped: $(grep "^$n:" extents | head -3)"
	grep "^$n:" extents | grep -v ' ptr .* ptr ' | grep -q . && fail "$f ($n) lost its second copy"
done
echo "data rebalance striped /ec/a and /ec/sub/b only" >&2

# fs usage adds up against the stripes and the striped extents
expect_rc 0 $B list -b stripes $E
cp out stripes
expect_rc 0 $B fs usage --json $E
cp out usage.json
python3 - <<'EOF' || fail "fs usage does not add up"
import json, re, sys
u = json.load(open("usage.json"))
e = u["erasure_coded"]
stripes = [l for l in open("stripes") if " stripe " in l]
k_space = p_space = 0
for l in stripes:
	m = re.search(r" stripe (\d+)\+(\d+) block (\d+) ", l)
	k, p, bs = int(m.group(1)), int(m.group(2)), int(m.group(3)) * 512
	k_space += k * bs
	p_space += p * bs
want_data = (1536 * 1024 + 4096) + 700 * 1024	# the two files, whole blocks
print("stripes %d: data %d (want %d), parity %d (want %d), reclaimable %d, data blocks %d" %
      (e["stripes"], e["data"], want_data, e["parity"], p_space, e["reclaimable"], k_space), file=sys.stderr)
ok = e["stripes"] == len(stripes) and e["stripes_empty"] == 0 and e["data"] == want_data and \
	e["parity"] == p_space and e["data"] + e["reclaimable"] == k_space
for key in ("data", "parity", "reclaimable"):
	ok &= sum(d["erasure_coded"][key] for d in u["devices"]) == e[key]
ok &= u["rebalance_pending"]["stripe"] == 0
sys.exit(0 if ok else 1)
EOF
expect_rc 0 $B fs usage $E
expect_in out '^Erasure coded: +[0-9]+ stripes \(0 with no live data\): [0-9]+ data, [0-9]+ parity, [0-9]+ reclaimable'
expect_in out '^  erasure coded: [0-9]+ data'
for f in ec/a:a ec/sub/b:b ec/off:off plain/c:c; do
	$B image cat $E /${f%%:*} | cmp -s - ${f#*:} || fail "/${f%%:*} reads back other data"
done
expect_rc 0 $B fsck -n -f $E
expect_in out ': 0 problems found'
echo "fs usage: data = the striped files, parity = p blocks a stripe, data + reclaimable = data blocks" >&2

# a striped file deleted: its data leaves erasure_coded.data and its blocks'
# space becomes reclaimable (not more: a block left empty may be freed at
# once); a stripe left with no data at all is deleted (in place, a file's
# data may fill stripes of its own), its blocks' space with it: the stripes
# left still add up
rm_bytes=$((700 * 1024))
expect_rc 0 $B image rm $E /ec/sub/b
expect_rc 0 $B list -b stripes $E
cp out stripes.after
expect_rc 0 $B fs usage --json $E
python3 -c 'import json, re, sys
a, b = json.load(open("usage.json"))["erasure_coded"], json.load(open("out"))["erasure_coded"]
n = int(sys.argv[1])
stripes = [l for l in open("stripes.after") if " stripe " in l]
k_space = p_space = 0
for l in stripes:
	m = re.search(r" stripe (\d+)\+(\d+) block (\d+) ", l)
	k_space += int(m.group(1)) * int(m.group(3)) * 512
	p_space += int(m.group(2)) * int(m.group(3)) * 512
same = b["stripes"] == a["stripes"]
sys.exit(0 if b["data"] == a["data"] - n and b["stripes"] == len(stripes) and b["stripes"] <= a["stripes"] and
	 b["parity"] == p_space and b["data"] + b["reclaimable"] == k_space and
	 (not same or (b["parity"] == a["parity"] and
		       a["reclaimable"] <= b["reclaimable"] <= a["reclaimable"] + n)) else 1)' $rm_bytes ||
	fail "after rm: $(python3 -c 'import json; print(json.load(open("usage.json"))["erasure_coded"], json.load(open("out"))["erasure_coded"])')"
expect_rc 0 $B image cat $E /ec/a
cmp -s out a || fail "/ec/a reads back other data after /ec/sub/b went"

# =- removes the option (the file inherits /ec's again)
expect_rc 0 $B image setattr $E --erasure-code=- /ec/off
expect_rc 0 $B image getfattr $E -d /ec/off
expect_not_in out 'bcachefs.erasure_code='
expect_rc 0 $B image getfattr $E -n bcachefs_effective.erasure_code /ec/off
expect_in out 'bcachefs_effective.erasure_code="no"'	# the filesystem's: a copy is not re-inherited

# the same through a fusemount: setattr on a path, cp, data rebalance, fs usage
if fuse_part "t74 mounted"; then
	mkdir mnt
	trap 'cd /; fusermount3 -uz "$OLDPWD/mnt" 2>/dev/null' EXIT
	expect_rc 0 $B fusemount "$E" mnt
	mkdir mnt/m
	expect_rc 0 $B setattr --erasure-code=1 mnt/m
	getfattr -n bcachefs.erasure_code mnt/m 2>&1 | grep -q '"yes"' || fail "getfattr through the mount"
	cp m mnt/m/m && sync mnt/m/m
	expect_rc 0 $B data rebalance --wait mnt
	expect_rc 0 $B fs usage --json mnt
	python3 -c 'import json, sys; e = json.load(open("out"))["erasure_coded"]
sys.exit(0 if e["data"] == (1536 * 1024 + 4096) + 1200 * 1024 else 1)' ||
		fail "mounted fs usage: $(python3 -c 'import json; print(json.load(open("out"))["erasure_coded"])')"
	expect_rc 0 $B fs usage mnt
	expect_in out '^Erasure coded: '
	fusermount3 -u mnt || fail "fusermount3 -u"
	trap - EXIT
	n=$(inum /m/m)
	expect_rc 0 $B list -b extents $E
	grep "^$n:" out | grep -v ' stripe [0-9]*/[0-9]*$' | grep -q . && fail "/m/m not striped"
	$B image cat $E /m/m | cmp -s - m || fail "/m/m reads back other data"
	echo "mounted: setattr, cp, data rebalance --wait, fs usage through the daemon" >&2
fi
expect_rc 0 $B fsck -n -f $E
expect_in out ': 0 problems found'
