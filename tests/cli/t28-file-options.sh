# Per-file options as "bcachefs.<option>" xattrs, on two devices labelled ssd
# and hdd (the filesystem writes to ssd): through `image setfattr/getfattr`
# and `image setopt` (set, show, remove, inherited by new files, used by the
# data path: a file under foreground_target=hdd + compression=zstd has zstd
# extents on the hdd device only), their refusals (an unknown label, named;
# a bad value; a name that is not an option; a symlink), with nothing written
# to the images; carried by export-tar / import-tar (a label the other
# filesystem lacks is a warning); then through a fusemount with setfattr/getfattr (attr
# package), where only the owner or root may change them.  fsck -n clean
# after each part.  Data: a fixed text pattern.
need setfattr getfattr
expect_rc 0 $B format -q --foreground_target=ssd --fs-size=64M --label=ssd ssd.img \
	--fs-size=64M --label=hdd hdd.img
I=ssd.img:hdd.img
seq -f 'line %08g of a compressible file' 1 20000 > data

# list_ext INUM: its extent keys ("comp N ... ptr DEV:...")
list_ext() { $B list -b extents -s "$1:0" -e "$1:max" ssd.img hdd.img; }
inum() { $B image stat --json $I "$1" | jq -r ".files[0].inode"; }

# ---- image verbs: set, show, inherit, remove
expect_rc 0 $B image mkdir $I /d /d/old
expect_rc 0 $B image setfattr $I -n bcachefs.foreground_target -v hdd /d
expect_rc 0 $B image setfattr $I -n bcachefs.compression -v zstd /d
expect_rc 0 $B image setopt $I background_target=ssd /d
expect_rc 0 $B image setopt $I promote-target=1 /d
expect_rc 0 $B image getfattr $I /d
expect_in out '^bcachefs.foreground_target="hdd"$'
expect_in out '^bcachefs.compression="zstd"$'
expect_in out '^bcachefs.background_target="ssd"$'
expect_in out '^bcachefs.promote_target="dev 1"$'
expect_rc 0 $B image getfattr $I -n bcachefs.compression /d
expect_in out '^bcachefs.compression="zstd"$'
expect_not_in out 'target'
# new files and directories below take them; existing ones do not
expect_rc 0 $B image mkdir $I /d/sub
expect_rc 0 $B image put $I data /d/sub/f
expect_rc 0 $B image put $I data /plain
for p in /d/sub /d/sub/f; do
	expect_rc 0 $B image getfattr $I $p
	expect_in out '^bcachefs.foreground_target="hdd"$'
	expect_in out '^bcachefs.promote_target="dev 1"$'
done
expect_rc 0 $B image getfattr $I /d/old /plain
expect_not_in out bcachefs
expect_rc 1 $B image getfattr $I -n bcachefs.compression /d/old
expect_in err 'getfattr: bcachefs.compression: No data available'
# the data path: zstd extents on hdd (dev 1) only; the plain file on ssd, uncompressed
f=$(inum /d/sub/f) p=$(inum /plain)
run list_ext $f
[ "$rc" = 0 ] && grep -q . out || fail "no extents for /d/sub/f"
expect_not_in out 'comp [^3]|ptr [^1]:'
run list_ext $p
expect_not_in out 'comp [^0]|ptr [^0]:'
expect_rc 0 $B image cat $I /d/sub/f
cmp out data || fail "/d/sub/f reads back other data"
# remove: the directory inherits again; its children keep theirs
expect_rc 0 $B image setfattr $I -x bcachefs.foreground_target /d
expect_rc 0 $B image setopt $I compression= /d
expect_rc 0 $B image getfattr $I /d
expect_not_in out 'foreground_target|compression'
expect_rc 1 $B image setfattr $I -x bcachefs.compression /d
expect_in err 'setfattr: /d: No data available'
expect_rc 0 $B image getfattr $I /d/sub
expect_in out '^bcachefs.compression="zstd"$'

# ---- refusals: a clear message, nothing written
sum0=$(sha ssd.img) sum1=$(sha hdd.img)
expect_rc 1 $B image setfattr $I -n bcachefs.background_target -v nvme /d
expect_in err "setfattr: /d: bcachefs.background_target: 'nvme' is neither a label nor a device"
expect_rc 1 $B image setopt $I background_target=nvme /d
expect_in err "setopt: /d: bcachefs.background_target: 'nvme'"
expect_rc 1 $B image setfattr $I -n bcachefs.compression -v zstd:99 /d
expect_in err 'bad level'
expect_rc 16 $B image setopt $I data_replicas=9 /d
expect_in err 'data_replicas: 9 out of range'
expect_rc 1 $B image setfattr $I -n bcachefs.metadata_target -v ssd /d
expect_in err 'bcachefs.metadata_target: not a file option'
expect_rc 16 $B image setopt $I metadata_target=ssd /d
expect_rc 0 $B image ln $I -s /plain /link
sum0=$(sha ssd.img) sum1=$(sha hdd.img)
expect_rc 1 $B image setfattr $I -n bcachefs.compression -v lz4 /link
expect_in err 'only regular files and directories take file options'
[ "$(sha ssd.img)" = "$sum0" ] && [ "$(sha hdd.img)" = "$sum1" ] || fail "a refused change wrote"
expect_rc 0 $B fsck -n ssd.img hdd.img

