/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_ALLOC_H
#define _BCACHEFS_ALLOC_H

/*
 * alloc.h - buckets and the allocation of btree node and user data space.
 *
 * Each bucket has an 8-bit generation (bumped when it is reused, so pointers
 * with the old generation are visibly stale), a data type and a count of
 * live sectors.  Btree nodes are allocated from an open bucket per device,
 * filled append-only.  Freed space becomes reusable only once the journal
 * sequence of the free is durable (DESIGN.md invariant 2).
 *
 * The state lives in memory while the filesystem is open.  It is loaded
 * from the alloc btree after a clean close, and rebuilt from the pointers
 * in interior btree nodes (bch_alloc_mark_ptr) and extent keys
 * (bch_alloc_mark_data) otherwise; alloc_btree.c owns the persisted form.
 */

#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;

struct bch_dev_usage {
	uint64_t	nbuckets;
	uint64_t	free_buckets;
	uint64_t	buckets[BCH_DATA_NR];
	uint64_t	sectors[BCH_DATA_NR];
	uint64_t	cached_sectors;		/* live cached pointers' sectors, any bucket */
	uint64_t	cached_by_type[BCH_DATA_NR];	/* the same, by the type of their bucket */
};

int  bch_fs_alloc_init(struct bch_fs *c);	/* sb and journal buckets marked */
void bch_fs_alloc_exit(struct bch_fs *c);

/* Mark a live btree node's sectors (while rebuilding state at open). */
int  bch_alloc_mark_ptr(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned sectors,
			unsigned data_type);

/*
 * Devices that new data_type (btree or user) can go to: present (not a
 * missing member), read-write and allowing the type.  Opened degraded,
 * writes ask for no more copies than that.
 */
unsigned bch_alloc_nr_devs_for(struct bch_fs *c, unsigned data_type);

/*
 * Metadata copies on one device (version 2): true when the filesystem has
 * fewer members that may take btree nodes (read-write, btree data allowed)
 * than metadata_replicas, and no member is missing.  Then a node's copies beyond
 * one per member go to a second bucket of members already used (two at
 * most per device, from a second allocation stream half a device away).
 * A degraded session writes fewer copies instead, as before version 2.
 */
bool bch_alloc_btree_dup(struct bch_fs *c);

/*
 * nr node-sized allocations on distinct devices (and with
 * bch_alloc_btree_dup(), second buckets of the same devices);
 * -BCH_ERR_no_space when full.
 */
int  bch_alloc_btree_node(struct bch_fs *c, unsigned nr, struct bch_extent_ptr *ptrs);
/*
 * Free a node's space at the current journal sequence; a pointer into a
 * bucket that is not a btree bucket, or running past its bucket's end (a
 * damaged one fsck drops: never counted), is skipped.
 */
void bch_free_btree_node(struct bch_fs *c, const struct bch_extent_ptr *ptrs, unsigned nr);

/*
 * Discard the buckets emptied this session that are free now (their free is
 * durable), on members with the discard option; also done before a bucket is
 * opened.  fs.c calls it at close, after the last journal write.  Returns an
 * I/O error of a discard (others are ignored: discard is advisory).
 */
int  bch_alloc_discard_free(struct bch_fs *c);

/*
 * User data.  bch_alloc_data(): sectors in one bucket on each of up to nr
 * distinct devices (target's devices first); *got says how many (at least
 * 1).  The sectors are counted as live at once; the caller hands them to
 * an extent key, or gives them back with bch_alloc_data_free().
 * bch_alloc_data_account(): an extent key's pointer (covering span sectors
 * on disk) gained or lost delta live sectors (a bucket that reaches 0 is
 * free once the change is durable); a pointer bch_alloc_mark_data() would
 * refuse is not counted either way.
 * bch_alloc_mark_data(): at open, count an extent pointer covering span
 * sectors on disk of which sectors are accounted to its key.
 *
 * Space promised to reservations (c->reserved_sectors) is not given to
 * user data: bch_alloc_data() fails with no_space rather than let a write
 * take what a preallocated range was promised, except `released` sectors
 * (promises the same update gives up: a write into a reservation).
 * bch_alloc_user_free(): sectors user data could still take (empty buckets
 * above the btree reserve, and the rest of the open ones), promises
 * included.  bch_alloc_user_check(): 0 if `sectors` more fit beside the
 * promises minus `released`, else no_space (with a message).
 */
