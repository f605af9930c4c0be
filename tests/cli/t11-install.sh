# make install honours DESTDIR and PREFIX, installs links and man pages
make -s -C "$ROOT" install DESTDIR="$PWD/root" PREFIX=/usr >log 2>&1 || fail "install: $(cat log)"
for f in usr/sbin/bcachefs usr/sbin/mkfs.bcachefs usr/sbin/fsck.bcachefs \
	 usr/share/man/man8/bcachefs.8 usr/share/man/man5/bcachefs-format.5; do
	[ -e root/$f ] || fail "$f not installed"
done
[ "$(readlink root/usr/sbin/mkfs.bcachefs)" = bcachefs ] || fail "mkfs link"
expect_rc 0 root/usr/sbin/mkfs.bcachefs --fs-size=32M x.img
man -l root/usr/share/man/man8/bcachefs.8 >/dev/null 2>&1 || command -v man >/dev/null || true
