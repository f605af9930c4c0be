// SPDX-License-Identifier: GPL-2.0
/*
 * fs_read.c - a file's read planned under the engine lock (see fs_read.h).
 *
 * Only what bch_fs_read() answers with data is planned; every error and
 * every special case is left to it, so its answers stay the only ones.
 */
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "fs_read.h"
#include "inode.h"
#include "io.h"
#include "opts.h"
#include "snapshot.h"

static int plan(struct bch_fs *c, uint64_t inum, uint64_t offset, size_t len, struct bch_read_plan *pl)
{
	struct bch_inode i;
	struct bch_io_opts o;

	if (bch_inode_get(c, inum, &i) || (!S_ISREG(i.mode) && !S_ISLNK(i.mode)))
		return -EAGAIN;
	bch_io_opts_get(c, &i, &o);
	if (o.promote_target && !c->read_only && !c->opts.v[Opt_fsck])
		return -EAGAIN;		/* reads add cached copies: that writes */
	if (offset >= i.size)
		len = 0;
	else if (len > i.size - offset)
		len = i.size - offset;
	if (len > SSIZE_MAX)
		len = SSIZE_MAX & ~4095UL;
	return bch_data_read_plan(c, inum, offset, len, pl);
}

int bch_fs_read_plan(struct bch_fs *c, uint64_t inum, uint64_t offset, size_t len,
		     struct bch_read_plan *pl)
{
	struct bch_view v;
	int r = bch_view_enter(c, &v, &inum);

	if (r)
		return r;
	r = plan(c, inum, offset, len, pl);
	bch_view_exit(&v);
	return r;
}
