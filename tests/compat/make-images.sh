#!/bin/sh
# Build the format compatibility images of one format version:
#   tests/compat/make-images.sh VERSION [NAME...]
# VERSION must be the format version the binary writes (bcachefs version);
# the images go to tests/compat/vVERSION/ (NAME.img.zst, or NAME.N.img.zst
# per member, NAME.manifest, NAME.passphrase for the encrypted ones).
# Run by hand when the format changes, never by make check; an existing
# vVERSION/ is refused: images are never regenerated for an old version
# (tests/compat/README.md).  NAME... builds only those recipes (to try one
# out; they go to $TMPDIR/bch-compat-vVERSION, not to the tree);
# --into-tree VERSION NAME... writes just those into vVERSION/ (a version
# that changed only some structures may add only the images that show it).
#
# Every image is built from a seeded tree that tests/compat/tree.py writes
# (content from SHA-256 of fixed labels, never from this machine), with a
# fixed UUID per image and SOURCE_DATE_EPOCH, so the same binary gives the
# same images byte for byte, except where FUSE writes (unclean, targets:
# the journal's timing) and where a cipher draws nonces (encrypted*).
# Each image is checked by tests/compat/run.sh before it is kept.
#
# Needs root (owners, devices), /dev/fuse and fusermount3 (unclean,
# targets), python3 and zstd.  BCH=PATH builds with another binary.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
B=${BCH:-$root/bcachefs}
case $B in /*) ;; *) B=$PWD/$B ;; esac
TREE="python3 $here/tree.py"

die() { echo "make-images: $*" >&2; exit 1; }
into_tree=
if [ "${1:-}" = --into-tree ]; then into_tree=1; shift; fi
[ $# -ge 1 ] || die "usage: $0 [--into-tree] VERSION [NAME...]"
version=$1; shift
[ -x "$B" ] || die "no binary $B (make bcachefs)"
writes=$("$B" version | sed -n 's/.*format version \([0-9]*\).*/\1/p')
[ "$writes" = "$version" ] ||
	die "$B writes format version ${writes:-?}, not $version: build the tree of version $version"
[ "$(id -u)" = 0 ] || die "needs root (owners, device nodes, FUSE)"
for t in python3 zstd fusermount3; do
	command -v $t >/dev/null || die "needs $t"
done
dest=$here/v$version
only="$*"
if { [ -z "$only" ] || [ -n "$into_tree" ]; } && [ -e "$dest" ]; then
	die "$dest exists: images of a released version are never regenerated (tests/compat/README.md)"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/bch-compat-make.XXXXXX")
mnt=
fuse_pid=
cleanup() {
	if [ -n "$fuse_pid" ]; then kill -9 "$fuse_pid" 2>/dev/null || true; fi
	if [ -n "$mnt" ] && mountpoint -q "$mnt"; then fusermount3 -u "$mnt" || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
out=$work/v$version
mkdir -p "$out"
export SOURCE_DATE_EPOCH=1700000000
git_rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
made_by="$("$B" version | head -1) (git $git_rev)"

# --------------------------------------------------------------- helpers
# A recipe calls: begin NAME SETS; fmt FORMAT-ARGS... (devices as DEV0,
# DEV1, ... in their place); then any of put, setopt, rebalance, crash_write,
# promote_read; then finish.  Each call that changes the image is written to
# the manifest's header, so the header tells how the image was made.

begin() {
	name=$1
	dir=$work/$name
	mkdir -p "$dir"
	src=$dir/src	# what format --source reads
	want=$dir/want	# what the image must hold at the end
	$TREE gen "$2" "$src"
	$TREE fix-dir-times "$src"
	devs=
	passphrase=
	unclean=
	uuid=$(printf 'bcachefs compat %s %s' "$version" "$name" | sha256sum |
		sed 's/^\(.\{8\}\)\(.\{4\}\)\(.\{4\}\)\(.\{4\}\)\(.\{12\}\).*/\1-\2-\3-\4-\5/')
	: > "$dir/steps"
}
step() { echo "%step $*" | sed "s|$B|bcachefs|g; s|$dir/||g" >> "$dir/steps"; }
bch() { step "$*"; "$B" "$@" >>"$dir/log" 2>&1 || die "$name: '$*' exited $? (log: $dir/log)"; }

# fmt ARGS...: format with the fixed UUID; DEVn names member n
fmt() {
	for a in "$@"; do
		case $a in
		DEV[0-9]) f=$dir/$name.${a#DEV}.img; devs="$devs $f"; set -- "$@" "$f" ;;
		*) set -- "$@" "$a" ;;
		esac
		shift
	done
	bch format -q -U "$uuid" -L "compat-$name" --source "$src" "$@"
	cp -a "$src" "$want"
	mkdir -m 0700 "$want/lost+found"
	$TREE fix-dir-times "$want"
}
colon() { echo $devs | tr ' ' ':'; }
dev0() { set -- $devs; echo "$1"; }

