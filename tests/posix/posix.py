#!/usr/bin/env python3
"""POSIX conformance script, run differentially (tests/posix/README.md).

    posix.py run DIR                  run every step in DIR (empty, as root),
                                      print the normalized transcript
    posix.py compare REF OURS KNOWN   compare two transcripts, allowing only the
                                      differences named in KNOWN (each must differ)

Every step prints one line "ID: CALL = RESULT" (RESULT: "ok", a value, or the
errno name), then one line "ID:   NAME: STAT" for each name involved and the
directory holding it.  STAT is type, mode, nlink, uid, gid, size (not of
directories: their size is the filesystem's own), a device's major,minor and
which of atime/mtime/ctime moved since this inode was last printed ("new" for
a name the step made).  Inode numbers, st_blocks, st_dev and times themselves
are never printed.  IDs are SECTION.N, numbered within each section, so a
step added to one section renumbers only that section.

Each section runs in a fresh directory of its own.  Steps marked with a user
run in a forked child that drops to that uid/gid and supplementary groups
(setgroups, setresgid, setresuid) before the call: NOBODY (65534, no groups),
MEMBER (65534, also in group 4242), OTHER (4343).  A pause before each step
lets the kernel's coarse clock tick, so a time that should move does.
"""
import ctypes
import errno
import os
import stat
import sys
import time

NOBODY = (65534, 65534, [])
MEMBER = (65534, 65534, [4242])
OTHER = (4343, 4343, [])
G = 4242
PAUSE = 0.012		# longer than one tick of the kernel's coarse clock (HZ >= 100)

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_EACCESS = 0x200
AT_EMPTY_PATH = 0x1000
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_ZERO_RANGE, FALLOC_FL_INSERT_RANGE = 0x08, 0x10, 0x20
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def check(r):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


# ---------------------------------------------------------------- calls
# Each returns None ("ok") or a string that says what the call gave back.

def renameat2(a, b, flags):
    check(libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags))


def utimens(path, a, m, nofollow=False):
    """a, m: (sec, nsec), UTIME_NOW or UTIME_OMIT."""
    def ts(v):
        return Timespec(0, v) if isinstance(v, int) else Timespec(*v)
    t = (Timespec * 2)(ts(a), ts(m))
    check(libc.utimensat(AT_FDCWD, path.encode(), t, AT_SYMLINK_NOFOLLOW if nofollow else 0))


def fallocate(path, mode, off, length):
    fd = os.open(path, os.O_RDWR)
    try:
        check(libc.fallocate(fd, mode, off, length))
    finally:
        os.close(fd)


def opn(path, flags, mode=0o666, data=None):
    """open, write data (if any), close; the result says how many bytes went."""
    fd = os.open(path, flags, mode)
    try:
        if data is not None:
            return "wrote %d" % os.write(fd, data)
    finally:
        os.close(fd)


def put(path, data, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode=0o644):
    opn(path, flags, mode, data)


def write_at(path, off, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, off)
    finally:
        os.close(fd)


def append(path, data):
    """O_APPEND: the write lands at the end whatever the offset was."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
        return "offset after %d" % os.lseek(fd, 0, os.SEEK_CUR)
    finally:
        os.close(fd)


def content(path, n=1 << 20):
    with open(path, "rb") as f:
        d = f.read(n)
    if len(d) <= 40 and all(32 <= c < 127 for c in d):
        return "%d bytes %r" % (len(d), d.decode())
    runs, i = [], 0			# a summary: runs of zero and non-zero bytes
    while i < len(d):
        z = d[i] == 0
        j = i
        while j < len(d) and (d[j] == 0) == z:
            j += 1
        runs.append("%s%d" % ("0x" if z else "d", j - i))
        i = j
    return "%d bytes %s" % (len(d), " ".join(runs[:12]))


def listing(path):
    t = []
    for e in os.scandir(path):	# d_type as readdir gave it, never followed
        k = "l" if e.is_symlink() else "d" if e.is_dir(follow_symlinks=False) else \
            "f" if e.is_file(follow_symlinks=False) else "o"
        t.append("%s:%s" % (e.name if len(e.name) < 40 else "<%d chars>" % len(e.name), k))
    return " ".join(sorted(t)) or "(empty)"


def readlink(path):
    t = os.readlink(path)
    return repr(t) if len(t) < 40 else "%d chars" % len(t)


def same(a, b):
    """whether a and b name one inode (the numbers are not printed)"""
    return "same" if os.stat(a).st_ino == os.stat(b).st_ino else "different"


def seek(path, off, whence):
    fd = os.open(path, os.O_RDONLY)
    try:
        return str(os.lseek(fd, off, whence))
    finally:
        os.close(fd)


def odirect_read(path, off, size):
    import mmap
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, size)		# page-aligned
        n = os.preadv(fd, [buf], off)
        return "read %d, %s" % (n, "first byte %d" % buf[0] if n else "")
    finally:
        os.close(fd)


def times_set(path, a, m):
    """set explicit times, report whether they read back exactly"""
    utimens(path, a, m)
    st = os.lstat(path)
    ns = lambda t: t[0] * 10**9 + t[1]
    return "atime %s, mtime %s" % ("exact" if st.st_atime_ns == ns(a) else "differs",
                                   "exact" if st.st_mtime_ns == ns(m) else "differs")


def xlist(path):
    return " ".join(sorted(os.listxattr(path, follow_symlinks=False))) or "(none)"


def xget(path, name):
    v = os.getxattr(path, name, follow_symlinks=False)
    return repr(v) if len(v) < 40 else "%d bytes" % len(v)


def access(path, mode, eaccess=False):
    check(libc.faccessat(AT_FDCWD, path.encode(), mode, AT_EACCESS if eaccess else 0))


# POSIX ACLs as the kernel passes them in system.posix_acl_* (version 2,
# then (tag u16, perm u16, id u32) per entry)
ACL_TAGS = {"u": 1, "U": 2, "g": 4, "G": 8, "m": 0x10, "o": 0x20}


def acl(text):
    """acl("u::rw,U:65534:r,g::r,m::r,o::") -> the xattr's bytes"""
    import struct
    out = struct.pack("<I", 2)
    for e in text.split(","):
        t, i, p = e.split(":")
        perm = sum(b for c, b in (("r", 4), ("w", 2), ("x", 1)) if c in p)
        out += struct.pack("<HHI", ACL_TAGS[t], perm, int(i) if i else 0xffffffff)
    return out


def acl_get(path, name="system.posix_acl_access"):
    import struct
    v = os.getxattr(path, name)
    names = {b: a for a, b in ACL_TAGS.items()}
    ents = []
    for off in range(4, len(v), 8):
        t, p, i = struct.unpack_from("<HHI", v, off)
        ents.append("%s:%s:%s" % (names.get(t, t), "" if i == 0xffffffff else i,
                                  "".join(c for c, b in (("r", 4), ("w", 2), ("x", 1)) if p & b)))
    return ",".join(ents)


class Dirent(ctypes.Structure):		# glibc's struct dirent (64-bit)
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64), ("d_reclen", ctypes.c_ushort),
                ("d_type", ctypes.c_ubyte), ("d_name", ctypes.c_char * 256)]


libc.opendir.restype = ctypes.c_void_p
libc.opendir.argtypes = [ctypes.c_char_p]
libc.readdir.restype = ctypes.POINTER(Dirent)
libc.readdir.argtypes = [ctypes.c_void_p]
libc.closedir.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.telldir.argtypes = [ctypes.c_void_p]
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.rewinddir.argtypes = [ctypes.c_void_p]


def readdir_n(d, n):
    out = []
    while n:
        e = libc.readdir(d)
        if not e:
            break
        nm = e.contents.d_name.decode()
        if nm not in (".", ".."):
            out.append(nm)
            n -= 1
    return out


def readdir_changing(path):
    """POSIX readdir(): entries neither removed nor added while the stream is
    open come exactly once; seekdir to a telldir position gives the entry
    that came after it again; rewinddir sees the changes."""
    d = libc.opendir(path.encode())
    if not d:
        check(-1)
    try:
        first = readdir_n(d, 150)
        pos = libc.telldir(d)
        after = readdir_n(d, 1)
        libc.seekdir(d, pos)
        again = readdir_n(d, 1)
        removed = set("k%04d" % i for i in range(0, 1200, 3))
        for nm in removed:
            os.unlink(os.path.join(path, nm))
        for i in range(300):
            put(os.path.join(path, "n%04d" % i), b"")
        rest = readdir_n(d, -1)
        seen = first + again + rest
        kept = set("k%04d" % i for i in range(1200)) - removed
        twice = len(seen) - len(set(seen))
        missing = len(kept - set(seen))
        libc.rewinddir(d)
        whole = readdir_n(d, -1)
        return "seekdir back %s, kept entries missing %d, names twice %d, after rewinddir %d entries (%d new)" % (
            "same" if after == again else "different", missing, twice, len(whole),
            sum(1 for x in whole if x.startswith("n")))
    finally:
        libc.closedir(d)


def cwd_after_rename(top):
    """getcwd() inside a directory renamed (and its parent renamed) meanwhile"""
    here = os.getcwd()
    os.makedirs("cw/a/b")
    os.chdir("cw/a/b")
    try:
        os.rename(os.path.join(here, "cw/a"), os.path.join(here, "cw/a2"))
        os.rename(os.path.join(here, "cw"), os.path.join(here, "cw2"))
        got = os.getcwd()
        put("made-here", b"")
        return "getcwd %s, %s" % (got[len(top):] if got.startswith(top) else "outside the test",
                                   "made-here is in cw2/a2/b" if os.path.exists(os.path.join(here, "cw2/a2/b/made-here")) else "made-here elsewhere")
    finally:
        os.chdir(here)


