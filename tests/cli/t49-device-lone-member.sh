# Device commands given a lone member, as bcachefs-tools takes them
# (`device remove /dev/sdX`): no FS operand, the member's superblock names
# the filesystem.  Offline on image files (the other members are the files
# beside it that hold the member UUIDs it lists; as root also on loop
# devices, found among the block devices), then on a fusemount (the
# mount whose devices hold the same filesystem), each of remove, evacuate,
# set-state, set-label, resize, online, offline; the FS-first form still
# works; and how a lone member is told from FS: one operand fewer, a device
# path (an index, UUID, UUID=, a mountpoint or a file of no filesystem are
# refused with the form to use), while FS followed by a word only a member
# can be ("p.img:q.img 0 1") is "too many arguments", not a missing file.
# Data: python's random.Random(49), 2 MiB, compared after every step.
python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(49).randbytes(2 << 20))' > data.bin
echo "seed: 49 (data.bin)"

# mfield IMG IDX FIELD: member IDX's FIELD (State, Label, Size) in show-super IMG
mfield() {
	$B show-super "$1" >ss 2>&1 || fail "show-super $1: $(cat ss)"
	awk -v d="  Device $2:" -v f="$3:" '$0 == d { on = 1; next } /^  Device [0-9]+:/ { on = 0 }
		on && $1 == f { print $2; exit }' ss
}
# same_data IMGS: the file reads back as written
same_data() {
	expect_rc 0 $B image cat "$1" /data.bin
	cmp -s out data.bin || fail "data.bin differs on $1"
}

mk() {
	rm -f a.img b.img c.img
	truncate -s 64M a.img b.img c.img
	expect_rc 0 $B format -q --replicas=2 a.img b.img c.img
	expect_rc 0 $B image put a.img:b.img:c.img data.bin /data.bin
}

# ---- offline: each form on the image files
mk
expect_rc 0 $B device set-label c.img fast
expect_in out 'Member 2 has label fast'
[ "$(mfield a.img 2 Label)" = fast ] || fail "label not set: $(cat ss)"
expect_rc 0 $B device set-state ro c.img
[ "$(mfield a.img 2 State)" = ro ] || fail "state not ro: $(cat ss)"
expect_rc 0 $B device set-state rw c.img
[ "$(mfield a.img 2 State)" = rw ] || fail "state not rw: $(cat ss)"
expect_rc 0 $B device resize c.img 48M
expect_in out 'Member 2 now has 47'
expect_rc 0 $B device evacuate c.img
expect_in out 'Member 2 holds nothing now'
same_data a.img:b.img:c.img
# from another directory, by a relative path
mkdir sub
(cd sub && $B device remove ../c.img >../out 2>../err); rc=$?
[ "$rc" = 0 ] || fail "device remove ../c.img exited $rc: $(cat err)"
expect_in out 'Removed member 2'
same_data a.img:b.img
expect_rc 0 $B fsck -n -f a.img:b.img
# a member a cut remove left behind (its superblock still lists itself; the
# others' newer ones do not): the others are the filesystem, and its own
# superblocks are wiped
mk
mkdir -p keep && cp c.img keep/c.img
expect_rc 0 $B device remove c.img
mv keep/c.img c.img
expect_rc 0 $B device remove c.img
expect_in out 'was removed already; its superblocks are wiped now'
expect_rc 1 $B show-super c.img
expect_rc 0 $B fsck -n -f a.img:b.img
same_data a.img:b.img
# online/offline change what a daemon holds: unmounted, refused
expect_rc 1 $B device offline b.img
expect_in err 'not mounted'
expect_rc 1 $B device online b.img
expect_in err 'not mounted'
# the FS-first form stays
expect_rc 0 $B device set-label a.img:b.img b.img slow
[ "$(mfield a.img 1 Label)" = slow ] || fail "FS-first set-label: $(cat ss)"

