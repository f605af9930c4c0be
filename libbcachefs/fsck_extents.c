// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_extents.c - passes 5 and 6: extent pointers and extents (see fsck_files.h).
 *
 * Checks
 *   extent_ptr_bad, extent_ptr_stale, extent_ptr_dup (pass 5): a pointer to a
 * device that is no member, outside the buckets, into metadata, stale, or to
 * blocks another encoded extent claims is dropped (the extent too when none
 * is left).  A pointer to a member that was not given (opened degraded) is
 * no damage and is kept; extent_no_copy (NOFIX): every copy is on such
 * members (very_degraded).  alloc_key_wrong (pass 5, first): when the clean record said the
 * alloc btree was current, every bucket's stored state must equal the one
 * recomputed from the pointers at open (before passes 3-4 repaired
 * anything); a wrong key is rewritten at close
 * (left alone, the alloc btree is marked not current).  alloc_key_bad: a
 * key for no device, past the device's end, for a superblock or journal
 * bucket, or with impossible counts is deleted.  cached_ptr_bad (pass 5): a
 * cached pointer that is not stale must be in a bucket of user or cached
 * data and on a device without a dirty copy; it is dropped otherwise.
 * extent_no_inode, extent_bad_inode, extent_overlap, extent_past_eof
 * (pass 6).  The inode keys are read in step with the extents (both in
 * inode number order): each one passing is entered in the table, and its
 * sector count compared with its extents' (the differences are pass 7's).
 * rebalance_work_missing, rebalance_work_stale (pass 6): the rebalance_work
 * keys are read in step as well (invariant (1) of rebalance.h).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "alloc_btree.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "checksum.h"
#include "errcode.h"
#include "extents.h"
#include "fs_ops.h"
#include "fsck.h"
#include "inode.h"
#include "io.h"
#include "rebalance.h"
#include "super.h"
#include "fsck_files.h"

static const char *data_type_name(unsigned t)
{
	static const char * const names[] = {
#define x(n, id) [id] = #n,
		BCH_DATA_TYPES()
#undef x
	};
	return t < sizeof(names) / sizeof(names[0]) && names[t] ? names[t] : "?";
}

static int alloc_diff(void *priv, unsigned dev, uint64_t bucket,
		      const struct bch_bucket_state *stored, const struct bch_bucket_state *now)
{
	struct fstate *s = priv;
	char where[64], detail[160];

	snprintf(where, sizeof(where), "device %u bucket %" PRIu64, dev, bucket);
	if (stored->cached_sectors || now->cached_sectors)
		snprintf(detail, sizeof(detail), "stored gen %u %s %u sectors, %u cached, "
			 "found gen %u %s %u sectors, %u cached",
			 stored->gen, data_type_name(stored->data_type), stored->sectors,
			 stored->cached_sectors, now->gen, data_type_name(now->data_type),
			 now->sectors, now->cached_sectors);
	else
		snprintf(detail, sizeof(detail), "stored gen %u %s %u sectors, found gen %u %s %u sectors",
			 stored->gen, data_type_name(stored->data_type), stored->sectors,
			 now->gen, data_type_name(now->data_type), now->sectors);
	if (fsck_fixing(s, BCH_FSCK_alloc_key_wrong, where, detail))
		bch_fsck_fixed(s->ctx, BCH_FSCK_alloc_key_wrong);	/* written at close */
	else
		bch_alloc_btree_leave_stale(s->c);
	return 0;
}

static int alloc_bad(void *priv, struct bch_bpos pos, const char *why)
{
	struct fstate *s = priv;
	char where[96];

	snprintf(where, sizeof(where), "alloc key %" PRIu64 ":%" PRIu64 ":%u",
		 (uint64_t)pos.inode, (uint64_t)pos.offset, (unsigned)pos.snapshot);
	if (!fsck_fixing(s, BCH_FSCK_alloc_key_bad, where, why))
		return 0;
	int r = bch_alloc_btree_delete(s->c, pos);
	if (!r)
		bch_fsck_fixed(s->ctx, BCH_FSCK_alloc_key_bad);
	return r;
}

