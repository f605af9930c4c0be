# --errors (issue 29, item 8): what a filesystem error does in a read-write
# session.  A leaf of the extents btree is damaged (its checksum fails); a
# fusemount in the foreground reads every file (the files of that leaf fail
# with EIO: a metadata error) and then writes a new file:
#   continue  the write succeeds, the error is logged on stderr;
#   ro        (the default) the write fails with EROFS, logged;
#   panic     the daemon exits at the first error (exit 1, said on stderr),
#             and the image is not written after it (no new file, no clean
#             close: the hash right after the exit stays).
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or fusermount3"
plain_only "damages a plaintext leaf"
mkdir src mnt
mnt=$PWD/mnt
i=0
while [ $i -lt 120 ]; do
	head -c $((i * 37 + 100)) /dev/zero | tr '\0' x > src/f$i
	i=$((i + 1))
done
expect_rc 0 $B format -q --btree-node-size=4k --fs-size=32M --source=src e.img
expect_rc 0 $B list -m nodes -b extents e.img
leaf=$(sed -n 's/^node level 0 .* ptr 0:\([0-9]*\) .*/\1/p' out | head -1)
[ -n "$leaf" ] || fail "no extents leaf"
python3 -c "
f = open('e.img', 'r+b'); f.seek($leaf * 512 + 300); f.write(b'\0' * 64)" || fail "damaging"
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null' EXIT

# mount MODE: the daemon in the foreground, stderr in daemon.MODE
mount_fg() {
	cp e.img d.img
	$B fusemount -f -o errors=$1 d.img "$mnt" 2>daemon.$1 &
	pid=$!
	n=0
	until mountpoint -q "$mnt"; do
		n=$((n + 1))
		[ $n -lt 100 ] || fail "errors=$1: the mount did not appear"
		sleep 0.1
	done
}
read_all() {
	eio=0
	for f in "$mnt"/f*; do
		timeout 30 cat "$f" >/dev/null 2>>cat.err || eio=$((eio + 1))
	done
}
stop() {
	umount "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
	timeout 30 sh -c "while kill -0 $pid 2>/dev/null; do sleep 0.1; done"
	wait $pid
	drc=$?
}

mount_fg continue
read_all
[ $eio -gt 0 ] || fail "errors=continue: no file of the damaged leaf failed"
echo new > "$mnt/new" || fail "errors=continue: the write after the error failed"
stop
expect_in daemon.continue 'filesystem error \(errors=continue; going on\): .*bad checksum'
expect_rc 0 $B image cat d.img /new
expect_in out '^new$'

mount_fg ro
read_all
[ $eio -gt 0 ] || fail "errors=ro: no file of the damaged leaf failed"
if echo new 2>werr > "$mnt/new"; then fail "errors=ro: a write after the error succeeded"; fi
grep -q 'Read-only file system' werr || fail "errors=ro: the write failed, not with EROFS: $(cat werr)"
stop
expect_in daemon.ro 'filesystem error \(errors=ro; read-only now\)'

mount_fg panic
read_all
# the daemon is gone: its mount answers nothing
timeout 30 sh -c "while kill -0 $pid 2>/dev/null; do sleep 0.1; done"
kill -0 $pid 2>/dev/null && fail "errors=panic: the daemon is still running after the error"
wait $pid
drc=$?
[ $drc = 1 ] || fail "errors=panic: the daemon exited $drc, want 1"
expect_in daemon.panic 'errors=panic .*exiting without writing'
h=$(sha d.img)
echo new 2>/dev/null > "$mnt/new" && fail "errors=panic: a write succeeded after the daemon stopped"
fusermount3 -uz "$mnt" 2>/dev/null
[ "$(sha d.img)" = "$h" ] || fail "errors=panic: the image changed after the exit"
expect_rc 1 $B image cat d.img /new
