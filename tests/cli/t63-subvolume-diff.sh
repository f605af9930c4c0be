# subvolume diff and image export-tar --since (issue 30):
#   - a varied tree (treetool) plus plain directories; a read-only snapshot
#     /old of /; then seeded edits in /: files deleted, a directory removed
#     whole, files renamed (in and across directories), a directory renamed,
#     files and a directory added, chmod, setfattr, data rewritten in place
#     (image update): diff /old / equals what the script did (added,
#     deleted, renamed, modified with ranges, metadata-only), as text and
#     --json (validated against docs/json/subvolume-diff.schema.json; text
#     paths with a newline or backslash escaped, one line each); the
#     reverse diff swaps added and deleted; a diff of a subvolume with
#     itself is empty;
#   - export-tar --since=/old: the layer imported onto a copy of /old (a
#     fresh image from export-tar of /old) gives / (treetool compare of
#     both extracted trees); its whiteouts are OCI's .wh.NAME;
#   - through FUSE: writes into the middle and the end of small files give
#     exactly those byte ranges;
#   - refusals (exit 1, message): unrelated snapshots (a new subvolume has
#     its own tree), a missing path, a path that is not a subvolume; usage
#     (exit 16); nothing written to the image by any of them (sha).
need jq python3 tar
T="python3 $ROOT/tests/cli/treetool.py"
SEED=${SEED:-63}
echo "seed $SEED"

$T gen src "$SEED" 200 || fail "treetool gen"
python3 - src "$SEED" <<'PY' || fail "plain tree"
import os, random, sys
root, seed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(seed)
for d in range(5):
    dp = os.path.join(root, "plain", "d%d" % d)
    os.makedirs(dp)
    for f in range(8):
        with open(os.path.join(dp, "f%d" % f), "wb") as fh:
            fh.write(rnd.randbytes(rnd.randrange(1, 20000)))
os.makedirs(os.path.join(root, "mod"))
for f in range(10):
    with open(os.path.join(root, "mod", "m%d" % f), "wb") as fh:
        fh.write(rnd.randbytes(rnd.randrange(1, 30000)))
PY
expect_rc 0 $B format -q --fs-size=512M --source src a.img
expect_rc 0 $B subvolume snapshot -r a.img / /old

# ---- the edits, planned with the seed: a shell script for `image shell`,
# host files to put, /mod's new content for `image update`, and expect.json
cp -a src/mod modtree
python3 - "$SEED" <<'PY' || fail "planning the edits"
import json, os, random, sys
rnd = random.Random(int(sys.argv[1]) + 1)
sh, exp = [], {"added": [], "deleted": [], "renamed": [], "modified": {}, "meta": []}
files = {d: ["/plain/d%d/f%d" % (d, f) for f in range(8)] for d in range(5)}
# d0 goes whole, d1 is renamed whole, files of d2..d4 are edited one way each
sh.append("rm -r /plain/d0")
exp["deleted"] += ["/plain/d0"] + files[0]
sh.append("mv /plain/d1 /plain/d1-renamed")
exp["renamed"].append(["/plain/d1", "/plain/d1-renamed"])
pool = files[2] + files[3] + files[4]
rnd.shuffle(pool)
for p in pool[:4]:
    sh.append("rm " + p); exp["deleted"].append(p)
for i, p in enumerate(pool[4:7]):
    d = p.rsplit("/", 1)[0] if i == 0 else rnd.choice(["/plain/d2", "/plain/d3", "/plain/d4"])
    n = "%s/renamed%d" % (d, i)
    sh.append("mv %s %s" % (p, n)); exp["renamed"].append([p, n])
for p in pool[7:10]:
    sh.append("chmod 600 " + p); exp["meta"].append([p, "mode"])
for p in pool[10:12]:
    sh.append("setfattr -n user.t63 -v v%d %s" % (rnd.randrange(1000), p)); exp["meta"].append([p, "xattrs"])
os.makedirs("new", exist_ok=True)
for i in range(5):
    h = "new/n%d" % i
    with open(h, "wb") as fh:
        fh.write(rnd.randbytes(rnd.randrange(1, 5000)))
    p = "/plain/d%d/new%d" % (rnd.choice([2, 3, 4]), i)
    sh.append("put %s %s" % (h, p)); exp["added"].append(p)
sh.append("mkdir /plain/newdir"); exp["added"].append("/plain/newdir")
for i in range(2):
    sh.append("put new/n%d /plain/newdir/x%d" % (i, i)); exp["added"].append("/plain/newdir/x%d" % i)