int fsck_check_alloc(struct fstate *s)
{
	int r = bch_alloc_btree_for_each_bad(s->c, alloc_bad, s);

	if (r || !bch_alloc_btree_was_current(s->c))
		return r;	/* after a crash the alloc btree is expected to be behind */
	return bch_alloc_btree_for_each_open_diff(s->c, alloc_diff, s);
}

/* The same encoded extent: everything but which piece of it a key covers. */
static bool same_encoding(const struct bch_extent_crc *a, const struct bch_extent_crc *b)
{
	return a->compressed_sectors == b->compressed_sectors &&
	       a->uncompressed_sectors == b->uncompressed_sectors &&
	       a->compressed_bytes == b->compressed_bytes && a->csum_type == b->csum_type &&
	       a->compression_type == b->compression_type && bch_csum_eq(a->csum, b->csum);
}

/*
 * Claim the blocks pointer p's encoded extent takes; false when another
 * extent has them.  Keys split from one encoded extent share its blocks:
 * they come one after another in key order, each a later piece of it.
 */
static bool claim(struct fstate *s, const struct bch_extent_ptr *p, const struct bch_extent_crc *crc,
		  unsigned size)
{
	unsigned sectors = crc->compressed_sectors;
	unsigned bs = s->c->sb->block_size;
	uint64_t first = p->offset / bs, last = (p->offset + sectors - 1) / bs;
	struct fsck_claims *cl = &s->claimed[p->dev];

	if (last >= cl->blocks)
		return true;
	if (fsck_claims_take(cl, first, last)) {
		/* a short memory: the pieces of one encoded extent are close together */
		for (unsigned i = 0; i < 128; i++)
			if (!memcmp(&s->recent[i].ptr, p, sizeof(*p)) &&
			    same_encoding(&s->recent[i].crc, crc)) {
				if (crc->offset < s->recent[i].end)
					return false;	/* a piece counted already */
				s->recent[i].end = (uint64_t)crc->offset + size;
				return true;
			}
		return false;
	}
	unsigned n = s->recent_next++ % 128;
	s->recent[n].ptr = *p;
	s->recent[n].crc = *crc;
	s->recent[n].crc.offset = 0;
	s->recent[n].end = (uint64_t)crc->offset + size;
	return true;
}

/*
 * A cached pointer (bcachefs_format.h) to a bucket on a present device, of
 * data type `type`: stale (its gen is not the bucket's, or the bucket holds
 * no data) it is no damage, and is left for the next rewrite of the key to
 * drop.  Live, it must be in a bucket of user or cached data, and on a device
 * that holds no dirty copy of the extent (such a copy is worth nothing).
 * Its blocks are not claimed: they are not counted as dirty data.
 */
static enum bch_fsck_problem cached_ptr_check(struct bch_fs *c, const struct bch_bkey *k,
					       const struct bch_extent_ptr *p, int type,
					       char *detail, size_t len)
{
	const struct bch_extent *e = bkey_val(k);
	struct bch_extent_ptr gen_only = *p;

	/* the gen alone, whatever the bucket holds */
	gen_only.flags &= ~BCH_EXTENT_PTR_CACHED;
	if (!bch_alloc_ptr_live(c, &gen_only))
		return BCH_FSCK_PROBLEM_NR;
	if (type != BCH_DATA_user && type != BCH_DATA_cached) {
		if (type == BCH_DATA_free)
			return BCH_FSCK_PROBLEM_NR;	/* not counted: reads do not trust it */
		snprintf(detail, len, "%u:%" PRIu64 " gen %u is in a bucket of %s data", p->dev,
			 (uint64_t)p->offset, p->gen, data_type_name(type));
		return BCH_FSCK_cached_ptr_bad;
	}
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
		if (!(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) && e->ptrs[i].dev == p->dev) {
			snprintf(detail, len, "%u:%" PRIu64 " gen %u is on the device of dirty copy %u",
				 p->dev, (uint64_t)p->offset, p->gen, i);
			return BCH_FSCK_cached_ptr_bad;
		}
	return BCH_FSCK_PROBLEM_NR;
}

/* ------------------------------------------- inode keys in step with extents */

