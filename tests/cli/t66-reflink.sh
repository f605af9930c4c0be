# Shared extents (issue 31, reflink): `image cp --reflink` shares a file's
# data instead of copying it: no new data space (fs usage), the copy reads
# back equal, fsck is clean; a plain `image cp` writes the data again.
# Removing one file keeps the other whole; removing the last frees the
# space.  The move paths keep the sharing: device evacuate and remove,
# rereplicate, data rebalance (to a background target) and data scrub move
# or check the shared data once, and both files stay equal and shared.  A
# source in a read-only snapshot is copied.  Refusals: a directory, a
# missing source, a file onto itself.
# Data: python's random.Random with fixed seeds (66, 67), printed below.
need python3
echo "seeds: 66 (big.bin), 67 (odd.bin)"
gen() {
	python3 -c 'import random, sys
a = sys.argv[1:]
for i in range(0, len(a), 3):
	open(a[i], "wb").write(random.Random(int(a[i + 1])).randbytes(int(a[i + 2])))' "$@" ||
		fail "gen $*"
}
# jget KEY: the first value of "KEY" in the JSON in ./out
jget() {
	v=$(grep -o "\"$1\": [^,}]*" out | head -1 | sed 's/^[^:]*: //')
	[ -n "$v" ] || fail "jget $1: $(head -c 1000 out)"
	echo "$v"
}
# user_bytes: live user bytes on every device, from fs usage --json in ./out
user_bytes() {
	grep -o '"user": {"buckets": [0-9]*, "bytes": [0-9]*' out | sed 's/.*bytes": //' |
		awk '{ s += $1 } END { printf "%.0f\n", s }'
}
usage() { expect_rc 0 $B fs usage --json "$1"; }
fsck_clean() {
	expect_rc 0 $B fsck -n -f "$1"
	expect_in out ' 0 problems found'
}
same() { $B image cat "$1" "$2" > got || fail "cat $2"; cmp -s got "$3" || fail "$2 differs from $3"; }

gen big.bin 66 $((8 << 20)) odd.bin 67 1234567
SIZE=$((8 << 20))

# ---- one device: share, copy, remove
expect_rc 0 $B format -q --fs-size=128M a.img
expect_rc 0 $B image put a.img big.bin /big
expect_rc 0 $B image put a.img odd.bin /odd
usage a.img
U0=$(user_bytes)
[ "$(jget reflinked_bytes)" = 0 ] || fail "shared bytes before any reflink"
expect_rc 0 $B image cp --reflink a.img /big /big2
expect_rc 0 $B image mkdir a.img /d
expect_rc 0 $B image cp --reflink a.img /odd /d	# into a directory, under its name
usage a.img
U1=$(user_bytes)
[ "$U1" = "$U0" ] || fail "cp --reflink wrote data: user bytes $U0 -> $U1"
[ "$(jget reflinked_bytes)" -ge $((2 * SIZE + 2 * 1234567)) ] ||
	fail "reflinked_bytes $(jget reflinked_bytes)"
[ "$(jget reflink_saved_bytes)" -ge $((SIZE + 1234567 - 4096)) ] ||
	fail "reflink_saved_bytes $(jget reflink_saved_bytes)"
python3 -c 'import json; json.load(open("out"))' || fail "fs usage --json: not JSON"
same a.img /big2 big.bin
same a.img /d/odd odd.bin
expect_rc 0 $B fs usage a.img
expect_in out '^Shared \(reflink\): '
fsck_clean a.img

# a plain copy writes the data again
expect_rc 0 $B image cp a.img /big /big3
usage a.img
U2=$(user_bytes)
[ "$U2" -ge $((U1 + SIZE)) ] || fail "plain cp: user bytes $U1 -> $U2"
same a.img /big3 big.bin

# remove one sharer: the other stays whole; the last: the space goes
expect_rc 0 $B image rm a.img /big
same a.img /big2 big.bin
usage a.img
[ "$(user_bytes)" = "$U2" ] || fail "rm of one sharer freed data: $U2 -> $(user_bytes)"
fsck_clean a.img
expect_rc 0 $B image rm a.img /big2 /odd /d/odd
usage a.img
[ "$(jget reflink_indirect_extents)" = 0 ] || fail "indirect extents left: $(cat out)"
[ "$(user_bytes)" -le $((U2 - SIZE - 1234567 + 65536)) ] ||
	fail "space not returned: $U2 -> $(user_bytes)"
fsck_clean a.img

# refusals write nothing
before=$(sha a.img)
expect_rc 1 $B image cp --reflink a.img /d /x
expect_in err 'Is a directory'
expect_rc 1 $B image cp --reflink a.img /nonesuch /x
expect_in err 'No such file'
expect_rc 1 $B image cp --reflink a.img /big3 /big3
[ "$(sha a.img)" = "$before" ] || fail "a refused cp changed the image"

