// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_files_run.c - the driver of passes 5 to 11 (bch_fsck_files(), fsck.h),
 * apart from the helpers the passes share (fsck_files.c).
 *
 * Without snapshots the passes run once over the file btrees as they are.
 * With snapshots (after pass 4, fsck_snapshots.c, made the tree and the
 * subvolumes sound) passes 5 to 10 run once per subvolume whose snapshot is
 * a leaf, in its view (snapshot.h):
 *   - the key cursor (fsck_cursor_peek()) shows one key per position, the
 *     one that snapshot sees, whiteouts skipped; lookups go through
 *     bch_vlookup() and fs_ops, which read in the current view;
 *   - repairs are transactions in the view, so they are written in its
 *     leaf (a delete over an ancestor's key becomes a whiteout): a key of
 *     an interior snapshot is checked through every leaf that sees it, and
 *     mended in each that needs it, never in place;
 *   - the root is the subvolume's root inode; names of other subvolumes
 *     (BCH_DT_SUBVOL) count as subdirectories (fsck_dirents.c).
 * What no view owns is checked once: the alloc keys against the pointers
 * (with the first view), the reservations promised and pass 11 over the
 * raw keys of every snapshot.
 *
 * Cost: per live leaf, one walk of the keys it sees (and the keys of
 * other snapshots lying beside them, read and skipped): about the number
 * of subvolumes times a check without snapshots.  Memory: one view's
 * inode table at a time, freed before the next view's is made.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_btree.h"
#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"
#include "extents.h"
#include "fsck.h"
#include "snapshot.h"
#include "super.h"
#include "fsck_files.h"

/*
 * "pass N: what" (with snapshots: which subvolume's view).  Checking only,
 * the passes after pass 3 walk a few btrees each (5-6 the extents and
 * inodes, 8 the dirents and xattrs): the interior nodes the last pass
 * kept in the cache for its lookups go first, so they are not resident
 * beside the next pass's (1M files: the dirents root, 90 KB, through
 * passes 5-7; the extents and inodes roots, 180 KB, through 8-10).  A
 * node needed again is read again (a few per pass).
 */
static void heading(struct fstate *s, unsigned pass, const char *what)
{
	char buf[160];

	if (s->c->read_only && (pass == 5 || pass == 8))
		bch_btree_cache_evict_unused(s->c);

	if (!s->ctx->progress)
		return;
	snprintf(buf, sizeof(buf), "%s%s", what, s->label);
	s->ctx->progress(s->ctx, pass, buf);
}

/* What the passes of one view leave to free. */
static void fstate_free(struct fstate *s)
{
	for (unsigned d = 0; d < BCH_SB_MEMBERS_MAX; d++)
		fsck_claims_exit(&s->claimed[d]);
	fsck_ino_exit(&s->inodes);
	if (s->inode_keys.c)
		fsck_cursor_exit(&s->inode_keys);
	if (s->work_keys.c)
		fsck_cursor_exit(&s->work_keys);
	free(s->sectors_wrong);
	free(s->flags_bad);
	free(s->moved);
	free(s->xattr_pieces);
	free(s->bp_lost);
}

/*
 * Passes 5 to 10 over what the current view sees (without snapshots: the
 * whole filesystem).  whole: the checks of things no view owns are made
 * here too (the alloc keys against the pointers, the reservations promised).
 */
static int files_view(struct fstate *s, bool whole)
{
	struct bch_fsck_ctx *ctx = s->ctx;
	struct bch_fs *c = s->c;
	int r = 0;

	s->cur_inum = UINT64_MAX;
	uint64_t last;
	bool found;
	if (!bch_btree_last_offset(c, BCH_BTREE_ID_inodes, POS(0, UINT64_MAX, UINT32_MAX), &last, &found) &&
	    found)
		s->max_inum = last;
	/* pass 3 counted the inode keys: the table is sized once */
	fsck_ino_init(&s->inodes, ctx->leaf_keys[BCH_BTREE_ID_inodes], s->max_inum);
	/* and the directories' side table: growing it would hold old and new at once */
	fsck_map_reserve(&s->inodes.extra, ctx->dir_keys + 16);
	for (unsigned d = 0; d < c->nr_devs; d++) {
		if (!c->devs[d] || !c->devs[d]->bdev)
			continue;
		struct bch_member *m = bch_sb_member(c->sb, d);
		fsck_claims_init(&s->claimed[d], m->nbuckets * m->bucket_size / c->sb->block_size);
	}
	heading(s, 5, "extents");
	if (whole)
		r = fsck_check_alloc(s);
	fsck_cursor_init(&s->inode_keys, c, BCH_BTREE_ID_inodes);
	fsck_cursor_init(&s->work_keys, c, BCH_BTREE_ID_rebalance_work);
	if (!r)
		r = fsck_for_each_key(s, BCH_BTREE_ID_extents, fsck_check_extent);
	if (!r)
		r = fsck_extents_done(s);
	for (unsigned d = 0; d < BCH_SB_MEMBERS_MAX; d++)
		fsck_claims_exit(&s->claimed[d]);	/* pass 5's alone */
	if (!r && !s->err && !s->snapshots) {
		if (c->reserved_clean != UINT64_MAX && c->reserved_clean != s->reserved) {
			char detail[96];
			snprintf(detail, sizeof(detail), "%" PRIu64 " sectors recorded, %" PRIu64 " promised",
				 c->reserved_clean, s->reserved);
			if (fsck_fixing(s, BCH_FSCK_reserved_sectors_wrong, "clean record", detail))
				fsck_fix_done(s, BCH_FSCK_reserved_sectors_wrong, 0);
		}
		c->reserved_sectors = s->reserved;	/* what the clean close records */
	}
	fsck_cursor_exit(&s->inode_keys);	/* their leaves are not needed past pass 6 */
	fsck_cursor_exit(&s->work_keys);
	if (!r && !s->err)
		heading(s, 7, "inodes");
	if (!r && !s->err)
		r = fsck_check_inodes(s);
	if (!r && !s->err)
		heading(s, 8, "directory entries and xattrs");
	if (!r && !s->err)
		r = fsck_check_root(s);
	if (!r && !s->err)
		r = fsck_for_each_key(s, BCH_BTREE_ID_dirents, fsck_check_dirent);
	if (!r && !s->err)
		r = fsck_for_each_key(s, BCH_BTREE_ID_xattrs, fsck_check_xattr);
	if (!r && !s->err && !ctx->cancelled) {
		heading(s, 9, "directory structure");
		r = fsck_check_structure(s);
	}
	if (!r && !s->err && !ctx->cancelled) {
		heading(s, 10, "link counts");
		r = fsck_check_links(s);
	}
	return r ? r : s->err;
}

/* Reservation keys of every snapshot: each holds its own share (a copy counts again). */
static int reserved_raw(struct fstate *s, const struct bch_bkey *k)
{
	if (k->type == BCH_BKEY_reservation)
		s->reserved += (uint64_t)k->size * bch_reservation_replicas(k);
	return 0;
}

/*
 * With snapshots: passes 5 to 10 once per live leaf, in the view of the
 * subvolume that sees it, so each sees a file once, as that subvolume
 * does, and repairs go into that leaf (keys of interior snapshots are
 * checked, and mended, through every leaf that sees them).  Then the
 * checks of what no view owns, over the raw keys of every snapshot:
 * the reservations promised, and pass 11.
 *
 * Cost: per live leaf, one walk of the keys it sees (the keys of its
 * ancestors are read again for each leaf below them): a filesystem with L
 * subvolumes costs about L times one without snapshots, plus the keys
 * other snapshots hold beside them (read and skipped).  Memory: the table
 * of one view at a time (it is freed before the next view's).
 */
/* A check state over the filesystem's root, its figures into stats (NULL: no memory). */
static struct fstate *fstate_new(struct bch_fsck_ctx *ctx, struct bch_fs *c,
				 struct bch_fsck_file_stats *stats)
{
	struct fstate *s = calloc(1, sizeof(*s));

	if (s) {
		s->ctx = ctx;
		s->c = c;
		s->stats = stats;
		s->root_inum = BCH_ROOT_INO;
	}
	return s;
}

/* Pass 11 (with -c): every extent key's copies, read and checked once. */
static int data_pass(struct fstate *s, bool data)
{
	if (!data || s->ctx->cancelled)
		return 0;
	if (s->ctx->progress)
		s->ctx->progress(s->ctx, 11, "data");
	struct bch_fsck_ec_left *left = NULL;
	int r = bch_fsck_ec_data(s->ctx, s->c, &left);	/* stripes first: their repairs read good next */
	if (!r)
		r = fsck_for_each_key(s, BCH_BTREE_ID_extents, fsck_check_data);
	if (!r && s->c->roots->r[BCH_BTREE_ID_reflink].key)	/* shared data, once (reflink.h) */
		r = fsck_for_each_key(s, BCH_BTREE_ID_reflink, fsck_check_data);
	return bch_fsck_ec_data_after(s->ctx, s->c, left, r);
}

static int files_snapshots(struct bch_fsck_ctx *ctx, struct bch_fs *c, bool data,
			   struct bch_fsck_file_stats *stats)
{
	unsigned nr;
	const struct bch_subvol_info *svs = bch_subvols(c, &nr);
	struct bch_subvol_info *copy = malloc((nr + 1) * sizeof(*copy));
	bool first = true;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	memcpy(copy, svs, nr * sizeof(*copy));	/* repairs reload the table */
	for (unsigned i = 0; i < nr && !r && !ctx->cancelled; i++) {
		const struct bch_snap_info *sn = bch_snap_get(c, copy[i].v.snapshot);
		if (!sn || sn->children[0] != BCH_SNAPSHOT_NONE || sn->children[1] != BCH_SNAPSHOT_NONE)
			continue;	/* pass 4 reported it */
		struct fstate *s = calloc(1, sizeof(*s));
		struct bch_fsck_file_stats one = { 0 };
		struct bch_view v;
		if (!s)
			return -ENOMEM;
		s->ctx = ctx;
		s->c = c;
		s->stats = &one;
		s->snapshots = true;
		s->subvol = copy[i].id;
		s->root_inum = copy[i].v.root_inum;
		snprintf(s->label, sizeof(s->label), " (subvolume %u, snapshot %u)", copy[i].id,
			 copy[i].v.snapshot);
		bch_view_enter_snap(c, &v, copy[i].id, copy[i].v.snapshot, false);
		r = files_view(s, first);
		bch_view_exit(&v);
		first = false;
		stats->inodes += one.inodes;
		stats->dirs += one.dirs;
		stats->files += one.files;
		stats->extents += one.extents;
		stats->dirents += one.dirents;
		stats->xattrs += one.xattrs;
		fstate_free(s);
		free(s);
#ifdef __GLIBC__
		malloc_trim(0);	/* the next view's table in the same pages */
#endif
	}
	free(copy);
	struct fstate *s = fstate_new(ctx, c, stats);
	if (!s)
		return -ENOMEM;
	if (!r && !ctx->cancelled)
		r = fsck_for_each_key(s, BCH_BTREE_ID_extents, reserved_raw);
	if (!r && !ctx->cancelled) {
		if (c->reserved_clean != UINT64_MAX && c->reserved_clean != s->reserved) {
			char detail[96];
			snprintf(detail, sizeof(detail), "%" PRIu64 " sectors recorded, %" PRIu64 " promised",
				 c->reserved_clean, s->reserved);
			if (fsck_fixing(s, BCH_FSCK_reserved_sectors_wrong, "clean record", detail))
				fsck_fix_done(s, BCH_FSCK_reserved_sectors_wrong, 0);
		}
		c->reserved_sectors = s->reserved;
	}
	if (!r && !s->err)
		r = data_pass(s, data);	/* once, whichever snapshot a key lies in */
	if (!r)
		r = s->err;
	fstate_free(s);
	free(s);
	return r;
}

int bch_fsck_files(struct bch_fsck_ctx *ctx, struct bch_fs *c, bool data,
		   struct bch_fsck_file_stats *stats)
{
	int r = 0;

	memset(stats, 0, sizeof(*stats));
#ifdef __GLIBC__
	/*
	 * The passes before freed their working memory (node pointers, copies
	 * of keys, the arrays of nodes read and evicted) between allocations
	 * that stay: hand the holes back before the inode table is made, or
	 * they stay resident beside it (1M files: 9.9 MB -> 7.9 MB at peak).
	 */
	malloc_trim(0);
#endif
	if ((r = bch_fsck_reflink(ctx, c)) || (r = bch_fsck_ec(ctx, c)))	/* their repairs first */
		return r;
	if (bch_fs_has_snapshots(c)) {
		r = files_snapshots(ctx, c, data, stats);
	} else {
		struct fstate *s = fstate_new(ctx, c, stats);
		if (!s)
			return -ENOMEM;
		r = files_view(s, true);
		if (!r)
			r = data_pass(s, data);
		if (!r)
			r = s->err;
		fstate_free(s);
		free(s);
	}
	/* bucket counts from what the repairs kept (alloc_btree.h), so one -y converges */
	if (!r && !c->read_only && !ctx->cancelled && bch_fsck_nr_repairs(ctx))
		r = bch_alloc_btree_recount(c);
	if (r && !ctx->err_msg[0])
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s",
			 c->err_msg[0] ? c->err_msg : bch_err_str(r));
	return r;
}
