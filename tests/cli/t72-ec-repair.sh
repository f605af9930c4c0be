# erasure coding, repair (issue 34, Tests: bit rot): six images, RS(4,2)
# stripes built by data rebalance --wait.  Random damage (seeded: printed on
# failure) to data and parity blocks on two of the six members (p = 2), byte
# ranges anywhere in a block, in use by extents or not: reads are correct;
# data scrub finds and rewrites every damaged block (copies_bad and
# copies_repaired equal the number of blocks damaged), a second scrub finds
# nothing, files byte-identical, fsck -c clean.  Again with fsck -c: -n
# reports (stripe_data_bad, stripe_parity_bad) and writes nothing, -y
# repairs.  Three members damaged in one stripe: more than p, scrub names
# the stripe and exits 1, reads still right where the extents' checksums
# can tell.  And mounted: data scrub on a fusemount, through the daemon.
need python3
SEED=${SEED:-7234}
tree=$ROOT/tests/cli/treetool.py
python3 "$tree" gen src 72 40 || fail "treetool gen"
python3 -c 'import random; r = random.Random(72); open("src/big.bin", "wb").write(r.randbytes(2 * 1024 * 1024 + 5))'

for i in 0 1 2 3 4 5; do truncate -s 64M e$i.img; done
E=e0.img:e1.img:e2.img:e3.img:e4.img:e5.img
expect_rc 0 $B format -q --erasure-code --replicas=3 --source=src e0.img e1.img e2.img e3.img e4.img e5.img
expect_rc 0 $B data rebalance --wait $E
expect_rc 0 $B list -b stripes $E
expect_in out 'stripe 4\+2 block'

# damage ROUND WHICH [PREFIX]: garbage in blocks of the stripes of the
# images PREFIX0..5.img (default e); WHICH is "p" (two members: every block on them, data or parity,
# hit with probability 3/4, each in a range of its own) or "3" (the same
# byte range of three blocks of stripe 1: beyond what any choice rebuilds).
# Prints the number of blocks damaged.
damage() {
	_p=${3:-e}
	$B list -b stripes ${_p}0.img:${_p}1.img:${_p}2.img:${_p}3.img:${_p}4.img:${_p}5.img \
		> stripes.txt || fail "list stripes"
	python3 - "$SEED" "$1" "$2" "$_p" <<'EOF'
import random, re, sys
seed, rnd, which, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
r = random.Random(seed * 100 + rnd)
stripes = []
for line in open("stripes.txt"):
    m = re.search(r"stripe (\d+)\+(\d+) block (\d+)", line)
    if not m:
        continue
    blocks = [(int(d), int(o)) for d, o in re.findall(r"(?:data|parity) (\d+):(\d+) gen", line)]
    stripes.append((int(m.group(3)), blocks))
if which == "p":
    members = set(r.sample(range(6), 2))
    hit = [(bs, d, o) for bs, blocks in stripes for d, o in blocks if d in members and r.random() < 0.75]
else:
    bs, blocks = stripes[0]
    hit = [(bs, d, o) for d, o in blocks[:3]]
same = None
for bs, d, o in hit:
    size = bs * 512
    start = r.randrange(size)
    n = r.randint(1, min(size - start, 64 * 1024))
    if which == "3":
        same = same or (0, 16 * 1024)	# the start of the block: an extent lies there
        start, n = same
    with open("%s%d.img" % (prefix, d), "r+b") as f:
        f.seek(o * 512 + start)
        old = f.read(n)
        f.seek(o * 512 + start)
        f.write(bytes(b ^ r.randint(1, 255) for b in old))
print(len(hit))
EOF
}

check_tree() {	# what: every file of src byte-identical in the filesystem $2 (open options $1)
	rm -rf out.d && mkdir out.d
	expect_rc 0 $B image extract ${1:+-o $1} "$2" out.d
	python3 "$tree" compare src out.d >cmp.log || fail "seed $SEED: $3: $(tail -5 cmp.log)"
	cmp -s src/big.bin out.d/big.bin || fail "seed $SEED: $3: big.bin differs"
}
jget() { python3 -c 'import json, sys; print(json.load(open("out"))[sys.argv[1]])' "$1"; }

