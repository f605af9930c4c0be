# The mount as a full citizen (issue 31), through `mount -t fuse.bcachefs`
# (the helper link in a private mount namespace, as t41), each part run
# the same way on a kernel tmpfs, whose output is the reference:
#   remount  mount -o remount,ro refuses writes with EROFS, back to rw
#            writes again; read-only refused while a file is open for
#            writing (EBUSY); options that cannot change live refused by
#            name, nothing changed; a live one (compression) changes
#   suid     suid,dev,exec as mount(8) gives them to root: a device node
#            opens, a setuid binary runs as its owner; nosuid,nodev,noexec
#            (and through remount) refuse them; fusemount alone stays
#            nosuid,nodev (FUSE's default for the unprivileged)
#   atime    relatime (default), strictatime, noatime, nodiratime,
#            lazytime: which reads and listings change atime (and never
#            ctime); mountinfo's atime flags; lazytime's atime kept across
#            an unmount; a remount changes the rule live
#   setfacl  S_ISGID cleared for a caller outside the group without
#            CAP_FSETID, kept for a member and root; on a full filesystem a
#            refused setfacl changes neither mode nor ACL
#   quiet    20 x (umount; mount at once): the helper prints nothing
#   second   a second mount of the filesystem elsewhere (t70 has more): each
#            sees the other's changes, flags per mountpoint, ro of a rw
#            filesystem refused, rw of a ro one made ro, the second outlives
#            the first's umount; the reference is kernel ext4 on a loop device
# fsck -n -f clean after every unmount.
need_fuse
need_root "mount(8), tmpfs reference, setpriv"
need setpriv setfacl getfacl getfattr unshare mkfs.ext4 losetup
unshare -m --propagation private true 2>/dev/null || skip "no mount namespaces here"
BIN=${BCH_BIN:-$B}	# under ENCRYPTED=1 $B is a wrapper: mount(8) runs the binary

chmod 755 .
mkdir sb ref mnt full
ln -s "$BIN" sb/mount.fuse.bcachefs
expect_rc 0 $B format -q --fs-size=256M img
expect_rc 0 $B format -q --fs-size=32M small
echo "work dir $PWD"

cat > inner.sh <<'EOF'
set -u
top=$PWD img=$PWD/img ref=$PWD/ref mnt=$PWD/mnt
trap 'cd /; for d in s3 s2 s1; do umount "$top/$d" 2>/dev/null; done; umount "$mnt" 2>/dev/null; umount "$ref" 2>/dev/null; umount "$top/full" 2>/dev/null' EXIT
die() { echo "inner: $*"; exit 1; }
mount -t overlay overlay -o lowerdir="$top/sb:/usr/sbin" /usr/sbin || { echo "inner: overlay"; exit 2; }
G=4242
NOB="setpriv --reuid=65534 --regid=65534 --clear-groups"
MEM="setpriv --reuid=65534 --regid=65534 --groups=$G"
# norm DIR: the directory's path out of messages
norm() { sed "s|$1|D|g"; }
# vfs DIR: mountinfo's VFS flags of the mount on DIR, atime and access ones
vfs() { awk -v d="$1" '$5 == d { print $6 }' /proc/self/mountinfo | tail -1 | tr , '\n' |
	grep -E '^(ro|rw|nosuid|nodev|noexec|noatime|nodiratime|relatime)$' | sort | tr '\n' ,; echo; }
# fresh KIND [OPTS]: mount KIND (tmpfs or ours) on its directory with OPTS
fresh() {
	if [ $1 = tmpfs ]; then
		mount -t tmpfs -o "mode=777${2:+,$2}" bch-t60 "$ref" || die "tmpfs -o ${2:-}"
	else
		mount -t fuse.bcachefs ${2:+-o "$2"} "$img" "$mnt" 2>mount.err ||
			die "mount -t fuse.bcachefs -o ${2:-}: $(cat mount.err)"
		[ -s mount.err ] && die "mount printed: $(cat mount.err)"
		chmod 777 "$mnt"
	fi
}
# gone KIND: unmount; ours: fsck -n -f clean (it waits for the daemon's close)
gone() {
	if [ $1 = tmpfs ]; then umount "$ref"; return; fi
	umount "$mnt" || die "umount"
	bcachefs_fsck=$("$BIN" fsck -n -f "$img" 2>&1) || die "fsck -n -f: $bcachefs_fsck"
	echo "$bcachefs_fsck" | grep -q ' 0 problems found' || die "fsck: $bcachefs_fsck"
}
dir() { [ $1 = tmpfs ] && echo "$ref" || echo "$mnt"; }

