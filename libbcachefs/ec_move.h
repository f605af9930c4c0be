/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_EC_MOVE_H
#define _BCACHEFS_EC_MOVE_H

/*
 * ec_move.h - moving striped data (ec.h): a stripe with a block on a member
 * that leaves (device evacuate / remove), a stripe that lost a block (a
 * member missing or failed: data rereplicate), and a stripe whose blocks
 * hold mostly deleted data (compaction, run by rebalance) are all handled
 * one way: the stripe is dissolved.
 *
 * Dissolving stripe S: every key that points into S (extents, and indirect
 * extents of the reflink btree) is rewritten out of it through the move
 * path (move.h), replicated as new data is written -- the data_replicas of
 * its file, on read-write members other than the one leaving.  The read
 * takes the striped block as it is, or rebuilds it from the other blocks
 * and verifies it against the extent's checksum (io.h:
 * bch_extent_read_rebuild).  The transaction that replaces the last keys of
 * S also deletes S's key (bch_mover_flush_extra); its parity buckets are
 * then free once that is durable (alloc.h).  The stripe builder (ec.h)
 * later gathers the replicated extents into new stripes on the members
 * there are: data that left a stripe is never kept in fewer copies than
 * the file asks for.
 *
 * Why not rebuild just the one block on another member: the builder makes
 * stripes as wide as the members allow (k + p = every read-write member,
 * up to 20), so when one leaves there is, as a rule, no member outside the
 * stripe to take its block: the stripe has to get narrower, which is a
 * re-stripe anyway.  Dissolving uses only the move path's compare-and-swap
 * and the builder, both crash-tested, and the same mechanism serves
 * rereplicate and compaction.  The cost: all of a stripe's data is written
 * data_replicas times, then striped again (evacuating one of six RS(4,2)
 * members wrote 3x the striped data, then 5/3 of it to stripe it again RS(3,2),
 * where replicas=3 moves only that member's copies).
 *
 * Invariants
 *   (1) A key leaves S only in a commit that gives it its new copies (the
 *       move path's invariant (4)): a crash at any point leaves every key
 *       either striped in S, whose key still exists, or replicated.
 *   (2) S's key is deleted only in the transaction of S's last keys, and
 *       only when none of S's keys changed meanwhile (a write splitting
 *       one, or another move) nor was left for want of space or of a
 *       readable copy: so no pointer ever names a deleted stripe, and no
 *       stripe is left behind by a crash with nothing pointing into it.
 *       A stripe not deleted (raced) is found again by the next pass.
 *   (3) Compaction never undoes the builder: it takes a stripe whose data
 *       block holds nothing live (its bucket is free, or reused: a block of
 *       the stripe's redundancy is already lost), or one whose live data is
 *       at most BCH_EC_COMPACT_PERCENT of its data blocks, judged only for
 *       blocks more than twice encoded_extent_max (the builder fills every
 *       block of its stripes to within one extent of the fullest, so it
 *       never builds such a stripe itself: no churn).
 *   (4) A stripe is deleted without moving anything (BCH_EC_SELECT_unused)
 *       only when the walk of the extents and reflink btrees of that pass
 *       found no key pointing into it, in a pass under one engine lock hold.
 *
 * Live data of a stripe is read from its data blocks' buckets (their dirty
 * sectors are the shares of the extents in them, ec.h): no extent walk to
 * choose, one per dissolving pass to find the keys of the chosen stripes.
 *
 * Locking: the caller holds the engine lock for each call (data_job.h,
 * rebalance.h); a race between calls is caught by invariant (2).
 */

#include <stdbool.h>
#include <stdint.h>

struct bch_fs;
struct bch_move_stats;
struct bch_ec_pick;

#define BCH_EC_COMPACT_PERCENT	50	/* live data at or below this share of a stripe's
					 * data blocks: compacted (invariant 3) */

enum bch_ec_select {
	BCH_EC_SELECT_dev,		/* stripes with a block on member dev (from
					 * from_sector on) */
	BCH_EC_SELECT_degraded,		/* a block on a member missing, failed or gone, or
					 * not live (its bucket reused) */
	BCH_EC_SELECT_sparse,		/* compaction: invariant (3) */
	BCH_EC_SELECT_unused,		/* noted by bch_ec_note_dropped() this session
					 * (all of them after ec_dropped_all): deleted
					 * only if nothing points into them (invariant 4) */
};

