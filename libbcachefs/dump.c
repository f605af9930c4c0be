// SPDX-License-Identifier: GPL-2.0
/*
 * dump.c - the metadata ranges of a filesystem, for `bcachefs dump`.
 * See dump.h for what counts as metadata and the invariants.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "alloc_btree.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "dump.h"
#include "super.h"

static int add(struct bch_dump_ranges *d, unsigned dev, uint64_t off, uint64_t len,
	       uint64_t dev_size)
{
	if (off >= dev_size || !len)
		return 0;
	if (len > dev_size - off)
		len = dev_size - off;
	if (d->nr == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 256;
		struct bch_dump_range *n = realloc(d->r, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		d->r = n;
		d->cap = cap;
	}
	d->r[d->nr++] = (struct bch_dump_range) { dev, off, len };
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct bch_dump_range *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Sort, then merge overlapping and touching ranges. */
static void merge(struct bch_dump_ranges *d)
{
	size_t o = 0;

	qsort(d->r, d->nr, sizeof(*d->r), cmp_range);
	for (size_t i = 0; i < d->nr; i++) {
		struct bch_dump_range *p = o ? &d->r[o - 1] : NULL, *r = &d->r[i];

		if (p && p->dev == r->dev && r->offset <= p->offset + p->len) {
			uint64_t end = r->offset + r->len;
			if (end > p->offset + p->len)
				p->len = end - p->offset;
		} else {
			d->r[o++] = *r;
		}
	}
	d->nr = o;
}

static int sb_ranges(struct bch_fs *c, struct bch_dump_ranges *d, unsigned dev, uint64_t size)
{
	const struct bch_member *m = bch_sb_member(c->sb, dev);
	const struct bch_sb_layout *l = &c->devs[dev]->disk_sb->layout;
	uint64_t area = (uint64_t)m->first_bucket * m->bucket_size << BCH_SECTOR_SHIFT;
	uint64_t copy = (uint64_t)BCH_SECTOR_SIZE << l->sb_max_size_bits;
	int r;

	if ((r = add(d, dev, 0, area, size)))
		return r;
	d->sb_bytes += area;
	for (unsigned i = 0; i < l->nr_superblocks && i < BCH_SB_LAYOUT_MAX; i++) {
		if ((r = add(d, dev, l->sb_offset[i] << BCH_SECTOR_SHIFT, copy, size)))
			return r;
		d->sb_bytes += copy;
	}
	return 0;
}

static int journal_ranges(struct bch_fs *c, struct bch_dump_ranges *d, const uint64_t *sizes)
{
	struct bch_sb_field_journal *j = bch_sb_get_journal(c->sb);

	if (!j)
		return 0;
	size_t nr = (j->field.u64s * 8 - sizeof(j->field)) / sizeof(j->runs[0]);
	for (size_t i = 0; i < nr; i++) {
		unsigned dev = j->runs[i].dev;
		if (dev >= c->nr_devs || !sizes[dev])
			continue;
		uint64_t bb = (uint64_t)bch_sb_member(c->sb, dev)->bucket_size << BCH_SECTOR_SHIFT;
		int r = add(d, dev, j->runs[i].start * bb, j->runs[i].nr * bb, sizes[dev]);
		if (r)
			return r;
		d->journal_bytes += j->runs[i].nr * bb;
	}
	return 0;
}

/* Does the node slot at byte off of dev start with a node header of this filesystem? */
static int node_at(struct bch_fs *c, unsigned dev, uint64_t off, bool *yes)
{
	union {
		struct bch_btree_node	n;
		char			b[BCH_SECTOR_SIZE];
	} u;
	int r = bch_dev_read(c->devs[dev]->bdev, u.b, sizeof(u.b), off);

	*yes = !r && u.n.magic == BCH_BTREE_NODE_MAGIC &&
	       !memcmp(u.n.fs_uuid, c->sb->uuid, BCH_UUID_SIZE);
	return r;
}

/*
 * Btree nodes: every bucket the alloc info calls btree, whole (a node whose
 * header or bsets are damaged is kept as it is, for fsck to report the
 * same), and in the other buckets that hold no user data (free, or with
 * generations not trusted never allocated either), every node slot that
 * starts with a node header of this filesystem: nodes no longer reachable,
 * which fsck's node scan would find.  Only one sector per slot is read
 * there; bch_node_scan() would read those buckets and the btree buckets
 * whole, which the dump reads anyway.
 */
static int btree_ranges(struct bch_fs *c, struct bch_dump_ranges *d, const uint64_t *sizes)
{
	bool trust_gens = bch_alloc_btree_was_current(c) && !c->journal_replayed &&
			  !c->alloc_recount_partial;
	uint64_t ns = (uint64_t)c->sb->btree_node_size << BCH_SECTOR_SHIFT;
	struct bch_bucket_state st;
	bool yes;
	int r;

	for (unsigned dev = 0; dev < c->nr_devs; dev++) {
		if (!sizes[dev])
			continue;
		uint64_t bb = (uint64_t)bch_alloc_bucket_sectors(c, dev) << BCH_SECTOR_SHIFT;
		uint64_t nb = bch_alloc_nbuckets(c, dev);
		for (uint64_t b = bch_sb_member(c->sb, dev)->first_bucket; b < nb; b++) {
			if (!bch_alloc_bucket_get(c, dev, b, &st))
				continue;
			if (st.data_type == BCH_DATA_btree) {
				if ((r = add(d, dev, b * bb, bb, sizes[dev])))
					return r;
				d->btree_bytes += bb;
				continue;
			}
			if (st.data_type != BCH_DATA_free || (trust_gens && !st.gen))
				continue;
			for (uint64_t o = 0; o + ns <= bb; o += ns) {
				if ((r = node_at(c, dev, b * bb + o, &yes)))
					return r;
				if (!yes)
					continue;
				if ((r = add(d, dev, b * bb + o, ns, sizes[dev])))
					return r;
				d->btree_bytes += ns;
				d->nodes++;
			}
		}
	}
	return 0;
}

int bch_dump_ranges(struct bch_fs *c, struct bch_dump_ranges *d)
{
	uint64_t sizes[BCH_SB_MEMBERS_MAX] = { 0 };
	int r;

	memset(d, 0, sizeof(*d));
	for (unsigned dev = 0; dev < c->nr_devs; dev++)
		if (c->devs[dev] && c->devs[dev]->bdev)
			sizes[dev] = bch_dev_size(c->devs[dev]->bdev);

	for (unsigned dev = 0; dev < c->nr_devs; dev++)
		if (sizes[dev] && (r = sb_ranges(c, d, dev, sizes[dev])))
			return r;
	if ((r = journal_ranges(c, d, sizes)) || (r = btree_ranges(c, d, sizes)))
		return r;
	merge(d);
	return 0;
}

void bch_dump_ranges_exit(struct bch_dump_ranges *d)
{
	free(d->r);
	memset(d, 0, sizeof(*d));
}
