/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_EXTENTS_H
#define _BCACHEFS_EXTENTS_H

/*
 * extents.h - extent keys of the extents btree: overlap handling and space
 * accounting.
 *
 * An extent key at (inode, end, 0) of size sectors covers [end - size, end)
 * of the file; keys of one inode never overlap.  Writing, punching or
 * truncating a range first removes what the range covers (deleting keys
 * inside it, trimming keys that stick out at either side, splitting one
 * that spans it), in the same transaction as whatever replaces it.
 *
 * Space: each pointer of an extent key accounts its key's share of the
 * encoded extent on disk (bch_extent_disk_sectors) to its bucket.  Changes
 * are gathered in a struct bch_extent_update while the transaction is
 * built and applied to the buckets only after it commits
 * (bch_extent_update_apply), so a failed commit changes no bucket.
 * inode->sectors counts the file sectors its extents and reservations cover.
 *
 * A reflink_p key holds no pointers: it counts in inode->sectors, and its
 * references to indirect extents (reflink.h) are changed as it is added,
 * trimmed or dropped (in the same transaction: bch_extents_punch and
 * bch_extent_insert put them there; a caller that only drops keys with
 * bch_extent_account_drop calls bch_reflink_refs_trans before its commit).
 *
 * Reservations (fallocate) hold no pointers but promise space: each counts
 * size x nr_replicas disk sectors in c->reserved_sectors (counted at open,
 * changed with the other deltas after a commit), which user data allocation
 * may not take (alloc.c) except as much as the same update released.
 */

#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"
#include "bkey.h"

struct bch_fs;
struct btree_trans;

struct bch_extent_acct {
	struct bch_extent_ptr	ptr;
	uint32_t		span;		/* sectors it covers on disk (crc.compressed_sectors) */
	int64_t			delta;
};

/* A change of the reference counts of the indirect extents in [start, end) (reflink.h). */
struct bch_reflink_ref {
	uint64_t		start, end;	/* reflink btree sectors */
	int			delta;
};

struct bch_extent_update {
	struct bch_extent_acct	*acct;
	unsigned		nr, cap;
	struct bch_extent_ptr	*fresh;		/* space of new data (freed on abort) */
	unsigned		*fresh_sectors;
	unsigned		nr_fresh, cap_fresh;
	int64_t			i_sectors_delta;	/* change of the inode's sectors */
	int64_t			reserved_delta;		/* change of c->reserved_sectors */
	unsigned		keys;			/* updates added to the transaction */
	/* reflink_p keys added and dropped: their references, until put in the transaction */
	struct bch_reflink_ref	*refs;
	unsigned		nr_refs, cap_refs;
	/* reflink_v keys as this transaction leaves them (reflink.c) */
	struct bch_bkey		**rv;
	unsigned		nr_rv, cap_rv;
};

static inline uint64_t bch_extent_start(const struct bch_bkey *k)
{
	return k->p.offset - k->size;
}

/* Copies a reservation key promises (at least 1). */
static inline unsigned bch_reservation_replicas(const struct bch_bkey *k)
{
	const struct bch_reservation *rv = bkey_val(k);

	return rv->nr_replicas ? rv->nr_replicas : 1;
}

/* Sectors on disk one pointer of k accounts (its share of the encoded extent). */
unsigned bch_extent_disk_sectors(const struct bch_bkey *k);

/* Trim k (extent or reservation) to start at start / end at end (inside it). */
void bch_extent_cut_front(struct bch_bkey *k, uint64_t start);
void bch_extent_cut_back(struct bch_bkey *k, uint64_t end);

/*
 * Remove [start, end) of inum's extents in t, at most max_keys existing keys
 * (0: no limit; a reflink_p counts bch_reflink_p_weight(): its indirect
 * extents' counts change in the same transaction).  *done_to is where the
 * removal got to (end when complete).
 */
int bch_extents_punch(struct bch_fs *c, struct btree_trans *t, uint64_t inum, uint64_t start,
		      uint64_t end, unsigned max_keys, struct bch_extent_update *u,
		      uint64_t *done_to);

/*
 * Replace extent old by grown, the same extent with sectors more at its
 * end whose space (fresh[0..nr), sectors each, one per pointer of old)
 * was just allocated and counted: old's sectors stay counted, the fresh
 * ones are given back if the transaction is abandoned (io.c's appends).
 */
int bch_extent_grow(struct btree_trans *t, const struct bch_bkey *old, const struct bch_bkey *grown,
		    const struct bch_extent_ptr *fresh, unsigned nr, unsigned sectors,
		    struct bch_extent_update *u);

/*
 * Add k (extent or reservation, over a range already punched in t).  Its
 * space was counted when it was allocated unless account is true.
 */
int bch_extent_insert(struct btree_trans *t, const struct bch_bkey *k, bool account,
		      struct bch_extent_update *u);

/* A key the transaction deletes outright (snapshot gc): its space goes. */
void bch_extent_account_drop(struct bch_extent_update *u, const struct bch_bkey *k);

/*
 * After a successful commit: apply the bucket changes; after a failed one:
 * give back the space of the new data.  Both reset u.
 */
/* Account k's pointers (an extent's or a reflink_v's) with sign (reflink.c). */
void bch_extent_account_ptrs(struct bch_extent_update *u, const struct bch_bkey *k, int sign);

void bch_extent_update_apply(struct bch_fs *c, struct bch_extent_update *u);
void bch_extent_update_abort(struct bch_fs *c, struct bch_extent_update *u);
void bch_extent_update_exit(struct bch_extent_update *u);

/*
 * fallocate's collapse and insert: split the extent spanning sector at (so
 * a range boundary falls between keys), and move the keys starting at or
 * after from by `by` sectors, at most max_keys per call (the pointers do not
 * change, so neither does space accounting -- but for an ancestor's key,
 * which stays, hidden here: its moved copy is one more reference, added to
 * u).  *next is where to go on from, UINT64_MAX when done.
 */
int bch_extents_split(struct bch_fs *c, struct btree_trans *t, uint64_t inum, uint64_t at,
		      struct bch_extent_update *u);
int bch_extents_shift(struct bch_fs *c, struct btree_trans *t, uint64_t inum, uint64_t from,
		      int64_t by, unsigned max_keys, uint64_t *next, struct bch_extent_update *u);

/*
 * At open: count every extent pointer in the bucket state, and the
 * reservations' promises in c->reserved_sectors.  count_reserved counts only
 * the promises (a clean open whose record does not carry them).
 */
int bch_extents_mark_all(struct bch_fs *c);
/* The second pass for cached pointers (alloc.h: bch_alloc_mark_cached). */
int bch_extents_mark_cached(struct bch_fs *c);
int bch_extents_count_reserved(struct bch_fs *c);

#endif /* _BCACHEFS_EXTENTS_H */
