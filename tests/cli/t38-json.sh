# One JSON convention (issue 22; man bcachefs, JSON OUTPUT): every --json
# output validates against its schema in docs/json/ (python3-jsonschema),
# every key at every depth is snake_case, "version" comes first; a renamed
# key fails validation; and with bad input (a missing image, one that is not
# a filesystem, a damaged btree node) stdout holds valid JSON or nothing, the
# message is on stderr and the exit code is the documented one.
# Deterministic: fixed file contents, no random data.
need python3 jq
python3 -c 'import jsonschema' 2>/dev/null ||
	fail "no python3-jsonschema: make check installs it (scripts/install-deps.sh test)"
S=$ROOT/docs/json

# check.py LIST DIR: each line of LIST is "SCHEMA FILE ok|bad": FILE must be
# (ok) or must not be (bad) one JSON document valid against DIR/SCHEMA, with
# snake_case keys everywhere and "version" first.  One python3 run for all of
# them (importing jsonschema is the slow part).
cat > check.py <<'EOF'
import json, re, sys
from jsonschema import Draft202012Validator
def problems(schema, path):
    try:
        text = open(path, encoding="utf-8").read()	# JSON text is UTF-8
        doc = json.loads(text)
        first = json.loads(text, object_pairs_hook=lambda p: [k for k, _ in p])
    except ValueError as e:
        return ["not JSON: %s" % e]
    if not isinstance(first, list) or first[:1] != ["version"]:
        return ['"version" is not the first key']
    bad = []
    def keys(v, where):
        if isinstance(v, dict):
            for k, x in v.items():
                if not re.fullmatch(r"[a-z0-9_]+", k):
                    bad.append("key %r at %s is not snake_case" % (k, where))
                keys(x, where + "." + k)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                keys(x, "%s[%d]" % (where, i))
    keys(doc, "")
    errs = sorted(Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
    return bad + ["/%s: %s" % ("/".join(map(str, e.path)), e.message[:300]) for e in errs[:5]]
schemas, failed, n = {}, 0, 0
for line in open(sys.argv[1]):
    name, path, want = line.split()
    if name not in schemas:
        schemas[name] = json.load(open("%s/%s.schema.json" % (sys.argv[2], name)))
        Draft202012Validator.check_schema(schemas[name])
    p = problems(schemas[name], path)
    n += 1
    if want == "ok" and p:
        failed += 1
        print("%s against %s: %s" % (path, name, "; ".join(p)))
    elif want == "bad" and not p:
        failed += 1
        print("%s against %s: passed, but it should not" % (path, name))
print("%d documents checked against %d schemas, %d wrong" % (n, len(schemas), failed))
sys.exit(1 if failed else 0)
EOF
: > list.txt
# valid SCHEMA NAME: ./out (kept as NAME.json) must validate against docs/json/SCHEMA.schema.json
valid() {
	cp out "$2.json"
	echo "$1 $2.json ok" >> list.txt
}

mkdir -p src/dir/sub
printf 'hello\n' > src/hello.txt
printf 'nested file\n' > src/dir/sub/deep.txt
seq 1 20000 > src/dir/numbers.txt
ln -s hello.txt src/link
# a name that is not UTF-8 (Latin-1 "caf\xe9"): JSON shows it as U+FFFD
printf 'latin1\n' > "$(printf 'src/caf\351')"
truncate -s 64M a.img b.img
expect_rc 0 $B format -q --replicas 2 -L jsonfs --source src a.img b.img
F=a.img:b.img

# --- 1. every --json output against its schema -------------------------------
expect_rc 0 $B show-super --json a.img
valid show-super show-super
jq -e '.encrypted == (env.ENCRYPTED == "1") and .label == "jsonfs" and (.members | length) == 2 and .version == 1' out >/dev/null ||
	fail "show-super fields: $(head -c 600 out)"
expect_rc 0 $B show-super --json -l $F
valid show-super show-super-two
jq -e '(.superblocks | length) == 2 and (.superblocks[0].layout.copies_at_sector | length) > 1' out >/dev/null ||
	fail "show-super of two devices: $(head -c 600 out)"
expect_rc 0 $B show-super a.img
if encrypted; then expect_in out '^Encrypted: +yes$'; else expect_in out '^Encrypted: +no$'; fi
# an encrypted filesystem says so (format --encrypted, issue 21: the
# passphrase twice on stdin; a format that fails here fails the test)
truncate -s 32M enc.img
printf 'json-test-pass\njson-test-pass\n' | timeout 30 $B format -q --encrypted enc.img >enc.out 2>&1 ||
	fail "format --encrypted exited $?: $(cat enc.out)"
expect_rc 0 $B show-super --json enc.img
valid show-super show-super-encrypted
jq -e '.encrypted == true' out >/dev/null || fail "encrypted: $(head -c 600 out)"
expect_rc 0 $B show-super enc.img
expect_in out '^Encrypted: +yes$'
expect_rc 0 $B fs usage --json $F
valid fs-usage fs-usage
expect_rc 0 $B device stats --json $F
valid device-stats device-stats
expect_rc 0 $B fsck -n -f --json $F
valid fsck fsck
jq -e '.exit_code == 0 and .files_checked and .files == 5 and .dirents == 8' out >/dev/null || fail "fsck summary: $(cat out)"
expect_rc 0 $B list --json $F
valid list list
jq -e '[.btrees[] | select(.btree == "dirents") | .keys[]] | length == 8' out >/dev/null ||
	fail "list: dirents: $(head -c 600 out)"
expect_rc 0 $B list --json -m nodes -b extents $F
valid list list-nodes
expect_rc 0 $B list-journal --json $F
valid list-journal list-journal
expect_rc 0 $B image ls --json -R $F
valid image-ls image-ls
jq -e '[.entries[].path] | index("/dir/sub/deep.txt") != null' out >/dev/null || fail "ls -R: $(head -c 600 out)"
jq -e '.entries[] | select(.path == "/link") | .target == "hello.txt"' out >/dev/null || fail "ls: symlink target"
jq -e '[.entries[].path] | index("/caf\ufffd") != null' out >/dev/null || fail "ls: a Latin-1 name: $(head -c 600 out)"
expect_rc 0 $B image stat --json $F /hello.txt /dir /link
valid image-stat image-stat
jq -e '(.files | length) == 3 and .files[0].size == 6' out >/dev/null || fail "stat: $(cat out)"
expect_rc 0 $B help-opts --json
valid help-opts help-opts
expect_rc 0 $B data scrub --json $F
valid data-scrub data-scrub
expect_rc 0 $B data rebalance --json $F
valid data-rebalance data-rebalance
truncate -s 32M c.img
expect_rc 0 $B device add --json $F c.img
valid device-add device-add
F=$F:c.img
expect_rc 0 $B device resize --json $F c.img 48M
valid device-resize device-resize
expect_rc 0 $B format --json --source src small.img
valid format format
# what a --spec file did (issue 33), in format and image import-tar
printf '/dev d 755 0 0\n/dev/null c 666 0 0 1 3\n/hello.txt m 600 0 0\n' > spec.txt
expect_rc 0 $B format --json --spec=spec.txt --source src spec.img
valid format format-spec
jq -e '.spec.file == "spec.txt" and .spec.entries == 3 and .spec.created == 2 and
	.spec.modified == 1' out >/dev/null || fail "format --spec --json: $(cat out)"
tar cf src.tar -C src .
expect_rc 0 $B format -q --fs-size=64M tar.img
expect_rc 0 $B image import-tar --json --spec=spec.txt tar.img src.tar
valid image-import-tar image-import-tar
# what image update changed: counts and the changes
printf 'new\n' > src/new-file
chmod 600 src/hello.txt
expect_rc 0 $B image update --dry-run --json spec.img src
valid image-update image-update-dry
expect_rc 0 $B image update --json spec.img src
valid image-update image-update
jq -e '.dry_run == false and .created == 1 and
	([.changes[] | select(.change == "created" and .path == "/new-file")] | length) == 1' out \
	>/dev/null || fail "image update --json: $(cat out)"
expect_rc 0 $B image shrink --json small.img
valid image-shrink image-shrink
expect_rc 0 $B device evacuate --json $F c.img
valid device-evacuate device-evacuate
expect_rc 0 $B device remove --json $F c.img
valid device-remove device-remove
F=a.img:b.img
expect_rc 0 $B data rereplicate --json $F
valid data-rereplicate data-rereplicate
# subvolume diff: a snapshot of /, then a file added and one changed in /
expect_rc 0 $B format -q --fs-size=64M --source src sv.img
expect_rc 0 $B subvolume snapshot sv.img / /snap
expect_rc 0 $B image put sv.img src/hello.txt /after
expect_rc 0 $B image chmod sv.img 600 /hello.txt
expect_rc 0 $B subvolume diff --json sv.img /snap /
valid subvolume-diff subvolume-diff
jq -e '([.added[].path] | index("/after")) != null and .metadata_only[0].path == "/"' out >/dev/null ||
	fail "subvolume diff --json: $(cat out)"
# fs timestats: a fusemount daemon's request statistics
mkdir tsm
$B fusemount "$PWD/sv.img" tsm || fail "fusemount sv.img"
ls -lR tsm > /dev/null
expect_rc 0 $B fs timestats --json tsm
fusermount3 -u tsm || fail "fusermount3 -u tsm"
valid fs-timestats fs-timestats
jq -e '(.requests | length) > 0' out >/dev/null || fail "fs timestats --json: $(cat out)"

# every schema in docs/json is used
for s in "$S"/*.schema.json; do
	n=$(basename "$s" .schema.json)
	[ -e "$n.json" ] || fail "docs/json/$n.schema.json: no test output validated against it"
done

# --- 2. the schemas catch a renamed key, a display label, a missing version ----
sed 's/"free_buckets"/"Free buckets"/' fs-usage.json > renamed-label.json
sed 's/"uuid"/"uuid_"/' show-super.json > renamed-key.json
sed 's/"version": 1,//' fsck.json > no-version.json
sed 's/"size": [0-9]*/"size": "64M"/' image-stat.json > human-size.json
printf 'fs-usage renamed-label.json bad\nshow-super renamed-key.json bad\n' >> list.txt
printf 'fsck no-version.json bad\nimage-stat human-size.json bad\n' >> list.txt

# --- 3. bad input: valid JSON or nothing on stdout, message, documented exit --
# bad RC SCHEMA CMD...: exits RC, says why on stderr, stdout empty or valid
bad() {
	want=$1 schema=$2; shift 2
	expect_rc "$want" "$@"
	[ -s err ] || fail "'$*': no message on stderr"
	nbad=$((nbad + 1))
	if [ -s out ]; then
		cp out "bad-$nbad.json"
		echo "$schema bad-$nbad.json ok" >> list.txt
	fi
}
nbad=0
# (fsck: 8 operational error; 12 = 8 + 4, the problem "no valid superblock" left)
for img in missing.img zero.img; do
	fsck_rc=8
	[ $img = zero.img ] && truncate -s 32M zero.img && fsck_rc=12
	bad 1 show-super $B show-super --json $img
	bad 1 fs-usage $B fs usage --json $img
	bad $fsck_rc fsck $B fsck -n --json $img
	bad 1 list $B list --json $img
	bad 1 list-journal $B list-journal --json $img
	bad 1 image-ls $B image ls --json $img
	bad 1 image-stat $B image stat --json $img /
done
# a path that does not exist: the others are still listed
bad 1 image-stat $B image stat --json $F /hello.txt /nope
jq -e '(.files | length) == 1' out >/dev/null || fail "stat with a missing path: $(cat out)"
# show-super of two devices, the second bad: nothing at all on stdout
expect_rc 1 $B show-super --json a.img:zero.img
[ ! -s out ] || fail "show-super: half a document: $(head -c 300 out)"
# a damaged btree node (one device, no other copy): list stops there and
# still ends its document, with "error"
truncate -s 32M s.img
expect_rc 0 $B format -q --source src s.img
expect_rc 0 $B show-super --json s.img
sec=$(jq '.clean.roots[] | select(.btree == "dirents") | .ptrs[0].sector' out)
[ -n "$sec" ] || fail "no dirents root in $(head -c 300 out)"
printf 'this is not a btree node' | dd of=s.img bs=512 seek="$sec" conv=notrunc status=none
bad 1 list $B list --json s.img
jq -e '.error | test("dirents")' out >/dev/null || fail "list: no error member: $(tail -c 300 out)"
expect_in err 'bcachefs list: dirents'

# --- 4. validate everything kept above, in one run -----------------------------
python3 check.py list.txt "$S" > check.log 2>&1 || fail "schema validation:
$(cat check.log)"
cat check.log
