/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_SNAPSHOT_H
#define _BCACHEFS_SNAPSHOT_H

/*
 * snapshot.h - the snapshot tree and the subvolumes (on disk: the snapshots
 * btree, bcachefs_format.h "Snapshots and subvolumes"), views, and reading
 * the file btrees as one snapshot sees them.
 *
 * The table.  The snapshot and subvolume keys are read into memory at the
 * first use and read again after every change made here (they are few).
 * A filesystem without snapshot keys has one snapshot, 0, and one
 * subvolume, 0, whose root is BCH_ROOT_INO.
 *
 * Views.  A view says which subvolume (and so which snapshot) the file
 * btrees are read and written in.  fs_ops' entry points enter one from the
 * file handle they are given (fs_ops.h: subvolume in the top 16 bits) and
 * leave it on return; it is kept per thread, so the library's own callers
 * (fsck, rebalance) can enter one for any snapshot.  With no view entered,
 * reads see subvolume 0 and updates are written as given (raw).
 *
 * Invariants
 *   (1) A child's ID is greater than its parent's, so of the keys at one
 *       (inode, offset) a snapshot sees the one with the greatest ID among
 *       its ancestors-or-self (bch_vlookup and the others below).
 *   (2) Only leaves are written: a view's snapshot has no children.
 *       Updates in a view (bch_trans_update on a file btree) are put in the
 *       view's snapshot; a delete becomes a whiteout when an ancestor holds
 *       a key the delete would otherwise uncover.  A read-only subvolume's
 *       view refuses them with -EROFS.
 *   (3) The in-memory table equals the btree after every commit made here;
 *       it (and each snapshot's ancestor list, made at the first question
 *       and kept with it) changes only under the caller's engine lock.
 *   (4) What the table remembers to spare searches (the subvolume the last
 *       view entered and its snapshot's parent; snapshot_touch keys found
 *       in the btree) is forgotten when the table is read again.  A touch
 *       key leaves the btree only after its snapshot is deleted, a change
 *       that reads the table again, so a remembered key is still there.
 *   (5) When the table is read, inum_fresh is one past the highest inode
 *       number in the inodes btree (any snapshot).  Until it is read again
 *       no snapshot with children holds a key of an inode numbered from
 *       there up (they were all frozen when it was read; new inodes take
 *       numbers above every existing one), so a delete of such a key in a
 *       leaf needs no whiteout and asks the parent nothing, and a lookup
 *       of it in a view sees only the view's own snapshot.  This needs the
 *       table read after journal replay (it is, at its first use: replay
 *       asks it nothing), since a replayed key may be a frozen snapshot's.
 */

#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"
#include "btree.h"

struct bch_fs;

/* ------------------------------------------------------------ the table */

struct bch_snap_info {
	uint32_t		id, parent, flags, subvol, depth;
	uint32_t		children[2];
	int64_t			created;
};

struct bch_subvol_info {
	uint32_t		id;
	struct bch_subvolume	v;
};

/* Read the table (again). */
int  bch_snapshots_load(struct bch_fs *c);
void bch_snapshots_exit(struct bch_fs *c);
/* Are there snapshot keys (a subvolume or snapshot was ever made)? */
bool bch_fs_has_snapshots(struct bch_fs *c);
const struct bch_snap_info *bch_snap_get(struct bch_fs *c, uint32_t id);
/* Subvolume id (subvolume 0 answers even without a key); NULL: none. */
const struct bch_subvol_info *bch_subvol_get(struct bch_fs *c, uint32_t id);
/* Every subvolume, in ID order (*nr of them; subvolume 0 first). */
const struct bch_subvol_info *bch_subvols(struct bch_fs *c, unsigned *nr);
const struct bch_snap_info *bch_snaps(struct bch_fs *c, unsigned *nr);
/* Is anc the snapshot s or one of its ancestors? */
bool bch_snap_is_ancestor(struct bch_fs *c, uint32_t anc, uint32_t s);

/* ------------------------------------------------------------ views */

