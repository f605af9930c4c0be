// SPDX-License-Identifier: GPL-2.0
/*
 * data_job.c - evacuate and rereplicate, in steps (see data_job.h).
 *
 * Phase 0 dissolves the stripes the job is about (ec_move.h): evacuate,
 * those with a block on the member; rereplicate, those with a block on a
 * missing or failed member.  Phase 1 walks the extents btree from j->pos
 * (striped keys are phase 0's) and hands each key that
 * needs work to the move path (move.h): its compare-and-swap commit makes a
 * race with a foreground write harmless (the key is left, counted, and the
 * next pass finds it again).  Phase 2 rewrites the btree nodes that need it
 * (collected by a walk, then rewritten one by one through
 * bch_btree_node_rewrite(), which allocates only on read-write members,
 * below a shrink's limit).  Both phases repeat while the last pass raced
 * or rewrote something that may have produced new work, at most
 * MAX_PASSES times; what is left then is stuck and described.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "bkey.h"
#include "btree.h"
#include "data_job.h"
#include "ec.h"
#include "ec_move.h"
#include "errcode.h"
#include "extents.h"
#include "inode.h"
#include "io.h"
#include "journal.h"
#include "replicas.h"
#include "move.h"
#include "reflink.h"
#include "snapshot.h"
#include "super.h"

#define MAX_PASSES	4

enum { PHASE_STRIPES, PHASE_EXTENTS, PHASE_NODES, PHASE_DONE };

/* ---------------------------------------------------------- what to do */

static uint64_t from_sector(struct bch_fs *c, const struct bch_data_job *j)
{
	struct bch_member *m = bch_sb_member(c->sb, j->dev);

	return m ? j->first_bucket * m->bucket_size : 0;
}

static bool ptr_targeted(struct bch_fs *c, const struct bch_data_job *j,
			 const struct bch_extent_ptr *p)
{
	return j->kind == BCH_DATA_JOB_evacuate && p->dev == j->dev && p->offset >= from_sector(c, j);
}

/* A copy that counts: dirty, on a present member that has not failed. */
static unsigned ptr_durability(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	struct bch_member *m = bch_sb_member(c->sb, p->dev);

	if ((p->flags & BCH_EXTENT_PTR_CACHED) || !m || !bch_member_exists(m) ||
	    bch_dev_missing(c, p->dev) || m->state == BCH_MEMBER_STATE_failed)
		return 0;
	return m->durability;
}

/* Read-write members that could take a new copy of k (not holding one, not excluded). */
static unsigned devs_for_new_copy(struct bch_fs *c, const struct bch_bkey *k, uint64_t exclude)
{
	const struct bch_extent *e = bkey_val(k);
	unsigned n = 0;

	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
		if (e->ptrs[i].dev < 64 && !(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED))
			exclude |= 1ULL << e->ptrs[i].dev;
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_member *m = bch_sb_member(c->sb, i);
		n += !(exclude >> i & 1) && m && bch_member_exists(m) && !bch_dev_missing(c, i) &&
		     m->state == BCH_MEMBER_STATE_rw && (m->data_allowed & (1U << BCH_DATA_user));
	}
	return n;
}

/* The replicas k's file asks for (the last inode's, kept in the job). */
static unsigned want_replicas(struct bch_fs *c, struct bch_data_job *j, uint64_t inum)
{
	struct bch_inode inode;
	struct bch_io_opts o;

	if (j->want_inum == inum && j->want)
		return j->want;
	if (bch_inode_get(c, inum, &inode)) {
		c->err_msg[0] = 0;
		j->want = c->opts.v[Opt_data_replicas];
	} else {
		bch_io_opts_get(c, &inode, &o);
		j->want = o.replicas;
	}
	j->want_inum = inum;
	return j->want;
}

static void describe(struct bch_fs *c, struct bch_data_job *j, const struct bch_bkey *k,
		     const char *why)
{
	(void)c;
	snprintf(j->problem, sizeof(j->problem),
		 "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64 ": %s", (uint64_t)k->p.inode,
		 bch_extent_start(k), (uint64_t)k->p.offset, why);
}