int  bch_alloc_data(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target,
		    uint64_t released, struct bch_extent_ptr *ptrs, unsigned *got);
/*
 * Stripe candidate stream (issue 34; ec.h, "in place"): with ec (the
 * file's erasure_code on) and nr >= 2, the first copy (ptrs[0]) is carved
 * from a second open user bucket of its member, that member's candidate
 * bucket, which holds nothing but first copies of erasure-coded data (one
 * copy of each extent in it); the other copies come as bch_alloc_data()'s.
 * The stripe builder turns closed candidate buckets into the data blocks
 * of stripes where they lie.  Nothing of this is on disk: a candidate
 * bucket is a user bucket like any other (the builder recognises one from
 * the extents alone), and the move path never writes to the stream.
 * bch_alloc_ec_close(): every member's candidate bucket stops taking data
 * (data rebalance builds stripes of the partly filled ones).
 * bch_alloc_ec_open(): is p in a candidate bucket still being filled?
 * bch_alloc_bucket_open(): is bucket b of dev open for any stream?
 */
int  bch_alloc_data_ec(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target,
		       uint64_t released, bool ec, struct bch_extent_ptr *ptrs, unsigned *got);
/*
 * bch_alloc_data_fit(): how much of a piece of `sectors` (no more than a
 * bucket) to allocate now: the rest of the open buckets bch_alloc_data()
 * would put nr copies into (not erasure coded), in whole blocks, when that
 * is shorter and not empty; else sectors.  A piece longer than the rest of
 * an open bucket goes to a new one and leaves the rest dead until copygc
 * packs it, which it cannot do for encrypted extents (they are not cut:
 * move.c); a write cut at the end of the open buckets leaves none.  Only a
 * prediction: the allocation itself decides.
 */
unsigned bch_alloc_data_fit(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target);
void bch_alloc_ec_close(struct bch_fs *c);
bool bch_alloc_ec_open(struct bch_fs *c, const struct bch_extent_ptr *p);
bool bch_alloc_bucket_open(struct bch_fs *c, unsigned dev, uint64_t b);
uint64_t bch_alloc_user_free(struct bch_fs *c);
/*
 * The move path's allocation (move.h): like bch_alloc_data, but on none of
 * the devices in exclude (a bit per index: they hold a copy already), only
 * on target's devices when target_only, without the promise check (a move
 * takes no more space than it frees), and, with half_reserve (copygc, which
 * frees buckets), from the first half of the btree reserve as deletes do.
 * Never flushes the journal.  bch_alloc_data_cached() turns sectors just
 * allocated at p into cached ones (p gets the cached flag).
 */
int  bch_alloc_data_move(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target,
			 bool target_only, uint64_t exclude, bool half_reserve,
			 struct bch_extent_ptr *ptrs, unsigned *got);
void bch_alloc_data_cached(struct bch_fs *c, struct bch_extent_ptr *p, unsigned sectors);
/*
 * Sectors of user data that fit now on target's devices (0: every device)
 * outside exclude (a bit per device index), without evicting cached data:
 * empty buckets above the reserve and the rest of the open bucket.
 */
uint64_t bch_alloc_target_free(struct bch_fs *c, uint64_t target, uint64_t exclude);
/*
 * The space of the filesystem, defined once for `fs usage` and statfs (df
 * shows size, used and available); man bcachefs, "fs usage", says the same.
 * Bytes, over the members that are online (a missing member counts nowhere):
 *   size         every bucket of the members (the superblock area included,
 *                as sb buckets)
 *   free         empty buckets;  used = size - free (sb, journal, btree,
 *                user and cached buckets)
 *   reclaimable  part of used that new data takes all the same: buckets of
 *                cached data only (evicted when space is needed) and the
 *                unwritten rest of the open data buckets, on members that
 *                take new data (state rw, data_allowed user)
 *   reserve      free + reclaimable space new data may not take: on each
 *                member that takes new data its metadata reserve (1/32 of
 *                its buckets, at least 4: deletes and metadata updates
 *                always find room), on any other member all of its free
 *   promised     space promised to preallocated ranges (fallocate)
 *   available    file data that still fits, counted once however many
 *                copies: (free - reserve + reclaimable - promised) / replicas
 *                (data_replicas), 0 when negative
 */
struct bch_fs_space {
	uint64_t	size, used, free;
	uint64_t	reclaimable, reserve, promised;
	unsigned	replicas;
	uint64_t	available;
};
void bch_fs_space(struct bch_fs *c, struct bch_fs_space *s);

