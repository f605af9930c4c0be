// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_ec.c - erasure-coded stripes (ec.h), checked with the shared
 * extents before pass 5, so the files passes see their repairs.  Runs only
 * when the stripes btree exists (feature erasure_code); its heading is
 * printed only when it finds something.  It checks:
 *   stripe_block_bad     a stripe whose block is on a slot that is no
 *                        member, outside the member's buckets, or across a
 *                        bucket boundary: the stripe is deleted (the
 *                        extents in it keep their own copy; their striped
 *                        flag is cleared by the next check)
 *   stripe_ptr_dangling  a striped pointer whose stripe is missing, or
 *                        does not hold its sectors (another member or
 *                        generation, outside the block, a parity block):
 *                        the flag is cleared; the copy stays, without the
 *                        stripe's redundancy
 *   stripe_unused        a stripe no striped pointer names: deleted (a
 *                        healthy filesystem has none: each read-write
 *                        close deletes those its session emptied,
 *                        ec_move.h bch_ec_close_unused(); one is left by
 *                        a crash that cut such a close)
 * Blocks on a member missing from a degraded open are not judged.
 *
 * The parity blocks' bucket state is checked with every bucket's (ec.h:
 * bch_ec_mark_stripe() counts them in the recount that pass 5 compares
 * with the alloc btree).
 *
 * With -c, pass 11 starts here (bch_fsck_ec_data()), before the extents'
 * copies are read: every stripe read whole (bch_ec_stripe_check()):
 *   stripe_data_bad      a data block unreadable or failing its checksum:
 *                        rebuilt from the others, written back in place
 *   stripe_parity_bad    a parity block unreadable, failing its checksum
 *                        or not the parity of the data: the data's parity
 *                        written back (and its checksum in the key)
 *   stripe_unrecoverable more bad blocks than parity, or no block
 *                        checksums to say which is bad: reported; checked
 *                        again after the extents (bch_fsck_ec_data_after()),
 *                        whose repairs of striped copies may leave few
 *                        enough bad blocks: repaired then, counted fixed
 * A block whose bucket was reused (a data block whose extents all went) is
 * not judged, and never written.
 *
 * Cost: one walk of the stripes btree, one of the extents btree (and of the
 * reflink btree when it exists) with a lookup per striped pointer.  Memory:
 * a u32 per stripe and per striped pointer (sorted), and the keys repaired.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "btree.h"
#include "ec.h"
#include "errcode.h"
#include "extents.h"
#include "fsck.h"
#include "fsck_files.h"
#include "snapshot.h"

struct u32s {
	uint32_t	*v;
	size_t		nr, cap;
};

