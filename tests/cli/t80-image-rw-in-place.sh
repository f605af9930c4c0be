# The image verbs' check pass: update's read-only open made read-write in
# place when it found work (bch_fs_read_write()), or closed and opened
# again read-write when it cannot be (fs.h) or for other verbs (their check
# passes try changes: cmd_image.c's in_place).
#  - in place (a clean image): update writes what it found, then put and
#    mkdir (reopened), the image fscks clean and closes clean, every byte
#    reads back;
#  - an image left unclean by a writer killed mid-session (its journal is
#    replayed: not in place): update still makes the image equal to DIR,
#    and fsck is clean;
#  - another writer holding the image: the update's check pass reads (a
#    reader takes no claim), the read-write step is refused as the second
#    open was: "open elsewhere", exit 1.
need python3
T="python3 $ROOT/tests/cli/treetool.py"

mkdir -p src/d && echo one > src/a && echo two > src/d/b
expect_rc 0 $B format -q --fs-size=64M --source src img

clean() {	# IMG: closed clean
	expect_rc 0 $B show-super "$1"
	[ "$(field 'Clean shutdown')" = yes ] || fail "$1 not clean: $(grep -i clean out)"
}

# in place
echo more >> src/a && echo new > src/d/c
expect_rc 0 $B image update img src
expect_in out '^W /a$'
expect_in out '^\+ /d/c$'
clean img
echo put > p && expect_rc 0 $B image put img p /p
expect_rc 0 $B image mkdir img /m
expect_rc 0 $B image cat img /p
[ "$(cat out)" = put ] || fail "put read back: $(cat out)"
expect_rc 0 $B fsck -n -f img
clean img
rm p
expect_rc 0 $B image update img src	# what put and mkdir made goes again
expect_in out '^- /p$'
expect_in out '^- /m$'
expect_rc 0 $B image extract img xd
expect_rc 0 $T compare src xd
rm -r xd

# slow_writer: a put of big on a slow device, in the background (pid), once
# its session has begun (the image says it is not clean)
slow_writer() {
	BCACHEFS_TEST_DEVICE_DELAY="img=50000" $B image put img big /big > /dev/null 2>&1 &
	pid=$!
	i=0
	while :; do
		sleep 0.1
		i=$((i + 1))
		[ $i -lt 100 ] || { kill -9 $pid; fail "the writer never started its session"; }
		$B show-super img > out 2>/dev/null && [ "$(field 'Clean shutdown')" = no ] && break
	done
}

# unclean: a writer killed in its session (slow device: it is still writing)
head -c 4000000 /dev/urandom > big
slow_writer
sleep 0.3
kill -9 $pid
wait $pid 2>/dev/null
expect_rc 0 $B show-super img
[ "$(field 'Clean shutdown')" = no ] || fail "the killed writer left the image clean"
echo again >> src/d/b && echo newer > src/e
expect_rc 0 $B image update img src
expect_in out '^W /d/b$'
expect_in out '^\+ /e$'
clean img
expect_rc 0 $B fsck -n -f img
expect_rc 0 $B image extract img xd
expect_rc 0 $T compare src xd
rm -r xd

# another writer holds the image
slow_writer
echo third >> src/a
run $B image update img src
kill -9 $pid
wait $pid 2>/dev/null
[ "$rc" = 1 ] || fail "update beside another writer exited $rc, want 1: $(cat err)"
expect_in err 'img: device is open elsewhere'
true