struct bch_ec_dissolve {
	enum bch_ec_select kind;
	unsigned	dev;		/* BCH_EC_SELECT_dev: the member, */
	uint64_t	from_sector;	/* its blocks at or past this sector (a shrink) */
	uint64_t	cursor;		/* the next stripe index to look at (0: the start) */
	/* results, added to */
	uint64_t	stripes_left;	/* chosen but not dissolved (see stuck) */
	uint64_t	stuck_no_space, stuck_too_few_devs, stuck_unreadable, stuck_raced;
	char		problem[200];	/* the last stripe left, and why */

	/* private: the chosen stripes and their keys, dissolved over the next steps */
	struct bch_ec_pick *picks;
	unsigned	nr_picks, next_pick;
	bool		more;		/* the stripes walk stopped before the end */
};

/* Whether stripe key k (a valid stripe) is chosen by d. */
bool bch_ec_stripe_selected(struct bch_fs *c, const struct bch_bkey *k,
			    const struct bch_ec_dissolve *d);

/*
 * Dissolve the chosen stripes from d->cursor on, up to about budget
 * sectors of data written.  One walk of the stripes chooses up to
 * BCH_EC_PICK_MAX of them and one walk of the extents and reflink btrees
 * collects their keys; the steps after that dissolve them (the caller may
 * release the engine lock between steps: a key or stripe that changed
 * meanwhile is caught by the compare-and-swap of each, invariant 2).
 * Returns 1 when there is more (call again), 0 when the last stripe was
 * passed (d->cursor is then 0 again and nothing is held), or a negative
 * error.  s counts keys moved and sectors read and written, stripes
 * dissolved and their sectors freed.  bch_ec_dissolve_exit() frees what a
 * run stopped before its end holds.
 */
#define BCH_EC_PICK_MAX	64
int bch_ec_dissolve_step(struct bch_fs *c, struct bch_ec_dissolve *d, uint64_t budget,
			 struct bch_move_stats *s);
void bch_ec_dissolve_exit(struct bch_ec_dissolve *d);

/* Stripes d would choose, and the data sectors in them (estimated: their blocks' buckets). */
int bch_ec_dissolve_count(struct bch_fs *c, const struct bch_ec_dissolve *d, uint64_t *stripes,
			  uint64_t *sectors);

/*
 * Compaction, for rebalance's step: dissolves sparse stripes (invariant 3)
 * up to budget.  1 when it dissolved one (more may follow), 0 when none is
 * left or what is left cannot be done now, < 0 on error.  After a walk
 * that dissolved nothing it parks until a bucket is emptied somewhere
 * (c->space_gen; a data block emptied always empties one): the daemon's
 * background does not walk the stripes at every wake.  A stripe made
 * sparse only by partial deletes (rule 2 of invariant 3) is then found at
 * the next bucket freed, or by `data rebalance`, which unparks it first
 * (bch_ec_compact_unpark).
 */
int bch_ec_compact_step(struct bch_fs *c, uint64_t budget, struct bch_move_stats *s);
void bch_ec_compact_unpark(struct bch_fs *c);

/*
 * At a read-write close (fs.c, bch_fs_close): the stripes a striped pointer
 * left this session (noted by alloc.c: bch_ec_note_dropped()), or every
 * stripe after more than 64 or after an open that replayed the journal,
 * are looked at, and those nothing points into any more are deleted (their
 * parity buckets freed): no data is read or moved.  So deleting the files
 * of whole stripes offline (`image rm`, a truncate, an overwrite) leaves a
 * filesystem fsck finds clean (fsck's stripe_unused is then damage: a
 * stripe left by a crash that cut the close is found by the next
 * read-write session's close, or repaired by fsck).  Cost: nothing when no
 * striped pointer went; otherwise one walk of the stripes btree and one of
 * the extents (and reflink) btree per BCH_EC_UNUSED_PICK_MAX candidates.
 * *deleted: stripes deleted.  A full filesystem (-BCH_ERR_no_space) is not
 * an error: the stripes stay for compaction or fsck.  0 or a negative error
 * (the close goes on: what is left is for fsck or compaction).
 */
#define BCH_EC_UNUSED_PICK_MAX	1024
int bch_ec_close_unused(struct bch_fs *c, uint64_t *deleted);

#endif /* _BCACHEFS_EC_MOVE_H */
