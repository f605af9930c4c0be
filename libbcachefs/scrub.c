// SPDX-License-Identifier: GPL-2.0
/*
 * scrub.c - read every copy of data and metadata, rewrite bad copies from
 * good ones (see scrub.h; fsck_data.c uses the per-extent part).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "ec.h"
#include "errcode.h"
#include "extent_encode.h"
#include "extents.h"
#include "fsck_files.h"
#include "io.h"
#include "reflink.h"
#include "scrub.h"
#include "snapshot.h"

/* ------------------------------------------------------------ one extent */

/* A copy that is not there to read: on a member not given, or a stale cached one. */
static bool copy_skipped(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	return bch_dev_missing(c, p->dev) ||
	       ((p->flags & BCH_EXTENT_PTR_CACHED) && !bch_alloc_ptr_live(c, p));
}

int bch_extent_scrub_read(struct bch_fs *c, const struct bch_bkey *k, uint64_t devs,
			  struct bch_extent_scrub *x)
{
	const struct bch_extent *e = bkey_val(k);
	size_t bytes = (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;
	void *enc = NULL, *dec = NULL;
	int r = 0;

	memset(x, 0, sizeof(*x));
	x->good = -1;
	if (k->type != BCH_BKEY_extent)
		return 0;
	x->nr = bch_extent_nr_ptrs(k);
	enc = bch_dev_alloc_buf(bytes);
	/* encrypted: decrypted into dec, so enc keeps the ciphertext a repair copies */
	bool want_dec = !bch_crc_plain(&e->crc) || c->crypt;
	if (want_dec)
		dec = malloc((size_t)e->crc.uncompressed_sectors << BCH_SECTOR_SHIFT);
	if (!enc || (want_dec && !dec)) {
		r = -ENOMEM;
		goto out;
	}
	/* pass 0: the copies asked for; pass 1: when one is bad, a good source */
	for (unsigned pass = 0; pass < 2 && !r; pass++) {
		if (pass && (!x->bad || x->good >= 0))
			break;
		for (unsigned i = 0; i < x->nr && !r; i++) {
			const struct bch_extent_ptr *p = &e->ptrs[i];
			bool asked = p->dev < 64 && ((devs >> p->dev) & 1);

			if (asked == !!pass || (x->checked & (1U << i)))
				continue;
			if (copy_skipped(c, p)) {
				if (!pass)
					x->skipped |= 1U << i;
				continue;
			}
			int cr = bch_extent_read_copy(c, k, i, enc, dec);
			if (bch_err_is_dl(cr) || cr == -ENOMEM) {
				r = cr;		/* not the copy's fault: every copy would fail */
				break;
			}
			x->checked |= 1U << i;
			x->bytes_read += bytes;
			if (cr) {
				x->bad |= 1U << i;
				if (!x->bad_err)
					x->bad_err = cr;
			} else if (x->good < 0) {
				x->good = i;
				x->good_buf = enc;	/* keep it: the repair's source */
				enc = bch_dev_alloc_buf(bytes);
				if (!enc)
					r = -ENOMEM;
			}
			if (pass && x->good >= 0)
				break;
		}
	}
	/* every copy bad: a striped one is rebuilt from its stripe (the source of its repair) */
	for (unsigned i = 0; !r && x->good < 0 && i < x->nr; i++) {
		if (!(x->bad & (1U << i)) || !(e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED))
			continue;
		int cr = bch_extent_rebuild_copy(c, k, i, enc, dec);
		if (bch_err_is_dl(cr) || cr == -ENOMEM) {
			r = cr;
			break;
		}
		if (!cr) {
			x->good = i;
			x->rebuilt = true;
			x->good_buf = enc;
			enc = NULL;
		}
	}
out:
	free(enc);
	free(dec);
	if (r) {
		bch_extent_scrub_exit(x);
		x->bad = 0;
	}
	return r;
}

void bch_extent_scrub_exit(struct bch_extent_scrub *x)
{
	free(x->good_buf);
	x->good_buf = NULL;
}

int bch_extent_scrub_repair(struct bch_fs *c, const struct bch_bkey *k,
			    const struct bch_extent_scrub *x, unsigned mask,
			    struct bch_bkey **ret, unsigned *fixed)
{
	const struct bch_extent *e = bkey_val(k);
	size_t bytes = (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;
	unsigned nr = x->nr, drop = 0;
	int r = 0;

	*ret = NULL;
	*fixed = 0;
	mask &= x->bad;
	if (x->good < 0 || !mask)
		return 0;

	struct bch_bkey *n = bch_bkey_dup(k);
	struct bch_extent *ne = bkey_val(n);
	for (unsigned i = 0; i < nr; i++) {
		if (!(mask & (1U << i)))
			continue;
		if (e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) {
			/* a cached copy is not rewritten: it goes (promote makes another) */
			bch_alloc_data_account(c, &e->ptrs[i], e->crc.compressed_sectors,
					       -(int64_t)bch_extent_disk_sectors(k));
			drop |= 1U << i;
			*fixed |= 1U << i;
			continue;
		}
		struct bch_extent_ptr np;
		struct bch_dev *ca = e->ptrs[i].dev < c->nr_devs ? c->devs[e->ptrs[i].dev] : NULL;
		if (e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED) {
			/*
			 * In its stripe's block, in place: the bytes the stripe's
			 * parity was computed over (see ec.h, bch_ec_stripe_check())
			 */
			if (!ca || !ca->bdev || !bch_alloc_ptr_live(c, &e->ptrs[i]))
				continue;
			bch_data_reuse_bump(c);	/* rewritten in place (io.h) */
			if (bch_dev_write(ca->bdev, x->good_buf, bytes,
					  (uint64_t)e->ptrs[i].offset << BCH_SECTOR_SHIFT) ||
			    bch_dev_flush(ca->bdev))
				continue;	/* left bad: reported */
			*fixed |= 1U << i;
			continue;
		}
		if (!ca || !ca->bdev || bch_alloc_data_on(c, e->ptrs[i].dev, e->crc.compressed_sectors, &np))
			continue;	/* left as it is: no room, or device gone */
		r = bch_dev_write(ca->bdev, x->good_buf, bytes, (uint64_t)np.offset << BCH_SECTOR_SHIFT);
		if (r) {
			bch_alloc_data_free(c, &np, 1, e->crc.compressed_sectors);
			break;
		}
		bch_alloc_data_account(c, &e->ptrs[i], e->crc.compressed_sectors,
				       -(int64_t)bch_extent_disk_sectors(k));
		/* the new copy was counted whole when allocated: count the key's share */
		bch_alloc_data_account(c, &np, e->crc.compressed_sectors,
				       (int64_t)bch_extent_disk_sectors(k) -
					       (int64_t)e->crc.compressed_sectors);
		ne->ptrs[i] = np;
		*fixed |= 1U << i;
	}
	if (!r && drop) {
		unsigned keep = 0;
		for (unsigned i = 0; i < nr; i++)
			if (!(drop & (1U << i)))
				ne->ptrs[keep++] = ne->ptrs[i];
		n->u64s -= (nr - keep) * sizeof(struct bch_extent_ptr) / 8;
	}
	if (!r && (drop || memcmp(n, k, bkey_bytes(k))))
		*ret = n;
	else
		free(n);
	return r;
}

/* ------------------------------------------------------------ the walk */

static bool stripe_asked(const struct bch_scrub *s, const struct bch_bkey *sk);

static unsigned popcount(uint64_t v)
{
	return (unsigned)__builtin_popcountll(v);
}

int bch_scrub_init(struct bch_fs *c, struct bch_scrub *s, int dev, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->dev = dev;
	s->pos = POS_MIN;
	if (dev >= 0 && ((unsigned)dev >= c->nr_devs || !c->devs[dev])) {
		snprintf(err, errlen, "no member %d", dev);
		return -EINVAL;
	}
	if (dev >= 0 && bch_dev_missing(c, dev)) {
		snprintf(err, errlen, "member %d is missing (opened degraded): nothing to read", dev);
		return -BCH_ERR_device_missing;
	}
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev_usage u;

		if (!c->devs[i] || bch_dev_missing(c, i) || (dev >= 0 && (unsigned)dev != i))
			continue;
		bch_dev_usage_get(c, i, &u);
		s->bytes_total += (u.sectors[BCH_DATA_user] + u.sectors[BCH_DATA_btree] +
				   u.cached_sectors) << BCH_SECTOR_SHIFT;
	}
	/* stripes are read whole first: their data blocks count twice */
	if (c->roots->r[BCH_BTREE_ID_stripes].key) {
		struct btree_iter it;
		const struct bch_bkey *k;
		int r = 0;

		bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, POS_MIN, POS_MAX);
		while ((k = bch_btree_iter_next(&it, &r)))
			if (k->type == BCH_BKEY_stripe && !bch_stripe_validate(k, NULL, 0) &&
			    stripe_asked(s, k))
				s->bytes_total += ((uint64_t)bch_stripe_val(k)->block_sectors <<
						   BCH_SECTOR_SHIFT) *
						  bch_stripe_data_blocks(bch_stripe_val(k));
		bch_btree_iter_exit(&it);
		c->err_msg[0] = 0;	/* an estimate: the walk reports what it finds */
	}
	return 0;
}

