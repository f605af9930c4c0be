/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_H
#define _BCACHEFS_H

/*
 * bcachefs.h - struct bch_fs (an open filesystem) and struct bch_dev (one
 * open member device).
 *
 * Each subsystem keeps its state in its own struct, defined in its own
 * *_types.h and embedded here, so modules do not reach into each other's
 * state except through their headers.
 *
 * Locking: the engine is single-threaded per filesystem.  Callers that use a
 * filesystem from several threads (the FUSE driver) hold c->lock around
 * every library call.  Nothing inside the library takes it.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"
#include "opts.h"

struct bch_blockdev;
struct bch_fs;

/* Optional per-module state, defined by the module (incomplete elsewhere). */
struct bch_dev_alloc;		/* alloc.c: bucket array of one device */
struct bch_alloc_btree;		/* alloc_btree.c: what the alloc btree holds */
struct bch_journal;		/* journal.c */
struct bch_btree_cache;		/* btree_cache.c */
struct bch_btree_roots;		/* btree_update.c / btree_io.c */
struct bch_replicas_cpu;	/* replicas.c: the superblock's replicas table */
struct bch_crypt;		/* crypt.c: the key and nonce counter (NULL: not encrypted) */
struct bch_snapshots;		/* snapshot.c: the snapshot tree and subvolumes, read at first use */

struct bch_dev {
	struct bch_fs		*fs;
	unsigned		idx;		/* member index */
	struct bch_blockdev	*bdev;		/* NULL when missing (degraded) */
	struct bch_member	mi;		/* copy of the member entry (cpu endian == le) */
	struct bch_sb		*disk_sb;	/* the superblock read from this device */
	struct bch_dev_alloc	*alloc;
};

struct bch_prefetch;

struct bch_fs {
	pthread_mutex_t		lock;		/* see "Locking" above; held by callers */
	struct bch_sb		*sb;		/* in-memory superblock (authoritative) */
	size_t			sb_bytes;	/* allocated size of *sb */
	struct bch_opts		opts;		/* superblock options + open options */
	unsigned		nr_devs;	/* highest member index + 1 */
	struct bch_dev		*devs[BCH_SB_MEMBERS_MAX];
	bool			read_only;	/* opened read-only: never write */
	uint64_t		devs_missing;	/* bit per member not given (-o degraded) */
	bool			emergency_ro;	/* an error made it read-only */
	bool			panicked;	/* errors=panic met an error: see fs_err.c */
	int			first_error;	/* first fatal error, for emergency_ro */
	uint64_t		nr_errors;	/* filesystem errors met (bch_fs_error) */
	uint64_t		journal_replayed;	/* entries replayed at open (0: was clean) */
	bool			open_clean;	/* fs.c: opened from the clean record */
	uint64_t		open_seq;	/* fs.c: the journal restarts after it */
	uint64_t		replay_oldest, replay_newest;	/* journal seqs replayed at open
							 * (0, 0: none): a torn append whose keys all
							 * lie in them is forgiven (btree_io.c) */
	uint64_t		(*journal_gaps)[2];	/* fsck open: missing entries [from, to] */
	struct bch_deferred_key {
		uint8_t		id, level;
		struct bch_bkey	*k;
	}			*replay_deferred;	/* fsck open: journal keys whose node could
						 * not be read, applied after pass 3 rebuilds */
	size_t			nr_replay_deferred;
	struct bch_bpos		(*extents_lost)[2];	/* fsck pass 3: ranges of extent keys
						 * lost with unreadable nodes and not found by
						 * the scan ([lo, hi]); pass 7 names the files */
	size_t			nr_extents_lost;
	uint64_t		journal_torn;	/* the entry after the newest one is unreadable
						 * (torn by a crash, or damaged): 0 if none */
	unsigned		nr_journal_gaps;
	bool			alloc_recount_partial;	/* fs.c: fsck open skipped unreadable nodes */
	bool			extents_mark_deferred;	/* fsck -n: pass 3 marks data buckets */
	bool			fsck_copies_checked;	/* fsck: pass 3 compared every node's copies
						 * and validated every key; later reads take
						 * the first good copy (and read-only, do not
						 * validate the keys again) */
	struct bch_prefetch	*prefetch;	/* btree_prefetch.c: nodes read ahead (fsck -n) */
	bool			alloc_flushing;	/* alloc.c: inside its journal flush (no recursion) */
	bool			alloc_for_delete;	/* fs_ops: the block a truncate or hole punch
						 * rewrites (zeroing its tail) may take from the
						 * first half of the btree reserve: deletes must
						 * work on a full filesystem */
	uint64_t		data_bad_copies;	/* io.c: data replicas that failed a read */
	uint64_t		data_rebuilt;		/* io.c: extents rebuilt from their stripes (ec.h) */
	uint64_t		ec_waiting;		/* ec.c: sectors that may wait for a stripe (a
						 * hint: the background walks the extents only
						 * when a full stripe may be there) */
	bool			ec_waiting_known;	/* ec_waiting counted (false: walk at once) */
	uint8_t			*ec_bufs[20];		/* ec.c: stripe block buffers kept between
						 * builder steps (BCH_STRIPE_BLOCKS_MAX) */
	size_t			ec_bufs_bytes;		/* the size of each */
	bool			ec_build_deferred;	/* set by a caller of bch_rebalance_step()
						 * around one step: no stripe built or
						 * compacted in it (fusemount, while writes
						 * stream: rebalance.h) */
	bool			ec_compact_parked;	/* ec_move.c: compaction left stripes for want
						 * of space; waits until space_gen moves */
	uint64_t		ec_compact_gen;		/* space_gen when it parked */
	uint32_t		ec_dropped[64];		/* stripes a striped pointer left this session
						 * (bch_ec_note_dropped): at a read-write close,
						 * those nothing points into go (ec_move.h) */
	unsigned		nr_ec_dropped;
	bool			ec_dropped_all;		/* more than fit: every stripe is looked at */
	uint64_t		copygc_sectors_written;	/* copygc.c: data it rewrote (write
						 * amplification), keys it moved, */
	uint64_t		copygc_keys_moved;	/* and buckets it emptied */
	uint64_t		copygc_buckets_freed;
	uint64_t		space_gen;	/* bumped each time a bucket is emptied
						 * (parked background work retries) */
	uint64_t		rebalance_wait_gen;	/* rebalance.c: space_gen when work
						 * last waited for space */
	bool			rebalance_waited;	/* rebalance_wait_gen is set */
	uint64_t		rebalance_kicks;	/* rebalance.c: bch_rebalance_kick() calls */
	uint64_t		promoted;	/* io.c: extents given a cached copy by reads */
	uint64_t		data_reuse_seq;	/* io.h: bumped (atomically, engine lock held)
						 * (from where fs.c reuse_seq_base() starts it)
						 * before a write over space that held data;
						 * reads planned before it are redone */
	uint64_t		reserved_sectors;	/* extents.c: disk sectors promised to
						 * reservation keys (fallocate): size x
						 * nr_replicas of each; user data may not
						 * take them (alloc.c) */
	uint64_t		reserved_clean;	/* fs.c: what the clean record said
						 * (UINT64_MAX: nothing); fsck checks it */
	uint64_t		inum_next;	/* inode.c: next inode number to hand out (0: unknown) */
	bool			defer_unlinked_free;	/* fs_ops: an inode whose last name goes
							 * keeps its data (flag UNLINKED) until the
							 * caller frees it (FUSE: open files) */