static unsigned popcount32(uint32_t v)
{
	return __builtin_popcount(v);
}

/*
 * Hand k to the mover if it needs work.  Returns bytes it will move (0 if
 * none), or a negative error that stops the job.
 */
/* The mover for k: an extent, or the extent form of an indirect extent (reflink.h). */
static int mover_add(struct bch_mover *mv, const struct bch_bkey *k, const struct bch_move_op *op,
		     const struct bch_bkey *indirect)
{
	return indirect ? bch_mover_add_indirect(mv, indirect, op) : bch_mover_add(mv, k, op);
}

static int64_t extent_work_one(struct bch_fs *c, struct bch_data_job *j, struct bch_mover *mv,
			       const struct bch_bkey *k, const struct bch_bkey *indirect);

/* What k (an extent, or a reflink_v: its data moves once for all its sharers) needs. */
static int64_t extent_work(struct bch_fs *c, struct bch_data_job *j, struct bch_mover *mv,
			   const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_reflink_v)
		return extent_work_one(c, j, mv, k, NULL);
	struct bch_bkey *x = bch_reflink_v_to_extent(k);
	if (!x)
		return -ENOMEM;
	int64_t r = extent_work_one(c, j, mv, x, k);
	free(x);
	return r;
}

static int64_t extent_work_one(struct bch_fs *c, struct bch_data_job *j, struct bch_mover *mv,
			       const struct bch_bkey *k, const struct bch_bkey *indirect)
{
	const struct bch_extent *e = bkey_val(k);
	unsigned nr = bch_extent_nr_ptrs(k);
	struct bch_move_op op = { 0 };
	uint32_t dirty = 0, cached = 0;
	bool short_copies = false;
	int r;

	if (k->type != BCH_BKEY_extent)
		return 0;
	for (unsigned i = 0; i < nr; i++)
		if (e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED)
			return 0;	/* its copies are its stripe's: phase 0 */
	if (j->kind == BCH_DATA_JOB_evacuate) {
		for (unsigned i = 0; i < nr; i++)
			if (ptr_targeted(c, j, &e->ptrs[i])) {
				if (e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED)
					cached |= 1U << i;
				else
					dirty |= 1U << i;
			}
		if (!dirty && !cached)
			return 0;
		if (!dirty) {
			op.drop_only = true;
			op.rewrite = cached;
			r = mover_add(mv, k, &op, indirect);
			return r == -ENOMEM ? r : 0;
		}
		/* copies enough without the ones there (after a rereplicate): just drop those */
		unsigned rest = 0;
		for (unsigned i = 0; i < nr; i++)
			if (!(dirty >> i & 1))
				rest += ptr_durability(c, &e->ptrs[i]);
		if (rest >= want_replicas(c, j, k->p.inode)) {
			op.drop_only = true;
			op.degrade = true;
			op.rewrite = dirty | cached;
			r = mover_add(mv, k, &op, indirect);
			if (r == -ENOMEM)
				return r;
			return 0;
		}
		op.rewrite = dirty | cached;
		op.nr_new = popcount32(dirty);
		if (j->first_bucket) {
			op.same_dev = true;
		} else {
			op.exclude_devs = 1ULL << j->dev;
		}
		if (!op.same_dev && devs_for_new_copy(c, k, op.exclude_devs) < op.nr_new) {
			j->stuck++;
			j->stuck_too_few_devs++;
			describe(c, j, k, "too few read-write devices for its copies");
			return 0;
		}
	} else {
		unsigned have = 0;
		for (unsigned i = 0; i < nr; i++)
			have += ptr_durability(c, &e->ptrs[i]);
		unsigned want = want_replicas(c, j, k->p.inode);
		if (have >= want)
			return 0;
		if (!have) {
			j->stuck++;
			j->stuck_unreadable++;
			j->lost_sectors += k->size;
			describe(c, j, k, "no copy left on a present member");
			return 0;
		}
		op.nr_new = want - have;
		unsigned avail = devs_for_new_copy(c, k, 0);
		if (!avail) {
			j->stuck++;
			j->stuck_too_few_devs++;
			describe(c, j, k, "too few read-write devices for its copies");
			return 0;
		}
		if (op.nr_new > avail) {
			op.nr_new = avail;	/* as many as there are devices for */
			short_copies = true;	/* the key stays short: stuck (below) */
		}
	}
	r = mover_add(mv, k, &op, indirect);
	if (r == -BCH_ERR_no_space && op.same_dev) {
		/* a shrink with no room left below the new end: another member */
		j->ms.keys_no_space--;	/* seen once, counted once: the retry counts it */
		j->ms.keys_seen--;
		op.same_dev = false;
		r = mover_add(mv, k, &op, indirect);
	}
	if (!r && short_copies) {
		j->stuck++;
		j->stuck_too_few_devs++;
		describe(c, j, k, "too few read-write devices for all its copies");
	}
	if (!r)
		return (int64_t)e->crc.compressed_sectors * op.nr_new << BCH_SECTOR_SHIFT;
	if (r == -ENOMEM || bch_err_is_dl(r))
		return r;
	j->stuck++;
	if (r == -BCH_ERR_no_space) {
		j->stuck_no_space++;
		describe(c, j, k, "no space on the devices allowed");
	} else if (r == -EIO) {
		j->stuck_unreadable++;
		describe(c, j, k, "no readable copy");
	} else {
		describe(c, j, k, "cannot be moved");
	}
	c->err_msg[0] = 0;
	return 0;
}

