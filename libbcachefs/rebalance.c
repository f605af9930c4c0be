// SPDX-License-Identifier: GPL-2.0
/*
 * rebalance.c - background moves towards each file's effective options
 * (see rebalance.h).
 *
 * A step takes the first work key it may act on.  The scan key (inode 0)
 * becomes a work key per regular file, in inode order from its cursor.  An
 * inode's key is worked from its cursor: each extent needing work goes
 * through the mover; at the end of the inode the key is deleted, or, when
 * some extents found no space on the target, kept with the WAITING flag and
 * its cursor at the first of them.  Waiting keys are skipped while
 * c->space_gen has not moved since they waited (c->rebalance_wait_gen), so
 * a full target parks rebalance instead of spinning.  A write behind a
 * key's cursor moves the cursor back (bch_rebalance_work_set), so a pass
 * never misses data written while it ran.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "btree.h"
#include "compress.h"
#include "ec.h"
#include "ec_move.h"
#include "errcode.h"
#include "extents.h"
#include "inode.h"
#include "io.h"
#include "journal.h"
#include "move.h"
#include "rebalance.h"
#include "reflink.h"
#include "snapshot.h"
#include "super.h"

#define SCAN_INODES_PER_STEP	512

/*
 * How many devices of target could take a copy of k (usable for data, not
 * holding a dirty copy of it already): at most that many copies move there.
 */
static unsigned target_room_for(struct bch_fs *c, const struct bch_bkey *k, uint64_t target)
{
	const struct bch_extent *e = bkey_val(k);
	uint64_t holding = 0;
	unsigned n = 0;

	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
		if (!(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) && e->ptrs[i].dev < BCH_SB_MEMBERS_MAX)
			holding |= 1ULL << e->ptrs[i].dev;
	for (unsigned i = 0; i < c->nr_devs && i < BCH_SB_MEMBERS_MAX; i++) {
		struct bch_member *m = bch_sb_member(c->sb, i);
		n += c->devs[i] && !(holding & (1ULL << i)) && m->state == BCH_MEMBER_STATE_rw &&
		     (m->data_allowed & (1U << BCH_DATA_user)) && bch_dev_in_target(c->sb, i, target);
	}
	return n;
}

unsigned bch_extent_rebalance_reasons(struct bch_fs *c, const struct bch_bkey *k,
				      const struct bch_io_opts *o)
{
	unsigned why = 0;

	if (k->type != BCH_BKEY_extent || !bch_extent_nr_ptrs(k))
		return 0;
	const struct bch_extent *e = bkey_val(k);
	if (o->background_target && bch_move_ptrs_off_target(c, k, o->background_target) &&
	    target_room_for(c, k, o->background_target))
		why |= BCH_REBALANCE_REASON_TARGET;
	unsigned type = bch_compression_type_of(o->background_compression);
	if (type != BCH_COMPRESSION_none && e->crc.compression_type != type &&
	    e->crc.compression_type != BCH_COMPRESSION_incompressible)
		why |= BCH_REBALANCE_REASON_COMPRESSION;
	return why;
}

static struct bch_bkey *work_key(uint64_t inum, uint64_t cursor, uint32_t flags)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_rebalance_work, POS(inum, 0, 0),
					    sizeof(struct bch_rebalance_work));
	if (k) {
		struct bch_rebalance_work *w = bkey_val(k);
		w->cursor = cursor;
		w->flags = flags;
	}
	return k;
}

static int work_get(struct bch_fs *c, uint64_t inum, struct bch_rebalance_work *w)
{
	struct bch_bkey *k = NULL;
	int r = bch_btree_lookup(c, BCH_BTREE_ID_rebalance_work, POS(inum, 0, 0), &k);

	if (r == -BCH_ERR_key_not_found) {
		c->err_msg[0] = 0;
		return 1;
	}
	if (!r && k->type != BCH_BKEY_rebalance_work)
		r = 1;
	else if (!r)
		*w = *(struct bch_rebalance_work *)bkey_val(k);
	free(k);
	return r;
}

static int work_put(struct btree_trans *t, uint64_t inum, uint64_t cursor, uint32_t flags)
{
	struct bch_bkey *k = work_key(inum, cursor, flags);
	if (!k)
		return -ENOMEM;
	int r = bch_trans_update(t, BCH_BTREE_ID_rebalance_work, k);
	free(k);
	return r;
}

