# list, list-journal and kv on a real image: keys survive close/reopen, the
# tree grows levels, read-only commands write nothing, damage is reported
expect_rc 0 $B format -q --fs-size=64M --btree-node-size=4k --bucket-size=64k a.img
expect_rc 0 $B show-super a.img
expect_in out 'Clean shutdown: +yes'
expect_in out 'Alloc info current: +yes'
expect_in out 'btree_root test level 0'

# 600 keys, 6 per transaction (a transaction may take a quarter of a node)
for batch in $(seq 0 99); do
	args=
	for i in $(seq 0 5); do
		n=$((batch * 6 + i))
		args="$args 7:$n value-$n-$(printf '%040d' $n)"
	done
	expect_rc 0 $B kv a.img put $args
done
expect_rc 0 $B kv a.img get 7:123
[ "$(cat out)" = "value-123-$(printf '%040d' 123)" ] || fail "get: $(cat out)"
expect_rc 0 $B kv a.img del 7:123 7:124
expect_rc 1 $B kv a.img get 7:123
expect_in err 'no such key'

before=$(sha a.img)
expect_rc 0 $B list -b test a.img
[ "$(wc -l < out)" = 598 ] || fail "list: $(wc -l < out) keys"
expect_in out '^7:0:0 raw len 48 "value-0-'
expect_not_in out '^7:123:0'
expect_rc 0 $B list -b test -s 7:10 -e 7:19 a.img
[ "$(wc -l < out)" = 10 ] || fail "range: $(cat out)"
expect_rc 0 $B list -b test -m nodes a.img
expect_in out '^node level 1 '
expect_in out '^node level 0 '
expect_rc 0 $B list -b test -l 1 a.img
expect_in out 'btree_ptr min'
expect_rc 0 $B list-journal a.img
expect_in out '^entry seq [0-9]+ last_seq'
[ "$(sha a.img)" = "$before" ] || fail "a read-only command wrote to the image"

# usage errors
expect_rc 16 $B list -b nosuch a.img
expect_rc 16 $B list -s garbage a.img
expect_rc 16 $B list -m trees a.img
expect_rc 16 $B list
expect_rc 16 $B kv a.img frob 1:1
expect_rc 16 $B kv a.img put 1:1
expect_rc 16 $B kv a.img get notapos

# a leaf node destroyed: a clear error naming the node, exit 1, no crash
leaf=$($B list -b test -m nodes a.img | sed -n 's/^node level 0 .* ptr 0:\([0-9]*\) .*/\1/p' | head -1)
[ -n "$leaf" ] || fail "no leaf found"
dd if=/dev/zero of=a.img bs=512 seek=$leaf count=8 conv=notrunc status=none
expect_rc 1 $B list -b test a.img
expect_in err 'test btree level 0 node at 0:'"$leaf"
expect_in err 'bad magic'

# deleting every key merges the leaves back into one root leaf
expect_rc 0 $B format -q -f --fs-size=32M --btree-node-size=4k --bucket-size=64k m.img
for batch in $(seq 0 49); do
	args=
	for i in 0 1 2 3 4 5; do args="$args 9:$((batch * 6 + i)) v"; done
	expect_rc 0 $B kv m.img put $args
done
expect_rc 0 $B list -b test -m nodes m.img
expect_in out '^node level 1 '
for batch in $(seq 0 49); do
	args=
	for i in 0 1 2 3 4 5; do args="$args 9:$((batch * 6 + i))"; done
	expect_rc 0 $B kv m.img del $args
done
expect_rc 0 $B list -b test -m nodes m.img
[ "$(wc -l < out)" = 1 ] || fail "tree did not shrink: $(cat out)"
expect_in out '^node level 0 .* keys 0 '
expect_rc 0 $B fsck -n m.img

# list-journal reads the journal without opening the filesystem: after a
# power cut it shows the entries replay will use
expect_rc 0 $B format -q -f --fs-size=32M j.img
expect_rc 0 $B kv --no-clean-close j.img put 3:1 first 3:2 second
expect_rc 0 $B list-journal j.img
expect_in out '3:2:0 raw len 6 "second"'
expect_rc 0 $B show-super j.img
expect_in out 'Clean shutdown: +no'

# bucket state: the alloc btree, written at clean close, agrees with a
# recount from every pointer; after a power cut it is recomputed at open
expect_rc 0 $B format -q -f --fs-size=32M --btree-node-size=4k --bucket-size=64k al.img
for batch in $(seq 0 30); do
	expect_rc 0 $B kv al.img put $batch:1 one $batch:2 two $batch:3 three
done
expect_rc 0 $B kv al.img del 3:1 3:2 3:3 4:1 4:2 4:3
expect_rc 0 $B list -b alloc al.img
expect_in out '^0:[0-9]*:0 alloc gen [0-9]* type 3 dirty [0-9]* cached 0$'
expect_rc 0 $B fsck -f -n al.img
expect_in out '0 problems found'
expect_rc 0 $B kv j.img put 3:3 third
expect_rc 0 $B show-super j.img
expect_in out 'Alloc info current: +yes'
expect_rc 0 $B fsck -f -n j.img