# ---- carried by tar: into a filesystem of one unlabelled device, the targets
# are named in warnings and left out, the rest is set
expect_rc 0 $B image export-tar $I opts.tar /d
expect_rc 0 $B format -q --fs-size=64M one.img
expect_rc 0 $B image import-tar one.img opts.tar
expect_in err "warning: ./sub/: bcachefs.foreground_target: 'hdd' is neither a label"
expect_in err "warning: ./sub/: bcachefs.promote_target: 'dev 1' is neither"
expect_rc 0 $B image getfattr one.img /sub
expect_in out '^bcachefs.compression="zstd"$'
expect_not_in out 'target'
expect_rc 0 $B fsck -n one.img

# ---- through a fusemount
# (the image part passed: without /dev/fuse or root, the rest is a skipped part)
fuse_part "the fusemount part" || exit 0
root_part "the fusemount part (owner checks)" || exit 0
need setpriv
NOB="setpriv --reuid=65534 --regid=65534 --clear-groups"
chmod 755 .
mkdir mnt
mnt=$PWD/mnt
mount_img() {
	$B fusemount -f -o allow_other $I mnt 2>mount.err &
	fpid=$!
	for i in $(seq 1 100); do mountpoint -q mnt && return 0; sleep 0.1; done
	return 1
}
umount_img() { fusermount3 -u mnt && wait $fpid; }
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
mount_img || fail "fusemount: $(cat mount.err)"
chmod 777 mnt
mkdir mnt/t
run setfattr -n bcachefs.foreground_target -v hdd mnt/t
[ "$rc" = 0 ] || fail "setfattr on the mount: $(cat err)"
setfattr -n bcachefs.compression -v zstd:3 mnt/t || fail "setfattr compression"
[ "$(getfattr --only-values -n bcachefs.compression mnt/t)" = zstd:3 ] || fail "getfattr compression"
[ "$(getfattr --only-values -n bcachefs.foreground_target mnt/t)" = hdd ] || fail "getfattr target"
run getfattr -d -m - mnt/t
expect_in out '^bcachefs.foreground_target="hdd"$'
expect_in out '^bcachefs.compression="zstd:3"$'
cp data mnt/t/f
mkdir mnt/t/sub
[ "$(getfattr --only-values -n bcachefs.foreground_target mnt/t/f)" = hdd ] || fail "not inherited by a file"
[ "$(getfattr --only-values -n bcachefs.compression mnt/t/sub)" = zstd:3 ] || fail "not inherited by a directory"
# refusals
run setfattr -n bcachefs.background_target -v nvme mnt/t
[ "$rc" != 0 ] && grep -q 'Invalid argument' err || fail "unknown label accepted: $(cat err)"
run setfattr -n bcachefs.nonsense -v 1 mnt/t
[ "$rc" != 0 ] && grep -q 'Invalid argument' err || fail "unknown option accepted: $(cat err)"
ln -s f mnt/t/l
run setfattr -h -n bcachefs.compression -v lz4 mnt/t/l
[ "$rc" != 0 ] || fail "an option set on a symlink"
run getfattr -n bcachefs.promote_target mnt/t
[ "$rc" != 0 ] && grep -q 'No such attribute' err || fail "an unset option read: $(cat out err)"
# only the owner or root: nobody may not change root's file even with write
# permission, but may change its own
touch mnt/t/shared && chmod 666 mnt/t/shared
run $NOB setfattr -n bcachefs.compression -v lz4 mnt/t/shared
[ "$rc" != 0 ] && grep -q 'Operation not permitted' err || fail "a non-owner set an option: $(cat err)"
run $NOB setfattr -x bcachefs.compression mnt/t/shared
[ "$rc" != 0 ] && grep -q 'Operation not permitted' err || fail "a non-owner removed an option: $(cat err)"
[ "$(getfattr --only-values -n bcachefs.compression mnt/t/shared)" = zstd:3 ] || fail "changed by a non-owner"
chmod 777 mnt/t
$NOB sh -c "echo x > $mnt/t/mine" || fail "nobody cannot create"
run $NOB setfattr -n bcachefs.compression -v lz4 mnt/t/mine
[ "$rc" = 0 ] || fail "the owner cannot set an option: $(cat err)"
[ "$(getfattr --only-values -n bcachefs.compression mnt/t/mine)" = lz4 ] || fail "owner's set lost"
setfattr -x bcachefs.compression mnt/t/mine || fail "root cannot remove an option"
run getfattr -n bcachefs.compression mnt/t/mine
[ "$rc" != 0 ] || fail "removed option still there"
umount_img || fail "unmount"
trap - EXIT
grep -q "$mnt" /proc/mounts && fail "still mounted"
# the data written through the mount: zstd on hdd
f=$(inum /t/f)
run list_ext $f
grep -q . out || fail "no extents for /t/f"
expect_not_in out 'comp [^3]|ptr [^1]:'
expect_rc 0 $B image cat $I /t/f
cmp out data || fail "/t/f reads back other data"
expect_rc 0 $B fsck -n ssd.img hdd.img
