// SPDX-License-Identifier: GPL-2.0
/*
 * reflink.c - extents shared between files (see reflink.h).
 *
 * On disk (bcachefs_format.h "reflink"):
 *
 *   btree reflink    (0, END index, 0)    reflink_v   refcount | crc | ptrs
 *   btree extents    (inode, END, snap)   reflink_p   idx
 *
 * State of a file range and the call behind each change:
 *
 *   extents --remap (convert)--> reflink_p, refcount 1 (its own reflink_v)
 *   reflink_p --remap (share)--> the destination's reflink_p, refcount + 1
 *   reflink_p --write/punch/truncate/delete (extents.c)--> refcount - 1
 *   reflink_v at refcount 0 --same transaction--> deleted, space freed
 *
 * Reference changes of one transaction are collected in its struct
 * bch_extent_update: `refs` (what extents.c noted) and `rv` (every
 * reflink_v key as the transaction leaves it, so a second change of one
 * key in the same transaction starts from the first).  A key's pointers
 * are counted in their buckets while its refcount is above 0: a change
 * from 0 (a new key, or one this transaction dropped) counts them, a
 * change to 0 takes them off (after the commit, with the other counts).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"
#include "extents.h"
#include "inode.h"
#include "reflink.h"
#include "snapshot.h"
#include "super.h"

/* ------------------------------------------------------------ keys */

const struct bch_extent_ptr *bch_reflink_v_ptrs(const struct bch_bkey *v, unsigned *nr)
{
	const struct bch_reflink_v *rv = bkey_val(v);

	*nr = bkey_val_bytes(v) < sizeof(*rv) ? 0
	      : (bkey_val_bytes(v) - sizeof(*rv)) / sizeof(rv->ptrs[0]);
	return rv->ptrs;
}

void bch_data_iter_init(struct bch_data_iter *d, struct bch_fs *c)
{
	memset(d, 0, sizeof(*d));
	d->c = c;
	d->id = BCH_BTREE_ID_extents;
	if (c->roots->r[d->id].key)
		bch_btree_iter_init(&d->it, c, d->id, POS_MIN, POS_MAX);
	else
		d->id = BCH_BTREE_ID_NR;
}

const struct bch_bkey *bch_data_iter_next(struct bch_data_iter *d, int *err)
{
	const struct bch_bkey *k;

	*err = 0;
	free(d->x);
	d->x = NULL;
	while (d->id != BCH_BTREE_ID_NR) {
		while ((k = bch_btree_iter_next(&d->it, err))) {
			if (k->type == BCH_BKEY_reflink_v) {
				if (!(d->x = bch_reflink_v_to_extent(k))) {
					*err = -ENOMEM;
					return NULL;
				}
				return d->x;
			}
			if (k->type == BCH_BKEY_extent)
				return k;
		}
		bch_btree_iter_exit(&d->it);
		if (*err || d->id == BCH_BTREE_ID_reflink || !d->c->roots->r[BCH_BTREE_ID_reflink].key) {
			d->id = BCH_BTREE_ID_NR;
			break;
		}
		d->id = BCH_BTREE_ID_reflink;
		bch_btree_iter_init(&d->it, d->c, d->id, POS_MIN, POS_MAX);
	}
	return NULL;
}

void bch_data_iter_exit(struct bch_data_iter *d)
{
	if (d->id != BCH_BTREE_ID_NR)
		bch_btree_iter_exit(&d->it);
	d->id = BCH_BTREE_ID_NR;
	free(d->x);
	d->x = NULL;
}

struct bch_bkey *bch_reflink_v_to_extent(const struct bch_bkey *v)
{
	const struct bch_reflink_v *rv = bkey_val(v);
	unsigned nr;
	const struct bch_extent_ptr *ptrs = bch_reflink_v_ptrs(v, &nr);
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_extent, v->p,
					    sizeof(struct bch_extent) + nr * sizeof(ptrs[0]));

	if (!k)
		return NULL;
	struct bch_extent *e = bkey_val(k);
	k->size = v->size;
	k->version = v->version;
	e->crc = rv->crc;
	memcpy(e->ptrs, ptrs, nr * sizeof(ptrs[0]));
	return k;
}

