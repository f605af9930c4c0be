# Adversarial review of the device commands (issue 20): each section is a
# finding of the review, reproduced on image files.  Random data from a fixed
# seed (printed); every refusal is checked for its exit code, its message, and
# that it changed nothing it should not have.
SEED=37
echo "seed $SEED"
gen() {	# gen FILE MiB: deterministic content
	python3 -c "import random,sys; r=random.Random($SEED+$2); sys.stdout.buffer.write(r.randbytes($2<<20))" >"$1"
}

# --- 1. a shrink below the minimum is refused BEFORE anything moves --------
# (it used to evacuate the buckets past the new end, writing to the other
# member, and only then say the size was too small)
gen f20 20
expect_rc 0 $B format -q --fs-size=64M r0.img r1.img
expect_rc 0 $B image put r0.img:r1.img f20 /f20
# (an offline command opens the devices read-write, which rewrites the
# superblocks: where the data lies is compared, not the image bytes)
usage() { $B fs usage r0.img:r1.img | grep -v "I/O since open"; }
usage >u0 || fail "fs usage"
expect_rc 1 $B device resize r0.img:r1.img r0.img 3M
expect_in err "member 0 cannot be smaller than"
expect_not_in out "Moved"
usage >u1 || fail "fs usage"
cmp -s u0 u1 || fail "refused resize moved data: $(diff u0 u1)"

# --- 2. remove --force of a PRESENT member never deletes its data ----------
# a.img holds 30M that b.img has no room for; --force skips the space check
# ("accepts fewer copies"), the evacuation gets stuck on no space, and the
# drop used to punch the extents only a.img held (readable ones!), then fail
# on a btree node, leaving /big with 8M of zeroes and fsck errors.
gen big 30
expect_rc 0 $B format -q --fs-size=64M a.img --fs-size=24M b.img
expect_rc 0 $B device set-state ro a.img:b.img b.img
expect_rc 0 $B image put a.img:b.img big /big
expect_rc 0 $B device set-state rw a.img:b.img b.img
expect_rc 1 $B device remove a.img:b.img a.img
expect_in err "more is needed"
expect_rc 1 $B device remove --force a.img:b.img a.img
expect_in err "member 0 is present and holds the only readable copy"
expect_not_in out "Moved"
expect_rc 0 $B image cat a.img:b.img /big
cmp -s out big || fail "remove --force of a present member lost file data"
expect_rc 0 $B fsck -fn a.img:b.img


# --- 3. fewer read-write members than metadata_replicas, accepted by force -
# set-state --force ro left a --replicas=2 filesystem of two members unable to
# write any btree node ("closing: no space left on filesystem", exit 1, the
# updates only in the journal), and remove --force --force-metadata of a
# present member could never finish (its nodes found "no space").
gen f8 8
expect_rc 0 $B format -q --replicas=2 --fs-size=32M c0.img c1.img
expect_rc 0 $B image put c0.img:c1.img f8 /f8
expect_rc 0 $B device set-state --force ro c0.img:c1.img c0.img
expect_rc 0 $B image put c0.img:c1.img f8 /g8
expect_rc 0 $B device remove --force --force-metadata c0.img:c1.img c0.img
expect_rc 0 $B image cat c1.img /f8
cmp -s out f8 || fail "remove --force lost the data of a degraded extent"
expect_rc 0 $B image cat c1.img /g8
cmp -s out f8 || fail "/g8 written with one read-write member reads back wrong"
expect_rc 0 $B fsck -fn c1.img

# --- 4. a lost member is named by its index or UUID -------------------------
# the front made every member operand an absolute path ("$PWD/1"), so a
# missing member (no device to name it by) could not be named at all; and
# remove --force's holes left the inode's sector count wrong (fsck exit 4).
gen f20 20
expect_rc 0 $B format -q --fs-size=32M --metadata-replicas=2 --foreground-target=big \
	--label=a m0.img --label=a m1.img --label=big m2.img
expect_rc 0 $B image put m0.img:m1.img:m2.img f20 /f20
expect_rc 0 $B show-super m2.img
uuid2=$(sed -n 's/^ *UUID: *//p' out | sed -n 3p)
rm m2.img
expect_rc 1 $B device remove -o very_degraded m0.img:m1.img 2
expect_in err "member 2 still holds data.*no readable copy"
expect_not_in err "No such file"
expect_rc 1 $B device evacuate -o very_degraded m0.img:m1.img "$uuid2"
expect_not_in err "No such file"
expect_rc 0 $B device remove --force -o very_degraded m0.img:m1.img 2
expect_in err "had no other copy"
expect_rc 0 $B fsck -fn m0.img:m1.img
expect_rc 0 $B image stat m0.img:m1.img /f20

# --- 5. a removed member that comes back is not taken for its slot's new one -
# member 2 is lost and removed with --force; a new device takes slot 2; the
# old image turns up again.  Opening with it in place of the new member used
# to work silently (its superblock is older, nothing more was checked): reads
# of member 2's data would come from the wrong device, and fsck only offered
# to rewrite its superblock, making the impostor the member.
gen f4 4
expect_rc 0 $B format -q --fs-size=32M --replicas=2 p0.img p1.img p2.img
expect_rc 0 $B image put p0.img:p1.img:p2.img f4 /f4
mv p2.img old2.img
expect_rc 0 $B device remove --force -o degraded p0.img:p1.img 2
truncate -s 32M n2.img
expect_rc 0 $B device add p0.img:p1.img n2.img
expect_in out "as member 2"
h=$(sha old2.img)
expect_rc 1 $B image ls p0.img:p1.img:old2.img /
expect_in err "old2.img: .*member 2.*(removed|no longer)"
run $B fsck -fn p0.img:p1.img:old2.img
[ $((rc & 8)) = 8 ] || fail "fsck with the old member exited $rc, want the operational error bit (8)"
expect_in err "old2.img: was member 2 .*which was removed"
[ "$(sha old2.img)" = "$h" ] || fail "the old member's image was written"
expect_rc 0 $B image ls p0.img:p1.img:n2.img /

