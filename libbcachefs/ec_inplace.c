// SPDX-License-Identifier: GPL-2.0
/*
 * ec_inplace.c - stripes built in place: candidate buckets become the data
 * blocks where they lie (the rule below); ec.c's bch_ec_step() runs this
 * builder before the one that rewrites extents into new blocks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "bkey.h"
#include "blockdev.h"
#include "btree.h"
#include "checksum.h"
#include "dl.h"
#include "ec.h"
#include "ec_build.h"
#include "inode.h"
#include "errcode.h"
#include "extent_encode.h"
#include "extents.h"
#include "io.h"
#include "move.h"
#include "opts.h"
#include "replicas.h"
#include "super.h"

/* ------------------------------------------------ in place (issue 34) */

/*
 * Stripes whose data blocks are stripe candidate buckets where they lie
 * (alloc.h): a bucket qualifies ("in place") when every live sector in it
 * is the first copy (ptrs[0]) of an extent the builder would take (a
 * replicated, unstriped extent of a file with erasure_code on), it holds
 * no cached data, it is not open for any stream and no stripe names it.
 * Whatever wrote it, each extent then lies in at most one such bucket
 * (only its first copy counts), so a stripe of such buckets covers each
 * extent once.  The write path puts erasure-coded files' first copies in a
 * candidate stream of their own so that its buckets qualify when full; the
 * rule itself needs nothing on disk (after a reopen they still qualify).
 *
 * One walk of the stripes and extents btrees finds them (ip_scan: per
 * bucket of each member, the sectors of first copies and where the last
 * ends; buckets something else points into are marked), then the stripes
 * of this step are planned (k buckets on k distinct members, p parity
 * members among the others), one more walk collects their extents, and
 * each stripe is built: its blocks read as they lie (the bytes past the
 * last extent of a shorter block are written as zeros, so every block is
 * defined on disk), each extent verified in them against its checksum,
 * parity computed, written and flushed with the data members, then one
 * transaction adds the stripe key and points each extent at its first copy
 * as a striped pointer, its other copies dropped (their sectors come off
 * after).  Writes: the replicas plus p/k of parity.
 */
enum { IP_NONE, IP_BAD, IP_OK, IP_USED };

struct ip_stripe {
	unsigned	k, p;
	unsigned	devs[BCH_STRIPE_BLOCKS_MAX];	/* data members, then parity members */
	uint64_t	bucket[BCH_EC_K_MAX];
	unsigned	block_sectors;
	struct cand	*cands;
	size_t		nr, cap;
	size_t		u64s;
	bool		skip;		/* too many extents for one transaction: not built */
	struct build	b;		/* prepared: blocks, parity written */
	struct bch_bkey	*sk;		/* prepared: the stripe key to commit */
};

void ec_ip_free(struct inplace *ip)
{
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++) {
		free(ip->d[i].live);
		free(ip->d[i].end);
		free(ip->d[i].nkeys);
		free(ip->d[i].state);
	}
	memset(ip, 0, sizeof(*ip));
}

/* The bucket of p in ip (-1: none, or not inside one bucket over span sectors). */
static int64_t ip_bucket(const struct inplace *ip, const struct bch_extent_ptr *p, unsigned span)
{
	const struct ip_dev *d = p->dev < BCH_SB_MEMBERS_MAX ? &ip->d[p->dev] : NULL;
	uint64_t b;

	if (!d || !d->state || (b = p->offset / d->bucket_sectors) >= d->nbuckets ||
	    p->offset % d->bucket_sectors + span > d->bucket_sectors)
		return -1;
	return (int64_t)b;
}

static void ip_mark_bad(struct inplace *ip, const struct bch_extent_ptr *p)
{
	const struct ip_dev *d = p->dev < BCH_SB_MEMBERS_MAX ? &ip->d[p->dev] : NULL;
	uint64_t b;

	if (d && d->state && (b = p->offset / d->bucket_sectors) < d->nbuckets)
		d->state[b] = IP_BAD;
}

