// SPDX-License-Identifier: GPL-2.0
/*
 * copygc.c - copygc of user data buckets and eviction of cached data (see
 * copygc.h).
 *
 * A step: (1) on each device that takes user data, make the journal durable
 * so emptied buckets can be handed out, evict cached buckets when the space
 * copygc may write is short, and take the candidates with the least live
 * sectors while their live data fits in that space; (2) walk the extents
 * btree once, a batch of keys at a time (the walk holds no leaf while the
 * mover commits), handing every key with a live pointer into a victim to
 * the mover; (3) flush the mover and the journal; count the victims that no
 * longer hold dirty data.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "bkey.h"
#include "btree.h"
#include "copygc.h"
#include "errcode.h"
#include "extents.h"
#include "journal.h"
#include "move.h"
#include "reflink.h"

#define COPYGC_MAX_VICTIMS	256	/* buckets per device and step */

struct victim {
	unsigned	dev;
	uint64_t	bucket;
	uint8_t		gen;
};

static int victim_cmp(const void *x, const void *y)
{
	const struct victim *a = x, *b = y;

	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	return a->bucket < b->bucket ? -1 : a->bucket > b->bucket;
}

/* Is p a live pointer into one of the nr (sorted) victims? */
static bool in_victim(struct bch_fs *c, const struct victim *v, unsigned nr,
		      const struct bch_extent_ptr *p)
{
	unsigned bs = bch_alloc_bucket_sectors(c, p->dev);

	if (!bs)
		return false;
	struct victim key = { .dev = p->dev, .bucket = p->offset / bs };
	const struct victim *f = bsearch(&key, v, nr, sizeof(*v), victim_cmp);
	return f && f->gen == p->gen;
}

bool bch_copygc_needed(struct bch_fs *c)
{
	if (c->read_only)
		return false;
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_alloc_space s;
		struct bch_alloc_candidate one;
		bch_alloc_dev_space(c, d, &s);
		/*
		 * In the background only a victim at most half live is worth it
		 * (no more written than freed): on a nearly full filesystem the
		 * best victims are mostly live, and moving them ahead of need
		 * only churns; a write that needs space runs copygc itself.
		 * Below a critical level (1/64 of the buckets above the
		 * reserve) any victim is: writes would otherwise wait for
		 * copygc at every turn.  Either way it stops once no bucket
		 * holds dead sectors.
		 */
		uint64_t room = s.nr_empty + s.nr_cached;
		if (s.user && room < s.reserve + s.nbuckets / 16 &&
		    bch_alloc_copygc_candidates(c, d, 1, &one) &&
		    (one.sectors <= s.bucket_sectors / 2 || room < s.reserve + s.nbuckets / 64))
			return true;
	}
	return false;
}

/* Make buckets emptied so far reusable (their free is durable). */
static int journal_settle(struct bch_fs *c)
{
	if (bch_journal_seq_durable(c) < bch_journal_cur_seq(c))
		return bch_journal_flush(c);
	return 0;
}

/* The victims of device d that fit in the space copygc may write there. */
static int pick_victims(struct bch_fs *c, unsigned d, struct victim *v, unsigned *nr)
{
	struct bch_alloc_space s;
	struct bch_alloc_candidate *cand;
	int r;

	bch_alloc_dev_space(c, d, &s);
	if (!s.user)
		return 0;
	/* short of room to move into: cached data goes first */
	if (s.copygc_room < 2 * (uint64_t)s.bucket_sectors && s.nr_cached) {
		if ((r = bch_alloc_evict(c, d, 4)) < 0 || (r = journal_settle(c)))
			return r;
		bch_alloc_dev_space(c, d, &s);
	}
	if (!(cand = malloc(COPYGC_MAX_VICTIMS * sizeof(*cand))))
		return -ENOMEM;
	unsigned n = bch_alloc_copygc_candidates(c, d, COPYGC_MAX_VICTIMS, cand);
	uint64_t budget = s.copygc_room, used = 0;
	for (unsigned i = 0; i < n && used + cand[i].sectors <= budget; i++) {
		used += cand[i].sectors;
		v[(*nr)++] = (struct victim) { d, cand[i].bucket, bch_alloc_bucket_gen(c, d, cand[i].bucket) };
	}
	free(cand);
	return 0;
}

