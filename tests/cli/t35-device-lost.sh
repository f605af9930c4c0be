# device commands offline (issue 20), continued: a lost member of a
# --replicas=2 filesystem (refused without -o degraded, read degraded, then
# device add + data rereplicate, device remove, device remove --force), and
# Ctrl-C in the middle of device evacuate / device remove, then a rerun;
# a lost member with the only copy of btree nodes: refused, and why.
# Deterministic: treetool.py seed 35, random files from fixed seeds.
tree=$ROOT/tests/cli/treetool.py
python3 "$tree" gen src 35 40 || fail "treetool gen"
python3 -c 'import random, sys; r = random.Random(35); sys.stdout.buffer.write(r.randbytes(2 * 1024 * 1024 + 5))' > src/big.bin
python3 -c 'import sys; sys.stdout.buffer.write(b"".join(b"row %07d of a compressible file\n" % i for i in range(60000)))' > src/text.txt

# extracted ./got must hold the same tree as src (contents, modes, times, links)
same() {
	python3 "$tree" compare src got > cmp.log || fail "$1: $(tail -5 cmp.log)"
}
extract() {
	rm -rf got && mkdir got
	expect_rc 0 $B image extract "$@" got
}
# how many extents (./out of `list -b extents`) have N pointers
nptrs() { awk -v n="$1" '/ extent /{ c = 0; for (i = 1; i <= NF; i++) if ($i == "ptr") c++; if (c == n) k++ } END { print k + 0 }' out; }

expect_rc 0 $B format -q --replicas=2 --fs-size=64M --source=src d0.img d1.img d2.img
for i in 0 1 2; do cp --sparse=always d$i.img o$i.img; done
restore() { for i in 0 1 2; do cp --sparse=always o$i.img d$i.img; done; }

# 1. d1 is lost
rm d1.img
F=d0.img:d2.img
s0=$(sha d0.img) s2=$(sha d2.img)
for cmd in "image ls" "device add" "data rereplicate" "device remove" "device evacuate"; do
	case $cmd in
	"image ls") args="$F /" ;;	# (messages say "bcachefs image:")
	"device add") truncate -s 64M d3.img; args="$F d3.img" ;;
	"data rereplicate") args="$F" ;;
	*) args="$F 1" ;;
	esac
	expect_rc 1 $B $cmd $args
	expect_in err "^bcachefs ${cmd% ls}: member 1 \(uuid [0-9a-f-]+\) was not given: .*-o degraded"
done
[ "$(sha d0.img)$(sha d2.img)" = "$s0$s2" ] || fail "a refused open wrote to the members"
[ "$(sha d3.img)" = "$(sha /dev/null)" ] || [ -z "$(tr -d '\0' < d3.img | head -c 1)" ] || fail "a refused device add wrote to d3.img"

# degraded reads give every file
extract -o degraded $F
expect_in err 'member 1 \(uuid [0-9a-f-]+\) missing: opened degraded'
same "degraded extract"

# 2. device add + data rereplicate restore two copies on the 3 present members
expect_rc 0 $B device add -o degraded $F d3.img
expect_in err "device add: $F: member 1 .* missing: opened degraded"
F=$F:d3.img
expect_rc 0 $B data rereplicate -o degraded $F
expect_in out '^Copied [0-9.]+[kM] \([1-9][0-9]* extents, [0-9]+ btree nodes\)'
expect_rc 0 $B fsck -fn -o degraded $F
expect_in out ' 0 problems found'
# proof of two copies: lose d0 too; d2 + d3 still hold everything
# (-o very_degraded: with two of four members gone the open cannot tell
# from the superblock that every key has a copy left)
extract -o very_degraded d2.img:d3.img
expect_not_in err 'damaged|I/O error'
same "read from d2 and d3 only, after rereplicate"
# then the lost member's remove just drops it; every extent has 2 pointers
expect_rc 0 $B device remove -o degraded $F 1
expect_in out '^Removed member 1 \(it was missing\)$'
expect_rc 0 $B list -b extents $F
[ "$(nptrs 1)" = 0 ] && [ "$(nptrs 2)" -gt 0 ] || fail "after rereplicate + remove: $(nptrs 1) extents with 1 copy, $(nptrs 2) with 2"
expect_not_in out ' ptr 1:'
expect_rc 0 $B fsck -fn $F
expect_in out ' 0 problems found'
extract $F
same "after the lost member's removal"

# 3. without rereplicate: device remove (copies re-made from the others)
restore; rm d1.img
F=d0.img:d2.img
expect_rc 0 $B device remove -o degraded $F 1
expect_in out '^Removed member 1 \(it was missing\)$'
expect_rc 0 $B list -b extents $F
[ "$(nptrs 1)" = 0 ] || fail "device remove of a lost member left $(nptrs 1) extents with one copy"
expect_rc 0 $B fsck -fn $F
expect_in out ' 0 problems found'
extract $F
same "device remove of a lost member"

