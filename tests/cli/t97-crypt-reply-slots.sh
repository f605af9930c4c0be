# An encrypted file read sequentially through the mount is replied from
# the read-ahead's slots (fs_read.h bch_fs_read_run_reply(): the daemon's
# reply is a writev of the header, the slots' plaintext and the pieces in
# its buffer, not a copy into one buffer).  strace of the daemon shows
# replies of more than two iovecs (a reply from one buffer has two: the
# header and the buffer); every byte reads back, with two files read at
# once and reads of an odd size, and after a second file was written
# (space allocated: what was read ahead before is stale, read again).
# Plaintext is kept only in memory the daemon could lock: where mlock()
# is refused (not root, RLIMIT_MEMLOCK) the slots hold ciphertext and
# nothing is replied from them, so the count is not checked there.
need_fuse
need strace
BIN=${BCH_BIN:-$B}	# the binary itself: this test formats encrypted on its own
printf 'passphrase of t97\n' > pass
export BCACHEFS_PASSPHRASE_FILE="$PWD/pass"
expect_rc 0 $BIN format -q --encrypted --passphrase-file pass --fs-size=160M img
head -c 12000000 /dev/urandom > r
head -c 9000000 /dev/urandom > q
head -c 5000000 /dev/urandom > late
mkdir m
spid=
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null; [ -z "$spid" ] || wait "$spid"' EXIT
expect_rc 0 $BIN fusemount "$PWD/img" m
(ulimit -f 100000; cp r m/r && cp q m/q) || fail "cp"
fusermount3 -u m || fail "unmount"

# a fresh mount, traced: every read reaches the daemon
traced_mount writev "$PWD/img" m $BIN
cmp r m/r || fail "sequential read differs"
# two readers at once (the read-ahead follows one of them), one of an odd size
cmp q m/q & c1=$!
dd if=m/r bs=77777 status=none | cmp - r & c2=$!
wait $c1 || fail "q read beside r differs"
wait $c2 || fail "r read in 77777-byte pieces differs"
# space allocated (c->data_reuse_seq moves): r again, from the start
(ulimit -f 100000; cp late m/late) || fail "cp late"
sync -f m/late
dd if=m/r bs=1M status=none | cmp - r || fail "read after a write differs"
cmp late m/late || fail "late differs"
fusermount3 -u m || fail "unmount"
wait "$spid"; spid=

# writev(fd, [{...}, {...}, {...}], 3) = N: a reply of N iovecs
multi=$(sed -n 's/^.*writev(.*\], \([0-9]*\)) = [0-9]*$/\1/p' trace | awk '$1 > 2' | wc -l)
all=$(grep -c 'writev(' trace || true)
echo "replies of more than two iovecs: $multi of $all writev calls"
if [ "$(id -u)" = 0 ] || [ "$(ulimit -l)" = unlimited ]; then
	[ "$multi" -ge 20 ] || fail "$multi replies from the slots: $(grep 'writev(' trace | head -c 1500)"
else
	skip_part "mlock() may be refused here: the count of replies from the slots"
fi
expect_rc 0 $BIN fsck -n img
