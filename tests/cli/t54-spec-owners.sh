# format --source / image import-tar without root: --all-root, --uid-map,
# --gid-map, --timestamp and --spec (mksquashfs pseudo-file lines): every
# kind, checked as root sees the image; every malformed line refused with its
# line number, exit 16, the image untouched
[ "$(id -u)" = 0 ] || skip "needs root to drop to an unprivileged user"
command -v setpriv >/dev/null || skip "no setpriv"
plain_only "owners and specs do not depend on encryption"
need jq

# the unprivileged user (65534) works in w/, which it owns
chmod 711 .
mkdir w && chown 65534:65534 w
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
nrun() { ( cd w && as_nobody "$@" ) >out 2>err; rc=$?; }
nexpect_rc() {
	want=$1; shift
	nrun "$@"
	[ "$rc" = "$want" ] || fail "(as 65534) '$*' exited $rc, want $want
--- stdout:
$(head -c 2000 out)
--- stderr:
$(head -c 2000 err)"
}
# the line of `image ls -l` for NAME in directory DIR of image IMG
lsl() { $B image ls -l "w/$1" "$2" | awk -v n="$3" '$NF == n || $(NF-2) == n'; }

as_nobody mkdir -p w/src/etc w/src/bin
as_nobody sh -c 'echo hi > w/src/etc/hosts; echo x > w/src/bin/sh; ln w/src/bin/sh w/src/bin/ash'
as_nobody sh -c 'cat > w/spec' <<'SPEC'
# every kind this implements, with names and numbers
/dev d 755 0 0
/dev/null c 666 root root 1 3
dev/sda B 1000 660 0 6 8 0
/dev/fifo i 600 0 0 f
/dev/sock I 1234 600 0 0 s
"/dev/with space" D 2000 700 42 43
/bin/sh m 4755 0 0
/etc/hosts M 3000 640 7 8
/bin/busybox s 777 0 0 sh
/bin/link l bin/sh
/bin/sh x security.capability=0x0100000200100000000000000000000000000000
/etc/hosts x security.selinux=system_u:object_r:etc_t:s0
/etc/hosts x user.t=0thello
/ m 755 0 0
SPEC

# --- format --source, unprivileged
nexpect_rc 0 $B format --fs-size=64M --source=src --uid-map=+1000 --gid-map=65534:100 \
	--spec=spec a.img
expect_in out '^Spec: +8 created, 3 modified, 3 xattrs from spec'
# the same counts in --json, and no text line in it
nexpect_rc 0 $B format --json --fs-size=64M --source=src --uid-map=+1000 --gid-map=65534:100 \
	--spec=spec aj.img
jq -e '.spec == {"file": "spec", "entries": 14, "created": 8, "modified": 3, "xattrs": 3}' out \
	>/dev/null || fail "format --json spec: $(cat out)"
lsl a.img / etc | grep -Eq '^drwx.* 66534 +100 ' || fail "etc not mapped: $(lsl a.img / etc)"
lsl a.img / etc >/dev/null
[ "$(lsl a.img /dev null | awk '{print $1, $3, $4, $5, $6}')" = "crw-rw-rw- 0 0 1, 3" ] ||
	fail "null: $(lsl a.img /dev null)"
[ "$(lsl a.img /dev sda | awk '{print $1, $3, $4, $5, $6}')" = "brw-rw---- 0 6 8, 0" ] ||
	fail "sda: $(lsl a.img /dev sda)"
