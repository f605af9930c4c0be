# Metadata copies on one device and the journal tail (issue 29, format
# version 2): --metadata-replicas=2 on one device puts the two copies of every
# btree node in different buckets and every journal entry in both halves of
# the journal; one damaged copy of any node loses nothing.  With one copy, a
# journal tail zeroed after fsync()s is reported (fsck exit 4), not replayed
# as if it had never been written.  metadata_replicas_required refuses a
# degraded read-write open.  Deterministic: treetool.py seed 47.
tree=$ROOT/tests/cli/treetool.py
python3 "$tree" gen src 47 60 || fail "treetool gen"

same() {
	python3 "$tree" compare src got > cmp.log || fail "$1: $(tail -5 cmp.log)"
}
extract() {
	rm -rf got && mkdir got
	expect_rc 0 $B image extract "$@" got
}

# 1. two copies on one device: format, the copies' places
expect_rc 0 $B format -q --metadata-replicas=2 --fs-size=64M --btree-node-size=32k --source=src one.img
expect_rc 0 $B show-super one.img
[ "$(field Version)" = 3 ] || fail "format version $(field Version), want 3"
expect_in out "btree_root extents level [0-9]+ ptr 0:[0-9]+ gen [0-9]+ ptr 0:[0-9]+ gen"
expect_rc 0 $B list -m nodes one.img
grep ' ptr ' out | awk '{ n = 0; for (i = 1; i <= NF; i++) if ($i == "ptr") n++; if (n != 2) bad = 1 } END { exit bad }' ||
	fail "a node without two copies: $(grep ' ptr ' out | head -3)"
# the two copies of a node are in different buckets (256k or more apart)
awk '/ ptr /{ n = 0; for (i = 1; i <= NF; i++) if ($i == "ptr") { split($(i + 1), a, ":"); o[++n] = a[2] }
	d = o[2] - o[1]; if (d < 0) d = -d; if (d < 512) bad = 1 } END { exit bad }' out ||
	fail "two copies of a node in one bucket"
cp --sparse=always one.img one.orig
grep ' ptr ' out | sed 's/.* ptr 0:\([0-9]*\) gen.* ptr 0:\([0-9]*\) gen.*/\1 \2/' > copies
[ -s copies ] || fail "no nodes listed"

