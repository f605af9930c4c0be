// SPDX-License-Identifier: GPL-2.0
/*
 * move.c - the move path (see move.h): read a good copy of an extent,
 * write new copies, swap the key only if it did not change.
 *
 * Space: the new copies are counted live when allocated (alloc.c); a queued
 * replacement that commits gives up the dropped pointers' shares and
 * settles the new ones to the new key's share; one that raced or failed
 * gives the new copies' space back.  So no sector is counted twice and none
 * is lost, whatever happens to the commit.
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
#include "compress.h"
#include "crypt.h"
#include "errcode.h"
#include "extent_encode.h"
#include "extents.h"
#include "io.h"
#include "move.h"
#include "reflink.h"
#include "snapshot.h"
#include "super.h"

struct move_pending {
	struct bch_bkey		*old;		/* the key as read */
	struct bch_bkey		*new;		/* its replacement */
	struct bch_extent_ptr	fresh[BCH_REPLICAS_MAX];
	unsigned		nr_fresh;
	unsigned		fresh_span;	/* sectors allocated for each fresh copy */
	unsigned		group;		/* lead: the members queued after it */
	bool			raced;		/* changed since read: not replaced */
	bool			split;		/* the back part of the previous pending's key,
						 * on fresh copies of its own (move_split) */
	unsigned		btree_id;	/* extents, or reflink: old and new are then the
						 * extent form of a reflink_v (reflink.h) */
};

/*
 * Sharers (snapshots).  An overwrite in a child snapshot leaves the pieces
 * of an ancestor's extent around it as keys of their own in the child,
 * pointing at the same encoded extent.  Moving one key alone would leave the
 * others on the old copies: the data would take its space twice once moved,
 * and copygc could never empty the bucket.  So a move takes every key of
 * the same inode, in any snapshot, that points at the same encoded extent
 * with the same copies (same_encoded) -- a group -- and replaces them all in
 * one transaction with keys pointing at one set of new copies.  The group's
 * first queued key is its lead and owns the new copies (fresh); each member
 * keeps its own crc offset.  A member that raced is left alone, on the old
 * copies, which stay valid: sharing is lost there, never data.
 */
struct move_group {
	struct bch_bkey		*keys[BCH_MOVE_BATCH_KEYS - 1];	/* the sharers */
	unsigned		nr;
};

struct bch_mover {
	struct bch_fs		*c;
	struct bch_move_stats	*s;
	struct move_pending	q[BCH_MOVE_BATCH_KEYS];
	unsigned		nr;
	void			*enc, *dec, *out;	/* one extent's buffers */
	unsigned		buf_sectors;		/* their size (grown as needed) */
	unsigned		btree_id;		/* of the key being added */
};

int bch_mover_init(struct bch_fs *c, struct bch_move_stats *s, struct bch_mover **ret)
{
	struct bch_mover *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->c = c;
	m->s = s;
	*ret = m;
	return 0;
}

/* Buffers for an extent of up to sectors (encoded or decoded). */
static int buffers_for(struct bch_mover *m, unsigned sectors)
{
	if (sectors <= m->buf_sectors)
		return 0;
	free(m->enc);
	free(m->dec);
	free(m->out);
	m->enc = bch_dev_alloc_buf((size_t)sectors << BCH_SECTOR_SHIFT);
	m->dec = malloc((size_t)sectors << BCH_SECTOR_SHIFT);
	m->out = bch_dev_alloc_buf(bch_extent_encode_bound(sectors));
	m->buf_sectors = m->enc && m->dec && m->out ? sectors : 0;
	return m->buf_sectors ? 0 : -ENOMEM;
}

static void problem(struct bch_mover *m, const struct bch_bkey *k, const char *why)
{
	snprintf(m->s->last_problem, sizeof(m->s->last_problem),
		 "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64 ": %s", (uint64_t)k->p.inode,
		 bch_extent_start(k), (uint64_t)k->p.offset, why);
}

uint32_t bch_move_ptrs_off_target(struct bch_fs *c, const struct bch_bkey *k, uint64_t target)
{
	const struct bch_extent *e = bkey_val(k);
	uint32_t off = 0;

	if (k->type != BCH_BKEY_extent || !target)
		return 0;
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
		if (!(e->ptrs[i].flags & (BCH_EXTENT_PTR_CACHED | BCH_EXTENT_PTR_STRIPED)) &&
		    !bch_dev_in_target(c->sb, e->ptrs[i].dev, target))
			off |= 1U << i;
	return off;
}