lsl a.img /dev fifo | grep -Eq '^prw------- +1 +0 +0 ' || fail "fifo: $(lsl a.img /dev fifo)"
lsl a.img /dev sock | grep -Eq '^srw------- +1 +0 +0 ' || fail "sock: $(lsl a.img /dev sock)"
lsl a.img /bin sh | grep -Eq '^-rwsr-xr-x +3 +0 +0 ' || fail "sh: $(lsl a.img /bin sh)"
lsl a.img /bin link | grep -Eq '^-rwsr-xr-x +3 +0 +0 ' || fail "link: $(lsl a.img /bin link)"
lsl a.img /bin busybox | grep -Eq '^lrwxrwxrwx +1 +0 +0 .*busybox -> sh$' || fail "busybox"
lsl a.img /etc hosts | grep -Eq '^-rw-r----- +1 +7 +8 ' || fail "hosts: $(lsl a.img /etc hosts)"
expect_rc 0 $B image stat w/a.img /dev/sda
expect_in out 'Modify: 1970-01-01 00:16:40\.0'
expect_rc 0 $B image stat w/a.img "/dev/with space"
expect_in out 'Uid: 42 +Gid: 43'
expect_in out 'Modify: 1970-01-01 00:33:20\.0'
expect_rc 0 $B image stat w/a.img /etc/hosts
expect_in out 'Modify: 1970-01-01 00:50:00\.0'
expect_rc 0 $B image getfattr w/a.img /bin/sh /etc/hosts
expect_in out '^security\.capability=0x0100000200100000000000000000000000000000$'
expect_in out '^security\.selinux="system_u:object_r:etc_t:s0"$'
expect_in out '^user\.t="hello"$'
# as root sees it: extracted as root, the nodes and owners are real
expect_rc 0 $B image extract w/a.img x
[ "$(stat -c '%F %t:%T %u:%g %a' x/dev/null)" = "character special file 1:3 0:0 666" ] ||
	fail "extracted null: $(stat -c '%F %t:%T %u:%g %a' x/dev/null)"
[ "$(stat -c '%F %u:%g %a' x/dev/sda)" = "block special file 0:6 660" ] || fail "extracted sda"
[ "$(stat -c '%F %u:%g %a' x/dev/fifo)" = "fifo 0:0 600" ] || fail "extracted fifo"
[ "$(stat -c '%u:%g %a %h' x/bin/sh)" = "0:0 4755 3" ] || fail "extracted sh: $(stat -c '%u:%g %a %h' x/bin/sh)"
[ "$(stat -c '%u:%g' x/etc)" = "66534:100" ] || fail "extracted etc: $(stat -c '%u:%g' x/etc)"
expect_rc 0 $B fsck -n w/a.img

# reproducible: the same input, -U and SOURCE_DATE_EPOCH give the same bytes
U=$(cat /proc/sys/kernel/random/uuid)
for i in 1 2; do
	nexpect_rc 0 env SOURCE_DATE_EPOCH=1700000000 $B format -q -U $U --fs-size=64M \
		--source=src --all-root --spec=spec r$i.img
done
[ "$(sha w/r1.img)" = "$(sha w/r2.img)" ] || fail "format --spec is not reproducible"

# --all-root after the maps; --timestamp for every file; tables and @FILE
nexpect_rc 0 $B format -q --fs-size=64M --source=src --uid-map=+1000 --all-root \
	--timestamp=86400 b.img
expect_rc 0 $B image ls -lR w/b.img /
expect_not_in out '^[-dl][rwxs-]{9} +[0-9]+ +[1-9]'
expect_in out '1970-01-02 00:00 hosts'
echo '65534:500' | as_nobody sh -c 'cat > w/map'
nexpect_rc 0 $B format -q --fs-size=64M --source=src --uid-map=@map --gid-map=1:2,65530:600:10 c.img
lsl c.img /etc hosts | grep -Eq ' 500 +604 ' || fail "table maps: $(lsl c.img /etc hosts)"

