// SPDX-License-Identifier: GPL-2.0
/*
 * ec_move.c - dissolving stripes through the move path (see ec_move.h).
 *
 * A pass: choose up to BCH_EC_PICK_MAX stripes from the cursor (a walk of
 * the stripes btree, judging each by its key and its blocks' buckets); one
 * walk of the extents and reflink btrees collects the keys pointing into
 * them; then, over as many steps as the budget asks, each stripe's keys go
 * to a mover of their own, whose last commit deletes the stripe
 * (bch_mover_flush_extra) -- only if the stripe key is still the one chosen
 * (an index freed meanwhile may have been given to a new stripe).  Memory:
 * the chosen stripes' keys (a stripe was built in one transaction, so they
 * are bounded by a few transactions' worth however they were split since).
 * Cost: one extents walk per BCH_EC_PICK_MAX stripes (with snapshots, per
 * call: a write in a child snapshot adds pieces pointing into a stripe
 * without changing any key collected, so keys are not kept across calls).
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
#include "ec.h"
#include "ec_move.h"
#include "errcode.h"
#include "extents.h"
#include "inode.h"
#include "io.h"
#include "move.h"
#include "opts.h"
#include "reflink.h"
#include "snapshot.h"
#include "super.h"

/* A member that can be read and counts: exists, present, not failed. */
static bool member_ok(struct bch_fs *c, unsigned dev)
{
	struct bch_member *m = dev < c->nr_devs ? bch_sb_member(c->sb, dev) : NULL;

	return m && bch_member_exists(m) && !bch_dev_missing(c, dev) &&
	       m->state != BCH_MEMBER_STATE_failed;
}

/*
 * Live sectors of data block i of s, from its bucket: 0 when the bucket was
 * emptied or reused (its generation moved on); block_sectors when it cannot
 * be told (a missing member: judged full).
 */
static unsigned block_live(struct bch_fs *c, const struct bch_stripe *s, unsigned i)
{
	const struct bch_extent_ptr *p = &s->blocks[i].ptr;
	unsigned bs = member_ok(c, p->dev) ? bch_alloc_bucket_sectors(c, p->dev) : 0;
	struct bch_bucket_state st;

	if (!bs || !bch_alloc_bucket_get(c, p->dev, p->offset / bs, &st))
		return s->block_sectors;
	if (st.gen != p->gen || !st.sectors)
		return 0;
	return st.sectors < s->block_sectors ? st.sectors : s->block_sectors;
}

static uint64_t stripe_live(struct bch_fs *c, const struct bch_stripe *s, bool *empty_block)
{
	uint64_t live = 0;

	*empty_block = false;
	for (unsigned i = 0; i < bch_stripe_data_blocks(s); i++) {
		unsigned l = block_live(c, s, i);
		*empty_block |= !l;
		live += l;
	}
	return live;
}

/* ec_move.h invariant (3) */
static bool sparse(struct bch_fs *c, const struct bch_stripe *s)
{
	uint64_t ext_max = c->opts.v[Opt_encoded_extent_max] >> BCH_SECTOR_SHIFT;
	uint64_t cap = (uint64_t)bch_stripe_data_blocks(s) * s->block_sectors;
	bool empty_block;
	uint64_t live = stripe_live(c, s, &empty_block);

	if (empty_block)
		return true;
	return s->block_sectors >= 2 * ext_max && live * 100 < BCH_EC_COMPACT_PERCENT * cap;
}

bool bch_ec_stripe_selected(struct bch_fs *c, const struct bch_bkey *k,
			    const struct bch_ec_dissolve *d)
{
	const struct bch_stripe *s;

	if (k->type != BCH_BKEY_stripe || bch_stripe_validate(k, NULL, 0))
		return false;
	s = bch_stripe_val(k);
	switch (d->kind) {
	case BCH_EC_SELECT_dev:
		for (unsigned i = 0; i < s->nr_blocks; i++)
			if (s->blocks[i].ptr.dev == d->dev &&
			    s->blocks[i].ptr.offset + s->block_sectors > d->from_sector)
				return true;
		return false;
	case BCH_EC_SELECT_degraded:
		for (unsigned i = 0; i < s->nr_blocks; i++)
			if (!member_ok(c, s->blocks[i].ptr.dev) ||
			    !bch_alloc_ptr_live(c, &s->blocks[i].ptr))
				return true;
		return false;
	case BCH_EC_SELECT_sparse:
		return sparse(c, s);
	case BCH_EC_SELECT_unused:
		if (c->ec_dropped_all)
			return true;
		for (unsigned i = 0; i < c->nr_ec_dropped; i++)
			if (c->ec_dropped[i] == k->p.offset)
				return true;
		return false;
	}
	return false;
}