struct bch_view {
	struct bch_fs		*c;
	uint32_t		subvol;		/* BCH_SUBVOL_NONE: a snapshot without one */
	uint32_t		snap;
	uint32_t		parent;		/* snap's (BCH_SNAPSHOT_NONE: none), as
						 * entered: a leaf's parent never changes */
	bool			ro;
	bool			raw;		/* updates are written where their keys say */
	struct bch_view		*prev;
};

/* File handles (fs_ops.h): the subvolume in the top bits, the inode number below. */
#define BCH_HANDLE_INUM_BITS	48
#define BCH_HANDLE_INUM_MASK	((1ULL << BCH_HANDLE_INUM_BITS) - 1)
static inline uint64_t bch_handle(uint32_t subvol, uint64_t inum)
{
	return ((uint64_t)subvol << BCH_HANDLE_INUM_BITS) | inum;
}
static inline uint32_t bch_handle_subvol(uint64_t h)
{
	return (uint32_t)(h >> BCH_HANDLE_INUM_BITS);
}

/*
 * Enter the view of handle *inum and turn it into the inode number.  A
 * handle of subvolume 0 inside a view of the same filesystem stays in that
 * view (the library's inner calls pass inode numbers).  -ESTALE: no such
 * subvolume.
 */
int  bch_view_enter(struct bch_fs *c, struct bch_view *v, uint64_t *inum);
/* Enter a view of any snapshot (fsck, rebalance, snapshot creation). */
void bch_view_enter_snap(struct bch_fs *c, struct bch_view *v, uint32_t subvol, uint32_t snap, bool ro);
/*
 * Enter a raw view: updates keep the snapshot their keys carry (the move
 * path and scrub replace keys where they lie, whatever view asked for the
 * work); reads see subvolume 0.
 */
void bch_view_enter_raw(struct bch_fs *c, struct bch_view *v);
void bch_view_exit(struct bch_view *v);
/* The current view of c (NULL: none entered). */
const struct bch_view *bch_view_cur(struct bch_fs *c);
/* The snapshot reads of c see now. */
uint32_t bch_view_snap(struct bch_fs *c);
/* The handle of inode inum in the current view. */
uint64_t bch_view_handle(struct bch_fs *c, uint64_t inum);

/* ------------------------------------------------------------ reading */

/*
 * The same calls as btree.h's, for the file btrees, seeing what the
 * current view's snapshot sees: keys of other snapshots and whiteouts are
 * skipped; the key returned keeps the snapshot it lies in.  Positions are
 * compared on (inode, offset); their snapshot fields are ignored.
 */
int bch_vlookup(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bkey **ret);
/* bch_vlookup() into the caller's buffer (*ret points into buf). */
int bch_vlookup_buf(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bkey_buf *buf,
		    const struct bch_bkey **ret);
int bch_vpeek(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos end,
	      struct bch_bkey **ret);
int bch_vpeek_prev(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos start,
		   struct bch_bkey **ret);

struct bch_viter {
	struct btree_iter	raw;
	struct bch_fs		*c;
	uint32_t		snap;
	bool			filter;		/* snapshots exist: pick per position */
	bool			ahead_valid, done;
	struct bch_bkey		*ahead;		/* first raw key of the next position */
	struct bch_bkey		*out;		/* what next() returned last */
	struct bch_bkey		*cand;		/* the key being looked at */
};
void bch_viter_init(struct bch_viter *it, struct bch_fs *c, unsigned id, struct bch_bpos start,
		    struct bch_bpos end);
const struct bch_bkey *bch_viter_next(struct bch_viter *it, int *err);
void bch_viter_exit(struct bch_viter *it);

/*
 * bch_bkey_validate() and what only the filesystem can say: a key of a file
 * btree in a snapshot other than 0 needs the snapshots feature bit.
 */
int bch_bkey_validate_fs(struct bch_fs *c, const struct bch_bkey *k, unsigned btree_id, unsigned level,
			 char *err, size_t errlen);

