// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_inodes.c - pass 7: inodes (see fsck_files.h).
 *
 * Checks
 *   inode_sectors_wrong: an inode's sector count against its extents (counted by
 * pass 6).  Every inode key is entered in the table before pass 5 (mode, size,
 * sector count: what passes 5-10 compare), so pass 7 reads no key again.
 * (inode_unlinked is decided in pass 9, once names are counted;
 * inode_back_pointer in pass 10.)
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "checksum.h"
#include "errcode.h"
#include "extents.h"
#include "fs_ops.h"
#include "fsck.h"
#include "inode.h"
#include "io.h"
#include "super.h"
#include "fsck_files.h"

/* Before pass 5: every inode key into the table (what passes 5-7 compare). */
int fsck_load_inode(struct fstate *s, const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_inode)
		return 0;
	const struct bch_inode *i = bkey_val(k);
	struct ino_info *ii = fsck_ino_find(&s->inodes, k->p.offset, true);

	ii->mode = i->mode;
	if (S_ISDIR(i->mode))
		ii->i_hash_seed = i->hash_seed;
	else
		ii->i_size = i->size;
	ii->i_sectors = i->sectors;
	ii->i_dir = i->dir;
	ii->i_dir_offset = i->dir_offset;
	ii->i_nlink = i->nlink;
	ii->i_unlinked = i->flags & BCH_INODE_UNLINKED;
	ii->i_loaded = true;
	s->stats->inodes++;
	if (S_ISDIR(i->mode))
		s->stats->dirs++;
	else
		s->stats->files++;
	return 0;
}

/* Pass 7, from the table: sector counts against what pass 6 counted. */
int fsck_check_inodes(struct fstate *s)
{
	size_t pos = 0;

	for (struct ino_info *ii; !s->err && !s->ctx->cancelled &&
				  (ii = fsck_ino_next(&s->inodes, &pos));) {
		if (!ii->mode || ii->sectors == ii->i_sectors)
			continue;
		char where[640], detail[96];
		fsck_inode_where(s->c, ii->inum, where, sizeof(where));
		snprintf(detail, sizeof(detail), "%" PRIu64 " sectors, extents cover %" PRIu64,
			 ii->i_sectors, ii->sectors);
		if (fsck_fixing(s, BCH_FSCK_inode_sectors_wrong, where, detail)) {
			struct bch_inode n;
			int r = bch_inode_get(s->c, ii->inum, &n);
			if (!r) {
				n.sectors = ii->sectors;
				r = fsck_update_inode(s->c, ii->inum, &n);
			}
			if (!r)
				ii->i_sectors = ii->sectors;
			fsck_fix_done(s, BCH_FSCK_inode_sectors_wrong, r);
		}
	}
	return s->err;
}