# ... and with --force (no rereplicate first either): the same, nothing lost
restore; rm d1.img
expect_rc 0 $B device remove --force -o degraded $F 1
expect_in out '^Removed member 1 \(it was missing\)$'
expect_not_in err 'had no other copy'
expect_rc 0 $B fsck -fn $F
expect_in out ' 0 problems found'
extract $F
same "device remove --force of a lost member"

# 4. on 2 members two copies cannot be kept: refused (naming the way out)
# without --force, and without --force-metadata; done with both, nothing lost
expect_rc 0 $B format -q --replicas=2 --fs-size=64M --source=src e0.img e1.img
rm e1.img
cp e0.img e0.orig
s=$(sha e0.img)
expect_rc 1 $B device remove -o degraded e0.img 1
expect_in err '^bcachefs device remove: metadata_replicas=2 needs 2 read-write members besides member 1; there is 1: --force-metadata'
[ "$(sha e0.img)" = "$s" ] || fail "a refused device remove wrote to e0.img"
cp e0.orig e0.img
expect_rc 1 $B device remove --force -o degraded e0.img 1
expect_in err 'there is 1: --force-metadata'
cp e0.orig e0.img
expect_rc 0 $B device remove --force --force-metadata --json -o degraded e0.img 1
[ "$(wc -l < out)" = 1 ] || fail "remove --force --json: not one JSON object: $(cat out)"
jq -e '.removed == 1 and .was_missing == true and .lost_bytes == 0' out > /dev/null || fail "remove --force --json: $(cat out)"
expect_rc 0 $B fsck -fn e0.img
expect_in out ' 0 problems found'
extract e0.img
same "device remove --force --force-metadata"
expect_rc 0 $B show-super e0.img
expect_not_in out '^  Device 1:'

# 5. Ctrl-C in the middle of device evacuate, then of device remove: the
# command says so and exits 1, a rerun completes, every file intact.
# BCACHEFS_TEST_DEVICE_DELAY (blockdev.h) makes member 0 slow: 30 ms a
# request, a few seconds for the whole member.
python3 -c 'import random, sys; r = random.Random(39); sys.stdout.buffer.write(r.randbytes(24 << 20))' > src/r24.bin
expect_rc 0 $B format -q --replicas=2 --fs-size=64M --source=src g0.img g1.img g2.img
for i in 0 1 2; do cp --sparse=always g$i.img h$i.img; done
F=g0.img:g1.img:g2.img
# interrupt CMD...: run CMD with member 0 slowed, SIGINT after 2 s
interrupt() {
	BCACHEFS_TEST_DEVICE_DELAY=$PWD/g0.img=30000 "$@" > out 2> err & pid=$!
	sleep 2
	kill -INT $pid
	wait $pid; rc=$?
	[ $rc = 1 ] || fail "'$*' after SIGINT exited $rc, want 1: $(cat out err)"
	expect_in out '^Interrupted: run the same command again to go on\.$'
	cat out
}
on0() { $B list -b extents $F > out || fail "list"; grep -c ' ptr 0:' out; }
total=$(on0)
interrupt $B device evacuate $F g0.img
left=$(on0)
echo "device evacuate interrupted: $left of $total extents still on member 0"
[ "$left" -gt 0 ] || fail "device evacuate finished before SIGINT: slow member 0 more"
expect_rc 0 $B fsck -fn $F
expect_in out ' 0 problems found'
expect_rc 0 $B device evacuate $F g0.img
expect_in out '^Member 0 holds nothing now'
[ "$(on0)" = 0 ] || fail "extents left on member 0 after the rerun"
expect_rc 0 $B fsck -fn $F
expect_in out ' 0 problems found'
extract $F
same "device evacuate interrupted and run again"

for i in 0 1 2; do cp --sparse=always h$i.img g$i.img; done
interrupt $B device remove $F g0.img
left=$(on0)
echo "device remove interrupted: $left of $total extents still on member 0"
[ "$left" -gt 0 ] || fail "device remove finished before SIGINT: slow member 0 more"
expect_rc 0 $B show-super g1.img
expect_in out '^  Device 0:'                    # still a member
expect_rc 0 $B device remove $F g0.img
expect_in out '^Removed member 0$'
F=g1.img:g2.img
expect_rc 0 $B list -b extents $F
expect_not_in out ' ptr 0:'
expect_rc 0 $B fsck -fn $F
expect_in out ' 0 problems found'
extract $F
same "device remove interrupted and run again"

