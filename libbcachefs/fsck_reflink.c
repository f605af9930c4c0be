// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_reflink.c - shared extents (reflink.h), checked at the start of
 * pass 5, before the files passes (whose repairs then keep the counts
 * right through the usual path).  Runs only when the reflink btree exists;
 * its heading is printed only then.  It checks:
 *   reflink_p_dangling      a reflink_p whose range some part of no
 *                           indirect extent covers: replaced by reflink_p
 *                           keys over the parts still covered (the file
 *                           reads a hole where nothing is; pass 7 then
 *                           corrects the inode's sectors).  Not safe:
 *                           data is gone.  (A reflink_p may cover up to
 *                           16 indirect extents: losing one keeps the
 *                           others.)
 *   reflink_refcount_wrong  an indirect extent's refcount differs from the
 *                           number of reflink_p keys (any snapshot)
 *                           overlapping it: corrected
 *   reflink_v_unreferenced  an indirect extent no reflink_p key overlaps
 *                           (refcount 0 or not): deleted; its space goes
 *                           with the bucket recount after the repairs
 *
 * Cost: one walk of the extents btree (every snapshot's keys), with a
 * lookup in the reflink btree per reflink_p, then one walk of the reflink
 * btree.  Memory: two u64s per reflink_p key (the start and the end of
 * every range, sorted: the references of an indirect extent [s, e) are
 * the ranges starting before e less those ending at or before s).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"
#include "extents.h"
#include "fsck.h"
#include "fsck_files.h"
#include "reflink.h"
#include "snapshot.h"

struct rpass {
	struct bch_fsck_ctx	*ctx;
	struct bch_fs		*c;
	bool			heading;
	uint64_t		*starts, *ends;
	size_t			nr, cap;
	struct bch_bkey		**dangling;	/* reflink_p keys to cut to what is covered */
	size_t			nr_dangling;
};

static bool problem(struct rpass *p, enum bch_fsck_problem code, const char *where, const char *detail)
{
	if (!p->heading && p->ctx->progress)
		p->ctx->progress(p->ctx, 5, "shared extents (reflink)");
	p->heading = true;
	return bch_fsck_problem(p->ctx, code, where, detail);
}

/* Does some indirect extent cover every sector of [start, end)?  *gap: the first that none does. */
static int covered(struct bch_fs *c, uint64_t start, uint64_t end, uint64_t *gap)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	uint64_t at = start;
	int err = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS(0, start + 1, 0), POS(0, UINT64_MAX, 0));
	while (at < end && (k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_reflink_v)
			continue;
		if (bch_extent_start(k) > at)
			break;
		at = k->p.offset;
	}
	bch_btree_iter_exit(&it);
	*gap = at;
	return err;
}

/* The parts of [start, end) that indirect extents cover, in order: (*pc)[2i], (*pc)[2i + 1]. */
static int covered_parts(struct bch_fs *c, uint64_t start, uint64_t end, uint64_t **pc, size_t *nr)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	uint64_t *v = NULL;
	size_t n = 0;
	int err = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS(0, start + 1, 0), POS(0, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_reflink_v)
			continue;
		uint64_t a = bch_extent_start(k) > start ? bch_extent_start(k) : start;
		uint64_t b = k->p.offset < end ? k->p.offset : end;
		if (a >= end)
			break;
		if (n && v[n - 1] == a) {	/* back to back: one part */
			v[n - 1] = b;
			continue;
		}
		if (!(n % 16) && !(v = realloc(v, (n + 16) * sizeof(*v)))) {
			err = -ENOMEM;
			break;
		}
		v[n++] = a;
		v[n++] = b;
	}
	bch_btree_iter_exit(&it);
	if (err) {
		free(v);
		return err;
	}
	*pc = v;
	*nr = n / 2;
	return 0;
}

/* Room for one more reference range. */
static int push_range(struct rpass *p, uint64_t s, uint64_t e)
{
	if (p->nr == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 1024;
		p->starts = realloc(p->starts, p->cap * sizeof(*p->starts));
		p->ends = realloc(p->ends, p->cap * sizeof(*p->ends));
		if (!p->starts || !p->ends)
			return -ENOMEM;
	}
	p->starts[p->nr] = s;
	p->ends[p->nr++] = e;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* How many of the sorted v[0..n) are < x (x_le: <= x). */
static size_t count_below(const uint64_t *v, size_t n, uint64_t x, bool x_le)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid] < x || (x_le && v[mid] == x))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int walk_refs(struct rpass *p)
{
	struct bch_fs *c = p->c;
	struct btree_iter it;
	const struct bch_bkey *k;
	char where[160], detail[160];
	int err = 0, r = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while (!r && (k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_reflink_p)
			continue;
		const struct bch_reflink_p *rp = bkey_val(k);
		uint64_t s = rp->idx, e = rp->idx + k->size, gap;
		if ((r = covered(c, s, e, &gap)))
			break;
		if (gap < e) {
			snprintf(where, sizeof(where), "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64
				 " snapshot %u", (uint64_t)k->p.inode, bch_extent_start(k),
				 (uint64_t)k->p.offset, (unsigned)k->p.snapshot);
			snprintf(detail, sizeof(detail), "indirect extent %" PRIu64 "..%" PRIu64
				 " missing from %" PRIu64, s, e, gap);
			if (problem(p, BCH_FSCK_reflink_p_dangling, where, detail)) {
				/* what stays covered stays: those parts' references */
				uint64_t *pc = NULL;
				size_t np = 0;
				struct bch_bkey **n = realloc(p->dangling, (p->nr_dangling + 1) * sizeof(*n));
				if (n)
					p->dangling = n;
				if (!n || !(n[p->nr_dangling] = bch_bkey_dup(k))) {
					r = -ENOMEM;
					break;
				}
				p->nr_dangling++;
				struct bch_bpos at = k->p;
				bch_btree_iter_exit(&it);	/* the lookups may move the cache */
				r = covered_parts(c, s, e, &pc, &np);
				for (size_t i = 0; i < np && !r; i++)
					r = push_range(p, pc[2 * i], pc[2 * i + 1]);
				free(pc);
				bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, bpos_successor(at), POS_MAX);
				continue;
			}
		}
		if ((r = push_range(p, s, e)))
			break;
	}
	bch_btree_iter_exit(&it);
	return r ? r : err;
}