# put SEED-LABEL SIZE PATH SECONDS: a new file through image put, then its
# time set (image put gives it the current one), the parent's time too
put() {
	python3 -c "
import sys; sys.path.insert(0, '$here'); import tree
open('$dir/put', 'wb').write(tree.text('$1', $2))"
	bch image put "$(colon)" "$dir/put" "$3"
	bch image touch "$(colon)" -d "@$4" "$3" "$(dirname "$3")"
	cp "$dir/put" "$want$3"
	touch -d "@$4" "$want$3" "$want$(dirname "$3")"
}
# mkdir PATH SECONDS
imkdir() {
	bch image mkdir "$(colon)" "$1"
	bch image touch "$(colon)" -d "@$2" "$1" "$(dirname "$1")"
	mkdir "$want$1"
	touch -d "@$2" "$want$1" "$want$(dirname "$1")"
}
setopt() { bch image setopt "$(colon)" "$@"; }

rebalance() {
	step "data rebalance $(colon)"
	"$B" data rebalance "$(colon)" >>"$dir/log" 2>&1 || die "$name: data rebalance exited $?"
}

mount_fuse() {
	mnt=$dir/mnt
	mkdir -p "$mnt"
	"$B" fusemount -f "$(colon)" "$mnt" >>"$dir/fuse.log" 2>&1 &
	fuse_pid=$!
	i=0
	until mountpoint -q "$mnt"; do
		i=$((i + 1))
		[ $i -lt 100 ] || die "$name: fusemount did not mount ($(cat "$dir/fuse.log"))"
		kill -0 "$fuse_pid" 2>/dev/null || die "$name: fusemount exited ($(cat "$dir/fuse.log"))"
		sleep 0.1
	done
}

# crash_write SETS: mount through FUSE, copy the tree SETS in (cp -a), set
# the directories' times, fsync every file and directory, then kill -9 the
# daemon: what was written exists only in the journal
crash_write() {
	$TREE gen "$1" "$dir/late-src"
	mount_fuse
	step "fusemount; cp -a (tree.py gen $1) into it; fsync all; kill -9"
	cp -a "$dir/late-src/." "$mnt/"
	cp -a "$dir/late-src/." "$want/"
	python3 - "$mnt" "$want" <<-'EOF'
	import os, sys
	sys.path.insert(0, os.environ["COMPAT_HERE"])
	import tree
	for top in sys.argv[1:]:
	    tree.fix_dir_times(top)
	for dp, dns, fns in os.walk(sys.argv[1], topdown=False):
	    for n in fns:
	        p = os.path.join(dp, n)
	        if not os.path.islink(p) and os.path.isfile(p):
	            fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.close(fd)
	    fd = os.open(dp, os.O_RDONLY); os.fsync(fd); os.close(fd)
	EOF
	kill -9 "$fuse_pid"
	wait "$fuse_pid" 2>/dev/null || true
	fuse_pid=
	fusermount3 -u "$mnt" 2>/dev/null || true
	rmdir "$mnt"
	mnt=
	unclean=yes
	"$B" show-super "$(dev0)" > "$dir/sb" 2>&1
	grep -Eq 'Clean shutdown: +no' "$dir/sb" || die "$name: the killed mount left a clean filesystem"
}

# promote_read: read every file through FUSE (promote_target copies), then
# unmount cleanly
promote_read() {
	mount_fuse
	step "fusemount; read every file; unmount"
	find "$mnt" -type f -exec cat {} + > /dev/null
	fusermount3 -u "$mnt"
	wait "$fuse_pid" || die "$name: fusemount exited $? at unmount"
	fuse_pid=
	rmdir "$mnt"
	mnt=
}