/* Read the first good copy of k into m->enc (and decoded into m->dec). */
static int read_good_copy(struct bch_mover *m, const struct bch_bkey *k)
{
	const struct bch_extent *e = bkey_val(k);
	int r = -BCH_ERR_device_missing;

	for (unsigned pass = 0; pass < 2; pass++)	/* dirty copies first: they are trusted */
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
			if (!!(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) != pass)
				continue;
			if ((e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) &&
			    (!bch_alloc_ptr_live(m->c, &e->ptrs[i]) || e->crc.csum_type == BCH_CSUM_none))
				continue;
			/* encrypted: m->enc keeps the ciphertext a plain copy writes */
			r = bch_extent_read_copy(m->c, k, i, m->enc,
						 bch_crc_plain(&e->crc) && !m->c->crypt ? NULL : m->dec);
			if (!r) {
				m->s->sectors_read += e->crc.compressed_sectors;
				return 0;
			}
			if (bch_err_is_dl(r) || r == -ENOMEM)
				return r;
			if (r != -BCH_ERR_device_missing) {
				m->s->bad_copies++;
				m->c->data_bad_copies++;
			}
		}
	/* a striped extent whose block is gone or bad: rebuilt from its stripe (ec.h) */
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
		if (e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED) {
			r = bch_extent_read_rebuild(m->c, k, m->enc,
						    bch_crc_plain(&e->crc) && !m->c->crypt ? NULL : m->dec, r);
			if (!r) {
				m->s->keys_rebuilt++;
				m->s->sectors_read += e->crc.compressed_sectors;
			}
			break;
		}
	return r;
}

static void pending_free(struct move_pending *p)
{
	free(p->old);
	free(p->new);
	memset(p, 0, sizeof(*p));
}

/*
 * copygc (op->same_dev): a new copy on the device of each rewritten dirty
 * pointer of k, from the first half of the btree reserve; all or none.
 */
static int alloc_same_dev(struct bch_fs *c, const struct bch_bkey *k, uint32_t rewrite,
			  unsigned sectors, struct bch_extent_ptr *fresh, unsigned *got)
{
	const struct bch_extent *e = bkey_val(k);

	*got = 0;
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
		unsigned dev = e->ptrs[i].dev, n = 0;
		if (!(rewrite & (1U << i)) || (e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED))
			continue;
		if (dev >= BCH_SB_MEMBERS_MAX || bch_alloc_data_move(c, sectors, 1, 0, false, ~(1ULL << dev), true,
						     &fresh[*got], &n) || !n) {
			bch_alloc_data_free(c, fresh, *got, sectors);
			*got = 0;
			return -BCH_ERR_no_space;
		}
		(*got)++;
	}
	return 0;
}

/* Is the key at k->p still exactly k? */
static bool unchanged(struct bch_fs *c, const struct bch_bkey *k)
{
	struct bch_bkey *now = NULL;
	bool same = !bch_btree_lookup(c, BCH_BTREE_ID_extents, k->p, &now) &&
		    now->u64s == k->u64s && !memcmp(now, k, (size_t)k->u64s * 8);

	free(now);
	c->err_msg[0] = 0;
	return same;
}

/* Do a and b point at the same encoded extent with the same copies? */
static bool same_encoded(const struct bch_bkey *a, const struct bch_bkey *b)
{
	if (a->type != BCH_BKEY_extent || b->type != BCH_BKEY_extent ||
	    a->u64s != b->u64s || a->version != b->version)
		return false;
	const struct bch_extent *ea = bkey_val(a), *eb = bkey_val(b);
	struct bch_extent_crc ca = ea->crc, cb = eb->crc;

	ca.offset = cb.offset = 0;
	return !memcmp(&ca, &cb, sizeof(ca)) &&
	       !memcmp(ea->ptrs, eb->ptrs, bch_extent_nr_ptrs(a) * sizeof(ea->ptrs[0]));
}

static void group_free(struct move_group *g)
{
	for (unsigned i = 0; i < g->nr; i++)
		free(g->keys[i]);
	g->nr = 0;
}

/*
 * The sharers of k (see struct move_group): only on a filesystem with
 * snapshots, and no more than one transaction and the queue take with k.
 */
static int group_find(struct bch_fs *c, unsigned btree_id, const struct bch_bkey *k,
		      struct move_group *g)
{
	const struct bch_extent *e = bkey_val(k);
	size_t member_u64s = 1 + BCH_BKEY_U64s +
		(sizeof(struct bch_extent) + BCH_REPLICAS_MAX * sizeof(struct bch_extent_ptr)) / 8;
	size_t cap = bch_trans_max_u64s(c) / member_u64s;
	int r = 0;

	g->nr = 0;
	if (k->type != BCH_BKEY_extent || !bch_fs_has_snapshots(c) || btree_id != BCH_BTREE_ID_extents ||
	    e->crc.offset > bch_extent_start(k) || cap < 2)
		return 0;
	cap = cap - 1 < BCH_MOVE_BATCH_KEYS - 1 ? cap - 1 : BCH_MOVE_BATCH_KEYS - 1;

	uint64_t estart = bch_extent_start(k) - e->crc.offset;
	struct bch_bpos from = { .inode = k->p.inode, .offset = estart + 1 };
	struct bch_bpos to = { .inode = k->p.inode, .offset = estart + e->crc.uncompressed_sectors,
			       .snapshot = UINT32_MAX };
	struct btree_iter it;
	const struct bch_bkey *s;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, from, to);
	while (g->nr < cap && (s = bch_btree_iter_next(&it, &r))) {
		if (bpos_eq(s->p, k->p) || !same_encoded(s, k))
			continue;
		if (!(g->keys[g->nr] = bch_bkey_dup(s))) {
			r = -ENOMEM;
			break;
		}
		g->nr++;
	}
	bch_btree_iter_exit(&it);
	if (r)
		group_free(g);
	return r;
}