# ---------------------------------------------------------------- the transcript

class Run:
    def __init__(self):
        self.sec, self.n = None, 0
        self.times = {}		# st_ino -> (atime, mtime, ctime) when last printed
        self.fds = {}

    def section(self, name, mode=0o777):
        os.chdir(self.top)
        os.mkdir(name)
        os.chmod(name, mode)
        os.chdir(name)
        self.sec, self.n = name, 0
        self.times[os.lstat(".").st_ino] = self.tm(os.lstat("."))

    @staticmethod
    def tm(st):
        return (st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)

    def describe(self, name, existed):
        try:
            st = os.lstat(name)
        except OSError as e:
            return "-" if e.errno == errno.ENOENT else errno.errorcode[e.errno]
        m = st.st_mode
        kind = {stat.S_IFREG: "reg", stat.S_IFDIR: "dir", stat.S_IFLNK: "lnk", stat.S_IFIFO: "fifo",
                stat.S_IFCHR: "chr", stat.S_IFBLK: "blk", stat.S_IFSOCK: "sock"}[stat.S_IFMT(m)]
        s = "%s %04o nlink=%d uid=%d gid=%d" % (kind, stat.S_IMODE(m), st.st_nlink, st.st_uid, st.st_gid)
        if kind in ("reg", "lnk"):
            s += " size=%d" % st.st_size
        if kind in ("chr", "blk"):
            s += " rdev=%d,%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        now, old = self.tm(st), self.times.get(st.st_ino)
        if old is None or not existed and st.st_ino not in self.before:
            s += " times=new"
        else:
            moved = [w for w, a, b in zip(("atime", "mtime", "ctime"), old, now) if a != b]
            s += " moved=" + (",".join(moved) or "none")
        self.times[st.st_ino] = now
        return s

    def step(self, call, fn, names=(), user=None):
        self.n += 1
        tag = "%s.%d" % (self.sec, self.n)
        names = list(names)
        for nm in list(names):			# and the directory holding each
            d = os.path.dirname(nm.rstrip("/")) or "."
            if d not in names:
                names.append(d)
        existed = {nm: os.path.lexists(nm) for nm in names}
        before = set()			# inodes the step may move to a new name
        for nm in names:
            try:
                before.add(os.lstat(nm).st_ino)
            except OSError:
                pass
        self.before = before
        time.sleep(PAUSE)
        res = self.call(fn, user)
        who = "" if user is None else "[uid %d gid %d%s] " % (
            user[0], user[1], " groups %s" % ",".join(map(str, user[2])) if user[2] else "")
        print("%s: %s%s = %s" % (tag, who, call, res))
        for nm in names:
            shown = nm if len(nm) < 40 else "<%d chars>" % len(nm)
            print("%s:   %s: %s" % (tag, shown, self.describe(nm, existed[nm])))
        sys.stdout.flush()

    @staticmethod
    def outcome(fn):
        try:
            r = fn()
            return "ok" if r is None else str(r)
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno))

    def call(self, fn, user):
        if user is None:
            return self.outcome(fn)
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(rfd)
                os.setgroups(user[2])
                os.setresgid(user[1], user[1], user[1])
                os.setresuid(user[0], user[0], user[0])
                r = self.outcome(fn)
            except BaseException as e:		# any other failure is printed, not hidden
                r = "exception %s" % type(e).__name__
            os.write(wfd, r.encode())
            os._exit(0)
        os.close(wfd)
        r = b""
        while True:
            b = os.read(rfd, 4096)
            if not b:
                break
            r += b
        os.close(rfd)
        os.waitpid(pid, 0)
        return r.decode()


