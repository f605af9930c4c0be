# File flags, whiteouts and overlayfs through `mount -t fuse.bcachefs`
# (issue 31), each part run the same way on a kernel tmpfs, whose output is
# the reference (tmpfs keeps i, a, d and A; S and the project ID are ours
# only and checked on their own):
#   flags     chattr +i/+a/+d/+A and lsattr on files and directories; what
#             an immutable or append-only file (or directory) refuses: writes,
#             truncate, unlink, rename, link, chmod, chown, times, xattrs;
#             which flags new files inherit; +A keeps atime; a fifo has
#             none (the kernel's FUSE fileattr: files and directories only)
#   nobody    chattr by a non-owner, +i/+a by an owner without
#             CAP_LINUX_IMMUTABLE, an owner's +d; writes by the owner to an
#             append-only file
#   whiteout  mknod c 0 0 by an unprivileged user (allowed), c 1 3 (not);
#             renameat2(RENAME_WHITEOUT) leaves a 0/0 character device
#   overlay   our mount as overlayfs upper and work directory over a lower
#             directory: create, delete (whiteout), rename, copy up; the
#             merged view and the upper directory as with a tmpfs upper
#   remount   a refused `mount -o remount` exits 32, as tmpfs's
# Then offline: image stat (flags, project, --json), image rm refuses an
# immutable or append-only file without -f, fsck -n -f clean after every
# unmount.  Last, the 32-bit ioctl numbers (FS_IOC32_[GS]ETFLAGS) through a
# fusemount, read back by lsattr and image stat.
need_fuse
need_root "mount(8), tmpfs and overlayfs reference, setpriv"
need setpriv chattr lsattr setfattr python3 unshare
unshare -m --propagation private true 2>/dev/null || skip "no mount namespaces here"
BIN=${BCH_BIN:-$B}	# under ENCRYPTED=1 $B is a wrapper: mount(8) runs the binary

chmod 755 .
mkdir sb ref mnt lower ov
ln -s "$BIN" sb/mount.fuse.bcachefs
expect_rc 0 $B format -q --fs-size=128M img
echo "work dir $PWD"

cat > inner.sh <<'EOF'
set -u
top=$PWD img=$PWD/img ref=$PWD/ref mnt=$PWD/mnt
trap 'cd /; umount "$top/ov" 2>/dev/null; umount "$mnt" 2>/dev/null; umount "$ref" 2>/dev/null' EXIT
die() { echo "inner: $*"; exit 1; }
mount -t overlay overlay -o lowerdir="$top/sb:/usr/sbin" /usr/sbin || { echo "inner: overlay"; exit 2; }
NOB="setpriv --reuid=65534 --regid=65534 --clear-groups"
# norm DIR: the directory's path out of messages
norm() { sed "s|$1|D|g"; }
fresh() {
	if [ $1 = tmpfs ]; then
		mount -t tmpfs -o mode=755 bch-t64 "$ref" || die "tmpfs"
	else
		mount -t fuse.bcachefs -o allow_other "$img" "$mnt" 2>mount.err ||
			die "mount -t fuse.bcachefs: $(cat mount.err)"
		[ -s mount.err ] && die "mount printed: $(cat mount.err)"
		chmod 755 "$mnt"
		rmdir "$mnt/lost+found" 2>/dev/null || true
	fi
}
gone() {
	if [ $1 = tmpfs ]; then umount "$ref"; return; fi
	umount "$mnt" || die "umount"
	out=$("$BIN" fsck -n -f "$img" 2>&1) || die "fsck -n -f: $out"
	echo "$out" | grep -q ' 0 problems found' || die "fsck: $out"
}
dir() { [ $1 = tmpfs ] && echo "$ref" || echo "$mnt"; }
# try WHAT CMD...: one line, the command's status and its message
try() {
	w=$1; shift
	"$@" > try.out 2>&1 && r=ok || r=fails
	echo "$w: $r $(norm "$D" < try.out | sed 's/^[a-z]*: //' | head -1)"
}
lsa() { lsattr "$@" 2>&1 | norm "$D"; }
refuse_seq() {
	f=$1
	try "append" sh -c "echo more >> $f"
	try "overwrite" sh -c "echo new > $f"
	try "truncate" truncate -s 1 $f
	try "rm" rm -f $f
	try "mv" mv $f $D/moved
	try "ln" ln $f $D/link
	try "touch" touch $f
	try "touch -d" touch -d @1000000000 $f
	try "chmod" chmod 600 $f
	try "chown" chown 1:1 $f
	try "setfattr" setfattr -n user.x -v 1 $f
	echo "content: $(tr '\n' ' ' < $f)"
}