# expect CMD... PATTERN: the output of bcachefs CMD... must match PATTERN
expect() {
	eval "pat=\${$#}"
	i=0; args=
	for a in "$@"; do
		i=$((i + 1)); [ $i -lt $# ] && args="$args '$a'"
	done
	eval "\"\$B\" $args" > "$dir/expect.out" 2>&1 || true
	grep -Eq -- "$pat" "$dir/expect.out" ||
		die "$name: expected /$pat/ in bcachefs$args:
$(head -40 "$dir/expect.out")"
}

passphrase() {
	passphrase=$dir/$name.passphrase
	printf '%s\n' "$1" > "$passphrase"
	export BCACHEFS_PASSPHRASE_FILE=$passphrase
}

finish() {
	n=0
	names=
	for d in $devs; do
		names="$names $(basename "$d")"
		n=$((n + 1))
	done
	# one member: NAME.img
	if [ "$n" = 1 ]; then
		mv "$dir/$name.0.img" "$dir/$name.img"
		names=" $name.img"
	fi
	{
		echo "# bcachefs format compatibility corpus: image $name of format version $version"
		echo "# (tests/compat/README.md; entry fields: tests/compat/tree.py)"
		echo "%version $version"
		echo "%devices$names"
		[ -n "$passphrase" ] && echo "%passphrase $name.passphrase"
		[ -n "$unclean" ] && echo "%unclean yes"
		echo "%made-by $made_by"
		cat "$dir/steps"
		$TREE manifest "$want"
	} > "$dir/$name.want"
	for f in $names; do
		zstd -q -19 --long=27 "$dir/$f" -o "$out/$f.zst"
	done
	[ -n "$passphrase" ] && cp "$passphrase" "$out/"
	# the options the image holds per file, as the runner reads them
	cp "$dir/$name.want" "$out/$name.manifest"
	COMPAT_DIR=$out "$here/run.sh" --options-only "$name" > "$dir/opts" ||
		die "$name: reading the options back failed: $(cat "$dir/opts")"
	{
		grep '^[#%]' "$dir/$name.want"
		$TREE manifest "$want" --opts "$dir/opts"
	} > "$out/$name.manifest"
	unset BCACHEFS_PASSPHRASE_FILE
	echo "made $name:$names ($(du -cb "$out/$name".*img.zst | tail -1 | cut -f1) bytes compressed)"
}
export COMPAT_HERE=$here

# --------------------------------------------------------------- recipes
# Every recipe builds a tree of sets (tree.py: base in all), formats it and
# changes it the way its feature needs.  A recipe added for a new format
# version starts with `since N` and is built only for N and later.
since() { [ "$version" -ge "$1" ]; }

# one device, every default; the per-file data shapes; per-file options
recipe_plain() {
	begin plain base,files
	fmt --fs-size=17M DEV0
	imkdir /opts 1700000200
	setopt compression=gzip /opts
	setopt data_checksum=xxhash64 /opts
	put opts/file 40000 /opts/inherits 1700000201
	setopt compression=lz4 /text/t09
	expect image getfattr "$(colon)" /opts/inherits 'bcachefs.compression="gzip"'
	expect list -b extents "$(colon)" 'comp 2'
	finish
}
# two devices, two copies of everything
recipe_replicas2() {
	begin replicas2 base,files
	fmt --replicas=2 --fs-size=17M DEV0 --fs-size=17M DEV1
	expect show-super "$(dev0)" 'user: 1/2 \[0 1\]|user.*\[0 1\]'
	finish
}
# labels and targets: written to ssd, moved to hdd by rebalance, promoted
# back to ssd (cached) by reads, and one file left with its move pending
recipe_targets() {
	begin targets base,data
	fmt --btree-node-size=32k --foreground-target=ssd --background-target=hdd \
		--promote-target=ssd --metadata-target=ssd \
		--bucket-size=64k --fs-size=6M --label=ssd.fast DEV0 \
		--bucket-size=64k --fs-size=8M --label=hdd.slow DEV1
	rebalance
	promote_read
	put pending 50000 /data/pending 1700000300
	expect list -b extents "$(colon)" 'cached|ptr 0:.*ptr 1:|ptr 1:.*ptr 0:'
	finish
}
# compression on write, each algorithm; random data stays incompressible
recipe_lz4() {
	begin lz4 base,files
	fmt --compression=lz4 --fs-size=17M DEV0
	expect list -b extents "$(colon)" 'comp 1'
	finish
}
recipe_gzip() {
	begin gzip base,files
	fmt --compression=gzip --fs-size=17M DEV0
	expect list -b extents "$(colon)" 'comp 2'
	finish
}
recipe_zstd() {
	begin zstd base,files
	fmt --compression=zstd --fs-size=17M DEV0
	expect list -b extents "$(colon)" 'comp 3'
	finish
}
# background compression: rebalance recompressed what format wrote; a file
# put afterwards waits uncompressed with its work recorded
recipe_bgcompress() {
	begin bgcompress base,data
	fmt --background-compression=zstd --fs-size=17M DEV0
	rebalance
	put pending 60000 /data/pending 1700000400
	expect list -b extents "$(colon)" 'comp 3'
	expect list -b rebalance_work "$(colon)" '[0-9]'
	finish
}
# encrypted with a passphrase (the file beside the image); and with the key
# in the clear (--no-passphrase); and with compression under the cipher.
# 512-byte blocks: a cipher fills a block's padding too, and a small file
# then costs its block in git)
recipe_encrypted() {
	begin encrypted base
	passphrase "compat corpus v$version: encrypted"
	fmt --encrypted --passphrase-file "$passphrase" --block-size=512 --fs-size=17M DEV0
	step "(passphrase in encrypted.passphrase)"
	finish
}
recipe_encrypted_nopass() {
	begin encrypted-nopass mini
	fmt --encrypted --no-passphrase --block-size=512 --btree-node-size=32k --bucket-size=64k --fs-size=5M DEV0
	finish
}
recipe_encrypted_zstd() {
	begin encrypted-zstd mini,data
	passphrase "compat corpus v$version: encrypted-zstd"
	fmt --encrypted --passphrase-file "$passphrase" --compression=zstd --fs-size=17M DEV0
	finish
}
# other checksums, and none at all
recipe_checksums() {
	begin checksums base
	fmt --metadata-checksum=xxhash64 --data-checksum=crc64 --btree-node-size=32k \
		--bucket-size=64k --fs-size=5M DEV0
	finish
}
recipe_nochecksum() {
	begin nochecksum base
	fmt --metadata-checksum=none --data-checksum=none --btree-node-size=32k \
		--bucket-size=64k --fs-size=5M DEV0
	finish
}
# 4k nodes: btrees of more than one level
recipe_smallnodes() {
	begin smallnodes base,many
	fmt --btree-node-size=4k --bucket-size=64k --fs-size=8M DEV0
	expect list -m nodes "$(colon)" 'level 1|L1|level: 1'
	finish
}
# not closed cleanly: the late files exist only in the journal
recipe_unclean() {
	begin unclean base
	fmt --fs-size=17M DEV0
	crash_write late
	expect list-journal "$(colon)" '"n11"'
	finish
}

# from version 2 (issue 29): metadata copies on one device.  Check the
# expect lines against what the v2 tools print before the first run.
recipe_metadup() {
	since 2 || return 0
	begin metadup base,files
	fmt --metadata-replicas=2 --fs-size=17M DEV0
	expect show-super "$(dev0)" 'metadata_replicas: +2'
	expect list -m nodes "$(dev0)" 'ptr 0:[0-9]+ gen [0-9]+ ptr 0:'
	finish
}
recipe_metadup_unclean() {
	since 2 || return 0
	begin metadup-unclean base
	fmt --metadata-replicas=2 --fs-size=17M DEV0
	crash_write late
	expect list-journal "$(colon)" '"n11"'
	finish
}
# version 3: a snapshot of / (its tree as formatted), then a file in / only
recipe_snapshots() {
	since 3 || return 0
	begin snapshots base
	fmt --fs-size=17M DEV0
	mkdir "$dir/snapwant"
	cp -a "$want/." "$dir/snapwant/"
	bch subvolume snapshot "$(colon)" / /snap
	cp -a "$dir/snapwant" "$want/snap"
	touch -d @1700000000 "$want/snap/lost+found"	# as format made it
	put opts/file 3000 /after-snapshot 1700000300
	expect subvolume list "$(colon)" ' /snap$'
	finish
}
# feature reflink (bit 3, issue 31; built from version 3): files sharing
# their data through indirect extents (image cp --reflink), one sharer of
# three removed (refcounts 2 left), one copy shared again (refcount 3)
recipe_reflink() {
	since 3 || return 0
	begin reflink base,files
	fmt --fs-size=17M DEV0
	put opts/file 300000 /shared 1700000500
	for c in /copy /gone; do
		bch image cp --reflink "$(colon)" /shared "$c"
		bch image touch "$(colon)" -d @1700000501 "$c" /
	done
	bch image rm "$(colon)" /gone
	bch image cp --reflink "$(colon)" /text/t09 /t09-copy
	bch image touch "$(colon)" -d @1700000502 /t09-copy /
	cp -p "$want/shared" "$want/copy"
	cp -p "$want/text/t09" "$want/t09-copy"
	touch -d @1700000501 "$want/copy"
	touch -d @1700000502 "$want/t09-copy" "$want"
	expect list -b reflink "$(colon)" 'reflink_v .*refcount 2'
	expect list -b extents "$(colon)" 'reflink_p size [0-9]+ idx'
	finish
}

# feature erasure_code (bit 6, issue 34; built from version 3): four members,
# --erasure-code --replicas=3, data rebalance gathered the data into stripes
# of 2 data and 2 parity blocks (every extent has one striped pointer)
recipe_erasure_code() {
	since 3 || return 0
	begin erasure_code base
	fmt --erasure-code --replicas=3 --fs-size=17M DEV0 --fs-size=17M DEV1 --fs-size=17M DEV2 \
		--fs-size=17M DEV3
	rebalance
	expect show-super "$(dev0)" '^Features: +erasure_code'
	expect list -b stripes "$(colon)" 'stripe 2\+2 block'
	expect list -b extents "$(colon)" 'stripe [0-9]+/[01]'
	finish
}

# feature inode_ec (bit 5, issue 34; built from version 3): four members,
# --replicas=3 without the filesystem's erasure_code; the per-file option on
# a directory (inherited by the two files put in it) and off on a file of the
# base tree; data rebalance gathered only the directory's files into stripes
# of 2 data and 2 parity blocks
recipe_ec_inode_opt() {
	since 3 || return 0
	begin ec_inode_opt base
	fmt --replicas=3 --fs-size=17M DEV0 --fs-size=17M DEV1 --fs-size=17M DEV2 --fs-size=17M DEV3
	imkdir /ec 1700000600
	setopt erasure_code=1 /ec
	setopt erasure_code=0 /text/t09
	put opts/file 300000 /ec/striped 1700000601
	put opts/file 200000 /ec/striped2 1700000602
	rebalance
	expect show-super "$(dev0)" '^Features: +inode_ec,erasure_code'
	expect image getfattr "$(colon)" /ec/striped 'bcachefs.erasure_code="yes"'
	expect list -b stripes "$(colon)" 'stripe 2\+2 block'
	expect list -b extents "$(colon)" 'stripe [0-9]+/[01]'
	expect list -b extents "$(colon)" 'ptr [0-9]+:[0-9]+ gen [0-9]+ ptr [0-9]+:[0-9]+ gen [0-9]+ ptr '
	finish
}

# version 3 with the inode_flags feature: chattr through FUSE (immutable,
# append-only, nodump+noatime+sync on a directory, a project ID)
recipe_flags() {
	since 3 || return 0
	begin flags base
	fmt --fs-size=17M DEV0
	mount_fuse
	step "fusemount; chattr +i /text/t00, +a /text/t01, +dAS /docs, -p 42 /text/t02; unmount"
	{ chattr +i "$mnt/text/t00" && chattr +a "$mnt/text/t01" && chattr +dAS "$mnt/docs" &&
		chattr -p 42 "$mnt/text/t02"; } >>"$dir/log" 2>&1 || die "$name: chattr (log: $dir/log)"
	fusermount3 -u "$mnt"
	wait "$fuse_pid" || die "$name: fusemount exited $? at unmount"
	fuse_pid=
	rmdir "$mnt"
	mnt=
	expect show-super "$(dev0)" '^Features: +inode_flags'
	expect image stat "$(colon)" /text/t00 'Flags: immutable  Project: 0'
	expect image stat "$(colon)" /text/t01 'Flags: append  Project: 0'
	expect image stat "$(colon)" /docs 'Flags: sync,nodump,noatime  Project: 0'
	expect image stat "$(colon)" /text/t02 'Flags: \(none\)  Project: 42'
	finish
}

recipes="plain replicas2 targets lz4 gzip zstd bgcompress encrypted encrypted_nopass
encrypted_zstd checksums nochecksum smallnodes unclean metadup metadup_unclean snapshots flags reflink
erasure_code ec_inode_opt"

for r in ${only:-$recipes}; do
	r=$(echo "$r" | tr - _)
	echo "$recipes" | tr ' ' '\n' | grep -qx "$r" || die "no recipe $r"
	"recipe_$r"
done

# the whole set passes the runner before it is kept
COMPAT_DIR=$out "$here/run.sh" || die "the new images do not pass tests/compat/run.sh (kept nothing)"
if [ -n "$only" ] && [ -z "$into_tree" ]; then
	keep=${TMPDIR:-/tmp}/bch-compat-v$version
	rm -rf "$keep"
	cp -a "$out" "$keep"
	echo "built $only into $keep (not into the tree: --into-tree puts them there)"
else
	cp -a "$out" "$dest"
	echo "v$version: $(ls "$dest"/*.img.zst | wc -l) images, $(du -cb "$dest"/* | tail -1 | cut -f1) bytes in $dest"
fi
