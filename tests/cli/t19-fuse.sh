# fusemount: a mounted filesystem through FUSE.  POSIX scenarios (as root and
# as an unprivileged user), data-verifying loads (fio, stress-ng, dbench),
# unmount, fsck -n clean; then kill -9 of the daemon while files are being
# fsynced: after replay fsck is clean and every fsynced file is intact.
# The loads and tools are make check's (scripts/install-deps.sh test): one
# missing fails the test rather than leaving its part out.
need_fuse
need_root "the permission scenarios"
need python3 setpriv setfacl getfacl fio stress-ng dbench jq
expect_rc 0 $B format -q --fs-size=1G img
chmod 755 .		# the unprivileged user must reach the mount point
mkdir mnt
mnt=$PWD/mnt
$B fusemount -o allow_other img mnt 2>mount.err || fail "fusemount: $(cat mount.err)"
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
mountpoint -q mnt || fail "not mounted"
grep -q "$mnt fuse.bcachefs" /proc/mounts || fail "type is not fuse.bcachefs: $(grep "$mnt" /proc/mounts)"

# ---- basic POSIX behaviour
cd mnt
echo hello > a
[ "$(cat a)" = hello ] || fail "read back"
ln a hard && [ "$(stat -c %h a)" = 2 ] || fail "hard link count"
ln -s a sym && [ "$(readlink sym)" = a ] && [ "$(cat sym)" = hello ] || fail "symlink"
mkdir -p d/e/f && rmdir d/e/f && ! rmdir d 2>/dev/null || fail "rmdir of a non-empty directory"
long=$(printf 'x%.0s' $(seq 1 255))
touch "$long" || fail "255-byte name"
! touch "${long}y" 2>/dev/null || fail "256-byte name accepted"
touch "${long}y" 2>&1 | grep -q "File name too long" || fail "not ENAMETOOLONG"
# rename over an open file: the old data stays readable through the descriptor
echo old > target; echo new > source
exec 3< target
mv source target
[ "$(cat target)" = new ] && [ "$(cat <&3)" = old ] || fail "rename over an open file"
exec 3<&-
# an unlinked open file keeps its data until closed
seq 1 10000 > gone
exec 4< gone
rm gone
[ ! -e gone ] && [ "$(tail -1 <&4)" = 10000 ] || fail "unlinked open file"
exec 4<&-
# sparse files and SEEK_HOLE
truncate -s 1G sparse
echo tail >> sparse
[ "$(stat -c %s sparse)" = 1073741829 ] || fail "sparse size"
[ "$(du -k sparse | cut -f1)" -lt 1000 ] || fail "sparse file not sparse: $(du -k sparse)"
python3 - <<'PY' || fail "SEEK_DATA/SEEK_HOLE"
import os
fd = os.open("sparse", os.O_RDONLY)
assert os.lseek(fd, 0, os.SEEK_DATA) >= (1 << 30) - 4096, os.lseek(fd, 0, os.SEEK_DATA)
assert os.lseek(fd, 0, os.SEEK_HOLE) == 0
PY
# xattrs and ACL xattrs
python3 - <<'PY' || fail "xattrs"
import os
os.setxattr("a", "user.colour", b"blue")
assert os.getxattr("a", "user.colour") == b"blue"
assert "user.colour" in os.listxattr("a")
os.removexattr("a", "user.colour")
assert "user.colour" not in os.listxattr("a")
PY
# copy_file_range (cp uses it), within one file system
seq 1 300000 > big && cp big big.copy && cmp -s big big.copy || fail "copy_file_range copy"
python3 -c "
import os
a = os.open('big', os.O_RDONLY); b = os.open('part', os.O_WRONLY | os.O_CREAT, 0o644)
n = os.copy_file_range(a, b, 100000, 100000, 5000)
assert n == 100000, n
data = open('part', 'rb').read()
assert data == bytes(5000) + open('big', 'rb').read()[100000:200000]
" || fail "copy_file_range with offsets"
rm -f big big.copy part
# fallocate, punch
fallocate -l 8M pre && [ "$(stat -c %s pre)" = 8388608 ] || fail "fallocate"
fallocate -p -o 4096 -l 8192 pre || fail "punch hole"
fallocate -z -o 0 -l 4096 pre || fail "zero range"
# (collapse and insert range: the kernel's FUSE does not pass them on)
# permissions as an unprivileged user, sticky directories, set-id bits
mkdir pub && chmod 1777 pub && echo root > pub/rootfile && chmod 644 pub/rootfile
u="setpriv --reuid=65534 --regid=65534 --clear-groups"
$u sh -c 'echo me > pub/mine' || fail "user cannot create in a 1777 directory"
! $u sh -c 'echo x >> pub/rootfile' 2>/dev/null || fail "user wrote a root file"
! $u rm -f pub/rootfile 2>/dev/null || [ -e pub/rootfile ] || fail "sticky bit ignored"
[ -e pub/rootfile ] || fail "user removed root's file in a sticky directory"
# set-id bits go when someone else writes, and on chown
echo x > pub/setid && chmod 6777 pub/setid
$u sh -c 'echo y >> pub/setid' || fail "user append"
[ "$(stat -c %a pub/setid)" = 777 ] || fail "set-id bits kept after a write by another user: $(stat -c %a pub/setid)"
chmod 4755 pub/setid && chown 65534 pub/setid
[ "$(stat -c %a pub/setid)" = 755 ] || fail "set-uid kept after chown"
$u chmod 4755 pub/mine || fail "chmod own file"
echo more >> pub/mine
[ "$(stat -c %a pub/mine)" = 755 ] || [ "$(stat -c %a pub/mine)" = 4755 ] || fail "mode"
# POSIX ACLs: enforced by the kernel, kept in step with the mode, inherited
echo secret > priv && chmod 600 priv
setfacl -m u:nobody:r priv || fail "setfacl"
[ "$(stat -c %a priv)" = 640 ] || fail "mode after setfacl: $(stat -c %a priv)"
[ "$($u cat priv)" = secret ] || fail "ACL grant not honoured"
chmod 600 priv
getfacl -c priv | grep -q '^mask::---' || fail "chmod did not reach the ACL mask"
setfacl -x u:nobody priv
! $u cat priv 2>/dev/null || fail "ACL removal not honoured"
mkdir inh && setfacl -d -m u:nobody:rwx inh
touch inh/file && mkdir inh/dir
getfacl -c inh/file | grep -q '^user:nobody:rwx' || fail "default ACL not inherited by a file"
getfacl -c inh/dir | grep -q '^default:user:nobody:rwx' || fail "default ACL not inherited by a directory"
[ "$(stat -c %a inh/file)" = 664 ] || fail "inherited mode: $(stat -c %a inh/file)"
cd ..