# --- 6. rereplicate says so when it could make only some of the copies ------
# --replicas=3 on four members, two lost: each extent has 1 copy and one
# member could take a new one.  The first run made that one and reported
# success (exit 0) with every extent still a copy short; only a rerun said so.
gen f2 2
expect_rc 0 $B format -q --replicas=3 --fs-size=32M q0.img q1.img q2.img q3.img
expect_rc 0 $B image put q0.img:q1.img:q2.img:q3.img f2 /f2
rm q1.img q2.img
expect_rc 1 $B data rereplicate -o degraded q0.img:q3.img
expect_in out "too few devices: [1-9]"
expect_in err "still lack copies"
expect_rc 0 $B image cat -o degraded q0.img:q3.img /f2
cmp -s out f2 || fail "/f2 reads wrong after rereplicate"

# --- 7. a removed member given with the others is named, not ignored ---------
# the power went before the removed member's superblocks were wiped (its copy
# from before the remove stands for that): given with the others it used to
# be accepted and ignored without a word when its index was past the last
# member's; now the open says what it is.
gen f1 1
expect_rc 0 $B format -q --fs-size=32M s0.img s1.img s2.img
expect_rc 0 $B image put s0.img:s1.img:s2.img f1 /f1
cp s2.img s2-before.img
expect_rc 0 $B device remove s0.img:s1.img:s2.img s2.img
cp s2-before.img s2.img
expect_rc 1 $B image ls s0.img:s1.img:s2.img /
expect_in err "s2.img: .*not a member"
expect_rc 0 $B image ls s0.img:s1.img /

# --- 8. --json output stays JSON whatever the device is called -------------
# device add --json printed the path between quotes as it is: a name with a
# quote or a backslash made the object unparsable.
expect_rc 0 $B format -q --fs-size=32M j0.img
truncate -s 32M 'we"ird\name.img'
expect_rc 0 $B device add --json j0.img 'we"ird\name.img'
python3 -c 'import json,sys; o=json.load(open("out")); assert o["device"].endswith("we\"ird\\name.img"), o' \
	|| fail "device add --json is not JSON: $(cat out)"

# --- 9. a label with an empty part is refused ------------------------------
# labels are dot-separated parts (ssd.fast); "a..b" (an empty part, which
# no target can name) was accepted by device add and set-label.
J='j0.img:we"ird\name.img'
expect_rc 1 $B device set-label "$J" 0 'a..b'
expect_in err "label 'a..b'"
expect_rc 0 $B show-super j0.img
expect_not_in out "a\.\.b"
expect_rc 0 $B device set-label "$J" 0 'ssd.fast'

# --- 10. a dotted label set later names its group too, as at format --------
# format --label=ssd.fast also records "ssd" (a target naming the group);
# set-label and add --label recorded only "ssd.fast", so foreground_target=ssd
# was refused ("no label or device 'ssd'").
expect_rc 0 $B device set-label "$J" 1 'fast.nvme'
expect_rc 0 $B set-fs-option --foreground_target=fast "$J"
expect_rc 0 $B show-super j0.img
expect_in out "oreground.target: *fast"

# --- 11. device add cut between two members' superblocks: a rerun finishes ---
# (the cut: a.img has the new member list, b.img still the old one; the copy
# of b.img from before the add stands for that).  The rerun was refused for
# good: "is already member 2 of this filesystem (missing now?)".
gen f1 1
expect_rc 0 $B format -q --fs-size=32M k0.img k1.img
expect_rc 0 $B image put k0.img:k1.img f1 /f1
cp k1.img k1-before.img
truncate -s 32M kn.img
expect_rc 0 $B device add k0.img:k1.img kn.img
cp k1-before.img k1.img
expect_rc 1 $B device add k0.img:k1.img kn.img
expect_in err "member 2 .*not given.*-o degraded"
expect_rc 0 $B device add -o degraded k0.img:k1.img kn.img
expect_in out "as member 2"
expect_rc 0 $B fsck -fn k0.img:k1.img:kn.img
expect_rc 0 $B image cat k0.img:k1.img:kn.img /f1
cmp -s out f1 || fail "/f1 reads wrong after the finished add"

# --- 12. a member index too large is no member, not another one -------------
# bch_dev_lookup() passed strtoul()'s unsigned long to an unsigned: 4294967297
# named member 1 (set-state ro changed it), 4294967296 member 0.
expect_rc 0 $B format -q --fs-size=32M v0.img v1.img
expect_rc 1 $B device set-state ro v0.img:v1.img 4294967297
expect_in err "no member 4294967297"
expect_rc 1 $B device set-label v0.img:v1.img 4294967296 zz
expect_in err "no member 4294967296"
expect_rc 1 $B device remove v0.img:v1.img 99999999999999999999999
expect_in err "no member"
expect_rc 0 $B show-super v0.img
expect_not_in out "State: *ro|Label: *zz"
