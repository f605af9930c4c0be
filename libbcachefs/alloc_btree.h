/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_ALLOC_BTREE_H
#define _BCACHEFS_ALLOC_BTREE_H

/*
 * alloc_btree.h - bucket state persisted in the alloc btree.
 *
 * At open, bch_alloc_btree_read() reads every alloc key.  When the clean
 * record says the keys are current (BCH_CLEAN_ALLOC_CURRENT) and this is
 * not an fsck, they become the bucket state and nothing else is read;
 * otherwise the caller recomputes the state from the pointers and calls
 * bch_alloc_btree_rebuilt(), which keeps the persisted generations of free
 * buckets (a generation never goes back), or, when the keys were current
 * (fsck), records where they differ from the recomputed state.
 *
 * At clean close, bch_alloc_btree_sync() writes a key for every bucket whose
 * state differs from what the btree holds, flushes, and repeats until the
 * writes themselves changed nothing (their node allocations are bucket
 * changes too); *current says whether it settled.
 *
 * Invariant: what the alloc btree holds is mirrored in memory (the stored
 * state), so only differences are written and fsck can compare.  Except
 * under fsck -n (fsck, read-only): nothing writes the keys, so the open
 * keeps only their generations, and the one comparison reads the keys
 * again beside the buckets (12 bytes a bucket less; 64-80 KB of fsck -n's
 * peak at 1M files).
 */

#include <stdbool.h>
#include <stdint.h>

#include "alloc.h"
#include "bcachefs_format.h"

struct bch_fs;

int  bch_alloc_btree_read(struct bch_fs *c, bool current, bool *loaded);
int  bch_alloc_btree_rebuilt(struct bch_fs *c);
/*
 * fsck: note where the stored keys differ from the recount (called by
 * bch_alloc_btree_rebuilt(), or once the extents are marked when
 * c->extents_mark_deferred).  Opened read-only, there is no mirror: the
 * keys are read again for the comparison.
 */
int  bch_alloc_btree_record_diffs(struct bch_fs *c);
int  bch_alloc_btree_sync(struct bch_fs *c, bool *current);
/*
 * fsck, after its repairs: the user data buckets counted again from the
 * extent keys as they are now (every journal key is in the btrees by then).
 * The repairs drop and move keys, and what was counted before them (at
 * open, or claimed for keys a rebuild would bring back) may not be what they
 * kept; the close then writes what differs.  Btree buckets are not touched:
 * node allocations and frees keep them exact.
 */
int  bch_alloc_btree_recount(struct bch_fs *c);
void bch_alloc_btree_exit(struct bch_fs *c);
/*
 * Commit the current state of the given buckets of dev to the alloc btree
 * now (eviction: a bumped gen must be persisted before the bucket is
 * reused, alloc.h), in as few transactions as fit.  Not durable until the
 * journal entry is.
 */
int  bch_alloc_btree_write_buckets(struct bch_fs *c, unsigned dev, const uint64_t *buckets,
				   unsigned nr);

/*
 * fsck rebuilt the alloc btree (from old leaves, or empty): what it holds is
 * no longer mirrored, so the close writes a key for every bucket.
 */
void bch_alloc_btree_forget_stored(struct bch_fs *c);
/* The clean record said the keys were current when this filesystem was opened. */
bool bch_alloc_btree_was_current(struct bch_fs *c);
/* Do not write the keys at close (fsck: a mismatch the user chose to keep). */
void bch_alloc_btree_leave_stale(struct bch_fs *c);

/*
 * fsck: call fn for every bucket whose stored state differs from the
 * current one, in device and bucket order; stops at fn's first nonzero.
 */
int  bch_alloc_btree_for_each_diff(struct bch_fs *c,
				   int (*fn)(void *priv, unsigned dev, uint64_t bucket,
					     const struct bch_bucket_state *stored,
					     const struct bch_bucket_state *now),
				   void *priv);

/*
 * fsck: call fn for every key that failed the checks at read (opened for
 * fsck, such keys are collected instead of failing the open), and delete one.
 */
int  bch_alloc_btree_for_each_bad(struct bch_fs *c,
				  int (*fn)(void *priv, struct bch_bpos pos, const char *why),
				  void *priv);
int  bch_alloc_btree_delete(struct bch_fs *c, struct bch_bpos pos);

/*
 * fsck: the same for the differences found at open, before any repair (the
 * keys were current: under fsck the state is recomputed, then compared).
 */
int  bch_alloc_btree_for_each_open_diff(struct bch_fs *c,
					int (*fn)(void *priv, unsigned dev, uint64_t bucket,
						  const struct bch_bucket_state *stored,
						  const struct bch_bucket_state *now),
					void *priv);

#endif /* _BCACHEFS_ALLOC_BTREE_H */