def script(R):
    S = R.step
    O = os

    # ---- open and creat flags
    R.section("open")
    S('open("f", O_CREAT|O_WRONLY, 0644), write 5', lambda: opn("f", O.O_CREAT | O.O_WRONLY, 0o644, b"hello"), ["f"])
    S('open("f", O_CREAT|O_EXCL|O_WRONLY)', lambda: opn("f", O.O_CREAT | O.O_EXCL | O.O_WRONLY), ["f"])
    S('open("f", O_RDONLY)', lambda: opn("f", O.O_RDONLY), ["f"])
    S('read("f")', lambda: content("f"), ["f"])
    S('read("f") again (relatime)', lambda: content("f"), ["f"])
    S('open("f", O_WRONLY|O_APPEND), lseek 0, write 3', lambda: append("f", b"abc"), ["f"])
    S('read("f")', lambda: content("f"), ["f"])
    S('open("f", O_WRONLY|O_TRUNC)', lambda: opn("f", O.O_WRONLY | O.O_TRUNC), ["f"])
    S('open("f", O_WRONLY|O_TRUNC) of an empty file', lambda: opn("f", O.O_WRONLY | O.O_TRUNC), ["f"])
    S('open("f", O_RDONLY|O_DIRECTORY)', lambda: opn("f", O.O_RDONLY | O.O_DIRECTORY), ["f"])
    S('open(".", O_RDONLY|O_DIRECTORY)', lambda: opn(".", O.O_RDONLY | O.O_DIRECTORY), ["."])
    S('open(".", O_WRONLY)', lambda: opn(".", O.O_WRONLY), ["."])
    S('open(".", O_RDWR|O_CREAT)', lambda: opn(".", O.O_RDWR | O.O_CREAT), ["."])
    S('open("f/x", O_RDONLY)', lambda: opn("f/x", O.O_RDONLY), ["f"])
    S('open("none/x", O_CREAT|O_WRONLY)', lambda: opn("none/x", O.O_CREAT | O.O_WRONLY), ["none"])
    S('symlink("f", "l")', lambda: O.symlink("f", "l"), ["l"])
    S('open("l", O_RDONLY|O_NOFOLLOW)', lambda: opn("l", O.O_RDONLY | O.O_NOFOLLOW), ["l", "f"])
    S('open("l", O_RDONLY)', lambda: opn("l", O.O_RDONLY), ["l", "f"])
    S('symlink("dangling-target", "dl")', lambda: O.symlink("dangling-target", "dl"), ["dl"])
    S('open("dl", O_CREAT|O_EXCL|O_WRONLY)', lambda: opn("dl", O.O_CREAT | O.O_EXCL | O.O_WRONLY), ["dl", "dangling-target"])
    S('open("dl", O_CREAT|O_WRONLY, 0600) (creates the target)', lambda: opn("dl", O.O_CREAT | O.O_WRONLY, 0o600), ["dl", "dangling-target"])
    S('open("new", O_CREAT|O_RDWR, 07777) (umask 022)', lambda: opn("new", O.O_CREAT | O.O_RDWR, 0o7777), ["new"])
    S('open("ro", O_CREAT|O_EXCL|O_RDWR, 0444)', lambda: opn("ro", O.O_CREAT | O.O_EXCL | O.O_RDWR, 0o444, b"x"), ["ro"])
    S('open("ro", O_RDWR)', lambda: opn("ro", O.O_RDWR), ["ro"])
    S('open("ro", O_RDONLY|O_TRUNC)', lambda: opn("ro", O.O_RDONLY | O.O_TRUNC), ["ro"], NOBODY)
    S('open("ro", O_WRONLY)', lambda: opn("ro", O.O_WRONLY), ["ro"], NOBODY)
    S('open("f", O_WRONLY) (0644, root\'s)', lambda: opn("f", O.O_WRONLY), ["f"], NOBODY)
    S('open("f", O_RDONLY)', lambda: opn("f", O.O_RDONLY), ["f"], NOBODY)
    S('open("mine", O_CREAT|O_EXCL|O_WRONLY, 0640)', lambda: opn("mine", O.O_CREAT | O.O_EXCL | O.O_WRONLY, 0o640), ["mine"], NOBODY)
    S('chmod(".", 0755)', lambda: O.chmod(".", 0o755), ["."])
    S('open("x", O_CREAT|O_WRONLY) in a 0755 root directory', lambda: opn("x", O.O_CREAT | O.O_WRONLY), ["x"], NOBODY)
    S('open("mine", O_WRONLY|O_TRUNC) in it', lambda: opn("mine", O.O_WRONLY | O.O_TRUNC), ["mine"], NOBODY)
    S('chmod(".", 0777)', lambda: O.chmod(".", 0o777), ["."])
    S('open("%s", O_CREAT) (255 bytes)' % "n255", lambda: opn("n" * 255, O.O_CREAT | O.O_WRONLY), ["n" * 255])
    S('open("%s", O_CREAT) (256 bytes)' % "n256", lambda: opn("n" * 256, O.O_CREAT | O.O_WRONLY), [])
    S('open("n256", O_RDONLY)', lambda: opn("n" * 256, O.O_RDONLY), [])
    S('unlink(255 bytes)', lambda: O.unlink("n" * 255), ["n" * 255])

    def unlinked_open():
        fd = O.open("open-gone", O.O_RDWR | O.O_CREAT, 0o644)
        try:
            O.write(fd, b"still here")
            O.unlink("open-gone")
            st = O.fstat(fd)
            return "fstat nlink %d size %d, pread %r" % (st.st_nlink, st.st_size, O.pread(fd, 20, 0).decode())
        finally:
            O.close(fd)
    S('open("open-gone", O_CREAT|O_RDWR), write, unlink, fstat, pread', unlinked_open, ["open-gone"])
    S('open("f", O_RDONLY|O_NOATIME) by nobody (not owner)', lambda: opn("f", O.O_RDONLY | O.O_NOATIME), ["f"], NOBODY)
    S('open("mine", O_RDONLY|O_NOATIME) by nobody (owner)', lambda: opn("mine", O.O_RDONLY | O.O_NOATIME), ["mine"], NOBODY)
    S('symlink("f", "s256") (256 bytes)', lambda: O.symlink("f", "s" * 256), [])
    S('mknod("p256", S_IFIFO) (256 bytes)', lambda: O.mknod("p" * 256, stat.S_IFIFO | 0o600), [])
    S('readdir(".")', lambda: listing("."), ["."])

    # ---- O_TMPFILE (ext4 has it)
    R.section("tmpfile")
    def tmpfile():
        fd = O.open(".", O.O_TMPFILE | O.O_RDWR, 0o600)
        R.fds["tmp"] = fd
        O.write(fd, b"temporary")
        st = O.fstat(fd)
        return "nlink %d size %d mode %04o" % (st.st_nlink, st.st_size, stat.S_IMODE(st.st_mode))

    def tmplink():		# linkat(fd, "", AT_EMPTY_PATH) (root: CAP_DAC_READ_SEARCH)
        if "tmp" not in R.fds:
            raise OSError(errno.EBADF, "no O_TMPFILE file")
        fd = R.fds.pop("tmp")
        try:
            check(libc.linkat(fd, b"", AT_FDCWD, b"linked", AT_EMPTY_PATH))
        finally:
            O.close(fd)
    S('open(".", O_TMPFILE|O_RDWR, 0600), write 9, fstat', tmpfile, ["."])
    S('linkat(the O_TMPFILE file, "linked", AT_EMPTY_PATH)', tmplink, ["linked"])
    S('read("linked")', lambda: content("linked"), ["linked"])

    def tmp_excl():
        fd = O.open(".", O.O_TMPFILE | O.O_RDWR | O.O_EXCL, 0o600)
        try:
            check(libc.linkat(fd, b"", AT_FDCWD, b"never", AT_EMPTY_PATH))
        finally:
            O.close(fd)
    S('open(O_TMPFILE|O_EXCL), then linkat', tmp_excl, ["never"])
    S('put("f"), open("f", O_TMPFILE|O_RDWR)', lambda: put("f", b"") or opn("f", O.O_TMPFILE | O.O_RDWR, 0o600), ["f"])
    S('readdir(".")', lambda: listing("."), ["."])

    # ---- mkdir and rmdir
    R.section("dirs")
    S('mkdir("d", 0755)', lambda: O.mkdir("d", 0o755), ["d"])
    S('mkdir("d", 0755)', lambda: O.mkdir("d", 0o755), ["d"])
    S('mkdir("d/e", 07777) (umask 022)', lambda: O.mkdir("d/e", 0o7777), ["d/e"])
    S('put("d/e/file")', lambda: put("d/e/file", b"x"), ["d/e/file"])
    S('mkdir("d/e/file/x")', lambda: O.mkdir("d/e/file/x"), ["d/e/file"])
    S('rmdir("d/e/file")', lambda: O.rmdir("d/e/file"), ["d/e/file"])
    S('rmdir("d/e")', lambda: O.rmdir("d/e"), ["d/e"])
    S('rmdir("d/e/.")', lambda: O.rmdir("d/e/."), ["d/e"])
    S('rmdir("d/e/..")', lambda: O.rmdir("d/e/.."), ["d/e", "d"])
    S('rmdir("d/none")', lambda: O.rmdir("d/none"), ["d/none"])
    S('unlink("d/e")', lambda: O.unlink("d/e"), ["d/e"])
    S('unlink("d/e/file")', lambda: O.unlink("d/e/file"), ["d/e/file"])
    S('rmdir("d/e")', lambda: O.rmdir("d/e"), ["d/e"])
    S('mkdir("d/e")', lambda: O.mkdir("d/e"), ["d/e"])
    S('mkdir("d/f")', lambda: O.mkdir("d/f"), ["d/f"])
    S('rmdir("d/e") by a non-owner (0755 parent)', lambda: O.rmdir("d/e"), ["d/e"], NOBODY)
    S('mkdir("d/g") by a non-owner', lambda: O.mkdir("d/g"), ["d/g"], NOBODY)
    S('rmdir("d/f")', lambda: O.rmdir("d/f"), ["d/f"])
    S('mkdir("%s") (255 bytes)' % "m255", lambda: O.mkdir("m" * 255), ["m" * 255])
    S('mkdir("m256") (256 bytes)', lambda: O.mkdir("m" * 256), [])
    S('readdir("d")', lambda: listing("d"), ["d"])
    S('mkdir("t/") (a trailing slash)', lambda: O.mkdir("t/"), ["t"])
    S('put("tf"), stat("tf/")', lambda: put("tf", b"") or O.stat("tf/") and None, ["tf"])
    S('open("tf/", O_RDONLY)', lambda: opn("tf/", O.O_RDONLY), ["tf"])
    S('open("new/", O_CREAT|O_WRONLY)', lambda: opn("new/", O.O_CREAT | O.O_WRONLY), ["new"])
    S('rename("tf", "tg/")', lambda: O.rename("tf", "tg/"), ["tf", "tg"])
    S('rename("t/", "u/")', lambda: O.rename("t/", "u/"), ["t", "u"])
    S('unlink("tf/")', lambda: O.unlink("tf/"), ["tf"])
    S('rmdir("u/")', lambda: O.rmdir("u/"), ["u"])
    S('symlink("tf", "st/")', lambda: O.symlink("tf", "st/"), ["st"])
    S('readdir(".")', lambda: listing("."), ["."])

    # ---- link and unlink
    R.section("link")
    S('put("f")', lambda: put("f", b"data"), ["f"])
    S('link("f", "g")', lambda: O.link("f", "g"), ["f", "g"])
    S('link("f", "g")', lambda: O.link("f", "g"), ["f", "g"])
    S('mkdir("d")', lambda: O.mkdir("d"), ["d"])
    S('link("f", "d/h")', lambda: O.link("f", "d/h"), ["f", "d/h"])
    S('link("d", "d2")', lambda: O.link("d", "d2"), ["d", "d2"])
    S('link("none", "x")', lambda: O.link("none", "x"), ["x"])
    S('link("f", "none/x")', lambda: O.link("f", "none/x"), ["f"])
    S('link("f", "m255")', lambda: O.link("f", "m" * 255), ["f", "m" * 255])
    S('link("f", "m256")', lambda: O.link("f", "m" * 256), ["f"])
    S('unlink("m255")', lambda: O.unlink("m" * 255), ["f", "m" * 255])
    S('unlink("g")', lambda: O.unlink("g"), ["f", "g"])
    S('unlink("d")', lambda: O.unlink("d"), ["d"])
    S('unlink("none")', lambda: O.unlink("none"), ["none"])
    S('symlink("f", "s")', lambda: O.symlink("f", "s"), ["s"])
    S('link("s", "s2") (the symlink itself)', lambda: O.link("s", "s2", follow_symlinks=False), ["s", "s2", "f"])
    S('linkat("s", "s3", AT_SYMLINK_FOLLOW)', lambda: O.link("s", "s3", follow_symlinks=True), ["s", "s3", "f"])
    S('unlink("s")', lambda: O.unlink("s"), ["s", "s2"])
    S('chmod("f", 0600)', lambda: O.chmod("f", 0o600), ["f"])
    S('link("f", "u") (protected_hardlinks: not owner, no read+write)', lambda: O.link("f", "u"), ["f", "u"], NOBODY)
    S('chmod("f", 0666)', lambda: O.chmod("f", 0o666), ["f"])
    S('link("f", "u")', lambda: O.link("f", "u"), ["f", "u"], NOBODY)
    S('unlink("u")', lambda: O.unlink("u"), ["f", "u"], NOBODY)
    S('unlink("d/h"), unlink("s3"), unlink("s2")', lambda: [O.unlink(p) for p in ("d/h", "s3", "s2")] and None, ["f", "d", "s2"])
    S('read("f")', lambda: content("f"), ["f"])
    S('readdir(".")', lambda: listing("."), ["."])

    # ---- symlinks
    R.section("symlink")
    S('symlink("target", "l")', lambda: O.symlink("target", "l"), ["l"])
    S('readlink("l")', lambda: readlink("l"), ["l"])
    S('symlink("other", "l")', lambda: O.symlink("other", "l"), ["l"])
    S('readlink(".")', lambda: readlink("."), ["."])
    S('put("f"), readlink("f")', lambda: put("f", b"") or readlink("f"), ["f"])
    S('symlink(1000 bytes, "l1000")', lambda: O.symlink("a/" * 500, "l1000"), ["l1000"])
    S('readlink("l1000")', lambda: readlink("l1000"), ["l1000"])
    S('symlink(4095 bytes, "l4095")', lambda: O.symlink("b" * 4095, "l4095"), ["l4095"])
    S('readlink("l4095")', lambda: readlink("l4095"), ["l4095"])
    S('symlink(4096 bytes, "l4096")', lambda: O.symlink("b" * 4096, "l4096"), ["l4096"])
    S('symlink("", "empty")', lambda: O.symlink("", "empty"), ["empty"])
    S('symlink("loop", "loop")', lambda: O.symlink("loop", "loop"), ["loop"])
    S('open("loop", O_RDONLY)', lambda: opn("loop", O.O_RDONLY), ["loop"])
    S('stat("l")', lambda: O.stat("l") and None, ["l"])
    S('mkdir("d"), symlink("d", "ld")', lambda: O.mkdir("d") or O.symlink("d", "ld"), ["d", "ld"])
    S('put("ld/through")', lambda: put("ld/through", b"via link"), ["d/through", "ld"])
    S('rmdir("ld")', lambda: O.rmdir("ld"), ["ld", "d"])
    S('lchown("l", 65534, 4242)', lambda: O.lchown("l", 65534, G), ["l"])
    S('symlink("f", "nob") by nobody', lambda: O.symlink("f", "nob"), ["nob"], NOBODY)
    S('readdir(".")', lambda: listing("."), ["."])

    # ---- rename
    R.section("rename")
    S('put("a"), put("b")', lambda: put("a", b"aaa") or put("b", b"bbbbbb"), ["a", "b"])
    S('link("b", "b2")', lambda: O.link("b", "b2"), ["b", "b2"])
    S('rename("a", "b") (over a file with 2 links)', lambda: O.rename("a", "b"), ["a", "b", "b2"])
    S('read("b")', lambda: content("b"), ["b"])
    S('rename("b", "b")', lambda: O.rename("b", "b"), ["b"])
    S('link("b", "c")', lambda: O.link("b", "c"), ["b", "c"])
    S('rename("b", "c") (two links of one inode)', lambda: O.rename("b", "c"), ["b", "c"])
    S('mkdir("d1"), mkdir("d2"), mkdir("e")', lambda: O.mkdir("d1") or O.mkdir("d2") or O.mkdir("e"), ["d1", "d2", "e"])
    S('rename("d1", "d2") (over an empty directory)', lambda: O.rename("d1", "d2"), ["d1", "d2"])
    S('put("e/x")', lambda: put("e/x", b""), ["e/x"])
    S('rename("d2", "e") (over a non-empty one)', lambda: O.rename("d2", "e"), ["d2", "e"])
    S('rename("c", "e")', lambda: O.rename("c", "e"), ["c", "e"])
    S('rename("d2", "c")', lambda: O.rename("d2", "c"), ["c", "d2"])
    S('mkdir("d2/sub")', lambda: O.mkdir("d2/sub"), ["d2/sub"])
    S('rename("d2", "d2/sub/in")', lambda: O.rename("d2", "d2/sub/in"), ["d2", "d2/sub"])
    S('rename("d2/sub", "e/sub") (across directories)', lambda: O.rename("d2/sub", "e/sub"), ["d2/sub", "e/sub", "d2", "e"])
    S('stat("e/sub/..") is "e"', lambda: same("e/sub/..", "e"), ["e/sub"])
    S('mkdir("e/sub/deep"), rename("e/sub", "sub")', lambda: O.mkdir("e/sub/deep") or O.rename("e/sub", "sub"), ["e/sub", "sub", "sub/deep", "e"])
    S('stat("sub/..") is "."', lambda: same("sub/..", "."), ["sub"])
    S('rename("e/x", "d2/x") (a file across directories)', lambda: O.rename("e/x", "d2/x"), ["e/x", "d2/x", "e", "d2"])
    S('rename(".", "z")', lambda: O.rename(".", "z"), ["."])
    S('rename("sub/deep/..", "z")', lambda: O.rename("sub/deep/..", "z"), ["sub"])
    S('rename("none", "z")', lambda: O.rename("none", "z"), ["z"])
    S('rename("c", "m256")', lambda: O.rename("c", "m" * 256), ["c"])
    S('rename("c", "m255")', lambda: O.rename("c", "m" * 255), ["c", "m" * 255])
    S('symlink("c", "sl"), rename("sl", "sl2")', lambda: O.symlink("c", "sl") or O.rename("sl", "sl2"), ["sl", "sl2"])
    S('readlink("sl2")', lambda: readlink("sl2"), ["sl2"])
    S('chmod("d2", 0755), rename("d2/x", "moved") by nobody', lambda: O.chmod("d2", 0o755), ["d2"])
    S('rename("d2/x", "moved")', lambda: O.rename("d2/x", "moved"), ["d2/x", "moved"], NOBODY)
    S('mkdir("own") by nobody, mkdir("own/sd")', lambda: O.mkdir("own") or O.mkdir("own/sd"), ["own", "own/sd"], NOBODY)
    S('chmod("own", 0555) by nobody', lambda: O.chmod("own", 0o555), ["own"], NOBODY)
    S('rename("own/sd", "sd") (no write on own)', lambda: O.rename("own/sd", "sd"), ["own/sd", "sd", "own"], NOBODY)
    S('chmod("own", 0755) by nobody, chmod("own/sd", 0555)', lambda: O.chmod("own", 0o755) or O.chmod("own/sd", 0o555), ["own", "own/sd"], NOBODY)
    S('rename("own/sd", "sd") (a directory without write permission)', lambda: O.rename("own/sd", "sd"), ["own/sd", "sd", "own"], NOBODY)
    S('readdir(".")', lambda: listing("."), ["."])
    S('readdir("e"), readdir("d2")', lambda: listing("e") + " | " + listing("d2"), ["e", "d2"])

    # ---- renameat2
    R.section("renameat2")
    S('put("a"), put("b"), mkdir("d"), mkdir("d2")',
      lambda: put("a", b"A") or put("b", b"BB") or O.mkdir("d") or O.mkdir("d2"), ["a", "b", "d", "d2"])
    S('renameat2("a", "b", RENAME_NOREPLACE)', lambda: renameat2("a", "b", RENAME_NOREPLACE), ["a", "b"])
    S('renameat2("a", "c", RENAME_NOREPLACE)', lambda: renameat2("a", "c", RENAME_NOREPLACE), ["a", "c"])
    S('renameat2("d", "d2", RENAME_NOREPLACE)', lambda: renameat2("d", "d2", RENAME_NOREPLACE), ["d", "d2"])
    S('renameat2("b", "c", RENAME_EXCHANGE)', lambda: renameat2("b", "c", RENAME_EXCHANGE), ["b", "c"])
    S('read("b"), read("c")', lambda: content("b") + ", " + content("c"), ["b", "c"])
    S('mkdir("d/sub")', lambda: O.mkdir("d/sub"), ["d/sub"])
    S('renameat2("b", "d/sub", RENAME_EXCHANGE) (file and directory)', lambda: renameat2("b", "d/sub", RENAME_EXCHANGE), ["b", "d/sub", "d"])
    S('stat("b/..") is "."', lambda: same("b/..", "."), ["b"])
    S('renameat2("d2", "b/in", RENAME_EXCHANGE) (with a missing name)', lambda: renameat2("d2", "b/in", RENAME_EXCHANGE), ["d2", "b/in"])
    S('renameat2("b", "b/x", RENAME_EXCHANGE)', lambda: renameat2("b", "b/x", RENAME_EXCHANGE), ["b"])
    S('mkdir("b/x"), renameat2("b", "b/x", RENAME_EXCHANGE) (into its own subdirectory)', lambda: O.mkdir("b/x") or renameat2("b", "b/x", RENAME_EXCHANGE), ["b", "b/x"])
    S('renameat2("c", "d2", RENAME_NOREPLACE|RENAME_EXCHANGE)', lambda: renameat2("c", "d2", RENAME_NOREPLACE | RENAME_EXCHANGE), ["c", "d2"])
    S('renameat2("c", "c2", 8 (unknown flag))', lambda: renameat2("c", "c2", 8), ["c", "c2"])
    S('renameat2("c", "c2", RENAME_WHITEOUT)', lambda: renameat2("c", "c2", RENAME_WHITEOUT), ["c", "c2"])
    S('renameat2("c2", "c3", RENAME_WHITEOUT) by nobody', lambda: renameat2("c2", "c3", RENAME_WHITEOUT), ["c2", "c3"], NOBODY)
    S('readdir(".")', lambda: listing("."), ["."])

    # ---- truncate
    R.section("truncate")
    S('put("f", 10 bytes)', lambda: put("f", b"0123456789"), ["f"])
    S('truncate("f", 100000)', lambda: O.truncate("f", 100000), ["f"])
    S('read("f")', lambda: content("f"), ["f"])
    S('truncate("f", 5)', lambda: O.truncate("f", 5), ["f"])
    S('read("f")', lambda: content("f"), ["f"])
    S('truncate("f", 5) (same size)', lambda: O.truncate("f", 5), ["f"])
    S('truncate("f", 8000), read', lambda: O.truncate("f", 8000) or content("f"), ["f"])

    def ftrunc(flags, n):
        fd = O.open("f", flags)
        try:
            O.ftruncate(fd, n)
        finally:
            O.close(fd)
    S('ftruncate(open("f", O_RDONLY), 0)', lambda: ftrunc(O.O_RDONLY, 0), ["f"])
    S('ftruncate(open("f", O_WRONLY), 3)', lambda: ftrunc(O.O_WRONLY, 3), ["f"])
    S('truncate("f", -1)', lambda: O.truncate("f", -1), ["f"])
    S('truncate("f", 1) by nobody (0644)', lambda: O.truncate("f", 1), ["f"], NOBODY)
    S('truncate(".", 0)', lambda: O.truncate(".", 0), ["."])
    S('truncate("none", 0)', lambda: O.truncate("none", 0), ["none"])
    S('truncate("f", 2**40)', lambda: O.truncate("f", 1 << 40), ["f"])
    S('truncate("f", 0)', lambda: O.truncate("f", 0), ["f"])
    S('pwrite("f", 1 byte at 2**43 - 1)', lambda: write_at("f", (1 << 43) - 1, b"e"), ["f"])
    S('truncate("f", 0)', lambda: O.truncate("f", 0), ["f"])
    S('truncate("f", 2**44 (16 TiB))', lambda: O.truncate("f", 1 << 44), ["f"])
    S('truncate("f", 2**63-1)', lambda: O.truncate("f", 2**63 - 1), ["f"])
    S('pwrite("f", 1 byte at 2**62)', lambda: write_at("f", 1 << 62, b"e"), ["f"])
    S('put("f", 10 bytes), open("f", O_RDONLY|O_TRUNC) by root (Linux truncates)', lambda: put("f", b"0123456789") or opn("f", O.O_RDONLY | O.O_TRUNC), ["f"])
    S('truncate("f", 0)', lambda: O.truncate("f", 0), ["f"])
    S('put("w", 0666) and truncate("w", 7) by nobody', lambda: put("w", b"", mode=0o666) or O.chmod("w", 0o666), ["w"])
    S('truncate("w", 7)', lambda: O.truncate("w", 7), ["w"], NOBODY)

    # ---- chmod
    R.section("chmod")
    S('put("f"), chmod("f", 0640)', lambda: put("f", b"x") or O.chmod("f", 0o640), ["f"])
    S('chmod("f", 0640) (same mode)', lambda: O.chmod("f", 0o640), ["f"])
    S('chmod("f", 07777)', lambda: O.chmod("f", 0o7777), ["f"])
    S('chmod("f", 0644) by nobody', lambda: O.chmod("f", 0o644), ["f"], NOBODY)
    S('put("mine") by nobody', lambda: put("mine", b""), ["mine"], NOBODY)
    S('chown("mine", -1, 4242)', lambda: O.chown("mine", -1, G), ["mine"])
    S('chmod("mine", 02755) by nobody (not in 4242)', lambda: O.chmod("mine", 0o2755), ["mine"], NOBODY)
    S('chmod("mine", 02755) by nobody in 4242', lambda: O.chmod("mine", 0o2755), ["mine"], MEMBER)
    S('chmod("mine", 01755) by nobody (sticky on a file)', lambda: O.chmod("mine", 0o1755), ["mine"], NOBODY)
    S('chmod("mine", 04755) by nobody', lambda: O.chmod("mine", 0o4755), ["mine"], NOBODY)
    S('mkdir("d"), chown("d", 65534, 4242)', lambda: O.mkdir("d") or O.chown("d", 65534, G), ["d"])
    S('chmod("d", 02777) by nobody (not in 4242)', lambda: O.chmod("d", 0o2777), ["d"], NOBODY)
    S('symlink("f", "l"), chmod("l", 0600) (follows)', lambda: O.symlink("f", "l") or O.chmod("l", 0o600), ["l", "f"])
    S('chmod("none", 0600)', lambda: O.chmod("none", 0o600), ["none"])

    # ---- chown
    R.section("chown")
    S('put("f", 06755)', lambda: put("f", b"x") or O.chmod("f", 0o6755), ["f"])
    S('chown("f", 65534, -1) by nobody', lambda: O.chown("f", 65534, -1), ["f"], NOBODY)
    S('chown("f", 65534, 65534) (suid and sgid go)', lambda: O.chown("f", 65534, 65534), ["f"])
    S('chown("f", -1, 4242) by nobody (not in 4242)', lambda: O.chown("f", -1, G), ["f"], NOBODY)
    S('chmod("f", 06755) by root', lambda: O.chmod("f", 0o6755), ["f"])
    S('chown("f", -1, 4242) by nobody in 4242', lambda: O.chown("f", -1, G), ["f"], MEMBER)
    S('chmod("f", 02745)', lambda: O.chmod("f", 0o2745), ["f"])
    S('chown("f", 0, 0) (sgid without group exec stays)', lambda: O.chown("f", 0, 0), ["f"])
    S('chmod("f", 06755), chown("f", -1, -1)', lambda: O.chmod("f", 0o6755) or O.chown("f", -1, -1), ["f"])
    S('chown("f", 0, 0) (no change of owner)', lambda: O.chown("f", 0, 0), ["f"])
    S('chown("f", 65534, -1) by nobody (to itself, not owner)', lambda: O.chown("f", 65534, -1), ["f"], NOBODY)
    S('chown("f", -1, -1) by other (not owner)', lambda: O.chown("f", -1, -1), ["f"], OTHER)
    S('mkdir("d"), chmod("d", 06755)', lambda: O.mkdir("d") or O.chmod("d", 0o6755), ["d"])
    S('chown("d", 65534, 4242) (a directory keeps its bits)', lambda: O.chown("d", 65534, G), ["d"])
    S('symlink("f", "l"), lchown("l", 4343, 4343)', lambda: O.symlink("f", "l") or O.lchown("l", 4343, 4343), ["l", "f"])
    S('chown("l", 4343, -1) (follows)', lambda: O.chown("l", 4343, -1), ["l", "f"])
    S('chown("f", 2**32-2, 2**32-2)', lambda: O.chown("f", 2**32 - 2, 2**32 - 2), ["f"])

    # ---- utimensat
    R.section("utimes")
    S('put("f", 0666)', lambda: put("f", b"x") or O.chmod("f", 0o666), ["f"])
    S('utimensat("f", UTIME_NOW, UTIME_NOW) by a writer', lambda: utimens("f", UTIME_NOW, UTIME_NOW), ["f"], NOBODY)
    S('utimensat("f", explicit) by a writer', lambda: utimens("f", (1000, 0), (2000, 0)), ["f"], NOBODY)
    S('utimensat("f", UTIME_NOW, UTIME_OMIT) by a writer', lambda: utimens("f", UTIME_NOW, UTIME_OMIT), ["f"], NOBODY)
    S('chmod("f", 0644)', lambda: O.chmod("f", 0o644), ["f"])
    S('utimensat("f", UTIME_NOW, UTIME_NOW) by a non-writer', lambda: utimens("f", UTIME_NOW, UTIME_NOW), ["f"], NOBODY)
    S('utimensat("f", 1234567890.123456789, 1234567891.5)', lambda: times_set("f", (1234567890, 123456789), (1234567891, 500000000)), ["f"])
    S('utimensat("f", UTIME_OMIT, UTIME_OMIT)', lambda: utimens("f", UTIME_OMIT, UTIME_OMIT), ["f"])
    S('utimensat("f", UTIME_OMIT, UTIME_NOW)', lambda: utimens("f", UTIME_OMIT, UTIME_NOW), ["f"])
    S('utimensat("f", UTIME_NOW, UTIME_OMIT)', lambda: utimens("f", UTIME_NOW, UTIME_OMIT), ["f"])
    S('utimensat("f", -1000.25 (before 1970), 0)', lambda: times_set("f", (-1001, 750000000), (0, 0)), ["f"])
    S('utimensat("f", 2**33 (year 2242), 2**31)', lambda: times_set("f", (1 << 33, 0), (1 << 31, 0)), ["f"])
    S('utimensat("f", nsec 1000000000)', lambda: utimens("f", (1, 1000000000), UTIME_OMIT), ["f"])
    S('chown("f", 65534, -1), utimensat explicit by the owner', lambda: O.chown("f", 65534, -1), ["f"])
    S('utimensat("f", 5000, 6000) by the owner', lambda: times_set("f", (5000, 0), (6000, 0)), ["f"], NOBODY)
    S('symlink("f", "l"), utimensat("l", 7000, 7000, AT_SYMLINK_NOFOLLOW)', lambda: O.symlink("f", "l") or utimens("l", (7000, 0), (7000, 0), True), ["l", "f"])

    # ---- the sticky directory
    R.section("sticky", 0o1777)
    S('put("rootfile")', lambda: put("rootfile", b"r"), ["rootfile"])
    S('put("nobfile") by nobody', lambda: put("nobfile", b"n", mode=0o666), ["nobfile"], NOBODY)
    S('chmod("nobfile", 0666) by nobody', lambda: O.chmod("nobfile", 0o666), ["nobfile"], NOBODY)
    S('unlink("rootfile") by nobody', lambda: O.unlink("rootfile"), ["rootfile"], NOBODY)
    S('rename("rootfile", "r2") by nobody', lambda: O.rename("rootfile", "r2"), ["rootfile", "r2"], NOBODY)
    S('rename("nobfile", "rootfile") by nobody (over root\'s)', lambda: O.rename("nobfile", "rootfile"), ["nobfile", "rootfile"], NOBODY)
    S('unlink("nobfile") by other', lambda: O.unlink("nobfile"), ["nobfile"], OTHER)
    S('rename("nobfile", "x") by other', lambda: O.rename("nobfile", "x"), ["nobfile", "x"], OTHER)
    S('write("nobfile") by other (0666)', lambda: write_at("nobfile", 0, b"o"), ["nobfile"], OTHER)
    S('mkdir("rd") by root, rmdir("rd") by nobody', lambda: O.mkdir("rd"), ["rd"])
    S('rmdir("rd") by nobody', lambda: O.rmdir("rd"), ["rd"], NOBODY)
    S('rename("nobfile", "n2") by nobody (owner)', lambda: O.rename("nobfile", "n2"), ["nobfile", "n2"], NOBODY)
    S('unlink("n2") by root', lambda: O.unlink("n2"), ["n2"])
    S('mkdir("own", 01777) by nobody', lambda: O.mkdir("own") or O.chmod("own", 0o1777), ["own"], NOBODY)
    S('put("own/o") by other', lambda: put("own/o", b"", mode=0o644), ["own/o"], OTHER)
    S('unlink("own/o") by nobody (owns the directory)', lambda: O.unlink("own/o"), ["own/o"], NOBODY)
    S('readdir(".")', lambda: listing("."), ["."])

    # ---- setgid directories
    R.section("setgid")
    S('mkdir("g"), chown("g", 0, 4242), chmod("g", 02777)', lambda: O.mkdir("g") or O.chown("g", 0, G) or O.chmod("g", 0o2777), ["g"])
    S('put("g/f")', lambda: put("g/f", b""), ["g/f"])
    S('mkdir("g/sub", 0755)', lambda: O.mkdir("g/sub", 0o755), ["g/sub"])
    S('mkdir("g/sub/deeper", 0700)', lambda: O.mkdir("g/sub/deeper", 0o700), ["g/sub/deeper"])
    S('open("g/nf", O_CREAT, 02755) by nobody (not in 4242)', lambda: opn("g/nf", O.O_CREAT | O.O_WRONLY, 0o2755), ["g/nf"], NOBODY)
    S('open("g/mf", O_CREAT, 02755) by nobody in 4242', lambda: opn("g/mf", O.O_CREAT | O.O_WRONLY, 0o2755), ["g/mf"], MEMBER)
    S('mkdir("g/nd", 0755) by nobody', lambda: O.mkdir("g/nd", 0o755), ["g/nd"], NOBODY)
    S('mknod("g/fifo", S_IFIFO|02666) by nobody', lambda: O.mknod("g/fifo", stat.S_IFIFO | 0o2666), ["g/fifo"], NOBODY)
    S('symlink("f", "g/l")', lambda: O.symlink("f", "g/l"), ["g/l"])
    S('open("g/rf", O_CREAT, 02755) by root', lambda: opn("g/rf", O.O_CREAT | O.O_WRONLY, 0o2755), ["g/rf"])
    S('chmod("g", 0777) (setgid off), mkdir("g/plain")', lambda: O.chmod("g", 0o777) or O.mkdir("g/plain"), ["g", "g/plain"])

    # ---- killpriv: a write by a non-owner clears suid and sgid
    R.section("killpriv")
    S('put("f"), chmod("f", 06777)', lambda: put("f", b"x") or O.chmod("f", 0o6777), ["f"])
    S('write("f") by root', lambda: write_at("f", 1, b"r"), ["f"])
    S('write("f") by nobody', lambda: write_at("f", 0, b"y"), ["f"], NOBODY)
    S('chmod("f", 02767) (sgid without group exec)', lambda: O.chmod("f", 0o2767), ["f"])
    S('write("f") by nobody', lambda: write_at("f", 0, b"z"), ["f"], NOBODY)
    S('chmod("f", 06777)', lambda: O.chmod("f", 0o6777), ["f"])
    S('truncate("f", 100) by nobody', lambda: O.truncate("f", 100), ["f"], NOBODY)
    S('chmod("f", 04777)', lambda: O.chmod("f", 0o4777), ["f"])
    S('O_TRUNC open by nobody', lambda: opn("f", O.O_WRONLY | O.O_TRUNC), ["f"], NOBODY)
    S('chown("f", 65534, 65534), chmod("f", 06777)', lambda: O.chown("f", 65534, 65534) or O.chmod("f", 0o6777), ["f"])
    S('write("f") by its owner', lambda: write_at("f", 0, b"o"), ["f"], NOBODY)
    S('chmod("f", 06777)', lambda: O.chmod("f", 0o6777), ["f"])
    S('fallocate("f", 0, 0, 8192) by other', lambda: fallocate("f", 0, 0, 8192), ["f"], OTHER)

    # security.capability goes with any write or chown (ATTR_KILL_PRIV), root's too
    import struct
    CAP = "security.capability"
    caps = struct.pack("<IIIII", 0x02000001, 1 << 10, 0, 0, 0)	# v2, effective, cap_net_bind_service
    S('put("c", 0755), setxattr("c", security.capability v2 cap_net_bind_service+ep)',
      lambda: put("c", b"#!/bin/sh\n", mode=0o755) or O.setxattr("c", CAP, caps), ["c"])
    S('getxattr("c", security.capability)', lambda: xget("c", CAP), ["c"])
    S('write("c") by root', lambda: write_at("c", 0, b"#"), ["c"])
    S('getxattr("c", security.capability)', lambda: xget("c", CAP), ["c"])
    S('setxattr again, chown("c", 65534, -1)', lambda: O.setxattr("c", CAP, caps) or O.chown("c", 65534, -1), ["c"])
    S('getxattr("c", security.capability)', lambda: xget("c", CAP), ["c"])
    S('setxattr again, truncate("c", 1) by root', lambda: O.setxattr("c", CAP, caps) or O.truncate("c", 1), ["c"])
    S('getxattr("c", security.capability)', lambda: xget("c", CAP), ["c"])
    S('setxattr("c", security.capability) by nobody (owner)', lambda: O.setxattr("c", CAP, caps), ["c"], NOBODY)

    # ---- mknod
    R.section("mknod")
    S('mkfifo("fifo", 0644)', lambda: O.mkfifo("fifo", 0o644), ["fifo"])
    S('mknod("chr", S_IFCHR|0600, 1,3)', lambda: O.mknod("chr", stat.S_IFCHR | 0o600, O.makedev(1, 3)), ["chr"])
    S('mknod("blk", S_IFBLK|0600, 7,0)', lambda: O.mknod("blk", stat.S_IFBLK | 0o600, O.makedev(7, 0)), ["blk"])
    S('mknod("big", S_IFCHR|0600, 4095,1048575)', lambda: O.mknod("big", stat.S_IFCHR | 0o600, O.makedev(4095, 1048575)), ["big"])
    S('mknod("sock", S_IFSOCK|0600)', lambda: O.mknod("sock", stat.S_IFSOCK | 0o600), ["sock"])
    S('mknod("reg", S_IFREG|0600)', lambda: O.mknod("reg", stat.S_IFREG | 0o600), ["reg"])
    S('mknod("fifo", S_IFIFO)', lambda: O.mknod("fifo", stat.S_IFIFO | 0o600), ["fifo"])
    S('mknod("c2", S_IFCHR, 1,3) by nobody', lambda: O.mknod("c2", stat.S_IFCHR | 0o600, O.makedev(1, 3)), ["c2"], NOBODY)
    S('mkfifo("ufifo") by nobody', lambda: O.mkfifo("ufifo", 0o600), ["ufifo"], NOBODY)
    S('mknod("zero", S_IFCHR, 0,0) (a whiteout)', lambda: O.mknod("zero", stat.S_IFCHR, 0), ["zero"])
    S('open("chr", O_RDONLY) (the device through this mount)', lambda: opn("chr", O.O_RDONLY), ["chr"])
    S('link("fifo", "fifo2")', lambda: O.link("fifo", "fifo2"), ["fifo", "fifo2"])
    S('readdir(".")', lambda: listing("."), ["."])

    # ---- access
    R.section("access")
    for m in (0o600, 0o644, 0o755, 0o000, 0o111, 0o070):
        S('put("f%o", %04o)' % (m, m), lambda m=m: put("f%o" % m, b"") or O.chmod("f%o" % m, m), ["f%o" % m])
    for who, u in (("root", None), ("nobody", NOBODY)):
        for m in (0o600, 0o644, 0o755, 0o000, 0o111):
            res = lambda m=m: " ".join(
                "%s:%s" % (k, "yes" if O.access("f%o" % m, v) else "no")
                for k, v in (("F", O.F_OK), ("R", O.R_OK), ("W", O.W_OK), ("X", O.X_OK)))
            S('access("f%o", F/R/W/X) by %s' % (m, who), res, [], u)
    S('chown("f070", 0, 4242)', lambda: O.chown("f%o" % 0o70, 0, G), ["f70"])
    S('access("f70", R_OK) by nobody in 4242', lambda: access("f70", O.R_OK), [], MEMBER)
    S('access("f70", R_OK) by nobody', lambda: access("f70", O.R_OK), [], NOBODY)

    def setuid_access():			# real uid nobody, effective root
        O.setresuid(65534, 0, 0)
        out = []
        for fl in (False, True):
            try:
                access("f600", O.R_OK, fl)
                out.append("ok")
            except OSError as e:
                out.append(errno.errorcode[e.errno])
        O.setresuid(0, 0, 0)
        return "faccessat: %s, AT_EACCESS: %s" % tuple(out)
    S('faccessat("f600", R_OK) with ruid 65534, euid 0', setuid_access, [])
    S('mkdir("d", 0700), access("d/f") by nobody', lambda: O.mkdir("d", 0o700) or put("d/f", b""), ["d"])
    S('access("d/f", F_OK) by nobody (no search)', lambda: access("d/f", O.F_OK), [], NOBODY)
    S('open("d/new", O_CREAT) by nobody (no search on d)', lambda: opn("d/new", O.O_CREAT | O.O_WRONLY), ["d"], NOBODY)
    S('mkdir("w", 0555), symlink/link/mkfifo/rename into it by root', lambda: O.mkdir("w", 0o555) or O.symlink("x", "w/s") or O.link("d/f", "w/l") or O.mkfifo("w/p") or O.rename("w/p", "w/q"), ["w", "w/s", "w/l", "w/q"])
    S('symlink("x", "w/s2") by nobody (no write on w)', lambda: O.symlink("x", "w/s2"), ["w"], NOBODY)
    S('rename("w/q", "q") by nobody (no write on w)', lambda: O.rename("w/q", "q"), ["w/q", "q"], NOBODY)
    S('mkfifo("w/p2") by nobody', lambda: O.mkfifo("w/p2"), ["w"], NOBODY)
    S('access("none", F_OK)', lambda: access("none", O.F_OK), [])
    S('access("f600/x", F_OK)', lambda: access("f600/x", O.F_OK), [])

    # ---- xattrs
    R.section("xattr")
    S('put("f")', lambda: put("f", b""), ["f"])
    S('setxattr("f", "user.a", "1")', lambda: O.setxattr("f", "user.a", b"1"), ["f"])
    S('getxattr("f", "user.a")', lambda: xget("f", "user.a"), ["f"])
    S('getxattr("f", "user.none")', lambda: xget("f", "user.none"), ["f"])
    S('setxattr("f", "user.a", "2", XATTR_CREATE)', lambda: O.setxattr("f", "user.a", b"2", O.XATTR_CREATE), ["f"])
    S('setxattr("f", "user.b", "2", XATTR_REPLACE)', lambda: O.setxattr("f", "user.b", b"2", O.XATTR_REPLACE), ["f"])
    S('setxattr("f", "user.a", "22", XATTR_REPLACE)', lambda: O.setxattr("f", "user.a", b"22", O.XATTR_REPLACE), ["f"])
    S('setxattr("f", "user.b", "", XATTR_CREATE) (empty value)', lambda: O.setxattr("f", "user.b", b"", O.XATTR_CREATE), ["f"])
    S('getxattr("f", "user.b")', lambda: xget("f", "user.b"), ["f"])
    S('setxattr("f", "trusted.t", "root")', lambda: O.setxattr("f", "trusted.t", b"root"), ["f"])
    S('setxattr("f", "user.big", 2000 bytes)', lambda: O.setxattr("f", "user.big", b"v" * 2000), ["f"])
    S('getxattr("f", "user.big")', lambda: xget("f", "user.big"), ["f"])
    S('listxattr("f") (sorted)', lambda: xlist("f"), ["f"])
    S('setxattr("f", "user." + 251 bytes)', lambda: O.setxattr("f", "user." + "k" * 250, b"x"), ["f"])
    S('setxattr("f", "user." + 256 bytes)', lambda: O.setxattr("f", "user." + "k" * 251, b"x"), ["f"])
    S('removexattr("f", "user." + 251 bytes)', lambda: O.removexattr("f", "user." + "k" * 250), ["f"])
    S('setxattr("f", "nonsense.x")', lambda: O.setxattr("f", "nonsense.x", b"x"), ["f"])
    S('setxattr("f", "user.")', lambda: O.setxattr("f", "user.", b"x"), ["f"])
    S('listxattr("f") by nobody', lambda: xlist("f"), ["f"], NOBODY)
    S('getxattr("f", "trusted.t") by nobody', lambda: xget("f", "trusted.t"), ["f"], NOBODY)
    S('setxattr("f", "trusted.u") by nobody', lambda: O.setxattr("f", "trusted.u", b"x"), ["f"], NOBODY)
    S('setxattr("f", "user.n") by nobody (0644, root\'s)', lambda: O.setxattr("f", "user.n", b"x"), ["f"], NOBODY)
    S('getxattr("f", "user.a") by nobody', lambda: xget("f", "user.a"), ["f"], NOBODY)
    S('chmod("f", 0666), setxattr("f", "user.n") by nobody', lambda: O.chmod("f", 0o666), ["f"])
    S('setxattr("f", "user.n", "x") by nobody', lambda: O.setxattr("f", "user.n", b"x"), ["f"], NOBODY)
    S('removexattr("f", "user.none")', lambda: O.removexattr("f", "user.none"), ["f"])
    S('removexattr("f", "user.a")', lambda: O.removexattr("f", "user.a"), ["f"])
    S('removexattr("f", "trusted.t")', lambda: O.removexattr("f", "trusted.t"), ["f"])
    S('listxattr("f")', lambda: xlist("f"), ["f"])
    S('symlink("f", "l"), lsetxattr("l", "user.x")', lambda: O.symlink("f", "l") or O.setxattr("l", "user.x", b"x", follow_symlinks=False), ["l", "f"])
    S('lsetxattr("l", "trusted.x")', lambda: O.setxattr("l", "trusted.x", b"x", follow_symlinks=False), ["l"])
    S('llistxattr("l")', lambda: xlist("l"), ["l"])
    S('mkfifo("p"), setxattr("p", "user.x")', lambda: O.mkfifo("p") or O.setxattr("p", "user.x", b"x"), ["p"])
    S('mkdir("d"), setxattr("d", "user.d")', lambda: O.mkdir("d") or O.setxattr("d", "user.d", b"dir"), ["d"])
    S('listxattr("d")', lambda: xlist("d"), ["d"])
    S('setxattr("f", "user.huge", 65536 bytes)', lambda: O.setxattr("f", "user.huge", b"h" * 65536), ["f"])
    S('setxattr("f", "user.over", 65537 bytes)', lambda: O.setxattr("f", "user.over", b"h" * 65537), ["f"])

    # ---- POSIX ACLs: kept in step with the mode, enforced, inherited
    R.section("acl")
    A = "system.posix_acl_access"
    S('put("f", 0644)', lambda: put("f", b"secret"), ["f"])
    S('setxattr("f", access ACL u::rw,u:65534:r,g::r,m::r,o::)', lambda: O.setxattr("f", A, acl("u::rw,U:65534:r,g::r,m::r,o::")), ["f"])
    S('getxattr("f", access ACL)', lambda: acl_get("f"), ["f"])
    S('read("f") by nobody (named entry)', lambda: content("f"), ["f"], NOBODY)
    S('read("f") by other', lambda: content("f"), ["f"], OTHER)
    S('chmod("f", 0600) (the mask follows)', lambda: O.chmod("f", 0o600), ["f"])
    S('getxattr("f", access ACL)', lambda: acl_get("f"), ["f"])
    S('read("f") by nobody (masked)', lambda: content("f"), ["f"], NOBODY)
    S('setxattr("f", access ACL) by nobody', lambda: O.setxattr("f", A, acl("u::rw,g::r,o::r")), ["f"], NOBODY)
    S('setxattr("f", access ACL u::rw,g::r,o::r) (a minimal one: only the mode)', lambda: O.setxattr("f", A, acl("u::rw,g::r,o::r")), ["f"])
    S('getxattr("f", access ACL)', lambda: acl_get("f"), ["f"])
    S('setxattr("f", a malformed ACL)', lambda: O.setxattr("f", A, b"\x02\0\0\0\x01\0"), ["f"])
    S('mkdir("d"), setxattr("d", default ACL u::rwx,u:65534:rwx,g::rx,m::rwx,o::x)',
      lambda: O.mkdir("d") or O.setxattr("d", "system.posix_acl_default", acl("u::rwx,U:65534:rwx,g::rx,m::rwx,o::x")), ["d"])
    S('open("d/f", O_CREAT, 0666) (inherits; umask not applied)', lambda: opn("d/f", O.O_CREAT | O.O_WRONLY, 0o666), ["d/f"])
    S('getxattr("d/f", access ACL)', lambda: acl_get("d/f"), ["d/f"])
    S('mkdir("d/sub", 0750)', lambda: O.mkdir("d/sub", 0o750), ["d/sub"])
    S('getxattr("d/sub", default ACL)', lambda: acl_get("d/sub", "system.posix_acl_default"), ["d/sub"])
    S('removexattr("d", default ACL), open("d/g", O_CREAT, 0666)', lambda: O.removexattr("d", "system.posix_acl_default") or opn("d/g", O.O_CREAT | O.O_WRONLY, 0o666), ["d", "d/g"])
    S('getxattr("d/g", access ACL)', lambda: acl_get("d/g"), ["d/g"])

    # ---- one file through several descriptors: what each sees
    R.section("coherence")
    S('put("f", "0123456789")', lambda: put("f", b"0123456789"), ["f"])

    def fd_open(key, path, flags):
        R.fds[key] = O.open(path, flags)

    def fd_pread(key, n, off):
        return repr(O.pread(R.fds[key], n, off).decode())
    S('r = open("f", O_RDONLY), pread(r, 10, 0)', lambda: fd_open("r", "f", O.O_RDONLY) or fd_pread("r", 10, 0), ["f"])
    S('w = open("f", O_WRONLY), pwrite(w, "AB", 2)', lambda: fd_open("w", "f", O.O_WRONLY) or "wrote %d" % O.pwrite(R.fds["w"], b"AB", 2), ["f"])
    S('pread(r, 10, 0)', lambda: fd_pread("r", 10, 0), ["f"])
    S('pwrite(w, "tail", 10) (grows), fstat(r).st_size, pread(r, 20, 0)',
      lambda: "wrote %d, size %d, %s" % (O.pwrite(R.fds["w"], b"tail", 10), O.fstat(R.fds["r"]).st_size, fd_pread("r", 20, 0)), ["f"])
    S('truncate("f", 4), pread(r, 20, 0)', lambda: O.truncate("f", 4) or fd_pread("r", 20, 0), ["f"])
    S('a = open("f", O_WRONLY|O_APPEND), pwrite(a, "xy", 0) (appends on Linux)',
      lambda: fd_open("a", "f", O.O_WRONLY | O.O_APPEND) or "wrote %d" % O.pwrite(R.fds["a"], b"xy", 0), ["f"])
    S('pread(r, 20, 0)', lambda: fd_pread("r", 20, 0), ["f"])
    S('rw = open("f", O_RDWR|O_APPEND), write "z", lseek(rw, 0, SEEK_CUR)',
      lambda: fd_open("rw", "f", O.O_RDWR | O.O_APPEND) or O.write(R.fds["rw"], b"z") and str(O.lseek(R.fds["rw"], 0, O.SEEK_CUR)), ["f"])
    S('ftruncate(a, 0) (O_APPEND, write access)', lambda: O.ftruncate(R.fds["a"], 0), ["f"])
    S('pread(r, 20, 0), pread(rw, 20, 0)', lambda: fd_pread("r", 20, 0) + " " + fd_pread("rw", 20, 0), ["f"])
    S('rename("f", "g"), pwrite(w, "W", 0), unlink("g"), fstat(r)',
      lambda: O.rename("f", "g") or O.pwrite(R.fds["w"], b"W", 0) and O.unlink("g") or
      "nlink %d size %d, %s" % (O.fstat(R.fds["r"]).st_nlink, O.fstat(R.fds["r"]).st_size, fd_pread("r", 20, 0)), ["f", "g"])

    def close_all():
        for k in ("r", "w", "a", "rw"):
            O.close(R.fds.pop(k))
    S('close all', close_all, [])

    # ---- fallocate, SEEK_DATA and SEEK_HOLE, O_DIRECT
    R.section("fallocate")
    S('put("f", 64 KiB of 0x5a)', lambda: put("f", b"\x5a" * 65536), ["f"])
    S('fallocate("f", 0, 65536, 65536)', lambda: fallocate("f", 0, 65536, 65536), ["f"])
    S('fallocate("f", KEEP_SIZE, 131072, 65536)', lambda: fallocate("f", FALLOC_FL_KEEP_SIZE, 131072, 65536), ["f"])
    S('fallocate("f", PUNCH_HOLE|KEEP_SIZE, 8192, 16384)', lambda: fallocate("f", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8192, 16384), ["f"])
    S('read("f")', lambda: content("f"), ["f"])
    S('fallocate("f", KEEP_SIZE, 0, 4096) (over data)', lambda: fallocate("f", FALLOC_FL_KEEP_SIZE, 0, 4096), ["f"])
    S('fallocate("f", 0, 0, 4096) (over data)', lambda: fallocate("f", 0, 0, 4096), ["f"])
    S('fallocate("f", PUNCH_HOLE) (without KEEP_SIZE)', lambda: fallocate("f", FALLOC_FL_PUNCH_HOLE, 0, 4096), ["f"])
    S('fallocate("f", ZERO_RANGE, 32768, 4096)', lambda: fallocate("f", FALLOC_FL_ZERO_RANGE, 32768, 4096), ["f"])
    S('fallocate("f", ZERO_RANGE, 120000, 20000) (past EOF)', lambda: fallocate("f", FALLOC_FL_ZERO_RANGE, 120000, 20000), ["f"])
    S('read("f")', lambda: content("f"), ["f"])
    S('fallocate("f", 0, 0, 0)', lambda: fallocate("f", 0, 0, 0), ["f"])
    S('fallocate("f", 0, -1, 10)', lambda: fallocate("f", 0, -1, 10), ["f"])
    S('fallocate("f", COLLAPSE_RANGE, 0, 4096)', lambda: fallocate("f", FALLOC_FL_COLLAPSE_RANGE, 0, 4096), ["f"])
    S('fallocate("f", INSERT_RANGE, 0, 4096)', lambda: fallocate("f", FALLOC_FL_INSERT_RANGE, 0, 4096), ["f"])
    S('fallocate(".", 0, 0, 4096)', lambda: fallocate(".", 0, 0, 4096), ["."])
    S('put("s"), truncate("s", 1 MiB), pwrite 4 KiB at 512 KiB', lambda: put("s", b"") or O.truncate("s", 1 << 20) or write_at("s", 1 << 19, b"d" * 4096), ["s"])
    for off, wh in ((0, "SEEK_DATA"), (0, "SEEK_HOLE"), (1 << 19, "SEEK_HOLE"), ((1 << 19) + 4096, "SEEK_DATA"), (1 << 20, "SEEK_DATA"), (1 << 20, "SEEK_HOLE"), ((1 << 20) - 1, "SEEK_HOLE")):
        S('lseek("s", %d, %s)' % (off, wh), lambda off=off, wh=wh: seek("s", off, getattr(O, wh)), [])
    S('O_DIRECT pread("s", 4096 at 512 KiB)', lambda: odirect_read("s", 1 << 19, 4096), ["s"])
    S('O_DIRECT pread("s", 4096 at 1 MiB - 4096)', lambda: odirect_read("s", (1 << 20) - 4096, 8192), ["s"])
    S('O_DIRECT pread("s", 8192 at 1 MiB) (EOF)', lambda: odirect_read("s", 1 << 20, 8192), ["s"])

    # ---- readdir, PATH_MAX
    R.section("names")
    S('create 100 files, 10 directories, 10 symlinks', lambda: [put("f%03d" % i, b"") for i in range(100)] and
      [O.mkdir("d%02d" % i) for i in range(10)] and [O.symlink("f%03d" % i, "l%02d" % i) for i in range(10)] and None, ["."])
    S('readdir(".")', lambda: listing("."), ["."])
    S('unlink 50 files, rmdir 5', lambda: [O.unlink("f%03d" % i) for i in range(0, 100, 2)] and
      [O.rmdir("d%02d" % i) for i in range(0, 10, 2)] and None, ["."])
    S('readdir(".")', lambda: listing("."), ["."])
    seg = "p" * 250
    deep = "/".join([seg] * 16)			# 16 * 251 - 1 = 4015 bytes
    S('mkdir 16 levels of 250-byte names (4015 bytes)', lambda: O.makedirs(deep), [deep])
    tail4095 = deep + "/" + "q" * (4094 - len(deep))
    S('open(4095-byte path, O_CREAT)', lambda: opn(tail4095, O.O_CREAT | O.O_WRONLY), [tail4095])
    S('open(4096-byte path, O_CREAT)', lambda: opn(tail4095 + "q", O.O_CREAT | O.O_WRONLY), [])
    S('stat("./" + 4095-byte path) (4097 bytes)', lambda: O.stat("./" + tail4095) and None, [])
    S('chdir(deep), open(relative), chdir back', lambda: O.chdir(deep) or opn("q" * 79, O.O_RDONLY) or O.chdir(R.top + "/names"), [])
    S('symlink(4095-byte target, "lp"), stat("lp")', lambda: O.symlink(tail4095, "lp") or O.stat("lp") and None, ["lp"])
    S('readdir(deep)', lambda: listing(deep), [deep])
    S('mkdir("chg"), create 1200 files k0000..k1199', lambda: O.mkdir("chg") or [put("chg/k%04d" % i, b"") for i in range(1200)] and None, ["chg"])
    S('readdir("chg") 150, telldir/seekdir, unlink 400, create 300, read on, rewinddir', lambda: readdir_changing("chg"), ["chg"])
    S('getcwd() in cw/a/b after rename("cw/a", "cw/a2"), rename("cw", "cw2")', lambda: cwd_after_rename(R.top), ["cw2/a2/b", "cw2/a2", "cw2"])
    low = bytes(b for b in range(1, 128) if b != ord("/"))
    high = bytes(range(128, 256))
    S('mkdir("bytes"), create names of every byte 1..127 but "/", and 128..255', lambda: O.mkdir("bytes") or
      put(b"bytes/" + low, b"") or put(b"bytes/" + high, b"") or put(b"bytes/a", b"") or put(b"bytes/A", b"") or
      put(b"bytes/ ", b"") or put(b"bytes/-", b"") or None, ["bytes"])
    S('readdir("bytes") (names as bytes)', lambda: " ".join(sorted(repr(n) for n in O.listdir(b"bytes"))), ["bytes"])
    S('stat each by name, unlink each', lambda: [O.stat(b"bytes/" + n) and O.unlink(b"bytes/" + n) for n in (low, high, b"a", b"A", b" ", b"-")] and None, ["bytes"])
    S('mkdir("."), mkdir("..")', lambda: "%s %s" % (R.outcome(lambda: O.mkdir(".")), R.outcome(lambda: O.mkdir(".."))), ["."])
    S('unlink("."), unlink("..")', lambda: "%s %s" % (R.outcome(lambda: O.unlink(".")), R.outcome(lambda: O.unlink(".."))), ["."])
    S('rename(deep, "up")', lambda: O.rename(deep, "up"), [deep, "up"])
    S('readdir("up")', lambda: listing("up"), ["up"])