/* Is k queued, byte for byte (moved with a group already)? */
static bool queued_same(const struct bch_mover *m, const struct bch_bkey *k)
{
	for (unsigned i = 0; i < m->nr; i++)
		if (bpos_eq(m->q[i].old->p, k->p))
			return m->q[i].old->u64s == k->u64s &&
			       !memcmp(m->q[i].old, k, (size_t)k->u64s * 8);
	return false;
}

static bool queued_at(const struct bch_mover *m, struct bch_bpos pos)
{
	for (unsigned i = 0; i < m->nr; i++)
		if (bpos_eq(m->q[i].old->p, pos))
			return true;
	return false;
}

/*
 * Queue slots for k and its group, which is found here: an older move of
 * any of them is committed first (and the group found again after it).
 */
static int queue_room(struct bch_mover *m, const struct bch_bkey *k, struct move_group *g)
{
	int r;

	for (unsigned pass = 0; pass < 2; pass++) {
		if ((r = group_find(m->c, m->btree_id, k, g)))
			return r;
		bool busy = queued_at(m, k->p) || m->nr + 1 + g->nr > BCH_MOVE_BATCH_KEYS;
		for (unsigned i = 0; i < g->nr && !busy; i++)
			busy = queued_at(m, g->keys[i]->p);
		if (!busy)
			return 0;
		group_free(g);
		if ((r = bch_mover_flush(m)))
			return r;
	}
	return group_find(m->c, m->btree_id, k, g);
}

/*
 * Queue the replacement nk of k (the lead, owning p's fresh copies, which
 * the caller filled in at m->q[m->nr]) and one for each member of g: nk's
 * copies and encoding, the member's place, size and crc offset.
 */
static int queue_group(struct bch_mover *m, const struct bch_bkey *k, struct bch_bkey *nk,
		       struct move_group *g)
{
	struct move_pending *lead = &m->q[m->nr];
	struct bch_bkey *old = bch_bkey_dup(k);

	if (!old) {
		free(nk);
		return -ENOMEM;
	}
	lead->old = old;
	lead->new = nk;
	lead->group = 0;
	lead->btree_id = m->btree_id;
	for (unsigned i = 0; i < g->nr; i++) {
		struct bch_bkey *s = g->keys[i], *ns = bch_bkey_dup(nk);
		if (!ns)
			break;		/* that sharer is left for later: unshared, not lost */
		const struct bch_extent *se = bkey_val(s);
		ns->p = s->p;
		ns->size = s->size;
		((struct bch_extent *)bkey_val(ns))->crc.offset = se->crc.offset;
		struct move_pending *q = &m->q[m->nr + 1 + lead->group++];
		memset(q, 0, sizeof(*q));
		q->btree_id = m->btree_id;
		q->old = s;
		q->new = ns;
		g->keys[i] = NULL;
	}
	m->nr += 1 + lead->group;
	return 0;
}

/*
 * drop_only: the replacement is k without the rewrite pointers (and stale
 * cached ones); no data moves.  A dirty copy goes only with op->degrade,
 * and never the last one.
 */
static int drop_ptrs(struct bch_mover *m, const struct bch_bkey *k, const struct bch_move_op *op,
		     struct move_group *g)
{
	struct bch_fs *c = m->c;
	const struct bch_extent *e = bkey_val(k);
	unsigned nr = bch_extent_nr_ptrs(k), nr_keep = 0, dirty_kept = 0;
	struct bch_extent_ptr keep[BCH_REPLICAS_MAX];
	int r;

	if (k->type != BCH_BKEY_extent || !nr || (op->rewrite >> nr) || !op->rewrite || op->nr_new)
		return -EINVAL;
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent_ptr *p = &e->ptrs[i];
		bool cached = p->flags & BCH_EXTENT_PTR_CACHED;
		if (op->rewrite & (1U << i)) {
			if (!cached && !op->degrade)
				return -EINVAL;
			continue;
		}
		if (cached && !bch_alloc_ptr_live(c, p))
			continue;
		keep[nr_keep++] = *p;
		dirty_kept += !cached;
	}
	if (!dirty_kept)
		return -EINVAL;		/* that would lose the data */
	if ((r = queue_room(m, k, g)))
		return r;
	struct bch_bkey *nk = bch_bkey_alloc(BCH_BKEY_extent, k->p,
					     sizeof(struct bch_extent) + nr_keep * sizeof(keep[0]));
	if (!nk)
		return -ENOMEM;
	struct bch_extent *ne = bkey_val(nk);
	nk->size = k->size;
	nk->version = k->version;
	ne->crc = e->crc;
	memcpy(ne->ptrs, keep, nr_keep * sizeof(keep[0]));
	memset(&m->q[m->nr], 0, sizeof(m->q[m->nr]));
	return queue_group(m, k, nk, g);
}

/*
 * Copygc moving a plain key whose one dirty copy it rewrites: where to cut
 * it so that its front fills the rest of the open user bucket on that
 * device exactly (0: no cut).  A key that does not fit that rest would
 * leave it unused, and the pieces an overwrite leaves of a bucket-sized
 * extent are nearly bucket sized: every move would then waste about what it
 * frees (copygc.h invariant 6).
 */
