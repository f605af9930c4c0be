# Subvolumes and snapshots (issue 30), offline through the image verbs and
# the subvolume command, and through a FUSE mount:
#   - a snapshot of / holds the tree as it was; changes after it in either
#     side stay on that side (files rewritten, removed, made; a big file's
#     middle overwritten: both copies compared byte for byte);
#   - snapshots of snapshots; an empty subvolume; list (text and --json);
#   - a read-only snapshot refuses every change (EROFS), nothing written;
#   - delete gives the space back: after deleting every snapshot the used
#     space equals that before the first one (the same files);
#   - fsck -n -f clean once one subvolume is left;
#   - refusals: a source that is not a subvolume, a destination that exists,
#     deleting a directory that is not a subvolume, rmdir of a subvolume,
#     a version-2 filesystem;
#   - the data jobs keep every snapshot's files: rebalance (background
#     compression set on a snapshot's file), device evacuate, rereplicate,
#     scrub on three members;
#   - through fusemount: a file and its snapshot copy have different inode
#     numbers, a link across subvolumes is EXDEV, the snapshot's tree reads
#     back equal; the subvolume commands given paths on the mount (its
#     daemon runs them over the control channel).
need jq cmp zstd

used() { $B fs usage --json "$1" | jq '[.devices[].data_types[]? | select(.type=="user" or .type=="btree") | .bytes] | add // 0'; }
files_used() { $B fs usage --json "$1" | jq '.used'; }

dd if=/dev/urandom of=big bs=1M count=4 status=none
printf 'one\n' > one
printf 'two\n' > two
expect_rc 0 $B format -q --fs-size=256M a.img
expect_rc 0 $B image put a.img one /f
expect_rc 0 $B image mkdir a.img /d
expect_rc 0 $B image put a.img big /d/big
base=$(files_used a.img)

# ---- a snapshot, then changes on both sides
expect_rc 0 $B subvolume snapshot a.img / /s1
expect_rc 0 $B image rm a.img /f
expect_rc 0 $B image put a.img two /f
expect_rc 0 $B image put a.img two /new-in-root
expect_rc 0 $B image put a.img two /s1/new-in-s1
# overwrite 1 MiB in the middle of the root's big file
dd if=/dev/zero of=big.root bs=1M count=4 status=none
cp big big.root
dd if=/dev/urandom of=mid bs=1M count=1 status=none
dd if=mid of=big.root bs=1M seek=1 conv=notrunc status=none
expect_rc 0 $B image rm a.img /d/big
expect_rc 0 $B image put a.img big.root /d/big

expect_rc 0 $B image cat a.img /f;		expect_in out '^two$'
expect_rc 0 $B image cat a.img /s1/f;		expect_in out '^one$'
expect_rc 0 $B image get a.img /d/big got.root;	cmp got.root big.root || fail "root's big file"
expect_rc 0 $B image get a.img /s1/d/big got.s1;	cmp got.s1 big || fail "the snapshot's big file changed"
expect_rc 1 $B image cat a.img /s1/new-in-root
expect_rc 1 $B image cat a.img /new-in-s1
expect_rc 0 $B image cat a.img /s1/new-in-s1;	expect_in out '^two$'

# ---- a snapshot of the snapshot, read-only; an empty subvolume
expect_rc 0 $B subvolume snapshot -r a.img /s1 /s1/ro
expect_rc 0 $B subvolume create a.img /empty
expect_rc 0 $B image ls a.img /empty
[ ! -s out ] || fail "a new subvolume is not empty: $(cat out)"
expect_rc 0 $B image put a.img one /empty/x
expect_rc 0 $B image cat a.img /s1/ro/new-in-s1;	expect_in out '^two$'
before=$(sha a.img)
expect_rc 1 $B image put a.img one /s1/ro/x
expect_in err 'Read-only file system'
expect_rc 1 $B image rm a.img /s1/ro/f
expect_rc 1 $B image mkdir a.img /s1/ro/dir
[ "$(sha a.img)" = "$before" ] || fail "a refused change to a read-only snapshot wrote to the image"

expect_rc 0 $B subvolume list a.img
expect_in out '^1 .* /s1$'
expect_in out ' ro .* /s1/ro$'
expect_rc 0 $B subvolume list -t a.img
expect_in out '^[0-9]+ .*    ro$' && expect_in out ' {4}ro$'
expect_rc 0 $B subvolume list --json a.img
[ "$(jq '.subvolumes | length' out)" = 4 ] || fail "list --json: $(cat out)"
[ "$(jq -r '.subvolumes[] | select(.path=="/s1/ro") | .read_only' out)" = true ] || fail "read_only: $(cat out)"
[ "$(jq -r '.subvolumes[] | select(.path=="/s1/ro") | .parent' out)" = 1 ] || fail "parent: $(cat out)"