static int work_del(struct btree_trans *t, uint64_t inum)
{
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = POS(inum, 0, 0) };

	return bch_trans_update(t, BCH_BTREE_ID_rebalance_work, &del);
}

int bch_rebalance_work_set(struct bch_fs *c, struct btree_trans *t, uint64_t inum, uint64_t from)
{
	struct bch_rebalance_work w;
	int r = work_get(c, inum, &w);

	if (r < 0)
		return r;
	if (!r && w.cursor <= from && !(w.flags & BCH_REBALANCE_WAITING))
		return 0;	/* a pass will get there */
	if (!r && w.cursor < from)
		from = w.cursor;
	if (!r && (w.flags & BCH_REBALANCE_WAITING))
		bch_rebalance_kick(c);	/* new data of waiting work: worth a new try */
	return work_put(t, inum, from, 0);
}

void bch_rebalance_kick(struct bch_fs *c)
{
	c->rebalance_waited = false;
	c->rebalance_kicks++;
	c->ec_waiting_known = false;	/* an option may have made data stripeable */
}

int bch_rebalance_work_clear(struct bch_fs *c, struct btree_trans *t, uint64_t inum)
{
	struct bch_rebalance_work w;
	int r = work_get(c, inum, &w);

	return r < 0 ? r : r ? 0 : work_del(t, inum);
}

int bch_rebalance_schedule(struct bch_fs *c, uint64_t inum)
{
	struct btree_trans *t;
	int r;

	if (c->read_only)
		return -EROFS;
	if ((r = bch_trans_init(c, &t)))
		return r;
	/* a scan starts over; an inode's pass starts at its beginning */
	r = inum ? bch_rebalance_work_set(c, t, inum, 0) : work_put(t, 0, 0, 0);
	if (!r)
		r = bch_trans_commit(t, 0);
	bch_trans_exit(t);
	bch_rebalance_kick(c);		/* waiting work gets another go */
	return r;
}

/* The scan key: a work key for each regular file from its cursor on. */
static int scan_step(struct bch_fs *c, uint64_t cursor)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	uint64_t *inums = malloc(SCAN_INODES_PER_STEP * sizeof(*inums)), next = UINT64_MAX;
	unsigned nr = 0;
	/* as many work keys as one transaction holds (small nodes: fewer), and the scan key */
	size_t fit = bch_trans_max_u64s(c) / (1 + BCH_BKEY_U64s + sizeof(struct bch_rebalance_work) / 8);
	unsigned max = fit > 1 && fit - 1 < SCAN_INODES_PER_STEP ? fit - 1 : SCAN_INODES_PER_STEP;
	int err = 0, r = 0;

	if (!inums)
		return -ENOMEM;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_inodes, POS(0, cursor, 0), POS(0, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_inode)
			continue;
		if (nr == max) {
			next = k->p.offset;
			break;
		}
		const struct bch_inode *bi = bkey_val(k);
		if (S_ISREG(bi->mode))
			inums[nr++] = k->p.offset;
	}
	bch_btree_iter_exit(&it);
	if (err) {
		free(inums);
		return err;
	}
	struct btree_trans *t;
	if ((r = bch_trans_init(c, &t))) {
		free(inums);
		return r;
	}
	for (unsigned i = 0; i < nr && !r; i++)
		r = bch_rebalance_work_set(c, t, inums[i], 0);
	if (!r)
		r = next == UINT64_MAX ? work_del(t, 0) : work_put(t, 0, next, 0);
	if (!r)
		r = bch_trans_commit(t, 0);
	bch_trans_exit(t);
	free(inums);
	return r;
}

