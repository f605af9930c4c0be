#!/bin/sh
# Install the Debian 12 packages this project builds, tests and benchmarks with.
# The list lives here and nowhere else. Only missing packages are installed.
# As root: apt-get installs them. Otherwise: prints the command and fails.
#
# usage: scripts/install-deps.sh [build|test|bench|fuzz|deb]   (default: test)
#   deb: the Build-Depends of debian/control (what dpkg-buildpackage checks),
#   through apt-get build-dep on the source tree, which reads them from there.
set -eu

BUILD_PKGS="build-essential pkg-config uuid-dev libblkid-dev zlib1g-dev liblz4-dev \
libzstd-dev libxxhash-dev libsodium-dev libscrypt-dev libaio-dev libfuse3-dev \
libarchive-dev libcriterion-dev libkeyutils-dev libisal-dev python3"
# Libraries the binary dlopen()s on first use instead of linking
# (libbcachefs/dl.h): only their headers, from the -dev packages above, are
# used at build time, so no link records the need for these: libarchive.so.13
# (image import-tar/export-tar), libfuse3.so.3 (fusemount), libz.so.1,
# liblz4.so.1, libzstd.so.1 (compressed data), libxxhash.so.0 (xxhash64),
# libblkid.so.1 (format's check for an existing filesystem), libkeyutils.so.1
# (the kernel keyring: unlock, and every open of an encrypted filesystem),
# libisal.so.2 (ISA-L: Reed-Solomon coding of erasure-coded stripes),
# libcrypto.so.3 (OpenSSL: the bulk cipher of encrypted filesystems, optional:
# libsodium does it without).
RUNTIME_PKGS="libisal2 libarchive13 libfuse3-3 zlib1g liblz4-1 libzstd1 libxxhash0 libblkid1 libkeyutils1 libssl3"
# Tools the CLI, fsck and FUSE tests drive (mke2fs to build foreign images,
# sfdisk for partition tables, losetup for loop devices, fuse3 for
# fusermount3, jq to check --json output, python3-jsonschema to validate it
# against docs/json/, python3 for the tree generator and
# comparer, GNU tar for archive round trips, fio, stress-ng and dbench for
# the FUSE loads, attr for setfattr/getfattr on a mount, keyutils for keyctl, libcap2-bin for setcap/getcap;
# dpkg-dev, debhelper and lintian build and check the Debian package, procps'
# pgrep tells which mount helper ran; strace counts the syscalls image update makes, t81).
TEST_PKGS="e2fsprogs util-linux fdisk fuse3 xxd jq python3 python3-jsonschema tar fio stress-ng dbench acl attr \
keyutils libcap2-bin dpkg-dev debhelper lintian procps zstd strace"
BENCH_PKGS="liblmdb-dev btrfs-progs erofs-utils squashfs-tools fio hyperfine time fuse2fs gocryptfs bc rsync"
# make fuzz: clang with libFuzzer.
FUZZ_PKGS="clang libclang-rt-14-dev"

what=${1:-test}
# make deb: what dpkg-checkbuilddeps finds unmet (all of it without dpkg-dev)
if [ "$what" = deb ]; then
	src=$(cd "$(dirname "$0")/.." && pwd)
	if command -v dpkg-checkbuilddeps >/dev/null &&
	   (cd "$src" && dpkg-checkbuilddeps) 2>/dev/null; then
		exit 0
	fi
	if [ "$(id -u)" != 0 ]; then
		if command -v dpkg-checkbuilddeps >/dev/null; then
			(cd "$src" && dpkg-checkbuilddeps) 2>&1 | sed 's/^/missing: /' >&2 || true
		else
			echo "missing: dpkg-dev (dpkg-buildpackage) and the Build-Depends of debian/control" >&2
		fi
		echo "run as root: apt-get build-dep -y $src" >&2
		exit 1
	fi
	echo "installing the Build-Depends of $src/debian/control" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || true
	apt-get build-dep -y -qq "$src" >/dev/null
	exit 0
fi
case "$what" in
	build) want="$BUILD_PKGS $RUNTIME_PKGS" ;;
	test)  want="$BUILD_PKGS $RUNTIME_PKGS $TEST_PKGS" ;;
	bench) want="$BUILD_PKGS $RUNTIME_PKGS $TEST_PKGS $BENCH_PKGS" ;;
	fuzz)  want="$BUILD_PKGS $RUNTIME_PKGS $FUZZ_PKGS" ;;
	*) echo "usage: $0 [build|test|bench|fuzz|deb]" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "missing packages:$missing" >&2
	echo "run as root: apt-get install -y$missing" >&2
	exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || true
apt-get install -y -qq --no-install-recommends $missing >/dev/null
