// SPDX-License-Identifier: GPL-2.0
/*
 * extents.c - overlap handling and space accounting of extent keys (see
 * extents.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "btree.h"
#include "snapshot.h"
#include "ec.h"
#include "errcode.h"
#include "extents.h"
#include "reflink.h"

unsigned bch_extent_disk_sectors(const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_extent)
		return 0;
	const struct bch_extent *e = bkey_val(k);
	uint64_t u = e->crc.uncompressed_sectors ? e->crc.uncompressed_sectors : 1;

	return ((uint64_t)k->size * e->crc.compressed_sectors + u - 1) / u;
}

void bch_extent_cut_front(struct bch_bkey *k, uint64_t start)
{
	uint64_t delta = start - bch_extent_start(k);

	if (k->type == BCH_BKEY_extent) {
		struct bch_extent *e = bkey_val(k);
		e->crc.offset += delta;
	} else if (k->type == BCH_BKEY_reflink_v) {
		struct bch_reflink_v *v = bkey_val(k);
		v->crc.offset += delta;
	} else if (k->type == BCH_BKEY_reflink_p) {
		struct bch_reflink_p *rp = bkey_val(k);
		rp->idx += delta;
	}
	k->size -= delta;
}

void bch_extent_cut_back(struct bch_bkey *k, uint64_t end)
{
	k->size -= k->p.offset - end;
	k->p.offset = end;
}

void bch_extent_account_ptrs(struct bch_extent_update *u, const struct bch_bkey *k, int sign)
{
	struct bch_bkey *x = k->type == BCH_BKEY_reflink_v ? bch_reflink_v_to_extent(k) : NULL;

	if (x)
		k = x;
	unsigned nr = bch_extent_nr_ptrs(k), s = bch_extent_disk_sectors(k);
	const struct bch_extent *e = bkey_val(k);

	for (unsigned i = 0; i < nr; i++) {
		if (u->nr == u->cap) {
			u->cap = u->cap ? u->cap * 2 : 16;
			u->acct = realloc(u->acct, u->cap * sizeof(*u->acct));
			if (!u->acct)
				abort();
		}
		u->acct[u->nr].ptr = e->ptrs[i];
		u->acct[u->nr].span = e->crc.compressed_sectors;
		u->acct[u->nr++].delta = sign * (int64_t)s;
	}
	free(x);
}

static void acct_add(struct bch_extent_update *u, const struct bch_bkey *k, int sign)
{
	u->i_sectors_delta += sign * (int64_t)k->size;
	if (k->type == BCH_BKEY_reservation)
		u->reserved_delta += sign * (int64_t)k->size * bch_reservation_replicas(k);
	if (k->type == BCH_BKEY_reflink_p)
		bch_reflink_ref_note(u, k, sign);
	bch_extent_account_ptrs(u, k, sign);
}

void bch_extent_account_drop(struct bch_extent_update *u, const struct bch_bkey *k)
{
	acct_add(u, k, -1);
}

static int update(struct btree_trans *t, struct bch_extent_update *u, const struct bch_bkey *k)
{
	u->keys++;
	return bch_trans_update(t, BCH_BTREE_ID_extents, k);
}

int bch_extents_punch(struct bch_fs *c, struct btree_trans *t, uint64_t inum, uint64_t start,
		      uint64_t end, unsigned max_keys, struct bch_extent_update *u,
		      uint64_t *done_to)
{
	struct bch_viter it;
	const struct bch_bkey *cur;
	unsigned seen = 0;
	int r = 0, err = 0;

	*done_to = end;
	if (start >= end)
		return 0;
	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, start + 1, 0), POS(inum, UINT64_MAX, 0));
	while (!r && (cur = bch_viter_next(&it, &err))) {
		if (cur->type != BCH_BKEY_extent && cur->type != BCH_BKEY_reservation &&
		    cur->type != BCH_BKEY_reflink_p)
			continue;
		uint64_t ks = bch_extent_start(cur), ke = cur->p.offset;
		if (ks >= end)
			break;
		if (max_keys && seen >= max_keys) {
			*done_to = ks > start ? ks : start;
			break;
		}
		struct bch_bkey *k = bch_bkey_dup(cur);	/* before another lookup moves the cache */
		/* a reflink_p also changes the indirect extents it points at: it weighs more */
		seen += k->type == BCH_BKEY_reflink_p && max_keys ? bch_reflink_p_weight(c, k) : 1;
		if (k->p.snapshot == bch_view_snap(c)) {
			acct_add(u, k, -1);
		} else {
			/*
			 * An ancestor's key stays where it is (snapshot.h): the
			 * file loses its sectors, no bucket loses a reference;
			 * the pieces kept are new keys in this snapshot.
			 */
			u->i_sectors_delta -= k->size;
		}
		if (ks < start) {
			struct bch_bkey *front = bch_bkey_dup(k);
			bch_extent_cut_back(front, start);
			acct_add(u, front, 1);
			r = update(t, u, front);
			free(front);
		}
		if (!r && ke > end) {
			struct bch_bkey *back = bch_bkey_dup(k);
			bch_extent_cut_front(back, end);
			acct_add(u, back, 1);
			r = update(t, u, back);	/* same position as k: replaces it */
			free(back);
		} else if (!r) {
			struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = k->p };
			r = update(t, u, &del);
		}
		free(k);
	}
	bch_viter_exit(&it);
	if (!r && !err)
		r = bch_reflink_refs_trans(c, t, u);
	return r ? r : err;
}