static void sectors_wrong(struct fstate *s, uint64_t inum, uint64_t i_sectors, uint64_t counted)
{
	if (i_sectors == counted)
		return;
	if (s->nr_sectors_wrong == s->sectors_wrong_cap) {
		s->sectors_wrong_cap = s->sectors_wrong_cap ? 2 * s->sectors_wrong_cap : 16;
		s->sectors_wrong = realloc(s->sectors_wrong,
					   s->sectors_wrong_cap * sizeof(*s->sectors_wrong));
		if (!s->sectors_wrong)
			abort();
	}
	s->sectors_wrong[s->nr_sectors_wrong++] = (struct sectors_wrong){ inum, i_sectors, counted };
}

/*
 * Inode keys before inum (or all, for UINT64_MAX) into the table: they have
 * no extents, so a sector count other than 0 is wrong.  Then the key of inum
 * itself, if there is one: *found.
 */
static int work_judge(struct fstate *s, uint64_t upto, const struct bch_inode *i);

static int ino_advance(struct fstate *s, uint64_t inum, struct bch_inode *found, bool *have)
{
	const struct bch_bkey *k;
	int err = 0;

	*have = false;
	while ((k = fsck_cursor_peek(&s->inode_keys, &err)) && k->p.offset <= inum) {
		if (k->p.inode == 0 && k->type == BCH_BKEY_inode) {
			const struct bch_inode *i = bkey_val(k);
			if (!s->par)
				fsck_load_inode(s, k);
			else if ((err = work_judge(s, k->p.offset, i)))
				break;	/* the table is the other thread's */
			if (k->p.offset == inum) {
				*found = *i;
				*have = true;
			} else {
				sectors_wrong(s, k->p.offset, i->sectors, 0);
			}
		}
		fsck_cursor_pop(&s->inode_keys);
		if (*have)
			break;
	}
	return err;
}

/* ------------------------------------------ rebalance work keys in step */

/* A work key for an inode that is gone or is no regular file: delete it. */
static void work_stale(struct fstate *s, uint64_t inum, const char *why)
{
	char where[64];

	if (s->snapshots)
		return;	/* keyed by inode number: the inode may be another view's */
	snprintf(where, sizeof(where), "rebalance_work key %" PRIu64 ":0:0", inum);
	if (fsck_fixing(s, BCH_FSCK_rebalance_work_stale, where, why))
		fsck_fix_done(s, BCH_FSCK_rebalance_work_stale,
			      fsck_delete_key(s->c, BCH_BTREE_ID_rebalance_work, POS(inum, 0, 0)));
}

/*
 * Two threads (fstate.par): the table is the other thread's, and is not
 * complete yet.  The work keys up to upto, whose inode key (i, at upto;
 * no other up to there) was just read, are judged as the table would
 * judge them once it has every key up to there (work_advance()), and
 * queued for work_advance(), which takes them in order.
 */
static int work_judge(struct fstate *s, uint64_t upto, const struct bch_inode *i)
{
	const struct bch_bkey *k;
	int err = 0;

	while ((k = fsck_cursor_peek(&s->work_keys, &err)) && k->p.inode <= upto) {
		if (s->nr_work_q == s->work_q_cap) {
			s->work_q_cap = s->work_q_cap ? 2 * s->work_q_cap : 16;
			s->work_q = realloc(s->work_q, s->work_q_cap * sizeof(*s->work_q));
			if (!s->work_q)
				abort();
		}
		struct work_judged *j = &s->work_q[s->nr_work_q++];
		j->inum = k->p.inode;
		j->work = k->type == BCH_BKEY_rebalance_work;
		j->cursor = j->work ? ((const struct bch_rebalance_work *)bkey_val(k))->cursor : 0;
		/* ino_has_key(): a type in the mode; ino_mode(): S_ISREG */
		j->verdict = k->p.inode != upto || !(i->mode & S_IFMT) ? 1 : !S_ISREG(i->mode) ? 2 : 0;
		fsck_cursor_pop(&s->work_keys);
	}
	return err;
}

/*
 * Work keys up to inum (all: UINT64_MAX).  Every inode key up to inum is in
 * the table already: a key before inum is checked against it (the scan key,
 * at inode 0, is noted).  The key of inum itself, if any, is returned in
 * *have and *cursor for the caller, which knows the inode.
 */