/* ------------------------------------------------------------- nodes */

struct node_ref {
	unsigned	id, level;
	struct bch_bpos	max_key;
};

struct node_list {
	struct bch_data_job	*j;
	struct node_ref		*v;
	size_t			nr, cap;
	unsigned		btree_devs;
};

static bool node_needs_work(struct bch_fs *c, struct bch_data_job *j, struct btree *b,
			    unsigned btree_devs)
{
	if (j->kind == BCH_DATA_JOB_evacuate) {
		for (unsigned i = 0; i < b->nr_ptrs; i++)
			if (ptr_targeted(c, j, &b->ptrs[i]))
				return true;
		return false;
	}
	/*
	 * Copies on distinct devices count, unless the filesystem keeps its
	 * metadata copies on one device (alloc.h): a node whose two copies
	 * share a device (written while the filesystem had one member) gets
	 * one moved to the member added since.
	 */
	bool dup = bch_alloc_btree_dup(c);
	unsigned live = 0, want = c->opts.v[Opt_metadata_replicas];
	uint64_t devs = 0;
	for (unsigned i = 0; i < b->nr_ptrs; i++) {
		if (ptr_durability(c, &b->ptrs[i]) <= 0 || (!dup && (devs >> b->ptrs[i].dev) & 1))
			continue;
		devs |= 1ULL << b->ptrs[i].dev;
		live++;
	}
	if (want > (dup ? 2 * btree_devs : btree_devs))
		want = dup ? 2 * btree_devs : btree_devs;
	return live < want;
}

static int collect_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct node_list *l = priv;

	if (!node_needs_work(c, l->j, b, l->btree_devs))
		return 0;
	if (l->nr == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct node_ref *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->nr++] = (struct node_ref) { b->id, b->level, b->max_key };
	return 0;
}

