// SPDX-License-Identifier: GPL-2.0
/*
 * ec_usage.c - space taken by erasure coding (see ec_usage.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "bkey.h"
#include "btree.h"
#include "ec.h"
#include "ec_usage.h"
#include "extents.h"
#include "reflink.h"

/* Live sectors of each data block, per stripe index (1..). */
struct live {
	uint32_t	(*blocks)[BCH_EC_K_MAX];
	size_t		nr;
};

static int live_add(struct live *l, const struct bch_bkey *k)
{
	const struct bch_extent *e = bkey_val(k);

	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
		const struct bch_extent_ptr *p = &e->ptrs[i];
		if (!(p->flags & BCH_EXTENT_PTR_STRIPED) || p->stripe_block >= BCH_EC_K_MAX)
			continue;
		if (p->stripe >= l->nr) {
			size_t nr = l->nr ? l->nr : 256;
			while (nr <= p->stripe)
				nr *= 2;
			void *n = realloc(l->blocks, nr * sizeof(*l->blocks));
			if (!n)
				return -ENOMEM;
			l->blocks = n;
			memset(l->blocks + l->nr, 0, (nr - l->nr) * sizeof(*l->blocks));
			l->nr = nr;
		}
		l->blocks[p->stripe][p->stripe_block] += bch_extent_disk_sectors(k);
	}
	return 0;
}

/* Every striped pointer of the extents and of the indirect extents. */
static int live_walk(struct bch_fs *c, struct live *l)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0, r = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while (!r && (k = bch_btree_iter_next(&it, &err)))
		if (k->type == BCH_BKEY_extent)
			r = live_add(l, k);
	bch_btree_iter_exit(&it);
	if (r || err || !c->roots->r[BCH_BTREE_ID_reflink].key)
		return r ? r : err;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS_MIN, POS_MAX);
	while (!r && (k = bch_btree_iter_next(&it, &err))) {
		struct bch_bkey *x = bch_reflink_v_to_extent(k);
		if (x)
			r = live_add(l, x);
		free(x);
	}
	bch_btree_iter_exit(&it);
	return r ? r : err;
}

static void add(struct bch_ec_usage *u, unsigned dev, uint64_t data, uint64_t parity,
		uint64_t reclaimable)
{
	if (dev < BCH_SB_MEMBERS_MAX) {
		u->dev[dev].data += data;
		u->dev[dev].parity += parity;
		u->dev[dev].reclaimable += reclaimable;
	}
	u->total.data += data;
	u->total.parity += parity;
	u->total.reclaimable += reclaimable;
}

int bch_ec_usage(struct bch_fs *c, struct bch_ec_usage *u)
{
	struct live l = { 0 };
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0, r;

	memset(u, 0, sizeof(*u));
	if (!c->roots->r[BCH_BTREE_ID_stripes].key)
		return 0;
	if ((r = live_walk(c, &l))) {
		free(l.blocks);
		return r;
	}
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_stripe)
			continue;
		const struct bch_stripe *s = bch_stripe_val(k);
		unsigned nd = bch_stripe_data_blocks(s);
		uint64_t idx = k->p.offset, any = 0;

		u->stripes++;
		for (unsigned i = 0; i < nd && i < BCH_EC_K_MAX; i++) {
			uint64_t live = idx < l.nr ? l.blocks[idx][i] : 0;
			if (live > s->block_sectors)	/* shared by snapshots' keys: never above the block */
				live = s->block_sectors;
			any += live;
			/* a block left empty whose bucket was reused since is no longer the stripe's */
			bool gone = !live && !bch_alloc_ptr_live(c, &s->blocks[i].ptr);
			add(u, s->blocks[i].ptr.dev, live, 0, gone ? 0 : s->block_sectors - live);
		}
		if (!any)
			u->stripes_empty++;
		for (unsigned i = nd; i < s->nr_blocks; i++)
			add(u, s->blocks[i].ptr.dev, 0, s->block_sectors, any ? 0 : s->block_sectors);
	}
	bch_btree_iter_exit(&it);
	free(l.blocks);
	return err;
}