static unsigned split_point(struct bch_fs *c, const struct bch_bkey *k, uint32_t rewrite)
{
	const struct bch_extent *e = bkey_val(k);
	struct bch_alloc_space s;
	unsigned dev = BCH_SB_MEMBERS_MAX;

	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
		if ((rewrite & (1U << i)) && !(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED))
			dev = e->ptrs[i].dev;
	if (dev >= BCH_SB_MEMBERS_MAX)
		return 0;
	bch_alloc_dev_space(c, dev, &s);
	if (!s.bucket_sectors)
		return 0;
	/* copygc_room: whole empty buckets plus the rest of the open one */
	uint64_t rest = s.copygc_room % s.bucket_sectors;
	rest -= rest % c->sb->block_size;
	return rest && rest < k->size ? (unsigned)rest : 0;
}

/*
 * Move k (read into m->enc; plain, not encrypted, its one dirty copy
 * rewritten on its device, no sharers) as two keys: its first a sectors
 * into the rest of the open bucket, the others into a new one, each
 * encoded (checksummed) on its own; cached copies are dropped.  Both
 * replace k in one transaction: the second is queued as a split member of
 * the first, whose compare-and-swap it shares.
 */
static int move_split(struct bch_mover *m, const struct bch_bkey *k, const struct bch_move_op *op,
		      unsigned a)
{
	struct bch_fs *c = m->c;
	const struct bch_extent *e = bkey_val(k);
	struct move_pending *p = &m->q[m->nr];
	unsigned len[2] = { a, k->size - a }, from = e->crc.offset;
	struct bch_bkey *nk[2] = { NULL, NULL };
	int r = 0;

	memset(p, 0, 2 * sizeof(*p));
	for (unsigned i = 0; i < 2 && !r; from += len[i], i++) {
		struct bch_encode_opts eo = {
			.csum_type	= e->crc.csum_type,
			.compression	= BCH_COMPRESSION_none,
			.block_sectors	= c->sb->block_size,
			.max_sectors	= len[i],
		};
		struct bch_extent_crc crc;
		unsigned got = 0;
		/* plain data straight from the read: it must sit in an I/O buffer */
		memmove(m->out, (const char *)m->enc + ((size_t)from << BCH_SECTOR_SHIFT),
			(size_t)len[i] << BCH_SECTOR_SHIFT);
		if ((r = bch_extent_encode(&eo, m->out, len[i], NULL, &crc)))
			break;
		if (e->crc.compression_type == BCH_COMPRESSION_incompressible)
			crc.compression_type = BCH_COMPRESSION_incompressible;
		if ((r = alloc_same_dev(c, k, op->rewrite, len[i], p[i].fresh, &got))) {
			m->s->keys_no_space++;
			problem(m, k, "no space for the new copies where the options allow");
			c->err_msg[0] = 0;
			break;
		}
		p[i].nr_fresh = got;
		p[i].fresh_span = len[i];
		for (unsigned j = 0; j < got && !r; j++) {
			struct bch_dev *ca = c->devs[p[i].fresh[j].dev];
			r = bch_dev_write(ca->bdev, m->out, (size_t)len[i] << BCH_SECTOR_SHIFT,
					  (uint64_t)p[i].fresh[j].offset << BCH_SECTOR_SHIFT);
			if (r)
				r = bch_fs_err(c, r, "writing moved data to %s: %s", bch_dev_path(ca->bdev),
					       bch_err_str(r));
			else
				m->s->sectors_written += len[i];
		}
		struct bch_bpos pos = k->p;
		if (!i)
			pos.offset = bch_extent_start(k) + a;
		if (!r && !(nk[i] = bch_bkey_alloc(BCH_BKEY_extent, pos, sizeof(struct bch_extent) +
						   got * sizeof(struct bch_extent_ptr))))
			r = -ENOMEM;
		if (!r) {
			struct bch_extent *ne = bkey_val(nk[i]);
			nk[i]->size = len[i];
			nk[i]->version = k->version;
			ne->crc = crc;
			memcpy(ne->ptrs, p[i].fresh, got * sizeof(p[i].fresh[0]));
		}
	}
	struct bch_bkey *old[2] = { r ? NULL : bch_bkey_dup(k), r ? NULL : bch_bkey_dup(k) };
	if (!r && (!old[0] || !old[1]))
		r = -ENOMEM;
	if (r) {
		for (unsigned i = 0; i < 2; i++) {
			bch_alloc_data_free(c, p[i].fresh, p[i].nr_fresh, p[i].fresh_span);
			free(nk[i]);
			free(old[i]);
		}
		memset(p, 0, 2 * sizeof(*p));
		return r;
	}
	for (unsigned i = 0; i < 2; i++) {
		p[i].old = old[i];
		p[i].new = nk[i];
		p[i].btree_id = m->btree_id;
	}
	p[0].group = 1;
	p[1].split = true;
	m->nr += 2;
	return 0;
}

static int move_key(struct bch_mover *m, const struct bch_bkey *k, const struct bch_move_op *op,
		    struct move_group *g)
{
	struct bch_fs *c = m->c;
	const struct bch_extent *e = bkey_val(k);
	unsigned nr = bch_extent_nr_ptrs(k);
	int r;

	if (k->type != BCH_BKEY_extent || !nr || (op->rewrite >> nr) || !op->nr_new ||
	    (op->cached && op->rewrite))
		return -EINVAL;
	/*
	 * A cached copy is trusted through its bucket's 8-bit generation,
	 * which can wrap: only a checksum catches a wrapped stale pointer, so
	 * data without one gets no cached copies (and demoted ones are dropped).
	 */
	bool may_cache = e->crc.csum_type != BCH_CSUM_none;
	if (op->cached && !may_cache)
		return -EINVAL;
	if ((r = queue_room(m, k, g)))
		return r;

