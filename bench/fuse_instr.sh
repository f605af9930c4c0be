#!/bin/sh
# bench/fuse_instr.sh: the daemon's instructions per FUSE request, counted
# by callgrind: the same on a loaded machine as on a quiet one, where lock
# hold and CPU per request swing with the load (bench/scale.sh says so of
# its own ratios).  Threads run one at a time under valgrind, so the lock is
# never contended: this is the work, not the waiting.
#   randwrite  NIOS (4096) 4 KiB random writes, fio, fixed seed, one client,
#              into a 16 MiB file put there offline (`image put`), so each
#              write overwrites data as scale.sh's randwrite does
#   untar      tar xf of a tree of FILES (3000) small files (bench/mixtree.py
#              -n, seed 36), then rm -rf of it
# Prints, per request type, calls and instructions per call (inclusive:
# everything the handler did, lock held or not), and the same of a write's
# run outside the engine lock (bch_fs_write_run) and of the commits
# (bch_trans_commit, every request's).  Usage: bench/fuse_instr.sh [BIN...] (default: this
# tree's bcachefs): several builds side by side.  Needs root, /dev/fuse, fio,
# valgrind, python3.  About a minute a build.
#
# Session 26 (h-randw36), op_write per 4 KiB random write: 31.3k
# instructions -> 28.7k (set-id and security.capability looked up once per
# inode: fusemount.h, held.nosec); of the 28.7k, bch_trans_commit 15.3k
# (ensure_room() twice 5.2k, of it journal fits()/reserve_kept() 3.1k;
# apply_key() 3.8k for 3.4 keys; bch_journal_res_get() 1.9k), the run
# outside the lock 1.7k.  Untar + rm -rf of 3000 files: op_create 24.4k ->
# 21.5k (one inode read for an entry's attributes and generation; a
# directory's missing default ACL remembered), op_readdirplus 477k -> 318k
# a call; setattr (10.9k), unlink (21k) and forget (14k) unchanged: their
# commits are most of them (bch_trans_commit 10.9k a call).
#
# Session 27 (h-commit37), the commit: 4 KiB random write 31.0k -> 24.3k
# (bch_trans_commit 15.9k -> 9.5k: leaves looked up once unless the journal
# reservation wrote, no second ensure_room() and no per-leaf reserve check,
# superseded keys of a position dropped, key copies and arrays inside the
# transaction, entry buffers zeroed once and only where nothing is copied);
# untar: write 32.2k -> 26.9k, create 22.3k -> 17.3k, unlink 22.3k -> 15.6k,
# setattr 10.7k -> 7.6k, forget 14.5k -> 12.2k.  Of a write's 24.3k now:
# apply_key() 5.0k (the leaf insert, btree_cache.c), the extent punch and
# merge (io.c, extents.c, snapshot iteration) 5.6k, inode reads 1.3k.
#
# Session 28 (h-daemon38), the daemon's own choices of engine work, untar
# and rm -rf of 3000 files, side by side with the session's start (one
# run; the same build varies ~0.5k a call between runs): op_write 27.5k ->
# 23.7k (a new file is known plain from its create: no set-id and
# capability lookups at its first write), op_setattr 8.6k -> 7.3k (a chmod
# of a file known without an access ACL looks for none; the chown after the
# utimes finds S_NOSEC still true: a setattr no longer bumps sec_gen),
# op_getxattr 3.8k -> 1.1k (the kernel's security.capability probe before a
# chown answered from the held entry), op_create 18.1k -> 17.5k (a
# directory known without S_ISGID is not read); the handlers' sum 354M ->
# 321M.  The lock's bookkeeping per hold: ~0.5k
# instructions a file less.  What is left of a request is the engine's
# (bch_trans_commit, inode and dirent lookups, bounce buffers) and libfuse's.
# Under valgrind, memset and memcpy of the 'erms' kind count every byte of
# rep stosb/movsb as an instruction: bounce_alloc()'s 4 KiB memset shows
# as ~4k instructions a write, far more than their time.
# With h-engine38's engine cuts (a transaction kept per thread, the
# iterator's key buffer not zeroed, the inode read once a write and into a
# stack buffer, getxattr/removexattr -ENODATA at once for an inode with no
# xattr key, the commit's keys sorted by btree, the dirent key on the
# stack, unlink's hash slot looked up once), main at 72ff182 -> session 28's
# end, one run, load 1.8: randwrite op_write 26.0k -> 23.0k (its commit
# 10.5k -> 10.3k); untar and rm -rf: op_write 27.5k -> 19.1k, op_setattr
# 8.5k -> 6.4k, op_create 17.6k -> 14.8k, op_unlink 16.5k -> 14.0k,
# op_forget 12.3k -> 10.4k, op_getxattr 3.8k -> 1.2k, op_lookup 3.8k ->
# 3.1k, op_getattr 2.2k -> 1.9k, bch_trans_commit 7.0k -> 6.6k a call.
# Session 29 (h-engine39: a leaf key overwritten by one of its length in
# its place, the last descent's leaf reused while no node came or went,
# search prefixes refitted, packing and pending marks cheaper), d254848 ->
# session 29's end, one run, load 2.8: randwrite op_write 22.9k -> 19.5k
# (its commit 10.2k -> 7.5k); untar and rm -rf: op_write 19.1k -> 17.1k,
# op_setattr 6.4k -> 4.5k, op_create 14.8k -> 13.6k, op_unlink 13.9k ->
# 11.7k, op_forget 11.4k -> 10.4k, op_lookup 3.1k -> 2.9k, op_getattr
# 1.9k -> 1.7k, op_readdirplus 371k -> 324k, bch_trans_commit 6.6k -> 5.2k.
# Session 30 (h-daemon40: a write's ends mutex taken twice, not six times;
# the last two held inodes looked up first; a create replies with the
# inode it wrote; an open and an atime update read the inode once; a
# notice with one mountpoint inline; getxattr probes without malloc),
# 807c9d9 -> h-daemon40, one run, load 9.5 (the handler's own share, less
# the engine's and libfuse's, in brackets): randwrite op_write 19.5k ->
# 19.2k (1341 -> 1035); untar and rm -rf: op_write 17.1k -> 16.9k (914 ->
# 656), op_create 13.6k -> 12.7k (1103 -> 1000), op_setattr 4.5k -> 4.4k
# (508 -> 425), op_unlink (376 -> 319), op_getxattr 1.1k -> 0.9k, op_lookup
# 2.9k -> 2.8k; a cat of 3000 files: op_open 4.66k -> 2.11k, op_read 19.9k
# -> 18.2k.  h-journal40's queue of sealed journal entries changed no count.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
NIOS=${NIOS:-4096}
FILES=${FILES:-3000}
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] && command -v fio >/dev/null &&
	command -v valgrind >/dev/null && command -v python3 >/dev/null || {
	echo "SKIP: fuse_instr.sh needs root, /dev/fuse, fio, valgrind and python3"; exit 0; }
