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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_btree.h"
#include "bcachefs.h"
#include "btree.h"
#include "btree_prefetch.h"
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

	if (s->c->read_only && (pass == 5 || pass == 8)) {
		fsck_lock(s);
		bch_btree_cache_evict_unused(s->c);
		fsck_unlock(s);
	}

	if (!s->ctx->progress)
		return;
	snprintf(buf, sizeof(buf), "%s%s", what, s->label);
	s->ctx->progress(s->ctx, pass, buf);
}

/*
 * Two threads (fsck -n without snapshots, once pass 3 trusted every leaf):
 * the passes over files mostly read their own btrees, so the inode keys
 * are entered in the table and pass 8 runs on a second thread (B) while
 * the first (A) checks the extents (passes 5 and 6, its own cursor over
 * the inode keys) and then pass 7.  What holds it together:
 *   - the table is B's alone until it ends: A judges the work keys by the
 *     inode keys it reads itself (fsck_extents.c work_judge());
 *   - pass 7 needs the bad flags B found: A waits for B's inode keys;
 *   - the btree cache (and c->err_msg) is shared: every lookup in it, by
 *     either thread, is under cache (fsck_lock()); a streamed leaf's keys
 *     are read without it (each thread its own stream buffer);
 *   - reports: A's are printed as they come; B's are kept (at most
 *     PAR_KEEP, then B waits) and printed after pass 7's and the pass 8
 *     heading, in the order B made them: the output is the one thread's,
 *     byte for byte, counts included.  Nothing is repaired (-n), so no
 *     report's answer changes what either thread does next.
 * Repairs, -y, snapshots, encrypted filesystems: one thread, as before.
 * Memory: B's stream buffer, its stack's touched pages, the kept reports,
 * and the dirents' interior nodes cached beside the extents' (1M files:
 * see bench/fsck_scale.sh).
 */
#define PAR_KEEP	256

struct par_report {
	enum bch_fsck_problem	p;
	char			*where, *detail;
};

struct fsck_par {
	pthread_mutex_t		cache;		/* the btree cache */
	pthread_mutex_t		lock;		/* what follows */
	pthread_cond_t		cond;
	bool			loaded;		/* B: every inode key is in the table */
	bool			live;		/* A printed its reports: B prints its own */
	bool			stop;		/* A failed: B ends, its reports dropped */
	struct par_report	keep[PAR_KEEP];
	size_t			nr_keep;
	struct fstate		*b;
	int			load_r, r;	/* B: loading the table; all */
	/* B's counts, added at the end: A's extents++ beside them would bounce a cache line per key */
	_Alignas(64) struct bch_fsck_file_stats stats;
};

void fsck_lock(struct fstate *s)
{
	if (s->par)
		pthread_mutex_lock(&s->par->cache);
}

void fsck_unlock(struct fstate *s)
{
	if (s->par)
		pthread_mutex_unlock(&s->par->cache);
}

pthread_mutex_t *fsck_par_cache(struct fstate *s)
{
	return s->par ? &s->par->cache : NULL;
}

bool fsck_par_defer(struct fstate *s, enum bch_fsck_problem prob, const char *where, const char *detail)
{
	struct fsck_par *p = s->par;
	bool now;

	pthread_mutex_lock(&p->lock);
	while (!p->live && !p->stop && p->nr_keep == PAR_KEEP)
		pthread_cond_wait(&p->cond, &p->lock);
	now = p->live;
	if (!now && !p->stop) {
		struct par_report *k = &p->keep[p->nr_keep++];
		k->p = prob;
		k->where = strdup(where ? where : "");
		k->detail = detail ? strdup(detail) : NULL;
		if (!k->where || (detail && !k->detail))
			abort();
	}
	pthread_mutex_unlock(&p->lock);
	return now;
}

static int load_key(struct fstate *s, const struct bch_bkey *k)
{
	return k->p.inode == 0 && k->type == BCH_BKEY_inode ? fsck_load_inode(s, k) : 0;
}

/*
 * B's exit, held back until A has freed the table and the passes' memory
 * (fstate_free()).  A thread's exit runs glibc's per-thread cleanup, whose
 * code (the RPC state's) lies in a part of libc nothing else maps: mapped
 * then, it came on top of the passes' working memory, at their peak (1M
 * files: 192 KB of libc text while the table and pass 5's cursors were
 * live).  A waits for done instead of the exit; the rest of B's state is
 * freed by then, so this is all B touches after done.
 */