/* Name something left bad (the first BCH_SCRUB_BAD_MAX; all are counted). */
static struct bch_scrub_bad *bad_add(struct bch_scrub *s)
{
	s->unrepairable++;
	if (s->nr_bad >= BCH_SCRUB_BAD_MAX)
		return NULL;
	struct bch_scrub_bad *b = &s->bad[s->nr_bad++];
	memset(b, 0, sizeof(*b));
	return b;
}

static int put_extent(struct bch_fs *c, const struct bch_bkey *k)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (!r) {
		struct bch_view raw;	/* the copy is rewritten where the key lies */
		bch_view_enter_raw(c, &raw);
		r = bch_trans_update(t, BCH_BTREE_ID_extents, k);
		bch_view_exit(&raw);
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
	}
	return r;
}

/*
 * An indirect extent's repair (reflink.h): the key as rewritten (n, an
 * extent form) back as a reflink_v with v's refcount (read in this step,
 * under the caller's lock: current).
 */
static int put_indirect(struct bch_fs *c, const struct bch_bkey *n, const struct bch_bkey *v)
{
	const struct bch_extent *e = bkey_val(n);
	unsigned nr = bch_extent_nr_ptrs(n);
	struct bch_bkey *nv = bch_bkey_alloc(BCH_BKEY_reflink_v, v->p,
					     sizeof(struct bch_reflink_v) + nr * sizeof(e->ptrs[0]));
	struct btree_trans *t;
	int r;

	if (!nv)
		return -ENOMEM;
	struct bch_reflink_v *rv = bkey_val(nv);
	nv->size = n->size;
	nv->version = n->version;
	rv->refcount = ((const struct bch_reflink_v *)bkey_val(v))->refcount;
	rv->crc = e->crc;
	memcpy(rv->ptrs, e->ptrs, nr * sizeof(e->ptrs[0]));
	if (!(r = bch_trans_init(c, &t))) {
		r = bch_trans_update(t, BCH_BTREE_ID_reflink, nv);
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
	}
	free(nv);
	return r;
}

