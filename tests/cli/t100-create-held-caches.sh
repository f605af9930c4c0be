# fusemount remembers per held inode what a create or a write would
# otherwise read each time (fusemount.h, struct held): a directory found
# without S_ISGID (nosgid: a create in it skips reading it), a file without
# set-id bits or security.capability (nosec: a write skips the lookups, the
# kernel's security.capability probe before a chown is answered from it).
# Namespace changes and setattr no longer forget them all; a setattr that
# gives an inode a set-id bit forgets that inode's (fm_sec_mode()).  Here each
# is learnt, then made false, and the next request must see the change:
#   1. a create in d (nosgid learnt), chmod g+s of d: the next file takes d's
#      group, the next directory its S_ISGID; chmod g-s: the caller's again
#   2. a file created, written, chowned (probe answered), then setcap: getcap
#      sees the capability, a chmod keeps it, a write by root removes it
#   3. a file created without an access ACL (noacl: a chmod does not look for
#      one), then given one (setfacl): a chmod must make its mask follow
#   4. a directory a file was created in (nodefacl learnt), then given a
#      default ACL (setfacl -d): getfacl -d through a second mountpoint (whose
#      kernel asks the daemon) shows it, and a new file inherits it
# fsck -n clean at the end.  No random data.
need_fuse
need_root "chgrp to another group, setcap"
need setcap getcap setfacl getfacl
G=4242			# a group root is not in
mkdir m m2
trap 'cd /; fusermount3 -uz "$OLDPWD/m2" 2>/dev/null; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B format -q --fs-size=64M a.img
$B fusemount -f a.img m 2>daemon.err & pid=$!
for i in $(seq 100); do mountpoint -q m && break; sleep 0.1; done
mountpoint -q m || fail "not mounted: $(cat daemon.err)"
ulimit -f 100000
my_gid=$(id -g)

# 1. nosgid
mkdir m/d
chgrp $G m/d
: > m/d/a			# reads d: no S_ISGID, remembered
[ "$(stat -c %g m/d/a)" = "$my_gid" ] || fail "d/a: group $(stat -c %g m/d/a), want $my_gid"
: > m/d/a2			# from what was remembered
[ "$(stat -c %g m/d/a2)" = "$my_gid" ] || fail "d/a2: group $(stat -c %g m/d/a2), want $my_gid"
chmod g+s m/d
: > m/d/b
[ "$(stat -c %g m/d/b)" = $G ] || fail "d/b after chmod g+s d: group $(stat -c %g m/d/b), want $G (d's)"
mkdir m/d/sub
case $(stat -c %A m/d/sub) in
??????s???|??????S???) ;;
*) fail "d/sub after chmod g+s d: mode $(stat -c %A m/d/sub), want S_ISGID" ;;
esac
[ "$(stat -c %g m/d/sub)" = $G ] || fail "d/sub: group $(stat -c %g m/d/sub), want $G"
chmod g-s m/d
: > m/d/c
[ "$(stat -c %g m/d/c)" = "$my_gid" ] || fail "d/c after chmod g-s d: group $(stat -c %g m/d/c), want $my_gid"

# 2. nosec and the security.capability probe
head -c 10000 /dev/zero > m/f	# created plain, written
chown 0:0 m/f			# the kernel's probe first
getcap m/f > out 2>&1
[ -s out ] && fail "f has a capability before setcap: $(cat out)"
setcap cap_net_raw+ep m/f || fail "setcap"
getcap m/f > out 2>&1
grep -q cap_net_raw out || fail "getcap after setcap: '$(cat out)', want cap_net_raw"
chmod 0755 m/f
getcap m/f > out 2>&1
grep -q cap_net_raw out || fail "getcap after chmod: '$(cat out)', want cap_net_raw (a chmod keeps it)"
printf x | dd of=m/f bs=1 seek=5 conv=notrunc 2>/dev/null || fail "write"
getcap m/f > out 2>&1
[ -s out ] && fail "f kept its capability across a write: $(cat out)"

# 3. noacl
: > m/g				# no default ACL in /: made without an access ACL
chmod 0640 m/g			# from what was remembered
setfacl -m u:nobody:rw m/g || fail "setfacl"
chmod 0600 m/g			# the mask follows the group bits
getfacl -c m/g > out 2>&1
grep -qx 'mask::---' out || fail "g's ACL after chmod 0600: $(tr '\n' ' ' < out), want mask::---"

# 4. nodefacl, and the ACL getxattrs answered from the held entries
mkdir m/e
: > m/e/x			# e read for its default ACL: none, remembered
expect_rc 0 $B fusemount a.img m2	# a second session of the same daemon
mountpoint -q m2 || fail "second mountpoint"
getfacl -c -d m2/e > out 2>&1
[ -s out ] && fail "e has a default ACL before setfacl -d: $(cat out)"
setfacl -d -m u:nobody:rwx m/e || fail "setfacl -d"
getfacl -c -d m2/e > out 2>&1
grep -q '^user:nobody:rwx' out || fail "getfacl -d e through m2 after setfacl -d: '$(tr '\n' ' ' < out)'"
: > m/e/y
getfacl -c m2/e/y > out 2>&1
grep -q '^user:nobody:' out || fail "e/y did not inherit e's default ACL: '$(tr '\n' ' ' < out)'"
fusermount3 -u m2 || fail "unmount m2"

fusermount3 -u m || fail "unmount"
wait $pid 2>/dev/null
pid=
expect_rc 0 $B fsck -n a.img
expect_in out ' 0 problems found'
