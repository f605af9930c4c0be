# device commands offline, on image files (issue 20): the whole sequence
# (add, remove, shrink, grow, rereplicate, evacuate, set-state, set-label)
# with `image` verbs changing and reading files between the steps, every
# file compared with a host copy and fsck clean after each step; then every
# refusal with its message, exit code and no byte written; --json output.
# Deterministic: the tree comes from treetool.py with seed 34.
tree=$ROOT/tests/cli/treetool.py
python3 "$tree" gen exp 34 60 || fail "treetool gen"
# large files: random (incompressible) and text (compressible), seed 34
python3 -c 'import random, sys; r = random.Random(34); sys.stdout.buffer.write(r.randbytes(3 * 1024 * 1024 + 123))' > exp/big.bin
python3 -c 'import sys; sys.stdout.buffer.write(b"".join(b"line %08d compressible text\n" % i for i in range(100000)))' > exp/text.txt
python3 -c 'import random, sys; r = random.Random(35); sys.stdout.buffer.write(r.randbytes(700 * 1024))' > new1.bin
printf 'small new file\n' > new2.txt

# cmp.py EXP GOT: same names, types, modes, link targets and file contents
# (directory times and owners change with image verbs: not compared)
cat > cmp.py <<'EOF'
import hashlib, os, stat, sys
def walk(root):
    d = {}
    for dp, dn, fn in os.walk(root):
        for n in dn + fn:
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            if rel == "lost+found" or rel.startswith("lost+found/"):
                continue
            st = os.lstat(p)
            e = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    e += (st.st_size, hashlib.sha256(f.read()).hexdigest())
            elif stat.S_ISLNK(st.st_mode):
                e += (os.readlink(p),)
            d[rel] = e
    return d
a, b = walk(sys.argv[1]), walk(sys.argv[2])
bad = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
for k in bad[:10]:
    print("%s: expected %r, got %r" % (k, a.get(k), b.get(k)))
print("%d entries, %d differ" % (len(a), len(bad)))
sys.exit(1 if bad else 0)
EOF

# check WHAT FS [-o OPTS]: every file as expected, fsck -fn clean
check() {
	what=$1; shift
	rm -rf got && mkdir got
	expect_rc 0 $B image extract "$@" got
	python3 cmp.py exp got > cmp.log || fail "after $what: $(cat cmp.log)"
	expect_rc 0 $B fsck -fn "$@"
	expect_in out ' 0 problems found'
}

# the number of extents (in ./out of `list -b extents`) with N pointers
nptrs() { awk -v n="$1" '/ extent /{ c = 0; for (i = 1; i <= NF; i++) if ($i == "ptr") c++; if (c == n) k++ } END { print k + 0 }' out; }

expect_rc 0 $B format -q --replicas=2 --compression=lz4 --fs-size=64M --source=exp d0.img d1.img d2.img
F=d0.img:d1.img:d2.img
check format $F

# 1. add a 4th member; write to and read from it
truncate -s 64M d3.img
expect_rc 0 $B device add --label=added $F d3.img
expect_in out '^Added .*d3\.img as member 3 '
F=$F:d3.img
expect_rc 0 $B show-super d3.img
expect_in out 'Devices: +4'
expect_rc 0 $B image put $F new1.bin /new1.bin
cp new1.bin exp/new1.bin
expect_rc 0 $B image mkdir $F /added
mkdir exp/added
check "device add" $F

# 2. remove d1: its data goes elsewhere, it leaves the member list, its
# superblock is wiped
expect_rc 0 $B device remove $F d1.img
expect_in out '^Removed member 1$'
F=d0.img:d2.img:d3.img
expect_rc 1 $B show-super d1.img
expect_rc 0 $B show-super d0.img
expect_not_in out '^  Device 1:'
expect_in out '^  Device 3:'
expect_rc 1 $B image ls $F:d1.img /
expect_rc 0 $B image cat $F /new1.bin
cmp -s out new1.bin || fail "cat new1.bin after remove"
expect_rc 0 $B image rm $F /text.txt
rm exp/text.txt
expect_rc 0 $B image put $F new2.txt /added/new2.txt
cp new2.txt exp/added/new2.txt
check "device remove" $F