# ---- remount
remount_seq() {
	d=$(dir $1)
	echo one > $d/a
	mount -o remount,ro $d 2>&1 | norm $d; echo "remount ro: $(vfs $d)"
	touch $d/b 2>&1 | norm $d
	(echo two >> $d/a) 2>&1 | norm $d
	mkdir $d/c 2>&1 | norm $d
	cat $d/a
	mount -o remount,rw $d 2>&1 | norm $d; echo "remount rw: $(vfs $d)"
	echo three >> $d/a && touch $d/b && cat $d/a && ls $d | grep -v lost+found | tr '\n' ' '; echo
	exec 3>>$d/a
	mount -o remount,ro $d >/dev/null 2>&1 && r=0 || r=fails
	echo "remount ro with a file open for writing: $r: $(vfs $d)"
	exec 3>&-
	echo u > $d/u; exec 4<$d/u; rm $d/u
	mount -o remount,ro $d >/dev/null 2>&1 && r=0 || r=fails
	echo "remount ro with an unlinked file open: $r: $(vfs $d)"
	exec 4<&-
	echo four >> $d/a && echo "still writable"
	mount -o remount,noatime $d; echo "remount noatime: $(vfs $d)"
	mount -o remount,relatime $d; echo "remount relatime: $(vfs $d)"
}
for k in tmpfs ours; do
	fresh $k
	remount_seq $k > remount.$k 2>&1
	if [ $k = ours ]; then
		# the daemon's own: refused by name, nothing changed
		flags=$(vfs "$mnt")
		mount -o remount,allow_other "$mnt" 2>refuse.err && die "remount,allow_other taken"
		grep -q "option 'allow_other' cannot change on a mounted filesystem" refuse.err ||
			die "remount,allow_other: $(cat refuse.err)"
		mount -o remount,ro,degraded "$mnt" 2>refuse.err && die "remount,ro,degraded taken"
		grep -q "option 'degraded' cannot change on a mounted filesystem" refuse.err ||
			die "remount,degraded: $(cat refuse.err)"
		mount -o remount,ro,nosuchopt "$mnt" 2>refuse.err && die "remount,nosuchopt taken"
		grep -q "nosuchopt" refuse.err || die "remount,nosuchopt: $(cat refuse.err)"
		[ "$(vfs "$mnt")" = "$flags" ] ||
			die "a refused remount changed the flags: $(vfs "$mnt")"
		echo five >> "$mnt/a" || die "a refused remount,ro made it read-only"
		# a live option
		mount -o remount,compression=zstd "$mnt" || die "remount,compression=zstd"
		touch "$mnt/z"
		getfattr --absolute-names -n bcachefs_effective.compression --only-values "$mnt/z" > comp.out 2>&1
		[ "$(cat comp.out)" = zstd ] || die "compression after remount: $(cat comp.out)"
	fi
	gone $k
done
cmp remount.tmpfs remount.ours >/dev/null ||
	die "remount differs from tmpfs: $(diff remount.tmpfs remount.ours)"
echo "remount: as tmpfs ($(wc -l < remount.ours) lines)"

# ---- suid, dev, exec (root)
suid_seq() {
	d=$(dir $1)
	echo "defaults: $(vfs $d)"
	mknod $d/null c 1 3 && echo x > $d/null && echo "device node opened"
	cp /usr/bin/id $d/id && chown 65534 $d/id && chmod 4755 $d/id
	echo "setuid runs as uid $($d/id -u)"
	mount -o remount,nosuid,nodev,noexec $d; echo "remount nosuid,nodev,noexec: $(vfs $d)"
	(echo x > $d/null) 2>&1 | norm $d
	$d/id -u 2>&1 | norm $d
	mount -o remount,exec,nosuid $d; echo "remount exec,nosuid: $(vfs $d)"
	echo "setuid runs as uid $($d/id -u)"
	mount -o remount,suid,dev $d; echo "remount suid,dev: $(vfs $d)"
	echo "setuid runs as uid $($d/id -u)"
	echo x > $d/null && echo "device node opened"
}
for k in tmpfs ours; do
	fresh $k
	suid_seq $k > suid.$k 2>&1
	gone $k