	/* what stays: pointers not rewritten, minus stale cached ones */
	struct bch_extent_ptr keep[BCH_REPLICAS_MAX];
	unsigned nr_keep = 0, dirty_rewritten = 0;
	uint64_t exclude = op->exclude_devs;
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent_ptr *p = &e->ptrs[i];
		bool cached = p->flags & BCH_EXTENT_PTR_CACHED;
		if (op->rewrite & (1U << i)) {
			dirty_rewritten += !cached;
			if (p->dev < BCH_SB_MEMBERS_MAX && !cached && !op->recompress)
				exclude |= 1ULL << p->dev;	/* a new copy beside the old one is no move */
			if (!cached && !op->recompress && may_cache && (op->demote & (1U << i))) {
				keep[nr_keep] = *p;	/* stays, as a cached copy */
				keep[nr_keep++].flags |= BCH_EXTENT_PTR_CACHED;
			}
			continue;
		}
		if (cached && !bch_alloc_ptr_live(c, p))
			continue;
		keep[nr_keep++] = *p;
		/* a new dirty copy may replace a cached one on its device (below) */
		if (p->dev < BCH_SB_MEMBERS_MAX && (!cached || op->cached))
			exclude |= 1ULL << p->dev;
	}
	if (op->demote & ~op->rewrite)
		return -EINVAL;
	/*
	 * A key covering only part of its encoded extent is re-encoded (the
	 * rest is freed) when every dirty copy is rewritten, with the same
	 * compression: else moving it would carry its dead sectors along.
	 */
	bool recompress = op->recompress;
	uint64_t compression = op->compression;
	if (!recompress && !op->cached && dirty_rewritten && !g->nr &&
	    (e->crc.offset || k->size < e->crc.uncompressed_sectors)) {
		bool dirty_kept = false;
		for (unsigned i = 0; i < nr_keep; i++)
			dirty_kept |= !(keep[i].flags & BCH_EXTENT_PTR_CACHED);
		recompress = !dirty_kept;
		compression = e->crc.compression_type == BCH_COMPRESSION_incompressible
			? BCH_COMPRESSION_none : e->crc.compression_type;
	}
	if (recompress) {
		for (unsigned i = 0; i < nr_keep; i++)
			if (!(keep[i].flags & BCH_EXTENT_PTR_CACHED))
				return -EINVAL;	/* one encoding per key: every dirty copy is rewritten */
		nr_keep = 0;		/* cached copies of the old encoding go */
	}
	if (op->nr_new < dirty_rewritten || (op->same_dev && op->nr_new != dirty_rewritten))
		return -EINVAL;		/* would drop replicas */
	/*
	 * copygc: a plain key with one dirty copy, all of it rewritten, that
	 * does not fit the rest of the open bucket is cut there (move_split)
	 */
	unsigned split_at = 0;
	bool dirty_stays = false;
	for (unsigned i = 0; i < nr_keep; i++)
		dirty_stays |= !(keep[i].flags & BCH_EXTENT_PTR_CACHED);
	if (op->same_dev && !op->recompress && !g->nr && !c->crypt && !dirty_stays &&
	    m->btree_id == BCH_BTREE_ID_extents && dirty_rewritten == 1 &&
	    (e->crc.compression_type == BCH_COMPRESSION_none ||
	     e->crc.compression_type == BCH_COMPRESSION_incompressible) &&
	    (split_at = split_point(c, k, op->rewrite)) && m->nr + 2 > BCH_MOVE_BATCH_KEYS) {
		if ((r = bch_mover_flush(m)))	/* two slots; k itself is not queued */
			return r;
		split_at = split_point(c, k, op->rewrite);
	}
	/* room in the key: cached copies give way to dirty ones */
	while (nr_keep + op->nr_new > BCH_REPLICAS_MAX) {
		unsigned i;
		for (i = nr_keep; i-- > 0; )
			if (keep[i].flags & BCH_EXTENT_PTR_CACHED)
				break;
		if (op->cached || i >= nr_keep)
			return -EINVAL;
		memmove(&keep[i], &keep[i + 1], (nr_keep - i - 1) * sizeof(keep[0]));
		nr_keep--;
	}

	unsigned most = e->crc.compressed_sectors > e->crc.uncompressed_sectors
		? e->crc.compressed_sectors : e->crc.uncompressed_sectors;
	if ((r = buffers_for(m, most)))
		return r;
	if ((r = read_good_copy(m, k))) {
		if (r == -ENOMEM || bch_err_is_dl(r))
			return r;
		m->s->keys_no_good_copy++;
		problem(m, k, "no good copy to read");
		return -EIO;
	}
	if (split_at)
		return move_split(m, k, op, split_at);

	/*
	 * The encoded form of the new copies.  Re-encoded with sharers: the
	 * whole encoded extent, each member keeping its crc offset.
	 */
	unsigned enc_from = g->nr ? 0 : e->crc.offset;
	unsigned enc_sectors = g->nr ? e->crc.uncompressed_sectors : k->size;
	struct bch_extent_crc crc = e->crc;
	uint64_t version = k->version;
	const void *out = m->enc;
	if (recompress) {
		unsigned type = bch_compression_type_of(compression);
		struct bch_encode_opts eo = {
			.csum_type	= c->crypt ? BCH_CSUM_none : e->crc.csum_type,
			.compression	= compression,
			.block_sectors	= c->sb->block_size,
			.max_sectors	= enc_sectors,
		};
		const void *src = (const char *)(bch_crc_plain(&e->crc) && !c->crypt ? m->enc : m->dec) +
				  ((size_t)enc_from << BCH_SECTOR_SHIFT);
		void *dst = type != BCH_COMPRESSION_none || c->crypt ? m->out : NULL;
		if ((r = bch_extent_encode(&eo, src, enc_sectors, dst, &crc)))
			return r;
		/* tried and did not shrink (now, or when it was written): recorded */
		if ((type != BCH_COMPRESSION_none ||
		     e->crc.compression_type == BCH_COMPRESSION_incompressible) &&
		    crc.compression_type == BCH_COMPRESSION_none)
			crc.compression_type = BCH_COMPRESSION_incompressible;
		crc.offset = g->nr ? e->crc.offset : 0;
		/* encrypted: new bytes, a new nonce (crypt.h invariant (1)) */
		if (c->crypt && ((r = bch_crypt_nonce_take(c, &version)) ||
				 (r = bch_crypt_extent_encrypt(c, version, &crc, dst, dst))))
			return r;
		out = dst ? dst : src;
		if (!dst) {
			/* plain data straight from the read: it must sit in an I/O buffer */
			memmove(m->out, src, (size_t)enc_sectors << BCH_SECTOR_SHIFT);
			out = m->out;
		}
	}

	struct move_pending *p = &m->q[m->nr];
	unsigned got = 0;
	memset(p, 0, sizeof(*p));
	if (op->same_dev)
		r = alloc_same_dev(c, k, op->rewrite, crc.compressed_sectors, p->fresh, &got);
	else
		r = bch_alloc_data_move(c, crc.compressed_sectors, op->nr_new, op->target,
					op->target_only, exclude, false, p->fresh, &got);
	if (!r && !op->cached && got < dirty_rewritten) {
		bch_alloc_data_free(c, p->fresh, got, crc.compressed_sectors);
		r = -BCH_ERR_no_space;
	}
	if (r) {
		m->s->keys_no_space++;
		problem(m, k, "no space for the new copies where the options allow");
		c->err_msg[0] = 0;
		return -BCH_ERR_no_space;
	}
	p->nr_fresh = got;
	p->fresh_span = crc.compressed_sectors;
	/* a cached copy where a new dirty one went is redundant: dropped */
	for (unsigned i = 0; i < got; i++)
		for (unsigned j = 0; j < nr_keep; j++)
			if (keep[j].dev == p->fresh[i].dev) {
				memmove(&keep[j], &keep[j + 1], (nr_keep - j - 1) * sizeof(keep[0]));
				nr_keep--;
				break;
			}
	for (unsigned i = 0; i < got; i++) {
		struct bch_dev *ca = c->devs[p->fresh[i].dev];
		if ((r = bch_dev_write(ca->bdev, out, (size_t)crc.compressed_sectors << BCH_SECTOR_SHIFT,
				       (uint64_t)p->fresh[i].offset << BCH_SECTOR_SHIFT))) {
			bch_alloc_data_free(c, p->fresh, got, crc.compressed_sectors);
			memset(p, 0, sizeof(*p));
			return bch_fs_err(c, r, "writing moved data to %s: %s", bch_dev_path(ca->bdev),
					  bch_err_str(r));
		}
		m->s->sectors_written += crc.compressed_sectors;
		if (op->cached)
			bch_alloc_data_cached(c, &p->fresh[i], crc.compressed_sectors);
	}

	/* the replacement: same position and size; kept copies first, then the new */
	unsigned nr_new_ptrs = nr_keep + got;
	struct bch_bkey *nk = bch_bkey_alloc(BCH_BKEY_extent, k->p,
					     sizeof(struct bch_extent) + nr_new_ptrs * sizeof(struct bch_extent_ptr));
	if (nk) {
		struct bch_extent *ne = bkey_val(nk);
		nk->size = k->size;
		nk->version = version;
		ne->crc = crc;
		memcpy(ne->ptrs, keep, nr_keep * sizeof(keep[0]));
		memcpy(ne->ptrs + nr_keep, p->fresh, got * sizeof(p->fresh[0]));
	}
	if (!nk || (r = queue_group(m, k, nk, g))) {
		bch_alloc_data_free(c, p->fresh, got, crc.compressed_sectors);
		memset(p, 0, sizeof(*p));
		return -ENOMEM;
	}
	return 0;
}

