# The replicas table follows the keys (issue 29, item 2): after a degraded
# session healed by `data rereplicate`, the superblock no longer lists the
# one-member sets the session used, so `device offline` of either member
# and `image extract -o degraded` without either one work; fsck -n is
# clean.  An entry no key uses (as a crash before a gc point leaves it)
# is a problem fsck -n counts (exit 4) and -y drops, and it no longer
# refuses a degraded open (the keys are checked); data with no copy left
# is still refused, naming what would be lost.
plain_only "the refusal's wording and sb_replicas.py's superblock edit need plain images"
tree=$ROOT/tests/cli/treetool.py
python3 "$tree" gen src 46 30 || fail "treetool gen"
python3 -c 'import random, sys; r = random.Random(46); sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(700 * 1024 + 3)))' > new.bin
expect_rc 0 $B format -q --replicas=2 --fs-size=128M --source=src d0.img d1.img
cp --sparse=always d0.img d0.orig
cp --sparse=always d1.img d1.orig

# replicas SHOW-SUPER-OUTPUT: the "Replicas:" section, one entry a line
replicas() { sed -n '/^Replicas:/,/^[A-Z]/p' "$1" | sed -n 's/^  *\(journal\|btree\|user\): /\1 /p'; }

# ---- offline: a degraded session (member 1 missing) writes to member 0 alone
mv d1.img d1.away
expect_rc 0 $B image put -o degraded d0.img new.bin /new.bin
mv d1.away d1.img
expect_rc 0 $B show-super d0.img
replicas out > before
grep -q '^user 1/1 \[0\]$' before || fail "the degraded session's set is not in the table: $(cat before)"
# member 1 back (a session with both: its superblock learns of the write);
# not healed yet: without member 0 the new file has no copy, and the open says so
echo small > small.txt
expect_rc 0 $B image put d0.img:d1.img small.txt /small.txt
mv d0.img d0.away
expect_rc 1 $B image extract -o degraded d1.img out.d
expect_in err 'member 0 .* was not given: file data kept only on member 0.* would be lost'
mv d0.away d0.img

# heal; the table then lists only what the keys use
expect_rc 0 $B data rereplicate d0.img d1.img
expect_rc 0 $B show-super d0.img
replicas out > after
grep -Eq '^(user|btree) 1/1 ' after && fail "a one-member set is left after rereplicate: $(cat after)"
expect_rc 0 $B list d0.img:d1.img
# every extent has both copies (one pointer alone would end its line)
expect_not_in out 'comp [0-9]+ ptr [0-9]+:[0-9]+ gen [0-9]+$'
expect_rc 0 $B fsck -n -f d0.img d1.img
expect_in out ' 0 problems found'
expect_not_in out replicas_unused

# either member can go now
for gone in 0 1; do
	here=d$((1 - gone)).img
	mv d$gone.img d$gone.away
	rm -rf out.d && mkdir out.d
	expect_rc 0 $B image extract -o degraded $here out.d
	mv d$gone.away d$gone.img
	cmp out.d/new.bin new.bin || fail "new.bin without member $gone"
	rm out.d/new.bin out.d/small.txt
	python3 "$tree" compare src out.d >cmp.log || fail "extract without member $gone: $(tail -5 cmp.log)"
done

# ---- an entry no key uses (a crash before a gc point): counted, dropped, and
# no refusal for it (the degraded open checks the keys)
for d in d0.img d1.img; do
	python3 "$ROOT/tests/fsck/sb_replicas.py" $d add user 1 || fail "sb_replicas.py"
done
mv d1.img d1.away
rm -rf out.d && mkdir out.d
expect_rc 0 $B image extract -o degraded d0.img out.d
cmp out.d/new.bin new.bin || fail "new.bin with a stale entry"
mv d1.away d1.img
sum0=$(sha d0.img) sum1=$(sha d1.img)
expect_rc 4 $B fsck -n -f d0.img d1.img
expect_in out 'replicas entry user \[1\]: no key uses it'
expect_in out ' 1 problem found'
[ "$(sha d0.img)$(sha d1.img)" = "$sum0$sum1" ] || fail "fsck -n wrote"
expect_rc 1 $B fsck -y -f d0.img d1.img
expect_in out ' 1 problem found, 1 fixed, 0 left'
expect_rc 0 $B fsck -n -f d0.img d1.img
expect_in out ' 0 problems found'

# ---- mounted: offline a member, write, online, rereplicate, offline the other
if fuse_part "device offline/online of a mounted filesystem"; then
	cp --sparse=always d0.orig d0.img
	cp --sparse=always d1.orig d1.img
	mkdir -p mnt
	$B fusemount -f d0.img:d1.img mnt 2>fuse.err & pid=$!
	trap 'cd /; kill $pid 2>/dev/null; fusermount3 -uz "$OLDPWD/mnt" 2>/dev/null' EXIT
	for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
	expect_rc 0 $B device offline mnt d1.img
	cp new.bin mnt/m.bin && sync mnt/m.bin || fail "write with member 1 offline"
	expect_rc 0 $B device online mnt d1.img
	# the only copy of m.bin is on member 0: offline of it is refused, naming that
	expect_rc 1 $B device offline mnt d0.img
	expect_in err 'file data kept only on member 0'
	expect_rc 0 $B data rereplicate mnt
	expect_rc 0 $B device offline mnt d0.img
	expect_in out 'is offline'
	cmp mnt/m.bin new.bin || fail "m.bin with member 0 offline"
	expect_rc 0 $B device online mnt d0.img
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	trap - EXIT
	expect_rc 0 $B show-super d0.img
	replicas out > mounted
	grep -Eq '^(user|btree) 1/1 ' mounted && fail "a one-member set is left after the mounted heal: $(cat mounted)"
	expect_rc 0 $B fsck -n -f d0.img d1.img
	expect_in out ' 0 problems found'
	mv d0.img d0.away
	rm -rf out.d && mkdir out.d
	expect_rc 0 $B image extract -o degraded d1.img out.d
	mv d0.away d0.img
	cmp out.d/m.bin new.bin || fail "m.bin without member 0, after the mounted heal"
	rm out.d/m.bin
	python3 "$tree" compare src out.d >cmp.log || fail "extract after the mounted heal: $(tail -5 cmp.log)"
fi

# ---- one member: a close after a small change trusts the bucket counts
# (no walk of every key) while the member holds user data; when the last
# file goes, the walk runs and the user entry is dropped
expect_rc 0 $B format -q --fs-size=64M s.img
expect_rc 0 $B image put s.img small.txt /a
expect_rc 0 $B image put s.img small.txt /b
expect_rc 0 $B show-super s.img
grep -q '^  user: 1/1 \[0\]$' out || fail "one member with files: no user entry: $(cat out)"
expect_rc 0 $B image rm s.img /a
expect_rc 0 $B show-super s.img
grep -q '^  user: 1/1 \[0\]$' out || fail "one member, a file left: no user entry: $(cat out)"
expect_rc 0 $B image rm s.img /b
expect_rc 0 $B show-super s.img
expect_not_in out '^  user: '
expect_rc 0 $B fsck -n -f s.img
expect_in out ' 0 problems found'
