# The Debian package: built by `make deb` (debian/), unpacked with dpkg -x
# into a scratch root, its binary run from there (format, fsck, show-super,
# the mkfs./fsck. links), its dependencies and files checked, lintian without
# errors, and (with FUSE, as root) `mount -t fuse.bcachefs` through the
# package's /usr/sbin/mount.fuse.bcachefs in a private mount namespace.
# Under make check the package reuses this tree's build (make deb
# DEB_REUSE=1: packaging only, ~25 s); SOAK=1 builds it from scratch (~75 s).
# make deb on a machine without the Build-Depends: as root they are
# installed (apt-get build-dep), otherwise the exact apt-get line is printed.
# Here dpkg-checkbuilddeps is a stand-in that finds debhelper-compat missing,
# and the script runs as a user who is not root.
chmod 755 .	# the user who is not root runs from here
mkdir -m 755 fake
printf '#!/bin/sh\necho "dpkg-checkbuilddeps: error: Unmet build dependencies: debhelper-compat (= 13)" >&2\nexit 1\n' > fake/dpkg-checkbuilddeps
chmod 755 fake/dpkg-checkbuilddeps
if [ "$(id -u)" = 0 ]; then
	as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
else
	as_user() { "$@"; }
fi
run as_user env PATH="$PWD/fake:$PATH" "$ROOT/scripts/install-deps.sh" deb
[ "$rc" = 1 ] || fail "install-deps.sh deb with a dependency missing exited $rc: $(cat err)"
expect_in err 'missing: .*Unmet build dependencies: debhelper-compat'
expect_in err "^run as root: apt-get build-dep -y $ROOT\$"
# debian/control builds with what install-deps.sh build installs
devs=$(sed -n '/^BUILD_PKGS=/,/"$/p' "$ROOT/scripts/install-deps.sh" | tr -d '"\\' | tr ' ' '\n' | grep -- '-dev$')
[ -n "$devs" ] || fail "no -dev packages read from scripts/install-deps.sh"
for p in $devs; do
	grep -Eq "^(Build-Depends:)? *$p(,|$)" "$ROOT/debian/control" ||
		fail "debian/control's Build-Depends lacks $p (scripts/install-deps.sh build has it)"
done

for t in dpkg-buildpackage dh lintian dpkg-deb; do
	command -v $t >/dev/null || skip "no $t (apt-get install dpkg-dev debhelper lintian)"
done
t0=$(date +%s)
if [ -n "${SOAK:-}" ]; then
	make -s -C "$ROOT" deb DEB_DIR="$PWD/deb" >build.log 2>&1 || fail "make deb: $(tail -30 build.log)"
else
	make -s -C "$ROOT" deb DEB_REUSE=1 DEB_DIR="$PWD/deb" >build.log 2>&1 ||
		fail "make deb DEB_REUSE=1: $(tail -30 build.log)"
fi
echo "package built in $(($(date +%s) - t0)) s"
deb=$(ls deb/bcachefs-tools-own_*.deb) || fail "no .deb in deb/: $(ls deb)"

# what it installs
dpkg -x "$deb" root || fail "dpkg -x"
for f in usr/sbin/bcachefs usr/sbin/mkfs.bcachefs usr/sbin/fsck.bcachefs \
	 usr/sbin/mount.fuse.bcachefs usr/share/man/man8/bcachefs.8.gz \
	 usr/share/man/man5/bcachefs-format.5.gz usr/share/man/man8/mkfs.bcachefs.8.gz \
	 usr/share/bash-completion/completions/bcachefs usr/share/doc/bcachefs-tools-own/copyright; do
	[ -e root/$f ] || fail "package lacks /$f: $(dpkg -c "$deb" | awk '{print $6}')"
done
dpkg-deb -f "$deb" Depends > deps
expect_in deps 'libc6'
expect_in deps 'libxxhash0'
dpkg-deb -f "$deb" Recommends > recs
for p in libfuse3-3 libarchive13 libkeyutils1 liblz4-1 libzstd1; do expect_in recs "$p"; done

# its binary works from the scratch root
P=$PWD/root/usr/sbin
expect_rc 0 $P/bcachefs version
expect_rc 0 $P/mkfs.bcachefs -q --fs-size=32M x.img
expect_rc 0 $P/fsck.bcachefs -n -f x.img
expect_rc 0 $P/bcachefs show-super x.img
expect_in out 'Clean shutdown: +yes'
expect_rc 0 $P/bcachefs image put x.img deps /deps
expect_rc 0 $P/bcachefs fsck -n -f x.img
bash -n root/usr/share/bash-completion/completions/bcachefs || fail "completion does not parse"

# lintian: no errors (warnings are printed)
# its databases (mldbm-elf-*) are left in TMPDIR: in this test's directory, not the shared one
TMPDIR=$PWD lintian "$deb" >lintian.out 2>&1
lrc=$?
grep -v 'root privileges' lintian.out
grep -q '^E:' lintian.out && fail "lintian errors: $(grep '^E:' lintian.out)"
[ $lrc = 0 ] || fail "lintian exited $lrc"

# mount(8) through the package's helper (its /usr/sbin overlaid on /usr/sbin)
if [ -c /dev/fuse ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
   unshare -m --propagation private true 2>/dev/null; then
	mkdir mnt
	img=$PWD/x.img mnt=$PWD/mnt
	cat > inner.sh <<'IN'
set -u
trap 'umount "$mnt" 2>/dev/null' EXIT
mount -t overlay overlay -o lowerdir="$PWD/root/usr/sbin:/usr/sbin" /usr/sbin || exit 2
mount -t fuse.bcachefs "$img" "$mnt" || exit 1
pgrep -af "^/sbin/mount.fuse.bcachefs $img $mnt" >/dev/null || { echo "not the package's helper"; exit 1; }
echo pkg > "$mnt/pkg.txt" && umount "$mnt" || exit 1
IN
	img=$img mnt=$mnt unshare -m --propagation private sh inner.sh >inner.log 2>&1
	case $? in
	0) ;;
	2) echo "no overlay here: mount through the package not tried" ;;
	*) fail "mount -t fuse.bcachefs from the package: $(cat inner.log)" ;;
	esac
	grep -q "$mnt" /proc/mounts && fail "left $mnt mounted"
	expect_rc 0 $P/bcachefs fsck -n x.img
	expect_rc 0 $P/bcachefs image cat x.img /pkg.txt
	expect_in out '^pkg$'
fi
echo "t40 total $(($(date +%s) - t0)) s"
