# fsync loops through fusemount never fill the journal (issue 18 item 2): a
# file written once, then fsynced N times with nothing new (no journal entry
# may be written), and N times after a small overwrite each (about one entry
# per fsync; reclaim frees the ring).  N = 20000, 100000 with SOAK=1.  After
# each loop: the daemon exits 0, fsck -n is clean, the data is intact.
# Prints the time of each loop and journal entries per fsync.
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or fusermount3"
N=${FSYNC_N:-$([ -n "${SOAK:-}" ] && echo 100000 || echo 20000)}
expect_rc 0 $B format -q --fs-size=256M img
mkdir mnt
mnt=$PWD/mnt
pid=

# the newest journal seq, from the clean record of a closed image
jseq() { $B show-super img | sed -n 's/^ *Journal seq: *//p' | head -1; }

mount_fs() {
	$B fusemount -f img mnt 2>daemon.err & pid=$!
	trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null; kill $pid 2>/dev/null' EXIT
	for i in $(seq 100); do mountpoint -q mnt && return; sleep 0.05; done
	fail "not mounted: $(cat daemon.err)"
}

# unmount and wait for the daemon: it must close cleanly (exit 0)
umount_fs() {
	fusermount3 -u mnt || fail "unmount"
	wait $pid; st=$?
	trap - EXIT
	[ $st = 0 ] || fail "daemon exited $st: $(cat daemon.err)"
	expect_rc 0 $B fsck -n img
	expect_in out '0 problems found'
}

# loop MODE: N fsyncs of mnt/f; MODE write overwrites 4 KiB before each
loop() {
	python3 - "$mnt/f" "$N" "$1" <<'PY' || fail "fsync loop ($1)"
import os, sys, time
path, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_RDWR)
t = time.monotonic()
for i in range(n):
    if mode == "write":
        os.pwrite(fd, (b"%07d\n" % i) * 512, 4096)
    os.fsync(fd)
print("%d fsyncs (%s) in %.2f s" % (n, mode, time.monotonic() - t))
os.close(fd)
PY
}

mount_fs
seq 1 100000 > mnt/f
cp mnt/f expect
umount_fs

for mode in none write; do
	before=$(jseq)
	mount_fs
	loop $mode
	umount_fs
	after=$(jseq)
	entries=$((after - before))
	echo "$mode: $entries journal entries for $N fsyncs" \
	     "($(awk "BEGIN { printf \"%.3f\", $entries / $N }") per fsync)"
	if [ $mode = none ]; then
		# the mount's first entry, close's, and reclaim's few: never one per fsync
		[ $entries -lt 50 ] || fail "fsyncs with nothing new wrote $entries entries"
	else
		[ $entries -ge $N ] && [ $entries -le $((N + N / 10)) ] ||
			fail "$entries entries for $N fsyncs after writes"
		python3 - expect "$N" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(4096)
    f.write((b"%07d\n" % (int(sys.argv[2]) - 1)) * 512)
PY
	fi
	expect_rc 0 $B image cat img /f
	cmp -s out expect || fail "file differs after the $mode loop"
done

# still writable after it all
mount_fs
echo after > mnt/g && sync mnt/g || fail "write after the loops"
umount_fs
grep -q "$mnt" /proc/mounts && fail "still mounted"
true