static int scrub_extent_one(struct bch_fs *c, struct bch_scrub *s, const struct bch_bkey *k,
			    const struct bch_bkey *indirect);

/* k: an extent, or a reflink_v (its copies checked once, whatever its sharers). */
static int scrub_extent(struct bch_fs *c, struct bch_scrub *s, const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_reflink_v)
		return scrub_extent_one(c, s, k, NULL);
	struct bch_bkey *x = bch_reflink_v_to_extent(k);
	if (!x)
		return -ENOMEM;
	int r = scrub_extent_one(c, s, x, k);
	free(x);
	return r;
}

static int scrub_extent_one(struct bch_fs *c, struct bch_scrub *s, const struct bch_bkey *k,
			    const struct bch_bkey *indirect)
{
	uint64_t devs = s->dev < 0 ? ~0ULL : 1ULL << s->dev;
	struct bch_extent_scrub x;
	unsigned left, fixed = 0;
	int r;

	if (k->type != BCH_BKEY_extent)
		return 0;
	if ((r = bch_extent_scrub_read(c, k, devs, &x)))
		return bch_fs_err(c, r, "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64 ": %s",
				  (uint64_t)k->p.inode, bch_extent_start(k), (uint64_t)k->p.offset,
				  bch_err_str(r));
	s->extents_checked++;
	s->bytes_read += x.bytes_read;
	s->copies_checked += popcount(x.checked);
	s->copies_bad += popcount(x.bad);
	s->copies_skipped += popcount(x.skipped);
	left = x.bad;
	if (x.bad && x.good >= 0 && !c->read_only) {
		struct bch_bkey *n;
		r = bch_extent_scrub_repair(c, k, &x, x.bad, &n, &fixed);
		if (!r && n)
			r = indirect ? put_indirect(c, n, indirect) : put_extent(c, n);
		free(n);
		if (r) {
			bch_extent_scrub_exit(&x);
			return bch_fs_err(c, r, "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64
					  ": rewriting a bad copy: %s", (uint64_t)k->p.inode,
					  bch_extent_start(k), (uint64_t)k->p.offset, bch_err_str(r));
		}
		s->copies_repaired += popcount(fixed);
		left &= ~fixed;
	}
	if (left) {
		struct bch_scrub_bad *b = bad_add(s);
		s->unrepairable_bytes += (uint64_t)k->size << BCH_SECTOR_SHIFT;
		if (b) {
			char iw[320];
			fsck_inode_where(c, k->p.inode, iw, sizeof(iw));
			b->inode = k->p.inode;
			b->start = bch_extent_start(k);
			b->end = k->p.offset;
			b->bytes = (uint64_t)k->size << BCH_SECTOR_SHIFT;
			snprintf(b->what, sizeof(b->what), "%s sectors %" PRIu64 "..%" PRIu64, iw,
				 b->start, b->end);
			if (x.good < 0)
				snprintf(b->why, sizeof(b->why), "no good copy (%s)",
					 bch_err_str(x.bad_err));
			else if (c->read_only)
				snprintf(b->why, sizeof(b->why), "opened read-only");
			else
				snprintf(b->why, sizeof(b->why),
					 "a bad copy could not be rewritten (no space on its device)");
		}
	}
	bch_extent_scrub_exit(&x);
	return 0;
}

