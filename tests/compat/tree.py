#!/usr/bin/env python3
"""The source trees and manifests of the format compatibility corpus.

  tree.py gen SET DIR      write the seeded trees SET,... (base, mini, files,
                           data, late, many) under DIR; content comes from SHA-256 of
                           fixed labels, never from the machine, so the same
                           command gives the same bytes on every host and
                           every Python
  tree.py manifest DIR [--opts FILE] [--skip PATH]...
                           print the manifest of the tree under DIR (one line
                           per entry, sorted by path); --opts FILE adds the
                           per-file options (bcachefs.* xattrs) that FILE,
                           the output of `bcachefs image shell` getfattr
                           lines, lists
  tree.py getfattr-script MANIFEST
                           the `image shell` lines that read every entry's
                           bcachefs.* options (directories and regular files)
  tree.py verify WANT TREE OPTS [--ignore PATH]...
                           manifest TREE (options from OPTS) into
                           TREE.manifest and compare it with WANT
  tree.py compare WANT GOT [--ignore PATH]...
                           print the differences of two manifests (entry
                           lines only; header lines start with '%' or '#'),
                           but not of the PATHs; exit 1 when there is one

A manifest entry line is the percent-encoded path followed by key=value
fields, values percent-encoded:
  type=f|d|l|p|c|b  mode=0644 (permission and set-id bits, octal)
  owner=UID:GID  mtime=NS (signed ns since 1970; not for symlinks' targets)
  size=N sha256=HEX (regular files)  nlink=N and hardlink=FIRST-PATH when a
  file has several names  target=T (symlinks)  rdev=MAJ:MIN (devices)
  xattr.NAME=VALUE (every namespace the host shows: user, trusted, security,
  system.posix_acl_*; values over 64 bytes as sha256:HEX+LEN)
  opt.NAME=VALUE (per-file options, bcachefs.NAME, when --opts was given)
lost+found is listed by type, mode and owner only (format makes it).
"""
import hashlib
import os
import stat
import struct
import sys
import urllib.parse

T0 = 1700000000 * 10**9		# the tree's times start here (ns)


# ---------------------------------------------------------------- content

def stream(label, n):
    """n bytes of SHA-256 in counter mode over label: incompressible."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(("%s:%d" % (label, i)).encode()).digest()
        i += 1
    return bytes(out[:n])


class Rand:
    """A small deterministic generator (SHA-256 of label and counter)."""
    def __init__(self, label):
        self.label = label
        self.i = 0

    def below(self, n):
        self.i += 1
        v = int.from_bytes(hashlib.sha256(("%s#%d" % (self.label, self.i)).encode()).digest()[:8], "little")
        return v % n


WORDS = ("the a of journal bucket extent inode btree node key replica device "
         "checksum compress copy write read seek sector block file directory "
         "link xattr option target label cache tier data metadata format "
         "version superblock member allocate free gen seq flush commit").split()


def text(label, n):
    """n bytes of word salad with line numbers: compresses about 3x."""
    r = Rand(label)
    out = []
    size = 0
    line = 0
    while size < n:
        line += 1
        s = "%05d " % line + " ".join(WORDS[r.below(len(WORDS))] for _ in range(4 + r.below(9))) + "\n"
        out.append(s)
        size += len(s)
    return "".join(out).encode()[:n]


def blocks(label, n):
    """n bytes of 4 KiB blocks, each stamped with its label and number and
    filled with one of four random 512-byte chunks repeated: a misplaced,
    lost or repeated block changes the hash, yet every compressor (and zstd
    in git) stores the file in a few KiB."""
    pool = [stream("%s/chunk%d" % (label, k), 512) for k in range(4)]
    r = Rand(label)
    out = bytearray()
    b = 0
    while len(out) < n:
        head = ("%s block %06d\n" % (label, b)).encode()
        out += head + (pool[r.below(4)] * 8)[len(head):]
        b += 1
    return bytes(out[:n])


def write(path, data, mode=0o644, mtime=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime))


def acl(entries):
    """The system.posix_acl_* xattr value of [(tag, perm, id)]."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)


ACL_UNDEF = 0xffffffff
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 1, 2, 4, 8, 0x10, 0x20


# ---------------------------------------------------------------- the sets

