#!/bin/sh
# The format compatibility suite ("compat" in tests/run-all.sh): every image
# of every format version in tests/compat/v*/ must still open, read back
# byte for byte and fsck clean with this build (tests/compat/README.md).
#   tests/compat/run.sh [NAME|vN/NAME...]     all images, or those named
# Per image, on copies decompressed to $TMPDIR:
#   1. show-super names the version of its directory (and an %unclean
#      image says it was not closed cleanly);
#   2. fsck -n -f -c exits 0 (an unclean image too: replaying the journal is
#      not damage; -c reads every copy of the file data and checks its
#      checksum) and, like extract and the options read, writes nothing;
#   3. image extract, then every entry (type, mode, owner, time, size,
#      sha256, hard links, symlink target, xattrs, ACLs) and every per-file
#      option (bcachefs.* through image shell getfattr) equals the manifest;
#   4. fsck -y -f exits 0, fsck -n -f exits 0, and the tree is unchanged;
#   5. on a fresh copy, opened read-write: image put of a new file, fsck -n
#      -f exits 0, the new file reads back, the rest is unchanged.
# A difference fails the image.  Last line: "compat: N passed, N failed,
# N skipped".  BCH=PATH runs another binary; COMPAT_DIR=DIR checks one
# version directory instead of tests/compat/v*/ (make-images.sh uses it);
# COMPAT_KEEP=1 keeps the work directories.
# --options-only NAME (with COMPAT_DIR) prints the per-file options of an
# image, for make-images.sh to write into its manifest.
set -u
# The images hold a 64 KiB xattr, which extract writes to the host: a tmpfs
# takes it, ext4 without ea_inode (a usual /tmp) does not.  As run-all.sh:
# a tmpfs when there is one and TMPDIR is not set.
if [ -z "${TMPDIR:-}" ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	export TMPDIR=/dev/shm
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
B=${BCH:-$root/bcachefs}
case $B in /*) ;; *) B=$PWD/$B ;; esac
TREE="python3 $here/tree.py"
TIMEOUT=${COMPAT_TIMEOUT:-300}
pass=0 fail=0 skip=0

if [ ! -x "$B" ]; then
	echo "FAIL compat: no binary $B"
	echo "compat: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
for t in zstd python3; do
	if ! command -v $t >/dev/null; then
		echo "FAIL compat: $t not found (apt-get install $t; zstd belongs in TEST_PKGS of scripts/install-deps.sh)"
		echo "compat: 0 passed, 1 failed, 0 skipped"
		exit 1
	fi
done

# An encrypted image pays an scrypt run per command that reads the
# passphrase: its first fsck does (the passphrase path is part of the format),
# then `bcachefs unlock` puts the key into a session keyring of this run's
# own (dropped when it ends), which the later commands use.  keyctl's
# "Joined session keyring: N" goes to /dev/null, the run's stderr (fd 3) not.
if [ -z "${COMPAT_KEYRING:-}" ] && command -v keyctl >/dev/null &&
   keyctl session - true >/dev/null 2>&1; then
	export COMPAT_KEYRING=1
	keyctl session - sh -c 'exec 2>&3 3>&-; exec sh "$@"' sh "$0" "$@" 3>&2 2>/dev/null
	exit
fi

# extract restores owners, device nodes and trusted.* xattrs only as root
if [ "$(id -u)" != 0 ]; then
	if [ -n "${COMPAT_DIR:-}" ]; then n=$(ls "$COMPAT_DIR"/*.manifest | wc -l)
	else n=$(ls "$here"/v[0-9]*/*.manifest | wc -l); fi
	echo "SKIP compat: needs root (image extract restores owners, device nodes, trusted.* xattrs)"
	echo "compat: 0 passed, 0 failed, $n skipped"
	exit 0
fi

# header FIELD: the value of "%FIELD ..." in the manifest
header() { sed -n "s/^%$1 //p" "$manifest" | head -1; }

# bch LOG CMD...: run the binary with a timeout, output appended to LOG.out
# (the last command's alone in LOG.last); status in $rc
bch() {
	log=$1; shift
	echo "\$ bcachefs $*" >> "$w/$log.out"
	timeout -k 5 "$TIMEOUT" "$B" "$@" > "$w/$log.last" 2>&1
	rc=$?
	cat "$w/$log.last" >> "$w/$log.out"
	[ "$rc" = 124 ] && echo "(timed out after $TIMEOUT s)" >> "$w/$log.out"
	return 0
}

