# degraded opens: a --replicas=2 filesystem with one member gone is reached
# with -o degraded (image extract, fsck, fusemount, writes read-write), with
# either member missing; without the option the refusal names the member;
# -o very_degraded opens what has no copy left, and reads of it fail.
need python3
tree=$ROOT/tests/cli/treetool.py
python3 "$tree" gen src 21 50 || fail "treetool gen"
# one file over 1 MiB, deterministic (seed 21)
python3 -c 'import random, sys; r = random.Random(21); sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(1536 * 1024 + 100)))' > src/big.bin
python3 -c 'import random, sys; r = random.Random(22); sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(2 * 1024 * 1024 + 7)))' > new.bin
expect_rc 0 $B format -q --replicas=2 --fs-size=256M --source=src d0.img d1.img
cp --sparse=always d0.img d0.orig
cp --sparse=always d1.img d1.orig

# the fusemount steps: skipped (and counted) only without /dev/fuse
fuse=false
fuse_part "fusemount -o degraded (ro and rw)" && fuse=true

for gone in 1 0; do
	here=d$((1 - gone)).img
	cp --sparse=always d0.orig d0.img
	cp --sparse=always d1.orig d1.img
	rm d$gone.img
	sum=$(sha $here)

	# without the option: refused, naming the member and the way out
	expect_rc 1 $B image ls $here /
	expect_in err "member $gone \(uuid [0-9a-f-]+\) was not given.*-o degraded"
	expect_rc 8 $B fsck -n $here
	expect_in err "member $gone \(uuid [0-9a-f-]+\) was not given"

	# read-only degraded: every file byte-identical, nothing written
	expect_rc 0 $B image ls -o degraded,read_only $here /
	expect_in err "image ls: $here: member $gone \(uuid [0-9a-f-]+\) missing: opened degraded \(read-only\)"
	expect_in out big.bin
	rm -rf out.d && mkdir out.d
	expect_rc 0 $B image extract -o degraded $here out.d
	expect_not_in err 'damaged copies'
	python3 "$tree" compare src out.d >cmp.log || fail "extract with member $gone missing: $(tail -5 cmp.log)"
	cmp src/big.bin out.d/big.bin || fail "big.bin differs"
	expect_rc 0 $B fsck -n -f -o degraded $here
	expect_in err "fsck: $here: member $gone .* missing: opened degraded"
	expect_in out '0 problems found'
	expect_rc 0 $B fsck -n -f --degraded $here
	[ "$(sha $here)" = "$sum" ] || fail "a read-only degraded open wrote to $here"

	# FUSE, degraded: every file reachable
	if $fuse; then
		mkdir -p mnt
		$B fusemount -f -o degraded,ro $here mnt 2>fuse.err & pid=$!
		trap 'cd /; kill $pid 2>/dev/null; fusermount3 -uz "$PWD/mnt" 2>/dev/null' EXIT
		for i in $(seq 50); do mountpoint -q mnt && break; sleep 0.1; done
		mountpoint -q mnt || fail "fusemount -o degraded: $(cat fuse.err)"
		python3 "$tree" compare src mnt >cmp.log || fail "through FUSE: $(tail -5 cmp.log)"
		fusermount3 -u mnt || fail "unmount"
		wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
		trap - EXIT
		expect_in fuse.err "fusemount: (.*/)?$here: member $gone .* missing: opened degraded"
	fi

	# read-write degraded: new data goes to the present device only
	expect_rc 0 $B image put -o degraded $here new.bin /new.bin
	expect_in err "member $gone .* missing: opened degraded$"
	expect_rc 0 $B image cat -o degraded $here /new.bin
	cmp out new.bin || fail "new.bin read back (member $gone missing)"
	expect_rc 0 $B fsck -n -f -o degraded $here
	expect_in out '0 problems found'
	if $fuse; then
		$B fusemount -f -o degraded $here mnt 2>fuse.err & pid=$!
		trap 'cd /; kill $pid 2>/dev/null; fusermount3 -uz "$PWD/mnt" 2>/dev/null' EXIT
		for i in $(seq 50); do mountpoint -q mnt && break; sleep 0.1; done
		mountpoint -q mnt || fail "fusemount -o degraded (rw): $(cat fuse.err)"
		cp new.bin mnt/fuse.bin && sync mnt/fuse.bin || fail "write through FUSE"
		cmp mnt/fuse.bin new.bin || fail "fuse.bin read back"
		fusermount3 -u mnt || fail "unmount"
		wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
		trap - EXIT
		expect_rc 0 $B image cat -o degraded $here /fuse.bin
		cmp out new.bin || fail "fuse.bin read back after unmount"
	fi
	rm -rf out.d && mkdir out.d
	expect_rc 0 $B image extract -o degraded $here out.d
	cmp out.d/new.bin new.bin || fail "new.bin extracted"
	rm -f out.d/new.bin out.d/fuse.bin
	python3 "$tree" compare src out.d >cmp.log || fail "extract after writing: $(tail -5 cmp.log)"
	expect_rc 0 $B fsck -n -f -o degraded $here
	expect_in out '0 problems found'

	# the member comes back untouched; both open, fsck -y settles the
	# superblock and the alloc keys of what moved off it, then all is clean
	cp --sparse=always d$gone.orig d$gone.img
	cmp d$gone.img d$gone.orig || fail "copy"
	expect_rc 0 $B image cat d0.img:d1.img /new.bin
	cmp out new.bin || fail "new.bin with both members"
	run $B fsck -y -f d0.img d1.img
	[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "fsck -y with member $gone back exited $rc: $(cat out err)"
	expect_not_in out 'extent_ptr|btree_node|data_unreadable'
	expect_rc 0 $B fsck -n -f d0.img d1.img
	expect_in out '0 problems found'
done

# very_degraded: file data only on the missing member (data_replicas=1,
# foreground_target on it), metadata on both
expect_rc 0 $B format -q --fs-size=64M --metadata-replicas=2 --data-replicas=1 \
	--foreground-target=slow --label=fast e0.img --label=slow e1.img
printf 'small\n' > s.txt
expect_rc 0 $B image put e0.img:e1.img s.txt /s.txt
rm e1.img
expect_rc 1 $B image ls -o degraded e0.img /
expect_in err 'member 1 \(label slow, uuid [0-9a-f-]+\) was not given: file data .* -o very_degraded'
expect_rc 0 $B image ls -o very_degraded e0.img /
expect_in out 's.txt'
expect_in err 'missing: opened very_degraded \(read-only\)'
expect_rc 1 $B image cat -o very_degraded e0.img /s.txt
expect_in err 'Input/output error|no good copy'
expect_rc 4 $B fsck -n -f -o very_degraded e0.img
expect_in out 'extent_no_copy +1 found, 0 fixed'
expect_rc 16 $B fsck -y -f -o very_degraded e0.img
expect_in err 'use it with -n'
expect_rc 16 $B fsck -n -o nosuchopt e0.img
