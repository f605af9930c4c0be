# image update into a subvolume, and subvolume diff on a mount (issue 30):
#   - one image holds a base (format --source --subvolume base) and
#     snapshots v1, v2 and a read-only ro of it; seeded edits of the tree
#     go into v1 with `image update --subvolume v1 IMG DIR` (the option
#     before the device, its value apart) and into a directory of v2 by a
#     path through it: each subvolume extracted equals what it was given
#     (treetool compare), the others are untouched (extract, and subvolume
#     diff: v2's changes all lie under the directory updated); a second
#     update changes nothing; fsck is clean;
#   - a diff naming a file by number (its first link removed) gives its
#     own fields;
#   - refusals, nothing written (sha): --subvolume ro and a path through ro
#     (exit 1, Read-only file system; --dry-run may look), --subvolume of a
#     directory that is not a subvolume's root, of a missing path (exit 1),
#     an empty --subvolume (exit 16);
#   - through fusemount: files written, removed and renamed in v2 and a
#     snapshot made there; subvolume diff OLD NEW [--json] with paths under
#     the mount prints exactly what the offline form prints for the same
#     snapshots after the unmount; a mounted diff of a path that is not a
#     subvolume is refused (exit 1).
need python3 jq
T="python3 $ROOT/tests/cli/treetool.py"
SEED=${SEED:-67}
echo "seed $SEED"

$T gen src "$SEED" 150 || fail "treetool gen"
# a directory without hard links to names outside it, updated on its own below
mkdir -p src/plain/d1 src/plain/d2
for i in 1 2 3 4 5 6 7 8; do
	echo "plain $i" > src/plain/d$((i % 2 + 1))/f$i
	echo "top $i" > src/plain/t$i
done
expect_rc 0 $B format -q --fs-size=128M --source src --subvolume base img
expect_rc 0 $B subvolume snapshot img /base /v1
expect_rc 0 $B subvolume snapshot img /base /v2
expect_rc 0 $B subvolume snapshot -r img /base /ro

cat > edit.py <<'PY'
import os, random, stat, sys
root, seed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(seed)
files, dirs = [], []
for dp, dns, fns in os.walk(root):
    dirs += [os.path.join(dp, d) for d in dns]
    for f in fns:
        p = os.path.join(dp, f)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and len(f) < 200:
            files.append(p)
files.sort(); dirs.sort()
rnd.shuffle(files)
for p in files[:6]:
    with open(p, 'ab') as f:
        f.write(b'edited %d\n' % rnd.randrange(1 << 30))
for p in files[6:9]:
    os.unlink(p)
for p in files[9:12]:
    os.chmod(p, 0o600 if os.stat(p).st_mode & 0o777 != 0o600 else 0o640)
for p in files[12:14]:
    os.rename(p, p + '.renamed')
for i in range(5):
    open(os.path.join(rnd.choice(dirs), 'added%d' % i), 'w').write('added %d\n' % i)
os.makedirs(os.path.join(rnd.choice(dirs), 'newdir', 'deeper'))
PY
cp -a src v1src
python3 edit.py v1src "$SEED" || fail "edit"

# ---- into v1: the option before the device, its value apart
expect_rc 0 $B image update --subvolume v1 img v1src
expect_in out '^W /v1/'
expect_not_in out '^[-+RWM] /(base|v2|ro)'
expect_rc 0 $B image update img --subvolume=/v1 v1src
[ ! -s out ] || fail "a second update changed: $(cat out)"

# ---- a directory of v2, by a path through it
sub=plain
cp -a "src/$sub" v2src
python3 edit.py v2src $((SEED + 1)) || fail "edit v2"
expect_rc 0 $B image update --json img v2src "/v2/$sub"
jq -e '.changes | length > 0 and all(.path | startswith("/v2/'"$sub"'"))' out >/dev/null ||
	fail "v2's changes: $(cat out)"