/* ------------------------------------------------------------ stripes */

/* Block i of stripe sk, for a message: "stripe 3 block 5 (parity, member 2)" */
static void stripe_block_name(const struct bch_bkey *sk, unsigned i, char *buf, size_t len)
{
	const struct bch_stripe *st = bch_stripe_val(sk);

	snprintf(buf, len, "stripe %" PRIu64 " block %u (%s, member %u sector %" PRIu64 ")",
		 (uint64_t)sk->p.offset, i, i < bch_stripe_data_blocks(st) ? "data" : "parity",
		 st->blocks[i].ptr.dev, (uint64_t)st->blocks[i].ptr.offset);
}

/* Does stripe sk have a block this scrub is asked about? */
static bool stripe_asked(const struct bch_scrub *s, const struct bch_bkey *sk)
{
	const struct bch_stripe *st = bch_stripe_val(sk);

	if (s->dev < 0)
		return true;
	for (unsigned i = 0; i < st->nr_blocks; i++)
		if (st->blocks[i].ptr.dev == (unsigned)s->dev)
			return true;
	return false;
}

static int scrub_stripe(struct bch_fs *c, struct bch_scrub *s, const struct bch_bkey *sk)
{
	struct bch_ec_check x;
	int r;

	if (sk->type != BCH_BKEY_stripe || bch_stripe_validate(sk, NULL, 0) || !stripe_asked(s, sk))
		return 0;	/* a key fsck judges */
	if ((r = bch_ec_stripe_check(c, sk, ~0U, &x)))
		return bch_fs_err(c, r, "stripe %" PRIu64 ": %s", (uint64_t)sk->p.offset,
				  bch_err_str(r));
	uint32_t bad = x.bad | x.parity_wrong, left = bad & ~x.repaired;
	s->stripes_checked++;
	s->bytes_read += x.bytes_read;
	s->copies_checked += x.nr_blocks - popcount(x.skipped);
	s->copies_skipped += popcount(x.skipped);
	s->copies_bad += popcount(bad);
	s->copies_repaired += popcount(x.repaired);
	if (x.unrecoverable && !left)
		left = 1;	/* nothing found bad alone, but the stripe does not add up */
	if (!left)
		return 0;
	/*
	 * Bad ranges that do not line up across the blocks: the extents'
	 * repairs (their checksums say which copy is bad where) may restore
	 * them; the stripe is checked again after the extents
	 */
	if (x.unrecoverable && !c->read_only && s->nr_recheck < BCH_SCRUB_BAD_MAX)
		s->recheck[s->nr_recheck++] = (uint32_t)sk->p.offset;
	/* one entry per stripe: what is left bad, and why */
	struct bch_scrub_bad *b = bad_add(s);
	if (!b)
		return 0;
	b->stripe = true;
	b->inode = sk->p.offset;
	if (bad) {
		unsigned first = __builtin_ctz(left);
		stripe_block_name(sk, first, b->what, sizeof(b->what));
		if (popcount(left) > 1)
			snprintf(b->what + strlen(b->what), sizeof(b->what) - strlen(b->what),
				 " and %u more", popcount(left) - 1);
	} else {
		snprintf(b->what, sizeof(b->what), "stripe %" PRIu64, (uint64_t)sk->p.offset);
	}
	if (x.unrecoverable)
		snprintf(b->why, sizeof(b->why), "%s",
			 bad ? "more bad blocks than parity: cannot be rebuilt (reads rebuild "
			       "what the extents' checksums can verify)"
			     : "parity differs and the stripe has no block checksums to say "
			       "which block is wrong");
	else if (c->read_only)
		snprintf(b->why, sizeof(b->why), "opened read-only");
	else
		snprintf(b->why, sizeof(b->why), "rebuilt, but could not be written back");
	return 0;
}