static int work_advance(struct fstate *s, uint64_t inum, bool *have, uint64_t *cursor)
{
	const struct bch_bkey *k;
	int err = 0;

	*have = false;
	for (;;) {
		uint64_t w_inum, w_cursor = 0;
		bool work;
		int verdict = -1;	/* the table's (two threads: judged already) */

		if (s->err)
			break;
		if (s->work_q_at < s->nr_work_q) {
			const struct work_judged *j = &s->work_q[s->work_q_at++];
			w_inum = j->inum;
			w_cursor = j->cursor;
			work = j->work;
			verdict = j->verdict;
		} else {
			s->work_q_at = s->nr_work_q = 0;
			if (!(k = fsck_cursor_peek(&s->work_keys, &err)) || k->p.inode > inum)
				break;
			w_inum = k->p.inode;
			work = k->type == BCH_BKEY_rebalance_work;
			if (work)
				w_cursor = ((const struct bch_rebalance_work *)bkey_val(k))->cursor;
			fsck_cursor_pop(&s->work_keys);	/* before a repair changes the leaf */
			if (s->par)
				verdict = 1;	/* no inode key was read for it */
		}
		if (!work)
			continue;
		if (!w_inum) {
			s->scan_pending = true;
			s->scan_cursor = w_cursor;
		} else if (w_inum == inum) {
			*have = true;
			*cursor = w_cursor;
			break;
		} else {
			struct ino_info ii;
			if (verdict < 0)
				verdict = !fsck_ino_get(&s->inodes, w_inum, &ii) || !ino_has_key(&ii) ? 1 :
					  !S_ISREG(ino_mode(&ii)) ? 2 : 0;
			if (verdict == 1)
				work_stale(s, w_inum, "no such inode");
			else if (verdict == 2)
				work_stale(s, w_inum, "not a regular file");
		}
	}
	return err;
}

/*
 * The end of an inode's extents: its work key (invariant (1) of
 * rebalance.h).  A pass over an inode starts at its key's cursor and takes
 * the extents that end after it, so the first extent needing work must end
 * past the cursor; the scan key covers every inode from its cursor on.
 */
static int work_inode_done(struct fstate *s)
{
	bool have;
	uint64_t cursor;
	char where[600], detail[200];
	int r = work_advance(s, s->cur_inum, &have, &cursor);

	if (r || s->err)
		return r;
	if (have && !s->cur_exists)
		work_stale(s, s->cur_inum, "no such inode");
	else if (have && !S_ISREG(s->cur_mode))
		work_stale(s, s->cur_inum, "not a regular file");
	if (s->cur_work_end == UINT64_MAX ||
	    (s->scan_pending && s->cur_inum >= s->scan_cursor) ||
	    (have && cursor < s->cur_work_end))
		return 0;
	fsck_lock(s);
	fsck_inode_where(s->c, s->cur_inum, where, sizeof(where));
	fsck_unlock(s);
	int n = snprintf(detail, sizeof(detail), "sectors %" PRIu64 "..%" PRIu64 " %s%s%s",
			 s->cur_work_start, s->cur_work_end,
			 s->cur_work_why & BCH_REBALANCE_REASON_TARGET ? "off the background target" : "",
			 s->cur_work_why == (BCH_REBALANCE_REASON_TARGET | BCH_REBALANCE_REASON_COMPRESSION)
			 ? " and " : "",
			 s->cur_work_why & BCH_REBALANCE_REASON_COMPRESSION
			 ? "not in the background compression" : "");
	if (have && n > 0 && (size_t)n < sizeof(detail))
		snprintf(detail + n, sizeof(detail) - n, "; the record's cursor %" PRIu64 " is past them",
			 cursor);
	if (!fsck_fixing(s, BCH_FSCK_rebalance_work_missing, where, detail))
		return 0;
	/* a pass from the start of the file (an existing key's WAITING flag goes: try again) */
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_rebalance_work, POS(s->cur_inum, 0, 0),
					    sizeof(struct bch_rebalance_work));
	fsck_fix_done(s, BCH_FSCK_rebalance_work_missing,
		      fsck_put_key(s->c, BCH_BTREE_ID_rebalance_work, k));
	free(k);
	return 0;
}

/* Extent k of the current inode is kept: does it need rebalance? */
static void work_note(struct fstate *s, const struct bch_bkey *k)
{
	if (s->cur_work_end != UINT64_MAX || !s->cur_exists || !S_ISREG(s->cur_mode))
		return;
	unsigned why = bch_extent_rebalance_reasons(s->c, k, &s->cur_opts);
	if (why) {
		s->cur_work_start = bch_extent_start(k);
		s->cur_work_end = k->p.offset;
		s->cur_work_why = why;
	}
}