# --- import-tar: the tar's recorded owners, not the caller's; maps; spec
tar --owner=1234 --group=5678 --numeric-owner -C w/src -cf w/t.tar etc bin
chmod 644 w/t.tar
nexpect_rc 0 $B format -q --fs-size=64M d.img
nexpect_rc 0 $B image import-tar d.img t.tar
lsl d.img /etc hosts | grep -Eq ' 1234 +5678 ' || fail "tar owners: $(lsl d.img /etc hosts)"
# into a directory: the spec's paths are under it
nexpect_rc 0 $B image mkdir d.img /sub
nexpect_rc 0 $B image import-tar --json --uid-map=1234:0 --gid-map=+1 --spec=spec d.img t.tar /sub
jq -e '.tar == "t.tar" and .path == "/sub" and .spec.created == 8 and .spec.modified == 3 and
	.spec.xattrs == 3' out >/dev/null || fail "import-tar --json spec: $(cat out)"
lsl d.img /sub/etc hosts | grep -Eq '^-rw-r----- +1 +7 +8 ' || fail "tar spec: $(lsl d.img /sub/etc hosts)"
lsl d.img /sub/bin ash | grep -Eq '^-rwsr-xr-x +3 +0 +0 ' || fail "tar spec m: $(lsl d.img /sub/bin ash)"
lsl d.img /sub etc | grep -Eq ' 0 +5679 ' || fail "tar maps: $(lsl d.img /sub etc)"
lsl d.img /sub/dev null | grep -Eq '^crw-rw-rw- +1 +0 +0 +1, +3 ' || fail "tar spec null"
expect_rc 0 $B image getfattr w/d.img /sub/bin/sh
expect_in out '^security\.capability=0x01000002'
expect_rc 0 $B fsck -n w/d.img
nexpect_rc 0 $B format -q --fs-size=64M e.img
nexpect_rc 0 $B image import-tar e.img --all-root t.tar
lsl e.img /bin sh | grep -Eq ' 0 +0 ' || fail "tar --all-root: $(lsl e.img /bin sh)"