/* A reflink_v at [idx, idx + e->size) holding extent e's encoding and pointers, refcount 0. */
static struct bch_bkey *extent_to_reflink_v(const struct bch_bkey *e, uint64_t idx)
{
	const struct bch_extent *x = bkey_val(e);
	unsigned nr = bch_extent_nr_ptrs(e);
	struct bch_bkey *v = bch_bkey_alloc(BCH_BKEY_reflink_v, POS(0, idx + e->size, 0),
					    sizeof(struct bch_reflink_v) + nr * sizeof(x->ptrs[0]));

	if (!v)
		return NULL;
	struct bch_reflink_v *rv = bkey_val(v);
	v->size = e->size;
	v->version = e->version;	/* encrypted: the data's nonce */
	rv->refcount = 0;
	rv->crc = x->crc;
	memcpy(rv->ptrs, x->ptrs, nr * sizeof(x->ptrs[0]));
	return v;
}

static struct bch_bkey *reflink_p_key(uint64_t inum, uint64_t start, uint64_t end, uint64_t idx)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_reflink_p, POS(inum, end, 0),
					    sizeof(struct bch_reflink_p));

	if (k) {
		k->size = end - start;
		((struct bch_reflink_p *)bkey_val(k))->idx = idx;
	}
	return k;
}

/* ------------------------------------------------------------ references */

unsigned bch_reflink_p_weight(struct bch_fs *c, const struct bch_bkey *p)
{
	const struct bch_reflink_p *rp = bkey_val(p);
	uint64_t start = rp->idx, end = rp->idx + p->size;
	unsigned nr = 0;
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	if (c->roots->r[BCH_BTREE_ID_reflink].key) {
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS(0, start + 1, 0), POS(0, UINT64_MAX, 0));
		while (nr < BCH_REFLINK_P_WEIGHT_MAX / 3 && (k = bch_btree_iter_next(&it, &err))) {
			if (bch_extent_start(k) >= end)
				break;
			nr += k->type == BCH_BKEY_reflink_v;
		}
		bch_btree_iter_exit(&it);
	}
	return 1 + 3 * (nr ? nr : 1);
}

void bch_reflink_ref_note(struct bch_extent_update *u, const struct bch_bkey *k, int sign)
{
	const struct bch_reflink_p *rp = bkey_val(k);

	if (u->nr_refs == u->cap_refs) {
		u->cap_refs = u->cap_refs ? 2 * u->cap_refs : 16;
		if (!(u->refs = realloc(u->refs, u->cap_refs * sizeof(*u->refs))))
			abort();
	}
	u->refs[u->nr_refs++] = (struct bch_reflink_ref) {
		.start = rp->idx, .end = rp->idx + k->size, .delta = sign,
	};
}

void bch_reflink_refs_reset(struct bch_extent_update *u)
{
	for (unsigned i = 0; i < u->nr_rv; i++)
		free(u->rv[i]);
	u->nr_rv = 0;
	u->nr_refs = 0;
}

/* u's copy of the reflink_v at p, if the transaction has one. */
static struct bch_bkey **rv_find(struct bch_extent_update *u, struct bch_bpos p)
{
	for (unsigned i = 0; i < u->nr_rv; i++)
		if (bpos_eq(u->rv[i]->p, p))
			return &u->rv[i];
	return NULL;
}

/* Keep k (taken over) as the transaction's copy of the key at its position. */
static void rv_keep(struct bch_extent_update *u, struct bch_bkey *k)
{
	struct bch_bkey **have = rv_find(u, k->p);

	if (have) {
		free(*have);
		*have = k;
		return;
	}
	if (u->nr_rv == u->cap_rv) {
		u->cap_rv = u->cap_rv ? 2 * u->cap_rv : 16;
		if (!(u->rv = realloc(u->rv, u->cap_rv * sizeof(*u->rv))))
			abort();
	}
	u->rv[u->nr_rv++] = k;
}

static int cmp_end(const void *a, const void *b)
{
	const struct bch_bkey *x = *(const struct bch_bkey * const *)a;
	const struct bch_bkey *y = *(const struct bch_bkey * const *)b;

	return x->p.offset < y->p.offset ? -1 : x->p.offset > y->p.offset;
}

/*
 * The reflink_v keys overlapping [start, end) as the transaction sees them
 * (its own copies over the btree's), malloc'd, in order.
 */
