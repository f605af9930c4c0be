#!/usr/bin/env python3
"""treetool.py - build a varied file tree, and compare two trees exactly.

  treetool.py gen DIR SEED NFILES   build a deterministic tree under DIR
  treetool.py compare A B           exit 0 if A and B hold the same tree

The tree has regular files of many sizes (empty, tiny, block-sized, large,
compressible and not), sparse files (holes at the start, middle and end),
hard links, symlinks (relative, absolute, dangling), fifos, device nodes
(when root), long names (255 bytes), deep directories, xattrs, unusual
modes (setuid, sticky), several owners (when root) and times with
nanoseconds.  compare checks content, type, mode, owner, mtime (ns), link
targets, xattrs, hard-link groups and that sparse files stay sparse.
"""
import os
import random
import stat
import sys


def gen(root, seed, nfiles):
    rnd = random.Random(seed)
    is_root = os.geteuid() == 0
    os.makedirs(root, exist_ok=True)
    dirs = [root]
    files = []
    for i in range(max(1, nfiles // 20)):
        parent = rnd.choice(dirs)
        d = os.path.join(parent, "dir%04d" % i)
        os.mkdir(d)
        dirs.append(d)
    deep = root
    for i in range(30):
        deep = os.path.join(deep, "deep%02d" % i)
        os.mkdir(deep)
    dirs.append(deep)
    for i in range(nfiles):
        d = rnd.choice(dirs)
        kind = rnd.random()
        if i == 0:
            name = "L" * 255
        else:
            name = "f%05d_%s" % (i, rnd.choice(["a", "bb", "c.txt", "ünï", "sp ace", "x" * 100]))
        p = os.path.join(d, name)
        if kind < 0.55:
            size = rnd.choice([0, 1, 100, 511, 512, 4095, 4096, 4097, 65536, 131073,
                               rnd.randrange(0, 300000)])
            with open(p, "wb") as f:
                if rnd.random() < 0.5:
                    f.write(rnd.randbytes(size))
                else:
                    f.write((b"compressible %d " % i) * (size // 16 + 1))
                    f.truncate(size)
            files.append(p)
        elif kind < 0.65:
            size = rnd.choice([1 << 20, 5 << 20, 300000])
            with open(p, "wb") as f:
                f.truncate(size)
                for _ in range(rnd.randrange(0, 4)):
                    f.seek(rnd.randrange(0, size - 10))
                    f.write(rnd.randbytes(rnd.randrange(1, 9000)))
            files.append(p)
        elif kind < 0.72 and files:
            os.link(rnd.choice(files), p)
        elif kind < 0.80:
            os.symlink(rnd.choice(["../x", "/etc/passwd", "dangling", "a" * 200,
                                   os.path.relpath(rnd.choice(dirs), d)]), p)
        elif kind < 0.84:
            os.mkfifo(p)
        elif kind < 0.86 and is_root:
            os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(1, rnd.randrange(0, 10)))
        else:
            with open(p, "wb") as f:
                f.write(b"x" * rnd.randrange(0, 100))
            files.append(p)
    # attributes, children before parents so directory times stick
    everything = []
    for dp, dn, fn in os.walk(root):
        for n in fn + dn:
            everything.append(os.path.join(dp, n))
    everything.sort(key=lambda p: -p.count("/"))
    for p in everything:
        st = os.lstat(p)
        if not stat.S_ISLNK(st.st_mode):
            if rnd.random() < 0.3:
                os.setxattr(p, "user.k%d" % rnd.randrange(3), rnd.randbytes(rnd.randrange(0, 200)),
                            follow_symlinks=False) if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) else None
            if is_root and rnd.random() < 0.05 and stat.S_ISREG(st.st_mode):
                os.setxattr(p, "trusted.t", b"trusted value")
            mode = rnd.choice([0o644, 0o600, 0o755, 0o4755, 0o2750, 0o1777, 0o000, 0o444])
            if stat.S_ISDIR(st.st_mode):
                mode |= 0o700   # keep it walkable
            os.chmod(p, mode)
        if is_root:
            os.lchown(p, rnd.choice([0, 1000, 65534, 123456]), rnd.choice([0, 100, 65534]))
        ns = rnd.randrange(0, 2 ** 31) * 10 ** 9 + rnd.randrange(0, 10 ** 9)
        os.utime(p, ns=(ns, ns), follow_symlinks=False)


def sparse_map(p, size):
    """Data ranges of a file (by SEEK_DATA/SEEK_HOLE), block-rounded."""
    fd = os.open(p, os.O_RDONLY)
    out = []
    pos = 0
    try:
        while pos < size:
            try:
                d = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break
            h = os.lseek(fd, d, os.SEEK_HOLE)
            out.append((d // 4096, (h + 4095) // 4096))
            pos = h
    finally:
        os.close(fd)
    return out


def describe(root):
    desc = {}
    inodes = {}
    for dp, dn, fn in os.walk(root):
        for n in fn + dn:
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            if rel == "lost+found" or rel.startswith("lost+found/"):
                continue
            st = os.lstat(p)
            e = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid}
            e["mtime"] = st.st_mtime_ns
            try:
                e["xattrs"] = sorted((x, os.getxattr(p, x, follow_symlinks=False))
                                     for x in os.listxattr(p, follow_symlinks=False))
            except OSError:
                e["xattrs"] = []
            if stat.S_ISREG(st.st_mode):
                e["size"] = st.st_size
                with open(p, "rb") as f:
                    e["data"] = hash(f.read())
                e["sparse"] = st.st_blocks * 512 < st.st_size
                if st.st_nlink > 1:
                    inodes.setdefault((st.st_dev, st.st_ino), []).append(rel)
            elif stat.S_ISLNK(st.st_mode):
                e["target"] = os.readlink(p)
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                e["rdev"] = st.st_rdev
            desc[rel] = e
    groups = sorted(sorted(v) for v in inodes.values())
    return desc, groups


def compare(a, b):
    da, ga = describe(a)
    db, gb = describe(b)
    bad = 0
    for k in sorted(set(da) | set(db)):
        if k not in da or k not in db:
            print("only in %s: %s" % (a if k in da else b, k))
            bad += 1
            continue
        for f in sorted(set(da[k]) | set(db[k])):
            if da[k].get(f) != db[k].get(f):
                print("%s: %s differs: %r vs %r" % (k, f, da[k].get(f), db[k].get(f)))
                bad += 1
    if ga != gb:
        print("hard-link groups differ")
        bad += 1
    print("compared %d entries, %d hard-link groups: %d differences" % (len(da), len(ga), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        print(__doc__)
        sys.exit(2)