# ---- refusals
expect_rc 1 $B subvolume snapshot a.img /d /snapd
expect_in err 'not a subvolume'
expect_rc 1 $B subvolume snapshot a.img / /d
expect_in err 'File exists'
expect_rc 1 $B subvolume delete a.img /d
expect_in err 'not a subvolume'
expect_rc 1 $B subvolume delete a.img /s1
expect_in err 'holds subvolume'
# a filesystem of format version 2 (tests/compat) keeps its version: no subvolumes
v2="$here/../compat/v2/plain.img.zst"
zstd -dq "$v2" -o old.img || fail "unpacking $v2"
before=$(sha old.img)
expect_rc 1 $B subvolume create old.img /x
expect_in err 'version 2; subvolumes and snapshots need version 3'
[ "$(sha old.img)" = "$before" ] || fail "a refused subvolume create wrote to a version-2 image"


# ---- through FUSE: distinct inode numbers, EXDEV across subvolumes
if fuse_part "the mounted part"; then
	mkdir mnt
	mnt=$PWD/mnt
	pid=
	trap 'cd /; [ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
	$B fusemount -f a.img mnt 2>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
	a=$(stat -c %i mnt/d/big) b=$(stat -c %i mnt/s1/d/big)
	[ "$a" != "$b" ] || fail "a file and its snapshot copy share inode number $a"
	cmp mnt/s1/d/big big || fail "the snapshot through FUSE"
	cmp mnt/d/big big.root || fail "the root's big file through FUSE"
	[ "$(find mnt -xdev -type f | wc -l)" -ge 8 ] || fail "find: $(find mnt)"
	! ln mnt/f mnt/s1/linked 2>lnerr || fail "a hard link across subvolumes"
	grep -q 'Invalid cross-device link' lnerr || fail "link across subvolumes: $(cat lnerr)"
	! rmdir mnt/empty 2>rmerr || fail "rmdir of a subvolume"
	grep -q 'Operation not permitted' rmerr || fail "rmdir of a subvolume: $(cat rmerr)"
	echo hello > mnt/s1/via-fuse || fail "write in a snapshot through FUSE"
	! sh -c 'echo no > mnt/s1/ro/via-fuse' 2>roerr || fail "write in a read-only snapshot through FUSE"
	grep -q 'Read-only' roerr || fail "read-only snapshot through FUSE: $(cat roerr)"
	# the commands on the mount (the daemon runs them): paths as btrfs takes them
	echo mounted > mnt/s1/m
	[ ! -e mnt/s1/msnap ] || fail "msnap exists"	# the kernel may keep this negative entry
	expect_rc 0 $B subvolume snapshot mnt/s1 mnt/s1/msnap
	cmp mnt/s1/msnap/m mnt/s1/m || fail "a snapshot made through the mount"
	echo after > mnt/s1/m
	grep -q '^mounted$' mnt/s1/msnap/m || fail "the mounted snapshot changed with its source"
	expect_rc 0 $B subvolume create mnt/d/msub
	[ -d mnt/d/msub ] || fail "a subvolume made through the mount"
	expect_rc 0 $B subvolume list --json mnt
	[ "$(jq -r '.subvolumes[] | select(.path=="/s1/msnap") | .parent' out)" = 1 ] || fail "mounted list: $(cat out)"
	expect_rc 1 $B subvolume snapshot mnt/f mnt/fsnap
	expect_in err 'not a subvolume'
	expect_rc 1 $B subvolume delete mnt/d
	expect_in err 'not a subvolume'
	# a subvolume with a file open in it is not deleted
	sleep 30 < mnt/s1/msnap/m & holder=$!
	# wait until the holder has the file open (a fixed sleep lost that race under load)
	held=$(readlink -f mnt/s1/msnap/m)
	for i in $(seq 100); do [ "$(readlink /proc/$holder/fd/0 2>/dev/null)" = "$held" ] && break; sleep 0.1; done
	[ "$(readlink /proc/$holder/fd/0)" = "$held" ] || fail "the holder never opened msnap/m"
	expect_rc 1 $B subvolume delete mnt/s1/msnap
	expect_in err 'busy'
	kill $holder; wait $holder 2>/dev/null
	# the kernel sends the release after the close returns: until then, busy
	for i in $(seq 100); do run $B subvolume delete mnt/s1/msnap; [ "$rc" = 0 ] && break; sleep 0.1; done
	[ "$rc" = 0 ] || fail "deleting msnap once its file was closed: $(cat err)"
	expect_rc 0 $B subvolume delete mnt/d/msub
	[ ! -e mnt/s1/msnap ] || fail "a deleted subvolume is still seen through the mount"
	expect_rc 0 $B subvolume list mnt
	expect_not_in out 'msnap|msub'
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	pid=
	expect_rc 0 $B image cat a.img /s1/via-fuse;	expect_in out '^hello$'
	expect_rc 1 $B image ls a.img /s1/msnap
fi

# ---- a subvolume's name moves (rename within its parent subvolume)
expect_rc 0 $B image mv a.img /empty /d/moved
expect_rc 0 $B image cat a.img /d/moved/x;	expect_in out '^one$'
expect_rc 1 $B image cat a.img /empty/x
expect_rc 0 $B subvolume list a.img
expect_in out ' /d/moved$'
expect_rc 1 $B image mv a.img /f /d/moved
expect_rc 1 $B image mv a.img /d/moved /s1/moved
expect_in err 'Invalid cross-device link'
expect_rc 0 $B fsck -n -f a.img