static int rv_overlapping(struct bch_fs *c, struct bch_extent_update *u, uint64_t start, uint64_t end,
			  struct bch_bkey ***ret, unsigned *nr)
{
	struct bch_bkey **keys = NULL;
	unsigned n = 0, cap = 0;
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

#define PUSH(x) do {								\
		if (n == cap) {							\
			cap = cap ? 2 * cap : 8;				\
			if (!(keys = realloc(keys, cap * sizeof(*keys))))	\
				abort();					\
		}								\
		keys[n++] = (x);						\
	} while (0)

	if (c->roots->r[BCH_BTREE_ID_reflink].key) {
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS(0, start + 1, 0), POS(0, UINT64_MAX, 0));
		while ((k = bch_btree_iter_next(&it, &err))) {
			if (bch_extent_start(k) >= end)
				break;
			if (k->type == BCH_BKEY_reflink_v && !rv_find(u, k->p))
				PUSH(bch_bkey_dup(k));
		}
		bch_btree_iter_exit(&it);
	}
	for (unsigned i = 0; i < u->nr_rv; i++)
		if (u->rv[i]->p.offset > start && bch_extent_start(u->rv[i]) < end)
			PUSH(bch_bkey_dup(u->rv[i]));
#undef PUSH
	if (n)
		qsort(keys, n, sizeof(*keys), cmp_end);
	*ret = keys;
	*nr = n;
	return err;
}

int bch_reflink_refs_trans(struct bch_fs *c, struct btree_trans *t, struct bch_extent_update *u)
{
	int r = 0;

	for (unsigned i = 0; i < u->nr_refs && !r; i++) {
		struct bch_reflink_ref *ref = &u->refs[i];
		struct bch_bkey **keys;
		unsigned nr;

		r = rv_overlapping(c, u, ref->start, ref->end, &keys, &nr);
		for (unsigned j = 0; j < nr; j++) {
			struct bch_bkey *v = keys[j];
			struct bch_reflink_v *rv = bkey_val(v);
			uint64_t old = rv->refcount;

			if (r || (ref->delta < 0 && !old)) {	/* already 0: fsck's to mend */
				free(v);
				continue;
			}
			rv->refcount = old + ref->delta;
			if (!old)
				bch_extent_account_ptrs(u, v, 1);	/* counted again */
			if (!rv->refcount) {
				struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted,
							.p = v->p };
				bch_extent_account_ptrs(u, v, -1);
				r = bch_trans_update(t, BCH_BTREE_ID_reflink, &del);
			} else {
				r = bch_trans_update(t, BCH_BTREE_ID_reflink, v);
			}
			rv_keep(u, v);
		}
		free(keys);
	}
	u->nr_refs = 0;
	return r;
}

/* ------------------------------------------------------------ reading */

int bch_reflink_resolve(struct bch_fs *c, const struct bch_bkey *p, uint64_t from, uint64_t to,
			struct bch_bkey ***ret, unsigned *nr)
{
	const struct bch_reflink_p *rp = bkey_val(p);
	uint64_t ks = bch_extent_start(p);
	uint64_t rs = rp->idx + (from - ks), re = rp->idx + (to - ks), at = rs;
	struct bch_bkey **keys = NULL;
	unsigned n = 0, cap = 0;
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0, r = 0;

	*ret = NULL;
	*nr = 0;
	if (c->roots->r[BCH_BTREE_ID_reflink].key) {
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS(0, rs + 1, 0), POS(0, UINT64_MAX, 0));
		while (at < re && (k = bch_btree_iter_next(&it, &err))) {
			if (k->type != BCH_BKEY_reflink_v)
				continue;
			if (bch_extent_start(k) > at)
				break;		/* a gap: missing */
			struct bch_bkey *e = bch_reflink_v_to_extent(k);
			if (!e) {
				r = -ENOMEM;
				break;
			}
			if (bch_extent_start(e) < at)
				bch_extent_cut_front(e, at);
			if (e->p.offset > re)
				bch_extent_cut_back(e, re);
			at = e->p.offset;
			e->p.inode = p->p.inode;
			e->p.snapshot = p->p.snapshot;
			e->p.offset = e->p.offset - rp->idx + ks;
			if (n == cap) {
				cap = cap ? 2 * cap : 8;
				if (!(keys = realloc(keys, cap * sizeof(*keys))))
					abort();
			}
			keys[n++] = e;
		}
		bch_btree_iter_exit(&it);
	}
	if (!r)
		r = err;
	if (!r && at < re)
		r = bch_fs_err(c, -EIO, "inode %" PRIu64 ": sectors %" PRIu64 "..%" PRIu64
			       " point at indirect extent %" PRIu64 ", which is missing",
			       (uint64_t)p->p.inode, (uint64_t)(at - rp->idx + ks), to, at);
	if (r) {
		for (unsigned i = 0; i < n; i++)
			free(keys[i]);
		free(keys);
		return r;
	}
	*ret = keys;
	*nr = n;
	return 0;
}