# ---- flags
flags_seq() {
	D=$(dir $1)
	echo one > $D/f; mkdir $D/d; echo x > $D/d/x
	lsa $D/f; lsa -d $D/d
	chattr +i $D/f; lsa $D/f
	refuse_seq $D/f
	chattr -i +a $D/f; lsa $D/f
	refuse_seq $D/f
	chattr -a $D/f; lsa $D/f
	try "rm after -a" rm $D/f
	chattr +i $D/d; lsa -d $D/d
	try "create in +i dir" touch $D/d/n
	try "rm in +i dir" rm $D/d/x
	try "write in +i dir" sh -c "echo y >> $D/d/x"
	try "mv into +i dir" sh -c "echo z > $D/z && mv $D/z $D/d/z"
	chattr -i +a $D/d; lsa -d $D/d
	try "create in +a dir" touch $D/d/n
	try "rm in +a dir" rm $D/d/n
	try "mv out of +a dir" mv $D/d/x $D/x
	chattr -a $D/d
	chattr +dA $D/d; lsa -d $D/d
	touch $D/d/new; mkdir $D/d/sub; lsa $D/d/new; lsa -d $D/d/sub
	# +A: a read leaves atime (relatime would update it: atime <= mtime)
	echo data > $D/t; touch -a -d @1000000000 $D/t; touch -m -d @1000000001 $D/t
	chattr +A $D/t; cat $D/t > /dev/null; echo "atime with +A: $(stat -c %X $D/t)"
	chattr -A $D/t; cat $D/t > /dev/null; [ "$(stat -c %X $D/t)" != 1000000000 ] && echo "atime without +A: moved"
	# the kernel asks FUSE (fileattr) for regular files and directories only
	mkfifo $D/p; lsa -d $D/p; try "chattr +d fifo" chattr +d $D/p
	ls $D | tr '\n' ' '; echo
}
for k in tmpfs ours; do
	fresh $k
	flags_seq $k > flags.$k 2>&1
	gone $k
done
cmp flags.tmpfs flags.ours >/dev/null || die "flags differ from tmpfs: $(diff flags.tmpfs flags.ours)"
echo "chattr and lsattr: as tmpfs ($(wc -l < flags.ours) lines)"
[ $(grep -c ': fails' flags.ours) -ge 25 ] || die "too few refusals: $(cat flags.ours)"

# ---- nobody
nobody_seq() {
	D=$(dir $1)
	echo r > $D/rootf; echo n > $D/nobf; chown 65534:65534 $D/nobf
	try "nobody chattr +d root's file" $NOB chattr +d $D/rootf
	try "nobody chattr +d own file" $NOB chattr +d $D/nobf
	try "nobody chattr +i own file" $NOB chattr +i $D/nobf
	try "nobody chattr +a own file" $NOB chattr +a $D/nobf
	chattr +a $D/nobf
	try "nobody chattr -a own file" $NOB chattr -a $D/nobf
	try "nobody appends" $NOB sh -c "echo more >> $D/nobf"
	try "nobody overwrites" $NOB sh -c "echo new > $D/nobf"
	chattr +i $D/nobf
	try "nobody appends to +i" $NOB sh -c "echo more >> $D/nobf"
	chattr -i $D/nobf
	lsa $D/rootf $D/nobf
	echo "content: $(tr '\n' ' ' < $D/nobf)"
}
for k in tmpfs ours; do
	fresh $k
	nobody_seq $k > nobody.$k 2>&1
	gone $k