/* k as it lies in btree_id (for reflink: the extent form of a reflink_v). */
static int mover_add(struct bch_mover *m, const struct bch_bkey *k, const struct bch_move_op *op,
		     unsigned btree_id)
{
	struct move_group g = { .nr = 0 };
	int r;

	m->s->keys_seen++;
	if (k->type == BCH_BKEY_extent && !op->unstripe) {
		const struct bch_extent *e = bkey_val(k);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
			if ((e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED) && (op->rewrite >> i & 1))
				return -EINVAL;	/* the stripe's redundancy: ec_move.c's */
	}
	if (queued_same(m, k))
		return 0;	/* queued with its group */
	/*
	 * With snapshots, a key handed over from an older read may have moved
	 * with its group since: not read and written again for nothing.
	 */
	if (btree_id == BCH_BTREE_ID_extents && bch_fs_has_snapshots(m->c) && !unchanged(m->c, k)) {
		m->s->keys_raced++;
		return 0;
	}
	m->btree_id = btree_id;
	r = op->drop_only ? drop_ptrs(m, k, op, &g) : move_key(m, k, op, &g);
	group_free(&g);
	return r;
}

int bch_mover_add(struct bch_mover *m, const struct bch_bkey *k, const struct bch_move_op *op)
{
	return mover_add(m, k, op, BCH_BTREE_ID_extents);
}