# ---- how a lone member is told from FS, and what is refused
mk
s0=$(sha a.img) s1=$(sha b.img) s2=$(sha c.img)
expect_rc 16 $B device remove p.img:q.img 0 1
expect_in err "^bcachefs device remove: too many arguments: '0' is a member, not a device of FS"
expect_not_in err 'No such file'
expect_rc 16 $B device remove a.img:b.img:c.img 0 1
expect_in err "too many arguments: '0'"
# a device of FS that is not there is said as such
expect_rc 1 $B device remove a.img nope.img 1
expect_in err '^bcachefs device remove: nope.img: No such file or directory$' 
expect_rc 16 $B device remove 0
expect_in err "'0': a member index or UUID needs the filesystem"
expect_rc 16 $B device evacuate "$($B show-super c.img | awk '/^    UUID:/ { print $2; exit }')"
expect_in err 'a member index or UUID needs the filesystem'
expect_rc 16 $B device remove UUID=01234567-89ab-cdef-0123-456789abcdef
expect_in err 'too few arguments: .* names a filesystem; give the member too'
expect_rc 16 $B device remove sub
expect_in err 'too few arguments: .* names a filesystem; give the member too'
expect_rc 16 $B device remove a.img:b.img:c.img
expect_in err 'too few arguments: .* names a filesystem; give the member too'
head -c 1M /dev/zero > plain.img
expect_rc 16 $B device remove plain.img
expect_in err 'plain.img: no bcachefs superblock here: name the filesystem first'
expect_rc 1 $B device remove nosuch.img
expect_in err 'nosuch.img: No such file or directory'
expect_rc 16 $B device add new.img
expect_in err 'too few arguments: bcachefs device add FS NEWDEV'
expect_rc 16 $B device set-state c.img
expect_in err "'c.img' is not a state"
expect_rc 16 $B device resize c.img
expect_in err 'too few arguments: bcachefs device resize \[FS\] MEMBER SIZE'
# a member whose others are not beside it: named, with the way out
mkdir alone
cp c.img alone/c.img
expect_rc 1 $B device set-label alone/c.img x
expect_in err 'member 0 .*not found \(looked at the files beside it\): name the filesystem.s devices first'
expect_in err 'member 1 '
[ "$(sha a.img)$(sha b.img)$(sha c.img)" = "$s0$s1$s2" ] || fail "a refusal wrote to the members"
rm -rf alone

# ---- block devices: the other members are looked for among them
if root_part "lone members on loop devices" &&
   l0=$(losetup -f --show a.img 2>/dev/null); then
	l1= l2=
	trap 'losetup -d $l0 $l1 $l2 2>/dev/null' EXIT
	l1=$(losetup -f --show b.img) && l2=$(losetup -f --show c.img) || fail "losetup"
	expect_rc 0 $B device set-label "$l2" loopy
	expect_in out 'Member 2 has label loopy'
	expect_rc 0 $B device set-state ro "$l1"
	expect_in out 'Member 1 is ro'
	expect_rc 0 $B device set-state rw "$l1"
	losetup -d $l0 $l1 $l2
	trap - EXIT
	[ "$(mfield a.img 2 Label)" = loopy ] || fail "label through the loop device: $(cat ss)"
elif [ "$(id -u)" = 0 ]; then
	skip_part "lone members on loop devices: no loop device"
fi

# ---- mounted: the fusemount holding the member's filesystem does the work
fuse_part "lone members on a fusemount" || exit 0
mkdir mnt
cleanup() { fusermount3 -u "$PWD/mnt" 2>/dev/null; }
trap cleanup EXIT
expect_rc 0 $B fusemount a.img:b.img:c.img mnt
cmp -s mnt/data.bin data.bin || fail "data.bin differs on the mount"
expect_rc 0 $B device offline c.img
expect_in out 'is offline'
expect_rc 0 $B device online c.img
expect_in out 'is online'
expect_rc 0 $B device set-state ro c.img
expect_in out 'Member 2 is ro'
expect_rc 0 $B device set-state rw c.img
expect_rc 0 $B device set-label c.img fast
expect_in out 'Member 2 has label fast'
expect_rc 0 $B device resize c.img 48M
expect_in out 'Member 2 now has 47'
# a link to the member names the same filesystem
ln -s c.img link.img
expect_rc 0 $B device evacuate link.img
expect_in out 'Member 2 holds nothing now'
expect_rc 0 $B device remove c.img
expect_in out 'Removed member 2'
cmp -s mnt/data.bin data.bin || fail "data.bin differs on the mount after the remove"
# the FS-first form, mounted
expect_rc 0 $B device set-label mnt b.img slow
expect_in out 'Member 1 has label slow'
fusermount3 -u mnt || fail "unmount"
trap - EXIT
# the daemon closes after the unmount returns: fsck waits for it
expect_rc 0 $B fsck -n -f a.img:b.img
same_data a.img:b.img