# each subvolume holds what it was given; the others are untouched
expect_rc 0 $B image extract img x.base /base
$T compare src x.base > cmp.out 2>&1 || fail "the base changed: $(head -c 2000 cmp.out)"
expect_rc 0 $B image extract img x.ro /ro
$T compare src x.ro > cmp.out 2>&1 || fail "the read-only snapshot changed: $(head -c 2000 cmp.out)"
expect_rc 0 $B image extract img x.v1 /v1
$T compare v1src x.v1 > cmp.out 2>&1 || fail "v1 is not v1src: $(head -c 2000 cmp.out)"
expect_rc 0 $B image extract img x.v2sub "/v2/$sub"
$T compare v2src x.v2sub > cmp.out 2>&1 || fail "v2's directory is not v2src: $(head -c 2000 cmp.out)"
expect_rc 0 $B subvolume diff img /base /ro
[ ! -s out ] || fail "base and ro differ: $(cat out)"
expect_rc 0 $B subvolume diff img /base /v2
[ -s out ] || fail "no change in v2"
awk '{ print $2 }' out | grep -v "^/$sub\(/\|\$\)" | grep -v '^/$' > stray
[ ! -s stray ] || fail "v2 changed outside /$sub: $(cat stray)"
expect_rc 0 $B subvolume diff img /base /v1
expect_in out '^modified '
expect_in out '^deleted '
expect_in out '^added '
expect_rc 0 $B fsck -n img

# ---- refusals: nothing written
before=$(sha img)
expect_rc 1 $B image update --subvolume ro img v1src
expect_in err 'image update: /ro: Read-only file system'
expect_rc 1 $B image update img v1src /ro
expect_in err 'Read-only file system'
expect_rc 0 $B image update --dry-run --subvolume ro img v1src
expect_in out '^W /ro/'
expect_rc 1 $B image update --subvolume "/base/$sub" img v1src
expect_in err "subvolume /base/$sub: not a subvolume"
expect_rc 1 $B image update --subvolume nosuch img v1src
expect_in err 'nosuch: No such file or directory'
expect_rc 16 $B image update --subvolume= img v1src
[ "$(sha img)" = "$before" ] || fail "a refused update wrote to the image"

# ---- a file whose first link went is named by number in a diff, with its
# own fields (not those of an empty inode: "modified ... size 2->0")
mkdir -p hl/a hl/b
echo x > hl/a/f
ln hl/a/f hl/b/g
expect_rc 0 $B format -q --fs-size=32M --source hl --subvolume base h.img
expect_rc 0 $B subvolume snapshot h.img /base /s
expect_rc 0 $B image rm h.img /s/a/f
expect_rc 0 $B subvolume diff h.img /base /s
expect_in out '^metadata  \?inode:[0-9]+ ctime,nlink$'
expect_not_in out '^modified'

# ---- subvolume diff through a mount equals the offline form
if fuse_part "subvolume diff on a mount"; then
	mkdir mnt
	mnt=$PWD/mnt
	pid=
	trap 'cd /; [ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
	$B fusemount -f img mnt 2>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
	echo "written through the mount" > "mnt/v2/$sub/mounted-new"
	f=$(cd mnt/v2 && find . -type f -size +0 | sort | head -1)
	printf 'tail' >> "mnt/v2/$f"
	g=$(cd mnt/v2 && find . -type f | sort | tail -1)
	mv "mnt/v2/$g" "mnt/v2/$g.moved"
	expect_rc 0 $B subvolume snapshot mnt/v2 mnt/v3
	rm "mnt/v2/$sub/mounted-new"
	expect_rc 0 $B subvolume diff mnt/base mnt/v2
	cp out m.base-v2
	expect_in out "^modified  /${f#./} "
	expect_rc 0 $B subvolume diff --json mnt/v1 mnt/v3
	cp out m.v1-v3.json
	expect_rc 0 $B subvolume diff mnt/v3 mnt/v2
	cp out m.v3-v2
	expect_in out "^deleted   /$sub/mounted-new\$"
	expect_rc 1 $B subvolume diff mnt/base "mnt/v2/$sub"
	expect_in err "subvolume diff: /v2/$sub: not a subvolume"
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	pid=
	expect_rc 0 $B subvolume diff img /base /v2
	cmp -s out m.base-v2 || fail "mounted and offline diffs differ: $(diff m.base-v2 out)"
	expect_rc 0 $B subvolume diff --json img /v1 /v3
	cmp -s out m.v1-v3.json || fail "mounted and offline --json differ: $(diff m.v1-v3.json out)"
	expect_rc 0 $B subvolume diff img /v3 /v2
	cmp -s out m.v3-v2 || fail "mounted and offline diffs v3 v2 differ: $(diff m.v3-v2 out)"
	expect_rc 0 $B fsck -n img
fi
