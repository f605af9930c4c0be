# fsck of a filesystem with subvolumes and snapshots (issue 30): the file
# passes run in every subvolume's view.
#   - several snapshots (nested, read-only, of a subvolume of its own), with
#     changes on both sides of each: fsck -n -f is clean, --json says the
#     files were checked;
#   - damage in one snapshot's view (a link count, an entry to no inode, a
#     sector count, all in /s1's snapshot only): -n finds it and writes
#     nothing, -y repairs it in that snapshot: every file of every subvolume
#     reads back as before, and no key of another snapshot changed;
#   - damage in a key two subvolumes see (an entry in their common
#     ancestor): each view reports and repairs it in its own snapshot.
need jq cmp

# every file of every subvolume, content and link count, into DIR
snapshot_files() {
	mkdir -p "$1"
	for p in /f /d/big /data/big /s1/data/big /d/small /s1/f /s1/d/big /s1/d/small /d/hard /s1/only-s1 \
		 /s1/ro/d/big /s1/ro/d/small /sv/x /sv2/x /sv2/sub/y; do
		n=$(printf '%s' "$p" | tr / _)
		$B image get a.img "$p" "$1/$n" 2>/dev/null || echo missing > "$1/$n"
		$B image stat --json a.img "$p" 2>/dev/null | jq -r '.files[0].nlink' > "$1/$n.nlink"
	done
}

# the keys of the file btrees that do not lie in snapshot $1, as text
keys_not_in() {
	for b in inodes dirents extents xattrs; do
		$B list -b "$b" a.img | grep -v "^[0-9]*:[0-9]*:$1 "
	done
}

snap_of() { $B subvolume list --json a.img | jq -r ".subvolumes[] | select(.path==\"$1\") | .snapshot"; }
ino() { echo $(( $($B image stat --json a.img "$1" | jq -r '.files[0].inode') & 0xffffffffffff )); }

# dirent_hex INUM DTYPE NAME (tests/fsck/lib.sh)
dirent_hex() {
	name=$(printf '%s' "$3" | xxd -p | tr -d '\n')
	len=$(printf '%s' "$3" | wc -c)
	pad=$(( (8 - len % 8) % 8 ))
	printf '%s%s%s000000000000%s' "$(le 8 "$1")" "$(le 1 "$2")" "$(le 1 "$len")" "$name"
	i=0; while [ $i -lt $pad ]; do printf '00'; i=$((i + 1)); done
}
le() {
	_v=$2 _out= _i=0
	while [ $_i -lt "$1" ]; do
		_out="$_out$(printf '%02x' $(( (_v >> (8 * _i)) & 255 )))"
		_i=$((_i + 1))
	done
	printf '%s' "$_out"
}

# set_inode_field POS SNAP OFFSET BYTES VALUE: the inode key at POS written
# in snapshot SNAP with a little-endian field of its value changed
set_inode_field() {
	set -- "$1" "$2" "$3" "$4" "$5" $($B kv -b inodes a.img gethex "$1")
	hex=$8
	pre=$(printf '%s' "$hex" | cut -c1-$(($3 * 2)))
	post=$(printf '%s' "$hex" | cut -c$(($3 * 2 + $4 * 2 + 1))-)
	$B kv --unchecked -b inodes a.img puthex "${1%:*}:$2" "$6" "$7" "$pre$(le "$4" "$5")$post"
}

dd if=/dev/urandom of=big bs=1M count=2 status=none
dd if=/dev/urandom of=mid bs=64k count=1 status=none
printf 'one\n' > one
printf 'two\n' > two
expect_rc 0 $B format -q --fs-size=128M a.img
expect_rc 0 $B image put a.img one /f
expect_rc 0 $B image mkdir a.img /d
expect_rc 0 $B image put a.img big /d/big
expect_rc 0 $B image put a.img two /d/small
expect_rc 0 $B image mkdir a.img /data
expect_rc 0 $B image put a.img big /data/big
expect_rc 0 $B subvolume snapshot a.img / /s1
expect_rc 0 $B subvolume create a.img /sv
expect_rc 0 $B image put a.img one /sv/x
expect_rc 0 $B subvolume snapshot a.img /sv /sv2
# changes on both sides of each snapshot
expect_rc 0 $B image rm a.img /f
expect_rc 0 $B image put a.img two /f
expect_rc 0 $B image put a.img one /s1/only-s1
# (image ln inside a subvolume fails today: ENOENT; the link is made in / instead)
expect_rc 0 $B image ln a.img /d/small /d/hard
# the middle of the root's big file (update writes only what differs)
mkdir -p host/data
cp big host/data/big
dd if=mid of=host/data/big bs=64k seek=3 conv=notrunc status=none
expect_rc 0 $B image update a.img host/data /data
expect_rc 0 $B image mkdir a.img /sv2/sub
expect_rc 0 $B image put a.img two /sv2/sub/y
expect_rc 0 $B image rm a.img /sv/x
expect_rc 0 $B image put a.img two /sv/x
expect_rc 0 $B subvolume snapshot -r a.img /s1 /s1/ro

