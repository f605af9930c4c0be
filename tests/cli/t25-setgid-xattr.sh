# fusemount: set-id bits as Linux sets them, and xattr values up to 64 KiB.
# Set-id: the same scenarios (creation in setgid directories, under umasks
# and default ACLs; write, truncate, O_TRUNC, fallocate, hole punch by the
# unprivileged user nobody, a member of the file's group or not, and by root;
# chmod by a non-member; chown by root, chgrp by the owner; security.capability
# on chown and write) run on a kernel tmpfs and through the mount;
# every resulting mode and group must be the kernel's.  xattrs: 64 KiB values
# set, read, replaced and removed through the mount and `image` verbs, kept
# by `format --source`, `image extract` and tar export/import; one byte more
# is E2BIG.  fsck -n clean after each.  Value bytes: a fixed pattern (seed
# 25, printed).  Unmounts wait for the daemon (-f), not a race to fsck.
need_fuse
need_root "tmpfs reference, setpriv to nobody"
need setpriv setfacl setcap getcap
PY=/usr/bin/python3	# one nobody may run
[ -x $PY ] || fail "no $PY: make check installs python3 (scripts/install-deps.sh test)"
G=4242			# a group nobody is not in (unless given with --groups)
NOB="setpriv --reuid=65534 --regid=65534 --clear-groups"
MEM="setpriv --reuid=65534 --regid=65534 --groups=$G"
ROOT=

chmod 755 .
mkdir ref mnt
ref=$PWD/ref mnt=$PWD/mnt
mount -t tmpfs -o mode=777 bch-t25-ref ref || fail "cannot mount a tmpfs as root"
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null; umount "$ref" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=256M img
# in the foreground, so that an unmount can wait for the daemon's clean close
mount_img() {
	$B fusemount -f "$@" 2>mount.err &
	fpid=$!
	for i in $(seq 1 100); do mountpoint -q mnt && return 0; sleep 0.1; done
	return 1
}
umount_img() { fusermount3 -u mnt && wait $fpid; }
mount_img -o allow_other img mnt || fail "fusemount: $(cat mount.err)"
chmod 777 mnt

st() { printf '%s %s %s\n' "$1" "$(stat -c %a "$2")" "$(stat -c %g "$2")"; }
# as WHO (NOB, MEM or ROOT) with umask U: create PATH with MODE through open(2)
create() {
	eval "run_as=\$$1"
	(umask $3; $run_as $PY -c "import os; os.close(os.open('$2', os.O_CREAT|os.O_WRONLY, $4))")
}
# getx FILE NAME / setx FILE NAME VALUE: xattrs of the host (no attr package needed)
getx() { $PY -c "import os, sys; sys.stdout.buffer.write(os.getxattr('$1', '$2'))"; }
setx() { $PY -c "import os, sys; os.setxattr('$1', '$2', sys.argv[1].encode())" "$3"; }

