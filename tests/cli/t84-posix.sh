# POSIX conformance, differential (tests/posix/README.md): one script of
# system calls (tests/posix/posix.py: open flags, mkdir/rmdir, link, unlink,
# symlink, rename and renameat2, truncate, chmod, chown, utimensat, sticky and
# setgid directories, killpriv, mknod, access, xattrs, ACLs, one file through
# several descriptors, fallocate, SEEK_DATA/HOLE,
# O_DIRECT, readdir, long names and PATH_MAX; as root and as unprivileged
# users) runs in a fresh directory on kernel ext4 (a loop device, relatime as
# our mount's default) and on `bcachefs fusemount`, each printing a normalized
# transcript.  They must be identical step by step, except the steps named in
# tests/posix/known-differences, each of which must still differ.
# fsck -n -f clean after the unmount.
need_fuse
need_root "the unprivileged steps (setresuid), mknod of devices, loop devices"
need python3 mkfs.ext4 losetup
P=$ROOT/tests/posix
chmod 755 .		# the unprivileged users must reach both mounts
mkdir ext4 mnt
truncate -s 128M ext4.img
# 256-byte inodes (nanoseconds, times past 2038) and 4k blocks whatever the
# size: mke2fs's "small" type would give neither
mkfs.ext4 -q -F -T default -I 256 -b 4096 ext4.img || fail "mkfs.ext4"
top=$PWD
dev=$(losetup -f --show ext4.img) || skip "no loop device"
trap 'cd /; losetup -d "$dev"' EXIT
mount -o relatime "$dev" ext4 || fail "mount ext4"
ref=
trap 'cd /; [ -n "$ref" ] && kill "$ref" 2>/dev/null && wait "$ref"; umount "$top/ext4" 2>/dev/null; losetup -d "$dev"; fusermount3 -uz "$top/mnt" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=256M img
$B fusemount -o allow_other img mnt 2>mount.err || fail "fusemount: $(cat mount.err)"
mountpoint -q mnt || fail "not mounted"

mkdir ext4/posix mnt/posix
# both at once: most of each run is the pause before every step
python3 "$P/posix.py" run ext4/posix > ext4.txt 2>ext4.err & ref=$!
python3 "$P/posix.py" run mnt/posix > ours.txt 2>ours.err || fail "posix.py on the mount: $(tail -5 ours.err)"
wait $ref || { ref=; fail "posix.py on ext4: $(tail -5 ext4.err)"; }
ref=
[ -s ext4.err ] && fail "posix.py on ext4 printed: $(head -5 ext4.err)"
[ -s ours.err ] && fail "posix.py on the mount printed: $(head -5 ours.err)"
[ "$(wc -l < ext4.txt)" -gt 1000 ] || fail "short transcript: $(wc -l < ext4.txt) lines"
python3 "$P/posix.py" compare ext4.txt ours.txt "$P/known-differences" > cmp.txt
rc=$?
cat cmp.txt
[ $rc = 0 ] || fail "the transcripts differ (ext4.txt, ours.txt: $(tail -1 cmp.txt))"

# the comparison itself can fail both ways: every listed step is reported
# when the transcripts agree, and every difference without a list
known=$(grep -v '^#' "$P/known-differences" | cut -d' ' -f1 | tr , '\n' | grep -c .)
: > none
python3 "$P/posix.py" compare ext4.txt ext4.txt "$P/known-differences" > self.txt &&
	fail "compare passed a transcript against itself with $known known differences"
[ "$(grep -c '^NO LONGER DIFFERS' self.txt)" = "$known" ] ||
	fail "not every known difference reported as gone: $(grep -c '^NO LONGER DIFFERS' self.txt) of $known"
python3 "$P/posix.py" compare ext4.txt ours.txt none > self.txt &&
	fail "compare passed the transcripts with no known differences"
[ "$(grep -c '^DIFFERS' self.txt)" = "$known" ] ||
	fail "unlisted differences not all reported: $(grep -c '^DIFFERS' self.txt) of $known"

umount ext4 || fail "umount ext4"
fusermount3 -u mnt || fail "unmount"
losetup -d "$dev"
trap - EXIT
expect_rc 0 $B fsck -f -n img
expect_in out ' 0 problems found'