done
cmp suid.tmpfs suid.ours >/dev/null || die "suid, dev, exec differ from tmpfs: $(diff suid.tmpfs suid.ours)"
echo "suid, dev, exec: as tmpfs ($(wc -l < suid.ours) lines)"
fresh ours "nosuid,nodev,noexec"
[ "$(vfs "$mnt")" = "nodev,noexec,nosuid,relatime,rw," ] || die "-o nosuid,nodev,noexec: $(vfs "$mnt")"
gone ours
"$BIN" fusemount "$img" "$mnt" || die "fusemount"
[ "$(vfs "$mnt")" = "nodev,nosuid,relatime,rw," ] || die "fusemount alone: $(vfs "$mnt")"
gone ours

# ---- atime
at() { stat -c %x "$1"; }
ct() { stat -c %z "$1"; }
chk() { [ "$(at "$2")" != "$3" ] && echo "$1: atime changed" || echo "$1: atime same"; }
atime_seq() {
	d=$(dir $1)/$2
	mkdir $d
	echo data > $d/f; mkdir $d/dir; touch $d/dir/e; : > $d/empty
	sleep 0.05; o=$(at $d/f); c=$(ct $d/f); cat $d/f >/dev/null; chk "read after write" $d/f "$o"
	[ "$(ct $d/f)" = "$c" ] && echo "ctime same" || echo "ctime changed by a read"
	sleep 0.05; o=$(at $d/f); cat $d/f >/dev/null; chk "second read" $d/f "$o"
	touch -a -d '2 days ago' $d/f; o=$(at $d/f); cat $d/f >/dev/null; chk "read of a 2-day-old atime" $d/f "$o"
	sleep 0.05; o=$(at $d/dir); ls $d/dir >/dev/null; chk "listing after a create" $d/dir "$o"
	sleep 0.05; o=$(at $d/dir); ls $d/dir >/dev/null; chk "second listing" $d/dir "$o"
	sleep 0.05; o=$(at $d/empty); cat $d/empty; chk "read of an empty file" $d/empty "$o"
	echo more >> $d/f; sleep 0.05; o=$(at $d/f); head -c 2 $d/f >/dev/null; chk "read after an append" $d/f "$o"
}
for mode in relatime strictatime noatime nodiratime lazytime "noatime,strictatime"; do
	for k in tmpfs ours; do
		fresh $k "$mode"
		{ echo "flags: $(vfs $(dir $k))"; atime_seq $k t; } > atime.$k 2>&1
		if [ $k = ours ] && [ $mode = lazytime ]; then
			# the atime not written yet survives the unmount
			sleep 0.05; cat "$mnt/t/f" > /dev/null; a=$(at "$mnt/t/f")
			gone $k
			fresh $k
			[ "$(at "$mnt/t/f")" = "$a" ] || die "lazytime: atime $a lost at unmount: $(at "$mnt/t/f")"
		fi
		gone $k
		[ $k = ours ] && { "$BIN" format -q --force --fs-size=256M "$img" || die "format"; }
	done
	cmp atime.tmpfs atime.ours >/dev/null || die "-o $mode: atime differs from tmpfs: $(diff atime.tmpfs atime.ours)"
	echo "atime -o $mode: as tmpfs: $(grep -c changed atime.ours) of $(wc -l < atime.ours) lines changed"
done
# the rule changes live
for k in tmpfs ours; do
	fresh $k
	top_d=$(dir $k)
	{ atime_seq $k t1; mount -o remount,strictatime $top_d; echo "strictatime: $(vfs $top_d)"
	  atime_seq $k t2; mount -o remount,noatime $top_d; atime_seq $k t3; } > atime.$k 2>&1
	gone $k