/* Space just allocated for p: given back if the transaction is abandoned. */
static void note_fresh(struct bch_extent_update *u, const struct bch_extent_ptr *p, unsigned sectors)
{
	if (u->nr_fresh == u->cap_fresh) {
		u->cap_fresh = u->cap_fresh ? u->cap_fresh * 2 : 16;
		u->fresh = realloc(u->fresh, u->cap_fresh * sizeof(*u->fresh));
		u->fresh_sectors = realloc(u->fresh_sectors, u->cap_fresh * sizeof(*u->fresh_sectors));
		if (!u->fresh || !u->fresh_sectors)
			abort();
	}
	u->fresh[u->nr_fresh] = *p;
	u->fresh_sectors[u->nr_fresh++] = sectors;
}

int bch_extent_insert(struct btree_trans *t, const struct bch_bkey *k, bool account,
		      struct bch_extent_update *u)
{
	if (account) {
		acct_add(u, k, 1);
	} else {
		const struct bch_extent *e = bkey_val(k);
		u->i_sectors_delta += k->size;
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
			note_fresh(u, &e->ptrs[i], e->crc.compressed_sectors);
	}
	int r = update(t, u, k);
	if (!r && u->nr_refs)
		r = bch_reflink_refs_trans(bch_trans_fs(t), t, u);
	return r;
}

int bch_extent_grow(struct btree_trans *t, const struct bch_bkey *old, const struct bch_bkey *grown,
		    const struct bch_extent_ptr *fresh, unsigned nr, unsigned sectors,
		    struct bch_extent_update *u)
{
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = old->p };
	int r = update(t, u, &del);

	if (r)
		return r;
	/* old's sectors stay counted in their buckets; the fresh ones were counted at allocation */
	u->i_sectors_delta += (int64_t)grown->size - (int64_t)old->size;
	for (unsigned i = 0; i < nr; i++)
		note_fresh(u, &fresh[i], sectors);
	return update(t, u, grown);
}

void bch_extent_update_apply(struct bch_fs *c, struct bch_extent_update *u)
{
	/* gains first, so a bucket a key moves within never looks empty */
	for (unsigned i = 0; i < u->nr; i++)
		if (u->acct[i].delta > 0)
			bch_alloc_data_account(c, &u->acct[i].ptr, u->acct[i].span, u->acct[i].delta);
	for (unsigned i = 0; i < u->nr; i++)
		if (u->acct[i].delta < 0)
			bch_alloc_data_account(c, &u->acct[i].ptr, u->acct[i].span, u->acct[i].delta);
	if (u->reserved_delta < 0 && (uint64_t)-u->reserved_delta > c->reserved_sectors)
		c->reserved_sectors = 0;	/* counted at open: cannot go below */
	else
		c->reserved_sectors += u->reserved_delta;
	u->nr = 0;
	u->nr_fresh = 0;
	u->i_sectors_delta = 0;
	u->reserved_delta = 0;
	u->keys = 0;
	bch_reflink_refs_reset(u);
}

void bch_extent_update_abort(struct bch_fs *c, struct bch_extent_update *u)
{
	for (unsigned i = 0; i < u->nr_fresh; i++)
		bch_alloc_data_free(c, &u->fresh[i], 1, u->fresh_sectors[i]);
	u->nr = 0;
	u->nr_fresh = 0;
	u->i_sectors_delta = 0;
	u->reserved_delta = 0;
	u->keys = 0;
	bch_reflink_refs_reset(u);
}