# ---- fs usage and show-super of a mountpoint
cd "$mnt/.."
expect_rc 0 $B fs usage --json mnt
expect_rc 0 jq -e '.size > 0 and .devices[0].user.bytes > 0' out
expect_rc 0 $B show-super mnt
expect_in out "Device: +$PWD/img"
cd "$mnt"
cd ..

# ---- data-verifying loads (longer with SOAK=1)
T=4 FIO=24M
[ -n "${SOAK:-}" ] && T=30 FIO=256M
for rw in randwrite write; do
	fio --name=v$rw --directory="$mnt" --size=$FIO --bs=4k --rw=$rw --verify=crc32c \
	    --ioengine=psync --fsync=32 --fallocate=native --output=fio.log >/dev/null 2>&1 ||
		fail "fio $rw: $(tail -5 fio.log)"
done
stress-ng --temp-path "$mnt" --dir 1 --dentry 1 --link 1 --rename 1 --hdd 1 \
	  --hdd-bytes 8M --xattr 1 --verify -t ${T}s >stress.log 2>&1 ||
	fail "stress-ng: $(tail -5 stress.log)"
dbench -D "$mnt" -t $T 2 >dbench.log 2>&1 || fail "dbench: $(tail -5 dbench.log)"
rm -rf "$mnt"/* 2>/dev/null
fusermount3 -u mnt || fail "unmount"
trap - EXIT
sleep 0.3
expect_rc 0 $B fsck -f -n img
expect_in out '0 problems found'
expect_rc 0 $B show-super img
expect_in out 'Clean shutdown: +yes'

# ---- the mount helper name (what mount -t fuse.bcachefs runs)
ln -s "$B" mount.fuse.bcachefs
./mount.fuse.bcachefs img mnt -o rw || fail "mount.fuse.bcachefs"
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
mountpoint -q mnt || fail "not mounted through the helper name"
fusermount3 -u mnt || fail "unmount"
trap - EXIT
sleep 0.3

# ---- kill -9 while fsyncing: replay keeps every fsynced file
$B fusemount -f img mnt & pid=$!
trap 'cd /; kill -9 $pid 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
for i in $(seq 50); do mountpoint -q mnt && break; sleep 0.1; done
mountpoint -q mnt || fail "second mount"
python3 - "$mnt" <<'PY' || fail "fsync writer"
import os, sys
d = sys.argv[1]
for i in range(40):
    data = (b"%05d-" % i) * (1000 + i * 37)
    with open(os.path.join(d, "sync%02d" % i), "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    with open("expect%02d" % i, "wb") as f:
        f.write(data)
PY
# unsynced work in flight when the daemon dies
(seq 1 200000 > mnt/unsynced 2>/dev/null &)
sleep 0.2
kill -9 $pid
wait $pid 2>/dev/null
fusermount3 -uz mnt 2>/dev/null
trap - EXIT
expect_rc 0 $B fsck -f -n img
expect_in out 'journal entr'
for i in $(seq -w 0 39); do
	expect_rc 0 $B image cat img /sync$i
	cmp -s out expect$i || fail "fsynced file sync$i differs after replay"
done
expect_rc 0 $B fsck -f -y img
