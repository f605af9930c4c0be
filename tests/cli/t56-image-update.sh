# image update IMG DIR: seeded random edits to a tree (modify, add, delete,
# chmod, rename, symlink retarget, xattr change, file <-> directory, a new
# hard link), then update: extract equals DIR, fsck clean, and every file
# not edited keeps its extents (the same `list -b extents` lines); a second
# update changes nothing; --dry-run writes nothing; --json counts; a
# same-size same-mtime content change is found only by --checksum; an
# image with a damaged btree node is refused before anything is written.
need python3
T="python3 $ROOT/tests/cli/treetool.py"
SEED=${SEED:-56}
echo "seed $SEED"
$T gen src 5 1500 || fail "gen"
expect_rc 0 $B format -q --fs-size=512M --source src img

cat > edit.py <<'PY'
import os, random, stat, sys
root, seed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(seed)
files, dirs, links = [], [], []
for dp, dns, fns in os.walk(root):
    dirs += [os.path.join(dp, d) for d in dns]
    for f in fns:
        p = os.path.join(dp, f)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and len(f) < 200:
            files.append(p)
        elif stat.S_ISLNK(st.st_mode):
            links.append(p)
files.sort(); dirs.sort(); links.sort()
rnd.shuffle(files)
touched = []
def take(n):
    out = files[:n]
    del files[:n]
    touched.extend(out)
    return out
for p in take(10):                                  # modify
    with open(p, 'ab') as f:
        f.write(b'edited %d\n' % rnd.randrange(1 << 30))
for p in take(5):                                   # delete
    os.unlink(p)
for p in take(5):                                   # chmod
    os.chmod(p, 0o600 if os.stat(p).st_mode & 0o777 != 0o600 else 0o640)
for p in take(5):                                   # rename
    os.rename(p, p + '.renamed')
for p in take(5):                                   # xattr
    os.setxattr(p, 'user.edited', b'%d' % rnd.randrange(1000))
for p in take(3):                                   # a file becomes a directory
    os.unlink(p); os.mkdir(p); open(os.path.join(p, 'inside'), 'w').write('in\n')
for p in take(3):                                   # a new hard link
    os.link(p, p + '.link')
for i in range(10):                                 # add
    d = rnd.choice(dirs)
    open(os.path.join(d, 'added%02d' % i), 'w').write('added %d\n' % i * (i + 1))
nd = os.path.join(rnd.choice(dirs), 'newdir')
os.makedirs(os.path.join(nd, 'deeper'))
open(os.path.join(nd, 'deeper', 'f'), 'w').write('deep\n')
for p in links[:3]:                                 # symlink retarget
    os.unlink(p); os.symlink('retargeted/' + os.path.basename(p), p)
victim = dirs[len(dirs) // 2]                       # a whole directory goes
for dp, dns, fns in os.walk(victim, topdown=False):
    for f in fns:
        touched.append(os.path.join(dp, f)); os.unlink(os.path.join(dp, f))
    for d in dns:
        os.rmdir(os.path.join(dp, d))
os.rmdir(victim)
# untouched regular files, to check their extents
keep = [p for p in files if os.path.exists(p) and os.path.getsize(p) > 0
        and ' ' not in p and not p.startswith(victim + '/')][:40]
open('keep', 'w').write(''.join('/' + os.path.relpath(p, root) + '\n' for p in keep))
PY

# the inodes of the files kept, and their extent lines
extents_of() {
	: > "$2"
	for ino in $(cat inos); do
		$B list -b extents -s $ino:0:0 -e $ino:18446744073709551615:4294967295 img |
			grep "^$ino:" >> "$2" || true
	done
}
python3 edit.py src $SEED || fail "edit"
[ "$(wc -l < keep)" -ge 20 ] || fail "too few files kept: $(wc -l < keep)"
expect_rc 0 $B image stat --json img $(cat keep)
grep -o '"inode": [0-9]*' out | cut -d' ' -f2 > inos
[ "$(wc -l < inos)" = "$(wc -l < keep)" ] || fail "inodes of the kept files: $(head -c 500 out)"
extents_of img before
[ -s before ] || fail "no extents for the kept files"

# --dry-run: prints the changes, writes nothing
s0=$(sha img)
expect_rc 0 $B image update --dry-run img src
expect_in out '^W /'
expect_in out '^\+ /.*added'
expect_in out '^- /'
expect_in out '^R /'
expect_in out '^M /'
cp out dry
[ "$(sha img)" = "$s0" ] || fail "--dry-run changed the image"
expect_rc 0 $B image update --dry-run --json img src
expect_in out '"dry_run": true'
dry_json=$(sed 's/"dry_run": true, //' out)

expect_rc 0 $B image update img src
cmp -s out dry || fail "update printed other changes than --dry-run: $(diff dry out)"
expect_rc 0 $B fsck -n img
expect_rc 0 $B image extract img xd
expect_rc 0 $T compare src xd
extents_of img after
cmp -s before after || fail "kept files' extents changed:
$(diff before after | head)"

# nothing left to do: no lines, counts say so
expect_rc 0 $B image update --json img src
expect_in out '"created": 0, "removed": 0, "replaced": 0, "written": 0, "metadata_only": 0, '
expect_in out '"bytes_written": 0'
# the --json of the dry run had the counts of the real one
[ "$(printf '%s' "$dry_json" | sed 's/.*"created"/"created"/; s/, "unchanged".*//')" != \
  "$(sed 's/.*"created"/"created"/; s/, "unchanged".*//' out)" ] || fail "dry run counted nothing"
# `sync` is the same verb
expect_rc 0 $B image sync img src
[ ! -s out ] || fail "sync of an equal tree printed: $(cat out)"

# same size, same mtime, other content: only --checksum sees it
f=$(sed -n 1p keep)
python3 - "src$f" <<'PY' || fail "rewrite"
import os, sys
p = sys.argv[1]
st = os.stat(p)
d = bytearray(open(p, 'rb').read()); d[0] ^= 0xff
open(p, 'wb').write(d)
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
PY
expect_rc 0 $B image update img src
expect_not_in out "$f"
expect_rc 0 $B image update --checksum --json img src
expect_in out '"written": 1,'
rm -rf xd && expect_rc 0 $B image extract img xd
expect_rc 0 $T compare src xd

# bad arguments and a damaged image: refused, nothing written
expect_rc 1 $B image update img no-such-dir
expect_in err 'image update: no-such-dir: '
expect_rc 16 $B image update img
expect_rc 0 $B list -b dirents -m nodes img
sec=$(sed -n '/^node level 0/s/.* ptr 0:\([0-9]*\) .*/\1/p' out | tail -1)
[ -n "$sec" ] || fail "no dirents leaf: $(cat out)"
printf '\377\377\377\377' | dd of=img bs=1 seek=$((sec * 512 + 40)) conv=notrunc status=none
echo new > src/after-damage
s1=$(sha img)
run $B image update img src
[ "$rc" = 1 ] || fail "update of a damaged image exited $rc: $(cat err)"
expect_in err '^bcachefs image update: '
[ "$(sha img)" = "$s1" ] || fail "a refused update wrote to the image"