# scenarios DIR: one line per result, "name mode group"
scenarios() {
	d=$1/scen
	mkdir "$d"; chmod 777 "$d"
	# creation in a setgid directory of group G
	mkdir "$d/sg"; chgrp $G "$d/sg"; chmod 2777 "$d/sg"
	(umask 022; $NOB mkdir "$d/sg/dir"); st mkdir_nonmember "$d/sg/dir"
	(umask 022; $NOB mkdir "$d/sg/dir/sub"); st mkdir_nested "$d/sg/dir/sub"
	(umask 022; $NOB $PY -c "import os; os.mkdir('$d/sg/dir3', 0o3777)"); st mkdir3777_nonmember "$d/sg/dir3"
	create NOB "$d/sg/f_nob" 022 0o2755; st create2755_nonmember "$d/sg/f_nob"
	create MEM "$d/sg/f_mem" 022 0o2755; st create2755_member "$d/sg/f_mem"
	create ROOT "$d/sg/f_root" 022 0o2755; st create2755_root "$d/sg/f_root"
	create NOB "$d/sg/f_u0" 0 0o2777; st create2777_umask0_nonmember "$d/sg/f_u0"
	create NOB "$d/sg/f_u77" 077 0o2777; st create2777_umask077_nonmember "$d/sg/f_u77"
	create NOB "$d/sg/f_u10" 010 0o2777; st create2777_umask010_nonmember "$d/sg/f_u10"
	(umask 022; $NOB $PY -c "import os; os.mknod('$d/sg/fifo', 0o12755)"); st mknod_fifo2755_nonmember "$d/sg/fifo"
	(umask 022; $NOB ln -s x "$d/sg/sym"); printf 'symlink_group %s\n' "$(stat -c %g "$d/sg/sym")"
	# the same under a default ACL (no umask then)
	mkdir "$d/acl"; chgrp $G "$d/acl"; chmod 2777 "$d/acl"
	setfacl -d -m u::rwx,g::rwx,o::rwx "$d/acl"
	create NOB "$d/acl/f_nob" 022 0o2777; st acl_create2777_nonmember "$d/acl/f_nob"
	create MEM "$d/acl/f_mem" 022 0o2777; st acl_create2777_member "$d/acl/f_mem"
	(umask 022; $NOB mkdir "$d/acl/dir"); st acl_mkdir_nonmember "$d/acl/dir"
	# a change of data or size: which set-id bits go
	for op in write truncate otrunc falloc keepsize punch; do
		for m in 4777 2777 6777 2666 4666 2767 6766; do
			for who in NOB MEM ROOT; do
				f=$d/$op.$m.$who
				head -c 8192 /dev/zero > "$f"; chgrp $G "$f"; chmod $m "$f"
				eval "run_as=\$$who"
				case $op in
				write)    $run_as $PY -c "import os; fd=os.open('$f', os.O_WRONLY); os.pwrite(fd, b'x', 10); os.close(fd)" ;;
				truncate) $run_as $PY -c "import os; os.truncate('$f', 100)" ;;
				otrunc)   $run_as $PY -c "import os; os.close(os.open('$f', os.O_WRONLY|os.O_TRUNC))" ;;
				falloc)   $run_as fallocate -l 65536 "$f" ;;
				keepsize) $run_as fallocate -n -o 8192 -l 65536 "$f" ;;
				punch)    $run_as fallocate -p -o 0 -l 4096 "$f" ;;
				esac
				st "$op.$m.$who" "$f"
			done
		done
	done
	# chmod by the owner, in the file's group or not
	for who in NOB MEM; do
		f=$d/chmod.$who; touch "$f"; chown 65534:$G "$f"; chmod 644 "$f"
		eval "run_as=\$$who"
		$run_as chmod 2755 "$f"; st "chmod2755.$who" "$f"
		$run_as chmod 2644 "$f"; st "chmod2644.$who" "$f"
		$run_as chmod 4755 "$f"; st "chmod4755.$who" "$f"
	done
	# chown and chgrp by root
	for m in 6755 2755 2644 4755; do
		f=$d/chown.$m; touch "$f"; chmod $m "$f"; chown 65534 "$f"; st "chown.$m" "$f"
		f=$d/chgrp.$m; touch "$f"; chmod $m "$f"; chgrp $G "$f"; st "chgrp.$m" "$f"
	done
	mkdir "$d/dchown"; chmod 2755 "$d/dchown"; chown 65534 "$d/dchown"; st chown_dir2755 "$d/dchown"
	# chgrp by the owner (MEM, in its own group 65534 and G; not in 0): the
	# group before the change decides S_ISGID without group-execute
	for m in 6755 2755 2644 4755 6644; do
		for g in $G 0; do
			f=$d/ochgrp.$m.$g; touch "$f"; chown 65534:$g "$f"; chmod $m "$f"
			$MEM chgrp 65534 "$f"; st "ochgrp.$m.$g" "$f"
		done
	done
	# security.capability goes on chown and on a write, whoever makes them
	for op in chown ochgrp write; do
		f=$d/cap.$op; echo x > "$f"; chown 65534 "$f"; chmod 666 "$f"
		setcap cap_net_raw+ep "$f" || echo "setcap $op failed"
		case $op in
		chown)	chown 0 "$f" ;;
		ochgrp)	$MEM chgrp $G "$f" ;;
		write)	$NOB $PY -c "import os; fd=os.open('$f', os.O_WRONLY); os.pwrite(fd, b'y', 1); os.close(fd)" ;;
		esac
		printf 'cap.%s %s\n' $op "$(getcap "$f" | wc -l)"
	done
}

scenarios "$ref" > kernel.txt 2>&1
scenarios "$mnt" > fuse.txt 2>&1
[ "$(wc -l < kernel.txt)" -ge 150 ] || fail "the reference run is short: $(cat kernel.txt)"
diff kernel.txt fuse.txt > diff.txt || fail "set-id bits differ from the kernel's (tmpfs) (< kernel, > fusemount):
$(cat diff.txt)"
# (keep-size preallocations are item 3's business: fsck below checks the rest)
rm -rf "$mnt/scen"
# and the rules themselves, in case the reference kernel is an old one
for want in "mkdir_nonmember 2755 $G" "mkdir_nested 2755 $G" "create2755_nonmember 755 $G" \
	    "create2755_member 2755 $G" "acl_create2777_nonmember 777 $G" "write.2666.NOB 666 $G" \
	    "write.2666.MEM 2666 $G" "write.4777.ROOT 4777 $G" "truncate.6777.MEM 777 $G" \
	    "punch.2767.NOB 767 $G" "chmod2755.NOB 755 $G" "chmod2755.MEM 2755 $G"; do
	grep -qx "$want" fuse.txt || fail "want '$want', got '$(grep "^${want%% *} " fuse.txt)'"