exp["added"].append("/old")	# the snapshot's own name, in / only
# data rewritten in place by image update: new content, another size
mods = sorted(rnd.sample(range(10), 4))
for m in mods:
    p = "modtree/m%d" % m
    old = os.path.getsize(p)
    new = old + rnd.randrange(-old + 1, 4000)
    with open(p, "wb") as fh:
        fh.write(rnd.randbytes(new))
    exp["modified"]["/mod/m%d" % m] = [old, new]
open("edits.sh", "w").write("\n".join(sh) + "\n")
json.dump(exp, open("expect.json", "w"), indent=1)
PY
expect_rc 0 $B image shell a.img < edits.sh
expect_rc 0 $B image update a.img modtree /mod

# (made and removed again: then in neither tree, so not in the diff)
# text: a name with a newline and a backslash stays on one line
printf 'x' > "$(printf 'odd\nname\\')"
expect_rc 0 $B image put a.img "$(printf 'odd\nname\\')" /plain/d2/
expect_rc 0 $B subvolume diff a.img /old /
expect_in out '^added     /plain/d2/odd\\012name\\134$'
expect_rc 0 $B image rm a.img "$(printf '/plain/d2/odd\nname\\')"

# ---- the diff, JSON, against the plan
before=$(sha a.img)
expect_rc 0 $B subvolume diff --json a.img /old /
cp out diff.json
python3 - diff.json expect.json <<'PY' || fail "diff --json differs from the edits: $(cat diff.json | head -c 3000)"
import json, sys
d, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
bad = []
def same(what, got, want):
    if sorted(got) != sorted(want):
        bad.append("%s:\n  got  %s\n  want %s" % (what, sorted(got), sorted(want)))
same("added", [x["path"] for x in d["added"]], e["added"])
same("deleted", [x["path"] for x in d["deleted"]], e["deleted"])
same("renamed", [[x["old_path"], x["new_path"]] for x in d["renamed"]], e["renamed"])
same("modified", [x["path"] for x in d["modified"]], list(e["modified"]))
for x in d["modified"]:
    o, n = e["modified"].get(x["path"], [None, None])
    if [x["old_size"], x["new_size"]] != [o, n] or x["ranges"] != [{"offset": 0, "length": max(o, n)}]:
        bad.append("modified %s: %s, want sizes %s -> %s, one range 0+%s" % (x["path"], x, o, n, max(o or 0, n or 0)))
meta = {x["path"]: x["fields"] for x in d["metadata_only"]}
for p, f in e["meta"]:
    if f not in meta.get(p, []):
        bad.append("metadata_only %s: %s, want %s" % (p, meta.get(p), f))
# regular files with metadata-only changes: those chmod'ed, xattr'ed, or renamed (ctime)
allowed = {p for p, f in e["meta"]} | {n for o, n in e["renamed"]}
for x in d["metadata_only"]:
    if x["type"] == "file" and x["path"] not in allowed:
        bad.append("metadata_only: %s was not changed" % x)
types = {x["path"]: x["type"] for x in d["added"]}
if types.get("/old") != "subvolume" or types.get("/plain/newdir") != "directory":
    bad.append("added types: %s" % types)
if d["old"]["path"] != "/old" or d["new"]["subvolume"] != 0 or d["snapshots_read"] < 2:
    bad.append("header: %s %s %s" % (d["old"], d["new"], d["snapshots_read"]))
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
python3 - diff.json "$ROOT/docs/json/subvolume-diff.schema.json" <<'PY' || fail "diff --json does not match its schema"
import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))
PY

# ---- text: one line per change, the same counts
expect_rc 0 $B subvolume diff a.img /old /
cp out diff.txt
for kind in added deleted renamed modified; do
	want=$(jq ".$kind | length" diff.json)
	got=$(grep -c "^$kind " diff.txt)
	[ "$got" = "$want" ] || fail "text: $got $kind lines, JSON has $want: $(cat diff.txt)"
done
expect_in diff.txt '^renamed   /plain/d1 -> /plain/d1-renamed$'
expect_in diff.txt '^added     /old \(subvolume\)$'
expect_not_in diff.txt '^(added|deleted|renamed) .*/plain/d1-renamed/'
# the reverse: added and deleted swap
expect_rc 0 $B subvolume diff --json a.img / /old
[ "$(jq '.added | length' out)" = "$(jq '.deleted | length' diff.json)" ] &&
[ "$(jq '.deleted | length' out)" = "$(jq '.added | length' diff.json)" ] || fail "reverse diff: $(cat out)"
# a subvolume against itself: nothing
expect_rc 0 $B subvolume diff a.img /old /old
[ ! -s out ] || fail "diff of /old with itself: $(cat out)"
[ "$(sha a.img)" = "$before" ] || fail "subvolume diff wrote to the image"

