# erasure coding (--erasure-code, issue 34): six images with --replicas=3
# and erasure coding, filled from a tree; data rebalance --wait gathers the
# replicated extents into RS(4,2) stripes (feature bit erasure_code, keys in
# the stripes btree, nothing left to stripe), using at most 0.55x the space
# of the same tree with replicas=3; every file reads back byte-identical, and
# still does with any two of the six images gone (-o degraded: the open
# counts what the stripes can rebuild; three gone are refused) and with a
# data block on two members overwritten by garbage; fsck is clean after the build.  Too few members
# for k + p: the data stays replicated and data rebalance says why (exit 2).
need python3
tree=$ROOT/tests/cli/treetool.py
python3 "$tree" gen src 69 60 || fail "treetool gen"
python3 -c 'import random, sys; r = random.Random(69); sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(3 * 1024 * 1024 + 11)))' > src/big.bin

imgs() { for i in 0 1 2 3 4 5; do printf '%s%s%d.img' "$([ $i = 0 ] || echo :)" "$1" $i; done; }
user_bytes() {	# user data space over every member, from fs usage --json
	$B fs usage --json "$1" | python3 -c 'import json, sys; print(sum(d["user"]["space"] for d in json.load(sys.stdin)["devices"]))'
}

# the same tree with replicas=3, for the space figure
for i in 0 1 2 3 4 5; do truncate -s 96M r$i.img; done
expect_rc 0 $B format -q --replicas=3 --source=src $(imgs r | tr : ' ')
rep=$(user_bytes "$(imgs r)")

for i in 0 1 2 3 4 5; do truncate -s 96M e$i.img; done
expect_rc 0 $B format -q --erasure-code --replicas=3 --source=src $(imgs e | tr : ' ')
E=$(imgs e)
expect_rc 0 $B show-super e0.img
expect_in out 'erasure_code: +yes'
expect_not_in out 'Features: .*erasure_code'	# no stripe yet: the bit comes with the first
expect_rc 0 $B data rebalance --wait --json "$E"
python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["done"] and d["pending"]["stripe"] == 0 and d["extents_moved"] > 0 else 1)' ||
	fail "rebalance did not stripe everything: $(cat out)"
expect_rc 0 $B show-super e0.img
expect_in out 'Features: .*erasure_code'
expect_rc 0 $B list -b stripes "$E"
expect_in out 'stripe 4\+2 block'
nstripes=$(grep -c ' stripe 4+2 ' out)
[ "$nstripes" -ge 3 ] || fail "only $nstripes stripes"
expect_rc 0 $B list -b extents "$E"
expect_not_in out 'ptr [0-9]+:[0-9]+ gen [0-9]+ ptr '	# one (striped) pointer per extent
ec=$(user_bytes "$E")
python3 -c "import sys; sys.exit(0 if $ec <= 0.55 * $rep else 1)" ||
	fail "striped data takes $ec bytes, replicas=3 $rep (more than 0.55x)"
echo "space: erasure-coded $ec bytes, replicas=3 $rep bytes" >&2

check_tree() {	# what: every file of src byte-identical in the filesystem $2 (open options $1)
	rm -rf out.d && mkdir out.d
	expect_rc 0 $B image extract ${1:+-o $1} "$2" out.d
	python3 "$tree" compare src out.d >cmp.log || fail "$3: $(tail -5 cmp.log)"
	cmp -s src/big.bin out.d/big.bin || fail "$3: big.bin differs"
}
check_tree "" "$E" "healthy"
expect_rc 0 $B fsck -n -f "$E"
expect_in out ': 0 problems found'

# any two members gone (three pairs): rebuilt from the other four
for pair in "0 1" "2 5" "3 4"; do
	set -- $pair
	mkdir -p gone && mv e$1.img e$2.img gone/
	here=$(imgs e | tr : '\n' | grep -v -e "e$1.img" -e "e$2.img" | paste -sd:)
	check_tree degraded,read_only "$here" "members $1 and $2 gone"
	expect_in err "member $1 \(uuid [0-9a-f-]+\) missing: opened degraded"
	mv gone/e$1.img gone/e$2.img .
done
# a third member gone: more than p = 2, refused (what would be lost named)
mv e0.img e1.img e2.img gone/
expect_rc 1 $B image ls -o degraded e3.img:e4.img:e5.img /
expect_in err 'were not given: file data kept only on members'
mv gone/e0.img gone/e1.img gone/e2.img .

# garbage over the first data block of stripe 1 and the block after it:
# reads rebuild them from the others and verify against the extents' checksums
expect_rc 0 $B list -b stripes "$E"
set -- $(sed -n '1s/.* data \([0-9]*\):\([0-9]*\) gen [0-9]* csum [0-9a-f]* data \([0-9]*\):\([0-9]*\) .*/\1 \2 \3 \4/p' out)
[ $# = 4 ] || fail "cannot read stripe 1: $(head -1 out)"
python3 -c 'import os; open("junk", "wb").write(os.urandom(256 * 1024))'
dd if=junk of=e$1.img bs=512 seek=$2 conv=notrunc status=none
dd if=junk of=e$3.img bs=512 seek=$4 conv=notrunc status=none
check_tree read_only "$E" "two data blocks overwritten"

# too few members for k + p = 4 with p = 2: stays replicated, and says so
expect_rc 0 $B format -q --erasure-code --replicas=3 --fs-size=64M --source=src s0.img s1.img s2.img
expect_rc 2 $B data rebalance s0.img:s1.img:s2.img
expect_in err 'need 4 read-write members, 3 can take them: the data stays replicated'
expect_in out 'to stripe'
check_tree "" s0.img:s1.img:s2.img "too few members"
