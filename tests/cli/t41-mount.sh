# mount(8): `mount -t fuse.bcachefs IMG MNT`, an fstab line + `mount MNT`,
# `umount MNT`, after `make install` with the default prefix (/usr/local).
# The install goes to a scratch DESTDIR; a private mount namespace puts it
# where mount(8) and mount.fuse3 look, so nothing on the machine changes:
#   A  only $(PREFIX)/sbin (bind-mounted on /usr/local/sbin): mount(8) finds
#      no helper of ours and runs mount.fuse3, which runs `bcachefs IMG MNT -o
#      rw,dev,suid` through its shell's default PATH;
#   B  the helper link make install puts in /sbin (overlaid on /usr/sbin):
#      mount(8) runs /sbin/mount.fuse.bcachefs IMG MNT -o OPTS (the daemon's
#      command line says which way was taken); also an fstab line with
#      userspace options (nofail, x-*) through `mount --fstab`, and mount -f.
# After each umount, fsck -n must find the filesystem clean with the file.
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or fusermount3"
[ "$(id -u)" = 0 ] || skip "needs root (mount namespaces, mount(8))"
command -v unshare >/dev/null || skip "no unshare"
unshare -m --propagation private true 2>/dev/null || skip "cannot make a mount namespace here"

make -s -C "$ROOT" install DESTDIR="$PWD/root" >log 2>&1 || fail "install: $(cat log)"
[ -x root/usr/local/sbin/bcachefs ] || fail "no root/usr/local/sbin/bcachefs"
[ "$(readlink root/sbin/mount.fuse.bcachefs)" = /usr/local/sbin/bcachefs ] ||
	fail "make install did not link /sbin/mount.fuse.bcachefs: $(ls -l root/sbin 2>&1)"
mkdir mnt
expect_rc 0 $B format -q --fs-size=64M img
img=$PWD/img mnt=$PWD/mnt

# inner SCENARIO: run in the namespace; every mount it makes it unmounts
cat > inner.sh <<'EOF'
set -u
trap 'umount "$mnt" 2>/dev/null' EXIT
say() { echo "inner: $*"; }
mount --bind "$PWD/root/usr/local/sbin" /usr/local/sbin || { say "bind"; exit 2; }
case $1 in
A)	[ -e /sbin/mount.fuse.bcachefs ] && { say "system has /sbin/mount.fuse.bcachefs"; exit 3; }
	mount -t fuse.bcachefs "$img" "$mnt" || { say "mount -t (via mount.fuse3)"; exit 1; }
	;;
B)	mount -t overlay overlay -o lowerdir="$PWD/root/sbin:/usr/sbin" /usr/sbin ||
		{ say "overlay"; exit 2; }
	[ -L /sbin/mount.fuse.bcachefs ] || { say "no helper in /sbin"; exit 1; }
	mount -f -t fuse.bcachefs "$img" "$mnt" || { say "mount -f"; exit 1; }
	mountpoint -q "$mnt" && { say "mount -f mounted"; exit 1; }
	mount -t fuse.bcachefs "$img" "$mnt" || { say "mount -t (helper)"; exit 1; }
	pgrep -af "^/sbin/mount.fuse.bcachefs $img $mnt" >/dev/null ||
		{ say "not run as /sbin/mount.fuse.bcachefs: $(pgrep -af "$mnt")"; exit 1; }
	;;
fstab)	mount -t overlay overlay -o lowerdir="$PWD/root/sbin:/usr/sbin" /usr/sbin ||
		{ say "overlay"; exit 2; }
	printf '%s %s fuse.bcachefs defaults,noatime,relatime,nofail,x-test.opt=1,_netdev 0 0\n' \
		"$img" "$mnt" > fstab
	mount --fstab fstab "$mnt" || { say "mount MNT from fstab"; exit 1; }
	;;
esac
grep -q " $mnt fuse.bcachefs " /proc/self/mounts || { say "not mounted as fuse.bcachefs"; exit 1; }
echo "written via $1" > "$mnt/$1.txt" || { say "write"; exit 1; }
umount "$mnt" || { say "umount"; exit 1; }
mountpoint -q "$mnt" && { say "still mounted"; exit 1; }
exit 0
EOF
for s in A B fstab; do
	t0=$(date +%s%N)
	img="$img" mnt="$mnt" unshare -m --propagation private sh inner.sh $s >inner.log 2>&1
	rc=$?
	[ $rc = 3 ] && { echo "scenario $s skipped: $(cat inner.log)"; continue; }
	[ $rc = 2 ] && skip "namespace setup failed: $(cat inner.log)"
	[ $rc = 0 ] || fail "scenario $s: $(cat inner.log)"
	grep -q "$mnt" /proc/mounts && fail "scenario $s left $mnt mounted"
	# fsck waits for the daemon to close (it was marked at mount)
	expect_rc 0 $B fsck -n "$img"
	expect_rc 0 $B image cat "$img" /$s.txt
	expect_in out "written via $s"
	echo "scenario $s: $((($(date +%s%N) - t0) / 1000000)) ms"
done

# the helper refuses what mount(8) cannot mean, with a usage error
ln -s "${BCH_BIN:-$B}" mount.fuse.bcachefs	# the binary itself: ENCRYPTED=1's $B is a wrapper
expect_rc 16 ./mount.fuse.bcachefs "$img" "$mnt" -N 1234
expect_in err 'not supported'
expect_rc 16 ./mount.fuse.bcachefs "$img" "$mnt" -o
mountpoint -q "$mnt" && fail "mounted by a refused call"
true
