# Moving data keeps what snapshots share (issue 30).  An overwrite in a
# snapshot leaves the pieces of the ancestor's extent around it as keys of
# their own, pointing at the same encoded extent; the move path moves such a
# group once and points every member at the one new copy:
#   - device evacuate of a file whose every extent was overwritten in the
#     middle after a snapshot: the buckets used after are no more than
#     before (a move key by key wrote the shared data twice: 46 buckets
#     where 34 hold it), and the moved bytes are the data's, not twice;
#   - rebalance re-encoding (background_compression) of shared extents: the
#     whole encoded extent once, every member on it;
#   - both the snapshot's file and the live one read back byte for byte,
#     fsck clean;
#   - a member lost with the only copy of a snapshot's file (device remove
#     --force -o very_degraded): the file becomes a hole in that snapshot
#     (before, the hole was punched in subvolume 0's view, which does not
#     see the key: the pointer to the removed member stayed), its size
#     kept, its sectors counted off; fsck clean.
need jq cmp
fuse_part "overwrites through the mount" || exit 0

user_buckets() { $B fs usage --json "$1" | jq '[.devices[].user.buckets] | add'; }
# distinct encoded extents (pointer lists) the file's keys point at
distinct_ptrs() { $B list -b extents "$1" | sed -n 's/.* ptr //p' | sort -u | wc -l; }

dd if=/dev/urandom of=big bs=1M count=8 status=none
expect_rc 0 $B format -q --fs-size=128M m0.img --fs-size=128M m1.img
M=m0.img:m1.img
expect_rc 0 $B image put $M big /big
expect_rc 0 $B subvolume snapshot $M / /s

# overwrite 4 KiB in the middle of every 128 KiB of the live file
mkdir mnt
mnt=$PWD/mnt
pid=
trap 'cd /; [ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
$B fusemount -f $M mnt 2>fuse.err & pid=$!
for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
cp big live
for i in $(seq 0 63); do
	dd if=/dev/zero of=mnt/big bs=4k count=1 seek=$((i * 32 + 16)) conv=notrunc status=none
	dd if=/dev/zero of=live bs=4k count=1 seek=$((i * 32 + 16)) conv=notrunc status=none
done
fusermount3 -u mnt || fail "unmount"
wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
pid=

before=$(user_buckets $M)
shared_before=$(distinct_ptrs $M)
expect_rc 0 $B device evacuate $M 0
after=$(user_buckets $M)
[ "$after" -le "$before" ] ||
	fail "evacuate unshared the snapshot's data: $before user buckets before, $after after"
[ "$(distinct_ptrs $M)" -le "$shared_before" ] ||
	fail "evacuate: $shared_before encoded extents before, $(distinct_ptrs $M) after"
expect_rc 0 $B image get $M /s/big got.s;	cmp got.s big || fail "the snapshot's file after evacuate"
expect_rc 0 $B image get $M /big got.l;		cmp got.l live || fail "the live file after evacuate"

# rebalance re-encodes each shared extent once (members keep their offsets)
expect_rc 0 $B device set-state rw $M 0
expect_rc 0 $B image setopt $M background_compression=zstd /big
expect_rc 0 $B image setopt $M background_compression=zstd /s/big
expect_rc 0 $B data rebalance $M
expect_rc 0 $B list -b extents $M
expect_in out ' comp [1-9]'
[ "$(distinct_ptrs $M)" -le "$shared_before" ] ||
	fail "rebalance unshared: $shared_before encoded extents before, $(distinct_ptrs $M) after"
expect_rc 0 $B image get $M /s/big got2.s;	cmp got2.s big || fail "the snapshot's file after rebalance"
expect_rc 0 $B image get $M /big got2.l;		cmp got2.l live || fail "the live file after rebalance"
expect_rc 0 $B fsck -n -f $M

# ---- a lost member: data of a snapshot with no other copy becomes a hole in
# that snapshot (not in subvolume 0's view), its sectors counted off
dd if=/dev/urandom of=lost bs=1M count=1 status=none
expect_rc 0 $B format -q --metadata-replicas=2 --fs-size=64M l0.img --fs-size=64M l1.img
L=l0.img:l1.img
expect_rc 0 $B device set-state --force ro $L 0
expect_rc 0 $B image put $L lost /in-root
expect_rc 0 $B device set-state rw $L 0
expect_rc 0 $B subvolume snapshot $L / /s
expect_rc 0 $B device set-state ro $L 1
expect_rc 0 $B image put $L lost /s/only-on-0
expect_rc 0 $B device set-state rw $L 1
# nodes written while member 1 was read-only have one copy (encrypted, a node
# read from disk is rewritten elsewhere: crypt.h); their second copies first
expect_rc 0 $B data rereplicate $L
rm l0.img
expect_rc 0 $B device remove --force --force-metadata -o very_degraded l1.img 0
expect_in err "had no other copy"
expect_rc 0 $B fsck -fn l1.img
expect_rc 0 $B image stat --json l1.img /s/only-on-0
jq -e '.files[0].size == 1048576 and .files[0].allocated == 0' out >/dev/null ||
	fail "the lost file: its size kept, nothing allocated: $(cat out)"
expect_rc 0 $B image cat l1.img /in-root
cmp -s out lost || fail "subvolume 0's copy on the member left"
