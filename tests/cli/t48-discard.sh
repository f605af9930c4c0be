# --discard (issue 29, item 8): buckets freed are discarded once the free is
# durable; on an image file that is a punched hole.  After a large file is
# put and removed (each `image` command a session ending in a close), the
# image's allocated blocks shrink with --discard, and not without.  Churn
# with --discard loses nothing: files put, removed and put again read back,
# and fsck finds the filesystem clean (a discard of a bucket still in use
# would show here).
command -v du >/dev/null || skip "no du"
plain_only "sizes differ encrypted, the rule does not"
python3 -c "
import random
r = random.Random(48)
open('big', 'wb').write(r.randbytes(24 << 20))
for i in range(12):
    open('s%d' % i, 'wb').write(r.randbytes(r.randint(1, 3 << 20)))
" || fail "making files"
kib() { du -k "$1" | cut -f1; }

for mode in discard nodiscard; do
	opt=; [ $mode = discard ] && opt=--discard
	expect_rc 0 $B format -q --fs-size=64M $opt $mode.img
	expect_rc 0 $B image put $mode.img big /big
	put=$(kib $mode.img)
	[ "$put" -gt 20000 ] || fail "$mode: image holds only $put KiB after a 24 MiB put"
	expect_rc 0 $B image rm $mode.img /big
	rm_=$(kib $mode.img)
	echo "$mode: $put KiB after the put, $rm_ KiB after the rm"
	if [ $mode = discard ]; then
		[ "$rm_" -lt $((put - 20000)) ] || fail "--discard: $rm_ KiB allocated after the rm (was $put)"
	else
		[ "$rm_" -ge "$put" ] || fail "no --discard: the image shrank ($put -> $rm_ KiB)"
	fi
	expect_rc 0 $B fsck -n -f $mode.img
done

# churn: put, remove every other, put again; every file reads back
for i in 0 1 2 3 4 5 6 7 8 9 10 11; do
	expect_rc 0 $B image put discard.img s$i /s$i
done
for i in 0 2 4 6 8 10; do
	expect_rc 0 $B image rm discard.img /s$i
done
expect_rc 0 $B image put discard.img big /big
for i in 0 2 4; do
	expect_rc 0 $B image put discard.img s$i /s$i
done
mkdir x
expect_rc 0 $B image extract discard.img x
for i in 0 1 2 3 4 5 7 9 11; do
	cmp s$i x/s$i || fail "s$i differs after churn with --discard"
done
cmp big x/big || fail "big differs after churn with --discard"
expect_rc 0 $B fsck -n -f discard.img

# a block device: BLKDISCARD on a loop device, which punches its backing file
if [ "$(id -u)" = 0 ] && command -v losetup >/dev/null; then
	truncate -s 64M lo.img
	if loop=$(losetup -f --show lo.img 2>/dev/null); then
		trap 'losetup -d "$loop"' EXIT
		expect_rc 0 $B format -q -f --discard "$loop"
		expect_rc 0 $B image put "$loop" big /big
		put=$(kib lo.img)
		expect_rc 0 $B image rm "$loop" /big
		rm_=$(kib lo.img)
		echo "loop device: $put KiB after the put, $rm_ KiB after the rm"
		[ "$rm_" -lt $((put - 20000)) ] || fail "--discard on $loop: backing file $rm_ KiB after the rm (was $put)"
		expect_rc 0 $B fsck -n -f "$loop"
	else
		echo "note: no loop device: BLKDISCARD not tested"
	fi
fi