def run(top):
    os.umask(0o022)
    if os.listdir(top) not in ([], ["lost+found"]):
        sys.exit("posix.py: %s: not empty" % top)
    os.chmod(top, 0o777)
    R = Run()
    R.top = os.path.abspath(top)
    script(R)
    for fd in R.fds.values():
        os.close(fd)


# ---------------------------------------------------------------- compare

def steps(path):
    out = {}
    with open(path) as f:
        for line in f:
            tag = line.split(":", 1)[0]
            out.setdefault(tag, []).append(line.rstrip("\n"))
    return out


def compare(ref, ours, known_path):
    a, b = steps(ref), steps(ours)
    known = {}
    with open(known_path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                tags, _, why = line.partition(" ")
                for tag in tags.split(","):
                    known[tag] = why.strip()
    bad, shown = 0, set()
    order = list(a) + [t for t in b if t not in a]
    for tag in order:
        same_ = a.get(tag) == b.get(tag)
        if same_ and tag in known:
            print("NO LONGER DIFFERS (remove its entry from %s): %s" % (known_path, tag))
            for l in a[tag]:
                print("   " + l)
            bad += 1
        elif not same_ and tag not in known:
            print("DIFFERS: %s" % tag)
            for l in a.get(tag, ["(missing)"]):
                print("   ext4: " + l)
            for l in b.get(tag, ["(missing)"]):
                print("   ours: " + l)
            bad += 1
        elif not same_:
            told = known[tag] in shown
            print("known difference %s%s" % (tag, "" if told else ": " + known[tag]))
            shown.add(known[tag])
    for tag in known:
        if tag not in a and tag not in b:
            print("NO SUCH STEP (stale entry in %s): %s" % (known_path, tag))
            bad += 1
    print("posix: %d steps, %d known differences, %d failures" % (len(order), len(known), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "run":
        run(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "compare":
        sys.exit(compare(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