done
cmp atime.tmpfs atime.ours >/dev/null || die "atime across remounts differs from tmpfs: $(diff atime.tmpfs atime.ours)"
echo "atime across remounts: as tmpfs"

# ---- setfacl and S_ISGID
acl_seq() {
	d=$(dir $1)/acl
	mkdir $d; chmod 777 $d
	for who in NOB MEM RT; do
		touch $d/$who; chown 65534:$G $d/$who; chmod 2775 $d/$who
		eval "as=\${$who:-}"
		$as setfacl -m u:65534:rw $d/$who
		echo "$who setfacl: $(stat -c %a $d/$who) $(getfacl -cp $d/$who 2>/dev/null | tr '\n' ' ')"
	done
	touch $d/x; chown 65534:$G $d/x; chmod 2775 $d/x
	$NOB chmod 2770 $d/x; echo "NOB chmod: $(stat -c %a $d/x)"
	setfacl -m u:65534:r $d/x; setfacl -b $d/x; echo "root setfacl -b: $(stat -c %a $d/x) $(getfacl -cp $d/x | tr '\n' ' ')"
}
RT=			# root: as it is
for k in tmpfs ours; do
	[ $k = ours ] && fresh $k allow_other || fresh $k	# nobody reaches a FUSE mount so
	acl_seq $k > acl.$k 2>&1
	gone $k
done
cmp acl.tmpfs acl.ours >/dev/null || die "setfacl differs from tmpfs: $(diff acl.tmpfs acl.ours)"
echo "setfacl and S_ISGID: as tmpfs"
# a refused setfacl changes nothing
mount -t fuse.bcachefs "$top/small" "$top/full" || die "mount small"
f=$top/full
touch $f/a; chmod 2750 $f/a
dd if=/dev/zero of=$f/fill bs=1M 2>/dev/null
i=0; while [ $i -lt 5000 ] && touch $f/t$i 2>/dev/null; do i=$((i + 1)); done
acl=$(for u in $(seq 1000 1400); do printf 'u:%d:rw,' $u; done)
before="$(stat -c %a $f/a) $(getfacl -cp $f/a | tr '\n' ' ')"
setfacl -m "${acl%,}" $f/a 2>acl.err && die "a 401-entry setfacl fit on a full filesystem ($i files made)"
grep -q "No space left on device" acl.err || die "setfacl on a full filesystem: $(cat acl.err)"
after="$(stat -c %a $f/a) $(getfacl -cp $f/a | tr '\n' ' ')"
[ "$before" = "$after" ] || die "a refused setfacl changed the file: $before -> $after"
umount $f || die "umount small"
out=$("$BIN" fsck -n -f "$top/small" 2>&1) && echo "$out" | grep -q ' 0 problems found' ||
	die "fsck small: $out"
echo "refused setfacl: nothing changed ($before)"

# ---- quiet: mount right after umount prints nothing
for n in $(seq 1 20); do
	mount -t fuse.bcachefs "$img" "$mnt" 2>quiet.err || die "cycle $n: mount: $(cat quiet.err)"
	[ -s quiet.err ] && die "cycle $n: mount printed: $(cat quiet.err)"
	echo $n > "$mnt/q$n"
	umount "$mnt" || die "cycle $n: umount"
done
mount -t fuse.bcachefs "$img" "$mnt" 2>quiet.err && [ ! -s quiet.err ] || die "last mount: $(cat quiet.err)"
[ "$(cat "$mnt/q20")" = 20 ] || die "q20 lost"
gone ours
echo "20 x (mount; write; umount) then mount: nothing printed"