/* ------------------------------------------------------------ choosing */

struct bch_ec_pick {
	struct bch_bkey		*stripe;
	struct bch_bkey		**keys;		/* extents, or reflink_v keys (indirect) */
	bool			*indirect;
	size_t			nr, cap;
};

static void picks_free(struct bch_ec_pick *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		for (size_t j = 0; p[i].keys && j < p[i].nr; j++)
			free(p[i].keys[j]);
		free(p[i].keys);
		free(p[i].indirect);
		free(p[i].stripe);
	}
}

static int pick_push(struct bch_ec_pick *p, const struct bch_bkey *k, bool indirect)
{
	if (p->nr == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 32;
		struct bch_bkey **nk = realloc(p->keys, cap * sizeof(*nk));
		if (nk)
			p->keys = nk;
		bool *ni = realloc(p->indirect, cap * sizeof(*ni));
		if (ni)
			p->indirect = ni;
		if (!nk || !ni)
			return -ENOMEM;
		p->cap = cap;
	}
	if (!(p->keys[p->nr] = bch_bkey_dup(k)))
		return -ENOMEM;
	p->indirect[p->nr++] = indirect;
	return 0;
}

/* The striped pointer of k's pointer list (index), or -1. */
static int striped_ptr(const struct bch_extent_ptr *ptrs, unsigned nr)
{
	for (unsigned i = 0; i < nr; i++)
		if (ptrs[i].flags & BCH_EXTENT_PTR_STRIPED)
			return i;
	return -1;
}

/* The pick of stripe index idx (picks are in index order), or NULL. */
static struct bch_ec_pick *pick_of(struct bch_ec_pick *p, unsigned n, uint32_t idx)
{
	unsigned lo = 0, hi = n;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (p[mid].stripe->p.offset < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && p[lo].stripe->p.offset == idx ? &p[lo] : NULL;
}

/*
 * The keys of btree id pointing into the chosen stripes (count_only: just
 * how many, for BCH_EC_SELECT_unused, which moves none).
 */
static int collect(struct bch_fs *c, unsigned id, struct bch_ec_pick *p, unsigned n,
		   bool count_only)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0, r = 0;

	if (!c->roots->r[id].key)
		return 0;
	bch_btree_iter_init(&it, c, id, POS_MIN, POS_MAX);
	while (!r && (k = bch_btree_iter_next(&it, &err))) {
		const struct bch_extent_ptr *ptrs;
		unsigned nr;
		if (id == BCH_BTREE_ID_extents && k->type == BCH_BKEY_extent) {
			ptrs = ((const struct bch_extent *)bkey_val(k))->ptrs;
			nr = bch_extent_nr_ptrs(k);
		} else if (id == BCH_BTREE_ID_reflink && k->type == BCH_BKEY_reflink_v) {
			ptrs = bch_reflink_v_ptrs(k, &nr);
		} else {
			continue;
		}
		int i = striped_ptr(ptrs, nr);
		struct bch_ec_pick *x = i < 0 ? NULL : pick_of(p, n, ptrs[i].stripe);
		if (x && count_only)
			x->nr++;
		else if (x)
			r = pick_push(x, k, id == BCH_BTREE_ID_reflink);
	}
	bch_btree_iter_exit(&it);
	return r ? r : err;
}

/*
 * Up to max chosen stripes from d->cursor, and no more than budget
 * sectors to write past the first (a stripe whose data was deleted costs
 * little: many of them go in one call); *more: the walk stopped before the
 * end.
 */