# ---- clean: every view checks clean
expect_rc 0 $B fsck -n -f a.img
expect_in out '^a.img: 0 problems found'
expect_not_in out '\(0x0'
for sv in 0 1 2 3 4; do expect_in out "^pass 10: link counts \(subvolume $sv, snapshot [0-9]+\)$"; done
expect_rc 0 $B fsck -n -f --json a.img
[ "$(jq -r '.files_checked' out)" = true ] || fail "fsck --json: $(cat out)"
[ "$(jq -r '.found' out)" = 0 ] || fail "fsck --json found problems: $(cat out)"
snapshot_files before

# ---- damage in /s1's view only
s1=$(snap_of /s1)
[ -n "$s1" ] || fail "no snapshot for /s1"
keys_not_in "$s1" > keys.before
small=$(ino /s1/d/small) bigi=$(ino /s1/d/big) d=$(ino /s1/d)
set_inode_field 0:$small:0 "$s1" 60 4 9		# nlink
set_inode_field 0:$bigi:0 "$s1" 8 8 12345	# sectors
expect_rc 0 $B kv -b dirents a.img puthex $d:12345:$s1 dirent 0 $(dirent_hex 9999 8 ghost)
keys_not_in "$s1" > keys.damaged
cmp -s keys.before keys.damaged || fail "the damage itself touched another snapshot"
before=$(sha a.img)
expect_rc 4 $B fsck -n -f a.img
[ "$(sha a.img)" = "$before" ] || fail "fsck -n wrote to the image"
expect_in out '^subvolume 1 inode [0-9]+ \(/d/small\): nlink 9, counted 1'
expect_in out '^subvolume 1 inode [0-9]+ \(/d\) entry "ghost": -> inode 9999'
expect_in out '^subvolume 1 inode [0-9]+ \(/d/big\): 12345 sectors'
[ "$(grep -c '(0x0' out)" = 3 ] || fail "fsck -n: not the three problems: $(cat out)"
expect_rc 1 $B fsck -y -f a.img
expect_in out '^a.img: 3 problems found, 3 fixed, 0 left'
expect_rc 0 $B fsck -n -f a.img
expect_in out '^a.img: 0 problems found'
snapshot_files after
for f in before/*; do
	cmp -s "$f" "after/${f#before/}" || fail "${f#before/} changed: $(cat "$f") -> $(cat "after/${f#before/}")"
done
keys_not_in "$s1" > keys.after
cmp -s keys.before keys.after || fail "the repair touched another snapshot's keys:
$(diff keys.before keys.after | head -20)"

# ---- damage in a key /, /s1 and /s1/ro all see: repaired in each view
root=$(snap_of /)
anc=$($B list -b snapshots a.img | sed -n "s/^0:$root:0 snapshot parent \([0-9]*\) .*/\1/p")
[ -n "$anc" ] && [ "$anc" != "$root" ] || fail "no parent of /'s snapshot"
expect_rc 0 $B kv -b dirents a.img puthex $d:23456:$anc dirent 0 $(dirent_hex 9998 8 ghost2)
expect_rc 1 $B fsck -y -f a.img
for sv in 0 1 4; do
	expect_in out "^subvolume $sv inode [0-9]+ \(/d\) entry \"ghost2\": -> inode 9998"
done
expect_in out '^a.img: 3 problems found, 3 fixed, 0 left'
expect_rc 0 $B fsck -n -f a.img
expect_in out '^a.img: 0 problems found'
expect_rc 1 $B image cat a.img /d/ghost2
expect_rc 1 $B image cat a.img /s1/d/ghost2
snapshot_files again
for f in before/*; do
	cmp -s "$f" "again/${f#before/}" || fail "${f#before/} changed by the second repair"
done
# the read-only snapshot /s1/ro too (fsck mends a read-only snapshot's view)
expect_rc 0 $B image ls a.img /s1/ro/d
expect_not_in out 'ghost'