# 2. one copy of each node zeroed in turn (first copies, then second ones):
# every file intact, fsck -y rewrites the bad copies, fsck -n clean after
for which in 1 2; do
	cp --sparse=always one.orig one.img
	while read -r a b; do
		s=$a; [ "$which" = 2 ] && s=$b
		dd if=/dev/zero of=one.img bs=512 seek="$s" count=8 conv=notrunc status=none
	done < copies
	extract one.img
	same "copy $which of every node zeroed"
	run $B fsck -y -f one.img
	[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "fsck -y, copy $which zeroed: exit $rc: $(tail -5 out err)"
	expect_rc 0 $B fsck -n -f one.img
	extract one.img
	same "after fsck -y (copy $which)"
done

# 3. a single-device format without copies still works as before
expect_rc 0 $B format -q --fs-size=64M --source=src plain.img
expect_rc 0 $B list -m nodes plain.img
expect_not_in out " ptr 0:[0-9]+ gen [0-9]+ ptr "

# 4. two copies are at most two per device; data copies need devices
expect_rc 16 $B format -q --metadata-replicas=3 --fs-size=64M x.img
expect_in err "metadata_replicas=3"
expect_rc 16 $B format -q --data-replicas=2 --fs-size=64M x.img
expect_in err "data_replicas=2"

# 5. metadata_replicas_required: a degraded read-write open is refused, read-only works
expect_rc 0 $B format -q --replicas=2 --metadata-replicas-required=2 --fs-size=64M --source=src p.img q.img
h=$(sha p.img)
expect_rc 1 $B image put -o degraded p.img /etc/hostname /x
expect_in err "metadata_replicas_required=2 but only 1 device can take journal copies"
[ "$(sha p.img)" = "$h" ] || fail "a refused read-write open wrote to p.img"
extract -o degraded p.img
same "degraded read-only"

# 6. a second member added to a filesystem with both copies on one device:
# data rereplicate moves one copy of every node to it, and the replicas
# table drops the one-device btree entry
expect_rc 0 $B format -q --metadata-replicas=2 --fs-size=64M --source=src u0.img
truncate -s 64M u1.img
expect_rc 0 $B device add u0.img u1.img
expect_rc 0 $B data rereplicate u0.img:u1.img
expect_rc 0 $B list -m nodes u0.img:u1.img
expect_not_in out " ptr 0:[0-9]+ gen [0-9]+ ptr 0:"
expect_in out " ptr 1:"
expect_rc 0 $B fsck -n -f u0.img:u1.img
expect_rc 0 $B show-super u0.img
expect_not_in out "btree: 1/1 \[0\]"
extract u0.img:u1.img
same "after device add and rereplicate"

# 7. the journal tail (the reproduction of issue 29): overwrite and delete
# with fsync, kill -9 the daemon, zero the newest journal blocks
need_fuse
mkdir -p small
for i in $(seq 1 20); do echo "original $i" > small/f$i; done
# newest N: zero the last N records (entries or stubs) of the journal, newest first
tail_case() {	# IMG NAME: fsync'd changes, then kill -9
	mkdir -p mnt
	$B fusemount -f "$1" mnt 2>daemon.err & pid=$!
	for t in $(seq 50); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount $1: $(cat daemon.err)"
	python3 - <<'EOF' || { kill -9 $pid; fusermount3 -u -z mnt; fail "fsync workload"; }
import os, time
for i in range(1, 11):
    fd = os.open('mnt/f%d' % i, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b'new %d\n' % i); os.fsync(fd); os.close(fd)
for i in range(11, 16):
    os.unlink('mnt/f%d' % i)
# the kernel tells the daemon an unlinked file may be freed a moment after
# the unlink (FORGET), and the daemon queues it: the next request but an
# rm -rf's frees the queue (a statfs here), and the directory's fsync makes
# that durable.  Killed before, the inode would be left unlinked-open
# (fsck: inode_unlinked), a crash's leftover this test is not about.
time.sleep(1)
os.statvfs('mnt')
fd = os.open('mnt', os.O_RDONLY); os.fsync(fd); os.close(fd)
EOF
	kill -9 $pid
	wait $pid 2>/dev/null
	fusermount3 -u -z mnt 2>/dev/null
}
# zero_journal_tail IMG N: zero the last N non-zero 4 KiB blocks of the journal area
zero_journal_tail() {
	python3 - "$1" "$2" <<'EOF'
import struct, sys
M = 0x534c4f4f54686362 ^ 3
img, n = sys.argv[1], int(sys.argv[2])
d = open(img, 'rb').read()
# the journal area: from the first to the last block holding a jset header
js = [o for o in range(0, len(d) // 4, 4096) if struct.unpack_from('<Q', d, o + 16)[0] == M]
lo, hi = js[0], js[-1]
blocks = [o for o in range(lo, hi + 4096, 4096) if d[o:o + 4096].strip(b'\0')]
with open(img, 'r+b') as f:
    for o in blocks[-n:]:
        f.seek(o); f.write(b'\0' * 4096)
EOF
}
check_after() {	# IMG: the files as the fsyncs left them
	for i in $(seq 1 10); do
		expect_rc 0 $B image cat "$1" /f$i
		[ "$(cat out)" = "new $i" ] || fail "$1: f$i reads '$(cat out)' after its fsync"
	done
	for i in $(seq 11 15); do
		expect_rc 1 $B image cat "$1" /f$i
	done
}

# one copy: the loss is reported, exit 4, naming the entries
expect_rc 0 $B format -q --fs-size=64M --source=small j1.img
tail_case j1.img
zero_journal_tail j1.img 2
expect_rc 4 $B fsck -n -f j1.img
expect_in out "journal_entry_missing"
expect_rc 4 $B fsck -n -f j1.img
run $B image ls j1.img /
[ "$rc" != 0 ] || expect_in err "journal"
[ "$rc" != 0 ] || fail "image ls read a filesystem whose journal lost acknowledged entries"
expect_in err "journal: entr(y|ies) .*missing"

# two copies: nothing is lost, fsck is clean
expect_rc 0 $B format -q --metadata-replicas=2 --fs-size=64M --source=small j2.img
tail_case j2.img
zero_journal_tail j2.img 2
expect_rc 0 $B fsck -n -f j2.img
check_after j2.img