/*
 * The pointers of k to rewrite: live ones into a victim (cached ones are
 * dropped by the rewrite); every dirty one when k covers only part of its
 * encoded extent (copygc.h invariant 3).  *dirty: how many are dirty.
 */
static uint32_t rewrite_mask(struct bch_fs *c, const struct bch_bkey *k, const struct victim *v,
			     unsigned nr, unsigned *dirty)
{
	const struct bch_extent *e = bkey_val(k);
	unsigned n = bch_extent_nr_ptrs(k);
	uint32_t mask = 0;
	bool any_dirty = false;

	for (unsigned i = 0; i < n; i++)
		if (e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED)
			return 0;	/* its block is its stripe's: compaction (ec_move.h) */
	for (unsigned i = 0; i < n; i++)
		if (in_victim(c, v, nr, &e->ptrs[i])) {
			mask |= 1U << i;
			any_dirty |= !(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED);
		}
	*dirty = 0;
	if (!any_dirty)
		return 0;	/* only cached pointers there: the bucket is evicted instead */
	if (e->crc.offset || k->size < e->crc.uncompressed_sectors) {
		/* trimmed only if every dirty copy can be rewritten where it is */
		uint32_t all = mask;
		for (unsigned i = 0; i < n; i++) {
			struct bch_alloc_space s;
			if (e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED)
				continue;
			bch_alloc_dev_space(c, e->ptrs[i].dev, &s);
			if (!s.user) {
				all = mask;
				break;
			}
			all |= 1U << i;
		}
		mask = all;
	}
	for (unsigned i = 0; i < n; i++)
		*dirty += (mask >> i & 1) && !(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED);
	return mask;
}

/*
 * Walk btree id (the extents, then the indirect extents of shared files:
 * reflink.h) once, a batch of keys at a time, moving every key that points
 * into a victim.  Sets *full when the mover finds no space.
 */
static int move_victims_in(struct bch_fs *c, unsigned id, struct bch_mover *m, const struct victim *v,
			   unsigned nr, bool *full)
{
	struct bch_bkey *batch[BCH_MOVE_BATCH_KEYS];
	struct bch_bpos pos = POS_MIN;
	bool done = false;
	int r = 0;

	while (!done && !*full && !r) {
		struct btree_iter it;
		const struct bch_bkey *k;
		unsigned nb = 0, dirty;
		int err;

		/* collect, then move with no leaf held: the mover's commits change the tree */
		bch_btree_iter_init(&it, c, id, pos, POS_MAX);
		while (nb < BCH_MOVE_BATCH_KEYS && (k = bch_btree_iter_next(&it, &err))) {
			pos = bpos_successor(k->p);
			struct bch_bkey *x = k->type == BCH_BKEY_reflink_v ? bch_reflink_v_to_extent(k)
									   : bch_bkey_dup(k);
			if (!x) {
				err = -ENOMEM;
				break;
			}
			if (x->type != BCH_BKEY_extent || !rewrite_mask(c, x, v, nr, &dirty)) {
				free(x);
				continue;
			}
			free(x);
			if (!(batch[nb] = bch_bkey_dup(k))) {
				err = -ENOMEM;
				break;
			}
			nb++;
		}
		done = nb < BCH_MOVE_BATCH_KEYS;
		bch_btree_iter_exit(&it);
		if (err)
			r = err;
		for (unsigned i = 0; i < nb; i++) {
			struct bch_bkey *x = batch[i]->type == BCH_BKEY_reflink_v
					     ? bch_reflink_v_to_extent(batch[i]) : NULL;
			uint32_t mask = rewrite_mask(c, x ? x : batch[i], v, nr, &dirty);
			struct bch_move_op op = {
				.rewrite	= mask,
				.nr_new		= dirty,
				.same_dev	= true,
			};
			int a = 0;
			if (!r && !*full && mask)
				a = x ? bch_mover_add_indirect(m, batch[i], &op) : bch_mover_add(m, batch[i], &op);
			if (a == -BCH_ERR_no_space)
				*full = true;		/* what fits is moved; the rest waits */
			else if (a == -EIO)
				;			/* no good copy: left as it is, counted */
			else if (a)
				r = a;
			free(x);
			free(batch[i]);
		}
		if (*full)
			c->err_msg[0] = 0;
	}
	return r;
}

static int move_victims(struct bch_fs *c, const struct victim *v, unsigned nr,
			struct bch_move_stats *s)
{
	struct bch_mover *m;
	bool full = false;
	int r;

