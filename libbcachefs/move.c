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
	unsigned		btree_id;	/* extents, or reflink: old and new are then the
						 * extent form of a reflink_v (reflink.h) */
};

struct bch_mover {
	struct bch_fs		*c;
	struct bch_move_stats	*s;
	struct move_pending	q[BCH_MOVE_BATCH_KEYS];
	unsigned		nr;
	void			*enc, *dec, *out;	/* one extent's buffers */
	unsigned		buf_sectors;		/* their size (grown as needed) */
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
		if (!(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) &&
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

/* A free queue slot for k: an older move of the same key is committed first. */
static int queue_room(struct bch_mover *m, const struct bch_bkey *k)
{
	int r;

	for (unsigned i = 0; i < m->nr; i++)
		if (bpos_eq(m->q[i].old->p, k->p) && (r = bch_mover_flush(m)))
			return r;
	if (m->nr == BCH_MOVE_BATCH_KEYS && (r = bch_mover_flush(m)))
		return r;
	return 0;
}

/*
 * drop_only: the replacement is k without the rewrite pointers (and stale
 * cached ones); no data moves.  A dirty copy goes only with op->degrade,
 * and never the last one.
 */
static int drop_ptrs(struct bch_mover *m, const struct bch_bkey *k, const struct bch_move_op *op)
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
	if ((r = queue_room(m, k)))
		return r;
	struct move_pending *p = &m->q[m->nr];
	struct bch_bkey *nk = bch_bkey_alloc(BCH_BKEY_extent, k->p,
					     sizeof(struct bch_extent) + nr_keep * sizeof(keep[0]));
	memset(p, 0, sizeof(*p));
	p->old = bch_bkey_dup(k);
	if (!nk || !p->old) {
		free(nk);
		free(p->old);
		memset(p, 0, sizeof(*p));
		return -ENOMEM;
	}
	struct bch_extent *ne = bkey_val(nk);
	nk->size = k->size;
	nk->version = k->version;
	ne->crc = e->crc;
	memcpy(ne->ptrs, keep, nr_keep * sizeof(keep[0]));
	p->new = nk;
	m->nr++;
	return 0;
}

int bch_mover_add(struct bch_mover *m, const struct bch_bkey *k, const struct bch_move_op *op)
{
	struct bch_fs *c = m->c;
	const struct bch_extent *e = bkey_val(k);
	unsigned nr = bch_extent_nr_ptrs(k);
	int r;

	m->s->keys_seen++;
	if (op->drop_only)
		return drop_ptrs(m, k, op);
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
	if ((r = queue_room(m, k)))
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
	if (!recompress && !op->cached && dirty_rewritten &&
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

	/* the encoded form of the new copies */
	struct bch_extent_crc crc = e->crc;
	uint64_t version = k->version;
	const void *out = m->enc;
	if (recompress) {
		unsigned type = bch_compression_type_of(compression);
		struct bch_encode_opts eo = {
			.csum_type	= c->crypt ? BCH_CSUM_none : e->crc.csum_type,
			.compression	= compression,
			.block_sectors	= c->sb->block_size,
			.max_sectors	= k->size,
		};
		const void *src = (const char *)(bch_crc_plain(&e->crc) && !c->crypt ? m->enc : m->dec) +
				  ((size_t)e->crc.offset << BCH_SECTOR_SHIFT);
		void *dst = type != BCH_COMPRESSION_none || c->crypt ? m->out : NULL;
		if ((r = bch_extent_encode(&eo, src, k->size, dst, &crc)))
			return r;
		/* tried and did not shrink (now, or when it was written): recorded */
		if ((type != BCH_COMPRESSION_none ||
		     e->crc.compression_type == BCH_COMPRESSION_incompressible) &&
		    crc.compression_type == BCH_COMPRESSION_none)
			crc.compression_type = BCH_COMPRESSION_incompressible;
		crc.offset = 0;
		/* encrypted: new bytes, a new nonce (crypt.h invariant (1)) */
		if (c->crypt && ((r = bch_crypt_nonce_take(c, &version)) ||
				 (r = bch_crypt_extent_encrypt(c, version, &crc, dst, dst))))
			return r;
		out = dst ? dst : src;
		if (!dst) {
			/* plain data straight from the read: it must sit in an I/O buffer */
			memmove(m->out, src, (size_t)k->size << BCH_SECTOR_SHIFT);
			out = m->out;
		}
	}

	struct move_pending *p = &m->q[m->nr];
	unsigned got = 0;
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
	p->old = bch_bkey_dup(k);
	if (!nk || !p->old) {
		bch_alloc_data_free(c, p->fresh, got, crc.compressed_sectors);
		free(nk);
		free(p->old);
		memset(p, 0, sizeof(*p));
		return -ENOMEM;
	}
	struct bch_extent *ne = bkey_val(nk);
	nk->size = k->size;
	nk->version = version;
	ne->crc = crc;
	memcpy(ne->ptrs, keep, nr_keep * sizeof(keep[0]));
	memcpy(ne->ptrs + nr_keep, p->fresh, got * sizeof(p->fresh[0]));
	p->new = nk;
	m->nr++;
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

/* ------------------------------------------------ indirect extents (reflink.h) */

int bch_mover_add_indirect(struct bch_mover *m, const struct bch_bkey *v, const struct bch_move_op *op)
{
	struct bch_bkey *x = v->type == BCH_BKEY_reflink_v ? bch_reflink_v_to_extent(v) : NULL;

	if (!x)
		return v->type == BCH_BKEY_reflink_v ? -ENOMEM : -EINVAL;
	int r = bch_mover_add(m, x, op);
	/* queued last (no extent key lies at inode 0, where indirect extents do) */
	if (!r && m->nr && !m->q[m->nr - 1].btree_id && bpos_eq(m->q[m->nr - 1].old->p, x->p))
		m->q[m->nr - 1].btree_id = BCH_BTREE_ID_reflink;
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

/* After the commit of p's replacement: settle the counts (see the header comment). */
static void settle(struct bch_fs *c, const struct move_pending *p)
{
	const struct bch_extent *oe = bkey_val(p->old), *ne = bkey_val(p->new);
	unsigned old_share = bch_extent_disk_sectors(p->old);
	unsigned new_share = bch_extent_disk_sectors(p->new);

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

	for (unsigned i = 0; i < p->nr_fresh; i++) {
		struct bch_extent_ptr f = p->fresh[i];
		if (new_share < p->fresh_span)
			bch_alloc_data_account(c, &f, p->fresh_span,
					       -(int64_t)(p->fresh_span - new_share));
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

int bch_mover_flush(struct bch_mover *m)
{
	struct bch_fs *c = m->c;
	size_t max = bch_trans_max_u64s(c);
	unsigned i = 0;
	int r = 0;

	while (i < m->nr && !r) {
		struct btree_trans *t;
		unsigned start = i;
		size_t used = 0;

		if ((r = bch_trans_init(c, &t)))
			break;
		struct bch_view raw;	/* keys are replaced in the snapshot they lie in */
		bch_view_enter_raw(c, &raw);
		for (; i < m->nr; i++) {
			struct move_pending *p = &m->q[i];
			if (used && used + 2 + p->new->u64s > max)
				break;		/* the next transaction takes it */
			struct bch_bkey *nv = p->btree_id == BCH_BTREE_ID_reflink
					      ? indirect_replacement(c, p) : NULL;
			if (p->btree_id == BCH_BTREE_ID_reflink ? !nv : !unchanged(c, p->old)) {
				m->s->keys_raced++;
				bch_alloc_data_free(c, p->fresh, p->nr_fresh, p->fresh_span);
				pending_free(p);
				continue;
			}
			r = nv ? bch_trans_update(t, BCH_BTREE_ID_reflink, nv)
			       : bch_trans_update(t, BCH_BTREE_ID_extents, p->new);
			free(nv);
			if (r)
				break;
			used += 2 + p->new->u64s;
		}
		bch_view_exit(&raw);
		if (!r && used)
			r = bch_trans_commit(t, 0);
		for (unsigned j = start; j < i; j++) {
			struct move_pending *q = &m->q[j];
			if (!q->new)
				continue;
			if (r) {
				bch_alloc_data_free(c, q->fresh, q->nr_fresh, q->fresh_span);
			} else {
				settle(c, q);
				m->s->keys_moved++;
				m->s->sectors_moved += q->new->size;
			}
			pending_free(q);
		}
		bch_trans_exit(t);
	}
	/* after an error the rest stays unmoved: give their space back */
	for (; i < m->nr; i++) {
		if (m->q[i].new)
			bch_alloc_data_free(c, m->q[i].fresh, m->q[i].nr_fresh, m->q[i].fresh_span);
		pending_free(&m->q[i]);
	}
	m->nr = 0;
	return r;
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
