# a full filesystem: writes fail with ENOSPC and a clear message, nothing is
# damaged, and space freed by rm is used again
expect_rc 0 $B format -q --fs-size=32M small.img
head -c 50000000 /dev/zero | tr '\0' 'a' > big.bin
expect_rc 1 $B image put small.img big.bin /big
expect_in err 'No space left on device'
expect_rc 0 $B fsck -n small.img
expect_rc 0 $B fs usage --json small.img
expect_rc 0 jq -e '.available == 0' out
expect_rc 0 $B image rm small.img /big
head -c 20000000 big.bin > b20
for i in 1 2 3 4 5 6; do
	expect_rc 0 $B image put small.img b20 /b$i
	expect_rc 0 $B image rm small.img /b$i
done
expect_rc 0 $B image put small.img b20 /final
expect_rc 0 $B image cat small.img /final
cmp -s out b20 || fail "content after reuse"
expect_rc 0 $B fsck -n small.img