static int u32s_push(struct u32s *a, uint32_t x)
{
	if (a->nr == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 256;
		uint32_t *n = realloc(a->v, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		a->v = n;
		a->cap = cap;
	}
	a->v[a->nr++] = x;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool u32s_has(const struct u32s *a, uint32_t x)
{
	return a->nr && bsearch(&x, a->v, a->nr, sizeof(x), cmp_u32);
}

struct fix {
	unsigned		btree;
	struct bch_bkey		*k;	/* the new key; NULL: delete at pos */
	struct bch_bpos		pos;
	enum bch_fsck_problem	code;
};

struct epass {
	struct bch_fsck_ctx	*ctx;
	struct bch_fs		*c;
	bool			heading;
	struct u32s		stripes;	/* good stripes, in order */
	struct u32s		used;		/* stripes named by a striped pointer */
	struct fix		*fixes;
	size_t			nr_fixes;
};

static bool problem(struct epass *p, enum bch_fsck_problem code, const char *where, const char *detail)
{
	if (!p->heading && p->ctx->progress)
		p->ctx->progress(p->ctx, 5, "erasure-coded stripes");
	p->heading = true;
	return bch_fsck_problem(p->ctx, code, where, detail);
}

static int add_fix(struct epass *p, unsigned btree, struct bch_bkey *k, struct bch_bpos pos,
		   enum bch_fsck_problem code)
{
	struct fix *n = realloc(p->fixes, (p->nr_fixes + 1) * sizeof(*n));

	if (!n) {
		free(k);
		return -ENOMEM;
	}
	p->fixes = n;
	p->fixes[p->nr_fixes++] = (struct fix) { btree, k, pos, code };
	return 0;
}

/* Why block i of s cannot be where it says, or NULL. */
static const char *block_bad(struct bch_fs *c, const struct bch_stripe *s, unsigned i)
{
	const struct bch_extent_ptr *b = &s->blocks[i].ptr;
	struct bch_dev *ca = b->dev < c->nr_devs ? c->devs[b->dev] : NULL;

	if (bch_dev_missing(c, b->dev))
		return NULL;		/* degraded: not judged */
	if (!ca)
		return "on a slot that is no member";
	uint64_t bs = ca->mi.bucket_size, first = b->offset / bs;
	if (!bs || first < ca->mi.first_bucket || first >= ca->mi.nbuckets)
		return "outside the member's buckets";
	if ((b->offset + s->block_sectors - 1) / bs != first)
		return "across a bucket boundary";
	return NULL;
}

static int check_stripes(struct epass *p)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	char where[64], detail[160];
	int err = 0, r = 0;

	bch_btree_iter_init(&it, p->c, BCH_BTREE_ID_stripes, POS_MIN, POS_MAX);
	while (!r && (k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_stripe)
			continue;
		const struct bch_stripe *s = bch_stripe_val(k);
		const char *why = NULL;
		unsigned i;

		for (i = 0; i < s->nr_blocks && !why; i++)
			why = block_bad(p->c, s, i);
		if (!why) {
			r = u32s_push(&p->stripes, (uint32_t)k->p.offset);
			continue;
		}
		snprintf(where, sizeof(where), "stripe %" PRIu64, (uint64_t)k->p.offset);
		snprintf(detail, sizeof(detail), "block %u (member %u sector %" PRIu64 ") %s", i - 1,
			 s->blocks[i - 1].ptr.dev, (uint64_t)s->blocks[i - 1].ptr.offset, why);
		if (problem(p, BCH_FSCK_stripe_block_bad, where, detail))
			r = add_fix(p, BCH_BTREE_ID_stripes, NULL, k->p, BCH_FSCK_stripe_block_bad);
	}
	bch_btree_iter_exit(&it);
	return r ? r : err;
}

/* The striped pointer of k (an extent or a reflink_v), or -1. */
static int striped_ptr(const struct bch_bkey *k, struct bch_extent_ptr **ptrs, unsigned *sectors)
{
	unsigned nr;

	if (k->type == BCH_BKEY_extent) {
		struct bch_extent *e = bkey_val(k);
		*ptrs = e->ptrs;
		*sectors = e->crc.compressed_sectors;
		nr = bch_extent_nr_ptrs(k);
	} else if (k->type == BCH_BKEY_reflink_v) {
		struct bch_reflink_v *v = bkey_val(k);
		*ptrs = v->ptrs;
		*sectors = v->crc.compressed_sectors;
		nr = (bkey_val_bytes(k) - sizeof(*v)) / sizeof(v->ptrs[0]);
	} else {
		return -1;
	}
	for (unsigned i = 0; i < nr; i++)
		if ((*ptrs)[i].flags & BCH_EXTENT_PTR_STRIPED)
			return i;
	return -1;
}

/* Does stripe idx (a good one) hold p's sectors? */
static bool stripe_holds(struct epass *p, const struct bch_extent_ptr *ptr, unsigned sectors)
{
	struct bch_bkey *sk;
	bool ok;

	if (!u32s_has(&p->stripes, ptr->stripe) ||
	    bch_btree_lookup(p->c, BCH_BTREE_ID_stripes, POS(0, ptr->stripe, 0), &sk))
		return false;
	ok = sk->type == BCH_BKEY_stripe && bch_stripe_ptr_fits(bch_stripe_val(sk), ptr, sectors);
	free(sk);
	return ok;
}

static int check_ptrs_in(struct epass *p, unsigned btree)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	char where[128], detail[128];
	int err = 0, r = 0;

	bch_btree_iter_init(&it, p->c, btree, POS_MIN, POS_MAX);
	while (!r && (k = bch_btree_iter_next(&it, &err))) {
		struct bch_extent_ptr *ptrs;
		unsigned sectors;
		int i = striped_ptr(k, &ptrs, &sectors);

		if (i < 0)
			continue;
		if (stripe_holds(p, &ptrs[i], sectors)) {
			r = u32s_push(&p->used, ptrs[i].stripe);
			continue;
		}
		if (btree == BCH_BTREE_ID_reflink)
			snprintf(where, sizeof(where), "indirect extent %" PRIu64 "..%" PRIu64,
				 bch_extent_start(k), (uint64_t)k->p.offset);
		else
			snprintf(where, sizeof(where), "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64
				 " snapshot %u", (uint64_t)k->p.inode, bch_extent_start(k),
				 (uint64_t)k->p.offset, (unsigned)k->p.snapshot);
		snprintf(detail, sizeof(detail), "pointer %u:%" PRIu64 " in stripe %u block %u",
			 ptrs[i].dev, (uint64_t)ptrs[i].offset, (unsigned)ptrs[i].stripe,
			 ptrs[i].stripe_block);
		if (!problem(p, BCH_FSCK_stripe_ptr_dangling, where, detail))
			continue;
		struct bch_bkey *n = bch_bkey_dup(k);
		striped_ptr(n, &ptrs, &sectors);
		ptrs[i].flags &= ~BCH_EXTENT_PTR_STRIPED;
		ptrs[i].stripe_block = 0;
		ptrs[i].stripe = 0;
		r = add_fix(p, btree, n, n->p, BCH_FSCK_stripe_ptr_dangling);
	}
	bch_btree_iter_exit(&it);
	return r ? r : err;
}

