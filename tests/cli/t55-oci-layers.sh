# image import-tar of OCI layers: a base and two layers with whiteouts of a
# file, of a directory, of a symlink, opaque directories (before and after
# the layer's own entries in them), applied in order, give the tree that
# the OCI rules (image-spec layer.md, "Whiteouts") give, computed here
# independently in python; --no-whiteouts keeps ".wh." files as files; bad
# archives (absolute names, "..", hard links out, ".wh..") are refused
# naming the entry, exit 1, with the image file unchanged.
need python3
cat > oci.py <<'PY'
import hashlib, io, json, os, stat, sys, tarfile

T0 = 1700000000

def add(tf, name, kind='f', data=b'', target=None, mode=None):
    ti = tarfile.TarInfo(name)
    ti.mtime = T0
    ti.uid, ti.gid = os.getuid(), os.getgid()
    if kind == 'd':
        ti.type, ti.mode = tarfile.DIRTYPE, mode or 0o755
        tf.addfile(ti)
    elif kind == 'l':
        ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, target, 0o777
        tf.addfile(ti)
    elif kind == 'h':
        ti.type, ti.linkname, ti.mode = tarfile.LNKTYPE, target, 0o644
        tf.addfile(ti)
    else:
        ti.size, ti.mode = len(data), mode or 0o644
        tf.addfile(ti, io.BytesIO(data))