/* What rebalance does with extent k of a file with options o (reasons why). */
static void op_for(struct bch_fs *c, const struct bch_bkey *k, const struct bch_io_opts *o,
		   unsigned why, struct bch_move_op *op)
{
	const struct bch_extent *e = bkey_val(k);

	memset(op, 0, sizeof(*op));
	if (why & BCH_REBALANCE_REASON_COMPRESSION) {
		/* a new encoding: every dirty copy is rewritten */
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
			if (!(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED))
				op->rewrite |= 1U << i;
		op->recompress = true;
		op->compression = o->background_compression;
	} else {
		/* as many copies as the target has devices for; the rest stay */
		uint32_t off = bch_move_ptrs_off_target(c, k, o->background_target);
		unsigned room = target_room_for(c, k, o->background_target);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k) && room; i++)
			if (off & (1U << i)) {
				op->rewrite |= 1U << i;
				room--;
			}
	}
	op->nr_new = __builtin_popcount(op->rewrite);
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
		if ((op->rewrite & (1U << i)) && (e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED)) {
			/*
			 * A striped extent re-encoded leaves its stripe (ec_move.h):
			 * written as new data is, its file's data_replicas copies,
			 * which the builder stripes again; the stripe's space comes
			 * back by compaction, or at the close once nothing is left
			 * in it.  (A target never moves a striped copy:
			 * bch_move_ptrs_off_target() leaves it out.)
			 */
			op->unstripe = true;
			if (op->nr_new < o->replicas)
				op->nr_new = o->replicas;
		}
	/* data leaving the promote target stays there as a cached copy */
	for (unsigned i = 0; o->promote_target && !op->recompress && e->crc.csum_type != BCH_CSUM_none &&
			     i < bch_extent_nr_ptrs(k); i++)
		if ((op->rewrite & (1U << i)) && bch_dev_in_target(c->sb, e->ptrs[i].dev, o->promote_target))
			op->demote |= 1U << i;
	op->target = o->background_target ? o->background_target : o->target;
	/*
	 * A move goes to the target or waits; a recompression rewrites every
	 * copy, on the target as far as it has devices and elsewhere for the
	 * rest (which a later move brings over when it can).
	 */
	op->target_only = o->background_target && !op->recompress;
}

/*
 * A reflink_p of the inode: the indirect extents behind it (reflink.h) get
 * the inode's options, moved once for every file sharing them (an extent
 * that already satisfies them, moved through another sharer, is left).
 * No space or no readable copy: *waiting, as for the inode's own extents.
 */
static int indirect_step(struct bch_fs *c, struct bch_mover *m, const struct bch_bkey *p,
			 const struct bch_io_opts *o, uint64_t *waiting)
{
	const struct bch_reflink_p *rp = bkey_val(p);
	struct bch_bkey *v[BCH_MOVE_BATCH_KEYS];
	uint64_t from = rp->idx, end = rp->idx + p->size;
	int r = 0;

	if (!c->roots->r[BCH_BTREE_ID_reflink].key)
		return 0;	/* damage fsck mends (reflink_p_dangling) */
	while (!r && from < end) {
		struct btree_iter it;
		const struct bch_bkey *k;
		unsigned nr = 0;
		int err = 0;
		/* copied out: the mover's commits change the leaves */
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS(0, from + 1, 0), POS(0, UINT64_MAX, 0));
		while (nr < BCH_MOVE_BATCH_KEYS && (k = bch_btree_iter_next(&it, &err)) &&
		       bch_extent_start(k) < end) {
			from = k->p.offset;
			if (k->type == BCH_BKEY_reflink_v && !(v[nr++] = bch_bkey_dup(k)))
				err = -ENOMEM;
		}
		if (nr < BCH_MOVE_BATCH_KEYS)
			from = end;
		bch_btree_iter_exit(&it);
		r = err;
		for (unsigned i = 0; i < nr; i++) {
			struct bch_bkey *x = bch_reflink_v_to_extent(v[i]);
			unsigned why = x ? bch_extent_rebalance_reasons(c, x, o) : 0;
			if (!r && !x)
				r = -ENOMEM;
			if (!r && why) {
				struct bch_move_op op;
				op_for(c, x, o, why, &op);
				int a = bch_mover_add_indirect(m, v[i], &op);
				if (a == -BCH_ERR_no_space || a == -EIO || a == -EINVAL) {
					if (*waiting == UINT64_MAX)
						*waiting = bch_extent_start(p);
				} else if (a) {
					r = a;
				}
			}
			free(x);
			free(v[i]);
		}
	}
	return r;
}

/*
 * Work inode inum from cursor: at most *budget sectors.  Sets *done when
 * the inode's end was reached; *waiting to the first extent that found no
 * space (UINT64_MAX: none).
 */