/* The run of extents of the inode before ends: compare its sector count, check its work key. */
static int extents_inode_done(struct fstate *s)
{
	if (s->cur_inum == UINT64_MAX)
		return 0;
	if (s->cur_exists)
		sectors_wrong(s, s->cur_inum, s->cur_i_sectors, s->cur_counted);
	return work_inode_done(s);
}

/* The inode whose extents follow. */
static int extents_next_inode(struct fstate *s, uint64_t inum)
{
	struct bch_inode i;
	bool have;

	int r = extents_inode_done(s);
	if (!r)
		r = ino_advance(s, inum, &i, &have);
	if (r)
		return r;
	s->cur_inum = inum;
	s->prev_end = 0;
	s->cur_counted = 0;
	s->cur_exists = have;
	s->cur_mode = have ? i.mode : 0;
	s->cur_size = have ? i.size : 0;
	s->cur_i_sectors = have ? i.sectors : 0;
	s->cur_work_end = UINT64_MAX;
	if (have)
		bch_io_opts_get(s->c, &i, &s->cur_opts);
	return 0;
}

int fsck_extents_done(struct fstate *s)
{
	struct bch_inode i;
	bool have;
	uint64_t cursor;

	int r = extents_inode_done(s);
	s->cur_inum = UINT64_MAX;
	if (!r)
		r = ino_advance(s, UINT64_MAX, &i, &have);
	/* the work keys after the last inode with extents */
	if (!r)
		r = work_advance(s, UINT64_MAX, &have, &cursor);
	return r;
}

