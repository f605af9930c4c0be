#!/usr/bin/env python3
"""
campaign.py - the corruption campaign: what does the user keep after damage?

For each case: a deterministic source tree (seeded) is put into an image
(`format --source`; one device, or two at --replicas=2; 256k or 32k nodes;
closed cleanly, or left unclean by a FUSE mount killed after fsync), ONE
structure of device 0 is damaged (a superblock copy, a journal entry, a btree
node of a given btree and level, a data extent) in one of three ways (flip1:
one byte changed at a random offset among the bytes the structure's checksum
covers; rand64: 64 random bytes there; zero: the 4 KiB block holding that
offset zeroed), and then

    fsck -n -f   (exit, and whether it said clean; must not write)
    fsck -y -f   (exit)
    fsck -n -f   (must be clean)
    image extract, compared with the source: files (regular files and
    symlinks) intact (same bytes, mode, user xattrs / same target), missing,
    or present with wrong content.

Properties (a case violating one is FAILED; DAMAGE_REPORT_ONLY=1 only
reports them; a case of EXPECTED_FAIL that violates what is listed there is
XFAIL, counted as skipped with its reason, and one that passes is XPASS, a
failure until the line is removed):
    LOSS    no more files lost (missing or wrong) than the configuration's
            max_loss (CONFIG_TABLE): 0 with a second copy (--replicas=2,
            damage on device 0 only); with one copy of the metadata on one
            device, the files whose keys the damaged structure held, counted
            on the undamaged image (held_files: a node's key range, a
            journal entry and the entries after it, a data extent's file; a
            superblock copy holds none), printed as max-loss=N
    SILENT  never files lost while the first fsck -n said clean (exit 0),
            the journal included: a note on exit 0 ("torn by the crash") is
            not a report
    WRONG   never a file with wrong content (zeros included) after fsck -y
            (a file whose mode or xattrs only differ is counted as "meta": with
            one device, that is a violation only if the first fsck was silent)
    FSCK2   the second fsck -n is clean (exit 0); damaged data with one copy
            is reported by every fsck -c (exit 4) and cannot be cleaned
Data targets run fsck with -c (only it reads file data).
    SANE    no crash or hang of any command, and fsck -n writes nothing

Case names: CONFIG/TARGET/KIND@SEED, e.g. r1-32k-clean/btree:extents:L1/flip1@7
    CONFIG  a row of CONFIG_TABLE: r1|r2|m2 - 256k|32k - clean|unclean (m2: one
            device, --metadata-replicas=2: two copies of every node and entry)
    TARGET  sb:0 sb:1 sb:2 (superblock copies in layout order), journal:newest,
            journal:oldest (the oldest entry replay needs; unclean only),
            btree:NAME:LLEVEL (a node of that btree and level), data
    SEED    picks the node or extent and the offset and bytes of the damage
The source tree is the same for every case (DAMAGE_TREE_SEED, default 1).
DAMAGE_FSCK_ARGS adds options to every fsck run (e.g. -c to read the data).
--keep leaves each case's directory: the damaged images (after repair),
fsck.log (every command and its output) and files.log (each file not intact).

Usage: campaign.py [--soak [--seeds N]] [--configs C,C] [--case NAME]... [--keep]
Without --soak (or SOAK=1) the fixed make-check subset CHECK runs; --soak
runs every target x kind x seeds 1..N (DAMAGE_SEEDS, default 3).
Last line: "damage: N passed, N failed, N skipped" (unclean cases are
skipped, counted and printed, on a machine without /dev/fuse or root; without
fusermount3, which make check installs, they fail).
"""
import argparse
import fnmatch
import hashlib
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
B = os.environ.get("B", os.path.join(ROOT, "bcachefs"))
CMD_TIMEOUT = 120          # seconds; a command that takes longer has hung
FS_SIZE = "64M"
UUID = "6e2a3c1d-5b4f-4e8a-9c7d-2f1e0a9b8c7d"
JSET_MAGIC = (0x534c4f4f54686362 ^ 0x03).to_bytes(8, "little")
BLOCK = 4096
KINDS = ("flip1", "rand64", "zero")


# ---------------------------------------------------------------- the tree

def gen_tree(root, seed, nfiles=200, nlate=40):
    """200 files (small, medium, four > 1 MiB), 24 nested dirs, symlinks,
    hard links, xattrs, several modes; and late/ with nlate more (written
    through FUSE before the crash in unclean configs)."""
    r = random.Random(seed)
    dirs = [""]
    for i in range(24):
        parent = r.choice(dirs)
        if parent.count("/") >= 4:
            parent = ""
        d = os.path.join(parent, "d%02d" % i)
        os.makedirs(os.path.join(root, d))
        dirs.append(d)
    os.makedirs(os.path.join(root, "late", "sub"))

    def put(path, i):
        u = r.random()
        if i < 4:
            size = r.randrange(1 << 20, 5 << 19)
        elif u < 0.7:
            size = r.randrange(0, 6000)
        else:
            size = r.randrange(6000, 300000)
        with open(path, "wb") as f:
            f.write(r.randbytes(size))
        os.chmod(path, r.choice([0o644, 0o600, 0o755, 0o640]))
        if i % 20 == 3:
            os.setxattr(path, "user.tag", ("value-%d" % i).encode())

    files = []
    for i in range(nfiles):
        p = os.path.join(root, r.choice(dirs), "f%03d%s" % (i, " x" if i % 37 == 5 else ""))
        put(p, i)
        files.append(p)
    for i in range(nlate):
        put(os.path.join(root, "late", r.choice(["", "sub"]), "n%03d" % i), i + 1)
    for i in range(8):
        os.symlink("target-%d" % i, os.path.join(root, r.choice(dirs), "l%d" % i))
    for i in range(2):
        os.link(files[10 + i], os.path.join(root, r.choice(dirs), "h%d" % i))


