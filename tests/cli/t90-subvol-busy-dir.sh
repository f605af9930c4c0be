# A subvolume with a directory open in it is not deleted through the mount,
# and is once the directory is closed (fusemount_req.c fm_open_count(): a
# releasedir counts down without the engine lock).  Twenty directories of
# the subvolume are opened and closed first (the counts go back to 0, not
# below), then one is held open by a process: delete refused, busy; after
# its close, the delete succeeds (polled, bounded: the kernel sends the
# releasedir after close returns).
need_fuse
need python3
mkdir m
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=64M a.img
expect_rc 0 $B subvolume create a.img /sv
expect_rc 0 $B fusemount "$PWD/a.img" m
for i in $(seq 20); do mkdir m/sv/d$i || fail "mkdir d$i"; ls m/sv/d$i >/dev/null || fail "ls d$i"; done
ls m/sv >/dev/null || fail "ls sv"
python3 -c '
import os, sys, time
fd = os.open("m/sv/d3", os.O_RDONLY | os.O_DIRECTORY)
open("held", "w").close()
while not os.path.exists("go"):
    time.sleep(0.05)
os.close(fd)
' & holder=$!
for i in $(seq 200); do [ -e held ] && break; sleep 0.05; done
[ -e held ] || fail "the holder never opened the directory"
expect_rc 1 $B subvolume delete m/sv
expect_in err 'busy'
: > go
wait $holder || fail "holder"
for i in $(seq 100); do run $B subvolume delete m/sv; [ "$rc" = 0 ] && break; sleep 0.1; done
[ "$rc" = 0 ] || fail "deleting sv once its directory was closed: $(cat err)"
[ ! -e m/sv ] || fail "the deleted subvolume is still seen"
fusermount3 -u m || fail "unmount"
expect_rc 0 $B fsck -n a.img
expect_in out ' 0 problems found'
