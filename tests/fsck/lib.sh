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

# flip_byte IMG OFFSET: invert every bit of the byte at OFFSET.  A fixed byte
# written over ciphertext (an encrypted node or extent) is already there once in
# 256 runs; an inverted one always differs.
flip_byte() {
	_v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	printf "\\$(printf '%03o' $((_v ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# mkfs_files IMG: a small tree: /dir/a (text, xattr, hard link /hard, symlink
# /sym), /dir/b (40000 lines, two extents), /dir/c, /dir/sub/deep, /empty
mkfs_files() {
	# fixed UUID and time: the name hash key, and so the output, are the same every run
	SOURCE_DATE_EPOCH=1700000000 $B format -q -U 6e2a3c1d-5b4f-4e8a-9c7d-2f1e0a9b8c7d --fs-size=64M "$1" || exit 1
	printf 'hello world\n' > f_a
	seq 1 40000 > f_b
	seq 5 5 50000 > f_c
	printf 'deep\n' > f_deep
	$B image mkdir -p "$1" /dir/sub /empty || exit 1
	$B image put "$1" f_a /dir/a || exit 1
	$B image put "$1" f_b /dir/b || exit 1
	$B image put "$1" f_c /dir/c || exit 1
	$B image put "$1" f_deep /dir/sub/deep || exit 1
	$B image ln "$1" /dir/a /hard || exit 1
	$B image ln -s "$1" dir/a /sym || exit 1
	$B image setfattr -n user.colour -v blue "$1" /dir/a || exit 1
}

# inum IMG PATH: the inode number of PATH
inum() { $B image stat --json "$1" "$2" | sed -n 's/.*"inode": \([0-9]*\),.*/\1/p'; }

# key_hex IMG BTREE POS: "TYPE SIZE HEX" of a key
key_hex() { $B kv -b "$2" "$1" gethex "$3"; }

# set_field IMG BTREE POS OFFSET BYTES VALUE: overwrite a little-endian field of
# a key's value (OFFSET and BYTES in bytes) and write the key back unchecked
set_field() {
	set -- "$1" "$2" "$3" "$4" "$5" "$6" $(key_hex "$1" "$2" "$3")
	hex=$9
	_v=$6 _le= _i=0
	while [ $_i -lt "$5" ]; do
		_le="$_le$(printf '%02x' $(( (_v >> (8 * _i)) & 255 )))"
		_i=$((_i + 1))
	done
	pre=
	[ "$4" -gt 0 ] && pre=$(printf '%s' "$hex" | cut -c1-$(($4 * 2)))
	_post=$(printf '%s' "$hex" | cut -c$(($4 * 2 + $5 * 2 + 1))-)
	$B kv --unchecked -b "$2" "$1" puthex "$3" "$7" "$8" "$pre$_le$_post"
}

# dirent_pos IMG DIR_INUM NAME: position of the dirent NAME in directory DIR_INUM
dirent_pos() {
	$B list -b dirents "$1" | sed -n "s/^\($2:[0-9]*:0\) dirent -> [0-9]* type [0-9]* \"$3\"$/\1/p"
}

# extent_pos IMG INUM: position of the first extent of INUM
extent_pos() {
	$B list -b extents "$1" | sed -n "s/^\($2:[0-9]*:0\) extent .*/\1/p" | head -1
}

# le HEX_BYTES VALUE: VALUE as little-endian hex of that many bytes
le() {
	_v=$2 _out= _i=0
	while [ $_i -lt "$1" ]; do
		_out="$_out$(printf '%02x' $(( (_v >> (8 * _i)) & 255 )))"
		_i=$((_i + 1))
	done
	printf '%s' "$_out"
}

# dirent_hex INUM DTYPE NAME: the value of a dirent naming INUM
dirent_hex() {
	name=$(printf '%s' "$3" | xxd -p | tr -d '\n')
	len=$(printf '%s' "$3" | wc -c)
	pad=$(( (8 - len % 8) % 8 ))
	printf '%s%s%s000000000000%s' "$(le 8 "$1")" "$(le 1 "$2")" "$(le 1 "$len")" "$name"
	i=0; while [ $i -lt $pad ]; do printf '00'; i=$((i + 1)); done
}

# mkfs_snaps IMG: mkfs_files, then a snapshot /s1 of / (subvolume 1 in
# snapshot 2; / goes on in snapshot 1, their parent is snapshot 0) and a
# file on each side only: /s1/only-s1, /dir/only-root
mkfs_snaps() {
	mkfs_files "$1" || exit 1
	$B subvolume snapshot "$1" / /s1 || exit 1
	$B image put "$1" f_a /s1/only-s1 || exit 1
	$B image put "$1" f_deep /dir/only-root || exit 1
}

# ino IMG PATH: the inode number of PATH without its subvolume (fs_ops.h handles)
ino() { echo $(( $(inum "$1" "$2") & 0xffffffffffff )); }

# snap_set IMG ID OFFSET BYTES VALUE: a field of snapshot ID's key (bcachefs_format.h:
# parent 0, flags 4, subvol 8, depth 12, children 16 and 20)
snap_set() { set_field "$1" snapshots "0:$2:0" "$3" "$4" "$5"; }

# subvol_set IMG ID OFFSET BYTES VALUE: a field of subvolume ID's key (snapshot 0,
# flags 4, root_inum 8, parent 16, dir_subvol 20, dir 24, dir_offset 32)
subvol_set() { set_field "$1" snapshots "1:$2:0" "$3" "$4" "$5"; }

# copy_key IMG BTREE POS SNAP: the key at POS written again in snapshot SNAP
copy_key() {
	set -- "$1" "$2" "$3" "$4" $(key_hex "$1" "$2" "$3")
	$B kv --unchecked -b "$2" "$1" puthex "${3%:*}:$4" "$5" "$6" "$7"
}
