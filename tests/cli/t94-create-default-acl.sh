# fusemount: a directory's default ACL, looked up for each create in it, is
# remembered missing (held.nodefacl in fusemount.h) until a request that
# may set one comes: after files were made in a directory without one, a
# default ACL set on it (setfacl -d, through this mountpoint or a second
# one of the same daemon) or removed again must decide the next create's
# mode as on the kernel's tmpfs, under umask 077.  fsck -n clean after.
need_fuse
need_root "tmpfs reference"
need setfacl
PY=/usr/bin/python3
[ -x $PY ] || fail "no $PY"

chmod 755 .
mkdir ref mnt mnt2
ref=$PWD/ref mnt=$PWD/mnt mnt2=$PWD/mnt2
mount -t tmpfs bch-t94-ref ref || fail "cannot mount a tmpfs as root"
trap 'cd /; fusermount3 -uz "$mnt2" 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null; umount "$ref" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=64M img
$B fusemount -f img mnt 2>mount.err &
fpid=$!
for i in $(seq 1 100); do mountpoint -q mnt && break; sleep 0.1; done
mountpoint -q mnt || fail "fusemount: $(cat mount.err)"
expect_rc 0 $B fusemount img mnt2
mountpoint -q mnt2 || fail "second mountpoint"
ulimit -f 100000

# mk PATH: a file made by open(O_CREAT, 0666) under umask 077; its mode
mk() { (umask 077; $PY -c "import os; os.close(os.open('$1', os.O_CREAT | os.O_WRONLY, 0o666))"); stat -c %a "$1"; }
# scen DIR OTHER: OTHER is DIR through another mountpoint
scen() {
	mkdir "$1/d"
	for i in 1 2 3; do echo "plain$i $(mk "$1/d/p$i")"; done
	setfacl -d -m u::rwx,g::rwx,o::rwx "$1/d"
	echo "acl $(mk "$1/d/a1")"
	mkdir "$1/d/sub"; echo "acl_mkdir $(stat -c %a "$1/d/sub")"
	setfacl -k "$1/d"
	echo "removed $(mk "$1/d/r1")"
	setfacl -d -m u::rw,g::r,o::- "$2/d"
	echo "acl_other $(mk "$1/d/o1")"
	setfacl -k "$2/d"
	echo "removed_other $(mk "$1/d/o2")"
}
scen "$ref" "$ref" > kernel.txt 2>&1
scen "$mnt" "$mnt2" > fuse.txt 2>&1
[ "$(wc -l < kernel.txt)" -eq 8 ] || fail "the reference run: $(cat kernel.txt)"
diff kernel.txt fuse.txt > diff.txt || fail "create modes differ from the kernel's (< tmpfs, > fusemount):
$(cat diff.txt)"
for want in "plain3 600" "acl 666" "removed 600" "acl_other 640" "removed_other 600"; do
	grep -qx "$want" fuse.txt || fail "want '$want', got '$(grep "^${want%% *} " fuse.txt)'"
done
fusermount3 -u mnt2 || fail "unmount mnt2"
fusermount3 -u mnt && wait $fpid || fail "unmount"
expect_rc 0 $B fsck -f -n img
expect_in out "0 problems found"
