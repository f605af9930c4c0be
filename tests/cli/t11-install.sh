# make install honours DESTDIR and PREFIX, installs links and man pages
make -s -C "$ROOT" install DESTDIR="$PWD/root" PREFIX=/usr >log 2>&1 || fail "install: $(cat log)"
for f in usr/sbin/bcachefs usr/sbin/mkfs.bcachefs usr/sbin/fsck.bcachefs \
	 usr/share/man/man8/bcachefs.8 usr/share/man/man5/bcachefs-format.5; do
	[ -e root/$f ] || fail "$f not installed"
done
[ "$(readlink root/usr/sbin/mkfs.bcachefs)" = bcachefs ] || fail "mkfs link"
expect_rc 0 root/usr/sbin/mkfs.bcachefs --fs-size=32M x.img
# the installed man pages render: man --warnings -l exits 0, prints no warning
# (undefined macros included) or error
# (120 columns: the format page's widest table needs more than 80), and
# gives the page's NAME and DESCRIPTION sections.  man-db is not a make check
# package (Debian's base system has it): without man this part is a counted skip.
if command -v man >/dev/null; then
	for p in man8/bcachefs.8 man5/bcachefs-format.5; do
		MANWIDTH=120 man --warnings -l root/usr/share/man/$p >man.out 2>man.err ||
			fail "man -l $p exited $?: $(head -20 man.err)"
		[ ! -s man.err ] || fail "man -l $p warned: $(head -20 man.err)"
		expect_in man.out '^NAME$'
		expect_in man.out '^DESCRIPTION$'
		expect_in man.out 'bcachefs'
	done
else
	skip_part "the man pages are not rendered: no man (man-db) on this machine"
fi

# make uninstall (same DESTDIR and PREFIX) removes what install put there and
# nothing else: a file of another package beside ours stays; the mount
# helper link in MOUNT_HELPER_DIR goes only while it is the one install made
mkdir -p root/usr/sbin && echo other > root/usr/sbin/other-tool
make -s -C "$ROOT" uninstall DESTDIR="$PWD/root" PREFIX=/usr >log 2>&1 || fail "uninstall: $(cat log)"
left=$(cd root && find . ! -type d ! -path ./usr/sbin/other-tool)
[ -z "$left" ] || fail "make uninstall left: $left"
[ -e root/usr/sbin/other-tool ] || fail "make uninstall removed another package's file"
make -s -C "$ROOT" install DESTDIR="$PWD/r2" PREFIX=/usr MOUNT_HELPER_DIR=/sbin >log 2>&1 || fail "install: $(cat log)"
[ "$(readlink r2/sbin/mount.fuse.bcachefs)" = /usr/sbin/bcachefs ] || fail "no /sbin helper link"
ln -sf /usr/bin/other r2/sbin/mount.fuse.bcachefs	# another one took its place since
make -s -C "$ROOT" uninstall DESTDIR="$PWD/r2" PREFIX=/usr MOUNT_HELPER_DIR=/sbin >log 2>&1 || fail "uninstall: $(cat log)"
[ -L r2/sbin/mount.fuse.bcachefs ] || fail "uninstall removed a mount helper it did not install"
rm r2/sbin/mount.fuse.bcachefs
left=$(cd r2 && find . ! -type d)
[ -z "$left" ] || fail "make uninstall left: $left"
# the same PREFIX again: nothing left to remove is no error
make -s -C "$ROOT" uninstall DESTDIR="$PWD/r2" PREFIX=/usr >log 2>&1 || fail "uninstall twice: $(cat log)"