/* Phase 0: the stripes (before the extents, so those in a repaired block then read good). */
static int step_stripes(struct bch_fs *c, struct bch_scrub *s, uint64_t budget)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	struct bch_bkey *keys[8];
	unsigned nr = 0;
	uint64_t est = 0;
	int r = 0;

	if (!c->roots->r[BCH_BTREE_ID_stripes].key) {
		s->phase = 1;
		s->pos = POS_MIN;
		return 0;
	}
	/* collect, then check: a repair may update a stripe key (no iterator open then) */
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, s->pos, POS_MAX);
	while (nr < 8 && est < budget && (k = bch_btree_iter_next(&it, &r))) {
		keys[nr++] = bch_bkey_dup(k);
		if (k->type == BCH_BKEY_stripe && bkey_val_bytes(k) >= sizeof(struct bch_stripe))
			est += ((uint64_t)bch_stripe_val(k)->block_sectors << BCH_SECTOR_SHIFT) *
			       bch_stripe_val(k)->nr_blocks;
	}
	bch_btree_iter_exit(&it);
	if (!nr && !r) {
		s->phase = 1;
		s->pos = POS_MIN;
	}
	for (unsigned i = 0; i < nr; i++) {
		if (!r && !keys[i])
			r = -ENOMEM;
		if (!r) {
			r = scrub_stripe(c, s, keys[i]);
			if (!r)
				s->pos = bpos_successor(keys[i]->p);
		}
		free(keys[i]);
	}
	return r;
}