def gen_base(d):
    """What every image holds (~40 KiB): nested directories, text and
    random files of edge sizes, odd names, every kind of symlink, hard
    links across directories, xattrs of every namespace (one kept in pieces),
    POSIX ACLs, owners, set-id modes, devices and a fifo, odd times."""
    t = T0
    for i, n in enumerate([0, 1, 511, 512, 4095, 4096, 4097, 3000, 6000, 12345]):
        write(os.path.join(d, "text", "t%02d" % i), text("base/t%d" % i, n), mtime=t + i)
    write(os.path.join(d, "docs", "readme.txt"), text("base/readme", 2500), mtime=t)
    write(os.path.join(d, "docs", "a", "b", "c", "deep.txt"), text("base/deep", 700), mtime=t)
    for i, n in enumerate([100, 3000, 6000]):
        write(os.path.join(d, "bin", "r%d" % i), stream("base/r%d" % i, n), mode=0o600, mtime=t)
    names = ["with space", "\u00fcn\u00efc\u00f8d\u00e9-\u540d\u524d", "-dash", "..dots",
             "x" * 255, "tab\tin", "quote'\"", "%percent"]
    for i, n in enumerate(names):
        write(os.path.join(d, "names", n), ("name %d\n" % i).encode(), mtime=t)
    # symlinks
    ln = os.path.join(d, "links")
    os.makedirs(ln)
    for name, target in [("rel", "../docs/readme.txt"), ("abs", "/etc/passwd"),
                         ("dangling", "nowhere/x"), ("dir", "../docs"),
                         ("long", "/".join(["seg%03d" % i for i in range(150)])),
                         ("max", "y" * 4095)]:
        os.symlink(target, os.path.join(ln, name))
        os.chown(os.path.join(ln, name), 1000, 1000, follow_symlinks=False)
        os.utime(os.path.join(ln, name), ns=(t + 5, t + 5), follow_symlinks=False)
    # hard links: three names in two directories, and a pair
    write(os.path.join(d, "hard", "one"), text("base/hard", 1500), mtime=t)
    os.link(os.path.join(d, "hard", "one"), os.path.join(d, "hard", "two"))
    os.link(os.path.join(d, "hard", "one"), os.path.join(d, "docs", "also-one"))
    write(os.path.join(d, "hard", "pair-a"), b"pair\n", mtime=t)
    os.link(os.path.join(d, "hard", "pair-a"), os.path.join(d, "hard", "pair-b"))
    # xattrs
    x = os.path.join(d, "xattr", "small")
    write(x, b"xattrs\n", mtime=t)
    os.setxattr(x, "user.k1", b"v1")
    os.setxattr(x, "user.empty", b"")
    os.setxattr(x, "user.binary", bytes(range(256))[:64])
    os.setxattr(x, "trusted.t", b"trusted value")
    os.setxattr(x, "security.s", b"security value")
    x = os.path.join(d, "xattr", "big")
    write(x, b"big xattrs\n", mtime=t)
    os.setxattr(x, "user.pieces", stream("base/xattr-pieces", 3000))
    os.setxattr(os.path.join(d, "xattr"), "user.on-dir", b"dir value")
    # POSIX ACLs (an access ACL on a file, access and default on a directory)
    a = os.path.join(d, "acl", "file")
    write(a, b"acl\n", mtime=t)
    os.setxattr(a, "system.posix_acl_access",
                acl([(USER_OBJ, 6, ACL_UNDEF), (USER, 6, 1000), (GROUP_OBJ, 4, ACL_UNDEF),
                     (GROUP, 4, 100), (MASK, 6, ACL_UNDEF), (OTHER, 0, ACL_UNDEF)]))
    a = os.path.join(d, "acl", "dir")
    os.makedirs(a)
    os.setxattr(a, "system.posix_acl_access",
                acl([(USER_OBJ, 7, ACL_UNDEF), (USER, 5, 1001), (GROUP_OBJ, 5, ACL_UNDEF),
                     (MASK, 5, ACL_UNDEF), (OTHER, 5, ACL_UNDEF)]))
    os.setxattr(a, "system.posix_acl_default",
                acl([(USER_OBJ, 7, ACL_UNDEF), (GROUP_OBJ, 5, ACL_UNDEF),
                     (GROUP, 7, 100), (MASK, 7, ACL_UNDEF), (OTHER, 0, ACL_UNDEF)]))
    # owners and modes
    for name, uid, gid in [("u1000", 1000, 1000), ("nobody", 65534, 65534),
                           ("big-ids", 4000000000, 4000000001), ("mixed", 0, 1234)]:
        p = os.path.join(d, "own", name)
        write(p, name.encode() + b"\n", mtime=t)
        os.chown(p, uid, gid)
    for name, mode in [("setuid", 0o4755), ("setgid", 0o2755), ("none", 0o000),
                       ("ro", 0o444), ("exec", 0o711)]:
        write(os.path.join(d, "modes", name), name.encode() + b"\n", mode=0o644, mtime=t)
        os.chmod(os.path.join(d, "modes", name), mode)
    for name, mode in [("sticky", 0o1777), ("setgid-dir", 0o2775), ("private", 0o700)]:
        os.makedirs(os.path.join(d, "modes", name))
        os.chmod(os.path.join(d, "modes", name), mode)
    os.makedirs(os.path.join(d, "empty"))
    # special files
    sp = os.path.join(d, "special")
    os.makedirs(sp)
    os.mkfifo(os.path.join(sp, "fifo"), 0o640)
    os.mknod(os.path.join(sp, "null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mknod(os.path.join(sp, "loop"), 0o660 | stat.S_IFBLK, os.makedev(7, 200))
    for name, mode in [("fifo", 0o640), ("null", 0o666), ("loop", 0o660)]:
        os.chmod(os.path.join(sp, name), mode)
        os.utime(os.path.join(sp, name), ns=(t, t))
    # times: before 1970, past 2038, nanoseconds
    for name, ns in [("pre-1970", -(86400 * 365 * 10) * 10**9 + 123), ("y2242", 2**33 * 10**9 + 999999999),
                     ("nanos", T0 + 987654321), ("zero", 0)]:
        write(os.path.join(d, "times", name), name.encode() + b"\n", mtime=ns)


def gen_files(d):
    """The data shapes: a file over 1 MiB, sparse files, a 64 KiB text,
    16 KiB that no compression shrinks."""
    write(os.path.join(d, "data", "big"), blocks("files/big", 1536 * 1024 + 123), mtime=T0)
    write(os.path.join(d, "data", "text"), text("files/text", 64 * 1024), mtime=T0)
    write(os.path.join(d, "data", "random"), stream("files/random", 16 * 1024), mtime=T0)
    # sparse: data, a hole, data, a hole to the end (size past the last extent)
    p = os.path.join(d, "sparse", "holes")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(text("files/sparse0", 4096))
        f.seek(1 << 20)
        f.write(text("files/sparse1", 10000))
        f.seek((2 << 20) - 1)
        f.write(b"$")
        f.truncate(3 << 20)
    p = os.path.join(d, "sparse", "all-hole")
    with open(p, "wb") as f:
        f.truncate(5 << 20)
    p = os.path.join(d, "sparse", "unaligned")
    with open(p, "wb") as f:
        f.seek(12345)
        f.write(b"in the middle of a block")
    for p in ("holes", "all-hole", "unaligned"):
        os.utime(os.path.join(d, "sparse", p), ns=(T0, T0))
    # the largest xattr value there is
    p = os.path.join(d, "data", "xattr-max")
    write(p, b"65536-byte xattr\n", mtime=T0)
    os.setxattr(p, "user.max", text("files/xattr-max", 65536))


def gen_data(d):
    """Data to move or compress without the biggest file (encrypted data
    does not compress in git): a 64 KiB text."""
    write(os.path.join(d, "data", "text"), text("data/text", 64 * 1024), mtime=T0)


def gen_mini(d):
    """A small tree for images whose point is not the files (an encrypted
    image costs its bytes in git): text, random, a symlink, a hard link, an
    xattr, an ACL."""
    write(os.path.join(d, "mini", "a.txt"), text("mini/a", 3000), mtime=T0)
    write(os.path.join(d, "mini", "sub", "b.txt"), text("mini/b", 700), mtime=T0)
    write(os.path.join(d, "mini", "r.bin"), stream("mini/r", 2000), mode=0o600, mtime=T0)
    os.symlink("a.txt", os.path.join(d, "mini", "link"))
    os.utime(os.path.join(d, "mini", "link"), ns=(T0, T0), follow_symlinks=False)
    os.link(os.path.join(d, "mini", "a.txt"), os.path.join(d, "mini", "sub", "a-hard"))
    os.setxattr(os.path.join(d, "mini", "a.txt"), "user.mini", b"value")
    os.setxattr(os.path.join(d, "mini", "sub"), "system.posix_acl_access",
                acl([(USER_OBJ, 7, ACL_UNDEF), (USER, 5, 1001), (GROUP_OBJ, 5, ACL_UNDEF),
                     (MASK, 5, ACL_UNDEF), (OTHER, 5, ACL_UNDEF)]))


def gen_many(d):
    """Enough names and inodes for btrees of several levels with 4k nodes."""
    for i in range(400):
        write(os.path.join(d, "many", "d%02d" % (i % 12), "file-%04d" % i),
              text("many/%d" % i, 64 + i % 200), mtime=T0 + i)


def gen_late(d):
    """The files an unclean image holds only in its journal."""
    for i in range(12):
        write(os.path.join(d, "late", "sub" if i % 3 == 0 else "", "n%02d" % i),
              text("late/%d" % i, 200 + 700 * i), mtime=T0 + 100 + i)
    write(os.path.join(d, "late", "big"), blocks("late/big", 1100 * 1024), mtime=T0)
    os.symlink("n01", os.path.join(d, "late", "link"))
    os.utime(os.path.join(d, "late", "link"), ns=(T0, T0), follow_symlinks=False)
    os.link(os.path.join(d, "late", "n01"), os.path.join(d, "late", "n01-hard"))
    os.setxattr(os.path.join(d, "late", "n02"), "user.late", b"journal only")


SETS = {"base": gen_base, "mini": gen_mini, "files": gen_files, "data": gen_data, "many": gen_many, "late": gen_late}


def fix_dir_times(d):
    """Directories get fixed times last (adding entries changed them)."""
    for dp, dns, fns in os.walk(d, topdown=False):
        if os.path.basename(dp) != "lost+found":
            os.utime(dp, ns=(T0 + 50, T0 + 50), follow_symlinks=False)


# ---------------------------------------------------------------- manifests

def q(s):
    if isinstance(s, str):
        s = os.fsencode(s)
    return urllib.parse.quote_from_bytes(s, safe="/.-_+:@,")


def xval(v):
    if len(v) > 64:
        return "sha256:%s+%d" % (hashlib.sha256(v).hexdigest(), len(v))
    return q(v) if v else "''"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_opts(path):
    """{image path: {name: value}} from `image shell` getfattr output:
    '# file: PATH' then 'bcachefs.NAME="VALUE"' lines."""
    opts = {}
    cur = None
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# file: "):
                cur = line[len("# file: "):].lstrip("/") or "."
                opts.setdefault(cur, {})
            elif cur is not None and line.startswith("bcachefs.") and "=" in line:
                k, v = line.split("=", 1)
                if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
                    v = v[1:-1]
                opts[cur][k[len("bcachefs."):]] = v
    return opts


def manifest(root, opts=None, skip=()):
    lines = []
    first = {}
    paths = ["."]
    for dp, dns, fns in os.walk(root):
        dns.sort()
        for n in sorted(dns + fns):
            paths.append(os.path.relpath(os.path.join(dp, n), root))
    for rel in sorted(paths):
        if rel in skip:
            continue
        p = os.path.join(root, rel)
        st = os.lstat(p)
        f = []
        m = st.st_mode
        kind = {stat.S_IFREG: "f", stat.S_IFDIR: "d", stat.S_IFLNK: "l", stat.S_IFIFO: "p",
                stat.S_IFCHR: "c", stat.S_IFBLK: "b", stat.S_IFSOCK: "s"}[stat.S_IFMT(m)]
        f.append("type=" + kind)
        if kind != "l":
            f.append("mode=%04o" % stat.S_IMODE(m))
        f.append("owner=%d:%d" % (st.st_uid, st.st_gid))
        if rel == "lost+found":
            lines.append(q(rel) + " " + " ".join(f))
            continue
        f.append("mtime=%d" % st.st_mtime_ns)
        if kind == "f":
            f.append("size=%d" % st.st_size)
            f.append("sha256=" + sha256(p))
            if st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                first.setdefault(key, rel)
                f.append("nlink=%d" % st.st_nlink)
                f.append("hardlink=" + q(first[key]))
        elif kind == "l":
            f.append("target=" + q(os.readlink(p)))
        elif kind in "cb":
            f.append("rdev=%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)))
        try:
            names = sorted(os.listxattr(p, follow_symlinks=False))
        except OSError:
            names = []
        for n in names:
            f.append("xattr.%s=%s" % (q(n), xval(os.getxattr(p, n, follow_symlinks=False))))
        if opts is not None and kind in "fd":
            for k, v in sorted(opts.get(rel, {}).items()):
                f.append("opt.%s=%s" % (q(k), q(v)))
        lines.append(q(rel) + " " + " ".join(f))
    return lines


def entries(path):
    with open(path) as f:
        return [l.rstrip("\n") for l in f if l.strip() and l[0] not in "#%"]


def compare(want, got, ignore=()):
    ign = set(q(p) for p in ignore)
    w = {l.split(" ", 1)[0]: l for l in entries(want) if l.split(" ", 1)[0] not in ign}
    g = {l.split(" ", 1)[0]: l for l in entries(got) if l.split(" ", 1)[0] not in ign}
    bad = 0
    for p in sorted(set(w) | set(g)):
        if p not in g:
            print("missing: %s" % w[p])
        elif p not in w:
            print("extra:   %s" % g[p])
        elif w[p] != g[p]:
            wf = dict(x.split("=", 1) for x in w[p].split(" ")[1:])
            gf = dict(x.split("=", 1) for x in g[p].split(" ")[1:])
            diff = ["%s: want %s, got %s" % (k, wf.get(k, "(none)"), gf.get(k, "(none)"))
                    for k in sorted(set(wf) | set(gf)) if wf.get(k) != gf.get(k)]
            print("differs: %s: %s" % (p, "; ".join(diff)))
        else:
            continue
        bad += 1
    return bad


def main(argv):
    os.umask(0o022)
    if len(argv) >= 3 and argv[0] == "gen":
        for s in argv[1].split(","):
            SETS[s](argv[2])
        return 0
    if len(argv) == 2 and argv[0] == "fix-dir-times":
        fix_dir_times(argv[1])
        return 0
    if len(argv) >= 2 and argv[0] == "manifest":
        opts = None
        skip = []
        rest = argv[2:]
        while rest:
            if rest[0] == "--opts":
                opts = read_opts(rest[1])
            elif rest[0] == "--skip":
                skip.append(rest[1])
            else:
                raise SystemExit("manifest: unknown argument %s" % rest[0])
            rest = rest[2:]
        for l in manifest(argv[1], opts, skip):
            print(l)
        return 0
    if len(argv) == 2 and argv[0] == "getfattr-script":
        for l in entries(argv[1]):
            path, rest = l.split(" ", 1)
            if "type=f" in rest.split(" ") or "type=d" in rest.split(" "):
                p = urllib.parse.unquote(path)
                p = "/" if p == "." else "/" + p
                print('getfattr "%s"' % p.replace("\\", "\\\\").replace('"', '\\"'))
        return 0
    if len(argv) >= 4 and argv[0] == "verify":
        # verify WANT TREE OPTS [--ignore PATH]...: manifest and compare in
        # one process (the runner's three reads of every image)
        ign = [argv[i + 1] for i in range(4, len(argv) - 1, 2) if argv[i] == "--ignore"]
        got = argv[2].rstrip("/") + ".manifest"
        with open(got, "w") as f:
            for l in manifest(argv[2], read_opts(argv[3])):
                f.write(l + "\n")
        return 1 if compare(argv[1], got, ign) else 0
    if len(argv) >= 3 and argv[0] == "compare":
        ign = [argv[i + 1] for i in range(3, len(argv) - 1, 2) if argv[i] == "--ignore"]
        return 1 if compare(argv[1], argv[2], ign) else 0
    sys.stderr.write(__doc__)
    return 16


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