struct fsck_par_exit {
	pthread_mutex_t		lock;
	pthread_cond_t		cond;
	bool			done;		/* B: its work is over */
	bool			go;		/* A: B may exit */
	pthread_t		thread;
};

/* B: say it is done, then wait to be let go. */
static void par_exit_wait(struct fsck_par_exit *e)
{
	pthread_mutex_lock(&e->lock);
	e->done = true;
	pthread_cond_broadcast(&e->cond);
	while (!e->go)
		pthread_cond_wait(&e->cond, &e->lock);
	pthread_mutex_unlock(&e->lock);
}

/* A: wait until B's work is over (not its exit). */
static void par_wait_done(struct fsck_par_exit *e)
{
	pthread_mutex_lock(&e->lock);
	while (!e->done)
		pthread_cond_wait(&e->cond, &e->lock);
	pthread_mutex_unlock(&e->lock);
}

/* A, the passes' memory freed: let B exit and join it. */
static void par_release(struct fstate *s)
{
	struct fsck_par_exit *e = s->par_exit;

	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->go = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	pthread_join(e->thread, NULL);
	pthread_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->lock);
	free(e);
	s->par_exit = NULL;
}

/* B: the inode keys into the table, then pass 8. */
static void *par_thread(void *arg)
{
	struct fstate *b = arg;
	struct fsck_par *p = b->par;
	struct fsck_par_exit *e = b->par_exit;
	int r = fsck_for_each_key(b, BCH_BTREE_ID_inodes, load_key);

	pthread_mutex_lock(&p->lock);
	p->load_r = r;
	p->loaded = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (!r && !b->err)
		r = fsck_check_root(b);
	if (!r && !b->err)
		r = fsck_for_each_key(b, BCH_BTREE_ID_dirents, fsck_check_dirent);
	if (!r && !b->err)
		r = fsck_for_each_key(b, BCH_BTREE_ID_xattrs, fsck_check_xattr);
	p->r = r;
	par_exit_wait(e);	/* p and b are A's from here on */
	return NULL;
}

/* May passes 5 to 8 take two threads (see above)? */
static bool par_ok(struct fstate *s)
{
	struct bch_fs *c = s->c;

	return s->ctx->mode == BCH_FSCK_NO && c->read_only && c->fsck_copies_checked &&
	       !s->snapshots && bch_leaf_stream_allowed(c) && !getenv("BCACHEFS_FSCK_ONE_THREAD");
}

/*
 * Start B on a copy of s (the table made, empty); s->par set: A leaves the
 * table alone.  false: it did not start (one thread, as before).
 */
static bool par_start(struct fstate *s)
{
	struct fsck_par *p = calloc(1, sizeof(*p));
	struct fstate *b = malloc(sizeof(*b));
	struct fsck_par_exit *e = calloc(1, sizeof(*e));

	if (!p || !b || !e)
		goto fail;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	*b = *s;
	b->par_exit = e;
	b->par = p;
	b->par_b = true;
	b->max_inum = 0;	/* no progress ticks from B */
	b->stats = &p->stats;
	memset(&b->inode_keys, 0, sizeof(b->inode_keys));
	memset(&b->work_keys, 0, sizeof(b->work_keys));
	p->b = b;
	pthread_mutex_init(&p->cache, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	s->par = p;
	if (!pthread_create(&e->thread, NULL, par_thread, b)) {	/* its stack: the pages it touches */
		s->par_exit = e;
		return true;
	}
	s->par = NULL;
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->cache);
	pthread_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->lock);
fail:
	free(e);
	free(b);
	free(p);
	return false;
}

/* A: wait for B's table (pass 7 needs the bad flags it found). */
static int par_wait_loaded(struct fstate *s)
{
	struct fsck_par *p = s->par;

	pthread_mutex_lock(&p->lock);
	while (!p->loaded)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	s->flags_bad = p->b->flags_bad;		/* B is done with them */
	s->nr_flags_bad = p->b->nr_flags_bad;
	s->flags_bad_cap = p->b->flags_bad_cap;
	p->b->flags_bad = NULL;
	p->b->nr_flags_bad = p->b->flags_bad_cap = 0;
	return p->load_r;
}