static int choose(struct bch_fs *c, struct bch_ec_dissolve *d, unsigned max, uint64_t budget,
		  struct bch_ec_pick *p, unsigned *n, bool *more)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	uint64_t est = 0;
	int err = 0;

	*n = 0;
	*more = false;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, POS(0, d->cursor ? d->cursor : 1, 0),
			    POS(0, UINT32_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (*n == max || (*n && est >= budget)) {
			d->cursor = k->p.offset;
			*more = true;
			break;
		}
		if (!bch_ec_stripe_selected(c, k, d))
			continue;
		if (!(p[*n].stripe = bch_bkey_dup(k))) {
			err = -ENOMEM;
			break;
		}
		bool empty;
		/* what dissolving it writes: its live data, data_replicas times */
		est += stripe_live(c, bch_stripe_val(k), &empty) * c->opts.v[Opt_data_replicas];
		(*n)++;
	}
	bch_btree_iter_exit(&it);
	if (!*more)
		d->cursor = 0;
	return err;
}

/* ----------------------------------------------------------- dissolving */

/* The copies a key's data asks for: its file's data_replicas (indirect: the filesystem's). */
static unsigned want_replicas(struct bch_fs *c, const struct bch_bkey *k, bool indirect)
{
	unsigned want = c->opts.v[Opt_data_replicas];
	struct bch_inode inode;
	struct bch_io_opts o;

	if (!indirect) {
		if (!bch_inode_get(c, k->p.inode, &inode)) {
			bch_io_opts_get(c, &inode, &o);
			want = o.replicas;
		} else {
			c->err_msg[0] = 0;
		}
	}
	return want ? want : 1;
}

/* Read-write members that may take user data, outside exclude. */
static unsigned devs_for_data(struct bch_fs *c, uint64_t exclude)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_member *m = bch_sb_member(c->sb, i);
		n += !(i < 64 && (exclude >> i & 1)) && m && bch_member_exists(m) &&
		     !bch_dev_missing(c, i) && m->state == BCH_MEMBER_STATE_rw &&
		     (m->data_allowed & (1U << BCH_DATA_user)) && m->durability;
	}
	return n;
}

static void left(struct bch_ec_dissolve *d, const struct bch_bkey *sk, const char *why)
{
	snprintf(d->problem, sizeof(d->problem), "stripe %" PRIu64 ": %s", (uint64_t)sk->p.offset, why);
}

/* Hand key x of stripe p to mv; false when it stays in the stripe (counted in d). */
static int add_key(struct bch_fs *c, struct bch_ec_dissolve *d, struct bch_mover *mv,
		   const struct bch_ec_pick *p, size_t j, bool *ok)
{
	const struct bch_bkey *x = p->keys[j];
	bool indirect = p->indirect[j];
	struct bch_bkey *ext = indirect ? bch_reflink_v_to_extent(x) : NULL;
	const struct bch_bkey *k = indirect ? ext : x;
	struct bch_move_op op = { 0 };
	int r;

	if (!k)
		return -ENOMEM;
	const struct bch_extent *e = bkey_val(k);
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
		const struct bch_extent_ptr *ptr = &e->ptrs[i];
		if ((ptr->flags & BCH_EXTENT_PTR_STRIPED) ||
		    (d->kind == BCH_EC_SELECT_dev && ptr->dev == d->dev))
			op.rewrite |= 1U << i;	/* the striped copy, and cached ones leaving */
	}
	op.unstripe = true;
	op.nr_new = want_replicas(c, k, indirect);
	if (d->kind == BCH_EC_SELECT_dev && d->dev < 64)
		op.exclude_devs = 1ULL << d->dev;
	if (devs_for_data(c, op.exclude_devs) < op.nr_new) {
		*ok = false;
		d->stuck_too_few_devs++;
		left(d, p->stripe, "too few read-write devices for the copies of its data");
		free(ext);
		return 0;
	}
	r = indirect ? bch_mover_add_indirect(mv, x, &op) : bch_mover_add(mv, x, &op);
	free(ext);
	if (!r)
		return 0;
	if (r == -ENOMEM || bch_err_is_dl(r))
		return r;
	*ok = false;
	if (r == -BCH_ERR_no_space) {
		d->stuck_no_space++;
		left(d, p->stripe, "no space for the copies of its data");
	} else if (r == -EIO) {
		d->stuck_unreadable++;
		left(d, p->stripe, "data that cannot be read nor rebuilt");
	} else {
		left(d, p->stripe, "data that cannot be moved");
	}
	c->err_msg[0] = 0;
	return 0;
}