# 3. shrink d0 below what it holds: its tail moves first, the image file
# is truncated.  A 12 MiB file put and removed first, so the allocator
# has moved on and the next file lands past 20 MiB on member 0.
python3 -c 'import random, sys; r = random.Random(36); sys.stdout.buffer.write(r.randbytes(16 << 20))' > r12.bin
# (one open: the allocator's place is not kept across opens)
# (new data goes to the emptiest members: /added is pinned to member 0 meanwhile)
printf 'setopt foreground_target=0 /added\nput r12.bin /added/r12.bin\nrm /added/r12.bin\nput new1.bin /added/late.bin\nsetopt foreground_target=none /added\n' > script
$B image shell $F < script > out 2> err || fail "image shell: $(cat err)"
cp new1.bin exp/added/late.bin
# the highest sector of member 0 that holds an extent
top0() { grep -o ' ptr 0:[0-9]*' out | cut -d: -f2 | sort -n | tail -1; }
expect_rc 0 $B list -b extents $F
[ "$(top0)" -ge $((20 << 11)) ] || fail "member 0 holds nothing past 20M before the shrink (top sector $(top0))"
expect_rc 0 $B device resize $F d0.img 20M
expect_in out '^Moved [0-9.]+[kM] \([1-9][0-9]* extents'
expect_in out '^Member 0 now has 19\.[0-9]M of buckets'
[ "$(stat -c %s d0.img)" = $((20 << 20)) ] || fail "d0.img is $(stat -c %s d0.img) bytes after the shrink"
expect_rc 0 $B list -b extents $F
[ "$(top0)" -lt $((20 << 11)) ] || fail "member 0 still holds sector $(top0) after the shrink"
expect_rc 0 $B image cat $F /big.bin
cmp -s out exp/big.bin || fail "cat big.bin after shrink"
check "device resize (shrink)" $F

# 4. grow d0 again: the image file grows, the new space is used
expect_rc 0 $B device resize $F d0.img 96M
expect_in out '^Member 0 now has 95\.[0-9]M of buckets'
[ "$(stat -c %s d0.img)" = $((96 << 20)) ] || fail "d0.img is $(stat -c %s d0.img) bytes after the grow"
expect_rc 0 $B show-super d2.img
expect_in out 'Size: +95\.[0-9]M'
expect_rc 0 $B image put $F new1.bin /added/again.bin
cp new1.bin exp/added/again.bin
check "device resize (grow)" $F

# 5. rereplicate: nothing to do (every extent has 2 copies) ...
expect_rc 0 $B data rereplicate $F
expect_in out '^Copied 0 \(0 extents, 0 btree nodes\)'
expect_rc 0 $B list -b extents $F
[ "$(nptrs 1)" = 0 ] || fail "$(nptrs 1) extents with one copy"
# ... then replicas=3: every extent gets a third copy
expect_rc 0 $B set-fs-option --data_replicas=3 $F
expect_rc 0 $B data rereplicate $F
expect_in out '^Copied [0-9.]+[kM] \([1-9]'
expect_rc 0 $B list -b extents $F
[ "$(nptrs 2)" = 0 ] && [ "$(nptrs 3)" -gt 0 ] || fail "after rereplicate with 3 replicas: $(nptrs 2) extents with 2 copies, $(nptrs 3) with 3"
expect_rc 0 $B image cat $F /new1.bin
check "data rereplicate" $F
# back to 2 copies for what follows (extents keep their third copy)
expect_rc 0 $B set-fs-option --data_replicas=2 $F

# 6. evacuate d2: nothing points to it afterwards, it stays a read-only member
expect_rc 0 $B device evacuate $F d2.img
expect_in out '^Member 2 holds nothing now and is read-only'
expect_rc 0 $B list -b extents $F
expect_not_in out ' ptr 2:'
expect_rc 0 $B list -m nodes $F
expect_not_in out ' ptr 2:'
expect_rc 0 $B show-super d0.img
expect_in out 'State: +ro'
expect_rc 0 $B image put $F new2.txt /after-evacuate
cp new2.txt exp/after-evacuate
expect_rc 0 $B list -b extents $F
expect_not_in out ' ptr 2:'                # a read-only member takes no new data
check "device evacuate" $F