/* ------------------------------------------------ indirect extents (reflink.h) */

int bch_mover_add_indirect(struct bch_mover *m, const struct bch_bkey *v, const struct bch_move_op *op)
{
	struct bch_bkey *x = v->type == BCH_BKEY_reflink_v ? bch_reflink_v_to_extent(v) : NULL;

	if (!x)
		return v->type == BCH_BKEY_reflink_v ? -ENOMEM : -EINVAL;
	/* its data moves once for all its sharers: no group to find */
	int r = mover_add(m, x, op, BCH_BTREE_ID_reflink);
	free(x);
	return r;
}

/*
 * The reflink_v to commit for p: its new encoding and pointers with the
 * refcount it has now (sharing may have changed it meanwhile), or NULL
 * when the key's encoding or pointers changed since it was read (raced).
 */
static struct bch_bkey *indirect_replacement(struct bch_fs *c, const struct move_pending *p)
{
	struct bch_bkey *now = NULL, *x = NULL, *nv = NULL;

	if (!bch_btree_lookup(c, BCH_BTREE_ID_reflink, p->old->p, &now) &&
	    now->type == BCH_BKEY_reflink_v && (x = bch_reflink_v_to_extent(now)) &&
	    x->u64s == p->old->u64s && !memcmp(x, p->old, (size_t)x->u64s * 8)) {
		const struct bch_extent *ne = bkey_val(p->new);
		unsigned nr = bch_extent_nr_ptrs(p->new);
		nv = bch_bkey_alloc(BCH_BKEY_reflink_v, p->new->p,
				    sizeof(struct bch_reflink_v) + nr * sizeof(ne->ptrs[0]));
		if (nv) {
			struct bch_reflink_v *rv = bkey_val(nv);
			nv->size = p->new->size;
			nv->version = p->new->version;
			rv->refcount = ((const struct bch_reflink_v *)bkey_val(now))->refcount;
			rv->crc = ne->crc;
			memcpy(rv->ptrs, ne->ptrs, nr * sizeof(ne->ptrs[0]));
		}
	}
	free(now);
	free(x);
	c->err_msg[0] = 0;
	return nv;
}

/*
 * After the commit of p's replacement: the old copies it no longer points
 * at give up its share, demoted ones keep it (see the header comment).  The
 * new copies are settled per group (settle_fresh).
 */
static void settle(struct bch_fs *c, const struct move_pending *p)
{
	const struct bch_extent *oe = bkey_val(p->old), *ne = bkey_val(p->new);
	unsigned old_share = bch_extent_disk_sectors(p->old);

	if (p->split)
		return;		/* the front part gave up the old copies' share */

	/* gains first, so no bucket looks empty on the way: demoted copies */
	for (unsigned j = 0; j < bch_extent_nr_ptrs(p->new); j++) {
		const struct bch_extent_ptr *np = &ne->ptrs[j];
		if (!(np->flags & BCH_EXTENT_PTR_CACHED))
			continue;
		for (unsigned i = 0; i < bch_extent_nr_ptrs(p->old); i++)
			if (!(oe->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) && oe->ptrs[i].dev == np->dev &&
			    oe->ptrs[i].offset == np->offset && oe->ptrs[i].gen == np->gen)
				bch_alloc_data_account(c, np, oe->crc.compressed_sectors, old_share);
	}
	for (unsigned i = 0; i < bch_extent_nr_ptrs(p->old); i++) {
		bool kept = false;
		for (unsigned j = 0; j < bch_extent_nr_ptrs(p->new) && !kept; j++)
			kept = !memcmp(&oe->ptrs[i], &ne->ptrs[j], sizeof(oe->ptrs[i])) &&
			       !memcmp(&oe->crc, &ne->crc, sizeof(oe->crc));
		if (!kept)
			bch_alloc_data_account(c, &oe->ptrs[i], oe->crc.compressed_sectors,
					       -(int64_t)old_share);
	}
}

/*
 * A group's new copies were counted live in full (fresh_span) when
 * allocated: after the commit they hold the shares of the members that
 * committed (more than the span when pieces overlap, as with any shared
 * bucket), or, when none did, go back.
 */