# problem TEXT: note a failure of this image (the checks go on)
problem() { problems="$problems
    $*"; }

# expect_rc WANT LOG CMD...
expect_rc() {
	want=$1; shift
	bch "$@"
	if [ "$rc" != "$want" ]; then
		shift
		problem "'bcachefs $*' exited $rc, want $want:"
		problems="$problems
$(tail -15 "$w/$log.last" | sed 's/^/      /')"
		return 1
	fi
}

hashes() { (cd "$1" && sha256sum $devnames); }

# decompress DIR: the pristine member images into DIR
decompress() {
	mkdir -p "$1"
	for d in $devnames; do
		zstd -q -d -c "$vdir/$d.zst" > "$1/$d" || { problem "cannot decompress $d.zst"; return 1; }
	done
}
members() { echo "$1/$devnames" | sed "s| | $1/|g" | tr ' ' ':'; }

# read_tree TAG DIR [--ignore PATH]...: extract DIR's image, read its
# per-file options, and compare both with the manifest
read_tree() {
	tag=$1 fs=$(members "$2"); shift 2
	rm -rf "$w/$tag.tree"
	expect_rc 0 "$tag" image extract "$fs" "$w/$tag.tree" || return 1
	timeout -k 5 "$TIMEOUT" "$B" image shell -o read_only "$fs" < "$w/getfattr.sh" > "$w/$tag.opts" 2>"$w/$tag.opts.err"
	rc=$?
	if [ "$rc" != 0 ]; then
		problem "reading the per-file options (image shell getfattr) exited $rc: $(tail -3 "$w/$tag.opts.err")"
		return 1
	fi
	if ! $TREE verify "$manifest" "$w/$tag.tree" "$w/$tag.opts" "$@" > "$w/$tag.diff" 2>&1; then
		problem "$tag: the files read differ from $(basename "$manifest") ($(wc -l < "$w/$tag.diff") entries):"
		problems="$problems
$(head -20 "$w/$tag.diff" | sed 's/^/      /')"
	fi
}

check_image() {
	problems=
	want_version=$(header version)
	devnames=$(header devices)
	pf=$(header passphrase)
	if [ -z "$want_version" ] || [ -z "$devnames" ]; then
		problem "$manifest has no %version or %devices line"
		return
	fi
	if [ -n "$pf" ]; then
		export BCACHEFS_PASSPHRASE_FILE="$vdir/$pf"
	else
		unset BCACHEFS_PASSPHRASE_FILE
	fi
	decompress "$w/pristine" || return
	$TREE getfattr-script "$manifest" > "$w/getfattr.sh"
	first=$w/pristine/${devnames%% *}

	# 1. the image is of its directory's version
	bch sb show-super --json "$first"
	v=$(sed -n 's/.*"format_version": *\([0-9]*\).*/\1/p' "$w/sb.last" | head -1)
	[ "$v" = "$want_version" ] || problem "show-super says format version ${v:-?}, the directory v$want_version"
	# an unclean image must still be one (its point is the replay)
	if [ "$(header unclean)" = yes ] && ! grep -q '"clean_shutdown": *false' "$w/sb.last"; then
		problem "the image is marked %unclean but show-super does not say clean_shutdown false"
	fi

	# 2.-3. read-only: fsck -n, extract, options; nothing written
	cp -a "$w/pristine" "$w/ro"
	hashes "$w/ro" > "$w/ro.sha"
	expect_rc 0 fsck-n fsck -n -f -c "$(members "$w/ro")"
	if [ -n "$pf" ] && [ "${COMPAT_KEYRING:-}" = 1 ]; then
		expect_rc 0 unlock unlock -q -k session --passphrase-file "$vdir/$pf" "$first"
	fi
	read_tree ro "$w/ro"
	hashes "$w/ro" | cmp -s - "$w/ro.sha" ||
		problem "fsck -n, image extract or image shell -o read_only wrote to the image"

	# 4. repair finds nothing to repair, and leaves every file
	cp -a "$w/pristine" "$w/fix"
	expect_rc 0 fsck-y fsck -y -f "$(members "$w/fix")"
	expect_rc 0 fsck-n2 fsck -n -f "$(members "$w/fix")"
	read_tree fix "$w/fix"

	# 5. read-write on a fresh copy: a new file, fsck clean, the rest kept
	cp -a "$w/pristine" "$w/rw"
	seq -f 'compat read-write check, line %06g' 1 2000 > "$w/new"	# 74 KiB
	if expect_rc 0 rw image put "$(members "$w/rw")" "$w/new" /compat-rw-check; then
		expect_rc 0 rw-fsck fsck -n -f "$(members "$w/rw")"
		bch rw-cat image cat "$(members "$w/rw")" /compat-rw-check
		cmp -s "$w/rw-cat.last" "$w/new" || problem "the file put read back different (image cat)"
		read_tree rw "$w/rw" --ignore . --ignore compat-rw-check
	fi
}

# the per-file options of one image (make-images.sh)
if [ "${1:-}" = --options-only ]; then
	vdir=${COMPAT_DIR:?--options-only needs COMPAT_DIR}
	manifest=$vdir/$2.manifest
	w=$(mktemp -d "${TMPDIR:-/tmp}/bch-compat-opts.XXXXXX")
	devnames=$(header devices)
	pf=$(header passphrase)
	[ -n "$pf" ] && export BCACHEFS_PASSPHRASE_FILE="$vdir/$pf"
	problems=
	decompress "$w/p" && $TREE getfattr-script "$manifest" |
		"$B" image shell -o read_only "$(members "$w/p")"
	rc=$?
	rm -rf "$w"
	[ -z "$problems" ] || { echo "$problems" >&2; exit 1; }
	exit $rc
fi

if [ -n "${COMPAT_DIR:-}" ]; then
	dirs=$COMPAT_DIR
else
	dirs=$(ls "$here" | grep -E '^v[0-9]+$' | sort -k1.2n | sed "s|^|$here/|")
fi
if [ -z "$dirs" ]; then
	echo "FAIL compat: no image directories in $here"
	echo "compat: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
for vdir in $dirs; do
	for manifest in "$vdir"/*.manifest; do
		[ -e "$manifest" ] || continue
		name=$(basename "$manifest" .manifest)
		label=$(basename "$vdir")/$name
		if [ $# -gt 0 ]; then
			case " $* " in *" $name "*|*" $label "*) ;; *) continue ;; esac
		fi
		w=$(mktemp -d "${TMPDIR:-/tmp}/bch-compat-$name.XXXXXX")
		t0=$(date +%s)
		check_image
		secs=$(($(date +%s) - t0))
		if [ -z "$problems" ]; then
			pass=$((pass + 1))
			echo "PASS $label (${secs} s)"
			[ "${COMPAT_KEEP:-0}" = 1 ] || rm -rf "$w"
		else
			fail=$((fail + 1))
			echo "FAIL $label (${secs} s; kept $w):$problems"
		fi
	done
done
echo "compat: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