done

# ---- xattr values up to 64 KiB through the mount
cd mnt
echo data > x
echo "xattr values: pattern seed 25"
$PY - <<'PY' || fail "64 KiB xattrs through the mount"
import errno, os
def val(n, seed):
    return bytes((seed * 7 + i * 31 + (i >> 8)) & 0xff for i in range(n))
sizes = [0, 1, 1900, 1993, 3000, 65535, 65536, 100, 65536]
for step, n in enumerate(sizes):
    os.setxattr("x", "user.v", val(n, 25 + step))
    got = os.getxattr("x", "user.v")
    assert got == val(n, 25 + step), (step, n, len(got))
for i in range(3):
    os.setxattr("x", "user.big%d" % i, val(65536, 60 + i), os.XATTR_CREATE)
try:
    os.setxattr("x", "user.big0", val(10, 1), os.XATTR_CREATE)
    raise SystemExit("XATTR_CREATE over an existing value")
except OSError as e:
    assert e.errno == errno.EEXIST, e
try:
    os.setxattr("x", "user.over", b"o" * 65537)
    raise SystemExit("65537 bytes accepted")
except OSError as e:
    assert e.errno == errno.E2BIG, e
assert sorted(os.listxattr("x")) == ["user.big0", "user.big1", "user.big2", "user.v"], os.listxattr("x")
os.removexattr("x", "user.big1")
assert "user.big1" not in os.listxattr("x")
assert os.getxattr("x", "user.big2") == val(65536, 62)
PY
# a printable 64 KiB value for the image verbs to compare
big=$(head -c 65536 /dev/zero | tr '\0' q)
setx x user.text "$big" || fail "setxattr 64 KiB"
cd ..
umount_img || fail "unmount"
expect_rc 0 $B fsck -f -n img
expect_in out "0 problems found"

# ---- through image verbs
expect_rc 0 $B image getfattr -n user.text img /x
[ "$(sed -n 's/^user.text="\(.*\)"$/\1/p' out)" = "$big" ] || fail "image getfattr of the 64 KiB value"
expect_rc 0 $B image setfattr -n user.img -v "${big%q}z" img /x
expect_rc 1 $B image setfattr -n user.img -v "${big}q" img /x
expect_in err "bcachefs image: setfattr: /x: Argument list too long"
expect_rc 0 $B image setfattr -x user.big0 img /x
expect_rc 0 $B fsck -f -n img
expect_in out "0 problems found"
mount_img img mnt || fail "remount"
[ "$(getx mnt/x user.img)" = "${big%q}z" ] || fail "value set by image setfattr, read through the mount"
getx mnt/x user.big0 2>/dev/null && fail "user.big0 still there"
umount_img || fail "unmount"

# ---- format --source and image extract keep them
mkdir "$ref/src"
echo s > "$ref/src/f"
setx "$ref/src/f" user.text "$big" || fail "tmpfs refuses a 64 KiB xattr"
expect_rc 0 $B format -q --fs-size=64M --source="$ref/src" img2
expect_rc 0 $B image getfattr -n user.text img2 /f
[ "$(sed -n 's/^user.text="\(.*\)"$/\1/p' out)" = "$big" ] || fail "format --source: 64 KiB xattr"
expect_rc 0 $B image extract img2 "$ref/out"
[ "$(getx "$ref/out/f" user.text)" = "$big" ] || fail "image extract: 64 KiB xattr"
expect_rc 0 $B fsck -f -n img2
expect_in out "0 problems found"
# and a pax archive carries them from one image to another
expect_rc 0 $B image export-tar img2 t.tar
expect_rc 0 $B format -q --fs-size=64M img3
expect_rc 0 $B image import-tar img3 t.tar
expect_rc 0 $B image getfattr -n user.text img3 /f
[ "$(sed -n 's/^user.text="\(.*\)"$/\1/p' out)" = "$big" ] || fail "export-tar | import-tar: 64 KiB xattr"
expect_rc 0 $B fsck -f -n img3
expect_in out "0 problems found"
grep -q "$mnt" /proc/mounts && fail "still mounted"
true
