// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_links.c - pass 10: link counts and parent pointers (see fsck_files.h).
 *
 * Checks
 *   nlink_wrong (files: their names; directories: 2 + subdirectories),
 * inode_back_pointer (a directory's parent pointer names its one name, a
 * file's one of its names).
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

static int check_links_one(struct fstate *s, const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	char where[640], detail[160];

	if (k->type != BCH_BKEY_inode)
		return 0;
	struct ino_info *ii = fsck_ino_find(&s->inodes, k->p.offset, false);
	if (!ii || !ii->mode)
		return 0;
	const struct bch_inode in = *(const struct bch_inode *)bkey_val(k);
	struct bch_inode n = in;
	uint32_t want = S_ISDIR(in.mode) ? 2 + ii->subdirs : ii->names;
	if (!S_ISDIR(in.mode) && !ii->names)
		return 0;	/* left unreachable: reported in pass 9 */
	if (in.nlink != want || (in.flags & BCH_INODE_UNLINKED)) {
		fsck_inode_where(c, ii->inum, where, sizeof(where));
		snprintf(detail, sizeof(detail), "nlink %u, counted %u%s", (unsigned)in.nlink, want,
			 (in.flags & BCH_INODE_UNLINKED) ? " (marked unlinked)" : "");
		if (fsck_fixing(s, BCH_FSCK_nlink_wrong, where, detail)) {
			n.nlink = want;
			n.flags &= ~BCH_INODE_UNLINKED;
			bch_fsck_fixed(s->ctx, BCH_FSCK_nlink_wrong);
		}
	}
	/* pass 7's back pointer: the first name of a directory; one of a file's names */
	bool ok = true;
	if (ii->inum == BCH_ROOT_INO) {
		ok = !in.dir;
	} else if (S_ISDIR(in.mode)) {
		ok = in.dir == ii->parent && in.dir_offset == ii->parent_slot;
	} else if (in.dir && !(in.dir == ii->parent && in.dir_offset == ii->parent_slot)) {
		struct bch_bkey *d;
		ok = !bch_btree_lookup(c, BCH_BTREE_ID_dirents, POS(in.dir, in.dir_offset, 0), &d);
		if (ok) {
			ok = d->type == BCH_BKEY_dirent &&
			     ((const struct bch_dirent *)bkey_val(d))->inum == ii->inum;
			free(d);
		}
	}
	if (!ok) {
		fsck_inode_where(c, ii->inum, where, sizeof(where));
		snprintf(detail, sizeof(detail), "parent %" PRIu64 " offset %" PRIu64, (uint64_t)in.dir,
			 (uint64_t)in.dir_offset);
		if (fsck_fixing(s, BCH_FSCK_inode_back_pointer, where, detail)) {
			n.dir = ii->inum == BCH_ROOT_INO ? 0 : ii->parent;
			n.dir_offset = ii->inum == BCH_ROOT_INO ? 0 : ii->parent_slot;
			bch_fsck_fixed(s->ctx, BCH_FSCK_inode_back_pointer);
		}
	}
	if (memcmp(&n, &in, sizeof(n)))
		return fsck_update_inode(c, ii->inum, &n);
	return 0;
}

/*
 * What check_links_one() decides from the inode's key, decided from the
 * copy in the table: true when it would find nothing (false: maybe).
 */
static bool links_ok(const struct ino_info *ii)
{
	uint32_t want = S_ISDIR(ii->mode) ? 2 + ii->subdirs : ii->names;

	if (!S_ISDIR(ii->mode) && !ii->names)
		return true;
	if (ii->i_nlink != want || ii->i_unlinked)
		return false;
	if (ii->inum == BCH_ROOT_INO)
		return !ii->i_dir;
	if (S_ISDIR(ii->mode) || ii->i_dir)
		return ii->i_dir == ii->parent && ii->i_dir_offset == ii->parent_slot;
	return true;
}

int fsck_check_links(struct fstate *s)
{
	/*
	 * Repairs so far may have changed inodes behind the table's copies:
	 * then every inode key is read again.  Otherwise the table says which
	 * inodes need a look (a file with several names whose parent pointer
	 * is not its first name is looked at, as its dirent must be read).
	 */
	if (bch_fsck_nr_fixed(s->ctx)) {
		int r = fsck_for_each_key(s, BCH_BTREE_ID_inodes, check_links_one);
		return r ? r : s->err;
	}
	size_t pos = 0;
	for (struct ino_info *ii; !s->err && !s->ctx->cancelled &&
				  (ii = fsck_ino_next(&s->inodes, &pos));) {
		if (!ii->mode || links_ok(ii))
			continue;
		struct bch_bkey *k;
		int r = bch_btree_lookup(s->c, BCH_BTREE_ID_inodes, POS(0, ii->inum, 0), &k);
		if (r == -BCH_ERR_key_not_found)
			continue;
		if (r)
			return r;
		r = check_links_one(s, k);
		free(k);
		if (r)
			return r;
	}
	return s->err;
}