def build(path, entries):
    with tarfile.open(path, 'w', format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            add(tf, *e)

BASE = [
    ('etc', 'd'), ('etc/passwd', 'f', b'root:x:0:0\n'), ('etc/hosts', 'f', b'127.0.0.1 lo\n'),
    ('usr', 'd'), ('usr/lib', 'd'), ('usr/lib/a.so', 'f', b'A' * 5000),
    ('usr/lib/b.so', 'f', b'B' * 10), ('usr/lib/sub', 'd'), ('usr/lib/sub/c', 'f', b'c'),
    ('opt', 'd'), ('opt/app', 'd'), ('opt/app/x', 'f', b'x'), ('opt/app/y', 'd'),
    ('opt/app/y/z', 'f', b'z' * 70000), ('var', 'd'), ('var/cache', 'd'),
    ('var/cache/k1', 'f', b'k1'), ('var/cache/k2', 'f', b'k2'),
    ('link', 'l', b'', 'etc/hosts'), ('hl', 'h', b'', 'etc/passwd'),
]
L1 = [
    ('etc', 'd'), ('etc/.wh.hosts', 'f'),                   # a file
    ('etc/new', 'f', b'new in 1\n'),
    ('opt', 'd'), ('opt/.wh.app', 'f'),                     # a whole directory
    ('var', 'd'), ('var/cache', 'd'), ('var/cache/.wh..wh..opq', 'f'),  # opaque, first
    ('var/cache/k3', 'f', b'k3'),
    ('usr', 'd'), ('usr/lib', 'd'), ('usr/lib/a.so', 'f', b'a' * 3000),
    ('srv', 'd'), ('srv/.wh.nothing', 'f'),                 # whiteout of nothing
]
L2 = [
    ('usr', 'd'), ('usr/lib', 'd'), ('usr/lib/newfile', 'f', b'n'),
    ('usr/lib/sub', 'd'), ('usr/lib/sub/d', 'f', b'd'),
    ('usr/lib/.wh..wh..opq', 'f'),                          # opaque, after its own entries
    ('opt', 'd'), ('opt/app', 'd'), ('opt/app/q', 'f', b'q'),
    ('etc', 'd'), ('etc/.wh.new', 'f'),
    ('etc/again', 'f', b'same layer'), ('etc/.wh.again', 'f'),  # same layer: stays
    ('.wh.link', 'f'),                                      # a symlink
]

def apply(state, layer):
    """The OCI rules, on a dict path -> entry."""
    made = set()
    def mark(p):
        while p:
            made.add(p)
            p = os.path.dirname(p)
    def under(p):
        return [k for k in state if k == p or k.startswith(p + '/')]
    for e in layer:
        name = e[0]
        d, b = os.path.dirname(name), os.path.basename(name)
        if b.startswith('.wh.'):
            mark(d)
            victims = under(os.path.join(d, b[4:])) if b != '.wh..wh..opq' else \
                [k for k in under(d) if k != d] if d else list(state)
            for k in victims:
                if k not in made:
                    del state[k]
            continue
        mark(name)
        state[name] = e

def manifest(state):
    m = {}
    for k, e in state.items():
        kind = e[1]
        if kind == 'h':     # a hard link: the content of its target
            kind, data = 'f', state[e[3]][2]
        else:
            data = e[2] if len(e) > 2 else b''
        m[k] = [kind, hashlib.sha256(data).hexdigest() if kind == 'f' else
                e[3] if kind == 'l' else '']
    return m

def walk(root):
    m = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            k = os.path.relpath(p, root)
            if k == 'lost+found' or k.startswith('lost+found/'):
                continue    # the filesystem's own
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                m[k] = ['d', '']
            elif stat.S_ISLNK(st.st_mode):
                m[k] = ['l', os.readlink(p)]
            else:
                m[k] = ['f', hashlib.sha256(open(p, 'rb').read()).hexdigest()]
    return m

cmd = sys.argv[1]
if cmd == 'make':
    build('base.tar', BASE); build('l1.tar', L1); build('l2.tar', L2)
    state = {}
    for l in (BASE, L1, L2):
        apply(state, l)
    json.dump(manifest(state), open('expect.json', 'w'), indent=1, sort_keys=True)
    build('abs.tar', [('ok', 'f', b'1'), ('/etc/evil', 'f', b'x')])
    build('dotdot.tar', [('ok', 'f', b'1'), ('a/../../evil', 'f', b'x')])
    build('hlout.tar', [('ok', 'f', b'1'), ('h', 'h', b'', '../../etc/passwd')])
    build('whdot.tar', [('ok', 'f', b'1'), ('d', 'd'), ('d/.wh..', 'f')])
    build('plain.tar', [('d', 'd'), ('d/.wh.keep', 'f', b'kept'), ('d/keep', 'f', b'k')])
elif cmd == 'check':
    want, got = json.load(open('expect.json')), walk(sys.argv[2])
    for k in sorted(set(want) | set(got)):
        if want.get(k) != got.get(k):
            print('%s: want %s, got %s' % (k, want.get(k), got.get(k)))
            sys.exit(1)
    print('%d paths as the OCI rules give' % len(want))
PY
python3 oci.py make || fail "building the tars"
expect_in expect.json '"usr/lib/newfile"'
expect_not_in expect.json '"etc/hosts"|"opt/app/x"|"var/cache/k1"|"usr/lib/a.so"|"link"|wh'

expect_rc 0 $B format -q --fs-size=64M img
for l in base l1 l2; do
	expect_rc 0 $B image import-tar img $l.tar
done
expect_rc 0 $B fsck -n img
expect_rc 0 $B image extract img xd
expect_rc 0 python3 oci.py check xd
cat out
# the same layers into a subdirectory: whiteouts stay inside it
expect_rc 0 $B image mkdir img /sub
for l in base l1 l2; do
	expect_rc 0 $B image import-tar img $l.tar /sub
done
rm -rf xd && expect_rc 0 $B image extract img xd
expect_rc 0 python3 oci.py check xd/sub
# and from stdin
expect_rc 0 $B format -q --fs-size=64M img2
for l in base l1 l2; do
	$B image import-tar img2 - < $l.tar || fail "import-tar - < $l.tar"
done
rm -rf xd && expect_rc 0 $B image extract img2 xd
expect_rc 0 python3 oci.py check xd

# --no-whiteouts: a plain tar's ".wh." file is a file
expect_rc 0 $B format -q --fs-size=64M img3
expect_rc 0 $B image import-tar --no-whiteouts img3 plain.tar
expect_rc 0 $B image cat img3 /d/.wh.keep
expect_in out '^kept$'
expect_rc 0 $B image import-tar img3 plain.tar	# with whiteouts: removes d/keep, adds it again
expect_rc 0 $B image ls img3 /d
expect_in out keep

# bad archives: refused naming the entry, exit 1, the image file untouched
before=$(sha img3)
for t in abs:/etc/evil dotdot:a/../../evil "hlout:h: hard link to ../../etc/passwd" whdot:d/.wh..; do
	expect_rc 1 $B image import-tar img3 ${t%%:*}.tar
	expect_in err "import-tar: [^:]*: ${t#*:}"
	[ "$(sha img3)" = "$before" ] || fail "${t%%:*}.tar: the image changed"
	# from stdin the entries before it are in; the bad one still stops it
	run sh -c "$B image import-tar img3 - < ${t%%:*}.tar"
	[ "$rc" = 1 ] || fail "stdin ${t%%:*}.tar: exit $rc"
	expect_in err "import-tar: [^:]*: ${t#*:}"
	before=$(sha img3)
done
expect_rc 0 $B image ls img3 /
expect_not_in out evil
expect_rc 0 $B fsck -n img3
