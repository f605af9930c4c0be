// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_dirents.c - pass 8: directory entries and xattrs (see fsck_files.h).
 *
 * Checks
 *   dirent_bad_dir, dirent_dangling, dirent_to_root (deleted), dirent_type_wrong
 * (corrected), dirent_misplaced (re-hashed: a lookup must reach it),
 * dirent_duplicate (a lookup finds an earlier one), dir_multiple_links;
 * xattr_no_inode, xattr_misplaced.  Names are counted for passes 9 and 10.
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

static void dirent_where(struct fstate *s, uint64_t dir, const char *name, char *buf, size_t len)
{
	char dw[640];

	fsck_inode_where(s->c, dir, dw, sizeof(dw));
	snprintf(buf, len, "%s entry \"%s\"", dw, name);
}

int fsck_check_dirent(struct fstate *s, const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	char where[1024], detail[1024];

	if (k->type != BCH_BKEY_dirent)
		return 0;
	for (size_t i = 0; i < s->nr_moved; i++)
		if (bpos_eq(s->moved[i], k->p))
			return 0;	/* re-hashed here earlier in this pass: already counted */
	const struct bch_dirent *d = bkey_val(k);
	char name[BCH_NAME_MAX + 1];
	memcpy(name, d->name, d->name_len);
	name[d->name_len] = 0;
	uint64_t dir = k->p.inode, slot = k->p.offset;
	struct ino_info *di = fsck_ino_find(&s->inodes, dir, false), *ti = fsck_ino_find(&s->inodes, d->inum, false);
	s->stats->dirents++;
#define WHERE()	dirent_where(s, dir, name, where, sizeof(where))

	enum bch_fsck_problem prob = BCH_FSCK_PROBLEM_NR;
	if (!di || !S_ISDIR(ino_mode(di)))
		prob = BCH_FSCK_dirent_bad_dir;
	else if (!ti || !ino_has_key(ti))
		prob = BCH_FSCK_dirent_dangling;
	else if (d->inum == BCH_ROOT_INO)
		prob = BCH_FSCK_dirent_to_root;
	if (prob != BCH_FSCK_PROBLEM_NR) {
		snprintf(detail, sizeof(detail), "-> inode %" PRIu64, (uint64_t)d->inum);
		WHERE();
		if (fsck_fixing(s, prob, where, detail))
			fsck_fix_done(s, prob, bch_fs_dirent_delete(c, dir, slot));
		return s->err;
	}

	if (!S_ISDIR(ino_mode(ti))) {
		/* a file whose data pass 7 found lost: its names go (it goes to lost+found) */
		struct ino_extra *x = fsck_ino_extra(&s->inodes, d->inum, false);
		if (x && x->state == INO_DATA_LOST) {
			int r = bch_fs_dirent_delete(c, dir, slot);
			if (r) {
				WHERE();
				snprintf(s->ctx->err_msg, sizeof(s->ctx->err_msg), "%.400s: %s", where,
					 bch_err_str(r));
				s->err = r;
			}
			return s->err;
		}
	}

	unsigned want = bch_mode_to_dtype(ino_mode(ti));
	if (d->d_type != want) {
		snprintf(detail, sizeof(detail), "type %u, inode is %u", d->d_type, want);
		WHERE();
		if (fsck_fixing(s, BCH_FSCK_dirent_type_wrong, where, detail)) {
			struct bch_bkey *n = bch_bkey_dup(k);
			((struct bch_dirent *)bkey_val(n))->d_type = want;
			fsck_fix_done(s, BCH_FSCK_dirent_type_wrong, fsck_put_key(c, BCH_BTREE_ID_dirents, n));
			free(n);
			if (s->err)
				return s->err;
		}
	}

	/* hash: a lookup of the name must reach this entry */
	uint64_t first;
	int r = 0;
	if (s->dir_cached != dir) {
		/*
		 * Names hash with the directory's seed, which pass 6 kept in its
		 * side entry (0: not known, e.g. a directory fsck made: its key
		 * is read).  Only the seed is used.
		 */
		const struct ino_extra *dx = fsck_ino_extra(&s->inodes, dir, false);
		if (dx && dx->hash_seed) {
			memset(&s->dir_inode, 0, sizeof(s->dir_inode));
			s->dir_inode.hash_seed = dx->hash_seed;
		} else {
			r = bch_inode_get(c, dir, &s->dir_inode);
		}
		s->dir_cached = r ? 0 : dir;
	}
	struct bch_inode dinode = s->dir_inode;
	/* at the slot its name hashes to, the lookup's first probe is this entry */
	if (!r && bch_fs_dirent_hash(c, &dinode, name) == slot)
		first = slot;
	else if (!r)
		r = bch_fs_dirent_first(c, dir, &dinode, name, &first);
	if (r == -ENOENT) {
		snprintf(detail, sizeof(detail), "at %" PRIu64 ", name hashes to %" PRIu64, slot,
			 bch_fs_dirent_hash(c, &dinode, name));
		WHERE();
		if (fsck_fixing(s, BCH_FSCK_dirent_misplaced, where, detail)) {
			r = bch_fs_dirent_delete(c, dir, slot);
			if (!r)
				r = bch_fs_dirent_add(c, dir, name, d->inum, bch_mode_to_dtype(ino_mode(ti)));
			fsck_fix_done(s, BCH_FSCK_dirent_misplaced, r);
			if (r)
				return r;
			/* count it now, at its new place, and not again if the scan gets there */
			if (bch_fs_dirent_first(c, dir, &dinode, name, &first))
				return 0;
			slot = first;
			s->moved = realloc(s->moved, (s->nr_moved + 1) * sizeof(*s->moved));
			if (!s->moved)
				abort();
			s->moved[s->nr_moved++] = POS(dir, slot, 0);
		} else {
			first = slot;	/* count it as it is */
		}
	} else if (r) {
		return r;
	} else if (first != slot) {
		snprintf(detail, sizeof(detail), "same name as the entry at %" PRIu64, first);
		WHERE();
		if (fsck_fixing(s, BCH_FSCK_dirent_duplicate, where, detail)) {
			fsck_fix_done(s, BCH_FSCK_dirent_duplicate, bch_fs_dirent_delete(c, dir, slot));
			return s->err;
		}
	}

	if (S_ISDIR(ino_mode(ti))) {
		struct ino_extra *tx = fsck_ino_extra(&s->inodes, d->inum, true);
		if (ino_named(ti)) {
			char tw[640];
			fsck_inode_where(c, d->inum, tw, sizeof(tw));
			snprintf(detail, sizeof(detail), "%s is already named in directory %" PRIu64, tw,
				 tx->parent);
			WHERE();
			if (fsck_fixing(s, BCH_FSCK_dir_multiple_links, where, detail)) {
				fsck_fix_done(s, BCH_FSCK_dir_multiple_links, bch_fs_dirent_delete(c, dir, slot));
				return s->err;
			}
		}
		if (!ino_named(ti)) {
			tx->parent = dir;
			tx->parent_slot = slot;
		}
		fsck_ino_set_names(&s->inodes, d->inum, ti, fsck_ino_names(&s->inodes, d->inum, ti) + 1);
		fsck_ino_extra(&s->inodes, dir, true)->subdirs++;
	} else {
		/*
		 * A file of one link: its name must be where its pointer points
		 * (a second name is another problem, nlink_wrong, and not taken).
		 * Of several: the name with the pointer's fingerprint.  Taken so
		 * here, confirmed as a whole in pass 10 (the sums).
		 */
		if ((ti->bits & (INO_HAS_BP | INO_LOADED | INO_BP_NAMED)) == (INO_HAS_BP | INO_LOADED) &&
		    (fsck_ino_nlink(&s->inodes, d->inum, ti) == 1 ||
		     fsck_ino_fp(&s->inodes, d->inum) == fsck_bp_fp(dir, slot))) {
			ti->bits |= INO_BP_NAMED;
			s->bp_sum_names += fsck_bp_hash(d->inum, dir, slot);
		}
		fsck_ino_set_names(&s->inodes, d->inum, ti, fsck_ino_names(&s->inodes, d->inum, ti) + 1);
	}
	return 0;
#undef WHERE
}