int fsck_check_extent(struct fstate *s, const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	struct bch_bkey *repl = NULL;	/* the key after pass 5 dropped pointers */
	char where[640], detail[160];

	if (k->type != BCH_BKEY_extent && k->type != BCH_BKEY_reservation &&
	    k->type != BCH_BKEY_reflink_p)	/* its target: fsck_reflink.c */
		return 0;
	if (k->p.inode != s->cur_inum) {
		int r = extents_next_inode(s, k->p.inode);
		if (r)
			return r;
	}
	s->stats->extents++;
	uint64_t start = bch_extent_start(k);
	/* where a report says it is: written only when there is one */
#define WHERE	(snprintf(where, sizeof(where), "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64, \
			  (uint64_t)k->p.inode, start, (uint64_t)k->p.offset), where)

	/* pass 5: pointers */
	if (k->type == BCH_BKEY_extent) {
		const struct bch_extent *e = bkey_val(k);
		unsigned nr = bch_extent_nr_ptrs(k), keep = 0;
		struct bch_extent_ptr good[BCH_REPLICAS_MAX];
		unsigned on_missing = 0;
		for (unsigned i = 0; i < nr; i++) {
			const struct bch_extent_ptr *p = &e->ptrs[i];
			if (bch_dev_missing(c, p->dev)) {
				/* a copy on a member not given (degraded): no damage, kept */
				good[keep++] = *p;
				on_missing++;
				continue;
			}
			int type = p->dev < c->nr_devs && c->devs[p->dev] && c->devs[p->dev]->bdev
				 ? bch_alloc_bucket_type(c, p, e->crc.compressed_sectors) : -2;
			enum bch_fsck_problem prob = BCH_FSCK_PROBLEM_NR;
			if (type == -2) {
				prob = BCH_FSCK_extent_ptr_bad;
				snprintf(detail, sizeof(detail), "device %u missing", p->dev);
			} else if (type < 0) {
				prob = BCH_FSCK_extent_ptr_bad;
				snprintf(detail, sizeof(detail), "sector %" PRIu64 " outside device %u",
					 (uint64_t)p->offset, p->dev);
			} else if (p->flags & BCH_EXTENT_PTR_CACHED) {
				prob = cached_ptr_check(c, k, p, type, detail, sizeof(detail));
			} else if (type != BCH_DATA_user) {
				prob = BCH_FSCK_extent_ptr_bad;
				snprintf(detail, sizeof(detail), "%u:%" PRIu64 " is in a bucket of other data",
					 p->dev, (uint64_t)p->offset);
			} else if (!bch_alloc_ptr_live(c, p)) {
				prob = BCH_FSCK_extent_ptr_stale;
				snprintf(detail, sizeof(detail), "%u:%" PRIu64 " gen %u", p->dev,
					 (uint64_t)p->offset, p->gen);
			} else if (!claim(s, p, &e->crc, k->size)) {
				prob = BCH_FSCK_extent_ptr_dup;
				snprintf(detail, sizeof(detail), "%u:%" PRIu64 " already used by another extent",
					 p->dev, (uint64_t)p->offset);
			}
			if (prob == BCH_FSCK_PROBLEM_NR || !fsck_fixing(s, prob, WHERE, detail))
				good[keep++] = *p;
			else
				bch_fsck_fixed(s->ctx, prob);	/* counted when the key is rewritten below */
		}
		if (nr && on_missing == nr)	/* very_degraded: no copy left here; not repaired */
			bch_fsck_problem(s->ctx, BCH_FSCK_extent_no_copy, WHERE, NULL);
		if (keep < nr) {
			struct bch_bkey *n = NULL;
			if (keep) {
				n = bch_bkey_alloc(BCH_BKEY_extent, k->p,
						   sizeof(struct bch_extent) + keep * sizeof(struct bch_extent_ptr));
				n->size = k->size;
				n->version = k->version;	/* encrypted: the data's nonce */
				struct bch_extent *ne = bkey_val(n);
				ne->crc = e->crc;
				memcpy(ne->ptrs, good, keep * sizeof(good[0]));
			}
			int r = fsck_replace_extent(c, k, n, true);
			if (r || !keep) {
				free(n);
				return r;	/* 0: the extent is gone */
			}
			k = repl = n;	/* pass 6 checks what is left of it */
		}
	}

	/* pass 6: owner, order, end of file */
	enum bch_fsck_problem prob = BCH_FSCK_PROBLEM_NR;
	uint64_t bs = c->sb->block_size;
	if (!s->cur_exists)
		prob = BCH_FSCK_extent_no_inode;
	else if (!S_ISREG(s->cur_mode) && !S_ISLNK(s->cur_mode))
		prob = BCH_FSCK_extent_bad_inode;
	else if (k->type != BCH_BKEY_reservation &&	/* fallocate KEEP_SIZE: legitimate */
		 start >= (s->cur_size + (bs << 9) - 1) / (bs << 9) * bs)
		prob = BCH_FSCK_extent_past_eof;
	if (prob != BCH_FSCK_PROBLEM_NR) {
		if (prob == BCH_FSCK_extent_past_eof)
			snprintf(detail, sizeof(detail), "file size %" PRIu64, s->cur_size);
		if (fsck_fixing(s, prob, WHERE, prob == BCH_FSCK_extent_past_eof ? detail : NULL)) {
			fsck_fix_done(s, prob, fsck_replace_extent(c, k, NULL, false));
			goto out;
		}
	} else if (start < s->prev_end) {
		if (fsck_fixing(s, BCH_FSCK_extent_overlap, WHERE, NULL)) {
			int r;
			if (k->p.offset <= s->prev_end) {
				r = fsck_replace_extent(c, k, NULL, false);
			} else {
				/* keep the part after the previous extent (same position: replaces it) */
				struct bch_bkey *n = bch_bkey_dup(k);
				bch_extent_cut_front(n, s->prev_end);
				r = fsck_put_key(c, BCH_BTREE_ID_extents, n);
				if (!r) {
					work_note(s, n);
					s->cur_counted += n->size;
					s->prev_end = n->p.offset;
					if (n->type == BCH_BKEY_reservation)
						s->reserved += (uint64_t)n->size *
							       bch_reservation_replicas(n);
				}
				free(n);
			}
			fsck_fix_done(s, BCH_FSCK_extent_overlap, r);
			goto out;
		}
	}
	if (k->p.offset > s->prev_end)
		s->prev_end = k->p.offset;
	work_note(s, k);
	s->cur_counted += k->size;
	if (k->type == BCH_BKEY_reservation)
		s->reserved += (uint64_t)k->size * bch_reservation_replicas(k);
out:
	free(repl);
	return s->err;
#undef WHERE
}