/* The extent's first copy, when k is one the builder takes and that copy may be a block's. */
static bool ip_first_copy(struct bch_fs *c, struct bch_inode_ec_memo *memo, const struct bch_bkey *k)
{
	const struct bch_extent *e = bkey_val(k);

	return ec_candidate(k, BCH_STRIPE_BLOCK_MAX) &&
	       !(e->ptrs[0].flags & BCH_EXTENT_PTR_CACHED) && bch_alloc_ptr_live(c, &e->ptrs[0]) &&
	       bch_inode_ec_memo_on(c, memo, k->p.inode);
}

int ec_ip_scan(struct bch_fs *c, const unsigned *members, unsigned nr_members,
	       struct inplace *ip)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	for (unsigned i = 0; i < nr_members; i++) {
		struct ip_dev *d = &ip->d[members[i]];

		d->nbuckets = bch_alloc_nbuckets(c, members[i]);
		d->bucket_sectors = bch_alloc_bucket_sectors(c, members[i]);
		d->live = calloc(d->nbuckets, sizeof(*d->live));
		d->end = calloc(d->nbuckets, sizeof(*d->end));
		d->nkeys = calloc(d->nbuckets, sizeof(*d->nkeys));
		d->state = calloc(d->nbuckets, 1);
		if (!d->live || !d->end || !d->nkeys || !d->state)
			return -ENOMEM;
	}
	/* every block of every stripe: never a second stripe's */
	if (c->roots->r[BCH_BTREE_ID_stripes].key) {
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, POS_MIN, POS_MAX);
		while ((k = bch_btree_iter_next(&it, &err)))
			if (k->type == BCH_BKEY_stripe && !bch_stripe_validate(k, NULL, 0))
				for (unsigned i = 0; i < bch_stripe_val(k)->nr_blocks; i++)
					ip_mark_bad(ip, &bch_stripe_val(k)->blocks[i].ptr);
		bch_btree_iter_exit(&it);
		if (err)
			return err;
	}
	struct bch_inode_ec_memo memo = { 0 };
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent)
			continue;
		const struct bch_extent *e = bkey_val(k);
		unsigned nr = bch_extent_nr_ptrs(k), cs = e->crc.compressed_sectors;
		bool first = ip_first_copy(c, &memo, k);
		int64_t b = first ? ip_bucket(ip, &e->ptrs[0], cs) : -1;

		ip->cands += ec_candidate(k, BCH_STRIPE_BLOCK_MAX) &&
			     bch_inode_ec_memo_on(c, &memo, k->p.inode);

		if (b >= 0 && ip->d[e->ptrs[0].dev].state[b] != IP_BAD) {
			struct ip_dev *d = &ip->d[e->ptrs[0].dev];
			unsigned end = e->ptrs[0].offset % d->bucket_sectors + cs;

			d->live[b] += bch_extent_disk_sectors(k);
			d->end[b] = end > d->end[b] ? end : d->end[b];
			d->nkeys[b]++;
			d->state[b] = IP_OK;
		} else if (first && b < 0) {
			ip_mark_bad(ip, &e->ptrs[0]);
		}
		for (unsigned i = first ? 1 : 0; i < nr; i++)
			ip_mark_bad(ip, &e->ptrs[i]);
	}
	bch_btree_iter_exit(&it);
	if (err)
		return err;
	/*
	 * A block is at most the smallest bucket of any member it may be
	 * paired with (each block, parity too, lies inside one bucket)
	 */
	unsigned max_block = BCH_STRIPE_BLOCK_MAX;
	for (unsigned i = 0; i < nr_members; i++)
		if (ip->d[members[i]].bucket_sectors < max_block)
			max_block = ip->d[members[i]].bucket_sectors;
	/* then only what the first copies account for: no reflinked or cached data, not open */
	for (unsigned i = 0; i < nr_members; i++) {
		unsigned dev = members[i];
		struct ip_dev *d = &ip->d[dev];

		for (uint64_t b = 0; b < d->nbuckets; b++) {
			struct bch_bucket_state s;

			if (d->state[b] != IP_OK)
				continue;
			/*
			 * and at least 3/4 full: a sparser one (the rest of a
			 * candidate bucket data rebalance closed, copies the
			 * move path happened to line up) is packed densely by
			 * the rewriting path instead: its unused rest would stay
			 * taken while the stripe lives, and what is left over
			 * for the rewriting path would need more stripes (t74:
			 * one extent too many for the last, left alone)
			 */
			if (!bch_alloc_bucket_get(c, dev, b, &s) || s.data_type != BCH_DATA_user ||
			    s.sectors != d->live[b] || s.cached_sectors || d->end[b] > max_block ||
			    4 * (uint64_t)d->live[b] < 3 * (uint64_t)d->bucket_sectors ||
			    bch_alloc_bucket_open(c, dev, b))
				d->state[b] = IP_BAD;
			else
				ip->left += d->live[b];
		}
	}
	return 0;
}