/* ------------------------------------------------------------ open, usage */

int bch_reflink_mark(struct bch_fs *c, bool cached)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int r = 0, err = 0;

	if (!c->roots->r[BCH_BTREE_ID_reflink].key)
		return 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS_MIN, POS_MAX);
	for (uint64_t n = 1; !r && (k = bch_btree_iter_next(&it, &err)); n++) {
		if (!(n % 4096))
			bch_btree_cache_evict_clean(c);
		if (k->type != BCH_BKEY_reflink_v)
			continue;
		struct bch_bkey *e = bch_reflink_v_to_extent(k);
		if (!e) {
			r = -ENOMEM;
			break;
		}
		const struct bch_extent *x = bkey_val(e);
		unsigned s = bch_extent_disk_sectors(e);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(e) && !r; i++) {
			if (cached) {
				if (x->ptrs[i].flags & BCH_EXTENT_PTR_CACHED)
					bch_alloc_mark_cached(c, &x->ptrs[i], x->crc.compressed_sectors, s);
				continue;
			}
			r = bch_alloc_mark_data(c, &x->ptrs[i], x->crc.compressed_sectors, s);
			if (r && c->opts.v[Opt_fsck] && r != -ENOMEM) {
				c->err_msg[0] = 0;	/* fsck reports and repairs it */
				r = 0;
			}
		}
		free(e);
	}
	bch_btree_iter_exit(&it);
	if (err && c->opts.v[Opt_fsck] && err != -ENOMEM && !bch_err_is_dl(err)) {
		c->err_msg[0] = 0;	/* fsck reports the node */
		err = 0;
	}
	return r ? r : err;
}

int bch_reflink_usage(struct bch_fs *c, struct bch_reflink_usage *u)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	memset(u, 0, sizeof(*u));
	if (c->roots->r[BCH_BTREE_ID_reflink].key) {
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS_MIN, POS_MAX);
		while ((k = bch_btree_iter_next(&it, &err))) {
			if (k->type != BCH_BKEY_reflink_v)
				continue;
			const struct bch_reflink_v *rv = bkey_val(k);
			unsigned nr;
			const struct bch_extent_ptr *ptrs = bch_reflink_v_ptrs(k, &nr);
			uint64_t un = rv->crc.uncompressed_sectors ? rv->crc.uncompressed_sectors : 1;
			uint64_t share = ((uint64_t)k->size * rv->crc.compressed_sectors + un - 1) / un;
			u->indirect_keys++;
			u->indirect_sectors += k->size;
			u->refs += rv->refcount;
			for (unsigned i = 0; i < nr; i++)
				if (!(ptrs[i].flags & BCH_EXTENT_PTR_CACHED))
					u->indirect_disk_sectors += share;
		}
		bch_btree_iter_exit(&it);
	}
	if (err)
		return err;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err)))
		if (k->type == BCH_BKEY_reflink_p)
			u->shared_sectors += k->size;
	bch_btree_iter_exit(&it);
	return err;
}

/* ------------------------------------------------------------ remap */

int bch_reflink_init(struct bch_fs *c)
{
	return bch_btree_feature_init(c, BCH_FEATURE_REFLINK, BCH_BTREE_ID_reflink);
}

/* The first free index: after the last indirect extent. */
static int next_index(struct bch_fs *c, uint64_t *idx)
{
	bool found;

	/* an indirect extent's offset is its end: the next one starts there */
	return bch_btree_last_offset(c, BCH_BTREE_ID_reflink, POS(0, UINT64_MAX, UINT32_MAX), idx, &found);
}

/*
 * Indirect extents one reflink_p made by a conversion covers at most: its
 * weight in a transaction that drops it (bch_reflink_p_weight) stays small.
 */
#define P_SPAN_MAX	16

/* Source keys per step: every one costs a few keys in the transaction (punch, reflink_p, reflink_v). */
static unsigned remap_keys(struct bch_fs *c)
{
	size_t n = bch_trans_max_u64s(c) / 96;

	return n < 1 ? 1 : n > 64 ? 64 : n;
}

