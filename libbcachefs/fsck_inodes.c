// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_inodes.c - pass 7: inodes (see fsck_files.h).
 *
 * Checks
 *   inode_data_lost: a file whose extents were in a btree node that could not
 * be read (nor found by the scan): named, and moved to lost+found (pass 9).
 *   inode_sectors_wrong: an inode's sector count against its extents (pass 6
 * compares them, in step with the inode keys, and lists the differences;
 * pass 7 reports and repairs them).  Pass 6 also enters every inode key in
 * the table (mode, link count, parent pointer: what passes 8-10 compare), so
 * later passes read no inode key again unless a repair ran.
 *   inode_flags_unknown: flag bits this version does not know.
 *   inode_flags_no_feature: file flags (chattr) or a project ID on a
 * filesystem without BCH_FEATURE_INODE_FLAGS.  Both found in pass 6 (the
 * engine's key validation leaves them to fsck), cleared in pass 7.
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

/*
 * Pass 6 enters every inode key in the table as it passes (what passes 8-10
 * compare); directories get their side entry.
 */
int fsck_load_inode(struct fstate *s, const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_inode)
		return 0;
	const struct bch_inode *i = bkey_val(k);
	struct ino_info ii;

	fsck_ino_get_new(&s->inodes, k->p.offset, &ii);
	ino_set_mode(&ii, i->mode);
	fsck_ino_set_nlink(&s->inodes, k->p.offset, &ii, i->nlink);
	if (bch_inode_flags_check(s->c->sb->features, i) != BCH_INODE_FLAGS_OK &&
	    (!s->nr_flags_bad || s->flags_bad[s->nr_flags_bad - 1].offset != k->p.offset)) {
		if (s->nr_flags_bad == s->flags_bad_cap) {
			s->flags_bad_cap = s->flags_bad_cap ? 2 * s->flags_bad_cap : 16;
			s->flags_bad = realloc(s->flags_bad, s->flags_bad_cap * sizeof(*s->flags_bad));
			if (!s->flags_bad)
				abort();
		}
		s->flags_bad[s->nr_flags_bad++] = k->p;
	}
	ii.bits |= INO_LOADED;
	if (i->flags & BCH_INODE_UNLINKED) {
		fsck_ino_extra(&s->inodes, k->p.offset, true)->unlinked = true;
		s->nr_unlinked_keys++;
	}
	if (i->dir) {
		ii.bits |= INO_HAS_BP;
		s->bp_sum_keys += fsck_bp_hash(k->p.offset, i->dir, i->dir_offset);
		/* which of several names is the pointer's: its fingerprint tells (pass 8) */
		if (!S_ISDIR(i->mode) && i->nlink != 1)
			fsck_ino_set_fp(&s->inodes, k->p.offset, fsck_bp_fp(i->dir, i->dir_offset));
	}
	fsck_ino_put(&s->inodes, k->p.offset, &ii);
	s->stats->inodes++;
	if (S_ISDIR(i->mode)) {
		struct ino_extra *x = fsck_ino_extra(&s->inodes, k->p.offset, true);
		if (i->dir)
			x->bp_fp = fsck_bp_fp(i->dir, i->dir_offset);
		x->hash_seed = i->hash_seed;
		s->stats->dirs++;
	} else {
		s->stats->files++;
	}
	return 0;
}

/* Did pass 3 lose (for good) extent keys of inode inum with an unreadable node? */
static bool extents_lost(struct bch_fs *c, uint64_t inum)
{
	for (size_t i = 0; i < c->nr_extents_lost; i++)
		if (c->extents_lost[i][0].inode <= inum && inum <= c->extents_lost[i][1].inode)
			return true;
	return false;
}

/*
 * A file that lost extents with a btree node would read back as holes
 * (zeros) where its data was: never leave it looking whole.  Its names are
 * taken away (pass 8; pass 9 then puts it in lost+found, pass 10 mends the
 * link count), and the report names it by its path.
 */
static void data_lost(struct fstate *s, const struct sectors_wrong *w, const char *where)
{
	char detail[96];

	snprintf(detail, sizeof(detail), "%" PRIu64 " of %" PRIu64 " sectors lost",
		 w->i_sectors - w->counted, w->i_sectors);
	if (!fsck_fixing(s, BCH_FSCK_inode_data_lost, where, detail))
		return;
	/* pass 8 deletes every name of it (hard links too) */
	fsck_ino_extra(&s->inodes, w->inum, true)->state = INO_DATA_LOST;
	s->nr_data_lost++;
	fsck_fix_done(s, BCH_FSCK_inode_data_lost, 0);
}

