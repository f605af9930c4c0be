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
#include "btree_node_scan.h"
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

/*
 * Btree nodes: every bucket the alloc info calls btree, whole (a node whose
 * first bset is damaged is kept as it is, for fsck to report the same), and
 * every node the scan finds elsewhere (unreachable, in buckets since freed).
 */
static int btree_ranges(struct bch_fs *c, struct bch_dump_ranges *d, const uint64_t *sizes)
{
	bool trust_gens = bch_alloc_btree_was_current(c) && !c->journal_replayed &&
			  !c->alloc_recount_partial;
	uint64_t ns = (uint64_t)c->sb->btree_node_size << BCH_SECTOR_SHIFT;
	struct bch_node_scan s;
	struct bch_bucket_state st;
	int r;

	for (unsigned dev = 0; dev < c->nr_devs; dev++) {
		if (!sizes[dev])
			continue;
		uint64_t bb = (uint64_t)bch_alloc_bucket_sectors(c, dev) << BCH_SECTOR_SHIFT;
		uint64_t nb = bch_alloc_nbuckets(c, dev);
		for (uint64_t b = bch_sb_member(c->sb, dev)->first_bucket; b < nb; b++)
			if (bch_alloc_bucket_get(c, dev, b, &st) && st.data_type == BCH_DATA_btree) {
				if ((r = add(d, dev, b * bb, bb, sizes[dev])))
					return r;
				d->btree_bytes += bb;
			}
	}

	memset(&s, 0, sizeof(s));
	r = bch_node_scan(c, &s, trust_gens);
	for (size_t i = 0; !r && i < s.nr; i++) {
		const struct bch_extent_ptr *p = &s.n[i].ptr;
		if (p->dev < c->nr_devs && sizes[p->dev] &&
		    !(r = add(d, p->dev, (uint64_t)p->offset << BCH_SECTOR_SHIFT, ns, sizes[p->dev])))
			d->btree_bytes += ns;
	}
	d->nodes = s.nr;
	bch_node_scan_exit(&s);
	return r;
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
