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

static int check_links_one(struct fstate *s, uint64_t inum, struct ino_info *ii,
			   const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	char where[640], detail[160];

	if (k->type != BCH_BKEY_inode)
		return 0;
	const struct bch_inode in = *(const struct bch_inode *)bkey_val(k);
	struct bch_inode n = in;
	/* directories: always a side entry; files: one if the first name is not the pointer's */
	struct ino_extra *x = fsck_ino_extra(&s->inodes, inum, S_ISDIR(in.mode));
	uint32_t names = fsck_ino_names(&s->inodes, inum, ii);
	uint32_t want = S_ISDIR(in.mode) ? 2 + x->subdirs : names;
	if (!S_ISDIR(in.mode) && !names)
		return 0;	/* left unreachable: reported in pass 9 */
	if (in.nlink != want || (in.flags & BCH_INODE_UNLINKED)) {
		fsck_inode_where(c, inum, where, sizeof(where));
		snprintf(detail, sizeof(detail), "nlink %u, counted %u%s", (unsigned)in.nlink, want,
			 (in.flags & BCH_INODE_UNLINKED) ? " (marked unlinked)" : "");
		if (fsck_fixing(s, BCH_FSCK_nlink_wrong, where, detail)) {
			n.nlink = want;
			n.flags &= ~BCH_INODE_UNLINKED;
			bch_fsck_fixed(s->ctx, BCH_FSCK_nlink_wrong);
		}
	}
	/* the back pointer: a directory's one name; one of a file's names */
	bool ok = true;
	uint64_t parent = x ? x->parent : 0, parent_slot = x ? x->parent_slot : 0;
	if (inum == BCH_ROOT_INO) {
		ok = !in.dir;
	} else if (S_ISDIR(in.mode)) {
		ok = in.dir == parent && in.dir_offset == parent_slot;
	} else if (in.dir && !((ii->flags & INO_BP_NAMED) &&
			       ii->bp_fp == fsck_bp_fp(in.dir, in.dir_offset))) {
		struct bch_bkey *d;
		ok = !bch_btree_lookup(c, BCH_BTREE_ID_dirents, POS(in.dir, in.dir_offset, 0), &d);
		if (ok) {
			ok = d->type == BCH_BKEY_dirent &&
			     ((const struct bch_dirent *)bkey_val(d))->inum == inum;
			free(d);
		}
		/*
		 * No side entry: pass 8 saw the first name where the pointer's
		 * fingerprint was, so the key changed since; nothing to put back.
		 */
		if (!x)
			ok = true;
	}
	if (!ok) {
		fsck_inode_where(c, inum, where, sizeof(where));
		snprintf(detail, sizeof(detail), "parent %" PRIu64 " offset %" PRIu64, (uint64_t)in.dir,
			 (uint64_t)in.dir_offset);
		if (fsck_fixing(s, BCH_FSCK_inode_back_pointer, where, detail)) {
			n.dir = inum == BCH_ROOT_INO ? 0 : parent;
			n.dir_offset = inum == BCH_ROOT_INO ? 0 : parent_slot;
			bch_fsck_fixed(s->ctx, BCH_FSCK_inode_back_pointer);
		}
	}
	if (memcmp(&n, &in, sizeof(n)))
		return fsck_update_inode(c, inum, &n);
	return 0;
}

static int check_links_key(struct fstate *s, const struct bch_bkey *k)
{
	struct ino_info *ii = fsck_ino_find(&s->inodes, k->p.offset, false);

	if (!ii || !ii->type)
		return 0;
	return check_links_one(s, k->p.offset, ii, k);
}

/*
 * What check_links_one() decides from the inode's key, decided from the
 * table: true when it would find nothing (false: maybe).
 */
static bool links_ok(struct fstate *s, uint64_t inum, const struct ino_info *ii)
{
	bool dir = S_ISDIR(ino_mode(ii));
	const struct ino_extra *x = dir ? fsck_ino_extra(&s->inodes, inum, false) : NULL;

	if (!(ii->flags & INO_LOADED) || (dir && !x))
		return false;
	uint32_t want = dir ? 2 + x->subdirs : fsck_ino_names(&s->inodes, inum, ii);
	if (!dir && !want)
		return true;
	if (fsck_ino_nlink(&s->inodes, inum, ii) != want || (ii->flags & INO_UNLINKED))
		return false;
	if (inum == BCH_ROOT_INO)
		return !(ii->flags & INO_HAS_BP);
	if (dir)	/* its one name is where its parent pointer points */
		return (ii->flags & INO_HAS_BP)
			? x->parent && ii->bp_fp == fsck_bp_fp(x->parent, x->parent_slot)
			: !x->parent;
	return !(ii->flags & INO_HAS_BP) || (ii->flags & INO_BP_NAMED);
}

int fsck_check_links(struct fstate *s)
{
	/*
	 * Repairs so far may have changed inodes behind the table's copies:
	 * then every inode key is read again.  Otherwise the table says which
	 * inodes need a look (a file whose parent pointer is not among the
	 * names counted is looked at, as its dirent must be read).
	 */
	if (bch_fsck_nr_fixed(s->ctx)) {
		int r = fsck_for_each_key(s, BCH_BTREE_ID_inodes, check_links_key);
		return r ? r : s->err;
	}
	size_t pos = 0;
	uint64_t inum;
	for (struct ino_info *ii; !s->err && !s->ctx->cancelled &&
				  (ii = fsck_ino_next(&s->inodes, &pos, &inum));) {
		if (!ii->type || links_ok(s, inum, ii))
			continue;
		struct bch_bkey *k;
		int r = bch_btree_lookup(s->c, BCH_BTREE_ID_inodes, POS(0, inum, 0), &k);
		if (r == -BCH_ERR_key_not_found)
			continue;
		if (r)
			return r;
		r = check_links_one(s, inum, ii, k);
		free(k);
		if (r)
			return r;
	}
	return s->err;
}
