/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_REPLICAS_H
#define _BCACHEFS_REPLICAS_H

/*
 * replicas.h - the superblock's replicas table, kept true: which sets of
 * members hold which data type (bcachefs_format.h, struct
 * bch_replicas_entry).
 *
 * An entry (data type, set of members) promises nothing about amounts; it
 * says "some data of this type may have its only copies on exactly these
 * members".  The open uses it to decide what a missing member would cost
 * (bch_replicas_degraded()); fsck checks it against the keys.
 *
 * Which entry a key needs (bch_replicas_key_devs()):
 *   extent      BCH_DATA_user, the members of its dirty pointers (cached
 *               pointers need none: they are not copies that count)
 *   btree_ptr   BCH_DATA_btree, the members of its pointers (interior keys
 *               and the btree roots)
 *   journal     BCH_DATA_journal, one entry per member with journal buckets
 *               (written by format; kept by gc)
 * Pointers to a slot that is not a member name no entry (fsck drops them).
 *
 * Invariants
 *   (1) A key on disk never names a member set the table lacks: the entry is
 *       added and the superblock written (bch_write_super) before the
 *       journal entry carrying the key, or the node holding the pointer, can
 *       be written (the commit path and node allocation call
 *       bch_replicas_mark_*()).  After a crash the table is a superset of
 *       what the keys use.
 *   (2) Entries are sorted (data type, then members as a bit set) and
 *       distinct, in memory and on disk; members within an entry ascend.
 *       A set is a set: two pointers on one member (metadata copies on a
 *       single device) name that member once.
 *   (3) Entries are only removed by bch_replicas_gc() (and fsck), which
 *       recomputes the set from every key first.
 *   (4) Exact at every gc point: an entry outlives the last key using it
 *       only until the next one.  The gc points are the end of each data
 *       job (rereplicate, evacuate: data_job.c), every close of a
 *       read-write session that changed an extent or a btree node (so
 *       after device remove, copygc, rebalance, a degraded session, and
 *       the first read-write open after a crash) and fsck pass 12.  A gc
 *       flushes the journal before it walks, so every key state a crash
 *       can replay to is one the new table covers; it retries when the
 *       btrees changed during the walk (a node written back and moved).
 *       We chose a recount at safe points over reference counts: counts
 *       would have to be kept by every path that drops a key and persisted
 *       crash-safely beside the journal; a recount needs neither and costs
 *       a read of the interior nodes and the extents leaves at those points.
 *       One member is the exception that needs no walk while it holds user
 *       data (the bucket counts say so): its only sets are {it}, so a table
 *       of exactly btree, user and journal on it is what a walk would find;
 *       a small change to a large one-device image closes without reading
 *       every key (replicas.c, single_member_current).
 *
 * Degraded opens (fs.c) judge by the entries and the members present: an
 * entry of file data or metadata with no present member is what would be
 * lost.  Entries exact, that is "every key has a copy present".  When the
 * table says something would be lost and -o degraded was given, the open
 * checks the keys themselves after replay (bch_replicas_degraded_keys()),
 * so an entry left by a crash before a gc point costs a walk, not a refusal.
 *
 * Cost: a mark is a binary search in a small array; a superblock write
 * happens only the first time a member set is used, and at a gc point only
 * when an entry goes.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;
struct bch_bkey;

/* One entry in memory: members as a bit set (member indices are < 64). */
struct bch_replicas_cpu_entry {
	uint64_t	devs;		/* bit i: member i holds a copy */
	uint8_t		data_type;	/* enum bch_data_type */
	uint8_t		nr_required;	/* copies needed to read (1) */
};

struct bch_replicas_cpu {
	struct bch_replicas_cpu_entry	*e;	/* sorted (invariant 2) */
	size_t				nr, cap;
	bool				maybe_stale;	/* c's table: keys may have let an entry go since the last gc */
	uint64_t			marks;		/* c's table: mark calls (commits, node allocations) */
};

/* The table of c->sb into c->replicas (at open). */
int bch_replicas_load(struct bch_fs *c);
void bch_replicas_exit(struct bch_fs *c);