done
cmp nobody.tmpfs nobody.ours >/dev/null || die "chattr by nobody differs from tmpfs: $(diff nobody.tmpfs nobody.ours)"
echo "chattr by a non-owner and a non-root owner: as tmpfs"

# ---- whiteout
cat > rw.py <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_WHITEOUT = -100, 4
r = libc.renameat2(AT_FDCWD, sys.argv[1].encode(), AT_FDCWD, sys.argv[2].encode(), RENAME_WHITEOUT)
print("renameat2 WHITEOUT:", "ok" if r == 0 else os.strerror(ctypes.get_errno()))
PY
wh_seq() {
	D=$(dir $1)
	mkdir $D/w; chown 65534:65534 $D/w
	try "nobody mknod c 0 0" $NOB mknod $D/w/wh c 0 0
	try "nobody mknod c 1 3" $NOB mknod $D/w/null c 1 3
	echo a > $D/w/a; echo b > $D/w/b
	python3 "$top/rw.py" $D/w/a $D/w/a2
	python3 "$top/rw.py" $D/w/b $D/w/a2 2>&1
	$NOB /usr/bin/python3 "$top/rw.py" $D/w/a2 $D/w/a3 2>&1
	stat -c '%n %F %t:%T %a %U %h' $D/w/* | norm $D
	cat $D/w/a3
}
for k in tmpfs ours; do
	fresh $k
	wh_seq $k > wh.$k 2>&1
	gone $k
done
cmp wh.tmpfs wh.ours >/dev/null || die "whiteouts differ from tmpfs: $(diff wh.tmpfs wh.ours)"
grep -q 'wh character special file 0:0' wh.ours && grep -q 'a character special file 0:0' wh.ours ||
	die "no whiteouts: $(cat wh.ours)"
echo "whiteouts (mknod 0/0, RENAME_WHITEOUT): as tmpfs"

# ---- overlay
ov_seq() {
	D=$(dir $1)
	rm -rf "$top/lower"; mkdir -p "$top/lower/d" "$top/lower/gone"
	echo l1 > "$top/lower/a"; echo l2 > "$top/lower/d/b"; echo l3 > "$top/lower/c"; echo l4 > "$top/lower/gone/x"
	mkdir $D/upper $D/work
	mount -t overlay ov -o lowerdir="$top/lower",upperdir=$D/upper,workdir=$D/work "$top/ov" ||
		die "overlay over $1"
	O=$top/ov
	echo new > $O/n; rm $O/a; mv $O/c $O/c2; echo more >> $O/d/b; rm -r $O/gone
	mkdir $O/nd; echo in > $O/nd/f; mv $O/d $O/d2 2>&1 | sed "s|$O|O|g"
	(cd $O && find . | sort | while read p; do
		printf '%s %s' "$p" "$(stat -c '%F %a %h' "$p")"
		[ -f "$p" ] && printf ' %s' "$(tr '\n' ' ' < "$p")"
		echo
	done)
	umount "$top/ov"
	(cd $D/upper && find . | sort | while read p; do
		printf '%s %s' "$p" "$(stat -c '%F %t:%T %a' "$p")"
		[ -f "$p" ] && printf ' %s' "$(tr '\n' ' ' < "$p")"
		echo
	done)
	echo "lower: $(cd "$top/lower" && find . | sort | tr '\n' ' ')"
}
for k in tmpfs ours; do
	fresh $k
	ov_seq $k > ov.$k 2>&1
	gone $k
done
cmp ov.tmpfs ov.ours >/dev/null || die "overlay differs from tmpfs: $(diff ov.tmpfs ov.ours)"
grep -q '^./a character special file 0:0' ov.ours || die "no whiteout in the upper: $(cat ov.ours)"
echo "overlayfs upper and work on our mount: as tmpfs ($(wc -l < ov.ours) lines)"

# ---- remount refused: 32
for k in tmpfs ours; do
	fresh $k
	mount -o remount,nosuchopt "$(dir $k)" 2>/dev/null; echo "remount,nosuchopt: $?" > rm32.$k
	[ $k = ours ] && { mount -o remount,ro,degraded "$mnt" 2>/dev/null; echo "remount,ro,degraded: $?" >> rm32.$k; }
	gone $k
done
grep -qx 'remount,nosuchopt: 32' rm32.tmpfs || die "tmpfs: $(cat rm32.tmpfs)"
[ "$(cat rm32.ours)" = "$(printf 'remount,nosuchopt: 32\nremount,ro,degraded: 32')" ] ||
	die "refused remounts: $(cat rm32.ours)"
echo "refused remount exits 32"

# ---- sync and project: ours only (tmpfs keeps neither)
fresh ours
echo s > $mnt/s; chattr +S $mnt/s; echo more >> $mnt/s || die "write to +S"
chattr -p 42 $mnt/s || die "chattr -p"
lsattr -p $mnt/s | grep -q '^ *42 --S' || die "lsattr -p: $(lsattr -p $mnt/s)"
chattr +i $mnt/s; mkdir $mnt/keep; echo k > $mnt/keep/k; chattr +a $mnt/keep/k
mkdir $mnt/frozen; chattr +i $mnt/frozen
gone ours
echo "chattr +S, -p 42: kept"
exit 0
EOF
BIN=$BIN unshare -m --propagation private sh inner.sh > inner.log 2>&1
rc=$?
cat inner.log
[ $rc = 2 ] && skip "namespace setup failed: $(cat inner.log)"
[ $rc = 0 ] || fail "$(tail -5 inner.log)"
grep -q "$PWD/mnt" /proc/mounts && fail "left $PWD/mnt mounted"

# ---- offline: image stat, image rm, the feature bit
expect_rc 0 $B show-super img
expect_in out '^Features: .*inode_flags'
expect_rc 0 $B image stat img /s
expect_in out 'Flags: sync,immutable  Project: 42'
expect_rc 0 $B image stat --json img /s /keep/k
expect_in out '"flags": \["sync", "immutable"\], "project": 42'
expect_in out '"flags": \["append"\], "project": 0'
expect_rc 1 $B image rm img /s
expect_in err 'rm: /s: Operation not permitted \(immutable or append-only'
expect_rc 1 $B image rm -r img /keep
expect_rc 1 $B image put img /etc/hostname /s
expect_in err 'File exists'
expect_rc 1 $B image put img /etc/hostname /frozen/h
expect_in err 'Operation not permitted'
expect_rc 1 $B image chmod img 600 /keep/k
expect_rc 0 $B image stat img /s /keep/k
expect_rc 0 $B image rm -f img /s
expect_rc 0 $B image rm -rf img /keep
expect_rc 1 $B image stat img /s
expect_rc 0 $B fsck -n -f img
expect_in out ' 0 problems found'
echo "image stat shows flags and project; image rm refuses them without -f"

# the 32-bit ioctl numbers (FS_IOC32_[GS]ETFLAGS: what a 32-bit chattr sends
# when the kernel does not turn it into fileattr; a 64-bit caller may send them too)
mkdir m32
trap 'cd /; fusermount3 -uz "$OLDPWD/m32" 2>/dev/null' EXIT
expect_rc 0 $B fusemount "$PWD/img" m32
echo x > m32/c32
python3 -c 'import fcntl, struct, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, 0x40046602, struct.pack("i", 0x40 | 0x80))	# FS_IOC32_SETFLAGS: d, A
b = bytearray(4)
fcntl.ioctl(fd, 0x80046601, b)					# FS_IOC32_GETFLAGS
print(hex(struct.unpack("i", b)[0]))' m32/c32 > ioc32.out 2>&1 || fail "FS_IOC32: $(cat ioc32.out)"
[ "$(cat ioc32.out)" = 0xc0 ] || fail "FS_IOC32_GETFLAGS read $(cat ioc32.out)"
lsattr m32/c32 | grep -q '^------dA' || fail "lsattr after FS_IOC32_SETFLAGS: $(lsattr m32/c32)"
fusermount3 -u m32 || fail "fusermount3 -u m32"
expect_rc 0 $B image stat img /c32
expect_in out 'Flags: nodump,noatime'
echo "FS_IOC32_GETFLAGS/SETFLAGS: as the 64-bit ones"