# ---- evacuate: the shared data moves once, the files stay shared
expect_rc 0 $B format -q --fs-size=128M c.img --fs-size=128M b.img
D=c.img:b.img
expect_rc 0 $B image put $D big.bin /big
expect_rc 0 $B image cp --reflink $D /big /big2
usage $D
U0=$(user_bytes) N0=$(jget reflink_indirect_extents)
expect_rc 0 $B device evacuate $D c.img
usage $D
[ "$(user_bytes)" = "$U0" ] || fail "evacuate: user bytes $U0 -> $(user_bytes)"
[ "$(jget reflink_indirect_extents)" = "$N0" ] || fail "evacuate: indirect extents $N0 -> $(jget reflink_indirect_extents)"
same $D /big big.bin
same $D /big2 big.bin
fsck_clean $D
expect_rc 0 $B device remove $D c.img
same b.img /big2 big.bin
fsck_clean b.img

# ---- rereplicate: the shared data gets its second copy once
expect_rc 0 $B format -q --fs-size=64M r0.img --fs-size=64M r1.img
D=r0.img:r1.img
expect_rc 0 $B image put $D big.bin /big
expect_rc 0 $B image cp --reflink $D /big /big2
expect_rc 0 $B set-fs-option --data-replicas=2 $D
expect_rc 0 $B data rereplicate $D
usage $D
[ "$(user_bytes)" = $((2 * SIZE)) ] || fail "rereplicate: user bytes $(user_bytes), want $((2 * SIZE))"
[ "$(jget reflinked_bytes)" = $((2 * SIZE)) ] || fail "rereplicate: sharing lost: $(cat out)"
same $D /big2 big.bin
fsck_clean $D

# ---- rebalance to a background target, and scrub: once for both files
expect_rc 0 $B format -q --fs-size=64M --label=ssd ssd.img --fs-size=128M --label=hdd hdd.img \
	--foreground-target=ssd --background-target=hdd
D=ssd.img:hdd.img
expect_rc 0 $B image put $D big.bin /big
expect_rc 0 $B image cp --reflink $D /big /big2
expect_rc 0 $B data rebalance $D
usage $D
devs=$(grep -o '"user": {"buckets": [0-9]*, "bytes": [0-9]*' out | sed 's/.*bytes": //' | tr '\n' ' ')
set -- $devs
[ "$1" = 0 ] && [ "$2" -ge "$SIZE" ] && [ "$2" -lt $((2 * SIZE)) ] ||
	fail "rebalance: user bytes per device $devs (want all on hdd, once)"
[ "$(jget reflinked_bytes)" = $((2 * SIZE)) ] || fail "rebalance: sharing lost: $(cat out)"
same $D /big big.bin
same $D /big2 big.bin
expect_rc 0 $B data scrub $D
expect_in out 'bad copies +0'
fsck_clean $D

# ---- a source in a read-only snapshot, not shared yet: its extents cannot
# become indirect there, so the data is copied (as copy_file_range would)
expect_rc 0 $B format -q --fs-size=64M s.img
expect_rc 0 $B image put s.img odd.bin /odd
expect_rc 0 $B image subvolume-snapshot -r s.img / /ro
expect_rc 0 $B image cp --reflink s.img /ro/odd /copy
same s.img /copy odd.bin
same s.img /ro/odd odd.bin
fsck_clean s.img

# ---- through the mount: cp uses copy_file_range, which shares whole blocks
# (no new data, the copy equal); a write to the copy leaves the original;
# an unaligned range is copied; an immutable destination refuses
if fuse_part "copy_file_range through the mount"; then
	need cmp
	gen cfr.bin 68 3000001
	expect_rc 0 $B format -q --fs-size=64M f.img
	mkdir mnt
	mnt=$PWD/mnt
	pid=
	trap 'cd /; [ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
	$B fusemount -f f.img mnt 2>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && break; sleep 0.1; done
	mountpoint -q mnt || fail "fusemount: $(cat fuse.err)"
	cp cfr.bin mnt/a || fail "cp into the mount"
	sync -f mnt
	expect_rc 0 $B fs usage --json mnt
	before=$(user_bytes)
	cp mnt/a mnt/b || fail "cp inside the mount"
	cmp mnt/a mnt/b || fail "the copy through copy_file_range differs"
	expect_rc 0 $B fs usage --json mnt
	[ "$(jget reflinked_bytes)" -gt 0 ] || fail "cp inside the mount shared nothing: $(cat out)"
	after=$(user_bytes)
	[ $((after - before)) -le 4096 ] ||
		fail "cp inside the mount wrote data: $before user bytes before, $after after"
	printf 'X' | dd of=mnt/b bs=1 seek=12345 conv=notrunc status=none
	cmp -s mnt/a cfr.bin || fail "a write to the copy changed the original"
	cmp -s mnt/a mnt/b && fail "the write to the copy did not land"
	python3 -c 'import os, sys
i = os.open(sys.argv[1], os.O_RDONLY); o = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
n = os.copy_file_range(i, o, 100001, 7, 3)
assert n == 100001, n' mnt/a mnt/c || fail "an unaligned copy_file_range"
	cmp -n 100001 -i 7:3 mnt/a mnt/c || fail "the unaligned range differs"
	chattr +i mnt/b || fail "chattr +i"
	python3 -c 'import os, sys
i = os.open(sys.argv[1], os.O_RDONLY)
try:
    o = os.open(sys.argv[2], os.O_WRONLY)
except PermissionError:
    sys.exit(0)
sys.exit("an immutable file opened for writing")' mnt/a mnt/b || fail "immutable destination"
	chattr -i mnt/b
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	pid=
	expect_rc 0 $B fsck -n -f f.img
fi
