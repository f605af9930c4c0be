// SPDX-License-Identifier: GPL-2.0
/* acl_test.c - POSIX ACL xattr helpers: validation, mode sync, inheritance. */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/stat.h>

#include "acl.h"

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