/* Is k's first copy in a bucket the in-place builder takes, now or once it fills? */
bool ec_ip_claims(struct bch_fs *c, const struct inplace *ip, const struct bch_bkey *k)
{
	const struct bch_extent *e = bkey_val(k);
	int64_t b;

	if (bch_alloc_ec_open(c, &e->ptrs[0]))
		return true;
	b = ip_bucket(ip, &e->ptrs[0], e->crc.compressed_sectors);
	return b >= 0 && ip->d[e->ptrs[0].dev].state[b] == IP_OK;
}

/* The next qualifying bucket of dev from *cursor on (-1: none). */
static int64_t ip_next(struct inplace *ip, unsigned dev, uint64_t *cursor)
{
	struct ip_dev *d = &ip->d[dev];

	for (; *cursor < d->nbuckets; (*cursor)++)
		if (d->state[*cursor] == IP_OK)
			return (int64_t)*cursor;
	return -1;
}

/*
 * Plan one stripe: k data members that have a qualifying bucket (the ones
 * with the most first, so they stay even), each its lowest such bucket; p
 * parity members among the rest, emptiest first.  At least want data
 * blocks, or false.
 */
static bool ip_plan(struct bch_fs *c, struct inplace *ip, const unsigned *members, unsigned nr,
		    unsigned k_max, unsigned p, unsigned want, uint64_t *cursor, struct ip_stripe *s)
{
	unsigned have[BCH_STRIPE_BLOCKS_MAX] = { 0 }, order[BCH_STRIPE_BLOCKS_MAX];
	bool data[BCH_STRIPE_BLOCKS_MAX] = { false };

	for (unsigned i = 0; i < nr; i++) {
		uint64_t cur = cursor[i];
		order[i] = i;
		while (ip_next(ip, members[i], &cur) >= 0) {
			have[i]++;
			cur++;
		}
	}
	for (unsigned i = 1; i < nr; i++)	/* most waiting first */
		for (unsigned j = i; j > 0 && have[order[j]] > have[order[j - 1]]; j--) {
			unsigned t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	memset(s, 0, sizeof(*s));
	for (unsigned o = 0; o < nr && s->k < k_max && have[order[o]]; o++) {
		unsigned i = order[o];

		s->devs[s->k] = members[i];
		s->bucket[s->k] = (uint64_t)ip_next(ip, members[i], &cursor[i]);
		data[i] = true;
		s->k++;
	}
	if (s->k < want || s->k < 2)
		return false;
	/* parity: the members not taking data, most empty buckets first */
	unsigned rest[BCH_STRIPE_BLOCKS_MAX], nrest = 0;
	for (unsigned i = 0; i < nr; i++)
		if (!data[i])
			rest[nrest++] = members[i];
	if (nrest < p)
		return false;
	for (unsigned i = 1; i < nrest; i++)
		for (unsigned j = i; j > 0; j--) {
			struct bch_alloc_space x, y;
			bch_alloc_dev_space(c, rest[j], &x);
			bch_alloc_dev_space(c, rest[j - 1], &y);
			if ((unsigned __int128)x.nr_empty * y.nbuckets <=
			    (unsigned __int128)y.nr_empty * x.nbuckets)
				break;
			unsigned t = rest[j];
			rest[j] = rest[j - 1];
			rest[j - 1] = t;
		}
	s->p = p;
	for (unsigned i = 0; i < p; i++)
		s->devs[s->k + i] = rest[i];
	for (unsigned i = 0; i < s->k; i++) {
		unsigned e = ip->d[s->devs[i]].end[s->bucket[i]];
		s->block_sectors = e > s->block_sectors ? e : s->block_sectors;
		ip->d[s->devs[i]].state[s->bucket[i]] = IP_USED;
		ip->left -= ip->d[s->devs[i]].live[s->bucket[i]];
		ip->planned += ip->d[s->devs[i]].nkeys[s->bucket[i]];
	}
	return true;
}

/* Planned stripe s given back: its buckets qualify again (the other path may take them). */
static void ip_unplan(struct inplace *ip, struct ip_stripe *s, uint64_t *cursor,
		      const unsigned *members, unsigned nr)
{
	for (unsigned i = 0; i < s->k; i++) {
		struct ip_dev *d = &ip->d[s->devs[i]];

		d->state[s->bucket[i]] = IP_OK;
		ip->left += d->live[s->bucket[i]];
		ip->planned -= d->nkeys[s->bucket[i]];
		for (unsigned m = 0; m < nr; m++)
			if (members[m] == s->devs[i] && cursor[m] > s->bucket[i])
				cursor[m] = s->bucket[i];
	}
}

/* Collect the extents whose first copies lie in the planned stripes' buckets (one walk). */
static int ip_collect(struct bch_fs *c, struct inplace *ip, struct ip_stripe *ss, unsigned nr_ss)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	size_t u64s_max = bch_trans_max_u64s(c) / 2;
	int err = 0;

	for (unsigned i = 0; i < nr_ss; i++)
		ss[i].u64s = BCH_BKEY_U64s + (sizeof(struct bch_stripe) +
			     BCH_STRIPE_BLOCKS_MAX * sizeof(struct bch_stripe_block)) / 8 + 1;
	struct bch_inode_ec_memo memo = { 0 };
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent || !ip_first_copy(c, &memo, k))
			continue;
		const struct bch_extent *e = bkey_val(k);
		int64_t b = ip_bucket(ip, &e->ptrs[0], e->crc.compressed_sectors);

		if (b < 0 || ip->d[e->ptrs[0].dev].state[b] != IP_USED)
			continue;
		for (unsigned i = 0; i < nr_ss; i++) {
			struct ip_stripe *s = &ss[i];
			unsigned j;

			for (j = 0; j < s->k; j++)
				if (s->devs[j] == e->ptrs[0].dev && s->bucket[j] == (uint64_t)b)
					break;
			if (j == s->k)
				continue;
			s->u64s += ec_new_key_u64s() + 1;
			if (s->u64s > u64s_max) {
				s->skip = true;	/* too many extents for one transaction */
				break;
			}
			if (s->nr == s->cap) {
				s->cap = s->cap ? 2 * s->cap : 64;
				struct cand *n = realloc(s->cands, s->cap * sizeof(*n));
				if (!n) {
					err = -ENOMEM;
					break;
				}
				s->cands = n;
			}
			uint64_t start = (uint64_t)b * ip->d[e->ptrs[0].dev].bucket_sectors;
			s->cands[s->nr++] = (struct cand) {
				.k = bch_bkey_dup(k), .block = j,
				.off = (unsigned)(e->ptrs[0].offset - start),
			};
			if (!s->cands[s->nr - 1].k)
				err = -ENOMEM;
			break;
		}
		if (err)
			break;
	}
	bch_btree_iter_exit(&it);
	return err;
}