void bch_extent_update_exit(struct bch_extent_update *u)
{
	bch_reflink_refs_reset(u);
	/* most are NULL (a write has no reflink): no call for those */
	void *p[] = { u->refs, u->rv, u->acct, u->fresh, u->fresh_sectors };
	for (unsigned i = 0; i < sizeof(p) / sizeof(p[0]); i++)
		if (p[i])
			free(p[i]);
	memset(u, 0, sizeof(*u));
}

/*
 * fsck: the last position of the unreadable node that stopped an iteration at
 * pos (its parent's key for it), so that marking goes on after it: the data
 * of the leaves beyond a damaged one must be counted, or a repair would
 * allocate over it.  POS_MAX when the root itself cannot be read.
 */
static struct bch_bpos bad_node_end(struct bch_fs *c, unsigned id, struct bch_bpos pos)
{
	struct btree_root *root = &c->roots->r[id];
	struct bch_bpos end = POS_MAX;
	struct btree *b;

	if (bch_btree_node_get(c, id, root->level, root->key, &b))
		return end;
	while (b->level) {
		int i = bch_btree_node_find(b, pos);
		struct btree *child;

		end = i < (int)b->nr ? bch_btree_key_pos(b, i) : b->max_key;
		if (i >= (int)b->nr ||
		    bch_btree_node_get(c, id, b->level - 1, bch_btree_interior_key(b, i), &child))
			break;
		bch_btree_node_put(c, b);
		b = child;
	}
	bch_btree_node_put(c, b);
	c->err_msg[0] = 0;
	return end;
}

int bch_extents_mark_all(struct bch_fs *c)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int r = 0, err = 0;

	if (!c->roots->r[BCH_BTREE_ID_extents].key)
		return 0;
	c->reserved_sectors = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	for (uint64_t n = 1; !r; n++) {
		if (!(k = bch_btree_iter_next(&it, &err))) {
			if (!err || !c->opts.v[Opt_fsck] || err == -ENOMEM || bch_err_is_dl(err))
				break;
			/* fsck reports the node; the leaves after it are counted all the same */
			struct bch_bpos end = bad_node_end(c, BCH_BTREE_ID_extents, it.pos);
			bch_btree_iter_exit(&it);
			err = 0;
			if (bpos_eq(end, POS_MAX))
				break;
			bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, bpos_successor(end), POS_MAX);
			continue;
		}
		if (!(n % 4096))
			bch_btree_cache_evict_clean(c);	/* open may not write: keep memory bounded */
		if (k->type == BCH_BKEY_reservation)
			c->reserved_sectors += (uint64_t)k->size * bch_reservation_replicas(k);
		if (k->type != BCH_BKEY_extent)
			continue;
		const struct bch_extent *e = bkey_val(k);
		unsigned s = bch_extent_disk_sectors(k);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k) && !r; i++) {
			r = bch_alloc_mark_data(c, &e->ptrs[i], e->crc.compressed_sectors, s);
			if (r && c->opts.v[Opt_fsck] && r != -ENOMEM) {
				c->err_msg[0] = 0;	/* fsck reports and repairs it */
				r = 0;
			}
		}
	}
	bch_btree_iter_exit(&it);
	if (err && c->opts.v[Opt_fsck] && err != -ENOMEM && !bch_err_is_dl(err)) {
		c->err_msg[0] = 0;
		err = 0;
	}
	if (!r && !err)		/* the indirect extents' pointers, once each */
		r = bch_reflink_mark(c, false);
	if (!r && !err)		/* stripes' parity blocks (ec.h) */
		r = bch_ec_mark_all(c);
	return r ? r : err;
}

int bch_extents_mark_cached(struct bch_fs *c)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	if (!c->roots->r[BCH_BTREE_ID_extents].key)
		return 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	for (uint64_t n = 1; (k = bch_btree_iter_next(&it, &err)); n++) {
		if (!(n % 4096))
			bch_btree_cache_evict_clean(c);
		if (k->type != BCH_BKEY_extent)
			continue;
		const struct bch_extent *e = bkey_val(k);
		unsigned s = bch_extent_disk_sectors(k);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
			if (e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED)
				bch_alloc_mark_cached(c, &e->ptrs[i], e->crc.compressed_sectors, s);
	}
	bch_btree_iter_exit(&it);
	if (err && c->opts.v[Opt_fsck] && err != -ENOMEM && !bch_err_is_dl(err)) {
		c->err_msg[0] = 0;	/* the dirty pass met it too: fsck reports it */
		err = 0;
	}
	return err ? err : bch_reflink_mark(c, true);
}