[ $# -gt 0 ] || set -- "$root/bcachefs"
dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-instr.XXXXXX")
mnt=$dir/mnt
vpid=
cleanup() {
	cd /
	fusermount3 -uz "$mnt" 2>/dev/null || true
	[ -z "$vpid" ] || wait "$vpid" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$mnt" "$dir/src"
ulimit -f 4000000
head -c 16M /dev/urandom > "$dir/f16"
python3 "$root/bench/mixtree.py" -n "$dir/src/tree" 36 "$FILES" >/dev/null
tar cf "$dir/tree.tar" -C "$dir/src" tree
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); randwrite: $NIOS writes, seed 36; untar: $FILES files, seed 36"

# daemon B OUT: the daemon under callgrind, counting inside the op_* handlers only
daemon() {
	valgrind --tool=callgrind --callgrind-out-file="$2" --collect-atstart=no \
		--toggle-collect='op_*' "$1" fusemount -f "$dir/img" "$mnt" 2>"$dir/vg.err" &
	vpid=$!
	for i in $(seq 600); do mountpoint -q "$mnt" && return 0; sleep 0.1; done
	echo "mount failed: $(tail -3 "$dir/vg.err")"; exit 1
}
stop() {
	fusermount3 -u "$mnt"
	wait "$vpid" || true
	vpid=
	"$1" fsck -n "$dir/img" >/dev/null 2>&1 || { echo "fsck -n: not clean after the run"; exit 1; }
}

# report OUT: calls and inclusive instructions per call of each handler
report() {
	callgrind_annotate --inclusive=yes --auto=no --tree=calling "$1" 2>/dev/null | python3 -c '
import re, sys
calls, incl = {}, {}
for l in sys.stdin:
    m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+([*>])\s+\S+:(\w+)(?: \(([\d,]+)x\))?", l)
    if not m:
        continue
    n, kind, fn = int(m.group(1).replace(",", "")), m.group(2), m.group(3)
    if kind == "*":
        incl.setdefault(fn, n)
    elif m.group(4):
        calls[fn] = calls.get(fn, 0) + int(m.group(4).replace(",", ""))
for fn in sorted(incl, key=lambda f: -incl[f]):
    if fn.startswith("op_") and fn not in ("op_init", "op_destroy") and calls.get(fn):
        print("  %-22s %8d calls %9.1fk instructions a call" % (fn, calls[fn], incl[fn] / calls[fn] / 1000))
for fn, what in (("bch_fs_write_run", "a write'"'"'s run, outside the lock"),
                 ("bch_trans_commit", "the commits of all of them")):
    if calls.get(fn):
        print("  %-22s %8d calls %9.1fk instructions a call (%s)" % (fn, calls[fn],
              incl[fn] / calls[fn] / 1000, what))
'
}

for B in "$@"; do
	echo "== $B"
	rm -f "$dir/img"
	"$B" format -q --fs-size=1G "$dir/img"
	"$B" image put "$dir/img" "$dir/f16" /f >/dev/null
	daemon "$B" "$dir/cg.w"
	fio --name=s --filename="$mnt/f" --size=16M --rw=randwrite --bs=4k --ioengine=psync \
		--number_ios="$NIOS" --randseed=36 >/dev/null 2>&1 || echo "fio failed"
	stop "$B"
	echo "randwrite:"
	report "$dir/cg.w"
	rm -f "$dir/img"
	"$B" format -q --fs-size=1G "$dir/img"
	daemon "$B" "$dir/cg.t"
	tar xf "$dir/tree.tar" -C "$mnt"
	rm -rf "$mnt/tree"
	stop "$B"
	echo "untar and rm -rf:"
	report "$dir/cg.t"
done
