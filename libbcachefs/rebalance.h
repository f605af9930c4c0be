/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_REBALANCE_H
#define _BCACHEFS_REBALANCE_H

/*
 * rebalance.h - background work that makes every extent satisfy its file's
 * effective options: data on background_target (when set), compressed with
 * background_compression (when set).  It moves data through the move path.
 *
 * Pending work lives on disk in the rebalance_work btree (bcachefs_format.h:
 * struct bch_rebalance_work): one key per inode that may have extents
 * needing work, set in the same transaction as the write that created such
 * an extent (bch_data_write) or the option change that made them so, and a
 * key at inode 0 asking for a scan of every inode (a filesystem option
 * changed).  So finding work costs in proportion to the work.
 *
 * Invariants
 *   (1) An extent that needs work has a work key for its inode (or the scan
 *       key covers it); fsck checks this (rebalance_work_missing).
 *   (2) A work key is deleted only after a pass over its inode found nothing
 *       left to do, in a transaction that checks nothing was written since.
 *   (3) When the target has no space (or an extent has no readable copy),
 *       the work stays recorded (flag BCH_REBALANCE_WAITING) and rebalance
 *       parks: bch_rebalance_step()
 *       reports no work until space is freed somewhere (c->space_gen moves)
 *       or an option changes.  It never spins.
 */

#include <stdbool.h>
#include <stdint.h>

#include "bkey.h"

struct bch_fs;
struct btree_trans;
struct bch_io_opts;
struct bch_move_stats;

#define BCH_REBALANCE_REASON_TARGET		(1U << 0)
#define BCH_REBALANCE_REASON_COMPRESSION	(1U << 1)

/* Why extent key k of a file with options o needs rebalance (0: it does not). */
unsigned bch_extent_rebalance_reasons(struct bch_fs *c, const struct bch_bkey *k,
				      const struct bch_io_opts *o);

/*
 * Record in t that inum has work from file sector `from` on (an existing key
 * whose cursor is past from is moved back; nothing is added otherwise).
 */
int  bch_rebalance_work_set(struct bch_fs *c, struct btree_trans *t, uint64_t inum, uint64_t from);
/*
 * Waiting work gets another try at the next step (an option changed, or a
 * write gave waiting work new data): c->rebalance_kicks moves, which a
 * parked caller watches beside c->space_gen.
 */
void bch_rebalance_kick(struct bch_fs *c);

/* In t, delete inum's work key if it has one (the inode is being deleted). */
int  bch_rebalance_work_clear(struct bch_fs *c, struct btree_trans *t, uint64_t inum);
/*
 * Schedule a pass over one inode (inum), or over every inode (0, after a
 * filesystem option changed); commits its own transaction.
 */
int  bch_rebalance_schedule(struct bch_fs *c, uint64_t inum);

/*
 * Do up to budget sectors of work.  Returns 1 when more work is ready, 0
 * when there is none (all done, or the rest waits for space: *parked is
 * then true), or a negative error.  With c->ec_build_deferred set, the
 * work keys only: no stripe is built or compacted (the FUSE daemon sets it
 * while writes stream in, so the stripes are built when they pause rather
 * than under the writer's feet).
 */
int  bch_rebalance_step(struct bch_fs *c, uint64_t budget, struct bch_move_stats *s,
			bool *parked);

/* Pending work, for fs usage (a walk over the work keys' inodes). */
struct bch_rebalance_pending {
	uint64_t	inodes;			/* work keys */
	bool		scan;			/* a scan of every inode is pending */
	uint64_t	sectors_target;		/* data off its background target */
	uint64_t	sectors_compression;	/* data not in its background compression */
	uint64_t	sectors_waiting;	/* of those, waiting for space */
	uint64_t	sectors_stripe;		/* replicated data the stripe builder would
						 * gather (erasure_code; ec.h) */
};
int  bch_rebalance_pending(struct bch_fs *c, struct bch_rebalance_pending *p);

#endif /* _BCACHEFS_REBALANCE_H */
