# data scrub: a --replicas=2 filesystem on two image files; random copies of
# file data on ONE image are damaged (found by searching the image for the
# files' content; seed printed); scrub repairs them all, a second scrub finds
# nothing, every file reads back as its source, fsck --data is clean.  Then:
# MEMBER reads only that member's copies; a file whose both copies are
# damaged is named, left alone, and makes the exit code 1; usage errors 16.
plain_only "it finds file blocks by their plaintext markers (encrypted scrub: unit scrub_encrypted)"
SEED=33
echo "seed $SEED"
mkdir src
# files whose every 4 KiB block starts with its own marker "SCRUB:<file>:<block>:"
python3 - "$SEED" <<'EOF' || fail "generating files"
import random, sys
r = random.Random(int(sys.argv[1]))
for f in range(16):
    n = r.randint(3, 40)
    with open("src/file%02d" % f, "wb") as o:
        for b in range(n):
            head = b"SCRUB:%02d:%04d:" % (f, b)
            o.write(head + bytes(r.getrandbits(8) for _ in range(4096 - len(head))))
EOF
expect_rc 0 $B format -q --replicas=2 --fs-size=64M --source=src d0.img d1.img

# where file F's blocks lie in image IMG (byte offsets), from the markers
cat > find.py <<'EOF'
import re, sys
img = open(sys.argv[1], "rb").read()
files = sys.argv[2].split(",") if len(sys.argv) > 2 else None
for m in re.finditer(rb"SCRUB:(\d\d):(\d{4}):", img):
    if m.start() % 512 == 0 and (files is None or m.group(1).decode() in files):
        print(m.start())
EOF
# damage N random blocks found in IMG (their first bytes after the marker)
damage() {
	python3 find.py "$1" ${3:-} > offsets || fail "searching $1"
	[ -s offsets ] || fail "no file data found in $1"
	python3 - "$1" "$2" "$SEED" <<'EOF' || fail "damaging $1"
import random, sys
offs = [int(l) for l in open("offsets")]
r = random.Random(int(sys.argv[3]))
pick = offs if sys.argv[2] == "all" else r.sample(offs, min(int(sys.argv[2]), len(offs)))
with open(sys.argv[1], "r+b") as f:
    for o in pick:
        f.seek(o + 20)
        f.write(b"DAMAGED BY t33")
print(len(pick), "blocks damaged in", sys.argv[1])
EOF
}
compare_all() {
	rm -rf x && mkdir x
	expect_rc 0 $B image extract d0.img:d1.img x
	for f in src/*; do
		cmp "$f" "x/$(basename "$f")" || fail "$(basename "$f") differs after scrub"
	done
}
num() { sed -n "s/^  $1 *\([0-9]*\).*/\1/p" out; }

damage d0.img 25
expect_rc 0 $B data scrub d0.img:d1.img
expect_in out '^data scrub: d0.img:d1.img: read '
bad=$(num "bad copies"); fixed=$(num repaired)
[ "$bad" -gt 0 ] || fail "scrub found no bad copy: $(cat out)"
[ "$fixed" = "$bad" ] || fail "repaired $fixed of $bad: $(cat out)"
expect_in out 'unrepairable +0 '
[ "$(num 'copies checked')" -ge $((2 * $(num 'extents checked'))) ] || fail "every copy read: $(cat out)"

# the second scrub finds nothing (--json)
expect_rc 0 $B data scrub --json d0.img:d1.img
expect_in out '"copies_bad":0,'
expect_in out '"unrepairable":0,'
expect_in out '"bytes_read":[1-9][0-9]*,'
python3 -c 'import json; json.load(open("out"))' || fail "--json is not JSON"
compare_all
expect_rc 0 $B fsck -n -f -c d0.img:d1.img

# MEMBER: only the copies on d1.img are read
damage d1.img 10
expect_rc 0 $B data scrub --json d0.img:d1.img d0.img
expect_in out '"copies_bad":0,'
expect_rc 0 $B data scrub --json d0.img:d1.img 1
python3 - <<'EOF' || fail "MEMBER 1: $(cat out)"
import json
s = json.load(open("out"))
assert s["copies_bad"] > 0 and s["copies_repaired"] == s["copies_bad"], s
EOF
expect_rc 0 $B data scrub d0.img:d1.img
expect_in out 'bad copies +0$'
compare_all

# both copies of file03's data damaged: named, left alone, exit 1
damage d0.img all 03
damage d1.img all 03
expect_rc 1 $B data scrub --json d0.img:d1.img
expect_in err 'bcachefs data scrub: d0.img:d1.img: inode [0-9]+ \(/file03\) sectors [0-9]+\.\.[0-9]+ \([0-9]+ bytes\): no good copy'
python3 - <<'EOF' || fail "unrepairable list: $(cat out)"
import json
s = json.load(open("out"))
assert s["unrepairable"] > 0 and s["copies_repaired"] == 0, s
b = s["unrepairable_list"][0]
assert b["kind"] == "data" and "/file03" in b["what"] and b["bytes"] > 0, b
EOF
expect_rc 1 $B image cat d0.img:d1.img /file03
expect_rc 0 $B image cat d0.img:d1.img /file04
cmp out src/file04 || fail "file04 differs"

# usage errors, and an unknown member: nothing written
sum0=$(sha d0.img) sum1=$(sha d1.img)
expect_rc 16 $B data scrub
expect_rc 16 $B data scrub --bogus d0.img:d1.img
expect_rc 16 $B data scrub d0.img:d1.img d0.img extra
expect_rc 0 $B data scrub --help
expect_in out '^Usage: bcachefs data scrub'
expect_rc 1 $B data scrub d0.img:d1.img 7
expect_in err 'data scrub: d0.img:d1.img: there is no member 7'
expect_rc 1 $B data scrub d0.img:d1.img src/file01
expect_in err 'not a member of this filesystem'
[ "$(sha d0.img)" = "$sum0" ] && [ "$(sha d1.img)" = "$sum1" ] || fail "a refused scrub wrote to an image"
true