/* Do the bytes of candidate x, at its place in block buffer blk, verify? */
static int ip_verify(struct bch_fs *c, const struct cand *x, const uint8_t *blk, void *scratch,
		     void *dec)
{
	const struct bch_extent *e = bkey_val(x->k);
	const uint8_t *enc = blk + ((size_t)x->off << BCH_SECTOR_SHIFT);
	size_t bytes = (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;
	int r;

	if (c->crypt || e->crc.csum_type == BCH_CSUM_chacha20_poly1305) {
		/* the MAC needs the key and nonce: read it as the read path does, compare */
		if ((r = bch_extent_read_copy(c, x->k, 0, scratch, dec)))
			return r;
		return memcmp(scratch, enc, bytes) ? -BCH_ERR_csum_mismatch : 0;
	}
	if (bch_extent_crc_validate(&e->crc, 0, NULL, 0))
		return -BCH_ERR_bkey_invalid;
	if (bch_crc_plain(&e->crc))
		return bch_csum_verify(e->crc.csum_type, enc, bytes, e->crc.csum);
	return bch_extent_decode(&e->crc, enc, dec);
}

/* Read the k data blocks as they lie (zeros past the last extent) and verify every extent. */
static int ip_read(struct bch_fs *c, struct inplace *ip, struct ip_stripe *s, struct build *b,
		   struct bch_move_stats *st)
{
	size_t max = 0;
	int r = 0;

	for (unsigned i = 0; i < s->k; i++) {
		struct ip_dev *d = &ip->d[s->devs[i]];
		size_t len = (size_t)d->end[s->bucket[i]] << BCH_SECTOR_SHIFT;

		memset(b->bufs[i] + len, 0, ((size_t)s->block_sectors << BCH_SECTOR_SHIFT) - len);
		r = bch_dev_read(c->devs[s->devs[i]]->bdev, b->bufs[i], len,
				 (s->bucket[i] * d->bucket_sectors) << BCH_SECTOR_SHIFT);
		if (r)
			return r;
		if (st)
			st->sectors_read += d->end[s->bucket[i]];
	}
	/* buffers only for what is not verified where it lies: compressed or encrypted */
	for (size_t i = 0; i < s->nr; i++) {
		const struct bch_extent *e = bkey_val(s->cands[i].k);
		size_t u = (size_t)e->crc.uncompressed_sectors << BCH_SECTOR_SHIFT;
		size_t cb = (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;

		if (!c->crypt && e->crc.csum_type != BCH_CSUM_chacha20_poly1305 && bch_crc_plain(&e->crc))
			continue;
		max = u > max ? u : max;
		max = cb > max ? cb : max;
	}
	void *scratch = max ? bch_dev_alloc_buf(max) : NULL, *dec = max ? malloc(max) : NULL;
	if (max && (!scratch || !dec))
		r = -ENOMEM;
	for (size_t i = 0; i < s->nr && !r; i++) {
		r = ip_verify(c, &s->cands[i], b->bufs[s->cands[i].block], scratch, dec);
		if (r == -BCH_ERR_csum_mismatch)
			bch_dev_error_inc(c, s->devs[s->cands[i].block], BCH_DEV_ERROR_checksum);
		s->cands[i].ok = !r;
	}
	free(scratch);
	free(dec);
	return r;
}

/*
 * Write the parity blocks and the zero tails of the shorter data blocks,
 * checksum every block (the caller flushes).
 */
static int ip_write(struct bch_fs *c, struct inplace *ip, struct ip_stripe *s, struct build *b,
		    struct bch_stripe *sv, struct bch_move_stats *st)
{
	size_t bytes = (size_t)s->block_sectors << BCH_SECTOR_SHIFT;
	int r;

	for (unsigned i = 0; i < b->n; i++) {
		struct bch_csum cs;
		struct ip_dev *d = i < s->k ? &ip->d[s->devs[i]] : NULL;
		uint64_t from = d ? d->end[s->bucket[i]] : 0;

		if (d) {
			b->blocks[i] = (struct bch_extent_ptr) {
				.dev = s->devs[i],
				.offset = s->bucket[i] * d->bucket_sectors,
				.gen = bch_alloc_bucket_gen(c, s->devs[i], s->bucket[i]),
			};
		} else {
			if ((r = bch_alloc_data_on(c, s->devs[i], s->block_sectors, &b->blocks[i])))
				return r;
			b->nr_alloced = i + 1;
		}
		if ((r = bch_checksum(BCH_CSUM_crc32c, b->bufs[i], bytes, &cs)))
			return r;
		sv->blocks[i].ptr = b->blocks[i];
		sv->blocks[i].csum = cs.lo;
		if (from == s->block_sectors)
			continue;
		bch_data_reuse_bump(c);	/* in a bucket that holds data (io.h) */
		r = bch_dev_write(c->devs[s->devs[i]]->bdev, b->bufs[i] + (from << BCH_SECTOR_SHIFT),
				  bytes - (from << BCH_SECTOR_SHIFT),
				  (b->blocks[i].offset + from) << BCH_SECTOR_SHIFT);
		if (r)
			return bch_fs_err(c, r, "stripe block on device %u: %s", s->devs[i], bch_err_str(r));
		if (st)
			st->sectors_written += s->block_sectors - from;
	}
	return 0;	/* flushed with the rest of the batch (ip_step) */
}

/*
 * Prepare planned stripe s as stripe idx: blocks read and verified, parity
 * computed and written (not flushed), the key in s->sk.  1 prepared, 0 not
 * (its buckets are left to the other path), < 0 error.
 */
static int ip_prepare(struct bch_fs *c, struct inplace *ip, struct ip_stripe *s, uint64_t idx,
		      struct bch_move_stats *st)
{
	struct build *b = &s->b;
	struct bch_ec_codec codec = { 0 };
	int r;

	*b = (struct build) {
		.c = c, .k = s->k, .p = s->p, .n = s->k + s->p, .block_sectors = s->block_sectors,
		.cands = s->cands, .nr = s->nr, .inplace = true,
	};
	if (s->skip || s->nr < 1)
		return 0;
	memcpy(b->devs, s->devs, sizeof(b->devs));
	r = -ENOMEM;
	/* ip_read() fills each data block whole (zeros past its end), the code the parity */
	for (unsigned i = 0; i < b->n; i++)
		if (!(b->bufs[i] = ec_block_buf(c, i, (size_t)b->block_sectors << BCH_SECTOR_SHIFT)))
			goto out;
	r = ip_read(c, ip, s, b, st);
	if (r == -ENOMEM || bch_err_is_dl(r))
		goto out;
	if (r) {
		/* a bad first copy, or a block unreadable: the other path rewrites from a good one */
		if (st)
			snprintf(st->last_problem, sizeof(st->last_problem),
				 "stripe candidate bucket %u:%" PRIu64 ": %s: rewritten instead",
				 s->devs[0], s->bucket[0], bch_err_str(r));
		c->err_msg[0] = 0;
		r = 0;
		goto out;
	}
	if ((r = bch_ec_codec_init(&codec, b->k, b->p)))
		goto out;
	bch_ec_encode(&codec, (size_t)b->block_sectors << BCH_SECTOR_SHIFT, b->bufs);
	s->sk = bch_bkey_alloc(BCH_BKEY_stripe, POS(0, idx, 0),
			       sizeof(struct bch_stripe) + b->n * sizeof(struct bch_stripe_block));
	struct bch_stripe *sv = bkey_val(s->sk);
	sv->block_sectors = b->block_sectors;
	sv->nr_blocks = b->n;
	sv->nr_parity = b->p;
	sv->algorithm = BCH_STRIPE_ALG_RS_CAUCHY;
	sv->csum_type = BCH_CSUM_crc32c;
	r = ip_write(c, ip, s, b, sv, st);
	r = r ? r : 1;
out:
	for (unsigned i = 0; i < BCH_STRIPE_BLOCKS_MAX; i++)
		b->bufs[i] = NULL;	/* c's (ec_block_buf) */
	bch_ec_codec_exit(&codec);
	if (r != 1) {
		free(s->sk);
		s->sk = NULL;
	}
	return r;
}

/* Parity space a stripe not committed took is given back (nothing names it). */
static void ip_release(struct bch_fs *c, struct ip_stripe *s)
{
	for (unsigned i = s->b.k; i < s->b.nr_alloced; i++)
		bch_alloc_data_free(c, &s->b.blocks[i], 1, s->b.block_sectors);
	s->b.nr_alloced = 0;
	for (size_t j = 0; j < s->nr; j++)
		free(s->cands[j].k);
	free(s->cands);
	free(s->sk);
}

/*
 * The replicas entries the striped extents of the batch will need (one per
 * data member: a striped extent names its own member only), added in one
 * superblock write before the commits, where each commit would add its own
 * (a write and a flush of every member each: on a fresh filesystem most of
 * the first stripes' time).  The table is only grown: exactly the entries
 * the commits would add.
 */
static int ip_mark_replicas(struct bch_fs *c, const struct ip_stripe *ss, unsigned n)
{
	struct bch_replicas_cpu *cur = c->replicas, t = { 0 };
	uint64_t want = 0;
	int r = 0;

	if (!cur)
		return 0;
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; ss[i].sk && j < ss[i].k; j++)
			if (!bch_replicas_cpu_has(cur, BCH_DATA_user, 1ULL << ss[i].devs[j]))
				want |= 1ULL << ss[i].devs[j];
	if (__builtin_popcountll(want) < 2)
		return 0;	/* one entry: the commit adds it as cheaply */
	for (size_t i = 0; i < cur->nr && r >= 0; i++)
		r = bch_replicas_cpu_add(&t, cur->e[i].data_type, cur->e[i].devs);
	for (unsigned d = 0; d < BCH_SB_MEMBERS_MAX && r >= 0; d++)
		if (want & (1ULL << d))
			r = bch_replicas_cpu_add(&t, BCH_DATA_user, 1ULL << d);
	if (r >= 0) {
		bool stale = cur->maybe_stale;
		uint64_t marks = cur->marks;

		r = bch_replicas_set(c, &t, false);
		if (!r) {	/* the gc bookkeeping of the table replaced goes on */
			c->replicas->maybe_stale = stale;
			c->replicas->marks = marks;
		}
	}
	bch_replicas_cpu_free(&t);
	return r < 0 ? r : 0;
}

#define IP_BATCH	16	/* stripes planned per walk of the extents */

/*
 * The in-place stripes of one step, up to budget sectors of data, each of
 * full width (k blocks).  Returns 0 or an error; *built grows.
 */
int ec_ip_step(struct bch_fs *c, struct inplace *ip, unsigned p, const unsigned *members,
	       unsigned nr, uint64_t budget, struct bch_move_stats *st, uint64_t *built)
{
	unsigned k_max = nr - p > BCH_EC_K_MAX ? BCH_EC_K_MAX : nr - p;
	uint64_t cursor[BCH_STRIPE_BLOCKS_MAX] = { 0 };
	struct ip_stripe ss[IP_BATCH];
	int r = 0;

	while (!r && *built < budget && ip->left) {
		unsigned n = 0;
		uint64_t planned = 0;

		/*
		 * Full width only, finish or not: a narrower stripe in place
		 * (2+2: as much parity as data) takes more space than the
		 * rewriting path's, which packs what is left into full ones
		 */
		while (n < IP_BATCH && *built + planned < budget &&
		       ip_plan(c, ip, members, nr, k_max, p, k_max, cursor, &ss[n])) {
			planned += (uint64_t)ss[n].k * ss[n].block_sectors;
			n++;
		}
		/*
		 * The other path takes what is left (at the end, data
		 * rebalance's finish), but never a lone extent (no stripe of
		 * one): rather than leave one alone, the last stripe planned
		 * here goes to it too, packed with that one
		 */
		if (n && ip->cands - ip->planned == 1)
			ip_unplan(ip, &ss[--n], cursor, members, nr);
		if (!n)
			break;
		r = ip_collect(c, ip, ss, n);
		/*
		 * Every stripe of the batch written, then the keys.  No flush
		 * here: the journal flushes every device before it writes the
		 * entry that holds a key (journal.c, the preflush; io.h relies
		 * on it for every data write), so the blocks are durable before
		 * any key naming them is (invariant (4)).  A flush per stripe
		 * was most of a stripe's time (3 ms per member on this disk).
		 */
		uint64_t idx = 1;
		bool any = false;
		if (!r && c->roots->r[BCH_BTREE_ID_stripes].key)
			r = ec_next_stripe_index(c, &idx);
		for (unsigned i = 0; i < n && !r; i++) {
			int v = ip_prepare(c, ip, &ss[i], idx, st);
			if (v < 0)
				r = v;
			if (v > 0) {
				idx++;
				any = true;
			}
		}
		if (!r && any)
			r = bch_ec_init(c);	/* the feature bit and the stripes btree with the first */
		if (!r && any)
			r = ip_mark_replicas(c, ss, n);
		for (unsigned i = 0; i < n && !r; i++) {
			if (!ss[i].sk)
				continue;
			if (!(r = ec_build_commit(&ss[i].b, ss[i].sk, st)))
				*built += (uint64_t)ss[i].b.k * ss[i].b.block_sectors;
		}
		for (unsigned i = 0; i < n; i++)
			ip_release(c, &ss[i]);
	}
	return r;
}