static int check_unused(struct epass *p)
{
	char where[64];
	int r = 0;

	if (p->used.nr)
		qsort(p->used.v, p->used.nr, sizeof(*p->used.v), cmp_u32);
	for (size_t i = 0; i < p->stripes.nr && !r; i++) {
		if (u32s_has(&p->used, p->stripes.v[i]))
			continue;
		snprintf(where, sizeof(where), "stripe %u", p->stripes.v[i]);
		if (problem(p, BCH_FSCK_stripe_unused, where, "no extent points into it"))
			r = add_fix(p, BCH_BTREE_ID_stripes, NULL, POS(0, p->stripes.v[i], 0),
				    BCH_FSCK_stripe_unused);
	}
	return r;
}

/* Extents first (their flags), then the stripes they no longer name. */
static int apply_fixes(struct epass *p)
{
	struct bch_view raw;
	int r = 0;

	bch_view_enter_raw(p->c, &raw);
	for (int stripes = 0; stripes < 2; stripes++)
		for (size_t i = 0; i < p->nr_fixes && !r; i++) {
			struct fix *f = &p->fixes[i];
			if ((f->btree == BCH_BTREE_ID_stripes) != stripes)
				continue;
			r = f->k ? fsck_put_key(p->c, f->btree, f->k)
				 : fsck_delete_key(p->c, f->btree, f->pos);
			if (!r)
				bch_fsck_fixed(p->ctx, f->code);
		}
	bch_view_exit(&raw);
	return r;
}

int bch_fsck_ec(struct bch_fsck_ctx *ctx, struct bch_fs *c)
{
	struct epass p = { .ctx = ctx, .c = c };
	int r;

	if (!c->roots->r[BCH_BTREE_ID_stripes].key)
		return 0;
	r = check_stripes(&p);
	if (!r && !ctx->cancelled)
		r = check_ptrs_in(&p, BCH_BTREE_ID_extents);
	if (!r && !ctx->cancelled && c->roots->r[BCH_BTREE_ID_reflink].key)
		r = check_ptrs_in(&p, BCH_BTREE_ID_reflink);
	if (!r && !ctx->cancelled)
		r = check_unused(&p);
	if (!r && !ctx->cancelled && p.nr_fixes)
		r = apply_fixes(&p);
	for (size_t i = 0; i < p.nr_fixes; i++)
		free(p.fixes[i].k);
	free(p.fixes);
	free(p.stripes.v);
	free(p.used.v);
	if (r && !ctx->err_msg[0])
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "erasure-coded stripes: %.400s",
			 c->err_msg[0] ? c->err_msg : bch_err_str(r));
	return r;
}

/* ------------------------------------------------- pass 11: stripe data */

