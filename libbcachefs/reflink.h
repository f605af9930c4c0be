/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_REFLINK_H
#define _BCACHEFS_REFLINK_H

/*
 * reflink.h - extents shared between files (on disk: the reflink btree,
 * reflink_v and reflink_p keys, bcachefs_format.h "reflink").
 *
 * This module owns the reflink btree: remapping a range of one file into
 * another (bch_reflink_remap), the reference counts of indirect extents
 * as reflink_p keys come and go, turning a reflink_p into the extents a
 * read needs, and marking the indirect extents' pointers at open.
 *
 * The first remap of a range makes its extents indirect: each extent's
 * encoding and pointers move, unchanged (same key version: an encrypted
 * extent keeps its nonce), into a new reflink_v key at the end of the
 * reflink btree's index space, and the file keeps a reflink_p in its
 * place: one for each run of extents back to back (up to 16 indirect
 * extents at consecutive indices), so a file of 8192 extents shares as
 * 512 keys.  The destination then gets reflink_p keys of its own to the
 * same indirect extents, one per source reflink_p.  Later remaps of
 * indirect ranges only add reflink_p.
 *
 * Invariants
 *   (1) A reflink_v's refcount is the number of reflink_p keys, in any
 *       snapshot, whose range overlaps its range.  Every transaction that
 *       adds, trims, splits or drops a reflink_p changes the counts in the
 *       same transaction (extents.c notes the change in its struct
 *       bch_extent_update; bch_reflink_refs_trans puts it in the
 *       transaction), so a crash never leaves a count off.
 *   (2) A reflink_v whose count reaches 0 is deleted in that transaction
 *       and its pointers' sectors go from their buckets after the commit,
 *       like any dropped extent's.
 *   (3) A reflink_v's pointers are counted in their buckets once, however
 *       many files share it; reflink_p keys count nothing in buckets.
 *   (4) Indirect extents never change their data in place: a write to a
 *       file replaces its reflink_p (dropping references) with new
 *       extents, so writing one sharer never changes another.
 *   (5) Each remap step (at most remap_keys() source keys) is two
 *       transactions, each whole or absent after a crash: the conversion
 *       (the source's extents become indirect: new reflink_v keys, the
 *       source's reflink_p keys, their counts) and the sharing (the
 *       destination's old keys go, its reflink_p keys and counts come,
 *       its inode's sectors, size and times).  A crash between leaves the
 *       source converted, its content unchanged, and the destination as
 *       it was.  (A destination range holding many keys is emptied in
 *       transactions of their own first.)
 *
 * Locking: the caller's engine lock, like every other engine call.
 */

#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"
#include "btree.h"

struct bch_fs;
struct btree_trans;
struct bch_extent_update;

/*
 * Share sectors [src_start, src_start + sectors) of src_inum as
 * [dst_start, ...) of dst_inum (the block size divides all three).  The
 * current view (snapshot.h) is used for both unless src_view / dst_view
 * name handles to enter (NULL: the current view).  The destination's size
 * grows to at least dst_size_min bytes, its mtime and ctime are set.
 * *done gets the sectors shared so far (also on error: each step is
 * committed on its own).  A source range holding no data leaves a hole in
 * the destination; reservations are not shared (they read as zeros,
 * as the hole does).
 */
int bch_reflink_remap(struct bch_fs *c, uint64_t src_handle, uint64_t src_start,
		      uint64_t dst_handle, uint64_t dst_start, uint64_t sectors,
		      uint64_t dst_size_min, uint64_t *done);

/*
 * What dropping or trimming reflink_p key p weighs in a transaction, in
 * keys: itself and 3 for each indirect extent its range overlaps (whose
 * count changes with it), at least 4, at most BCH_REFLINK_P_WEIGHT_MAX
 * (a damaged key overlapping more is stopped there by the commit's size
 * check, with an error).  One lookup in the reflink btree.
 */
#define BCH_REFLINK_P_WEIGHT_MAX	256
unsigned bch_reflink_p_weight(struct bch_fs *c, const struct bch_bkey *p);

/*
 * Every copy of user data once: the extents btree's extent keys, then the
 * reflink btree's indirect extents in their extent form (bch_reflink_v_to_extent),
 * so that a walk counting or checking pointers sees shared data once.  The
 * key returned is valid until the next call; *err is set (0 at a normal end).
 */
struct bch_data_iter {
	struct bch_fs		*c;
	struct btree_iter	it;
	unsigned		id;		/* BCH_BTREE_ID_NR: not started or done */
	struct bch_bkey		*x;		/* the last extent form made */
};
void bch_data_iter_init(struct bch_data_iter *d, struct bch_fs *c);
const struct bch_bkey *bch_data_iter_next(struct bch_data_iter *d, int *err);
void bch_data_iter_exit(struct bch_data_iter *d);

/* A malloc'd extent key with the encoding, pointers and position of reflink_v v (NULL: no memory). */
struct bch_bkey *bch_reflink_v_to_extent(const struct bch_bkey *v);
/* Pointers of a reflink_v (*nr of them). */
const struct bch_extent_ptr *bch_reflink_v_ptrs(const struct bch_bkey *v, unsigned *nr);

/*
 * The indirect extents behind sectors [from, to) of reflink_p p (inside
 * p's range), as malloc'd extent keys placed in p's file (inode and
 * sectors), in order; *keys and each key are the caller's to free.  A
 * part no indirect extent covers is -EIO (damage: fsck punches it).
 */
int bch_reflink_resolve(struct bch_fs *c, const struct bch_bkey *p, uint64_t from, uint64_t to,
			struct bch_bkey ***keys, unsigned *nr);

/* extents.c: reflink_p k was added (sign 1) or dropped (-1) in u's transaction. */
void bch_reflink_ref_note(struct bch_extent_update *u, const struct bch_bkey *k, int sign);
/* Put the reference changes noted in u into t (the reflink_v keys), before t's commit. */
int bch_reflink_refs_trans(struct bch_fs *c, struct btree_trans *t, struct bch_extent_update *u);
/* Forget the notes and the transaction's reflink_v keys (after a commit or an abort). */
void bch_reflink_refs_reset(struct bch_extent_update *u);

/*
 * At open (extents.c: bch_extents_mark_all, bch_extents_mark_cached): the
 * pointers of every reflink_v, dirty ones (cached false) or cached ones.
 */
int bch_reflink_mark(struct bch_fs *c, bool cached);

/* The reflink btree exists (the feature bit is set): made with the first shared extent. */
int bch_reflink_init(struct bch_fs *c);

/* For fs usage: sectors of indirect extents and the file sectors reflink_p keys cover. */
struct bch_reflink_usage {
	uint64_t	indirect_keys;
	uint64_t	indirect_sectors;	/* file sectors the reflink_v keys hold */
	uint64_t	indirect_disk_sectors;	/* their sectors on disk (all copies) */
	uint64_t	refs;			/* sum of refcounts */
	uint64_t	shared_sectors;		/* file sectors of reflink_p keys */
};
int bch_reflink_usage(struct bch_fs *c, struct bch_reflink_usage *u);

#endif /* _BCACHEFS_REFLINK_H */