int fsck_check_xattr(struct fstate *s, const struct bch_bkey *k)
{
	char where[640];

	if (k->type != BCH_BKEY_xattr)
		return 0;
	s->stats->xattrs++;
	struct ino_info *ii = fsck_ino_find(&s->inodes, k->p.inode, false);
	if (!ii || !ino_has_key(ii)) {
		fsck_inode_where(s->c, k->p.inode, where, sizeof(where));
		if (fsck_fixing(s, BCH_FSCK_xattr_no_inode, where, NULL))
			fsck_fix_done(s, BCH_FSCK_xattr_no_inode, fsck_delete_key(s->c, BCH_BTREE_ID_xattrs, k->p));
		return s->err;
	}
	struct bch_inode i;
	uint64_t first;
	int r = bch_inode_get(s->c, k->p.inode, &i);
	if (!r)
		r = bch_fs_xattr_first(s->c, k->p.inode, &i, k, &first);
	if (r == -ENOENT) {
		fsck_inode_where(s->c, k->p.inode, where, sizeof(where));
		if (fsck_fixing(s, BCH_FSCK_xattr_misplaced, where, NULL))
			fsck_fix_done(s, BCH_FSCK_xattr_misplaced, bch_fs_xattr_reinsert(s->c, k->p.inode, &i, k));
		return s->err;
	}
	return r;
}