/* After the stripe key's deletion committed: its parity blocks' sectors go. */
static void stripe_gone(struct bch_fs *c, const struct bch_bkey *sk, struct bch_move_stats *s)
{
	const struct bch_stripe *sv = bch_stripe_val(sk);

	for (unsigned i = bch_stripe_data_blocks(sv); i < sv->nr_blocks; i++)
		if (!bch_dev_missing(c, sv->blocks[i].ptr.dev))
			bch_alloc_data_account(c, &sv->blocks[i].ptr, sv->block_sectors,
					       -(int64_t)sv->block_sectors);
	s->stripes_dissolved++;
	s->stripe_sectors_freed += (uint64_t)sv->nr_blocks * sv->block_sectors;
	c->ec_waiting_known = false;	/* its data waits for the builder: it looks again */
}

static int dissolve_one(struct bch_fs *c, struct bch_ec_dissolve *d, const struct bch_ec_pick *p,
			struct bch_move_stats *s)
{
	struct bch_mover *mv;
	uint64_t raced = s->keys_raced;
	bool ok = true, done = false;
	struct bch_bkey *now = NULL;
	int r;

	if (d->kind == BCH_EC_SELECT_unused && p->nr)
		return 0;	/* still in use: nothing to do (only counted, p->keys is empty) */
	/* chosen in an earlier step: the stripe must still be the one chosen */
	bool same = !bch_btree_lookup(c, BCH_BTREE_ID_stripes, p->stripe->p, &now) &&
		    bkey_bytes(now) == bkey_bytes(p->stripe) &&
		    !memcmp(now, p->stripe, bkey_bytes(p->stripe));
	free(now);
	c->err_msg[0] = 0;
	if (!same)
		return 0;	/* dissolved meanwhile (or its index reused): nothing of it here */
	if ((r = bch_mover_init(c, s, &mv)))
		return r;
	for (size_t j = 0; j < p->nr && !r; j++)
		r = add_key(c, d, mv, p, j, &ok);
	if (!r && ok && s->keys_raced == raced) {
		struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted,
					.p = p->stripe->p };
		r = bch_mover_flush_extra(mv, BCH_BTREE_ID_stripes, &del, &done);
	}
	int r2 = bch_mover_exit(mv);
	r = r ? r : r2;
	if (done) {
		stripe_gone(c, p->stripe, s);
	} else if (!r) {
		d->stripes_left++;
		if (ok) {
			d->stuck_raced++;
			left(d, p->stripe, "its data changed while being moved (found again by the next pass)");
		}
	}
	return r;
}

void bch_ec_dissolve_exit(struct bch_ec_dissolve *d)
{
	if (d->picks)
		picks_free(d->picks, d->nr_picks);
	free(d->picks);
	d->picks = NULL;
	d->nr_picks = d->next_pick = 0;
}

/* Choose up to max stripes (within choose_budget sectors) and collect their keys. */
static int pick(struct bch_fs *c, struct bch_ec_dissolve *d, unsigned max, uint64_t choose_budget)
{
	int r;

	bch_ec_dissolve_exit(d);
	if (!(d->picks = calloc(max, sizeof(*d->picks))))
		return -ENOMEM;
	if ((r = choose(c, d, max, choose_budget, d->picks, &d->nr_picks, &d->more)) || !d->nr_picks)
		return r;
	bool count_only = d->kind == BCH_EC_SELECT_unused;
	if ((r = collect(c, BCH_BTREE_ID_extents, d->picks, d->nr_picks, count_only)) ||
	    (r = collect(c, BCH_BTREE_ID_reflink, d->picks, d->nr_picks, count_only)))
		return r;
	return 0;
}