# 6. refusals: message, exit code, and nothing written.  Refused before the
# open (usage, names): every image byte-identical.  Refused after it:
# (a command that may refuse checks on a read-only open first: nothing is
# written, every image byte-identical)
imgs() { ls *.img; }
# (cksum: a write shows as a changed CRC; sha256 of every image for each of
# these refusals took most of this test's time)
shas() { for f in $(imgs); do printf '%s %s\n' "$f" "$(cksum < "$f")"; done; }
# the logical state of FS: every key, every node, each member's superblock
logical() {
	$B list "$1" || return 1
	$B list -m nodes "$1" || return 1
	for d in $(echo "$1" | tr : ' '); do
		$B show-super "$d" | grep -vE '^(Sequence number|Last write):|Last mount:|Journal seq:|valid, seq' || return 1
	done
}
# refused RC PATTERN CMD...: exit RC, PATTERN in stderr, nothing written.
# The logical state of $R is cached in logical.cur (a refusal leaves it as
# it was, which is checked); `R=...` for another filesystem, and `changed`
# after a command that did change it.
changed() { rm -f logical.cur; }
refused() {
	want=$1 pat=$2; shift 2
	[ -f logical.cur ] && [ "$(cat logical.fs)" = "$R" ] || {
		logical "$R" > logical.cur || fail "logical state of $R"
		echo "$R" > logical.fs
	}
	shas > sha.before
	expect_rc "$want" "$@"
	expect_in err "$pat"
	shas > sha.after
	cmp -s sha.before sha.after && return
	fail "refused '$*' wrote: $(diff sha.before sha.after | head -10)"
}
rm -f *.img
expect_rc 0 $B format -q --replicas=2 --fs-size=32M r0.img r1.img
expect_rc 0 $B format -q --fs-size=32M other.img
expect_rc 0 $B image put r0.img:r1.img src/big.bin /big
R=r0.img:r1.img; changed

# adding a member of another filesystem, without -f
refused 1 '^bcachefs device add: .*other\.img: holds another bcachefs filesystem; -f to overwrite it$' \
	$B device add $R other.img
# an existing member, by its path or through a symlink
refused 1 'r1\.img: is already member 1 of this filesystem$' $B device add $R r1.img
ln -s r1.img link.lnk
refused 1 'is already member 1 of this filesystem$' $B device add $R link.lnk
# the same device twice: the second add finds it a member
truncate -s 32M n.img
expect_rc 0 $B device add $R n.img
R=$R:n.img; changed
refused 1 'n\.img: is already member 2 of this filesystem$' $B device add $R n.img
# the same device named twice in FS
refused 1 'r0\.img: device 0 given twice' $B device add r0.img:r1.img:n.img:r0.img other.img
# a device smaller than the minimum
truncate -s 1M small.img
refused 1 'small\.img: device too small \(1M\); with 256k buckets it needs at least [0-9.]+M$' \
	$B device add $R small.img
# member names that do not exist: a path, an index, a UUID
refused 1 '^bcachefs device remove: nope\.img: No such file or directory' $B device remove $R nope.img
refused 1 '^bcachefs device remove: there is no member 7$' $B device remove $R 7
refused 1 '^bcachefs device remove: no member has UUID 00000000-0000-0000-0000-000000000000$' \
	$B device remove $R 00000000-0000-0000-0000-000000000000
refused 1 'there is no member 9$' $B device set-label $R 9 x
refused 1 'there is no member 9$' $B device resize $R 9 40M
# shrinking below the minimum
expect_rc 0 $B list -b extents $R
[ "$(grep -c ' ptr 0:' out)" -gt 0 ] || fail "member 0 holds nothing"
# refused before anything moves (checked on a copy: the list must not change)
mkdir -p cp && cp --sparse=always r0.img r1.img n.img cp/
(cd cp && expect_rc 1 $B device resize r0.img:r1.img:n.img 0 8M &&
	expect_in err 'member 0 cannot be smaller than [0-9.]+M \(its superblocks, journal and 64 buckets\)$') || exit 1
(cd cp && $B list -b extents r0.img:r1.img:n.img) > cp.list
$B list -b extents $R | cmp -s - cp.list ||
	fail "device resize below the minimum moved extents before refusing"
rm -rf cp
# with -f the other filesystem's device is taken
expect_rc 0 $B device add -f $R other.img
expect_in out '^Added .*other\.img as member 3 '
expect_rc 0 $B fsck -fn $R:other.img
expect_in out ' 0 problems found'
# removing the last member; set-state of the last read-write member
rm -f r0.img r1.img n.img other.img small.img	# (fewer images to hash)
expect_rc 0 $B format -q --fs-size=32M single.img
R=single.img; changed
refused 1 '^bcachefs device remove: member 0 is the last member: nothing would be left' \
	$B device remove single.img 0