# ---- bit rot on p members, scrub: every block found and rewritten
n=$(damage 1 p) || fail "damage"
[ "$n" -gt 0 ] || fail "seed $SEED: nothing damaged"
echo "round 1: $n blocks damaged (seed $SEED)" >&2
check_tree read_only "$E" "reads with damaged blocks"
expect_rc 0 $B data scrub --json $E
[ "$(jget copies_bad)" = "$n" ] && [ "$(jget copies_repaired)" = "$n" ] &&
	[ "$(jget unrepairable)" = 0 ] && [ "$(jget stripes_checked)" -ge 3 ] ||
	fail "seed $SEED: scrub after $n blocks damaged: $(cat out)"
expect_rc 0 $B data scrub --json $E
[ "$(jget copies_bad)" = 0 ] || fail "seed $SEED: second scrub: $(cat out)"
check_tree "" "$E" "after scrub"
expect_rc 0 $B fsck -n -f -c $E
expect_in out ': 0 problems found'

# ---- again, repaired by fsck -c: -n reports and writes nothing, -y repairs
n=$(damage 2 p) || fail "damage"
echo "round 2: $n blocks damaged" >&2
before=$(cat e0.img e1.img e2.img e3.img e4.img e5.img | sha256sum)
expect_rc 4 $B fsck -n -f -c $E
expect_in out 'stripe_(data|parity)_bad'
expect_not_in out 'data_unreadable|stripe_unrecoverable'
[ "$(cat e0.img e1.img e2.img e3.img e4.img e5.img | sha256sum)" = "$before" ] || fail "fsck -n wrote"
found=$(sed -n 's/^  stripe_\(data\|parity\)_bad *\([0-9]*\) found.*/\2/p' out | awk '{s += $1} END {print s + 0}')
[ "$found" = "$n" ] || fail "seed $SEED: fsck -n found $found bad blocks, $n damaged"
run $B fsck -y -f -c $E
[ "$rc" = 1 ] || fail "fsck -y exited $rc: $(cat out err)"
expect_in out ": $n problems found, $n fixed, 0 left"
expect_rc 0 $B fsck -n -f -c $E
expect_in out ': 0 problems found'
check_tree "" "$E" "after fsck -c"

# ---- three blocks of stripe 1 damaged (p = 2): named, exit 1; reads as they can
damage 3 3 >/dev/null || fail "damage"
expect_rc 1 $B data scrub $E
expect_in err 'stripe 1 block .*more bad blocks than parity'
expect_rc 4 $B fsck -n -f -c $E
expect_in out 'stripe_unrecoverable'

# ---- mounted: the daemon runs the scrub (control channel)
if fuse_part "data scrub on a fusemount"; then
	for i in 0 1 2 3 4 5; do truncate -s 64M m$i.img; done
	M=m0.img:m1.img:m2.img:m3.img:m4.img:m5.img
	expect_rc 0 $B format -q --erasure-code --replicas=3 --source=src m0.img m1.img m2.img m3.img m4.img m5.img
	expect_rc 0 $B data rebalance --wait $M
	n=$(damage 4 p m) || fail "damage"
	mkdir mnt
	trap 'fusermount3 -uz "$PWD/mnt" 2>/dev/null' EXIT
	$B fusemount -f $M mnt 2>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
	expect_rc 0 $B data scrub --json mnt
	[ "$(jget copies_bad)" = "$n" ] && [ "$(jget copies_repaired)" = "$n" ] ||
		fail "seed $SEED: mounted scrub after $n blocks damaged: $(cat out)"
	expect_rc 0 $B data scrub --json mnt
	[ "$(jget copies_bad)" = 0 ] || fail "seed $SEED: second mounted scrub: $(cat out)"
	python3 "$tree" compare src mnt >cmp.log || fail "seed $SEED: mounted: $(tail -5 cmp.log)"
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	trap - EXIT
	expect_rc 0 $B fsck -n -f -c $M
	expect_in out ': 0 problems found'
fi