	/*
	 * super.c: device error counters (bcachefs_format.h, struct
	 * bch_dev_errors), loaded from the superblock at the first use;
	 * read and write errors add what each device's blockdev counted
	 * since dev_io_err_seen.  bch_dev_error_*() in super.h.
	 */
	bool			dev_errors_loaded;
	uint64_t		dev_errors[BCH_SB_MEMBERS_MAX][BCH_DEV_ERROR_NR];
	uint64_t		dev_errors_reset[BCH_SB_MEMBERS_MAX];	/* reset_time */
	uint64_t		dev_io_err_seen[BCH_SB_MEMBERS_MAX][2];	/* blockdev read, write */

	struct bch_alloc_btree	*alloc_btree;
	struct bch_journal	*journal;
	struct bch_btree_cache	*btree_cache;
	struct bch_btree_roots	*roots;
	struct bch_replicas_cpu	*replicas;
	struct bch_crypt	*crypt;		/* crypt.c; NULL when not encrypted */
	struct bch_snapshots	*snaps;		/* snapshot.c */

	char			err_msg[512];	/* last detailed error message */
};

/*
 * A member of the filesystem that was not given at open (-o degraded): its
 * pointers are copies that cannot be read, not damage; nothing is written
 * to it and its alloc keys are kept as they are.
 */
static inline bool bch_dev_missing(const struct bch_fs *c, unsigned dev)
{
	return dev < BCH_SB_MEMBERS_MAX && (c->devs_missing >> dev) & 1;
}

/*
 * A striped pointer into stripe idx went (alloc.c, as its sectors come off
 * its bucket): the stripe is looked at when the filesystem closes, and
 * deleted if nothing points into it any more (ec_move.h).
 */
static inline void bch_ec_note_dropped(struct bch_fs *c, uint32_t idx)
{
	for (unsigned i = c->nr_ec_dropped; i--;)
		if (c->ec_dropped[i] == idx)
			return;
	if (c->nr_ec_dropped < sizeof(c->ec_dropped) / sizeof(c->ec_dropped[0]))
		c->ec_dropped[c->nr_ec_dropped++] = idx;
	else
		c->ec_dropped_all = true;
}

/*
 * The format version this binary writes into the filesystem's bsets and
 * jsets: the superblock's version (a version-1 filesystem keeps being
 * written as version 1), at most the newest this binary knows.
 */
static inline unsigned bch_fs_write_version(const struct bch_fs *c)
{
	return c->sb->version < BCH_VERSION_CURRENT ? c->sb->version : BCH_VERSION_CURRENT;
}

/*
 * Version 2 and later: metadata copies on one device, journal lanes and
 * stubs (bcachefs_format.h, "Format versions").
 */
static inline bool bch_fs_has_v2(const struct bch_fs *c)
{
	return bch_fs_write_version(c) >= BCH_VERSION_2;
}

/*
 * Record a detailed message for the caller to print (the library never prints).
 * Returns err unchanged so it can be used as `return bch_fs_err(c, ret, ...)`.
 */
int bch_fs_err(struct bch_fs *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A filesystem error: metadata found damaged (can_continue: nothing was
 * left half done, only the call that met it fails) or a metadata write that
 * failed (a commit or node write left half done).  What follows is the
 * errors option's (fs_err.c, the one place that reads it): continue, go
 * read-only, or panic.  Returns the error for the caller to pass up:
 * err, or -BCH_ERR_fs_panic under errors=panic.
 */
int bch_fs_error(struct bch_fs *c, int err, bool can_continue);

/* errors=panic met an error: the command must exit now, writing nothing. */
static inline bool bch_fs_panicked(const struct bch_fs *c)
{
	return c && c->panicked;
}

#endif /* _BCACHEFS_H */