# --- bad input: exit 16 with FILE:LINE, nothing written
before=$(sha w/a.img)
tbefore=$(sha w/d.img)
n=0
while IFS= read -r bad; do
	n=$((n + 1))
	why=${bad#*|}; line=${bad%%|*}
	printf '/ok d 755 0 0\n# a comment\n%s\n/ok2 d 755 0 0\n' "$line" | as_nobody sh -c 'cat > w/bad'
	nexpect_rc 16 $B format -f --fs-size=64M --source=src --spec=bad a.img
	expect_in err "^bcachefs format: bad:3: $why"
	[ "$(sha w/a.img)" = "$before" ] || fail "format with '$line' wrote the image"
	nexpect_rc 16 $B image import-tar d.img --spec=bad t.tar
	expect_in err "^bcachefs image import-tar: bad:3: $why"
	[ "$(sha w/d.img)" = "$tbefore" ] || fail "import-tar with '$line' wrote the image"
done <<'BAD'
a z 755 0 0|unknown kind 'z'
a dd 755 0 0|unknown kind 'dd'
a d 999 0 0|bad mode '999'
a d 17777 0 0|bad mode '17777'
a d rwx 0 0|bad mode 'rwx'
a d 755 no-such-user 0|unknown user 'no-such-user'
a d 755 0 no-such-group|unknown group 'no-such-group'
a d 755 0x1 0|bad uid '0x1'
a d 755 0 99999999999|bad gid '99999999999'
../x d 755 0 0|path '\.\./x' leaves the tree
/a/../../x d 755 0 0|path 'a/\.\./\.\./x' leaves the tree
a//b d 755 0 0|path 'a//b' has an empty component
a d 755 0|gid missing
a d|mode missing
a|kind missing
a d 755 0 0 extra|unexpected 'extra' at the end
a c 666 0 0 1|minor missing
a c 666 0 0 5000 1|bad major '5000'
a b 666 0 0 8 x|bad minor 'x'
a i 600 0 0 q|'q': i takes s \(socket\) or f \(fifo\)
a s 777 0 0|symlink target missing
a l ../b|path '\.\./b' leaves the tree
a l|link target missing
a x user.a|'user\.a' is not NAME=VALUE
a x nonamespace=1|xattr name 'nonamespace' has no namespace
a x user.a=0xZZ|xattr value '0xZZ': not hex
a x user.a=0x123|xattr value '0x123': an even number of hex digits
a x user.a=0sAAAA|xattr value '0sAAAA': base64 \(0s\) is not supported
a D yesterday 755 0 0|bad time 'yesterday'
/ c 666 0 0 1 3|kind 'c' cannot name the root
a f 644 0 0 echo hi|kind 'f' \(a file from a command\) is not supported
a F 1 644 0 0 echo hi|kind 'F' \(a file from a command\) is not supported
a R 1 644 0 0 10 0 f|kind 'R' \(a file from a reference\) is not supported
a L b|kind 'L' \(a link to a pseudo file\) is not supported
BAD
echo "checked $n malformed lines"

# a missing spec file, bad maps and options: 16 before anything is written
nexpect_rc 16 $B format -f --fs-size=64M --source=src --spec=nofile a.img
expect_in err 'spec nofile: No such file or directory'
for m in abc +x 1:2:0 1: 5:6,x '+4294967295'; do
	nexpect_rc 16 $B format -f --fs-size=64M --source=src --uid-map="$m" a.img
	expect_in err "^bcachefs format: --uid-map: '.*' is not"
done
printf '1:2\nbad\n' | as_nobody sh -c 'cat > w/badmap'
nexpect_rc 16 $B format -f --fs-size=64M --source=src --gid-map=@badmap a.img
expect_in err '^bcachefs format: --gid-map: badmap:2: '"'bad'"' is not FROM:TO'
nexpect_rc 16 $B format -f --fs-size=64M --source=src --timestamp=-1 a.img
nexpect_rc 16 $B format -f --fs-size=64M --all-root a.img
expect_in err 'need --source'
nexpect_rc 16 $B image import-tar d.img --uid-map=zz t.tar
[ "$(sha w/a.img)" = "$before" ] || fail "a refused format wrote the image"
[ "$(sha w/d.img)" = "$tbefore" ] || fail "a refused import-tar wrote the image"

# an owner mapped below 0 and a spec line that does not fit the tree: exit 1, named
nexpect_rc 1 $B format -f -q --fs-size=64M --source=src --uid-map=-70000 f.img
expect_in err 'mapping the owner of src.*(Numerical result out of range|out of range)'
printf '/nope/x m 755 0 0\n' | as_nobody sh -c 'cat > w/late'
nexpect_rc 1 $B format -f -q --fs-size=64M --source=src --spec=late f.img
expect_in err '^bcachefs format: late:1: nope/x: looking up its directory: No such file or directory'
printf '/etc m 755 0 0\n/etc/hosts d 755 0 0\n' | as_nobody sh -c 'cat > w/late'
nexpect_rc 1 $B format -f -q --fs-size=64M --source=src --spec=late f.img
expect_in err '^bcachefs format: late:2: etc/hosts: making a directory: File exists'
# a line never leaves the tree through a symlink of the image
as_nobody sh -c 'mkdir -p w/src2/etc && ln -s / w/src2/up && ln -s .. w/src2/etc/back'
for line in 'up/etc m 700 0 0' 'etc/back/x d 755 0 0' 'x l up/etc'; do
	printf '%s\n' "$line" | as_nobody sh -c 'cat > w/late'
	nexpect_rc 1 $B format -f -q --fs-size=64M --source=src2 --spec=late f.img
	expect_in err '^bcachefs format: late:1: .*Too many levels of symbolic links'
done

# documented
expect_rc 0 $B format --help
expect_in out -- '--spec=FILE'
expect_in out -- '--uid-map=MAP'
expect_rc 0 $B image --help
expect_in out 'import-tar .*--spec'
expect_rc 0 $B image import-tar --help
expect_in err -- '--uid-map=MAP'
expect_in err -- '--all-root'