def tree_entries(root):
    """{relpath: (kind, detail)} of every non-directory under root."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in fns + [d for d in dns if os.path.islink(os.path.join(dp, d))]:
            p = os.path.join(dp, n)
            out[os.path.relpath(p, root)] = p
    return out


def xattrs(p):
    try:
        return sorted((n, os.getxattr(p, n, follow_symlinks=False))
                      for n in os.listxattr(p, follow_symlinks=False) if n.startswith("user."))
    except OSError:
        return None


def same(src, dst):
    """('intact' | 'missing' | 'wrong', why): why is 'zeros' when the wrong
    bytes are all zeros, 'meta' when the bytes are right but the mode or the
    xattrs are not."""
    try:
        ds = os.lstat(dst)
    except OSError:
        return "missing", ""
    ss = os.lstat(src)
    if stat.S_ISLNK(ss.st_mode):
        ok = stat.S_ISLNK(ds.st_mode) and os.readlink(src) == os.readlink(dst)
        return ("intact" if ok else "wrong"), ""
    if not stat.S_ISREG(ds.st_mode):
        return "wrong", "type"
    with open(src, "rb") as f:
        a = f.read()
    try:
        with open(dst, "rb") as f:
            b = f.read()
    except OSError:
        return "wrong", "unreadable"
    if a != b:
        return "wrong", "zeros" if len(b) > 0 and b.count(0) == len(b) else "bytes"
    if stat.S_IMODE(ss.st_mode) != stat.S_IMODE(ds.st_mode) or xattrs(src) != xattrs(dst):
        return "wrong", "meta"
    return "intact", ""


# ---------------------------------------------------------------- commands

def run(args, cwd, log, timeout=CMD_TIMEOUT):
    """Run a command, appending its output to log; return its exit status
    (-1000 on timeout, negative on a signal)."""
    with open(os.path.join(cwd, log), "a") as f:
        f.write("$ %s\n" % " ".join(args))
        f.flush()
        try:
            return subprocess.run(args, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write("TIMEOUT after %d s\n" % timeout)
            return -1000


def out(args, cwd):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True,
                          timeout=CMD_TIMEOUT).stdout


# The configurations: how each image is made, and the most a case of it may
# lose (property LOSS).  max_loss is
#   HELD  one copy of the metadata on one device: at most the files whose
#         keys the damaged structure held (held_files(): the keys of the
#         node's range, of the journal entries from the damaged one on, the
#         file of the damaged extent; none for a superblock copy); a loss
#         larger than the damaged structure can explain is a violation
#   N     at most N files whatever was damaged: 0 for every configuration
#         with a second copy of what was damaged (--replicas=2 on two devices)
#   {"meta": .., "data": ..}  one rule for the metadata targets (superblock,
#         journal, btree nodes) and another for a data extent: a single
#         device with metadata copies (format --metadata-replicas=2, once it
#         is taken on one device) loses nothing to damaged metadata, but a
#         damaged extent, of which there is one copy, still costs its file:
#   "r1m2-256k-clean":  (1, "256k", False, ["--metadata-replicas=2"],
#                        {"meta": 0, "data": HELD}),
HELD = "held"
CONFIG_TABLE = {
    # name               devices node    unclean format_args        max_loss
    "r1-256k-clean":    (1, "256k", False, [],                  HELD),
    "r1-32k-clean":     (1, "32k",  False, [],                  HELD),
    "r1-256k-unclean":  (1, "256k", True,  [],                  HELD),
    "r1-32k-unclean":   (1, "32k",  True,  [],                  HELD),
    "r2-256k-clean":    (2, "256k", False, ["--replicas=2"],    0),
    "r2-32k-clean":     (2, "32k",  False, ["--replicas=2"],    0),
    "r2-256k-unclean":  (2, "256k", True,  ["--replicas=2"],    0),
    # metadata copies on one device (format version 2): no file lost to a
    # damaged node or journal block; a damaged extent (one copy) costs its file
    "m2-256k-clean":    (1, "256k", False, ["--metadata-replicas=2"], {"meta": 0, "data": HELD}),
    "m2-32k-clean":     (1, "32k",  False, ["--metadata-replicas=2"], {"meta": 0, "data": HELD}),
    "m2-256k-unclean":  (1, "256k", True,  ["--metadata-replicas=2"], {"meta": 0, "data": HELD}),
    "m2-32k-unclean":   (1, "32k",  True,  ["--metadata-replicas=2"], {"meta": 0, "data": HELD}),
}


class Config:
    def __init__(self, name):
        if name not in CONFIG_TABLE:
            raise ValueError("bad config %s (one of %s)" % (name, " ".join(CONFIG_TABLE)))
        self.name = name
        self.ndev, self.node, self.unclean, self.format_args, self.max_loss = CONFIG_TABLE[name]
        self.devs = ["dev%d.img" % i for i in range(self.ndev)]

    def loss_rule(self, target):
        """HELD or a number of files: the most a case of target may lose."""
        if isinstance(self.max_loss, dict):
            return self.max_loss["data" if target == "data" else "meta"]
        return self.max_loss

    def loss_text(self):
        def one(r):
            return "the files the damaged structure held" if r == HELD else "%d files" % r
        if isinstance(self.max_loss, dict):
            return "metadata %s, data %s" % (one(self.max_loss["meta"]), one(self.max_loss["data"]))
        return one(self.max_loss)

    def colon(self):
        return ":".join(self.devs)


def fuse_missing():
    """Why the unclean images cannot be made here (skip), or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if os.geteuid() != 0:
        return "needs root to crash a mount"
    return None


