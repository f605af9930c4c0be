# image extract past damage: two files whose data fails its checksum are
# named on stderr (image path and error) and removed, never left truncated
# or zeroed; every other file is extracted byte-identical; exit 1 at the end.
mkdir src
i=1
while [ $i -le 60 ]; do
	mkdir -p src/d$((i % 5))
	# distinct, deterministic content of 8 to 240 KiB (several extents for some)
	awk -v n=$i 'BEGIN { for (j = 0; j < n * 200; j++) printf "file %d line %07d\n", n, j }' \
		> src/d$((i % 5))/f$i
	i=$((i + 1))
done
expect_rc 0 $B format -q --fs-size=64M --source src a.img

# damage_file IMG PATH: flip bytes in the first data extent of PATH
damage_file() {
	ino=$($B image stat --json "$1" "$2" | sed -n 's/.*"inode": \([0-9]*\),.*/\1/p')
	[ -n "$ino" ] || fail "no inode for $2"
	sec=$($B list -b extents "$1" | sed -n "s/^$ino:[0-9]*:0 extent .* ptr 0:\([0-9]*\) .*/\1/p" | head -1)
	[ -n "$sec" ] || fail "no extent for $2 (inode $ino)"
	printf '\377\000\377\000' | dd of="$1" bs=1 seek=$((sec * 512 + 1000)) conv=notrunc status=none
}
damage_file a.img /d2/f17
damage_file a.img /d4/f44

expect_rc 1 $B image extract a.img dest
expect_in err '^bcachefs image extract: a\.img: /d2/f17: reading: Input/output error .*removed$'
expect_in err '^bcachefs image extract: a\.img: /d4/f44: reading: Input/output error .*removed$'
expect_in err '2 files or directories could not be extracted'
[ "$(grep -c 'Input/output error' err)" = 2 ] || fail "not exactly the two damaged files named: $(cat err)"
[ ! -e dest/d2/f17 ] && [ ! -e dest/d4/f44 ] || fail "a damaged file was left in the destination"
# everything else: byte-identical
n=0
for f in src/d*/f*; do
	case $f in src/d2/f17|src/d4/f44) continue ;; esac
	cmp -s "$f" "dest/${f#src/}" || fail "dest/${f#src/} differs from $f"
	n=$((n + 1))
done
[ $n = 58 ] || fail "compared $n files, want 58"
[ "$(find dest -type f | wc -l)" = 58 ] || fail "extra files in dest: $(find dest -type f | wc -l)"

# a subtree: image paths in messages start at the image root
expect_rc 1 $B image extract a.img out2 /d2
expect_in err '^bcachefs image extract: a\.img: /d2/f17: reading: '
[ -f out2/f2 ] && [ ! -e out2/f17 ] || fail "subtree extract"
# image get of one damaged file: named, nothing left behind
expect_rc 1 $B image get a.img /d4/f44 got
expect_in err '^bcachefs image get: a\.img: /d4/f44: reading: Input/output error'
[ ! -e got ] || fail "image get left a damaged file"
# the undamaged image extracts cleanly
expect_rc 0 $B format -q --fs-size=64M --source src b.img
expect_rc 0 $B image extract b.img outb
for f in src/d*/f*; do cmp -s "$f" "outb/${f#src/}" || fail "clean extract: $f"; done

# an unreadable directory: one dirents leaf of several destroyed.  The
# directories whose entries it held are named ("listing directory"); every
# other directory comes out whole and byte-identical.  (Fixed UUID and time:
# the same name hashes, so the same leaves, every run.)
mkdir dsrc
d=1
while [ $d -le 12 ]; do
	mkdir dsrc/dir$d
	f=1
	while [ $f -le 40 ]; do
		echo "dir $d file $f" > dsrc/dir$d/file-with-a-longish-name-$f
		f=$((f + 1))
	done
	d=$((d + 1))
done
export SOURCE_DATE_EPOCH=1700000000
expect_rc 0 $B format -q -U 1b4e28ba-2fa1-11d2-883f-0016d3cca427 \
	--fs-size=64M --btree-node-size=16k --bucket-size=64k --source dsrc d.img
unset SOURCE_DATE_EPOCH
expect_rc 0 $B list -b dirents -m nodes d.img
[ "$(grep -c '^node level 0' out)" -ge 4 ] || fail "want several dirents leaves: $(cat out)"
sec=$(sed -n '/^node level 0/s/.* ptr 0:\([0-9]*\) .*/\1/p' out | sed -n 3p)
printf '\377\377\377\377' | dd of=d.img bs=1 seek=$((sec * 512 + 40)) conv=notrunc status=none
expect_rc 1 $B image extract d.img ddest
expect_in err '^bcachefs image extract: d\.img: /dir[0-9]+: listing directory: '
named=$(sed -n 's/^bcachefs image extract: d\.img: \/\(dir[0-9]*\): listing directory: .*/\1/p' err)
[ -n "$named" ] || fail "no directory named"
whole=0
for dir in dsrc/dir*; do
	dir=${dir#dsrc/}
	[ -d "ddest/$dir" ] || fail "$dir not created"
	case " $(echo $named) " in *" $dir "*) continue ;; esac
	for f in dsrc/$dir/*; do
		cmp -s "$f" "ddest/$dir/${f##*/}" || fail "ddest/$dir/${f##*/} differs or is missing"
	done
	whole=$((whole + 1))
done
[ $whole -ge 6 ] || fail "only $whole of 12 directories whole"
echo "unreadable dirents leaf: named $(echo $named), $whole directories whole"