/* Report what check x found in stripe sk; the blocks to repair. */
static uint32_t data_report(struct bch_fsck_ctx *ctx, const struct bch_bkey *sk,
			    const struct bch_ec_check *x)
{
	const struct bch_stripe *s = bch_stripe_val(sk);
	uint32_t fix = 0;
	char where[128], detail[96];

	if (x->unrecoverable) {
		snprintf(where, sizeof(where), "stripe %" PRIu64, (uint64_t)sk->p.offset);
		snprintf(detail, sizeof(detail), "%u of %u blocks bad, %u parity%s",
			 __builtin_popcount(x->bad | x->parity_wrong), x->nr_blocks,
			 x->nr_blocks - x->nr_data,
			 s->csum_type == BCH_CSUM_none ? ", no block checksums" : "");
		bch_fsck_problem(ctx, BCH_FSCK_stripe_unrecoverable, where, detail);
		return 0;
	}
	for (unsigned i = 0; i < x->nr_blocks; i++) {
		bool parity = i >= x->nr_data;
		const char *why;

		if (!((x->bad | x->parity_wrong) & (1U << i)))
			continue;
		why = x->parity_wrong & (1U << i) ? "differs from the data's parity" :
						    "unreadable or bad checksum";
		snprintf(where, sizeof(where), "stripe %" PRIu64 " block %u", (uint64_t)sk->p.offset, i);
		snprintf(detail, sizeof(detail), "member %u sector %" PRIu64 ": %s",
			 s->blocks[i].ptr.dev, (uint64_t)s->blocks[i].ptr.offset, why);
		if (bch_fsck_problem(ctx, parity ? BCH_FSCK_stripe_parity_bad : BCH_FSCK_stripe_data_bad,
				     where, detail))
			fix |= 1U << i;
	}
	return fix;
}

struct bch_fsck_ec_left {
	struct u32s	v;
};

/* Check stripe sk, report, repair what was answered yes; 1 when it is left unrecoverable. */
static int data_one(struct bch_fsck_ctx *ctx, struct bch_fs *c, const struct bch_bkey *sk,
		    bool again)
{
	struct bch_ec_check x;
	uint32_t fix;
	int r;

	if ((r = bch_ec_stripe_check(c, sk, 0, &x)))
		return r;
	if (again && x.unrecoverable)
		return 0;	/* reported the first time */
	fix = data_report(ctx, sk, &x);
	if (fix) {
		if ((r = bch_ec_stripe_check(c, sk, fix, &x)))
			return r;
		for (unsigned i = 0; i < x.nr_blocks; i++)
			if (x.repaired & fix & (1U << i))
				bch_fsck_fixed(ctx, i >= x.nr_data ? BCH_FSCK_stripe_parity_bad
								   : BCH_FSCK_stripe_data_bad);
	}
	if (again && !x.unrecoverable && !((x.bad | x.parity_wrong) & ~x.repaired))
		bch_fsck_fixed(ctx, BCH_FSCK_stripe_unrecoverable);	/* whole again */
	return !again && x.unrecoverable;
}

int bch_fsck_ec_data(struct bch_fsck_ctx *ctx, struct bch_fs *c, struct bch_fsck_ec_left **left)
{
	struct bch_bpos pos = POS_MIN;
	int r = 0;

	*left = NULL;
	if (!c->roots->r[BCH_BTREE_ID_stripes].key)
		return 0;
	/* one key at a time, no iterator open across a repair (it may update the key) */
	while (!r && !ctx->cancelled) {
		struct bch_bkey *sk;

		if ((r = bch_btree_peek_next(c, BCH_BTREE_ID_stripes, pos, POS_MAX, &sk)) <= 0)
			break;
		pos = bpos_successor(sk->p);
		r = data_one(ctx, c, sk, false);
		if (r == 1) {	/* the extents' repairs may leave few enough: again after them */
			r = 0;
			if (!c->read_only && !*left && !(*left = calloc(1, sizeof(**left))))
				r = -ENOMEM;
			if (!r && !c->read_only)
				r = u32s_push(&(*left)->v, (uint32_t)sk->p.offset);
		}
		free(sk);
	}
	if (r && !ctx->err_msg[0])
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "erasure-coded stripes: %.400s",
			 c->err_msg[0] ? c->err_msg : bch_err_str(r));
	return r;
}

int bch_fsck_ec_data_after(struct bch_fsck_ctx *ctx, struct bch_fs *c,
			   struct bch_fsck_ec_left *left, int r)
{
	int given = r;

	for (size_t i = 0; left && !r && !ctx->cancelled && i < left->v.nr; i++) {
		struct bch_bkey *sk;

		if (bch_btree_lookup(c, BCH_BTREE_ID_stripes, POS(0, left->v.v[i], 0), &sk)) {
			c->err_msg[0] = 0;
			continue;
		}
		r = data_one(ctx, c, sk, true);
		free(sk);
	}
	if (left)
		free(left->v.v);
	free(left);
	if (r && !given && !ctx->err_msg[0])
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "erasure-coded stripes: %.400s",
			 c->err_msg[0] ? c->err_msg : bch_err_str(r));
	return r;
}
