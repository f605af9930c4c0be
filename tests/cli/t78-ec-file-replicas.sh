# erasure coding and a file's own data_replicas (issue 34: "data_replicas=R
# means p = R - 1"): four images, --erasure-code --replicas=2 (stripes of
# p = 1).  A file asking 3 copies keeps its 3 copies through data rebalance
# (striping with p = 1 would lower its fault tolerance to one lost member);
# a file asking 1 copy and a file with the filesystem's value are striped
# (p = 1).  Every file reads back, fsck is clean, and the 3-copy file still
# reads with two of the four images gone (-o very_degraded: the striped
# files cannot).  The same through a
# fusemount, whose background builds the stripes once the writes pause.
need python3
for i in 0 1 2 3; do truncate -s 48M e$i.img; done
E=e0.img:e1.img:e2.img:e3.img
expect_rc 0 $B format -q --erasure-code --replicas=2 e0.img e1.img e2.img e3.img
python3 -c 'import random
r = random.Random(78)
for n in ("r3", "r1", "dflt"):
	open(n, "wb").write(bytes(r.getrandbits(8) for _ in range(1200 * 1024)))'
expect_rc 0 $B image mkdir $E /three
expect_rc 0 $B image setattr $E --data_replicas=3 /three
expect_rc 0 $B image mkdir $E /one
expect_rc 0 $B image setattr $E --data_replicas=1 /one
expect_rc 0 $B image put $E r3 /three/r3
expect_rc 0 $B image put $E r1 /one/r1
expect_rc 0 $B image put $E dflt /dflt
expect_rc 0 $B data rebalance --wait $E

inum() { $B image stat $E "$1" | sed -n 's/^ *Inode: *\([0-9]*\).*/\1/p'; }
# check_layout: /three/r3 three plain copies per extent, the others striped 3+1
check_layout() {
	expect_rc 0 $B list -b extents $E
	cp out extents
	n=$(inum /three/r3)
	[ "$(grep -c "^$n:" extents)" -gt 0 ] || fail "/three/r3 ($n) has no extents"
	grep "^$n:" extents | grep -q ' stripe ' && fail "/three/r3 striped with p = 1: $(grep "^$n:" extents | head -3)"
	grep "^$n:" extents | grep -v ' ptr .* ptr .* ptr ' | grep -q . && fail "/three/r3 lost a copy: $(grep "^$n:" extents | head -3)"
	for f in /one/r1 /dflt; do
		n=$(inum $f)
		[ "$(grep -c "^$n:" extents)" -gt 0 ] || fail "$f ($n) has no extents"
		grep "^$n:" extents | grep -v ' stripe [0-9]*/[0-9]*$' | grep -q . && fail "$f ($n) not all striped:
$(grep "^$n:" extents | head -5)"
	done
	expect_rc 0 $B list -b stripes $E
	grep ' stripe ' out | grep -v ' stripe [0-9]*+1 ' | grep -q . && fail "a stripe without p = 1: $(cat out)"
	for f in three/r3:r3 one/r1:r1 dflt:dflt; do
		$B image cat $E /${f%%:*} | cmp -s - ${f#*:} || fail "/${f%%:*} reads back other data"
	done
	expect_rc 0 $B fsck -n -f $E
	expect_in out ': 0 problems found'
}
check_layout
echo "offline: the 3-copy file kept its copies, the 1-copy and default files striped with p = 1" >&2
# two members gone: the 3-copy file keeps a copy on one of the two left
mkdir gone && mv e2.img e3.img gone/
$B image cat -o very_degraded e0.img:e1.img /three/r3 > r3.out 2>err || fail "degraded read of /three/r3: $(cat err)"
cmp -s r3.out r3 || fail "/three/r3 read degraded differs"
mv gone/e2.img gone/e3.img .

# through the mount: the background stripes what is striped, not /three
need_fuse
for i in 0 1 2 3; do rm -f e$i.img; truncate -s 48M e$i.img; done
expect_rc 0 $B format -q --erasure-code --replicas=2 e0.img e1.img e2.img e3.img
mkdir mnt
trap 'cd /; fusermount3 -uz "$OLDPWD/mnt" 2>/dev/null' EXIT
$B fusemount -f $E mnt 2>fuse.err & fpid=$!
for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
mkdir mnt/three mnt/one
expect_rc 0 $B setattr --data_replicas=3 mnt/three
expect_rc 0 $B setattr --data_replicas=1 mnt/one
cp r3 mnt/three/r3 && cp r1 mnt/one/r1 && cp dflt mnt/dflt || fail "cp into the mount"
expect_rc 0 $B data rebalance --wait mnt
fusermount3 -u mnt || fail "unmount"
wait $fpid || fail "fusemount exited $?: $(cat fuse.err)"
check_layout
echo "mounted: the same" >&2