static int inode_step(struct bch_fs *c, struct bch_mover *m, struct bch_move_stats *s,
		      uint64_t inum, uint64_t cursor,
		      uint64_t *budget, uint64_t *next, bool *done, uint64_t *waiting)
{
	struct bch_inode bi;
	struct bch_io_opts o;
	int r = bch_inode_get_any_snapshot(c, inum, &bi);

	*done = true;
	*waiting = UINT64_MAX;
	*next = UINT64_MAX;
	if (r == -ENOENT || r == -BCH_ERR_key_not_found) {
		c->err_msg[0] = 0;
		return 0;	/* gone: nothing to do */
	}
	if (r)
		return r;
	bch_io_opts_get(c, &bi, &o);
	if (!o.background_target && bch_compression_type_of(o.background_compression) == BCH_COMPRESSION_none)
		return 0;

	/* keys are copied out before moving: the mover commits and changes the leaves */
	struct bch_bkey *keys[BCH_MOVE_BATCH_KEYS];
	unsigned nr = 0;
	/* keys of every snapshot (each moved where it lies): the next batch after the last key seen */
	struct bch_bpos from = POS(inum, cursor + 1, 0);
	while (!r) {
		struct btree_iter it;
		const struct bch_bkey *k;
		int err = 0;
		nr = 0;
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, from, POS(inum, UINT64_MAX, UINT32_MAX));
		while (nr < BCH_MOVE_BATCH_KEYS && (k = bch_btree_iter_next(&it, &err))) {
			from = bpos_successor(k->p);
			if ((k->type == BCH_BKEY_reflink_p || bch_extent_rebalance_reasons(c, k, &o)) &&
			    !(keys[nr++] = bch_bkey_dup(k)))
				err = -ENOMEM;
		}
		bool end = nr < BCH_MOVE_BATCH_KEYS && !err;
		bch_btree_iter_exit(&it);
		if (err) {
			r = err;
			break;
		}
		for (unsigned i = 0; i < nr && !r; i++) {
			struct bch_bkey *key = keys[i];
			unsigned why = bch_extent_rebalance_reasons(c, key, &o);
			struct bch_move_op op;
			if (*budget == 0) {
				*done = false;
				*next = bch_extent_start(key);
				end = false;
				break;
			}
			if (key->type == BCH_BKEY_reflink_p) {
				r = indirect_step(c, m, key, &o, waiting);
				*budget = *budget > key->size ? *budget - key->size : 0;
				continue;
			}
			op_for(c, key, &o, why, &op);
			/* a full target: do not read what cannot be written */
			const struct bch_extent *e = bkey_val(key);
			uint64_t room = op.target_only ? bch_alloc_target_free(c, op.target, 0) : 0;
			if (op.target_only && room < (uint64_t)e->crc.compressed_sectors * op.nr_new) {
				char tgt[64];
				/* counted as the mover counts what it sees: seen, and why it stays */
				s->keys_seen++;
				s->keys_no_space++;
				bch_target_to_text(c->sb, op.target, tgt, sizeof(tgt));
				snprintf(s->last_problem, sizeof(s->last_problem),
					 "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64 ": no space on "
					 "target %s (%" PRIu64 " sectors free there, %" PRIu64 " needed)",
					 inum, bch_extent_start(key), (uint64_t)key->p.offset, tgt,
					 room, (uint64_t)e->crc.compressed_sectors * op.nr_new);
				if (*waiting == UINT64_MAX)
					*waiting = bch_extent_start(key);
				continue;
			}
			int a = bch_mover_add(m, key, &op);
			/*
			 * No space, or no readable copy (scrub or fsck -c may
			 * repair it): the work stays recorded and waits, as for
			 * space, so nothing retries it in a loop.
			 */
			if (a == -BCH_ERR_no_space || a == -EIO || a == -EINVAL) {
				if (*waiting == UINT64_MAX)
					*waiting = bch_extent_start(key);
			} else if (a) {
				r = a;
			}
			*budget = *budget > key->size ? *budget - key->size : 0;
		}
		for (unsigned i = 0; i < nr; i++)
			free(keys[i]);
		if (r || end || !*done)
			break;
	}
	if (!r)
		r = bch_mover_flush(m);
	return r;
}