/*
 * The inode inum as the current view sees it, else (a file only some
 * snapshot holds) its newest key in any snapshot: for background work
 * (rebalance) that follows extents of every snapshot and wants the file's
 * options, which snapshots share.
 */
struct bch_inode;
int bch_inode_get_any_snapshot(struct bch_fs *c, uint64_t inum, struct bch_inode *inode);

/* ------------------------------------------------------------ updates */

/* 0 when the subvolume of handle takes changes, -EROFS when it is read-only (counted below). */
int bch_subvol_writable(struct bch_fs *c, uint64_t handle);
/*
 * Was a change refused since the last call because its subvolume is
 * read-only (not because the filesystem was opened read-only)?  Clears it.
 */
bool bch_snapshot_ro_refused(struct bch_fs *c);

/* bch_trans_update's part for the file btrees (invariant (2)); k is the transaction's copy. */
int bch_snap_trans_fixup(struct bch_fs *c, unsigned id, struct bch_bkey *k);

/*
 * The snapshot_touch key (bcachefs_format.h) that update k of btree id in
 * the current view records, if any: in a snapshot with a parent, and only
 * when that key is not in the btree already (it stays until its snapshot
 * is deleted, so writing it again would change nothing).
 */
bool bch_snap_touch_pos(struct bch_fs *c, unsigned id, const struct bch_bkey *k, struct bch_bpos *pos);

/* ------------------------------------------------------------ changes */

/*
 * Make the filesystem ready for subvolumes: version 3 or newer (else
 * -EOPNOTSUPP naming the version), the keys of snapshot 0 and subvolume 0,
 * the feature bit.  Nothing happens when they exist.
 */
int bch_snapshots_enable(struct bch_fs *c);
/* Two new snapshot IDs / a new subvolume ID (not yet written). */
int bch_snap_alloc_ids(struct bch_fs *c, uint32_t *ids, unsigned nr);
int bch_subvol_alloc_id(struct bch_fs *c, uint32_t *id);
/* Keys for the snapshots btree (malloc'd). */
struct bch_bkey *bch_snap_key(uint32_t id, const struct bch_snap_info *s);
struct bch_bkey *bch_subvol_key(uint32_t id, const struct bch_subvolume *v);

/*
 * Delete what no live snapshot sees: keys of deleted snapshots and keys
 * hidden from every live leaf, then the snapshots with no live leaf below.
 * Commits in batches (resumable: the deleted flags are on disk).  progress
 * (may be NULL) gets the keys looked at so far.  *freed: keys deleted.
 */
int bch_snapshot_gc(struct bch_fs *c, void (*progress)(void *priv, uint64_t seen), void *priv,
		    uint64_t *freed);
/*
 * The same in steps, for a daemon that releases its lock between them:
 * each step looks at up to budget positions (and commits what it deleted);
 * *done at the end of the pass.  A cursor starts zeroed; a change of the
 * table between steps (a subvolume made or deleted) starts the pass again.
 */
struct bch_snapshot_gc_cursor {
	bool		started;
	uint64_t	gen;		/* the table's when the pass began */
	unsigned	btree;		/* index into the file btrees */
	struct bch_bpos	pos;
	uint64_t	seen, freed;
};
int bch_snapshot_gc_step(struct bch_fs *c, struct bch_snapshot_gc_cursor *cur, uint64_t budget,
			 bool *done, void (*progress)(void *priv, uint64_t seen), void *priv);
/* Snapshots seen by a subvolume (leaves not deleted); 0 without snapshot keys. */
unsigned bch_snapshot_live_leaves(struct bch_fs *c);
/* Is there work for bch_snapshot_gc (a snapshot marked deleted)? */
bool bch_snapshot_gc_pending(struct bch_fs *c);

/*
 * Sectors held only by each snapshot's own keys (extents in it, per disk
 * copy): *out[i] for snapshot table entry i of bch_snaps().  One pass over
 * the extents.
 */
int bch_snapshot_usage(struct bch_fs *c, uint64_t **out);

#endif /* _BCACHEFS_SNAPSHOT_H */