/*
 * Cut each dangling reflink_p to the parts indirect extents still cover
 * (new keys of its snapshot; none when nothing is), in one transaction.
 */
static int cut_dangling(struct bch_fs *c, const struct bch_bkey *k)
{
	const struct bch_reflink_p *rp = bkey_val(k);
	uint64_t s = rp->idx, e = rp->idx + k->size, ks = bch_extent_start(k), *pc = NULL;
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = k->p };
	struct btree_trans *t;
	size_t np = 0;
	int r = covered_parts(c, s, e, &pc, &np);

	if (r || (r = bch_trans_init(c, &t))) {
		free(pc);
		return r;
	}
	r = bch_trans_update(t, BCH_BTREE_ID_extents, &del);
	for (size_t i = 0; i < np && !r; i++) {
		struct bch_bkey *n = bch_bkey_dup(k);
		if (!n) {
			r = -ENOMEM;
			break;
		}
		bch_extent_cut_back(n, ks + (pc[2 * i + 1] - s));
		bch_extent_cut_front(n, ks + (pc[2 * i] - s));
		r = bch_trans_update(t, BCH_BTREE_ID_extents, n);
		free(n);
	}
	if (!r)
		r = bch_trans_commit(t, 0);
	bch_trans_exit(t);
	free(pc);
	return r;
}

static int fix_dangling(struct rpass *p)
{
	struct bch_view raw;
	int r = 0;

	bch_view_enter_raw(p->c, &raw);
	for (size_t i = 0; i < p->nr_dangling; i++) {
		int d = cut_dangling(p->c, p->dangling[i]);
		if (d && !r)
			r = d;
		if (!d)
			bch_fsck_fixed(p->ctx, BCH_FSCK_reflink_p_dangling);
	}
	bch_view_exit(&raw);
	return r;
}

struct fix {
	struct bch_bkey		*k;	/* the new key; NULL: delete */
	struct bch_bpos		pos;
	enum bch_fsck_problem	code;
};

static int check_counts(struct rpass *p)
{
	struct bch_fs *c = p->c;
	struct btree_iter it;
	const struct bch_bkey *k;
	struct fix *fixes = NULL;
	size_t nr_fixes = 0;
	char where[96], detail[96];
	int err = 0, r = 0;

	if (p->nr) {
		qsort(p->starts, p->nr, sizeof(*p->starts), cmp_u64);
		qsort(p->ends, p->nr, sizeof(*p->ends), cmp_u64);
	}
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_reflink_v)
			continue;
		uint64_t vs = bch_extent_start(k), ve = k->p.offset;
		uint64_t refs = count_below(p->starts, p->nr, ve, false) -
				count_below(p->ends, p->nr, vs, true);
		uint64_t have = ((const struct bch_reflink_v *)bkey_val(k))->refcount;
		if (refs == have && have)
			continue;
		enum bch_fsck_problem code = refs ? BCH_FSCK_reflink_refcount_wrong
						  : BCH_FSCK_reflink_v_unreferenced;
		snprintf(where, sizeof(where), "indirect extent %" PRIu64 "..%" PRIu64, vs, ve);
		snprintf(detail, sizeof(detail), "refcount %" PRIu64 ", %" PRIu64 " references", have, refs);
		if (!problem(p, code, where, detail))
			continue;
		struct fix *n = realloc(fixes, (nr_fixes + 1) * sizeof(*n));
		if (!n) {
			r = -ENOMEM;
			break;
		}
		fixes = n;
		fixes[nr_fixes].pos = k->p;
		fixes[nr_fixes].code = code;
		fixes[nr_fixes].k = refs ? bch_bkey_dup(k) : NULL;
		if (refs)
			((struct bch_reflink_v *)bkey_val(fixes[nr_fixes].k))->refcount = refs;
		nr_fixes++;
	}
	bch_btree_iter_exit(&it);
	if (!r)
		r = err;
	for (size_t i = 0; i < nr_fixes; i++) {
		if (!r) {
			int f = fixes[i].k ? fsck_put_key(c, BCH_BTREE_ID_reflink, fixes[i].k)
					   : fsck_delete_key(c, BCH_BTREE_ID_reflink, fixes[i].pos);
			if (f)
				r = f;
			else
				bch_fsck_fixed(p->ctx, fixes[i].code);
		}
		free(fixes[i].k);
	}
	free(fixes);
	return r;
}

int bch_fsck_reflink(struct bch_fsck_ctx *ctx, struct bch_fs *c)
{
	struct rpass p = { .ctx = ctx, .c = c };
	int r;

	if (!c->roots->r[BCH_BTREE_ID_reflink].key)
		return 0;
	r = walk_refs(&p);
	if (!r && p.nr_dangling)
		r = fix_dangling(&p);
	if (!r && !ctx->cancelled)
		r = check_counts(&p);
	free(p.starts);
	free(p.ends);
	for (size_t i = 0; i < p.nr_dangling; i++)
		free(p.dangling[i]);
	free(p.dangling);
	if (r && !ctx->err_msg[0])
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "shared extents: %.400s",
			 c->err_msg[0] ? c->err_msg : bch_err_str(r));
	return r;
}
