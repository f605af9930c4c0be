# fusemount: what a write removes (set-id bits, security.capability) is
# looked up once per inode and then remembered (Linux's S_NOSEC; held.nosec
# in fusemount.h) until a request that may set a mode or an xattr comes: a
# file written many times, then given S_ISGID without group-execute, S_ISUID,
# or a capability (by chmod, setcap, or setfattr through a second
# mountpoint), must lose it at the next write by a non-member, as on the
# kernel's tmpfs.  Both opens: O_WRONLY (direct_io: the daemon kills caps
# itself) and O_RDWR (buffered).  fsck -n clean after.
need_fuse
need_root "tmpfs reference, setpriv to nobody"
need setpriv setcap getcap
PY=/usr/bin/python3
[ -x $PY ] || fail "no $PY"
G=4242			# a group nobody is not in
NOB="setpriv --reuid=65534 --regid=65534 --clear-groups"

chmod 755 .
mkdir ref mnt mnt2
ref=$PWD/ref mnt=$PWD/mnt mnt2=$PWD/mnt2
mount -t tmpfs -o mode=777 bch-t93-ref ref || fail "cannot mount a tmpfs as root"
trap 'cd /; fusermount3 -uz "$mnt2" 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null; umount "$ref" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=128M img
$B fusemount -f -o allow_other img mnt 2>mount.err &
fpid=$!
for i in $(seq 1 100); do mountpoint -q mnt && break; sleep 0.1; done
mountpoint -q mnt || fail "fusemount: $(cat mount.err)"
chmod 777 mnt
# a second mountpoint of the same daemon (one engine, two sessions)
expect_rc 0 $B fusemount -o allow_other img mnt2
mountpoint -q mnt2 || fail "second mountpoint"
ulimit -f 100000

# wr FILE FLAG N: N 1-byte pwrites by nobody (each reaches the daemon), one open
wr() {
	$NOB $PY -c "import os
fd = os.open('$1', os.$2)
for i in range($3): os.pwrite(fd, b'w', 4096 * (i % 8))
os.close(fd)"
}
st() { printf '%s %s %s\n' "$1" "$(stat -c %a "$2")" "$(getcap "$2" | wc -l)"; }

# scen DIR OTHER: the scenarios in DIR; OTHER is DIR through another mountpoint
scen() {
	for fl in O_WRONLY O_RDWR; do
		f=$1/f.$fl o=$2/f.$fl
		head -c 32768 /dev/zero > "$f"; chgrp $G "$f"; chmod 666 "$f"
		wr "$f" $fl 20; st "$fl.plain" "$f"
		chmod 2666 "$f"; wr "$f" $fl 3; st "$fl.sgid" "$f"
		wr "$f" $fl 3; chmod 4666 "$f"; wr "$f" $fl 3; st "$fl.suid" "$f"
		wr "$f" $fl 3; setcap cap_net_raw+ep "$f" || echo "setcap failed"
		wr "$f" $fl 3; st "$fl.cap" "$f"
		wr "$f" $fl 3; setcap cap_net_raw+ep "$o" || echo "setcap other failed"
		wr "$f" $fl 3; st "$fl.cap_other" "$f"
		wr "$f" $fl 3; chmod 2666 "$o"; wr "$f" $fl 3; st "$fl.sgid_other" "$f"
	done
}
scen "$ref" "$ref" > kernel.txt 2>&1
scen "$mnt" "$mnt2" > fuse.txt 2>&1
[ "$(wc -l < kernel.txt)" -eq 12 ] || fail "the reference run: $(cat kernel.txt)"
diff kernel.txt fuse.txt > diff.txt || fail "after a write, set-id bits or caps differ from the kernel's (< tmpfs, > fusemount):
$(cat diff.txt)"
for want in "O_WRONLY.sgid 666 0" "O_RDWR.cap 666 0" "O_WRONLY.cap_other 666 0" "O_RDWR.sgid_other 666 0"; do
	grep -qx "$want" fuse.txt || fail "want '$want', got '$(grep "^${want%% *} " fuse.txt)'"
done
fusermount3 -u mnt2 || fail "unmount mnt2"
fusermount3 -u mnt && wait $fpid || fail "unmount"
expect_rc 0 $B fsck -f -n img
expect_in out "0 problems found"