static int rebalance_step(struct bch_fs *c, uint64_t budget, struct bch_move_stats *s, bool *parked);

/*
 * The work keys first; when they leave nothing ready, stripe compaction
 * (ec_move.h) and the stripe builder
 * (ec.h: erasure_code) builds full stripes, in place from full stripe
 * candidate buckets, else gathering replicated extents (data rebalance
 * finishes the rest with bch_ec_step(..., true, ...)).  Neither while
 * c->ec_build_deferred is set.
 */
int bch_rebalance_step(struct bch_fs *c, uint64_t budget, struct bch_move_stats *s, bool *parked)
{
	int r = rebalance_step(c, budget, s, parked);

	if (r || c->read_only || c->ec_build_deferred)
		return r;
	/* stripes mostly deleted are dissolved first (ec_move.h), then built anew */
	int compacted = bch_ec_compact_step(c, budget, s);
	if (compacted < 0)
		return compacted;
	if ((r = bch_ec_step(c, budget, false, s)) > 0 || (!r && compacted)) {
		*parked = false;
		r = 1;
	}
	return r;
}

static int rebalance_step(struct bch_fs *c, uint64_t budget, struct bch_move_stats *s, bool *parked)
{
	struct bch_mover *m = NULL;
	uint64_t pos = 0;
	bool skipped_waiting = false, waited = false;
	int r;

	*parked = false;
	if (c->read_only || !c->roots->r[BCH_BTREE_ID_rebalance_work].key)
		return 0;
	/*
	 * Waiting work is retried because space was freed; freed buckets are
	 * reusable once the free is durable: make it so now (as the allocator
	 * does when it runs short), or the retry would park again.
	 */
	if (c->rebalance_waited && c->rebalance_wait_gen != c->space_gen &&
	    bch_journal_seq_durable(c) < bch_journal_cur_seq(c) && (r = bch_journal_flush(c)))
		return r;
	if ((r = bch_mover_init(c, s, &m)))
		return r;
	while (!r) {
		struct bch_bkey *k = NULL;
		r = bch_btree_peek_next(c, BCH_BTREE_ID_rebalance_work, POS(pos, 0, 0), POS_MAX, &k);
		if (!r)
			*parked = skipped_waiting || waited;	/* all that is left waits */
		if (r <= 0)
			break;
		r = 0;
		uint64_t inum = k->p.inode;
		struct bch_rebalance_work w = { 0 };
		bool valid = k->type == BCH_BKEY_rebalance_work;
		if (valid)
			w = *(struct bch_rebalance_work *)bkey_val(k);
		free(k);
		pos = inum + 1;
		if (!valid)
			continue;
		if ((w.flags & BCH_REBALANCE_WAITING) && c->rebalance_waited &&
		    c->rebalance_wait_gen == c->space_gen) {
			skipped_waiting = true;
			continue;
		}
		if (!inum) {
			r = scan_step(c, w.cursor);
			r = r ? r : 1;
			break;
		}
		uint64_t next, waiting;
		bool done;
		if ((r = inode_step(c, m, s, inum, w.cursor, &budget, &next, &done, &waiting)))
			break;
		struct btree_trans *t;
		if ((r = bch_trans_init(c, &t)))
			break;
		if (waiting != UINT64_MAX)
			r = work_put(t, inum, waiting, BCH_REBALANCE_WAITING);
		else if (!done)
			r = work_put(t, inum, next, 0);
		else
			r = work_del(t, inum);
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
		if (waiting != UINT64_MAX) {
			c->rebalance_wait_gen = c->space_gen;
			c->rebalance_waited = true;
			waited = true;
		}
		if (!r && !budget)
			r = 1;		/* more may be ready */
	}
	int f = bch_mover_exit(m);
	return r < 0 ? r : f ? f : r;
}

/* The extents of inode inum that need work, added to p (waiting: they wait for space). */
static int inode_pending(struct bch_fs *c, uint64_t inum, const struct bch_inode *bi, bool waiting,
			 struct bch_rebalance_pending *p)
{
	struct bch_io_opts o;
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	bch_io_opts_get(c, bi, &o);
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err))) {
		unsigned why = bch_extent_rebalance_reasons(c, k, &o);
		if (why & BCH_REBALANCE_REASON_TARGET)
			p->sectors_target += k->size;
		if (why & BCH_REBALANCE_REASON_COMPRESSION)
			p->sectors_compression += k->size;
		if (why && waiting)
			p->sectors_waiting += k->size;
	}
	bch_btree_iter_exit(&it);
	return err;
}