# ---- delete everything but /: the space comes back
expect_rc 0 $B subvolume delete a.img /s1/ro
expect_rc 0 $B subvolume delete a.img /s1 /d/moved
expect_rc 0 $B subvolume list --json a.img
[ "$(jq '.subvolumes | length' out)" = 1 ] || fail "after deletes: $(cat out)"
expect_rc 1 $B image cat a.img /s1/f
expect_rc 0 $B image get a.img /d/big got.after;	cmp got.after big.root || fail "root's big file after deletes"
expect_rc 0 $B fsck -n -f a.img
expect_in out '0 problems found'
# the same files written without snapshots
expect_rc 0 $B format -q --fs-size=256M b.img
expect_rc 0 $B image put b.img two /f
expect_rc 0 $B image put b.img two /new-in-root
expect_rc 0 $B image mkdir b.img /d
expect_rc 0 $B image put b.img big.root /d/big
ua=$(files_used a.img) ub=$(files_used b.img)
# metadata rounding: a few nodes
diff=$(( ua > ub ? ua - ub : ub - ua ))
[ "$diff" -le $((2 * 1024 * 1024)) ] || fail "used after deleting every snapshot: $ua, without snapshots $ub (base $base)"

# ---- format --source --subvolume: a base, then a variant of it
mkdir -p tree/d
cp one tree/d/one
expect_rc 0 $B format -q -U 11111111-2222-3333-4444-555555555555 --source tree --subvolume base v.img
expect_rc 0 $B image cat v.img /base/d/one;	expect_in out '^one$'
expect_rc 0 $B subvolume snapshot v.img /base /variant
expect_rc 0 $B image put v.img two /variant/d/two
expect_rc 1 $B image cat v.img /base/d/two
expect_rc 0 $B fsck -n -f v.img
expect_rc 16 $B format -q --subvolume base w.img
expect_in err 'needs --source'
[ ! -e w.img ] || fail "a refused format wrote w.img"
expect_rc 16 $B format -q --source tree --subvolume a/b w.img
[ ! -e w.img ] || fail "a refused format wrote w.img"
# reproducible, as format --source is
SOURCE_DATE_EPOCH=1700000000 $B format -q -U 11111111-2222-3333-4444-555555555555 --source tree --subvolume base r1.img
SOURCE_DATE_EPOCH=1700000000 $B format -q -U 11111111-2222-3333-4444-555555555555 --source tree --subvolume base r2.img
if encrypted; then
	skip_part "format --source --subvolume reproducible: an encrypted format draws a random key"
else
	cmp -s r1.img r2.img || fail "format --source --subvolume is not reproducible"
fi

# image update of the root tree leaves the subvolumes named in it alone
mkdir -p tree2/d
cp one tree2/d/one
cp two tree2/new
expect_rc 0 $B image update v.img tree2
expect_rc 0 $B image ls v.img /
expect_in out '^base$'
expect_in out '^variant$'
expect_rc 0 $B image cat v.img /new;		expect_in out '^two$'
expect_rc 0 $B image cat v.img /variant/d/two;	expect_in out '^two$'
# and a path through a subvolume updates that subvolume's tree only (t67: more)
expect_rc 0 $B image update v.img tree2 /base
expect_rc 0 $B image cat v.img /base/new;	expect_in out '^two$'
expect_rc 0 $B image cat v.img /variant/d/two;	expect_in out '^two$'
expect_rc 1 $B image cat v.img /variant/new

# dump --scramble-names would leave the old names in older snapshots: refused
expect_rc 1 $B dump --scramble-names v.img v.dump
expect_in err 'snapshots is not supported'
[ ! -e v.dump ] || fail "a refused dump wrote v.dump"

# ---- the data jobs over snapshots: every snapshot's files stay whole
dd if=/dev/urandom of=big2 bs=1M count=2 status=none
expect_rc 0 $B format -q --fs-size=128M m0.img --fs-size=128M m1.img --fs-size=128M m2.img
M=m0.img:m1.img:m2.img
expect_rc 0 $B image put $M big /big
expect_rc 0 $B subvolume snapshot $M / /s
expect_rc 0 $B image rm $M /big
expect_rc 0 $B image put $M big2 /big
expect_rc 0 $B image setopt $M background_compression=zstd /s/big
expect_rc 0 $B data rebalance $M
expect_in out 'Pending: +0 off target, 0 not in background_compression'
expect_rc 0 $B list -b extents $M
expect_in out ' comp [1-9]'
expect_rc 0 $B device evacuate $M 0
expect_rc 0 $B data rereplicate $M
expect_rc 0 $B data scrub $M
expect_rc 0 $B image get $M /s/big got.s;	cmp got.s big || fail "the snapshot's file after the data jobs"
expect_rc 0 $B image get $M /big got.r;		cmp got.r big2 || fail "the root's file after the data jobs"
true
