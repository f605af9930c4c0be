// SPDX-License-Identifier: GPL-2.0
/*
 * acl.c - POSIX ACLs in their xattr form (see acl.h).
 */
#include <string.h>

#include "acl.h"
#include "fs_ops.h"

#define ACL_VERSION	2
#define TAG_USER_OBJ	0x01
#define TAG_USER	0x02
#define TAG_GROUP_OBJ	0x04
#define TAG_GROUP	0x08
#define TAG_MASK	0x10
#define TAG_OTHER	0x20

struct acl_entry {
	uint16_t	tag;
	uint16_t	perm;
	uint32_t	id;
};

static unsigned nr_entries(size_t len)
{
	return len < 4 ? 0 : (len - 4) / sizeof(struct acl_entry);
}

static struct acl_entry *entry(const void *v, unsigned i)
{
	return (struct acl_entry *)((char *)v + 4 + i * sizeof(struct acl_entry));
}

bool bch_acl_valid(const void *v, size_t len)
{
	uint32_t version;
	unsigned seen = 0;

	if (len < 4 || (len - 4) % sizeof(struct acl_entry))
		return false;
	memcpy(&version, v, 4);
	if (version != ACL_VERSION)
		return false;
	for (unsigned i = 0; i < nr_entries(len); i++) {
		struct acl_entry e;
		memcpy(&e, entry(v, i), sizeof(e));
		switch (e.tag) {
		case TAG_USER_OBJ: case TAG_GROUP_OBJ: case TAG_MASK: case TAG_OTHER:
			if (seen & e.tag)
				return false;	/* at most one of each */
			seen |= e.tag;
			break;
		case TAG_USER: case TAG_GROUP:
			seen |= e.tag;
			break;
		default:
			return false;
		}
		if (e.perm & ~7)
			return false;
	}
	if ((seen & (TAG_USER_OBJ | TAG_GROUP_OBJ | TAG_OTHER)) != (TAG_USER_OBJ | TAG_GROUP_OBJ | TAG_OTHER))
		return false;
	/* named entries need a mask */
	return !(seen & (TAG_USER | TAG_GROUP)) || (seen & TAG_MASK);
}

static int find(const void *v, size_t len, uint16_t tag)
{
	for (unsigned i = 0; i < nr_entries(len); i++) {
		struct acl_entry e;
		memcpy(&e, entry(v, i), sizeof(e));
		if (e.tag == tag)
			return i;
	}
	return -1;
}

static unsigned perm_of(const void *v, int i)
{
	struct acl_entry e;

	if (i < 0)
		return 0;
	memcpy(&e, entry(v, i), sizeof(e));
	return e.perm & 7;
}

static void set_perm(void *v, int i, unsigned perm)
{
	struct acl_entry e;

	if (i < 0)
		return;
	memcpy(&e, entry(v, i), sizeof(e));
	e.perm = perm & 7;
	memcpy(entry(v, i), &e, sizeof(e));
}

mode_t bch_acl_to_mode(const void *v, size_t len)
{
	int mask = find(v, len, TAG_MASK);

	return (perm_of(v, find(v, len, TAG_USER_OBJ)) << 6) |
	       (perm_of(v, mask >= 0 ? mask : find(v, len, TAG_GROUP_OBJ)) << 3) |
	       perm_of(v, find(v, len, TAG_OTHER));
}

bool bch_acl_is_equiv_mode(const void *v, size_t len)
{
	return find(v, len, TAG_USER) < 0 && find(v, len, TAG_GROUP) < 0 && find(v, len, TAG_MASK) < 0;
}

void bch_acl_chmod(void *v, size_t len, mode_t mode)
{
	int mask = find(v, len, TAG_MASK);

	set_perm(v, find(v, len, TAG_USER_OBJ), mode >> 6);
	set_perm(v, mask >= 0 ? mask : find(v, len, TAG_GROUP_OBJ), mode >> 3);
	set_perm(v, find(v, len, TAG_OTHER), mode);
}

void bch_acl_create_masq(const void *def, size_t len, void *out, mode_t *mode)
{
	int mask;

	memcpy(out, def, len);
	mask = find(out, len, TAG_MASK);
	set_perm(out, find(out, len, TAG_USER_OBJ), perm_of(out, find(out, len, TAG_USER_OBJ)) & (*mode >> 6));
	if (mask >= 0)
		set_perm(out, mask, perm_of(out, mask) & (*mode >> 3));
	else
		set_perm(out, find(out, len, TAG_GROUP_OBJ),
			 perm_of(out, find(out, len, TAG_GROUP_OBJ)) & (*mode >> 3));
	set_perm(out, find(out, len, TAG_OTHER), perm_of(out, find(out, len, TAG_OTHER)) & *mode);
	*mode = (*mode & ~0777) | bch_acl_to_mode(out, len);
}

mode_t bch_acl_update_mode(mode_t mode, gid_t gid, const struct bch_caller *cr,
			   const void *v, size_t len)
{
	mode = (mode & 07000) | bch_acl_to_mode(v, len);
	if (!cr->cap_fsetid && !bch_caller_in_group(cr, gid))
		mode &= ~S_ISGID;
	return mode;
}
