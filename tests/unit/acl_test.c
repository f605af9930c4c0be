// SPDX-License-Identifier: GPL-2.0
/* acl_test.c - POSIX ACL xattr helpers: validation, mode sync, inheritance. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "acl.h"
#include "bcachefs.h"
#include "fs.h"
#include "fs_ops.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

struct ent { uint16_t tag, perm; uint32_t id; };

static size_t build(unsigned char *buf, const struct ent *e, unsigned n)
{
	uint32_t v = 2;
	memcpy(buf, &v, 4);
	memcpy(buf + 4, e, n * sizeof(*e));
	return 4 + n * sizeof(*e);
}

Test(acl, validation)
{
	unsigned char b[256];
	const struct ent base[] = { { 1, 6, 0 }, { 4, 4, 0 }, { 0x20, 4, 0 } };
	const struct ent named[] = { { 1, 6, 0 }, { 2, 7, 1000 }, { 4, 4, 0 }, { 0x10, 6, 0 }, { 0x20, 0, 0 } };
	const struct ent no_mask[] = { { 1, 6, 0 }, { 2, 7, 1000 }, { 4, 4, 0 }, { 0x20, 0, 0 } };
	const struct ent twice[] = { { 1, 6, 0 }, { 1, 6, 0 }, { 4, 4, 0 }, { 0x20, 0, 0 } };
	const struct ent bad_perm[] = { { 1, 9, 0 }, { 4, 4, 0 }, { 0x20, 0, 0 } };

	cr_assert(bch_acl_valid(b, build(b, base, 3)));
	cr_assert(bch_acl_valid(b, build(b, named, 5)));
	cr_assert_not(bch_acl_valid(b, build(b, no_mask, 4)), "named entries need a mask");
	cr_assert_not(bch_acl_valid(b, build(b, twice, 4)));
	cr_assert_not(bch_acl_valid(b, build(b, bad_perm, 3)));
	cr_assert_not(bch_acl_valid(b, build(b, base, 2)), "other missing");
	size_t n = build(b, base, 3);
	b[0] = 1;
	cr_assert_not(bch_acl_valid(b, n), "wrong version");
	cr_assert_not(bch_acl_valid(b, 3));
	cr_assert_not(bch_acl_valid(b, 4 + 7));
}

Test(acl, mode_sync)
{
	unsigned char b[256];
	const struct ent base[] = { { 1, 6, 0 }, { 4, 4, 0 }, { 0x20, 4, 0 } };
	const struct ent named[] = { { 1, 6, 0 }, { 2, 7, 1000 }, { 4, 4, 0 }, { 0x10, 6, 0 }, { 0x20, 0, 0 } };
	size_t n = build(b, base, 3);

	cr_assert_eq(bch_acl_to_mode(b, n), 0644);
	cr_assert(bch_acl_is_equiv_mode(b, n));
	n = build(b, named, 5);
	cr_assert_eq(bch_acl_to_mode(b, n), 0660, "the mask, not the group entry, is the group bits");
	cr_assert_not(bch_acl_is_equiv_mode(b, n));
	bch_acl_chmod(b, n, 0750);
	cr_assert_eq(bch_acl_to_mode(b, n), 0750);
	cr_assert(bch_acl_valid(b, n));
	struct ent e;
	memcpy(&e, b + 4 + 1 * sizeof(e), sizeof(e));
	cr_assert_eq(e.perm, 7, "named entries are left alone by chmod");
}

Test(acl, inheritance)
{
	unsigned char def[256], out[256];
	const struct ent d[] = { { 1, 7, 0 }, { 2, 7, 1000 }, { 4, 5, 0 }, { 0x10, 7, 0 }, { 0x20, 5, 0 } };
	size_t n = build(def, d, 5);
	mode_t mode = S_IFREG | 0666;

	bch_acl_create_masq(def, n, out, &mode);
	cr_assert_eq(mode, S_IFREG | 0664);
	cr_assert(bch_acl_valid(out, n));
	mode = S_IFDIR | 0700;
	bch_acl_create_masq(def, n, out, &mode);
	cr_assert_eq(mode, S_IFDIR | 0700);
}

/* posix_acl_update_mode(): the ACL's bits; S_ISGID only for a member or CAP_FSETID */
Test(acl, update_mode_sgid)
{
	unsigned char b[256];
	const struct ent named[] = { { 1, 7, 0 }, { 2, 6, 1000 }, { 4, 5, 0 }, { 0x10, 6, 0 }, { 0x20, 4, 0 } };
	size_t n = build(b, named, 5);
	gid_t member_of[] = { 4242 };
	struct bch_caller outsider = { .uid = 65534, .gid = 65534 };
	struct bch_caller member = { .uid = 65534, .gid = 65534, .groups = member_of, .nr_groups = 1 };
	struct bch_caller fsetid = { .uid = 65534, .gid = 65534, .cap_fsetid = true };

	cr_assert_eq(bch_acl_update_mode(S_IFREG | 02775, 4242, &outsider, b, n), 0764);
	cr_assert_eq(bch_acl_update_mode(S_IFREG | 02775, 4242, &member, b, n), 02764);
	cr_assert_eq(bch_acl_update_mode(S_IFREG | 02775, 4242, &fsetid, b, n), 02764);
	cr_assert_eq(bch_acl_update_mode(S_IFDIR | 06775, 65534, &outsider, b, n), 06764,
		     "the caller's own group keeps it; S_ISUID is not the ACL's business");
}

/* bch_fs_set_acl(): mode and access ACL together, or neither */
Test(acl, set_acl_one_transaction)
{
	char tmp[64], paths[1][TESTFS_PATH_MAX], err[256], v[256];
	unsigned char b[256];
	const struct ent named[] = { { 1, 6, 0 }, { 2, 6, 1000 }, { 4, 4, 0 }, { 0x10, 6, 0 }, { 0x20, 0, 0 } };
	size_t n = build(b, named, 5);
	struct stat st;
	uint64_t inum;

	test_tmpdir_make(tmp, sizeof(tmp), "acl");
	testfs_format(tmp, 1, 64, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 02644, 0, 0, 0, &inum), 0);
	cr_assert_eq(bch_fs_set_acl(c, inum, b, n, 0664), 0);
	cr_assert_eq(bch_fs_getattr(c, inum, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0664);
	cr_assert_eq(bch_fs_getxattr(c, inum, BCH_ACL_XATTR_ACCESS, v, sizeof(v)), (ssize_t)n);
	/* no ACL: removed, and the mode set in the same commit; without one, the mode alone */
	cr_assert_eq(bch_fs_set_acl(c, inum, NULL, 0, 0640), 0);
	cr_assert_eq(bch_fs_getattr(c, inum, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0640);
	cr_assert_eq(bch_fs_getxattr(c, inum, BCH_ACL_XATTR_ACCESS, v, sizeof(v)), -ENODATA);
	cr_assert_eq(bch_fs_set_acl(c, inum, NULL, 0, 0600), 0);
	cr_assert_eq(bch_fs_getattr(c, inum, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_eq(bch_fs_close(c), 0);

	/* refused (read-only): neither changes */
	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	cr_assert_eq(bch_fs_set_acl(c, inum, b, n, 0664), -EROFS);
	cr_assert_eq(bch_fs_getattr(c, inum, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_eq(bch_fs_getxattr(c, inum, BCH_ACL_XATTR_ACCESS, v, sizeof(v)), -ENODATA);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmp);
}