int bch_extents_count_reserved(struct bch_fs *c)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	c->reserved_sectors = 0;
	if (!c->roots->r[BCH_BTREE_ID_extents].key)
		return 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	for (uint64_t n = 1; (k = bch_btree_iter_next(&it, &err)); n++) {
		if (!(n % 4096))
			bch_btree_cache_evict_clean(c);
		if (k->type == BCH_BKEY_reservation)
			c->reserved_sectors += (uint64_t)k->size * bch_reservation_replicas(k);
	}
	bch_btree_iter_exit(&it);
	if (err && c->opts.v[Opt_fsck] && err != -ENOMEM && !bch_err_is_dl(err)) {
		c->err_msg[0] = 0;	/* fsck reports the node */
		err = 0;
	}
	return err;
}

int bch_extents_split(struct bch_fs *c, struct btree_trans *t, uint64_t inum, uint64_t at,
		      struct bch_extent_update *u)
{
	struct bch_bkey *k;
	int r = bch_vpeek(c, BCH_BTREE_ID_extents, POS(inum, at + 1, 0), POS(inum, UINT64_MAX, 0), &k);

	if (r == -BCH_ERR_key_not_found)
		return 0;
	if (r)
		return r;
	if ((k->type == BCH_BKEY_extent || k->type == BCH_BKEY_reservation ||
	     k->type == BCH_BKEY_reflink_p) && bch_extent_start(k) < at) {
		struct bch_bkey *front = bch_bkey_dup(k), *back = bch_bkey_dup(k);
		bch_extent_cut_back(front, at);
		bch_extent_cut_front(back, at);
		if (k->p.snapshot == bch_view_snap(c))
			acct_add(u, k, -1);
		else
			u->i_sectors_delta -= k->size;	/* an ancestor's key stays (see punch) */
		acct_add(u, front, 1);
		acct_add(u, back, 1);
		r = update(t, u, front);
		if (!r)
			r = update(t, u, back);	/* same position as k: replaces it */
		if (!r)
			r = bch_reflink_refs_trans(c, t, u);
		free(front);
		free(back);
	}
	free(k);
	return r;
}

int bch_extents_shift(struct bch_fs *c, struct btree_trans *t, uint64_t inum, uint64_t from,
		      int64_t by, unsigned max_keys, uint64_t *next, struct bch_extent_update *u)
{
	struct bch_bkey **keys = malloc(max_keys * sizeof(*keys));
	unsigned n = 0;
	int r = 0, err = 0;

	if (!keys)
		return -ENOMEM;
	*next = UINT64_MAX;
	if (by < 0) {
		/* left: in ascending order, so moved keys never land on unmoved ones */
		struct bch_viter it;
		const struct bch_bkey *k;
		bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, from + 1, 0), POS(inum, UINT64_MAX, 0));
		while (n < max_keys && (k = bch_viter_next(&it, &err)))
			if (bch_extent_start(k) >= from)
				keys[n++] = bch_bkey_dup(k);
		bch_viter_exit(&it);
		if (n && n == max_keys)
			*next = keys[n - 1]->p.offset;
	} else {
		/* right: from the end backwards */
		struct bch_bpos pos = POS(inum, UINT64_MAX, 0);
		while (n < max_keys) {
			struct bch_bkey *k;
			int e = bch_vpeek_prev(c, BCH_BTREE_ID_extents, pos, POS(inum, 0, 0), &k);
			if (e == -BCH_ERR_key_not_found)
				break;
			if (e) {
				err = e;
				break;
			}
			if (k->p.inode != inum || bch_extent_start(k) < from) {
				free(k);
				break;
			}
			pos = POS(inum, k->p.offset - 1, 0);	/* the position before (any snapshot) */
			keys[n++] = k;
		}
		if (n && n == max_keys)
			*next = bch_extent_start(keys[n - 1]);
	}
	for (unsigned i = 0; i < n; i++) {
		if (!r && !err) {
			/*
			 * An ancestor's key stays where it is (snapshot.h): the
			 * delete hides it in this snapshot (a whiteout) and the
			 * moved copy is a new key here, one more reference to
			 * its data.
			 */
			bool ancestor = keys[i]->p.snapshot != bch_view_snap(c);
			struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = keys[i]->p };
			r = bch_trans_update(t, BCH_BTREE_ID_extents, &del);
			keys[i]->p.offset += by;
			if (!r)
				r = bch_trans_update(t, BCH_BTREE_ID_extents, keys[i]);
			if (!r && ancestor) {
				acct_add(u, keys[i], 1);
				u->i_sectors_delta -= keys[i]->size;	/* moved, not added */
			}
		}
		free(keys[i]);
	}
	free(keys);
	return r ? r : err;
}