	if ((r = bch_mover_init(c, s, &m)))
		return r;
	r = move_victims_in(c, BCH_BTREE_ID_extents, m, v, nr, &full);
	if (!r && !full && c->roots->r[BCH_BTREE_ID_reflink].key)
		r = move_victims_in(c, BCH_BTREE_ID_reflink, m, v, nr, &full);
	int f = bch_mover_exit(m);
	return r ? r : f;
}

int bch_copygc_step(struct bch_fs *c, struct bch_move_stats *s)
{
	struct bch_move_stats local = { 0 };
	struct victim *v;
	unsigned nr = 0, freed = 0;
	int r;

	if (c->read_only)
		return 0;
	if (!s)
		s = &local;
	if ((r = journal_settle(c)))
		return r;
	if (!(v = malloc((size_t)c->nr_devs * COPYGC_MAX_VICTIMS * sizeof(*v))))
		return -ENOMEM;
	for (unsigned d = 0; d < c->nr_devs && !r; d++)
		r = pick_victims(c, d, v, &nr);
	if (!r && nr) {
		uint64_t written = s->sectors_written, moved = s->keys_moved;
		qsort(v, nr, sizeof(*v), victim_cmp);
		r = move_victims(c, v, nr, s);
		c->copygc_sectors_written += s->sectors_written - written;
		c->copygc_keys_moved += s->keys_moved - moved;
		for (unsigned i = 0; i < nr; i++) {
			struct bch_bucket_state st;
			if (bch_alloc_bucket_get(c, v[i].dev, v[i].bucket, &st) &&
			    (st.data_type != BCH_DATA_user || st.gen != v[i].gen))
				freed++;
		}
		c->copygc_buckets_freed += freed;
		/* invariant 2: the emptied buckets are reusable once this is durable */
		if (!r && freed)
			r = journal_settle(c);
	}
	free(v);
	return r ? r : freed > 0;
}

/*
 * Is a device that takes user data at or below its btree reserve (user
 * writes take no empty bucket there)?  *room: the space copygc may write on
 * all of them.
 */
static bool reserve_short(struct bch_fs *c, uint64_t *room)
{
	bool short_ = false;

	*room = 0;
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_alloc_space s;
		bch_alloc_dev_space(c, d, &s);
		if (!s.user)
			continue;
		*room += s.copygc_room;
		short_ |= s.nr_empty + s.nr_cached <= s.reserve;
	}
	return short_;
}

int bch_copygc_make_room(struct bch_fs *c, uint64_t *progress)
{
	unsigned evicted = 0;
	char msg[sizeof(c->err_msg)];
	int r;

	if (c->read_only)
		return 0;
	memcpy(msg, c->err_msg, sizeof(msg));	/* the write's ENOSPC, if nothing is freed */
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_alloc_space s;
		bch_alloc_dev_space(c, d, &s);
		if (!s.user || !s.nr_cached || s.nr_empty > s.reserve)
			continue;
		if ((r = bch_alloc_evict(c, d, s.nbuckets / 128 + 1)) < 0)
			return r;
		evicted += r;
	}
	if (evicted) {
		c->err_msg[0] = 0;
		return 1;	/* the allocation's own journal flush makes them reusable */
	}
	if ((r = bch_copygc_step(c, NULL)) < 0)
		return r;
	/*
	 * Invariant 5: btree nodes may take the reserve's buckets (that is
	 * what it is for: the btree grows as overwrites split extents), and a
	 * step frees about what the write needs: refilled here, or copygc's
	 * half of the reserve goes too and it can move nothing.  Each further
	 * step must leave copygc more room than the one before (finite).
	 */
	uint64_t room, last;
	for (bool low = reserve_short(c, &last); r > 0 && low; last = room) {
		int s = bch_copygc_step(c, NULL);
		if (s < 0)
			return s;
		low = reserve_short(c, &room);
		if (!s || room <= last)
			break;
	}
	/*
	 * A failed retry leaves what it had written as dead space, which the
	 * next step frees again: only more room than after the last call is
	 * progress (invariant 4).
	 */
	uint64_t now = bch_alloc_user_free(c);
	if (r > 0 && now > *progress) {
		*progress = now;
		c->err_msg[0] = 0;
		return 1;
	}
	memcpy(c->err_msg, msg, sizeof(msg));
	return 0;
}