static void settle_fresh(struct bch_fs *c, const struct move_pending *lead, bool committed)
{
	/* the lead's copies, and those of each split member (its own alone) */
	for (unsigned o = 0; o <= lead->group; o++) {
		const struct move_pending *own = &lead[o];
		int64_t held = 0;
		bool any = false;

		if (o && !own->split)
			continue;
		for (unsigned j = 0; committed && j <= lead->group; j++)
			if (!lead[j].raced && (o ? j == o : !lead[j].split)) {
				held += bch_extent_disk_sectors(lead[j].new);
				any = true;
			}
		if (!any) {
			bch_alloc_data_free(c, own->fresh, own->nr_fresh, own->fresh_span);
			continue;
		}
		for (unsigned i = 0; i < own->nr_fresh && held != own->fresh_span; i++) {
			struct bch_extent_ptr f = own->fresh[i];
			bch_alloc_data_account(c, &f, own->fresh_span, held - (int64_t)own->fresh_span);
		}
	}
}

static size_t group_u64s(const struct move_pending *lead)
{
	size_t u64s = 0;

	for (unsigned j = 0; j <= lead->group; j++)
		u64s += 2 + lead[j].new->u64s;		/* a reflink_v: one u64 more */
	return u64s;
}

/*
 * Add the group led by lead to t, each member only if it is unchanged (a
 * raced member is left alone; its group's other members still move).
 */
static int group_update(struct bch_mover *m, struct btree_trans *t, struct move_pending *lead)
{
	int r;

	for (unsigned j = 0; j <= lead->group; j++) {
		struct move_pending *p = &lead[j];
		bool indirect = p->btree_id == BCH_BTREE_ID_reflink;
		struct bch_bkey *nv = indirect ? indirect_replacement(m->c, p) : NULL;
		/* a split member stands or falls with the front part: one old key */
		if (p->split ? p[-1].raced : indirect ? !nv : !unchanged(m->c, p->old)) {
			m->s->keys_raced += !p->split;
			p->raced = true;
			continue;
		}
		r = nv ? bch_trans_update(t, BCH_BTREE_ID_reflink, nv)
		       : bch_trans_update(t, BCH_BTREE_ID_extents, p->new);
		free(nv);
		if (r)
			return r;
	}
	return 0;
}

/* After the commit (or failure, r) of the groups in q[start, end). */
static void groups_done(struct bch_mover *m, unsigned start, unsigned end, int r)
{
	for (unsigned i = start; i < end; i += 1 + m->q[i].group) {
		struct move_pending *lead = &m->q[i];
		for (unsigned j = 0; !r && j <= lead->group; j++)
			if (!lead[j].raced) {
				settle(m->c, &lead[j]);
				m->s->keys_moved += !lead[j].split;
				m->s->sectors_moved += lead[j].new->size;
			}
		settle_fresh(m->c, lead, !r);
	}
	for (unsigned i = start; i < end; i++)
		pending_free(&m->q[i]);
}

/*
 * Commit the queue; extra (see bch_mover_flush_extra()) goes into the last
 * transaction when nothing raced, and *done says so.
 */
static int flush(struct bch_mover *m, unsigned extra_btree, const struct bch_bkey *extra, bool *done)
{
	struct bch_fs *c = m->c;
	size_t max = bch_trans_max_u64s(c);
	size_t extra_u64s = extra ? 2 + extra->u64s : 0;
	unsigned i = 0;
	bool raced = false;
	int r = 0;

	if (done)
		*done = false;
	while ((i < m->nr || (extra && done && !*done && !raced && !m->nr)) && !r) {
		struct btree_trans *t;
		unsigned start = i;
		size_t used = 0;
		bool with_extra = false;

		if ((r = bch_trans_init(c, &t)))
			break;
		struct bch_view raw;	/* keys are replaced in the snapshot they lie in */
		bch_view_enter_raw(c, &raw);
		while (i < m->nr) {
			struct move_pending *lead = &m->q[i];
			size_t need = group_u64s(lead);
			bool last = i + 1 + lead->group >= m->nr;
			if (used && used + need + (last ? extra_u64s : 0) > max)
				break;		/* the next transaction takes it */
			r = group_update(m, t, lead);
			for (unsigned j = 0; j <= lead->group; j++)
				raced |= lead[j].raced;
			i += 1 + lead->group;
			if (r)
				break;
			used += need;
		}
		if (!r && extra && i >= m->nr && !raced) {
			r = bch_trans_update(t, extra_btree, extra);
			with_extra = !r;
			used += extra_u64s;
		}
		bch_view_exit(&raw);
		if (!r && used)
			r = bch_trans_commit(t, 0);
		if (!r && with_extra && done)
			*done = true;
		groups_done(m, start, i, r);
		bch_trans_exit(t);
		if (!m->nr)
			break;		/* extra alone: one transaction */
	}
	/* after an error the rest stays unmoved: give their space back */
	groups_done(m, i, m->nr, -1);
	m->nr = 0;
	return r;
}

int bch_mover_flush(struct bch_mover *m)
{
	return flush(m, 0, NULL, NULL);
}

int bch_mover_flush_extra(struct bch_mover *m, unsigned btree_id, const struct bch_bkey *extra,
			  bool *done)
{
	return flush(m, btree_id, extra, done);
}

int bch_mover_exit(struct bch_mover *m)
{
	if (!m)
		return 0;
	int r = bch_mover_flush(m);
	free(m->enc);
	free(m->dec);
	free(m->out);
	free(m);
	return r;
}
