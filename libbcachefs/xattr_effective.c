// SPDX-License-Identifier: GPL-2.0
/*
 * xattr_effective.c - "bcachefs_effective.<option>" (see xattr_effective.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "errcode.h"
#include "fs_ops.h"
#include "inode.h"
#include "io.h"
#include "super.h"
#include "xattr_effective.h"

#define PREFIX_LEN	(sizeof(BCH_XATTR_EFFECTIVE_PREFIX) - 1)

bool bch_xattr_is_effective(const char *name)
{
	return !strncmp(name, BCH_XATTR_EFFECTIVE_PREFIX, PREFIX_LEN);
}

/*
 * Does the inode carry a value of its own (set on it, or copied from its
 * directory when it was made) for id?
 */
static bool inode_has_opt(const struct bch_inode *i, enum bch_opt_id id)
{
	return bch_inode_opt_raw(i, id) != 0;
}

/* The per-file option named (without the prefix), or -1. */
static int effective_opt(const char *name)
{
	if (!bch_fs_is_inode_opt(name))
		return -1;
	return bch_opt_lookup(name);
}

int bch_inode_opt_effective_text(struct bch_fs *c, const struct bch_inode *inode,
				 enum bch_opt_id id, char *buf, size_t len)
{
	struct bch_io_opts o;
	uint64_t v;

	if (!bch_fs_is_inode_opt(bch_opt_table[id].name))
		return -EINVAL;
	bch_io_opts_get(c, inode, &o);
	switch (id) {
	case Opt_foreground_target:	 v = o.target; break;
	case Opt_background_target:	 v = o.background_target; break;
	case Opt_promote_target:	 v = o.promote_target; break;
	case Opt_compression:		 v = o.compression; break;
	case Opt_background_compression: v = o.background_compression; break;
	case Opt_data_checksum:		 v = o.csum_type; break;
	case Opt_data_replicas:		 v = o.replicas; break;
	case Opt_erasure_code:		 v = o.erasure_code; break;
	default:			 return -EINVAL;
	}
	if (bch_opt_table[id].type == BCH_OPT_TARGET)
		bch_target_to_text(c->sb, v, buf, len);
	else
		bch_opt_to_text(id, v, buf, len);
	return 0;
}

ssize_t bch_xattr_effective_get(struct bch_fs *c, uint64_t inum, const char *name, void *buf,
				size_t size)
{
	struct bch_inode i;
	char text[128];
	int id = effective_opt(name + PREFIX_LEN), r;

	if (id < 0)
		return -ENODATA;
	if ((r = bch_inode_get(c, inum, &i)))
		return r < 0 ? -bch_err_class(r) : r;
	if (!S_ISREG(i.mode) && !S_ISDIR(i.mode))
		return -ENODATA;	/* they take no options: nothing is written with one */
	if ((r = bch_inode_opt_effective_text(c, &i, id, text, sizeof(text))))
		return r;
	size_t len = strlen(text);
	if (size && len > size)
		return -ERANGE;
	if (size)
		memcpy(buf, text, len);
	return (ssize_t)len;
}

int bch_xattr_effective_list(const struct bch_inode *inode, char *buf, size_t size,
			     size_t *total)
{
	for (unsigned id = 0; id < BCH_OPT_NR; id++) {
		const char *name = bch_opt_table[id].name;
		if (!bch_fs_is_inode_opt(name) || !inode_has_opt(inode, id))
			continue;
		size_t need = PREFIX_LEN + strlen(name) + 1;
		if (size) {
			if (*total + need > size)
				return -ERANGE;
			memcpy(buf + *total, BCH_XATTR_EFFECTIVE_PREFIX, PREFIX_LEN);
			memcpy(buf + *total + PREFIX_LEN, name, need - PREFIX_LEN);
		}
		*total += need;
	}
	return 0;
}

int bch_xattr_effective_set(struct bch_fs *c, const char *name)
{
	return bch_fs_err(c, -EOPNOTSUPP, "%s: read-only (the value in use); change the option "
			  "with bcachefs.%s", name, name + PREFIX_LEN);
}