int  bch_alloc_user_check(struct bch_fs *c, uint64_t sectors, uint64_t released);
/*
 * bch_alloc_data_unwind(): bch_alloc_data_free() of space just allocated
 * that holds nothing anyone may read (no key ever pointed at it): a piece
 * that is the last one carved from its member's open user bucket is given
 * back to that bucket, to be carved again, rather than left dead until
 * copygc.  Pieces given back last-allocated first all return.
 */
void bch_alloc_data_unwind(struct bch_fs *c, const struct bch_extent_ptr *ptrs, unsigned nr,
			   unsigned sectors);
void bch_alloc_data_free(struct bch_fs *c, const struct bch_extent_ptr *ptrs, unsigned nr,
			 unsigned sectors);
void bch_alloc_data_account(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned span,
			    int64_t delta);
int  bch_alloc_mark_data(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned span,
			 unsigned sectors);
/*
 * Cached pointers (bcachefs_format.h): their sectors count as the bucket's
 * cached sectors; a bucket holding only cached data has type cached and
 * may be reused (evicted) when space is needed, which bumps its gen and so
 * makes every cached pointer into it stale.  bch_alloc_ptr_live() of a
 * cached pointer also wants its bucket to hold data.
 * At a rebuild, bch_alloc_mark_data() only notes cached pointers;
 * bch_alloc_settle_cached_gens() (after the stored gens are applied) makes
 * an empty bucket's gen the newest of a cached pointer into it, and says
 * whether any was seen; then bch_alloc_mark_cached() counts each cached
 * pointer whose gen is its bucket's (others are stale).
 */
bool bch_alloc_settle_cached_gens(struct bch_fs *c);
int  bch_alloc_mark_cached(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned span,
			   unsigned sectors);

/*
 * fsck: user data counted again from the extents a repair kept.
 * bch_alloc_recount_begin() zeroes the dirty and cached sectors of every
 * user and cached bucket, keeping types and gens (nothing becomes free to
 * allocate meanwhile); the caller marks every extent again
 * (bch_alloc_mark_data(), then the cached pointers as at open);
 * bch_alloc_recount_end() frees the buckets left empty (reusable once the
 * journal is durable, as any other free).
 */
void bch_alloc_recount_begin(struct bch_fs *c);
void bch_alloc_recount_end(struct bch_fs *c);

/* fsck: space on one given device; the data type of the bucket p is in (-1: outside). */
int  bch_alloc_data_on(struct bch_fs *c, unsigned dev, unsigned sectors, struct bch_extent_ptr *ptr);
int  bch_alloc_bucket_type(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned sectors);

/*
 * Device usage: bch_dev_usage_get() returns running sums kept as buckets
 * change (O(1), called under the engine lock at every statfs);
 * bch_dev_usage_scan() sums every bucket (tests compare the two).
 */
void bch_dev_usage_get(struct bch_fs *c, unsigned dev, struct bch_dev_usage *u);
void bch_dev_usage_scan(struct bch_fs *c, unsigned dev, struct bch_dev_usage *u);

/*
 * Copygc support.  bch_alloc_low(): a device that takes btree nodes has
 * fewer free buckets than its reserve (1/32 of its buckets, at least 4).
 * bch_alloc_copygc_bucket(): is the bucket of p a candidate to empty (btree
 * data, under half live, not the bucket being filled)?
 */
bool bch_alloc_low(struct bch_fs *c);
/*
 * The second half of the btree reserve is for deletes, journal replay and
 * fsck: bch_alloc_metadata_low() says an operation that adds metadata
 * (create, link, xattr, write) must fail with ENOSPC instead, so a full
 * filesystem can always free space and always be opened again.
 */