def build(cfg, dirn, src):
    """The pristine images of cfg in dirn (from src); raises on failure."""
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    base = src
    if cfg.unclean:
        base = os.path.join(dirn, "base")
        shutil.copytree(src, base, symlinks=True, ignore=lambda d, n: ["late"] if d == src else [])
    args = [B, "format", "-q", "-U", UUID, "--fs-size=" + FS_SIZE, "--btree-node-size=" + cfg.node]
    args += cfg.format_args
    args += ["--source", base] + cfg.devs
    p = subprocess.run(args, cwd=dirn, capture_output=True, text=True, env=env, timeout=CMD_TIMEOUT)
    if p.returncode:
        raise RuntimeError("format failed (exit %d): %s" % (p.returncode, p.stderr.strip()[-300:]))
    if cfg.unclean:
        if shutil.which("fusermount3") is None:
            raise RuntimeError("no fusermount3: make check installs it (scripts/install-deps.sh test)")
        crash_write(cfg, dirn, os.path.join(src, "late"))
    return " ".join(args).replace(B, "bcachefs").replace(base, "SRC")


def crash_write(cfg, dirn, late):
    """Mount through FUSE, write late/ in, each file fsynced with its
    directory as it is written (as an application that saves files does),
    then SIGKILL the driver: the files are durable only in the journal, over
    several entries (copied whole first and fsynced after, one flush took
    them all: one entry, and no "oldest entry replay needs" to damage)."""
    mnt = os.path.join(dirn, "mnt")
    os.mkdir(mnt)
    log = open(os.path.join(dirn, "fuse.log"), "w")
    proc = subprocess.Popen([B, "fusemount", "-f", cfg.colon(), mnt], cwd=dirn,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            if os.path.ismount(mnt):
                break
            if proc.poll() is not None:
                raise RuntimeError("fusemount exited %d" % proc.returncode)
            time.sleep(0.05)
        else:
            raise RuntimeError("fusemount did not mount")
        def fsync(path):
            fd = os.open(path, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        for dp, dns, fns in os.walk(late):
            to = os.path.join(mnt, os.path.relpath(dp, os.path.dirname(late)))
            os.mkdir(to)
            shutil.copystat(dp, to)
            fsync(os.path.dirname(to))
            for n in sorted(fns):
                shutil.copy2(os.path.join(dp, n), os.path.join(to, n))
                fsync(os.path.join(to, n))
                fsync(to)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        log.close()
    os.rmdir(mnt)
    sb = out([B, "show-super", cfg.devs[0]], dirn)
    if not re.search(r"Clean shutdown:\s+no", sb):
        raise RuntimeError("the killed mount left a clean filesystem")


# ---------------------------------------------------------------- targets

def find_nodes(cfg, dirn):
    """{(btree, level): [(sector on dev 0, written bytes, (min, max)), ...]}
    with the node's key range (positions as tuples, pos())"""
    nodes, btree = {}, None
    for line in out([B, "list", "-m", "nodes"] + cfg.devs, dirn).splitlines():
        m = re.match(r"btree (\w+):", line)
        if m:
            btree = m.group(1)
            continue
        m = re.match(r"node level (\d+) (\S+)\.\.(\S+) .* keys (\d+) written (\d+) sectors (.*)", line)
        if not m or btree is None:
            continue
        lvl, keys, written = int(m.group(1)), int(m.group(4)), int(m.group(5))
        p = re.search(r"ptr 0:(\d+) ", m.group(6) + " ")
        if p and written > 0 and (keys > 0 or lvl > 0):
            nodes.setdefault((btree, lvl), []).append(
                (int(p.group(1)), written * 512, (pos(m.group(2)), pos(m.group(3)))))
    return nodes


# ---------------------------------------------------------------- what a structure held

POS_MAX = (1 << 64,) * 3


def pos(text):
    """A key position "INODE:OFFSET:SNAPSHOT" (or "max") as a tuple."""
    if text == "max":
        return POS_MAX
    return tuple(int(x) for x in text.split(":"))


def key_inode(btree, p, rest, journal=False):
    """(inode, scope) of a key of a btree that holds files, or None for the
    others (alloc, ...: what they hold can be rebuilt and costs no file).
    Extents and xattrs belong to the file's inode and cost that file
    ("own"); a dirent names an inode, and losing it loses that name and, for
    a directory, everything under it ("tree"); an inode key (by its number,
    the offset field) costs its subtree when a node loses it, but only the
    file itself when it is a journal update: the btree still holds the
    version before it (an update of the root's mtime does not cost every
    file)."""
    if btree in ("extents", "xattrs"):
        return p[0], "own"
    if btree == "inodes":
        return p[1], "own" if journal else "tree"
    if btree == "dirents":
        m = re.search(r"dirent -> (\d+) ", rest)
        return (int(m.group(1)), "tree") if m else None
    return None


def btree_keys(cfg, dirn):
    """{btree: [(pos, inode or None)]} of every key (list: btree and journal)."""
    keys, btree = {}, None
    for line in out([B, "list"] + cfg.devs, dirn).splitlines():
        m = re.match(r"btree (\w+):$", line)
        if m:
            btree = m.group(1)
            keys[btree] = []
            continue
        m = re.match(r"(\d+:\d+:\d+) (.*)", line)
        if m and btree:
            p = pos(m.group(1))
            keys[btree].append((p, key_inode(btree, p, m.group(2) + " ")))
    return keys


def journal_keys(cfg, dirn):
    """{seq: set of (inode, scope)} of the keys in each entry replay would use."""
    res, seq, btree = {}, None, None
    for line in out([B, "list-journal"] + cfg.devs, dirn).splitlines():
        m = re.match(r"entry seq (\d+) ", line)
        if m:
            seq = int(m.group(1))
            res[seq] = set()
            continue
        m = re.match(r"  btree_keys (\w+) ", line)
        if m:
            btree = m.group(1)
            continue
        m = re.match(r"    (\d+:\d+:\d+) (.*)", line)
        if m and seq is not None and btree:
            k = key_inode(btree, pos(m.group(1)), m.group(2) + " ", journal=True)
            if k is not None:
                res[seq].add(k)
        elif not line.startswith("    "):
            btree = None
    return res


def file_chains(cfg, dirn, src_entries):
    """{relpath: [inode of each path component]} of every source file in the
    undamaged image (from its dirents; the root's inode first), so a lost
    directory entry or inode is charged to everything under it."""
    names, children = {}, set()
    for line in out([B, "list", "-b", "dirents"] + cfg.devs, dirn).splitlines():
        m = re.match(r'(\d+):\d+:\d+ dirent -> (\d+) type \d+ "(.*)"$', line)
        if m:
            names[(int(m.group(1)), m.group(3))] = int(m.group(2))
            children.add(int(m.group(2)))
    roots = {d for d, _ in names} - children
    root = min(roots) if roots else None
    chains = {}
    for rel in src_entries:
        chain, ino = [root], root
        for part in rel.split("/"):
            ino = names.get((ino, part))
            if ino is None:
                break
            chain.append(ino)
        chains[rel] = chain if ino is not None else None    # None: not found
    return chains


def held_sets(cfg, dirn, tgts, nodes, ext):
    """{target: {byte offset of a structure: set of (inode, scope) whose
    keys it held}} for the targets of targets()."""
    held = {t: {} for t in tgts if "#" not in t}
    keys = btree_keys(cfg, dirn)
    for (bt, lvl), lst in nodes.items():
        t = "btree:%s:L%d" % (bt, lvl)
        if t not in held:
            continue
        for s, _, (lo, hi) in lst:
            held[t][s * 512] = {i for p, i in keys.get(bt, []) if lo <= p <= hi and i is not None}
    for s, _, ino in ext:
        held.get("data", {}).setdefault(s * 512, set()).add((ino, "own"))
    js = journal_keys(cfg, dirn)
    for t in ("journal:newest", "journal:oldest"):
        for start, seq in tgts.get(t + "#seq", []):
            # what replay of that entry and every later one would have applied
            held[t][start] = set().union(*[v for q, v in js.items() if q >= seq])
    return held


def held_files(chains, keys):
    """How many source files a structure holding these (inode, scope) keys
    can cost: those whose own inode is among them, or any inode on whose path
    is, with scope "tree" (a file not found in the undamaged image counts:
    it is not the campaign's to bound)."""
    own = {i for i, _ in keys}
    tree = {i for i, sc in keys if sc == "tree"}
    return sum(1 for c in chains.values()
               if c is None or c[-1] in own or tree.intersection(c))


def find_extents(cfg, dirn):
    ext = []
    for line in out([B, "list", "-b", "extents"] + cfg.devs, dirn).splitlines():
        m = re.match(r"(\d+):\d+:\d+ extent size \d+ crc (\d+)/\d+ .*?ptr 0:(\d+) ", line + " ")
        if m:
            ext.append((int(m.group(3)), int(m.group(2)) * 512, int(m.group(1))))
    return ext


def find_sb(cfg, dirn):
    secs = []
    text = out([B, "show-super", "-l", cfg.devs[0]], dirn)
    m = re.search(r"Copies at sector:\n((?:\s+\d+\n)+)", text)
    if m:
        secs = [int(s) for s in m.group(1).split()]
    res = []
    with open(os.path.join(dirn, cfg.devs[0]), "rb") as f:
        for s in secs:
            f.seek(s * 512 + 160)
            u64s = int.from_bytes(f.read(4), "little")
            res.append((s, 512 + u64s * 8))
    return res


def find_jsets(cfg, dirn):
    """[(seq, last_seq, byte offset, bytes)] of the entries on device 0."""
    res = []
    with open(os.path.join(dirn, cfg.devs[0]), "rb") as f:
        data = f.read()
    i = data.find(JSET_MAGIC)
    while i >= 0:
        if i % BLOCK == 16:
            seq = int.from_bytes(data[i + 24:i + 32], "little")
            last = int.from_bytes(data[i + 32:i + 40], "little")
            u64s = int.from_bytes(data[i + 48:i + 52], "little")
            res.append((seq, last, i - 16, 72 + u64s * 8))
        i = data.find(JSET_MAGIC, i + 1)
    return sorted(res)


def node_spans(f, start, written):
    """The byte ranges of a node that its bsets cover (the header and first
    bset, then each later bset at a block boundary), relative to start: the
    tail of a bset's last block is written but covered by no checksum."""
    spans, pos = [], 0
    while pos < written:
        f.seek(start + pos)
        hdr = f.read(136 if pos == 0 else 48)
        u64s = int.from_bytes(hdr[-8:-4], "little")
        n = min(len(hdr) + u64s * 8, written - pos)
        if pos and not any(hdr):
            break
        spans.append((pos, n))
        pos += (n + BLOCK - 1) // BLOCK * BLOCK
    return spans


def targets(cfg, dirn):
    """{TARGET: [(byte offset, [(offset, bytes), ...]), ...]}: the structures
    of device 0 the seed chooses from, each with the ranges damage may hit."""
    t = {}
    for i, (s, n) in enumerate(find_sb(cfg, dirn)):
        t["sb:%d" % i] = [(s * 512, [(0, n)])]
    js = find_jsets(cfg, dirn)
    seqs = {}
    if js:
        newest = js[-1]
        t["journal:newest"] = [(newest[2], [(0, newest[3])])]
        seqs["journal:newest"] = [(newest[2], newest[0])]
        if cfg.unclean:
            old = [j for j in js if j[0] == newest[1]]
            if old and old[0] is not newest:
                t["journal:oldest"] = [(old[0][2], [(0, old[0][3])])]
                seqs["journal:oldest"] = [(old[0][2], old[0][0])]
    nodes = find_nodes(cfg, dirn)
    with open(os.path.join(dirn, cfg.devs[0]), "rb") as f:
        for (bt, lvl), lst in sorted(nodes.items()):
            if bt != "test":
                t["btree:%s:L%d" % (bt, lvl)] = [(s * 512, node_spans(f, s * 512, n)) for s, n, _ in lst]
    ext = find_extents(cfg, dirn)
    if ext:
        t["data"] = [(s * 512, [(0, n)]) for s, n, _ in ext]
    held = held_sets(cfg, dirn, dict(t, **{k + "#seq": v for k, v in seqs.items()}), nodes, ext)
    return t, held


def damage(path, choices, kind, seed):
    """Damage one structure chosen by seed; returns a description.  Each
    kind draws its own place from the seed (with one draw for all three, the
    soak found the three kinds always had the same outcome: what a node loses
    depends on which bset is hit, not how)."""
    r = random.Random(seed * len(KINDS) + KINDS.index(kind))
    start, spans = r.choice(choices)
    at = r.randrange(sum(n for _, n in spans))
    for so, n in spans:
        if at < n:
            break
        at -= n
    off = start + so + at
    with open(path, "r+b") as f:
        if kind == "flip1":
            f.seek(off)
            old = f.read(1)[0]
            f.seek(off)
            f.write(bytes([old ^ r.randrange(1, 256)]))
            what = "byte %d" % off
        elif kind == "rand64":
            off = max(min(off, start + so + n - 64), start + so)
            f.seek(off)
            f.write(r.randbytes(64))
            what = "bytes %d..%d" % (off, off + 63)
        else:
            off -= off % BLOCK
            f.seek(off)
            f.write(bytes(BLOCK))
            what = "block %d..%d zeroed" % (off, off + BLOCK - 1)
    return start, "%s of the structure at byte %d (ranges %s)" % (
        what, start, " ".join("+%d:%d" % sp for sp in spans))


# ---------------------------------------------------------------- a case

def sparse_copy(a, b):
    """Copy an image keeping its holes (a full copy of 64 MiB per device
    per case would cost more than the case)."""
    with open(a, "rb") as fa, open(b, "wb") as fb:
        size = os.fstat(fa.fileno()).st_size
        off = 0
        while off < size:
            try:
                off = os.lseek(fa.fileno(), off, os.SEEK_DATA)
            except OSError:
                break
            end = os.lseek(fa.fileno(), off, os.SEEK_HOLE)
            fa.seek(off)
            fb.seek(off)
            while off < end:
                buf = fa.read(min(end - off, 1 << 20))
                fb.write(buf)
                off += len(buf)
        fb.truncate(size)


def stamps(d, devs):
    """What a write would change: modification time and content hash of the
    blocks holding data (holes hash as nothing, and fsck -n may not fill them)."""
    res = []
    for x in devs:
        p = os.path.join(d, x)
        h = hashlib.sha1()
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            off = 0
            while off < size:
                try:
                    off = os.lseek(f.fileno(), off, os.SEEK_DATA)
                except OSError:
                    break
                end = os.lseek(f.fileno(), off, os.SEEK_HOLE)
                f.seek(off)
                h.update(off.to_bytes(8, "little"))
                h.update(f.read(end - off))
                off = end
        res.append((os.stat(p).st_mtime_ns, h.digest()))
    return res

def parse_case(name):
    m = re.fullmatch(r"([^/]+)/([^/]+)/(\w+)@(\d+)", name)
    if not m or m.group(3) not in KINDS:
        raise ValueError("bad case name %s (CONFIG/TARGET/KIND@SEED)" % name)
    return Config(m.group(1)), m.group(2), m.group(3), int(m.group(4))


def fsck(cfg, dirn, flag, log, target=""):
    extra = os.environ.get("DAMAGE_FSCK_ARGS", "").split()
    if target == "data" and "-c" not in extra:
        extra.append("-c")  # only fsck -c reads file data (as e2fsck -c reads blocks)
    return run([B, "fsck", "-f", flag] + extra + cfg.devs, dirn, log)


def run_case(name, pristine, tgts, held, chains, src_entries, keep):
    cfg, target, kind, seed = parse_case(name)
    d = tempfile.mkdtemp(prefix="bch-damage-", dir=os.environ.get("TMPDIR", "/tmp"))
    res = {"name": name, "seed": seed}
    try:
        for dev in cfg.devs:
            sparse_copy(os.path.join(pristine, dev), os.path.join(d, dev))
        if target not in tgts:
            res["skip"] = "no such structure in this image"
            return res
        start, res["damage"] = damage(os.path.join(d, cfg.devs[0]), tgts[target], kind, seed)
        rule = cfg.loss_rule(target)
        if rule == HELD:
            res["bound"] = held_files(chains, held[target].get(start, set()))
        else:
            res["bound"] = rule
        before = stamps(d, cfg.devs)
        res["n1"] = fsck(cfg, d, "-n", "fsck.log", target)
        res["n1_wrote"] = stamps(d, cfg.devs) != before
        res["y"] = fsck(cfg, d, "-y", "fsck.log", target)
        res["n2"] = fsck(cfg, d, "-n", "fsck.log", target)
        ex = os.path.join(d, "extract")
        res["x"] = run([B, "image", "extract", cfg.colon(), ex], d, "fsck.log")
        cnt = {"intact": 0, "missing": 0, "wrong": 0, "zeros": 0, "meta": 0}
        lost = []
        for rel, p in sorted(src_entries.items()):
            v, why = same(p, os.path.join(ex, rel))
            cnt[v] += 1
            if why in ("zeros", "meta"):
                cnt[why] += 1
            if v != "intact":
                lost.append("%s%s %s" % (v, " (%s)" % why if why else "", rel))
        res.update(cnt)
        lf = os.path.join(ex, "lost+found")
        res["lf"] = len(os.listdir(lf)) if os.path.isdir(lf) else 0
        with open(os.path.join(d, "files.log"), "w") as f:
            f.write("\n".join(lost) + "\n")
        res["kind"] = kind
        res["viol"] = violations(cfg, target, res)
        res["dir"] = d
        return res
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)


def violations(cfg, target, r):
    v = []
    for k in ("n1", "y", "n2", "x"):
        if r[k] < 0 or r[k] >= 128:
            v.append("SANE(%s %s)" % (k, "timeout" if r[k] == -1000 else "crash %d" % r[k]))
    if r["n1_wrote"]:
        v.append("SANE(fsck -n wrote)")
    lost = r["missing"] + r["wrong"]
    if lost > r["bound"]:
        v.append("LOSS(%d > %d)" % (lost, r["bound"]))
    # no exception for the journal: a newest entry damaged or zeroed after
    # fsync lost files that were acknowledged, and fsck -n exiting 0 says
    # nothing was lost (a "torn by the crash" note on exit 0 is not a report:
    # it passed 40 lost fsynced files).  Known failures: EXPECTED_FAIL.
    if lost and r["n1"] == 0:
        v.append("SILENT")
    # wrong bytes (zeros included); a file whose mode or xattrs went with a
    # node that fsck reported lost is counted (meta) but is not wrong content
    if r["wrong"] - r["meta"]:
        v.append("WRONG")
    # one copy of damaged data cannot be repaired: fsck -c reports it each run
    unrepairable = target == "data" and cfg.ndev == 1 and r["n2"] == 4 and r["y"] == 4
    if r["n2"] != 0 and not unrepairable:
        v.append("FSCK2")
    return v


# ---------------------------------------------------------------- the plan

CONFIGS = list(CONFIG_TABLE)

# Cases that violate a property today because of an engine bug whose fix is
# under way: a case-name pattern (fnmatch) -> (the violations expected, why).
# Each such case still runs and is printed ("XFAIL ... violates ..."),
# counted among the skipped with its reason; a violation not listed fails it
# as usual, and so does passing ("XPASS": the bug is fixed, remove the line).
EXPECTED_FAIL = {
    # (none: the journal-tail loss of issue 29 item 1 is reported since
    # format version 2's journal stubs)
}


def expected_fail(name):
    for pat, xf in EXPECTED_FAIL.items():
        if fnmatch.fnmatchcase(name, pat):
            return xf
    return None


# The make-check subset: every kind of structure and every kind of damage,
# on each image shape, once (about 30 cases).
CHECK = """
r1-256k-clean/sb:0/flip1@1 r1-256k-clean/sb:2/zero@2 r1-256k-clean/journal:newest/rand64@3
r1-256k-clean/btree:extents:L0/flip1@4 r1-256k-clean/btree:inodes:L0/rand64@5
r1-256k-clean/btree:dirents:L0/zero@6 r1-256k-clean/btree:xattrs:L0/flip1@7
r1-256k-clean/btree:alloc:L0/rand64@8 r1-256k-clean/data/flip1@9
r1-32k-clean/btree:extents:L1/flip1@10 r1-32k-clean/btree:extents:L0/zero@11
r1-32k-clean/btree:inodes:L1/zero@12 r1-32k-clean/btree:dirents:L0/rand64@13
r1-32k-clean/data/zero@14
r1-256k-unclean/journal:newest/flip1@15 r1-256k-unclean/journal:oldest/zero@16
r1-256k-unclean/btree:inodes:L0/flip1@17 r1-256k-unclean/sb:1/rand64@18
r2-256k-clean/sb:0/zero@19 r2-256k-clean/journal:newest/flip1@20
r2-256k-clean/btree:extents:L0/flip1@21 r2-256k-clean/btree:inodes:L0/rand64@22
r2-256k-clean/btree:dirents:L0/flip1@23 r2-256k-clean/data/rand64@24
r2-32k-clean/btree:extents:L1/rand64@25 r2-32k-clean/btree:inodes:L0/zero@26
r2-32k-clean/btree:alloc:L1/flip1@27 r2-32k-clean/data/flip1@28
r2-256k-unclean/journal:newest/zero@29 r2-256k-unclean/journal:oldest/rand64@30
r2-256k-unclean/btree:extents:L0/zero@31
m2-256k-clean/btree:extents:L0/flip1@32 m2-256k-clean/btree:inodes:L0/zero@33
m2-32k-clean/btree:extents:L1/zero@34 m2-32k-clean/btree:dirents:L0/rand64@35
m2-32k-clean/btree:alloc:L1/flip1@36 m2-256k-unclean/journal:newest/zero@37
m2-256k-unclean/journal:oldest/flip1@38 m2-32k-unclean/btree:inodes:L0/rand64@39
""".split()


def soak_plan(all_targets, seeds):
    """Every target of every config x every kind x seeds 1..seeds."""
    return ["%s/%s/%s@%d" % (c, t, k, s) for c in CONFIGS if c in all_targets
            for t in sorted(all_targets[c]) for k in KINDS for s in range(1, seeds + 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--soak", action="store_true", default=os.environ.get("SOAK") == "1")
    ap.add_argument("--seeds", type=int, default=int(os.environ.get("DAMAGE_SEEDS", "3")))
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--keep", action="store_true", default=os.environ.get("DAMAGE_KEEP") == "1")
    ap.add_argument("--configs", default=None, help="comma-separated subset of " + ",".join(CONFIGS))
    a = ap.parse_args()
    report_only = os.environ.get("DAMAGE_REPORT_ONLY") == "1"
    tree_seed = int(os.environ.get("DAMAGE_TREE_SEED", "1"))
    t0 = time.time()

    work = tempfile.mkdtemp(prefix="bch-damage-base-", dir=os.environ.get("TMPDIR", "/tmp"))
    passed = failed = skipped = 0
    results = []
    try:
        src = os.path.join(work, "src")
        gen_tree(src, tree_seed)
        src_entries = tree_entries(src)
        print("damage: source tree seed %d: %d files and symlinks, %d bytes"
              % (tree_seed, len(src_entries),
                 sum(os.lstat(p).st_size for p in src_entries.values())))
        use_soak = a.soak and not a.case
        if not a.case and not a.soak:
            a.case = CHECK
        wanted = CONFIGS
        if a.case:
            wanted = [c for c in CONFIGS if c in {parse_case(x)[0].name for x in a.case}]
        if a.configs:
            wanted = [c for c in wanted if c in a.configs.split(",")]
            a.case = [x for x in a.case if parse_case(x)[0].name in wanted]
        all_targets, pristine, skip_cfg, held, chains = {}, {}, {}, {}, {}
        for c in wanted:
            cfg = Config(c)
            if cfg.unclean and fuse_missing():
                skip_cfg[c] = fuse_missing()
                continue
            d = os.path.join(work, c)
            os.mkdir(d)
            try:
                how = build(cfg, d, src)
                before = stamps(d, cfg.devs)
                all_targets[c], held[c] = targets(cfg, d)
                chains[c] = file_chains(cfg, d, src_entries)
                if stamps(d, cfg.devs) != before:
                    raise RuntimeError("list or show-super wrote to the image")
                pristine[c] = d
                print("damage: %s: %s; max loss %s; targets: %s" % (
                    c, how, cfg.loss_text(), " ".join(sorted(all_targets[c]))))
                unknown = [rel for rel, ch in chains[c].items() if ch is None]
                if unknown:
                    print("damage: %s: %d source files not found in the undamaged image "
                          "(not bounded), e.g. %s" % (c, len(unknown), unknown[0]))
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                print("FAIL %s: building the image: %s" % (c, e))
                failed += 1
        cases = soak_plan(all_targets, a.seeds) if use_soak else a.case
        for c in wanted:
            if c in skip_cfg:
                n = len([x for x in cases if x.startswith(c + "/")]) or 1
                print("SKIP %s (%d cases): %s" % (c, n, skip_cfg[c]))
                skipped += n
        for name in cases:
            cfg = parse_case(name)[0]
            if cfg.name not in pristine:
                continue
            r = run_case(name, pristine[cfg.name], all_targets[cfg.name], held[cfg.name],
                         chains[cfg.name], src_entries, a.keep)
            results.append(r)
            if "skip" in r:
                print("SKIP %s: %s" % (name, r["skip"]))
                skipped += 1
                continue
            line = ("%s seed=%d tree=%d: fsck-n=%d%s fsck-y=%d fsck2=%s extract=%d "
                    "intact=%d missing=%d wrong=%d(zeros %d, mode/xattrs %d) lost+found=%d max-loss=%d"
                    % (name, r["seed"], tree_seed, r["n1"], "(clean)" if r["n1"] == 0 else "",
                       r["y"], "clean" if r["n2"] == 0 else "NOT-CLEAN(%d)" % r["n2"], r["x"],
                       r["intact"], r["missing"], r["wrong"], r["zeros"], r["meta"], r["lf"],
                       r["bound"]))
            xf = expected_fail(name)
            kinds = {v.split("(")[0] for v in r["viol"]}
            if xf and r["viol"] and kinds <= xf[0]:
                skipped += 1
                print("XFAIL " + line + " violates " + ",".join(r["viol"]) +
                      " (expected: %s)" % xf[1])
            elif xf and not r["viol"]:
                failed += 1
                print("XPASS " + line + ": listed in EXPECTED_FAIL (%s) but passes: "
                      "remove it there" % xf[1])
            elif r["viol"] and not report_only:
                failed += 1
                print("FAIL " + line + " violates " + ",".join(r["viol"]))
            else:
                passed += 1
                print(("VIOLATION " if r["viol"] else "PASS ") + line +
                      (" violates " + ",".join(r["viol"]) if r["viol"] else ""))
            if r["viol"]:
                print("    damage: %s" % r["damage"])
                print("    reproduce: tests/damage/campaign.py --keep --case '%s'" % name)
            if a.keep:
                print("    kept: %s" % r["dir"])
            sys.stdout.flush()
        summary(results, len(src_entries))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("damage: %.0f s" % (time.time() - t0))
    print("damage: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


def summary(results, total):
    rs = [r for r in results if "skip" not in r]
    if not rs:
        return
    w = max(len(r["name"]) for r in rs)
    print()
    print("%-*s  %-8s %-6s %-6s %-22s %s" % (w, "case", "fsck -n", "-y", "2nd", "intact/missing/wrong", "violates"))
    for r in rs:
        print("%-*s  %-8s %-6d %-6s %-22s %s" % (
            w, r["name"], "clean" if r["n1"] == 0 else "exit %d" % r["n1"], r["y"],
            "clean" if r["n2"] == 0 else "NO", "%d/%d/%d" % (r["intact"], r["missing"], r["wrong"]),
            ",".join(r["viol"]) or "-"))
    by = {}
    for r in rs:
        cfg, target, kind, _ = parse_case(r["name"])
        b = by.setdefault("%s %s %s" % (cfg.name.split("-")[0], target, kind), [0, 0, 0, 0])
        b[0] += 1
        b[1] += r["n1"] == 0
        b[2] += bool(r["viol"])
        b[3] += r["missing"] + r["wrong"]
    print("\nby kind, where the damage was not seen or broke a property:")
    print("  %-36s %5s %8s %9s %10s" % ("replicas target damage", "cases", "unseen", "violating", "files lost"))
    for k in sorted(by):
        if by[k][1] or by[k][2]:
            print("  %-36s %5d %8d %9d %10d" % ((k,) + tuple(by[k])))
    print("  (unseen: the first fsck -n -f exited 0; it reads no file data without -c)")
    bad = sum(1 for r in rs if r["viol"])
    print("\ncases: %d, violating: %d; files per case: %d; files lost in all: %d"
          % (len(rs), bad, total, sum(r["missing"] + r["wrong"] for r in rs)))
    counts = {}
    for r in rs:
        for v in r["viol"]:
            counts[v.split("(")[0]] = counts.get(v.split("(")[0], 0) + 1
    print("violations by property: " + (", ".join("%s %d" % kv for kv in sorted(counts.items())) or "none"))


def on_term(signum, frame):
    raise SystemExit(128 + signum)     # so that the temp dirs are removed


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_term)
    sys.exit(main())
