#!/usr/bin/env python3
"""bench/mixtree.py - a deterministic tree of mixed files for the device
benchmarks (bench/evacuate.sh, bench/device-add.sh).

  mixtree.py DIR SEED BYTES   files holding BYTES bytes in total
  mixtree.py -n DIR SEED N    N small files (0-4 KiB), as fast as possible

With BYTES: about 20% of the bytes in many small files (512 B - 64 KiB,
log-uniform), 20% in medium ones (64 KiB - 1 MiB), 60% in large ones
(4 - 64 MiB); 40% of the files of each kind are compressible text (words
of a small vocabulary), the rest incompressible.  Content is sliced from
two pools made from the seed, so the tree is the same for the same SEED
and BYTES, and building 2 GiB is bound by the writes, not by the random
generator.  At most 500 entries a directory.  Prints one line: files,
directories, bytes.
"""
import os
import random
import sys

POOL = 64 << 20
PER_DIR = 500


def pools(rnd):
    rand = rnd.randbytes(POOL)
    vocab = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randrange(2, 10)))
             for _ in range(400)]
    words = []
    n = 0
    while n < (8 << 20):
        w = rnd.choice(vocab) + (b"\n" if rnd.random() < 0.08 else b" ")
        words.append(w)
        n += len(w)
    return rand, b"".join(words)


def sizes(rnd, total):
    """(size, compressible) pairs adding up to total, shuffled."""
    out = []
    for share, lo, hi, logu in ((0.2, 512, 64 << 10, True), (0.2, 64 << 10, 1 << 20, False),
                                (0.6, 4 << 20, 64 << 20, False)):
        left = int(total * share)
        while left > 0:
            if logu:
                s = int(lo * (hi / lo) ** rnd.random())
            else:
                s = rnd.randrange(lo, hi + 1)
            s = min(s, left)
            out.append((s, rnd.random() < 0.4))
            left -= s
    rnd.shuffle(out)
    return out


def write_tree(root, entries, content):
    """entries: list of sizes etc.; content(i) -> bytes for file i."""
    nfiles = len(entries)
    ndirs = 0
    d = root
    for i in range(nfiles):
        if i % PER_DIR == 0:
            d = os.path.join(root, "d%04d" % (i // PER_DIR))
            os.makedirs(d)
            ndirs += 1
        with open(os.path.join(d, "f%06d" % i), "wb") as f:
            f.write(content(i))
    return ndirs


def main():
    argv = sys.argv[1:]
    if len(argv) == 4 and argv[0] == "-n":
        root, seed, n = argv[1], int(argv[2]), int(argv[3])
        rnd = random.Random(seed)
        blob = rnd.randbytes(8192)
        lens = [rnd.randrange(0, 4097) for _ in range(n)]
        os.makedirs(root, exist_ok=True)
        ndirs = write_tree(root, lens, lambda i: blob[i % 4096:i % 4096 + lens[i]])
        print("%d files, %d directories, %d bytes" % (n, ndirs, sum(lens)))
        return 0
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 16
    root, seed, total = argv[0], int(argv[1]), int(argv[2])
    rnd = random.Random(seed)
    rand, text = pools(rnd)
    files = sizes(rnd, total)
    offs = [rnd.randrange(0, POOL) for _ in files]

    def content(i):
        s, comp = files[i]
        pool = text if comp else rand
        out = []
        off = offs[i] % len(pool)
        while s > 0:
            chunk = pool[off:off + s]
            out.append(chunk)
            s -= len(chunk)
            off = 0
        return b"".join(out)

    os.makedirs(root, exist_ok=True)
    ndirs = write_tree(root, files, content)
    print("%d files, %d directories, %d bytes" % (len(files), ndirs, sum(s for s, _ in files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
