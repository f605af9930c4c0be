# Helpers for fsck case scripts (sourced): $B is the binary.

# mkfs_keys IMG N: a filesystem with small nodes holding keys 5:0 .. 5:N-1
mkfs_keys() {
	$B format -q --fs-size=32M --btree-node-size=4k --bucket-size=64k "$1" || exit 1
	i=0
	while [ $i -lt "$2" ]; do
		args=
		for j in 0 1 2 3 4 5; do
			[ $((i + j)) -lt "$2" ] && args="$args 5:$((i + j)) value-$((i + j))"
		done
		$B kv "$1" put $args || exit 1
		i=$((i + 6))
	done
}

# node_sector IMG LEVEL N: the sector of the N-th node (1-based) at LEVEL of the test btree
node_sector() {
	$B list -b test -m nodes "$1" | sed -n "s/^node level $2 .* ptr 0:\([0-9]*\) .*/\1/p" | sed -n "${3}p"
}
