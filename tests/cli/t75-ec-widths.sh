# erasure-coding round trips at other widths (issue 34, Tests): p = 1 on
# four images (--replicas=2: RS(3,1)) and p = 2 on eight (--replicas=3:
# RS(6,2)), filled from a tree and striped by data rebalance.  Every file
# byte-identical with every choice of p images gone (-o degraded: 4 singles,
# 28 pairs), p + 1 gone refused, and fsck clean.
# Data: treetool gen seed 75 (30 files) and 76 (40 files), python
# random.Random(75) and (76) for a larger file in each.
need python3
tree=$ROOT/tests/cli/treetool.py

imgs() {	# PREFIX N: PREFIX0.img:...:PREFIX(N-1).img
	i=0
	while [ $i -lt $2 ]; do printf '%s%s%d.img' "$([ $i = 0 ] || echo :)" "$1" $i; i=$((i + 1)); done
}
check_tree() {	# SRC OPTS FS WHAT: every file of SRC byte-identical in FS
	rm -rf out.d && mkdir out.d
	expect_rc 0 $B image extract ${2:+-o $2} "$3" out.d
	python3 "$tree" compare "$1" out.d >cmp.log || fail "$4: $(tail -5 cmp.log)"
	cmp -s "$1/big.bin" out.d/big.bin || fail "$4: big.bin differs"
}
# PREFIX N REPLICAS SEED NFILES SHAPE: format, stripe, check the shape
roundtrip_setup() {
	python3 "$tree" gen src$1 $4 $5 || fail "treetool gen"
	python3 -c "import random, sys; sys.stdout.buffer.write(random.Random($4).randbytes(1536 * 1024 + 7))" > src$1/big.bin
	for i in $(seq 0 $(($2 - 1))); do truncate -s 48M $1$i.img; done
	expect_rc 0 $B format -q --erasure-code --replicas=$3 --source=src$1 $(imgs $1 $2 | tr : ' ')
	expect_rc 0 $B data rebalance --wait --json "$(imgs $1 $2)"
	python3 -c 'import json, sys; d = json.load(open("out")); sys.exit(0 if d["done"] and d["pending"]["stripe"] == 0 and d["extents_moved"] > 0 else 1)' ||
		fail "$1: rebalance did not stripe everything: $(cat out)"
	expect_rc 0 $B list -b stripes "$(imgs $1 $2)"
	grep -q " stripe $6 " out || fail "$1: no RS($6) stripe: $(head -2 out)"
	expect_rc 0 $B list -b extents "$(imgs $1 $2)"
	expect_not_in out 'ptr [0-9]+:[0-9]+ gen [0-9]+ ptr '	# every extent striped
	check_tree src$1 "" "$(imgs $1 $2)" "$1: healthy"
	expect_rc 0 $B fsck -n -f "$(imgs $1 $2)"
	expect_in out ': 0 problems found'
}
# PREFIX N GONE...: the images but those of the members GONE
without() {
	p=$1 n=$2
	shift 2
	imgs $p $n | tr : '\n' | grep -v -x $(for g in "$@"; do printf -- '-e %s%d.img ' $p $g; done) | paste -sd:
}

# ---- p = 1 on four: RS(3,1); each member gone in turn, two gone refused
roundtrip_setup a 4 2 75 30 3+1
for g in 0 1 2 3; do
	check_tree srca degraded,read_only "$(without a 4 $g)" "RS(3,1), member $g gone"
	expect_in err "member $g \(uuid [0-9a-f-]+\) missing: opened degraded"
done
expect_rc 1 $B image ls -o degraded "$(without a 4 1 2)" /
expect_in err 'were not given: file data kept only on members'

# ---- p = 2 on eight: RS(6,2); every pair gone, three gone refused
roundtrip_setup b 8 3 76 40 6+2
pairs=0
for g in 0 1 2 3 4 5 6; do
	for h in $(seq $((g + 1)) 7); do
		check_tree srcb degraded,read_only "$(without b 8 $g $h)" "RS(6,2), members $g and $h gone"
		pairs=$((pairs + 1))
	done
done
[ $pairs = 28 ] || fail "$pairs pairs checked, not 28"
expect_rc 1 $B image ls -o degraded "$(without b 8 0 3 7)" /
expect_in err 'were not given: file data kept only on members'