bool bch_alloc_metadata_low(struct bch_fs *c);
bool bch_alloc_copygc_bucket(struct bch_fs *c, const struct bch_extent_ptr *p);
/*
 * Data copygc and cached-data eviction (copygc.h drives them).
 *
 * bch_alloc_dev_space(): a device's bucket counts, O(1); copygc_room is the
 * sectors the move path may still write there with half_reserve (the rest
 * of the open user bucket and the empty buckets above half the reserve).
 *
 * bch_alloc_copygc_candidates(): up to max user buckets of dev, least live
 * (dirty) sectors first, that are not open (for any stream: a stripe
 * candidate bucket is not copygc's while it fills) and have some dead space; score
 * is their live sectors.  The index is the bucket array itself: one pass
 * with a bounded heap, O(nbuckets log max) time and O(max) memory (no
 * index is kept up to date on every change, which would cost every write).
 *
 * bch_alloc_bucket_read(): the read path read a cached pointer p: its bucket
 * becomes the most recently used (eviction takes the least recently used).
 *
 * bch_alloc_evict(): reuse up to nr buckets of dev that hold only cached
 * data, least recently read first: each gets a new gen (every cached
 * pointer into it is stale from then on), committed to the alloc btree
 * before the bucket can be reused (it becomes free once that commit is
 * durable), so after a crash no stale cached pointer reads as live.  Runs
 * its own transaction: never call it from inside an allocation.  Returns
 * the number evicted, or a negative error.  Gens are 8 bits: a cached
 * pointer left 256 reuses behind would look live again (with a checksum
 * it then reads as a bad copy); nothing drops stale pointers before that
 * yet (bcachefs's gc_gens does).
 */
struct bch_alloc_space {
	bool		user;		/* read-write and takes user data */
	uint64_t	nbuckets;
	unsigned	bucket_sectors;
	uint64_t	nr_empty;	/* free, or free once durable */
	uint64_t	nr_cached;	/* only cached data: evictable */
	uint64_t	reserve;	/* empty buckets kept for btree nodes */
	uint64_t	copygc_room;	/* sectors */
};
struct bch_alloc_candidate {
	uint64_t	bucket;
	uint32_t	sectors;	/* live dirty sectors */
	uint64_t	score;		/* lower is better */
};
void     bch_alloc_dev_space(struct bch_fs *c, unsigned dev, struct bch_alloc_space *s);
unsigned bch_alloc_copygc_candidates(struct bch_fs *c, unsigned dev, unsigned max,
				     struct bch_alloc_candidate *out);
uint8_t  bch_alloc_bucket_gen(struct bch_fs *c, unsigned dev, uint64_t b);
void     bch_alloc_bucket_read(struct bch_fs *c, const struct bch_extent_ptr *p);
int      bch_alloc_evict(struct bch_fs *c, unsigned dev, unsigned nr);

/* Is p's generation current? (a stale pointer is not followed) */
bool bch_alloc_ptr_live(struct bch_fs *c, const struct bch_extent_ptr *p);


/*
 * The persisted form of a bucket (alloc_btree.c): a bucket without live
 * sectors is free, whatever it held.  Superblock and journal buckets are
 * fixed by the superblock and never persisted: get returns false for them.
 * set is for loading at open only (the bucket must still be untouched).
 */
struct bch_bucket_state {
	uint8_t		gen;
	uint8_t		data_type;	/* free, btree, user, or cached (only cached data) */
	uint32_t	sectors;	/* dirty */
	uint32_t	cached_sectors;
};
uint64_t bch_alloc_nbuckets(struct bch_fs *c, unsigned dev);	/* 0: no such device */
unsigned bch_alloc_bucket_sectors(struct bch_fs *c, unsigned dev);
bool bch_alloc_bucket_get(struct bch_fs *c, unsigned dev, uint64_t b, struct bch_bucket_state *s);
void bch_alloc_bucket_set(struct bch_fs *c, unsigned dev, uint64_t b,
			  const struct bch_bucket_state *s);
/* A rebuilt free bucket takes its persisted generation (gens never go back). */
void bch_alloc_bucket_set_gen(struct bch_fs *c, unsigned dev, uint64_t b, uint8_t gen);

/*
 * No bucket of dev from limit on is opened for new data or nodes from now
 * on (a shrink: the buckets past the new end are being emptied); the open
 * buckets there are closed.  Not persisted: a rerun of the shrink sets it
 * again.
 */
void bch_alloc_dev_set_limit(struct bch_fs *c, unsigned dev, uint64_t limit);

/*
 * Forget the buckets of dev from `from` on (a member being dropped, or the
 * tail of one being shrunk): every one must be empty (-EBUSY naming the
 * first that is not); their generations go back to 0, so the close deletes
 * their alloc keys.  Only when no pointer of any kind (stale cached ones
 * included) points there any more.  No bucket there is opened after.
 */
int bch_alloc_dev_forget(struct bch_fs *c, unsigned dev, uint64_t from);

#endif /* _BCACHEFS_ALLOC_H */