/*
 * A scan is pending: the regular files from its cursor on that have no work
 * key yet (inums[], sorted) will get one, so their work is pending too; the
 * progress line shows it from the first update, not once the scan reaches
 * them.
 */
static int scan_pending(struct bch_fs *c, const uint64_t *inums, size_t nr,
			struct bch_rebalance_pending *p)
{
	struct bch_rebalance_work w = { 0 };
	uint64_t *files = NULL;
	size_t nf = 0, cap = 0, j = 0;
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	if (work_get(c, 0, &w)) {
		c->err_msg[0] = 0;
		return 0;
	}
	/* the inodes first (the extents walk must not hold the inode leaf) */
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_inodes, POS(0, w.cursor, 0), POS(0, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_inode || !S_ISREG(((const struct bch_inode *)bkey_val(k))->mode))
			continue;
		while (j < nr && inums[j] < k->p.offset)
			j++;
		if (j < nr && inums[j] == k->p.offset)
			continue;	/* counted with its work key */
		if (nf == cap) {
			uint64_t *n = realloc(files, (cap = cap ? cap * 2 : 256) * sizeof(*n));
			if (!n) {
				err = -ENOMEM;
				break;
			}
			files = n;
		}
		files[nf++] = k->p.offset;
	}
	bch_btree_iter_exit(&it);
	for (size_t i = 0; i < nf && !err; i++) {
		struct bch_inode bi;
		if (bch_inode_get_any_snapshot(c, files[i], &bi)) {
			c->err_msg[0] = 0;
			continue;
		}
		err = inode_pending(c, files[i], &bi, false, p);
	}
	free(files);
	return err;
}

static int rebalance_pending(struct bch_fs *c, struct bch_rebalance_pending *p);

int bch_rebalance_pending(struct bch_fs *c, struct bch_rebalance_pending *p)
{
	int r = rebalance_pending(c, p);

	return r ? r : bch_ec_pending(c, &p->sectors_stripe);
}

static int rebalance_pending(struct bch_fs *c, struct bch_rebalance_pending *p)
{
	struct btree_iter wit;
	const struct bch_bkey *wk;
	int err = 0, r = 0;

	memset(p, 0, sizeof(*p));
	if (!c->roots->r[BCH_BTREE_ID_rebalance_work].key)
		return 0;
	/* the work keys first (the extents walk must not hold the work leaf) */
	uint64_t *inums = NULL;
	uint32_t *flags = NULL;
	size_t nr = 0, cap = 0;
	bch_btree_iter_init(&wit, c, BCH_BTREE_ID_rebalance_work, POS_MIN, POS_MAX);
	while ((wk = bch_btree_iter_next(&wit, &err))) {
		if (wk->type != BCH_BKEY_rebalance_work)
			continue;
		if (!wk->p.inode) {
			p->scan = true;
			continue;
		}
		if (nr == cap) {
			cap = cap ? cap * 2 : 64;
			uint64_t *ni = realloc(inums, cap * sizeof(*ni));
			uint32_t *nf = realloc(flags, cap * sizeof(*nf));
			if (ni)
				inums = ni;
			if (nf)
				flags = nf;
			if (!ni || !nf) {
				err = -ENOMEM;
				break;
			}
		}
		inums[nr] = wk->p.inode;
		flags[nr++] = ((const struct bch_rebalance_work *)bkey_val(wk))->flags;
	}
	bch_btree_iter_exit(&wit);
	p->inodes = nr;
	if (p->scan && !err)
		err = scan_pending(c, inums, nr, p);
	for (size_t i = 0; i < nr && !err && !r; i++) {
		struct bch_inode bi;
		if (bch_inode_get_any_snapshot(c, inums[i], &bi)) {
			c->err_msg[0] = 0;
			continue;
		}
		err = inode_pending(c, inums[i], &bi, flags[i] & BCH_REBALANCE_WAITING, p);
	}
	free(inums);
	free(flags);
	return r ? r : err;
}
