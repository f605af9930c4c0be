# Reads outside the engine lock (issue 32; io.h, fs_read.h): through the
# mount, files of every read shape (plain, lz4-compressed, a hole, a tail
# not a block long, a reflinked copy, unaligned O_DIRECT reads) read back
# their bytes, and fs timestats shows the reads ran outside the lock with
# none redone.  Then the first copy of one file is damaged on a 2-copy
# filesystem: its read is redone under the lock, which reads the second
# copy and counts the bad one (device stats: one checksum error on
# the first member for each read redone, none on the second), as the
# locked path alone counts it.
need_fuse
need python3
mkdir m
head -c 3000000 /dev/urandom > r
awk 'BEGIN { for (i = 0; i < 60000; i++) printf "line %07d of a compressible file\n", i }' > z
printf 'short tail' > s
expect_rc 0 $B format -q --fs-size=64M --replicas=2 a.img --fs-size=64M b.img
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B fusemount "$PWD/a.img:$PWD/b.img" m
cp r m/r && cp s m/s && cp r m/d || fail "cp"
touch m/z && expect_rc 0 $B setattr --compression=lz4 m/z
cp z m/z || fail "cp z"
dd if=r of=m/h bs=64k seek=40 count=3 conv=notrunc status=none || fail "dd h"
fusermount3 -u m || fail "unmount"
expect_rc 0 $B image cp --reflink a.img:b.img /r /rr

# a fresh mount: nothing in the kernel's cache, every read reaches the daemon
expect_rc 0 $B fusemount "$PWD/a.img:$PWD/b.img" m
cmp r m/r && cmp z m/z && cmp s m/s && cmp r m/rr && cmp r m/d || fail "read back differs"
{ head -c $((40 * 65536)) /dev/zero; head -c $((3 * 65536)) r; } | cmp - m/h || fail "holes"
dd if=m/r of=part bs=4096 skip=37 count=9 iflag=direct status=none || fail "O_DIRECT read"
dd if=r bs=4096 skip=37 count=9 status=none | cmp - part || fail "O_DIRECT read differs"
dd if=z of=want bs=1000 skip=7 count=33 status=none
dd if=m/z bs=1000 skip=7 count=33 status=none | cmp - want || fail "unaligned read differs"
expect_rc 0 $B fs timestats --json m
python3 - <<'PY' || fail "timestats: $(cat out)"
import json
j = json.load(open("out"))
assert j["reads_unlocked"] >= 10 and j["reads_redone"] == 0, j
PY
fusermount3 -u m || fail "unmount"

# damage the first copy of d's first extent: the read is redone locked
ino=$($B image stat --json a.img:b.img /d | sed -n 's/.*"inode": \([0-9]*\),.*/\1/p')
[ -n "$ino" ] || fail "no inode for d"
expect_rc 0 $B list -b extents a.img:b.img
sec=$(sed -n "s/^$ino:[0-9]*:0 extent .* ptr 0:\([0-9]*\) .*/\1/p" out | head -1)
[ -n "$sec" ] || fail "no extent on member 0 for d (inode $ino): $(head -c 2000 out)"
printf '\377\000\377\000' | dd of=a.img bs=1 seek=$((sec * 512 + 1000)) conv=notrunc status=none
expect_rc 0 $B fusemount "$PWD/a.img:$PWD/b.img" m
cmp r m/d || fail "damaged first copy: read differs"
expect_rc 0 $B fs timestats --json m
redone=$(python3 -c 'import json; print(json.load(open("out"))["reads_redone"])')
[ "$redone" -ge 1 ] || fail "no read redone after the damage: $(cat out)"
# each redone read met the bad copy once, on the locked path: counted there alone
expect_rc 0 $B device stats m
expect_in out "^\[.*a\.img\]\.checksum_errors $redone\$"
expect_in out '^\[.*b\.img\]\.checksum_errors 0$'
fusermount3 -u m || fail "unmount"
expect_rc 0 $B fsck -n a.img:b.img