/*
 * A, passes 5 to 7 printed (print: A did not fail): B's reports kept so
 * far, then B's own from now on; wait for B and take what it made.
 */
static int par_end(struct fstate *s, bool print)
{
	struct fsck_par *p = s->par;
	struct fstate *b = p->b;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->nr_keep; i++) {
		if (print)
			bch_fsck_problem(s->ctx, p->keep[i].p, p->keep[i].where, p->keep[i].detail);
		free(p->keep[i].where);
		free(p->keep[i].detail);
	}
	p->nr_keep = 0;
	p->live = print;
	p->stop = !print;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	par_wait_done(s->par_exit);	/* its exit waits for fstate_free() */
	s->par = NULL;
	s->inode_keys.lock = s->work_keys.lock = NULL;	/* fstate_free() exits them again */

	s->stats->inodes += p->stats.inodes;
	s->stats->dirs += p->stats.dirs;
	s->stats->files += p->stats.files;
	s->stats->dirents += p->stats.dirents;
	s->stats->xattrs += p->stats.xattrs;
	/* what B wrote (A did not touch these since the copy) */
	s->inodes = b->inodes;
	s->bp_sum_keys = b->bp_sum_keys;
	s->bp_sum_names = b->bp_sum_names;
	s->nr_unlinked_keys = b->nr_unlinked_keys;
	s->moved = b->moved;
	s->nr_moved = b->nr_moved;
	s->xattr_inum = b->xattr_inum;
	s->xattr_pieces = b->xattr_pieces;
	s->nr_xattr_pieces = b->nr_xattr_pieces;
	s->xattr_pieces_cap = b->xattr_pieces_cap;
	s->orphan_inum = b->orphan_inum;
	s->orphan_id = b->orphan_id;
	s->orphan_seen = b->orphan_seen;
	s->dir_cached = b->dir_cached;
	s->dir_inode = b->dir_inode;
	free(b->flags_bad);
	if (!s->err)
		s->err = b->err;
	int r = p->r;
	free(b);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->cache);
	free(p);
	free(s->work_q);
	s->work_q = NULL;
	s->nr_work_q = s->work_q_at = s->work_q_cap = 0;
	return r;
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
	free(s->work_q);
	par_release(s);		/* last: B's exit maps libc's thread cleanup */
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
	fsck_map_fit(&s->inodes.extra, ctx->dir_keys + 16);
	for (unsigned d = 0; d < c->nr_devs; d++) {
		if (!c->devs[d] || !c->devs[d]->bdev)
			continue;
		struct bch_member *m = bch_sb_member(c->sb, d);
		fsck_claims_init(&s->claimed[d], m->nbuckets * m->bucket_size / c->sb->block_size);
	}
	heading(s, 5, "extents");
	if (whole)
		r = fsck_check_alloc(s);
	bool par = !r && par_ok(s) && par_start(s);
	fsck_lock(s);
	fsck_cursor_init(&s->inode_keys, c, BCH_BTREE_ID_inodes);
	fsck_cursor_init(&s->work_keys, c, BCH_BTREE_ID_rebalance_work);
	fsck_unlock(s);
	s->inode_keys.lock = s->work_keys.lock = fsck_par_cache(s);
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
	if (par) {
		int lr = par_wait_loaded(s);
		if (!r)
			r = lr;
	}
	if (!r && !s->err)
		heading(s, 7, "inodes");
	if (!r && !s->err) {
		fsck_lock(s);	/* pass 7 looks each inode it reports up: B waits meanwhile */
		r = fsck_check_inodes(s);
		fsck_unlock(s);
	}
	if (!r && !s->err)
		heading(s, 8, "directory entries and xattrs");
	if (par) {
		/* B made pass 8: its reports after A's, then B's table is the one */
		int pr = par_end(s, !r && !s->err);
		if (!r)
			r = pr;
	} else {
		if (!r && !s->err)
			r = fsck_check_root(s);
		if (!r && !s->err)
			r = fsck_for_each_key(s, BCH_BTREE_ID_dirents, fsck_check_dirent);
		if (!r && !s->err)
			r = fsck_for_each_key(s, BCH_BTREE_ID_xattrs, fsck_check_xattr);
	}
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