/* Sorted-set helpers on a table of one's own (gc, fsck, tests). */
bool bch_replicas_cpu_has(const struct bch_replicas_cpu *t, unsigned data_type, uint64_t devs);
/* Adds the entry if absent: 1 added, 0 present, -ENOMEM. */
int bch_replicas_cpu_add(struct bch_replicas_cpu *t, unsigned data_type, uint64_t devs);
void bch_replicas_cpu_free(struct bch_replicas_cpu *t);
/* Parse a superblock's replicas field (or none: empty) into *t. */
int bch_replicas_from_sb(const struct bch_sb *sb, struct bch_replicas_cpu *t);

/*
 * The entry key k of btree btree_id needs: true with *data_type and *devs
 * set, or false when it needs none (no dirty pointer to a member).
 */
bool bch_replicas_key_devs(const struct bch_fs *c, unsigned btree_id, const struct bch_bkey *k,
			   unsigned *data_type, uint64_t *devs);

/*
 * Make sure the table has the entry k needs, adding it and writing the
 * superblock if not (invariant 1).  0, or the error of the superblock write.
 */
int bch_replicas_mark_key(struct bch_fs *c, unsigned btree_id, const struct bch_bkey *k);
/* The same for nr pointers of data_type (a new btree node's copies). */
int bch_replicas_mark_ptrs(struct bch_fs *c, unsigned data_type,
			   const struct bch_extent_ptr *ptrs, unsigned nr);

/*
 * Every entry the keys use, recomputed: every btree root and interior
 * pointer, every extent, and a journal entry for each member with journal
 * buckets.  *t is filled (caller frees with bch_replicas_cpu_free()).
 */
int bch_replicas_used(struct bch_fs *c, struct bch_replicas_cpu *t);
/* The journal's part of that: the members that hold journal buckets, added to *t. */
int bch_replicas_used_journal(struct bch_fs *c, struct bch_replicas_cpu *t);

/*
 * Replace c's table with t (copied) and write it to the superblock; with
 * complete (t holds every set the keys use) it is marked
 * BCH_COMPAT_REPLICAS_KEPT.
 */
int bch_replicas_set(struct bch_fs *c, const struct bch_replicas_cpu *t, bool complete);

/*
 * Recompute the table from every key and replace it (entries nothing uses
 * are dropped), writing the superblock only if it changed.  The journal is
 * flushed first (invariant 4).  With members missing it works when every
 * node can still be read; a node that cannot be (missing or damaged) leaves
 * the table as it is, a superset, and returns 0.
 */
int bch_replicas_gc(struct bch_fs *c);
/*
 * The close's gc point: bch_replicas_gc() if a key or node changed since
 * the last one.  The caller has written every node (nothing is left for a
 * journal flush to make durable), so it writes no journal entry.
 */
int bch_replicas_gc_at_close(struct bch_fs *c);

/*
 * With the members of c->devs_missing gone: what would be lost?  Returns
 * true when some entry of file data or metadata has no present member of
 * durability > 0, with buf describing it ("file data kept only on members
 * 1 and 2; metadata kept only on member 1"); false with buf empty when
 * every copy has another on a present member.  *trusted is false when the
 * table is not known to be kept (BCH_COMPAT_REPLICAS_KEPT unset: written by
 * an older version, until gc or fsck rebuilds it), and the caller must
 * judge otherwise.
 */
bool bch_replicas_degraded(struct bch_fs *c, char *buf, size_t len, bool *trusted);
/*
 * The same judged from the keys themselves (roots known, journal
 * replayed): every node pointer and extent walked, *loses and buf as
 * above.  An error when a node cannot be read (its copies are on missing
 * members: metadata lost).  Used when the table says something would be
 * lost, in case an entry outlived its keys (a crash before a gc point).
 */
int bch_replicas_degraded_keys(struct bch_fs *c, char *buf, size_t len, bool *loses);

/* "members 1 and 2" / "member 3" for a set. */
const char *bch_replicas_devs_text(uint64_t devs, char *buf, size_t len);

#endif /* _BCACHEFS_REPLICAS_H */