# 7. set-state and set-label, by index, path and uuid; written to every member
expect_rc 0 $B device set-state rw $F 2
expect_in out '^Member 2 is rw$'
uuid3=$($B show-super d3.img | sed -n 's/^UUID: *//p' | head -1)
[ -n "$uuid3" ] || uuid3=$($B show-super d3.img | awk '/Device 3:/{f=1} f && /UUID:/{print $2; exit}')
expect_rc 0 $B device set-label $F "$uuid3" fast.ssd
expect_in out '^Member 3 has label fast\.ssd$'
expect_rc 0 $B device set-label $F d0.img ""
expect_in out '^Member 0 has label \(none\)$'
for d in d0 d2 d3; do
	$B show-super $d.img > out || fail "show-super $d"
	awk '/^  Device 2:/{f=1} f && /State:/{print $2; exit}' out | grep -qx rw || fail "$d.img: member 2 not rw"
	awk '/^  Device 3:/{f=1} f && /Label:/{print $2; exit}' out | grep -qx fast.ssd || fail "$d.img: member 3 label"
done
expect_rc 0 $B device set-state spare $F d3.img
expect_in out '^Member 3 is spare$'
expect_rc 0 $B device set-state rw $F d3.img
expect_rc 0 $B image mv $F /after-evacuate /added/moved
mv exp/after-evacuate exp/added/moved
check "set-state and set-label" $F

# 8. --json of add, resize, evacuate, remove, rereplicate: one object each,
# with the keys cmd_device.c writes
# json_keys KEY...: ./out is one JSON object with (at least) these keys
json_keys() {
	python3 -m json.tool out > /dev/null || fail "not JSON: $(head -c 500 out)"
	python3 -c 'import json, sys; d = json.load(open("out")); m = [k for k in sys.argv[1:] if k not in d]; sys.exit("missing keys %s in %s" % (m, d) if m else 0)' "$@" || fail "json keys"
}
truncate -s 32M d4.img
expect_rc 0 $B device add --json $F d4.img
json_keys version device member uuid size seconds
# the slot member 1 left is taken again
jq -e '.member == 1 and .size > 0' out > /dev/null || fail "add --json: $(cat out)"
F=$F:d4.img
expect_rc 0 $B device resize --json $F d4.img 48M
json_keys version member old_size size
jq -e '.member == 1 and .size > .old_size' out > /dev/null || fail "resize --json: $(cat out)"
expect_rc 0 $B image put $F exp/big.bin /on4
cp exp/big.bin exp/on4
expect_rc 0 $B device set-state ro $F d0.img
expect_rc 0 $B device set-state ro $F d3.img
expect_rc 0 $B image put $F new1.bin /on4b      # goes to d2 and d4
cp new1.bin exp/on4b
expect_rc 0 $B device set-state rw $F d0.img
expect_rc 0 $B device set-state rw $F d3.img
expect_rc 0 $B list -b extents $F
expect_in out ' ptr 1:'
expect_rc 0 $B device evacuate --json $F d4.img
json_keys version completed cancelled bytes_total bytes_moved extents_moved nodes_moved seconds stuck lost_bytes problem
expect_rc 0 $B list -b extents $F
expect_not_in out ' ptr 1:'
expect_rc 0 $B device remove --json $F d4.img
json_keys version removed was_missing lost_bytes
jq -e '.removed == 1 and .was_missing == false and .lost_bytes == 0' out > /dev/null || fail "remove --json: $(cat out)"
F=d0.img:d2.img:d3.img
expect_rc 0 $B data rereplicate --json $F
json_keys version completed cancelled bytes_total bytes_moved extents_moved nodes_moved seconds stuck lost_bytes problem
jq -e '.completed == true and .cancelled == false and .stuck.total == 0 and .problem == null' out > /dev/null || fail "rereplicate --json: $(cat out)"
check "--json steps" $F
