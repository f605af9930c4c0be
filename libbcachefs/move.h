/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_MOVE_H
#define _BCACHEFS_MOVE_H

/*
 * move.h - the move path: rewrite extents elsewhere without ever making
 * data worse.  Rebalance, promote, copygc, evacuate, rereplicate and the
 * stripes leaving a member or compacted (ec_move.h) all move data through it.
 *
 * For each extent key handed to bch_mover_add(): a good copy is read (every
 * checksum verified; a bad copy is skipped for the next and counted), the
 * data is re-encoded when the op asks for it or when the key covers only
 * part of its encoded extent (the rewrite then frees the rest), written as
 * new copies where the op says, and the replacement of the key is queued.
 * bch_mover_flush() commits the queued replacements, in as few
 * transactions as fit, each one only if the key in the extents btree is
 * still byte for byte the one that was read (compare-and-swap).
 *
 * Invariants
 *   (1) New copies are written before the key that points at them is
 *       committed (the journal flushes devices before it writes an entry).
 *   (2) A key that changed since it was read (a foreground write, truncate,
 *       another move) is left alone and its new copies are freed: raced.
 *   (3) No good copy: the extent is left as it is, counted (no_good_copy)
 *       and named in stats->last_problem.  A striped extent (ec.h) whose
 *       block cannot be read as it is is rebuilt from its stripe first,
 *       verified against its checksum (keys_rebuilt).
 *   (4) The new key has at least as many dirty copies as the old one: a
 *       dirty copy is dropped only in the same commit that adds its
 *       replacement.  Stale cached pointers are dropped on the way.
 *   (5) Memory is bounded: one extent's buffers, and at most
 *       BCH_MOVE_BATCH_KEYS queued keys, whatever the data size.
 *   (6) What snapshots share stays shared: the keys of one inode, in any
 *       snapshot, that point at the same encoded extent with the same
 *       copies (the pieces an overwrite in a child leaves) move as one
 *       group, in one transaction, onto one set of new copies; the data is
 *       read and written once (move.c, struct move_group).  A member that
 *       raced stays on the old copies, which stay valid.
 *
 * The caller holds whatever serialises the engine (fusemount's lock) for
 * each call; between calls it may release it (a race is then caught by
 * invariant 2).
 */

#include <stdbool.h>
#include <stdint.h>

#include "bkey.h"

struct bch_fs;

#define BCH_MOVE_BATCH_KEYS	64

struct bch_move_stats {
	uint64_t	keys_seen;		/* handed to bch_mover_add */
	uint64_t	keys_moved;		/* replaced */
	uint64_t	keys_raced;		/* changed meanwhile: left alone */
	uint64_t	keys_no_good_copy;	/* left alone: no readable copy */
	uint64_t	keys_no_space;		/* left alone: no space where the op allows */
	uint64_t	sectors_moved;		/* file sectors of the replaced keys */
	uint64_t	sectors_read;		/* device sectors read */
	uint64_t	sectors_written;	/* device sectors written */
	uint64_t	bad_copies;		/* copies skipped for a bad checksum or read error */
	uint64_t	keys_rebuilt;		/* read through their stripe (no copy readable as is) */
	uint64_t	stripes_dissolved;	/* stripes emptied and deleted (ec_move.h) */
	uint64_t	stripe_sectors_freed;	/* device sectors of their blocks given back */
	char		last_problem[256];	/* the last extent left alone, and why */
};

struct bch_move_op {
	uint32_t	rewrite;	/* pointer indices (bit per index) whose copies are
					 * replaced: dropped in the commit that adds the new */
	unsigned	nr_new;		/* new copies to write (>= the dirty ones rewritten) */
	uint64_t	target;		/* where the new copies go (0: any device) */
	bool		target_only;	/* no_space rather than fall back outside target */
	bool		cached;		/* the new copies are cached pointers (promote) */
	bool		recompress;	/* re-encode with compression (below) */
	uint64_t	compression;	/* compression option value, when recompress */
	uint64_t	exclude_devs;	/* devices (bit per index) new copies must avoid */
	uint32_t	demote;		/* of the rewritten dirty pointers, those kept as
					 * cached copies instead of dropped (rebalance:
					 * data leaving promote_target stays cached there) */
	bool		drop_only;	/* no new copies (nr_new 0): the rewrite pointers
					 * are just dropped -- cached ones, or dirty ones
					 * when degrade allows and a dirty copy stays */
	bool		degrade;	/* drop_only may drop dirty copies (device
					 * remove --force: the member is lost) */
	bool		unstripe;	/* a striped pointer (ec.h) may be in rewrite: the
					 * extent leaves its stripe (ec_move.c, which
					 * deletes the stripe once empty).  Without it
					 * such an op is refused (-EINVAL): the striped
					 * copy carries the stripe's redundancy, which
					 * a plain rewrite would lose */
	bool		same_dev;	/* copygc: each rewritten dirty copy gets its new
					 * copy on its own device (a new bucket there),
					 * from the first half of the btree reserve
					 * (copygc frees buckets); nr_new must equal the
					 * dirty copies rewritten, target and exclude_devs
					 * are ignored; rewritten cached copies are dropped.
					 * A plain key, its one dirty copy rewritten, that
					 * does not fit the rest of the open bucket is cut
					 * there: two keys, each checksummed anew, replace
					 * it in one transaction (copygc.h invariant 6) */
};

struct bch_mover;

int  bch_mover_init(struct bch_fs *c, struct bch_move_stats *s, struct bch_mover **m);
/*
 * Read, re-encode and write k's data per op; queue the replacement (a full
 * queue is flushed first).  0 when queued; otherwise the extent was left as
 * it is and counted: -BCH_ERR_no_space (nowhere the op allows), -EIO (no
 * good copy), -EINVAL (not an extent key, or an op it cannot satisfy).
 */
int  bch_mover_add(struct bch_mover *m, const struct bch_bkey *k, const struct bch_move_op *op);
/*
 * The same for v, a reflink_v of the reflink btree (reflink.h): its data is
 * moved once for every file sharing it, and the key replaced (its refcount
 * as it is at the commit) only if its encoding and pointers are unchanged.
 */
int  bch_mover_add_indirect(struct bch_mover *m, const struct bch_bkey *v, const struct bch_move_op *op);
/* Commit the queued replacements (compare-and-swap each). */
int  bch_mover_flush(struct bch_mover *m);
/*
 * The same, with one more update (extra, for btree_id: a key, or a deleted
 * key at its position) in the transaction of the last queued replacement,
 * added only when no queued replacement raced: *done says whether it was
 * committed.  With nothing queued, extra is committed alone.  ec_move.c
 * deletes a stripe this way in the commit that takes its last extents out
 * of it, so no stripe is ever left that nothing points into.
 */
int  bch_mover_flush_extra(struct bch_mover *m, unsigned btree_id, const struct bch_bkey *extra,
			   bool *done);
/* Flush, then free.  Returns the flush's error. */
int  bch_mover_exit(struct bch_mover *m);

/* The pointers of k whose device is not in target (cached, stale and striped ones excluded). */
uint32_t bch_move_ptrs_off_target(struct bch_fs *c, const struct bch_bkey *k, uint64_t target);

#endif /* _BCACHEFS_MOVE_H */