/* Rewrite the nodes that need it; *rewritten, *left count them. */
static int nodes_pass(struct bch_fs *c, struct bch_data_job *j, uint64_t *rewritten, uint64_t *left)
{
	struct node_list l = { .j = j, .btree_devs = bch_alloc_nr_devs_for(c, BCH_DATA_btree) };
	int r = 0;

	*rewritten = *left = 0;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r; id++)
		r = bch_btree_walk_nodes(c, id, collect_node, &l);
	for (size_t i = 0; i < l.nr && !r; i++) {
		struct btree *b;
		if ((r = bch_btree_find_node(c, l.v[i].id, l.v[i].level, l.v[i].max_key, &b))) {
			if (r == -EIO || r == -BCH_ERR_btree_node_read) {
				j->stuck++;
				j->stuck_unreadable++;
				snprintf(j->problem, sizeof(j->problem),
					 "btree %u level %u node: no readable copy", l.v[i].id, l.v[i].level);
				c->err_msg[0] = 0;
				r = 0;
				(*left)++;
			}
			continue;
		}
		if (bpos_eq(b->max_key, l.v[i].max_key) && b->level == l.v[i].level &&
		    node_needs_work(c, j, b, l.btree_devs)) {
			r = bch_btree_node_rewrite(c, b);
			if (r == -BCH_ERR_no_space) {
				j->stuck++;
				j->stuck_no_space++;
				snprintf(j->problem, sizeof(j->problem),
					 "btree %u level %u node: no space for it on the devices allowed",
					 l.v[i].id, l.v[i].level);
				c->err_msg[0] = 0;
				r = 0;
				(*left)++;
			} else if (!r) {
				if (node_needs_work(c, j, b, l.btree_devs))
					(*left)++;
				else
					(*rewritten)++;
			}
		}
		bch_btree_node_put(c, b);
	}
	free(l.v);
	if (!r && *rewritten)
		r = bch_journal_flush(c);
	return r;
}

/* ------------------------------------------------------------- the job */

/* Which stripes the job dissolves (ec_move.h). */
static void stripes_select(struct bch_fs *c, const struct bch_data_job *j, struct bch_ec_dissolve *d)
{
	d->kind = j->kind == BCH_DATA_JOB_evacuate ? BCH_EC_SELECT_dev : BCH_EC_SELECT_degraded;
	d->dev = j->dev;
	d->from_sector = j->kind == BCH_DATA_JOB_evacuate ? from_sector(c, j) : 0;
}

struct total_walk {
	struct bch_data_job	*j;
	uint64_t		bytes;
};

static int count_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct total_walk *w = priv;

	if (node_needs_work(c, w->j, b, bch_alloc_nr_devs_for(c, BCH_DATA_btree)))
		w->bytes += (uint64_t)c->sb->btree_node_size << BCH_SECTOR_SHIFT;
	return 0;
}