static int dissolve(struct bch_fs *c, struct bch_ec_dissolve *d, uint64_t budget, unsigned max,
		    uint64_t choose_budget, struct bch_move_stats *s)
{
	int r = 0;

	if (!c->roots->r[BCH_BTREE_ID_stripes].key) {
		bch_ec_dissolve_exit(d);
		d->cursor = 0;
		return 0;
	}
	if (c->read_only)
		return bch_fs_err(c, -BCH_ERR_fs_read_only, "the filesystem is read-only");
	if (d->next_pick == d->nr_picks) {
		if ((r = pick(c, d, max, choose_budget)) || !d->nr_picks) {
			bch_ec_dissolve_exit(d);
			return r;	/* nothing chosen: the walk reached the end (cursor 0) */
		}
	}
	uint64_t written = s->sectors_written;
	do {
		struct bch_ec_pick *p = &d->picks[d->next_pick++];
		r = dissolve_one(c, d, p, s);
		picks_free(p, 1);	/* its keys are done with */
		memset(p, 0, sizeof(*p));
	} while (!r && d->next_pick < d->nr_picks && s->sectors_written - written < budget);
	if (r)
		return r;
	if (d->next_pick < d->nr_picks && bch_fs_has_snapshots(c)) {
		/*
		 * With snapshots, a write in a child snapshot between two calls
		 * adds pieces pointing into a stripe without changing the key
		 * collected: the rest is chosen and collected again next time
		 */
		d->cursor = d->picks[d->next_pick].stripe->p.offset;
		d->more = true;
		bch_ec_dissolve_exit(d);
		return 1;
	}
	if (d->next_pick < d->nr_picks)
		return 1;
	bch_ec_dissolve_exit(d);
	return d->more ? 1 : 0;
}

int bch_ec_dissolve_step(struct bch_fs *c, struct bch_ec_dissolve *d, uint64_t budget,
			 struct bch_move_stats *s)
{
	return dissolve(c, d, budget, BCH_EC_PICK_MAX, UINT64_MAX, s);
}

int bch_ec_dissolve_count(struct bch_fs *c, const struct bch_ec_dissolve *d, uint64_t *stripes,
			  uint64_t *sectors)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	*stripes = *sectors = 0;
	if (!c->roots->r[BCH_BTREE_ID_stripes].key)
		return 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err)))
		if (bch_ec_stripe_selected(c, k, d)) {
			bool empty;
			(*stripes)++;
			*sectors += stripe_live(c, bch_stripe_val(k), &empty);
		}
	bch_btree_iter_exit(&it);
	return err;
}

int bch_ec_compact_step(struct bch_fs *c, uint64_t budget, struct bch_move_stats *s)
{
	struct bch_ec_dissolve d = { .kind = BCH_EC_SELECT_sparse };
	uint64_t before = s->stripes_dissolved;
	int r;

	if (c->read_only || !c->roots->r[BCH_BTREE_ID_stripes].key)
		return 0;
	/* parked: what was left waits for space to be freed somewhere */
	if (c->ec_compact_parked && c->ec_compact_gen == c->space_gen)
		return 0;
	/* as many stripes as the budget takes (at least one): chosen and done in this call */
	r = dissolve(c, &d, UINT64_MAX, BCH_EC_PICK_MAX, budget, s);
	bch_ec_dissolve_exit(&d);
	if (r < 0)
		return r;
	if (s->stripes_dissolved != before) {
		c->ec_compact_parked = false;
		return 1;
	}
	/*
	 * Nothing done: the next walk waits until a bucket is emptied
	 * somewhere (a data block emptied always empties one), so the
	 * background does not walk the stripes at every wake
	 */
	c->ec_compact_parked = true;
	c->ec_compact_gen = c->space_gen;
	if (d.stripes_left)
		snprintf(s->last_problem, sizeof(s->last_problem), "stripe compaction: %s", d.problem);
	return 0;
}

void bch_ec_compact_unpark(struct bch_fs *c)
{
	c->ec_compact_parked = false;
}

int bch_ec_close_unused(struct bch_fs *c, uint64_t *deleted)
{
	struct bch_ec_dissolve d = { .kind = BCH_EC_SELECT_unused };
	struct bch_move_stats s = { 0 };
	int r = 0;

	*deleted = 0;
	if (c->journal_replayed)
		c->ec_dropped_all = true;	/* a crash may have cut a session that dropped some */
	if (c->read_only || c->emergency_ro || !c->roots->r[BCH_BTREE_ID_stripes].key ||
	    (!c->nr_ec_dropped && !c->ec_dropped_all))
		return 0;
	do
		r = dissolve(c, &d, UINT64_MAX, BCH_EC_UNUSED_PICK_MAX, UINT64_MAX, &s);
	while (r == 1);
	bch_ec_dissolve_exit(&d);
	*deleted = s.stripes_dissolved;
	if (r == -BCH_ERR_no_space) {	/* a full filesystem still closes: fsck or compaction later */
		c->err_msg[0] = 0;
		r = 0;
	}
	if (!r) {
		c->nr_ec_dropped = 0;
		c->ec_dropped_all = false;
	}
	return r;
}