# ---- export-tar --since: the layer onto a copy of /old gives /
expect_rc 0 $B image export-tar --since=/old a.img layer.tar /
expect_rc 0 $B image export-tar a.img layer2.tar --since /old	# NEW defaults to /, option after DEVICE
cmp layer.tar layer2.tar || fail "--since=OLD before DEVICE and --since OLD after it differ"
[ "$(sha a.img)" = "$before" ] || fail "export-tar --since wrote to the image"
tar --warning=no-unknown-keyword -tf layer.tar > layer.list || fail "tar cannot read the layer"
expect_in layer.list '^\./plain/\.wh\.d0$'
expect_in layer.list '^\./plain/\.wh\.d1$'
expect_not_in layer.list '^\./plain/d0/'
expect_in layer.list '^\./plain/d1-renamed/f0$'
# unchanged files are not in it (/old is: the snapshot's name is new in /, and
# export-tar of / holds it as a directory, so the layer does too)
expect_not_in layer.list '^\./plain/d1/'
expect_in layer.list '^\./old/plain/d1/f0$'
n=$(grep -vc '^\./old/' layer.list)
want=$(( $(grep -c '^\./plain/' layer.list) + 12 ))
[ "$n" -le "$want" ] || fail "the layer has $n entries outside /old: $(grep -v '^\./old/' layer.list)"
expect_rc 0 $B image export-tar a.img base.tar /old
expect_rc 0 $B format -q --fs-size=512M b.img
expect_rc 0 $B image import-tar b.img base.tar
expect_rc 0 $B image import-tar b.img layer.tar
expect_rc 0 $B image extract a.img want /
expect_rc 0 $B image extract b.img got /
$T compare want got > cmp.out 2>&1 || fail "layer onto /old is not /: $(head -c 3000 cmp.out)"

# ---- refusals, nothing written
expect_rc 0 $B subvolume create a.img /other
before=$(sha a.img)
expect_rc 1 $B subvolume diff a.img /other /
expect_in err 'subvolume diff: /other and /: unrelated snapshots'
expect_rc 1 $B image export-tar --since=/other a.img x.tar /
expect_in err 'unrelated snapshots'
expect_rc 1 $B subvolume diff a.img /old /missing
expect_in err '/missing: No such file or directory'
expect_rc 1 $B subvolume diff a.img /plain /
expect_in err 'subvolume diff: /plain: not a subvolume'
expect_rc 1 $B image export-tar --since=/plain a.img x.tar
expect_in err '/plain: not a subvolume'
expect_rc 16 $B subvolume diff a.img /old
expect_rc 16 $B subvolume diff a.img
[ "$(sha a.img)" = "$before" ] || fail "a refused diff wrote to the image"

# ---- through FUSE: byte ranges of writes in place
if fuse_part "byte ranges of writes through FUSE"; then
	head -c 65536 /dev/urandom > m64
	printf 'four' > small
	expect_rc 0 $B format -q --fs-size=256M f.img
	expect_rc 0 $B image put f.img m64 /m
	expect_rc 0 $B image put f.img small /small
	expect_rc 0 $B subvolume snapshot f.img / /s
	mkdir mnt
	mnt=$PWD/mnt
	pid=
	trap 'cd /; [ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
	$B fusemount -f f.img mnt 2>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
	dd if=/dev/urandom of=mnt/m bs=4096 seek=5 count=2 conv=notrunc status=none || fail "dd"
	printf 'more' >> mnt/small
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	pid=
	expect_rc 0 $B subvolume diff --json f.img /s /
	[ "$(jq -c '.modified[] | select(.path=="/m") | .ranges' out)" = '[{"offset":20480,"length":8192}]' ] ||
		fail "ranges of /m: $(cat out)"
	[ "$(jq -c '.modified[] | select(.path=="/small") | [.old_size, .new_size]' out)" = '[4,8]' ] ||
		fail "sizes of /small: $(cat out)"
	expect_rc 0 $B subvolume diff f.img /s /
	expect_in out '^modified  /m 20480\+8192 \('
fi
