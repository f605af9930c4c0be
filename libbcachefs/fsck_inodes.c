// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_inodes.c - pass 7: inodes (see fsck_files.h).
 *
 * Checks
 *   inode_sectors_wrong: an inode's sector count against its extents (counted by
 * pass 6); every inode is entered in the table the later passes use.
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

int fsck_scan_inode(struct fstate *s, const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_inode)
		return 0;
	const struct bch_inode *i = bkey_val(k);
	struct ino_info *ii = fsck_ino_find(&s->inodes, k->p.offset, true);

	ii->mode = i->mode;
	s->stats->inodes++;
	if (S_ISDIR(i->mode))
		s->stats->dirs++;
	else
		s->stats->files++;
	if (ii->sectors != i->sectors) {
		char where[640], detail[96];
		fsck_inode_where(s->c, k->p.offset, where, sizeof(where));
		snprintf(detail, sizeof(detail), "%" PRIu64 " sectors, extents cover %" PRIu64,
			 (uint64_t)i->sectors, ii->sectors);
		if (fsck_fixing(s, BCH_FSCK_inode_sectors_wrong, where, detail)) {
			struct bch_inode n = *i;
			n.sectors = ii->sectors;
			fsck_fix_done(s, BCH_FSCK_inode_sectors_wrong, fsck_update_inode(s->c, k->p.offset, &n));
		}
	}
	return s->err;
}