# ---- a second mountpoint: the same sequence on kernel ext4 (a loop device)
# second_seq TYPE SRC: mount SRC twice (and more), the kernel shares one superblock
second_seq() {
	t=$1 src=$2 a="$top/s1" b="$top/s2" c="$top/s3"
	mount -t $t "$src" "$a" || die "$t: first mount"
	mount -t $t -o nosuid,nodev,noatime "$src" "$b" 2>s.err; echo "second: $?"
	echo both > "$a/both"; cat "$b/both"
	chmod 600 "$a/both"; stat -c %a "$b/both"
	mv "$b/both" "$b/moved"; ls "$a" | grep -v lost+found | tr '\n' ' '; echo
	echo "second's flags: $(vfs "$b")"
	mount -t $t -o ro "$src" "$c" 2>/dev/null; echo "ro of a rw filesystem: $?"
	umount "$a" || die "$t: umount the first"
	echo still > "$b/still" && cat "$b/still"
	mount -o remount,ro "$b"; echo "remount ro: $?"
	touch "$b/x" 2>&1 | norm "$b"
	umount "$b" || die "$t: umount the second"
	mount -t $t -o ro "$src" "$a" || die "$t: ro mount"
	mount -t $t "$src" "$b" 2>/dev/null; echo "rw of a ro filesystem: $?"
	echo "its flags: $(vfs "$b")"
	touch "$b/y" 2>&1 | norm "$b"
	cat "$b/still"
	umount "$b"; umount "$a"
}
mkdir -p "$top/s1" "$top/s2" "$top/s3"
truncate -s 64M "$top/e.img" && mkfs.ext4 -q -F "$top/e.img" || die "mkfs.ext4"
loop=$(losetup -f --show "$top/e.img") || die "losetup"
second_seq ext4 "$loop" > second.ext4 2>&1
losetup -d "$loop"
"$BIN" format -q --force --fs-size=256M "$img" || die "format"
second_seq fuse.bcachefs "$img" > second.ours 2>&1
cmp second.ext4 second.ours >/dev/null || die "second mountpoint differs from ext4: $(diff second.ext4 second.ours)"
bcachefs_fsck=$("$BIN" fsck -n -f "$img" 2>&1) || die "fsck -n -f: $bcachefs_fsck"
sed "s/^/  /" second.ours
echo "second mountpoint: as ext4 ($(wc -l < second.ours) lines)"
exit 0
EOF
BIN=$BIN unshare -m --propagation private sh inner.sh > inner.log 2>&1
rc=$?
cat inner.log
[ $rc = 2 ] && skip "namespace setup failed: $(cat inner.log)"
[ $rc = 0 ] || fail "$(tail -5 inner.log)"
grep -q "$PWD/mnt" /proc/mounts && fail "left $PWD/mnt mounted"

# unprivileged: fusemount as a user stays nosuid,nodev (fusermount3).  It
# needs a /dev/fuse the user may open: where the machine's is root's alone
# (0600), the part runs in a private mount namespace whose /dev/fuse is a
# node of the same device open to all (on a tmpfs of its own: no nodev).
mkdir -p u && chmod 777 u && cp small u/uimg && chown 65534 u/uimg && mkdir u/um && chown 65534 u/um
cat > user.sh <<'EOF'
set -u
if [ "${PRIVATE_FUSE:-0}" = 1 ]; then
	mkdir devt && mount -t tmpfs -o mode=755 tmpfs devt && mknod devt/fuse c 10 229 &&
		chmod 666 devt/fuse && mount --bind devt/fuse /dev/fuse || exit 2
fi
setpriv --reuid=65534 --regid=65534 --clear-groups env XDG_RUNTIME_DIR= HOME=$PWD/u \
	"$B" fusemount -o suid,dev u/uimg u/um 2>user.err || { echo "user fusemount: $(cat user.err)"; exit 1; }
flags=$(awk -v d="$PWD/u/um" '$5 == d { print $6 }' /proc/self/mountinfo)
fusermount3 -u u/um
echo "$flags"
EOF
private=0
setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'test -r /dev/fuse -a -w /dev/fuse' || private=1
if [ $private = 0 ]; then
	flags=$(B=$B sh user.sh) || fail "$flags"
elif root_part "the unprivileged mount (a private /dev/fuse)"; then
	flags=$(B=$B PRIVATE_FUSE=1 unshare -m --propagation private sh user.sh)
	rc=$?
	[ $rc = 2 ] && fail "a private /dev/fuse: namespace setup failed"
	[ $rc = 0 ] || fail "$flags"
fi
if [ -n "${flags:-}" ]; then
	case ,$flags, in *,nosuid,*nodev,*|*,nodev,*nosuid,*) ;; *) fail "a user's mount is $flags" ;; esac
	echo "user mount: $flags (private /dev/fuse: $private)"
fi
true