refused 1 '^bcachefs device evacuate: member 0 is the last member' $B device evacuate single.img 0
refused 1 'member 0 is the last read-write member for metadata: nothing could be written; --force' \
	$B device set-state ro single.img 0
refused 1 'the last read-write member' $B device set-state spare single.img 0
# replicas=2 on 2 members: neither may go, nor turn read-only
rm single.img
expect_rc 0 $B format -q --replicas=2 --fs-size=32M p0.img p1.img
R=p0.img:p1.img; changed
# (two copies of metadata fit on one member of a version-2 filesystem:
# the file data's copies are what is refused; with no file data, remove
# goes, and member 0 keeps two copies of every node)
refused 1 'without member 0, 1 read-write member could hold file data, which asks for 2 copies; --force' \
	$B device set-state ro $R 0
cp p0.img p0.orig; cp p1.img p1.orig
expect_rc 0 $B device remove $R 1
expect_rc 0 $B list -m nodes p0.img
grep ' ptr ' out | awk '{ n = 0; for (i = 1; i <= NF; i++) if ($i == "ptr") n++; if (n != 2) bad = 1 } END { exit bad }' ||
	fail "remove of the second member: a node without two copies: $(grep ' ptr ' out | head -3)"
mv p0.orig p0.img; mv p1.orig p1.img
# with both forces it goes: metadata and data keep one copy, on member 0
cp p0.img p0.orig; cp p1.img p1.orig
expect_rc 0 $B device remove --force --force-metadata $R 1
expect_rc 0 $B fsck -fn p0.img
expect_in out ' 0 problems found'
mv p0.orig p0.img; mv p1.orig p1.img
# removing when the others cannot hold the data: 3 members of 32M nearly full
rm p0.img p1.img
expect_rc 0 $B format -q --fs-size=32M q0.img q1.img q2.img
R=q0.img:q1.img:q2.img; changed
python3 -c 'import random, sys; r = random.Random(40); sys.stdout.buffer.write(r.randbytes(36 << 20))' > r36.bin
python3 -c 'import random, sys; r = random.Random(41); sys.stdout.buffer.write(r.randbytes(20 << 20))' > r20.bin
expect_rc 0 $B image put $R r36.bin /a
expect_rc 0 $B image put $R r20.bin /b
expect_rc 0 $B image put $R r20.bin /c
refused 1 '^bcachefs device remove: member 0 holds [0-9.]+M; the other read-write members have [0-9.]+M free: [0-9.]+M more is needed \(add a device or delete files first\)$' \
	$B device remove $R 0
refused 1 'more is needed' $B device evacuate $R 0
# usage errors: 16, before anything is opened (small images: less to hash)
rm q0.img q1.img q2.img
expect_rc 0 $B format -q --fs-size=20M q0.img q1.img q2.img
R=q0.img:q1.img:q2.img; changed
refused 16 'Usage: bcachefs device' $B device
refused 16 "unknown subcommand 'bogus'" $B device bogus $R
refused 16 'too few arguments' $B device add $R
refused 16 'too few arguments' $B device remove $R
refused 16 "unknown option '--bogus'" $B device remove --bogus $R 0
refused 16 'option --label does not apply here' $B device remove --label=x $R 0
refused 16 '--durability 9: a number 0..4' $B device add --durability=9 $R x.img
refused 16 'give a member and its new size' $B device resize $R 0 12Q
refused 16 "'nope' is not a state: rw, ro, failed or spare" $B device set-state nope $R 0
refused 16 'too few arguments' $B device set-label $R 0
refused 16 '-o nosuch: unknown option' $B device evacuate -o nosuch $R 0
refused 16 'too few arguments' $B data rereplicate
refused 16 "unknown option" $B data rereplicate --bogus $R
# a mountpoint that is not ours: a plain directory
mkdir plain
for c in "device add plain x.img" "device remove plain 0" "device evacuate plain 0" \
	 "device resize plain 0 1G" "data rereplicate plain"; do
	refused 1 "^bcachefs ${c%% plain*}: plain: not a bcachefs mount" $B $c
done
[ ! -e x.img ] || fail "a refused command created x.img"

# a lost member that held the only copy of btree nodes (one metadata copy):
# --force --force-metadata still refuses, saying no copy is on a member here
expect_rc 0 $B format -q --metadata-replicas=1 --fs-size=64M m0.img --fs-size=64M m1.img
expect_rc 0 $B image put m0.img:m1.img src/big.bin /big
rm m0.img
expect_rc 1 $B device remove --force --force-metadata -o very_degraded m1.img 0
expect_in err "btree level [0-9]+ node at 0:[0-9]+: device 0 missing \(no copy of this node on a member present\)"