static int commit(struct bch_fs *c, struct btree_trans *t, struct bch_extent_update *u)
{
	int r = bch_trans_commit(t, 0);

	if (r)
		bch_extent_update_abort(c, u);
	else
		bch_extent_update_apply(c, u);
	return r;
}

/*
 * Step 1, in the source's view: turn the plain extents among the first
 * remap_keys() keys of [start, end) of inum into indirect ones (one
 * transaction; a reflink_p counts as many keys as the indirect extents it
 * covers, whose counts the sharing step changes).  *stop is where the step's keys end (end, or the start of
 * the first key left for the next step).
 */
static int convert(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t end, uint64_t *stop)
{
	struct bch_extent_update u = { 0 };
	struct btree_trans *t;
	struct bch_bkey **todo = NULL;
	unsigned n = 0, seen = 0, max = remap_keys(c);
	struct bch_viter it;
	const struct bch_bkey *k;
	int r, err = 0;

	*stop = end;
	todo = malloc(max * sizeof(*todo));
	if (!todo)
		return -ENOMEM;
	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, start + 1, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_viter_next(&it, &err))) {
		uint64_t ks = bch_extent_start(k);
		if (ks >= end)
			break;
		/* an indirect range costs its indirect extents' counts in the sharing step */
		unsigned w = k->type == BCH_BKEY_reflink_p ? (bch_reflink_p_weight(c, k) - 1) / 3 : 1;
		if (seen && seen + w > max) {
			*stop = ks > start ? ks : start;
			break;
		}
		seen += w;
		if (k->type == BCH_BKEY_extent)
			todo[n++] = bch_bkey_dup(k);
	}
	bch_viter_exit(&it);
	if (err || !n) {
		r = err;
		goto out;
	}
	/* each extent cut to the step's range; none is empty (all start before *stop) */
	unsigned m = 0;
	for (unsigned i = 0; i < n; i++) {
		struct bch_bkey *e = todo[i];
		uint64_t a = bch_extent_start(e) > start ? bch_extent_start(e) : start;
		uint64_t b = e->p.offset < *stop ? e->p.offset : *stop;
		if (a >= b) {
			free(e);
			continue;
		}
		if (bch_extent_start(e) < a)
			bch_extent_cut_front(e, a);
		if (e->p.offset > b)
			bch_extent_cut_back(e, b);
		todo[m++] = e;
	}
	n = m;
	uint64_t idx;
	if ((r = next_index(c, &idx)) || (r = bch_trans_init(c, &t)))
		goto out;
	/*
	 * A run of extents back to back becomes indirect extents at
	 * consecutive indices and one reflink_p over them all (at most
	 * P_SPAN_MAX): a copy of the file then takes one key per run, not
	 * one per extent.
	 */
	for (unsigned i = 0; i < n && !r;) {
		uint64_t ra = bch_extent_start(todo[i]), rb = ra, ridx = idx, done;
		unsigned j = i;
		for (; j < n && j - i < P_SPAN_MAX && bch_extent_start(todo[j]) == rb && !r; j++) {
			struct bch_bkey *v = extent_to_reflink_v(todo[j], idx);
			if (!v) {
				r = -ENOMEM;
				break;
			}
			idx += todo[j]->size;
			rb = todo[j]->p.offset;
			rv_keep(&u, v);		/* refcount 0: the reflink_p below makes it 1 */
		}
		i = j;
		if (r)
			break;
		struct bch_bkey *p = reflink_p_key(inum, ra, rb, ridx);
		if (!p) {
			r = -ENOMEM;
			break;
		}
		r = bch_extents_punch(c, t, inum, ra, rb, 0, &u, &done);
		if (!r)
			r = bch_extent_insert(t, p, true, &u);
		free(p);
	}
	int64_t delta = u.i_sectors_delta;	/* 0 but for damage: keep the inode true */
	if (!r && delta) {
		struct bch_inode in;
		if (!(r = bch_inode_get(c, inum, &in))) {
			in.sectors += delta;
			r = bch_inode_update(t, inum, &in);
		}
	}
	if (!r)
		r = commit(c, t, &u);
	else
		bch_extent_update_abort(c, &u);
	bch_trans_exit(t);
out:
	for (unsigned i = 0; i < n; i++)
		free(todo[i]);
	free(todo);
	bch_extent_update_exit(&u);
	return r;
}

/* A piece of the source to share: [start, end) of the source, at idx. */
struct piece {
	uint64_t	start, end, idx;
};