/* The stripes left unrecoverable, again: those now whole are no longer named. */
static int recheck_stripes(struct bch_fs *c, struct bch_scrub *s)
{
	int r = 0;

	for (unsigned i = 0; i < s->nr_recheck && !r; i++) {
		struct bch_bkey *sk;
		struct bch_ec_check x;

		if (bch_btree_lookup(c, BCH_BTREE_ID_stripes, POS(0, s->recheck[i], 0), &sk)) {
			c->err_msg[0] = 0;
			continue;
		}
		r = bch_ec_stripe_check(c, sk, ~0U, &x);
		free(sk);
		if (r || x.unrecoverable || ((x.bad | x.parity_wrong) & ~x.repaired))
			continue;
		s->copies_repaired += __builtin_popcount(x.repaired);
		for (unsigned j = 0; j < s->nr_bad; j++) {
			if (!s->bad[j].stripe || s->bad[j].inode != s->recheck[i])
				continue;
			memmove(&s->bad[j], &s->bad[j + 1], (s->nr_bad - j - 1) * sizeof(s->bad[0]));
			s->nr_bad--;
			s->unrepairable--;
			break;
		}
	}
	s->nr_recheck = 0;
	return r ? bch_fs_err(c, r, "checking stripes again: %s", bch_err_str(r)) : 0;
}

/* ------------------------------------------------------------ extents */

#define STEP_KEYS	64

static int step_extents(struct bch_fs *c, struct bch_scrub *s, uint64_t budget)
{
	struct bch_bkey *keys[STEP_KEYS];
	unsigned nr = 0;
	uint64_t est = 0;
	struct btree_iter it;
	const struct bch_bkey *k;
	int r = 0;

	/* collect, then check: a repair changes the tree (no iterator open then) */
	/* the extents, then the indirect extents (reflink.h) */
	bch_btree_iter_init(&it, c, s->in_reflink ? BCH_BTREE_ID_reflink : BCH_BTREE_ID_extents,
			    s->pos, POS_MAX);
	while (nr < STEP_KEYS && est < budget && (k = bch_btree_iter_next(&it, &r))) {
		keys[nr++] = bch_bkey_dup(k);
		if (k->type == BCH_BKEY_extent)
			est += ((uint64_t)((const struct bch_extent *)bkey_val(k))->crc.compressed_sectors
				<< BCH_SECTOR_SHIFT) * bch_extent_nr_ptrs(k);
		else if (k->type == BCH_BKEY_reflink_v)
			est += (uint64_t)((const struct bch_reflink_v *)bkey_val(k))->crc.compressed_sectors
				<< BCH_SECTOR_SHIFT;
	}
	bch_btree_iter_exit(&it);
	if (!nr && !r && !s->in_reflink && c->roots->r[BCH_BTREE_ID_reflink].key) {
		s->in_reflink = true;
		s->pos = POS_MIN;
		return 0;
	}
	if (!nr && !r) {
		r = recheck_stripes(c, s);
		s->in_reflink = false;
		s->phase = 2;
		s->btree_id = 0;
		s->level = 0;
		s->pos = POS_MIN;
	}
	for (unsigned i = 0; i < nr; i++) {
		if (!r) {
			r = scrub_extent(c, s, keys[i]);
			if (!r)
				s->pos = bpos_successor(keys[i]->p);
		}
		free(keys[i]);
	}
	return r;
}

/* Next node at this level after one ending at max (or the next level). */
static void node_next(struct bch_scrub *s, struct bch_bpos max)
{
	if (bpos_eq(max, POS_MAX)) {
		s->level++;
		s->pos = POS_MIN;
	} else {
		s->pos = bpos_successor(max);
	}
}

/* The node at s->pos could not be read: name it, and go past its range. */
static void node_unreadable(struct bch_fs *c, struct bch_scrub *s)
{
	struct bch_scrub_bad *b = bad_add(s);
	struct bch_bpos max = POS_MAX;
	struct btree *p;
	char pos[80];

	bch_bpos_to_text(s->pos, pos, sizeof(pos));
	if (b) {
		b->btree = true;
		snprintf(b->what, sizeof(b->what), "%s btree level %u node at %s",
			 bch_btree_id_name(s->btree_id), s->level, pos);
		snprintf(b->why, sizeof(b->why), "no good copy (%.280s)",
			 c->err_msg[0] ? c->err_msg : "unreadable");
	}
	c->err_msg[0] = 0;
	/* its range is its parent's pointer to it */
	if (!bch_btree_find_node(c, s->btree_id, s->level + 1, s->pos, &p)) {
		int i = bch_btree_node_find(p, s->pos);
		if (i < (int)p->nr)
			max = bch_btree_key_pos(p, i);
		bch_btree_node_put(c, p);
	}
	c->err_msg[0] = 0;
	node_next(s, max);
}