/*
 * An older version of the key (at pos) may still sit in an earlier bset of
 * its leaf, and every version is validated when the leaf is read: write the
 * leaf whole, as pass 4 does for keys it drops.
 */
static int rewrite_leaf(struct bch_fs *c, struct bch_bpos pos)
{
	struct btree *b;
	int r = bch_btree_find_node(c, BCH_BTREE_ID_inodes, 0, pos, &b);

	if (r)
		return r;
	r = bch_btree_node_rewrite(c, b);
	bch_btree_node_put(c, b);
	return r;
}

/*
 * Pass 7: the file flags of the inode whose key pass 6 found bad at pos:
 * unknown bits, then flags without the feature.
 */
static void flags_bad(struct fstate *s, struct bch_bpos pos)
{
	uint64_t inum = pos.offset;
	struct bch_inode in;
	char where[640], detail[160], names[96];
	bool fix_unknown = false, fix_feature = false;
	int r = bch_inode_get(s->c, inum, &in);

	if (r)
		return;		/* gone since pass 6 (a repair): nothing left to clear */
	fsck_inode_where(s->c, inum, where, sizeof(where));
	enum bch_inode_flags_state st = bch_inode_flags_check(s->c->sb->features, &in);
	if (st == BCH_INODE_FLAGS_UNKNOWN) {
		snprintf(detail, sizeof(detail), "flags 0x%x, unknown 0x%x", (unsigned)in.flags,
			 (unsigned)bch_inode_flags_unknown(&in));
		if (fsck_fixing(s, BCH_FSCK_inode_flags_unknown, where, detail)) {
			in.flags &= ~bch_inode_flags_unknown(&in);
			fix_unknown = true;
		}
		st = bch_inode_flags_check(s->c->sb->features, &in);
	}
	if (st == BCH_INODE_FLAGS_NO_FEATURE) {
		bch_inode_flags_to_text(in.flags, names, sizeof(names));
		snprintf(detail, sizeof(detail), "flags %s, project %u%s", names[0] ? names : "none",
			 (unsigned)in.project, bch_inode_opt_raw(&in, Opt_erasure_code) ?
			 ", erasure_code option" : "");
		if (fsck_fixing(s, BCH_FSCK_inode_flags_no_feature, where, detail)) {
			bch_inode_flags_clear_no_feature(s->c->sb->features, &in);
			fix_feature = true;
		}
	}
	if (!fix_unknown && !fix_feature)
		return;
	r = fsck_update_inode(s->c, inum, &in);
	if (!r)
		r = rewrite_leaf(s->c, pos);
	if (fix_unknown)
		fsck_fix_done(s, BCH_FSCK_inode_flags_unknown, r);
	if (fix_feature)
		fsck_fix_done(s, BCH_FSCK_inode_flags_no_feature, r);
}

/* Pass 7: the sector counts and file flags pass 6 found wrong. */
int fsck_check_inodes(struct fstate *s)
{
	for (size_t n = 0; n < s->nr_flags_bad && !s->err && !s->ctx->cancelled; n++)
		flags_bad(s, s->flags_bad[n]);
	for (size_t n = 0; n < s->nr_sectors_wrong && !s->err && !s->ctx->cancelled; n++) {
		const struct sectors_wrong *w = &s->sectors_wrong[n];
		char where[640], detail[96];
		fsck_inode_where(s->c, w->inum, where, sizeof(where));
		if (w->counted < w->i_sectors && extents_lost(s->c, w->inum))
			data_lost(s, w, where);
		snprintf(detail, sizeof(detail), "%" PRIu64 " sectors, extents cover %" PRIu64,
			 w->i_sectors, w->counted);
		if (fsck_fixing(s, BCH_FSCK_inode_sectors_wrong, where, detail)) {
			struct bch_inode in;
			int r = bch_inode_get(s->c, w->inum, &in);
			if (!r) {
				in.sectors = w->counted;
				r = fsck_update_inode(s->c, w->inum, &in);
			}
			fsck_fix_done(s, BCH_FSCK_inode_sectors_wrong, r);
		}
	}
	return s->err;
}