int bch_data_job_init(struct bch_fs *c, struct bch_data_job *j, char *err, size_t errlen)
{
	struct bch_member *m;

	j->phase = PHASE_STRIPES;
	j->pos = POS_MIN;
	bch_ec_dissolve_exit(&j->ec);
	memset(&j->ec, 0, sizeof(j->ec));
	stripes_select(c, j, &j->ec);
	j->stripes_done = 0;
	j->passes = 0;
	j->bytes_total = j->bytes_done = 0;
	memset(&j->ms, 0, sizeof(j->ms));
	if (j->kind == BCH_DATA_JOB_evacuate) {
		m = bch_sb_member(c->sb, j->dev);
		if (!m || !bch_member_exists(m))
			return bch_errf(err, errlen, -ENOENT, "there is no member %u", j->dev);
		if (j->first_bucket && bch_dev_missing(c, j->dev))
			return bch_errf(err, errlen, -ENODEV, "member %u is missing", j->dev);
	} else if (j->kind != BCH_DATA_JOB_rereplicate) {
		return bch_errf(err, errlen, -EINVAL, "unknown data job %u", j->kind);
	}
	if (c->read_only)
		return bch_errf(err, errlen, -BCH_ERR_fs_read_only, "the filesystem is open read-only");

	/* the total: one scan (bounded memory; the keys are not kept) */
	struct bch_data_iter it;	/* an indirect extent counted once (reflink.h) */
	const struct bch_bkey *k;
	int r = 0;
	bch_data_iter_init(&it, c);
	while ((k = bch_data_iter_next(&it, &r))) {
		const struct bch_extent *e = bkey_val(k);
		unsigned nr = bch_extent_nr_ptrs(k), have = 0;
		bool striped = false;
		for (unsigned i = 0; i < nr; i++)
			striped |= !!(e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED);
		if (striped)
			continue;	/* counted with their stripes, below */
		for (unsigned i = 0; i < nr; i++) {
			if (j->kind == BCH_DATA_JOB_evacuate && ptr_targeted(c, j, &e->ptrs[i]) &&
			    !(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED))
				j->bytes_total += (uint64_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;
			have += ptr_durability(c, &e->ptrs[i]);
		}
		if (j->kind == BCH_DATA_JOB_rereplicate) {
			unsigned want = c->opts.v[Opt_data_replicas];
			if (have && have < want)
				j->bytes_total += (uint64_t)e->crc.compressed_sectors * (want - have)
						  << BCH_SECTOR_SHIFT;
		}
	}
	bch_data_iter_exit(&it);
	if (r)
		return bch_errf(err, errlen, r, "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
	/* the stripes to dissolve: their data, written data_replicas times */
	struct bch_ec_dissolve d = { .dev = j->dev };
	uint64_t nr_stripes, stripe_sectors;
	stripes_select(c, j, &d);
	if ((r = bch_ec_dissolve_count(c, &d, &nr_stripes, &stripe_sectors)))
		return bch_errf(err, errlen, r, "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
	j->bytes_total += stripe_sectors * c->opts.v[Opt_data_replicas] << BCH_SECTOR_SHIFT;
	struct total_walk w = { .j = j };
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r; id++)
		r = bch_btree_walk_nodes(c, id, count_node, &w);
	j->bytes_total += w.bytes;
	if (r)
		return bch_errf(err, errlen, r, "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
	return 0;
}

/* Phase 0: the stripes the job dissolves (j->ec's cursor and picks). */
static int stripes_step(struct bch_fs *c, struct bch_data_job *j, uint64_t budget, bool *end)
{
	struct bch_ec_dissolve *d = &j->ec;
	uint64_t moved = j->ms.keys_moved, dissolved = j->ms.stripes_dissolved;
	uint64_t no_space = d->stuck_no_space, few = d->stuck_too_few_devs;
	uint64_t unreadable = d->stuck_unreadable, raced = d->stuck_raced;

	stripes_select(c, j, d);
	int r = bch_ec_dissolve_step(c, d, budget >> BCH_SECTOR_SHIFT, &j->ms);
	j->keys_done += j->ms.keys_moved - moved;
	j->stripes_done += j->ms.stripes_dissolved - dissolved;
	uint64_t stuck = (d->stuck_no_space - no_space) + (d->stuck_too_few_devs - few) +
			 (d->stuck_unreadable - unreadable);
	if (stuck) {
		j->stuck += stuck;
		j->stuck_no_space += d->stuck_no_space - no_space;
		j->stuck_too_few_devs += d->stuck_too_few_devs - few;
		j->stuck_unreadable += d->stuck_unreadable - unreadable;
		snprintf(j->problem, sizeof(j->problem), "%s", d->problem);
	}
	if (d->stuck_raced != raced && !j->ms.keys_raced)
		j->ms.keys_raced++;	/* another pass finds it again */
	*end = r == 0;
	return r < 0 ? r : 0;
}

void bch_data_job_exit(struct bch_data_job *j)
{
	bch_ec_dissolve_exit(&j->ec);
}

static int extents_step(struct bch_fs *c, struct bch_data_job *j, uint64_t budget)
{
	struct bch_mover *mv;
	uint64_t done = 0, moved_before = j->ms.keys_moved;
	int r = bch_mover_init(c, &j->ms, &mv), r2;

	if (r)
		return r;
	while (done < budget) {
		struct bch_bkey *k = NULL;
		/* the extents, then the indirect extents (reflink.h) */
		r = bch_btree_peek_next(c, j->in_reflink ? BCH_BTREE_ID_reflink : BCH_BTREE_ID_extents,
					j->pos, POS_MAX, &k);
		if (!r) {
			if (!j->in_reflink && c->roots->r[BCH_BTREE_ID_reflink].key) {
				j->in_reflink = true;
				j->pos = POS_MIN;
				continue;
			}
			j->in_reflink = false;
			j->pos = POS_MAX;
			break;
		}
		if (r < 0)
			break;
		r = 0;
		int64_t n = extent_work(c, j, mv, k);
		j->pos = bpos_successor(k->p);
		free(k);
		if (n < 0) {
			r = (int)n;
			break;
		}
		done += n;
		/* small keys still cost: count each as one block */
		done += (uint64_t)c->sb->block_size << BCH_SECTOR_SHIFT;
	}
	r2 = bch_mover_exit(mv);
	j->keys_done += j->ms.keys_moved - moved_before;
	return r ? r : r2;
}

int bch_data_job_step(struct bch_fs *c, struct bch_data_job *j, uint64_t budget)
{
	int r;

	if (c->read_only || c->emergency_ro)
		return bch_fs_err(c, -BCH_ERR_fs_read_only, "the filesystem is read-only");
	if (j->phase == PHASE_STRIPES) {
		uint64_t written = j->ms.sectors_written;
		bool end;
		r = stripes_step(c, j, budget, &end);
		j->bytes_done += (j->ms.sectors_written - written) << BCH_SECTOR_SHIFT;
		if (r) {
			bch_ec_dissolve_exit(&j->ec);	/* a job stopped by an error holds nothing */
			return r;
		}
		if (end)
			j->phase = PHASE_EXTENTS;
		return 1;
	}
	if (j->phase == PHASE_EXTENTS) {
		uint64_t written = j->ms.sectors_written;
		r = extents_step(c, j, budget);
		j->bytes_done += (j->ms.sectors_written - written) << BCH_SECTOR_SHIFT;
		if (r)
			return r;
		if (bpos_eq(j->pos, POS_MAX))
			j->phase = PHASE_NODES;
		return 1;
	}
	if (j->phase == PHASE_NODES) {
		uint64_t rewritten, left;
		uint64_t stuck_before = j->stuck;
		if ((r = nodes_pass(c, j, &rewritten, &left)))
			return r;
		j->nodes_done += rewritten;
		j->bytes_done += rewritten * ((uint64_t)c->sb->btree_node_size << BCH_SECTOR_SHIFT);
		j->passes++;
		/* raced extents, or nodes that split while moving: another pass finds them */
		bool again = j->ms.keys_raced || (left && j->stuck == stuck_before);
		if (again && j->passes < MAX_PASSES) {
			j->stuck_raced += j->ms.keys_raced;
			j->ms.keys_raced = 0;
			j->stuck_no_space = j->stuck_too_few_devs = j->stuck_unreadable = 0;
			j->stuck = 0;
			j->lost_sectors = 0;
			j->phase = PHASE_STRIPES;
			bch_ec_dissolve_exit(&j->ec);
			j->ec.cursor = 0;
			j->pos = POS_MIN;
			j->in_reflink = false;
			return 1;
		}
		if (j->ms.keys_raced) {
			j->stuck += j->ms.keys_raced;
			j->stuck_raced = j->ms.keys_raced;
			snprintf(j->problem, sizeof(j->problem),
				 "%" PRIu64 " extents kept changing while being moved (files being written)",
				 j->ms.keys_raced);
		}
		j->phase = PHASE_DONE;
		/*
		 * Evacuated: no journal entry the member holds may be needed for a
		 * replay either (its ring stops getting entries once it is not rw):
		 * write what pins the older ones, then an entry saying so.
		 */
		if (j->kind == BCH_DATA_JOB_evacuate && !j->first_bucket) {
			struct bch_journal_res res;
			if ((r = bch_journal_reclaim_all(c)) ||
			    (r = bch_journal_res_get(c, 0, &res)))
				return r;
			bch_journal_res_put(c, &res);	/* an entry is written: it carries last_seq */
			if ((r = bch_journal_flush(c)))
				return r;
		}
		/*
		 * A gc point (replicas.h): the sets the job's moves left unused go,
		 * so a degraded open without a member rereplicated or evacuated to
		 * the others knows nothing is lost.  A table of an older version,
		 * or one a crash left a superset, is made exact here too.
		 */
		return bch_replicas_gc(c);
	}
	return 0;
}

/* ------------------------------------------------ device remove --force */

/* The pointers of extent k on dev (a bit per index); *other_dirty: dirty copies elsewhere. */
static uint32_t ptrs_on_dev(const struct bch_bkey *k, unsigned dev, unsigned *other_dirty)
{
	const struct bch_extent *e = bkey_val(k);
	uint32_t on = 0;

	*other_dirty = 0;
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
		if (e->ptrs[i].dev == dev)
			on |= 1U << i;
		else if (!(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED))
			(*other_dirty)++;
	}
	return on;
}

/*
 * The snapshots whose own inode version of k's file counts k's sectors:
 * those at or below k's snapshot that see k itself at its place (one that
 * overwrote it there sees its own key or a whiteout).  Without snapshots,
 * the one view.  At most max; returns how many.
 */
static unsigned lost_key_viewers(struct bch_fs *c, const struct bch_bkey *k, uint32_t *out, unsigned max)
{
	unsigned n = 0;

	if (!bch_fs_has_snapshots(c)) {
		out[n++] = k->p.snapshot;
		return n;
	}
	struct btree_iter it;
	const struct bch_bkey *ik;
	int err = 0;
	uint32_t found[64];
	unsigned nf = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_inodes, POS(0, k->p.inode, 0),
			    POS(0, k->p.inode, UINT32_MAX));
	while (nf < 64 && (ik = bch_btree_iter_next(&it, &err)))
		if (ik->type == BCH_BKEY_inode && bch_snap_is_ancestor(c, k->p.snapshot, ik->p.snapshot))
			found[nf++] = ik->p.snapshot;
	bch_btree_iter_exit(&it);
	c->err_msg[0] = 0;
	for (unsigned i = 0; i < nf && n < max; i++) {
		struct bch_view v;
		struct bch_bkey *vis = NULL;
		bch_view_enter_snap(c, &v, 0, found[i], false);
		if (!bch_vlookup(c, BCH_BTREE_ID_extents, k->p, &vis) && vis->p.snapshot == k->p.snapshot)
			out[n++] = found[i];
		bch_view_exit(&v);
		free(vis);
		c->err_msg[0] = 0;
	}
	return n;
}

/*
 * k's only copies were on a member that is gone: k becomes a hole where it
 * lies (in its own snapshot: every snapshot that saw it sees the hole), and
 * each inode version that counted its sectors loses them (fsck checks it).
 */
static int punch_lost(struct bch_fs *c, const struct bch_bkey *k)
{
	uint32_t viewers[64];
	unsigned nv = lost_key_viewers(c, k, viewers, 64);
	struct btree_trans *t;
	struct bch_extent_update u;
	uint64_t done_to;
	struct bch_view v;
	int r;

	memset(&u, 0, sizeof(u));
	if ((r = bch_trans_init(c, &t)))
		return r;
	bch_view_enter_snap(c, &v, 0, k->p.snapshot, false);
	r = bch_extents_punch(c, t, k->p.inode, bch_extent_start(k), k->p.offset, 0, &u, &done_to);
	bch_view_exit(&v);
	for (unsigned i = 0; !r && i < nv; i++) {
		struct bch_inode ino;
		bch_view_enter_snap(c, &v, 0, viewers[i], false);
		if (!bch_inode_get(c, k->p.inode, &ino)) {
			ino.sectors -= ino.sectors < k->size ? ino.sectors : k->size;
			r = bch_inode_update(t, k->p.inode, &ino);
		} else {
			c->err_msg[0] = 0;	/* no inode: nothing counts it */
		}
		bch_view_exit(&v);
	}
	if (!r && !(r = bch_trans_commit(t, 0)))
		bch_extent_update_apply(c, &u);
	else
		bch_extent_update_abort(c, &u);
	bch_extent_update_exit(&u);
	bch_trans_exit(t);
	return r;
}

/*
 * The same for the indirect extents (reflink.h): a copy on dev is dropped
 * where another dirty one stays; an indirect extent whose only copies were
 * there is deleted (its sharers then read EIO there; fsck punches their
 * reflink_p keys to holes), its sectors counted.
 */
static int drop_dev_ptrs_indirect(struct bch_fs *c, unsigned dev, struct bch_mover *mv,
				  uint64_t *lost_sectors)
{
	struct bch_bpos pos = POS_MIN;
	int r = 0;

	while (!r && c->roots->r[BCH_BTREE_ID_reflink].key) {
		struct bch_bkey *k = NULL, *x;
		if ((r = bch_btree_peek_next(c, BCH_BTREE_ID_reflink, pos, POS_MAX, &k)) <= 0)
			break;
		r = 0;
		pos = bpos_successor(k->p);
		if (!(x = bch_reflink_v_to_extent(k))) {
			free(k);
			continue;
		}
		unsigned other_dirty;
		uint32_t on = ptrs_on_dev(x, dev, &other_dirty);
		if (on && other_dirty) {
			struct bch_move_op op = { .drop_only = true, .degrade = true, .rewrite = on };
			r = bch_mover_add_indirect(mv, k, &op);
			if (r == -EINVAL)
				r = 0;
		} else if (on && !(r = bch_mover_flush(mv))) {
			struct btree_trans *t;
			struct bch_extent_update u;
			struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = k->p };
			memset(&u, 0, sizeof(u));
			if (!(r = bch_trans_init(c, &t))) {
				bch_extent_account_ptrs(&u, k, -1);
				if (!(r = bch_trans_update(t, BCH_BTREE_ID_reflink, &del)) &&
				    !(r = bch_trans_commit(t, 0)))
					bch_extent_update_apply(c, &u);
				else
					bch_extent_update_abort(c, &u);
				bch_extent_update_exit(&u);
				bch_trans_exit(t);
			}
			if (!r) {
				*lost_sectors += k->size;
				snprintf(c->err_msg, sizeof(c->err_msg),
					 "lost: indirect extent %" PRIu64 "..%" PRIu64 " (shared files)",
					 bch_extent_start(k), (uint64_t)k->p.offset);
			}
		}
		free(x);
		free(k);
	}
	return r;
}

