# Two writers, each through its own mountpoint of one daemon, write parts of
# the same pages of one file through O_RDWR descriptors (buffered, not
# direct_io): every process must finish (h-review40b, session 30).  Two
# cases: pwrite of 100 bytes into 4 pages in turn, and two appenders
# (O_RDWR | O_APPEND, 100 bytes a write: a log shared through two
# mountpoints).  Full-page aligned writes do not hang (the kernel unlocks
# an up-to-date page before the request).
#
# The kernel keeps a page it writes through locked until the daemon's reply
# when the write covers only part of it and the page is not up to date
# (fs/fuse/file.c fuse_fill_write_pages(): "page_locked").  The daemon tells
# the other mountpoint's kernel to drop the written range BEFORE its reply
# (op_write(): fm_others_inode(), invariant 9), and that notice locks the
# same page in the other kernel (invalidate_inode_pages2_range()).  Two
# writes in flight at once, one per mountpoint: each daemon thread waits
# for the page the other kernel keeps locked until the other thread's
# reply: neither ever replies (seen: both threads in __folio_lock under
# fuse_reverse_inval_inode, both writers in request_wait_answer, the
# daemon unkillable: only an abort through fusectl ends it).
#
# On a hang the test aborts both connections through a fusectl mount of its
# own (the daemon cannot even be killed otherwise), then fails.
# Data: fixed bytes ('a' * 100, 'b' * 100).
need_fuse
need python3 mountpoint
mkdir m1 m2 ctl
trap 'cd /; for d in m2 m1; do fusermount3 -uz "$OLDPWD/$d" 2>/dev/null; done; umount "$OLDPWD/ctl" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=256M img
expect_rc 0 $B fusemount "$PWD/img" m1
expect_rc 0 $B fusemount "$PWD/img" m2
c1=$(mountpoint -d m1) c2=$(mountpoint -d m2)
head -c 65536 /dev/zero > m1/f || fail "write m1/f"
cmp -s m1/f m2/f || fail "m2/f differs from m1/f"

cat > ww.py <<'PY'
import os, sys
path, tag, n, how = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
fd = os.open(path, os.O_RDWR | (os.O_APPEND if how == "append" else 0))
buf = tag.encode() * 100
for i in range(n):		# part of a page: 4 pages in turn, or the end
    if how == "append":
        assert os.write(fd, buf) == 100
    else:
        os.pwrite(fd, buf, (i % 4) * 4096 + 7)
os.close(fd)
PY

# abort the connections of a hung daemon, so that the writers and it can end
abort_all() {
	mount -t fusectl fusectl ctl 2>/dev/null
	for c in "$c1" "$c2"; do
		[ -e "ctl/${c#*:}/abort" ] && echo 1 > "ctl/${c#*:}/abort"
	done
	umount ctl 2>/dev/null
}

# two HOW writers, N writes each, one through each mountpoint: both must end
two_writers() {
	python3 ww.py m1/f a "$2" "$1" & p1=$!
	python3 ww.py m2/f b "$2" "$1" & p2=$!
	hung=1
	for i in $(seq 600); do	# 60 s: a run without the hang takes a few
		if ! kill -0 $p1 2>/dev/null && ! kill -0 $p2 2>/dev/null; then
			hung=0
			break
		fi
		sleep 0.1
	done
	if [ $hung = 1 ]; then
		ps -o pid,stat,wchan:32,cmd -p $p1,$p2 >&2
		abort_all
		wait $p1 $p2
		fail "$1: two writers through two mountpoints hung (60 s): the daemon's notice before the reply waits for a page the other kernel keeps locked for its own write"
	fi
	wait $p1 || fail "$1: writer through m1 failed"
	wait $p2 || fail "$1: writer through m2 failed"
	cmp -s m1/f m2/f || fail "$1: m1/f and m2/f differ"
}
two_writers pwrite 4000
two_writers append 2000
[ "$(stat -c %s m1/f)" = $((65536 + 2 * 2000 * 100)) ] || fail "appended size $(stat -c %s m1/f)"

fusermount3 -u m2 || fail "unmount m2"
fusermount3 -u m1 || fail "unmount m1"
for i in $(seq 50); do pgrep -f "fusemount.*$PWD/img" >/dev/null || break; sleep 0.1; done
expect_rc 0 $B fsck -n -f img
expect_in out ' 0 problems found'