/* Step 2, in the source's view: the reflink_p pieces of [start, end). */
static int src_pieces(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t end,
		      struct piece **ret, unsigned *nr)
{
	struct piece *p = NULL;
	unsigned n = 0, cap = 0;
	struct bch_viter it;
	const struct bch_bkey *k;
	int err = 0;

	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, start + 1, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_viter_next(&it, &err))) {
		uint64_t ks = bch_extent_start(k);
		if (ks >= end)
			break;
		if (k->type == BCH_BKEY_extent) {
			err = bch_fs_err(c, -EIO, "inode %" PRIu64 ": sectors %" PRIu64 "..%" PRIu64
					 " changed while being shared", inum, ks, (uint64_t)k->p.offset);
			break;
		}
		if (k->type != BCH_BKEY_reflink_p)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			if (!(p = realloc(p, cap * sizeof(*p))))
				abort();
		}
		uint64_t a = ks > start ? ks : start, b = k->p.offset < end ? k->p.offset : end;
		p[n++] = (struct piece) { a, b, ((const struct bch_reflink_p *)bkey_val(k))->idx + (a - ks) };
	}
	bch_viter_exit(&it);
	if (err) {
		free(p);
		return err;
	}
	*ret = p;
	*nr = n;
	return 0;
}

/*
 * Step 2, in the destination's view: [dst, dst + (end - start)) of inum
 * becomes the pieces (one transaction; a destination with many keys to
 * remove first loses them in transactions of their own: *again).
 */
static int share(struct bch_fs *c, const struct piece *pc, unsigned nr, uint64_t start, uint64_t end,
		 uint64_t inum, uint64_t dst, uint64_t size_min, bool *again)
{
	struct bch_extent_update u = { 0 };
	struct btree_trans *t;
	struct bch_inode in;
	uint64_t dend = dst + (end - start), done;
	int r;

	*again = false;
	if ((r = bch_inode_get(c, inum, &in)) || (r = bch_trans_init(c, &t)))
		return r;
	r = bch_extents_punch(c, t, inum, dst, dend, remap_keys(c), &u, &done);
	*again = !r && done < dend;
	for (unsigned i = 0; i < nr && !r && !*again; i++) {
		struct bch_bkey *p = reflink_p_key(inum, dst + (pc[i].start - start),
						   dst + (pc[i].end - start), pc[i].idx);
		r = p ? bch_extent_insert(t, p, true, &u) : -ENOMEM;
		free(p);
	}
	if (!r) {
		uint64_t bytes = dend << BCH_SECTOR_SHIFT;
		in.sectors += u.i_sectors_delta;
		if (!*again && in.size < size_min)
			in.size = bytes < size_min ? bytes : size_min;
		in.mtime = in.ctime = bch_now_ns();
		r = bch_inode_update(t, inum, &in);
	}
	if (!r)
		r = commit(c, t, &u);
	else
		bch_extent_update_abort(c, &u);
	bch_trans_exit(t);
	bch_extent_update_exit(&u);
	return r;
}

int bch_reflink_remap(struct bch_fs *c, uint64_t src_handle, uint64_t src_start,
		      uint64_t dst_handle, uint64_t dst_start, uint64_t sectors,
		      uint64_t dst_size_min, uint64_t *done)
{
	uint64_t bs = c->sb->block_size;
	int r;

	*done = 0;
	if (src_start % bs || dst_start % bs || sectors % bs)
		return bch_fs_err(c, -EINVAL, "reflink: range not aligned to the block size");
	if (!sectors)
		return 0;
	if ((r = bch_reflink_init(c)))
		return r;
	while (*done < sectors) {
		uint64_t s = src_start + *done, stop, sinum = src_handle, dinum = dst_handle;
		struct bch_view v;
		struct piece *pc = NULL;
		unsigned nr = 0;
		bool again = false;

		if ((r = bch_view_enter(c, &v, &sinum)))
			return r;
		r = convert(c, sinum, s, src_start + sectors, &stop);
		if (!r)
			r = src_pieces(c, sinum, s, stop, &pc, &nr);
		bch_view_exit(&v);
		if (!r && !(r = bch_view_enter(c, &v, &dinum))) {
			do
				r = share(c, pc, nr, s, stop, dinum, dst_start + *done, dst_size_min, &again);
			while (!r && again);
			bch_view_exit(&v);
		}
		free(pc);
		if (r)
			return r;
		*done = stop - src_start;
	}
	return 0;
}