int bch_data_drop_dev_ptrs(struct bch_fs *c, unsigned dev, uint64_t *lost_sectors)
{
	struct bch_move_stats ms = { 0 };
	struct bch_mover *mv;
	struct bch_bpos pos = POS_MIN;
	int r = bch_mover_init(c, &ms, &mv), r2;

	*lost_sectors = 0;
	if (r)
		return r;
	for (;;) {
		struct bch_bkey *k = NULL;
		if ((r = bch_btree_peek_next(c, BCH_BTREE_ID_extents, pos, POS_MAX, &k)) <= 0)
			break;
		r = 0;
		pos = bpos_successor(k->p);
		if (k->type != BCH_BKEY_extent) {
			free(k);
			continue;
		}
		unsigned other_dirty;
		uint32_t on = ptrs_on_dev(k, dev, &other_dirty);
		if (on && other_dirty) {
			struct bch_move_op op = { .drop_only = true, .degrade = true, .rewrite = on };
			r = bch_mover_add(mv, k, &op);
		} else if (on) {
			/* the only copies were there: the range becomes a hole, counted */
			if (!(r = bch_mover_flush(mv)) && !(r = punch_lost(c, k))) {
				*lost_sectors += k->size;
				snprintf(c->err_msg, sizeof(c->err_msg),
					 "lost: inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64,
					 (uint64_t)k->p.inode, bch_extent_start(k), (uint64_t)k->p.offset);
			}
		}
		free(k);
		if (r && r != -EINVAL)
			break;
		r = 0;
	}
	if (!r)
		r = drop_dev_ptrs_indirect(c, dev, mv, lost_sectors);
	r2 = bch_mover_exit(mv);
	if (r || r2)
		return r ? r : r2;
	/* nodes: rewritten from another copy, without the pointer */
	struct bch_data_job j = { .kind = BCH_DATA_JOB_evacuate, .dev = dev };
	uint64_t rewritten, left;
	for (unsigned pass = 0; pass < MAX_PASSES; pass++) {
		if ((r = nodes_pass(c, &j, &rewritten, &left)))
			return r;
		if (!left)
			break;
	}
	if (left)
		return bch_fs_err(c, -EIO, "%" PRIu64 " btree nodes have no copy but on member %u: %s",
				  left, dev, j.problem);
	return bch_journal_flush(c);
}