static int scrub_node(struct bch_fs *c, struct bch_scrub *s, struct btree *b, uint64_t *bytes)
{
	unsigned only = 0, bad = 0, missing = 0;
	char why[240];
	int r = 0;

	s->nodes_checked++;
	if (!b->sectors_written)
		return 0;	/* new, not written yet: nothing on disk to read */
	for (unsigned i = 0; i < b->nr_ptrs; i++)
		if (s->dev < 0 || b->ptrs[i].dev == (unsigned)s->dev)
			only |= 1U << i;
	if (!only)
		return 0;
	struct bch_bkey *ptr = bch_btree_ptr_key(b);
	uint64_t before = *bytes;
	r = bch_btree_node_verify(c, b->id, b->level, ptr, only, &bad, &missing, bytes,
				  why, sizeof(why));
	free(ptr);
	if (r)
		return bch_fs_err(c, r, "%s btree level %u: reading a node: %s",
				  bch_btree_id_name(b->id), b->level, bch_err_str(r));
	/* a bad copy was read whole or in part: count the node's size for it */
	*bytes += (uint64_t)popcount(bad) * b->sectors_written << BCH_SECTOR_SHIFT;
	s->bytes_read += *bytes - before;
	s->copies_checked += popcount(only & ~missing);
	s->copies_bad += popcount(bad);
	s->copies_skipped += popcount(missing);
	if (!bad)
		return 0;
	if (!c->read_only && !(r = bch_btree_node_rewrite(c, b))) {
		s->copies_repaired += popcount(bad);
		return 0;
	}
	struct bch_scrub_bad *u = bad_add(s);
	if (u) {
		char lo[80], hi[80];
		u->btree = true;
		bch_bpos_to_text(b->min_key, lo, sizeof(lo));
		bch_bpos_to_text(b->max_key, hi, sizeof(hi));
		snprintf(u->what, sizeof(u->what), "%s btree level %u node %s..%s",
			 bch_btree_id_name(b->id), b->level, lo, hi);
		snprintf(u->why, sizeof(u->why), "%.150s; not rewritten: %.140s", why,
			 r ? (c->err_msg[0] ? c->err_msg : bch_err_str(r)) : "opened read-only");
	}
	c->err_msg[0] = 0;
	return 0;
}

static int step_nodes(struct bch_fs *c, struct bch_scrub *s, uint64_t budget)
{
	uint64_t bytes = 0;

	while (bytes < budget) {
		if (s->btree_id >= BCH_BTREE_ID_NR) {
			s->phase = 3;
			return 0;
		}
		struct btree_root *root = &c->roots->r[s->btree_id];
		if (!root->key || s->level > root->level) {
			s->btree_id++;
			s->level = 0;
			s->pos = POS_MIN;
			continue;
		}
		struct btree *b;
		c->err_msg[0] = 0;
		int r = bch_btree_find_node(c, s->btree_id, s->level, s->pos, &b);
		if (r == -ENOMEM || bch_err_is_dl(r))
			return r;
		if (r) {
			node_unreadable(c, s);
			continue;
		}
		struct bch_bpos max = b->max_key;
		r = scrub_node(c, s, b, &bytes);
		bch_btree_node_put(c, b);
		if (r)
			return r;
		node_next(s, max);
		bytes += 4096;	/* a step ends even over nodes with nothing on disk */
	}
	return 1;
}

int bch_scrub_step(struct bch_fs *c, struct bch_scrub *s, uint64_t budget)
{
	int r;

	if (!budget)
		budget = 1;
	switch (s->phase) {
	case 0:
		r = step_stripes(c, s, budget);
		return r < 0 ? r : 1;
	case 1:
		r = step_extents(c, s, budget);
		return r < 0 ? r : 1;
	case 2:
		return step_nodes(c, s, budget);
	default:
		return 0;
	}
}
