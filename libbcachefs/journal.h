/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_JOURNAL_H
#define _BCACHEFS_JOURNAL_H

/*
 * journal.h - the write-ahead log.
 *
 * Every device listed in the superblock's journal field has a ring of
 * journal buckets.  An entry (struct bch_jset) holds typed sub-entries
 * (btree keys, btree roots) and is written at a block boundary inside one
 * bucket; it carries its sequence number, the oldest sequence still needed
 * for replay (last_seq), and a checksum (metadata_checksum).  Each entry goes
 * to metadata_replicas devices.
 *
 * Callers reserve room in the open entry, append sub-entries, and release the
 * reservation; the entry is written when someone asks for durability
 * (bch_journal_flush_seq), when it is full, or at close.  A flush returns
 * when everything up to that sequence survives a power cut.  An entry
 * written because it was full is flushed by the next flush of the devices
 * (the next entry's preflush, a node write that needs it, an fsync), not on
 * its own: until then it is written but not durable (not with stubs, nor
 * when the ring needs what it frees).
 *
 * Threads: the caller serialises every call (one lock over the engine).
 * The journal's own writer thread preflushes and writes full entries (and
 * with stubs flushes each and writes its stub), in sequence order, while
 * the caller fills the next one; up to BCH_JWRITER_QUEUE sealed entries
 * wait for it, and a commit waits only when all are busy.  It touches
 * only those entries' buffers and the block devices.  Every call that
 * needs them written or durable (a flush of any kind, an entry written
 * in line, bch_fs_journal_exit) waits for them first, and a failure there
 * is the filesystem's error (bch_fs_error): the failed entry and every
 * one queued after it are lost together.  A lost entry stays lost: from
 * then on every flush of it or of anything after it (bch_journal_flush()
 * always) answers that failure and nothing more is written; only a new
 * open (a remount) writes again.  Emergency read-only without a lost
 * entry: a flush that would write an entry answers fs_emergency_ro (one
 * of entries already written still flushes the devices).
 *
 * Invariants
 *   (1) A bucket is overwritten only when every entry in it is older than the
 *       last_seq of the newest durable entry, so replay never misses one.
 *   (2) Each bucket keeps room for the entry written after reclaim: when
 *       the ring is full, reclaim flushes the pins and that entry records
 *       the advanced last_seq, which frees buckets.  The room holds the
 *       relinks of reclaim's own node writes: one for every node pinned in
 *       the next buckets (a pin is a node that may move when written), on
 *       top of a quarter of an entry.  Every write from the top
 *       that would use that room reclaims first; a flush with nothing new
 *       writes nothing.  So no workload fills the ring for good; a ring found
 *       full on disk (older versions) is emptied at open through the clean
 *       record (fs.c).  -BCH_ERR_journal_full only when nothing can be
 *       reclaimed, and it leaves the filesystem writable.
 *   (3) Reading trusts nothing: every length is checked against the bucket,
 *       every entry's magic, UUID and checksum before its contents are used.
 *   (4) Opened read-only, the journal reads and never writes.
 *   (5) Every entry is written after a flush of every device (the first of
 *       a session opened clean excepted: nothing was written before it), so
 *       an entry on disk means every write issued before it is, and every
 *       entry before it is: new btree nodes are written with no journal
 *       flush first and linked by a later entry (btree.h invariant (6)).
 */

#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;

/*
 * A pin holds journal sequence seq (and every later one) until flush() has
 * written what the pin protects elsewhere and dropped the pin.  last_seq of
 * new entries is the oldest pinned sequence.
 */
struct bch_journal_pin;
typedef int (*bch_journal_pin_flush_fn)(struct bch_fs *c, struct bch_journal_pin *pin,
					uint64_t seq);
struct bch_journal_pin {
	uint64_t			seq;		/* 0: not pinned */
	bch_journal_pin_flush_fn	flush;
	struct bch_journal_pin		*prev, *next;
};

/* A reservation of u64s in the open entry with sequence seq. */
struct bch_journal_res {
	uint64_t	seq;
	unsigned	u64s;		/* reserved, headers included */
	unsigned	used;
	bool		wrote;		/* bch_journal_res_get() wrote entries or
					 * reclaimed (nodes written, moved, split)
					 * first: what the caller found of the
					 * btree before may have changed */
};

int  bch_fs_journal_init(struct bch_fs *c);
void bch_fs_journal_exit(struct bch_fs *c);
/*
 * The members' states changed (set-state): new entries go to the read-write
 * members only from the next entry on (the open one included).
 */
void bch_journal_devs_update(struct bch_fs *c);

/*
 * Find the newest valid entry on every device and call fn for each entry
 * from its last_seq to it, in sequence order.  Buckets are dated by their
 * first entry; only the newest and those that may hold entries from
 * last_seq on are read whole (and any whose head is neither empty nor a
 * valid entry: nothing unexpected is skipped unread).  A
 * sequence missing in that range is -BCH_ERR_journal_missing (c->err_msg
 * says which).  *newest is the newest sequence found (0: empty journal), and
 * the ring positions are set up so writing continues after it.  A bucket is
 * read 64 KiB at a time, and further only for an entry that is longer: a
 * bucket (megabytes, mostly unwritten) is never held whole, and what is
 * replayed is held in a buffer of the largest entry's size.
 */
int bch_journal_read(struct bch_fs *c,
		     int (*fn)(struct bch_fs *c, struct bch_jset *j, void *priv),
		     void *priv, uint64_t *newest);
/* The most bytes of a bucket bch_journal_read() has held at once (tests). */
size_t bch_journal_read_window_max(struct bch_fs *c);

/*
 * Start writing: the next entry gets sequence min_seq or newest + 1.
 * -BCH_ERR_device_missing when fewer devices can take copies of an entry
 * than metadata_replicas_required (a degraded open): nothing is written.
 */
int bch_journal_start(struct bch_fs *c, uint64_t min_seq);

/*
 * The filesystem was opened clean: its last session flushed every write at
 * its close, and nothing has been written since, so the first entry is
 * written without a preflush (its own flush still makes it durable).
 */
void bch_journal_clean_start(struct bch_fs *c);

/* Roots: every entry written carries what fill() writes (u64s() u64s). */
void bch_journal_set_roots_fn(struct bch_fs *c, unsigned (*u64s)(struct bch_fs *c),
			      void (*fill)(struct bch_fs *c, struct bch_jset_entry *dst));
/*
 * Last resort when the ring has no room even after reclaim (a journal left
 * full on disk by an older version): with every pinned node written back,
 * fn records the roots and the newest durable seq elsewhere (fs.c: the
 * clean record), after which every bucket is reused.  0 or an error.
 */
void bch_journal_set_spill_fn(struct bch_fs *c, int (*fn)(struct bch_fs *c));

/*
 * Reserve u64s (of sub-entries, headers included) in the open entry.  May
 * write the open entry and reclaim to make room.  -BCH_ERR_journal_full when
 * the ring cannot make room, -EINVAL when u64s can never fit in one entry.
 */
int   bch_journal_res_get(struct bch_fs *c, unsigned u64s, struct bch_journal_res *res);
/*
 * For the btree's own updates made while writing nodes (relinking a moved
 * node): may use the space kept for them, never reclaims.
 */
int   bch_journal_res_get_internal(struct bch_fs *c, unsigned u64s, struct bch_journal_res *res);
/*
 * Give the internal updates their space back when node writes used it up
 * (from the top only: a loop that writes many nodes calls it between them,
 * as a transaction's reservation would).  Nothing is written while the
 * open entry still fits with the reserve.
 */
int   bch_journal_restore_reserve(struct bch_fs *c);
/* Append a sub-entry with data_u64s of data; returns where to put the data. */
void *bch_journal_res_add(struct bch_fs *c, struct bch_journal_res *res, unsigned type,
			  unsigned btree_id, unsigned level, unsigned data_u64s);
void  bch_journal_res_put(struct bch_fs *c, struct bch_journal_res *res);

/*
 * Make every entry up to seq durable (written and flushed).  Called from the
 * top (not inside a btree operation or the allocator's flush), a write that
 * would use the room kept for reclaim reclaims first.
 */
int bch_journal_flush_seq(struct bch_fs *c, uint64_t seq);
/*
 * Everything so far.  Writes the open entry only when something needs it:
 * keys, a reservation taken (even of 0 u64s), its seq handed out by
 * bch_journal_cur_seq(), or roots changed since the last entry; else 0 at once.
 */
int bch_journal_flush(struct bch_fs *c);
/*
 * bch_journal_flush() for a caller that lets its lock go while the devices
 * write and flush the entry (fsync through the daemon: other requests run
 * meanwhile).  *seq, 0 on the first call, is set to the entry to make
 * durable (everything so far).  0: it is (or <0, an error, as
 * bch_journal_flush()); 1: it is being written (queued behind the entries
 * in flight when there is room), or must wait for them: call
 * bch_journal_flush_wait() without the lock, then this again with the same
 * *seq.  Fsyncs waiting together go out in one entry.
 */
int bch_journal_flush_step(struct bch_fs *c, uint64_t *seq);
/*
 * Without the caller's lock: wait until the writer thread is done with
 * every entry handed to it before the call.  The filesystem stays open
 * meanwhile (the caller sees to it).
 */
void bch_journal_flush_wait(struct bch_fs *c);

/*
 * Flush every device (no journal entry): the writes issued so far are
 * durable.  bch_journal_flush_gen() counts such flushes, each entry's
 * preflush included: a write that must follow the writes issued now waits
 * for the count to pass its value now.  (A preflush by the writer thread
 * that was under way when the count was read is not counted: it may have
 * begun before the caller's writes.)
 */
int bch_journal_flush_devs(struct bch_fs *c);
uint64_t bch_journal_flush_gen(struct bch_fs *c);

/* Of the open entry; the caller makes something depend on it (the next flush writes it). */
uint64_t bch_journal_cur_seq(struct bch_fs *c);
uint64_t bch_journal_seq_durable(struct bch_fs *c);	/* newest durable entry */
/*
 * The newest seq a flush now would make durable: the open entry's when it
 * must be written, else the newest entry written (after a lost entry: the
 * newest handed out, so a flush of it answers the loss); 0 when nothing is
 * (or a read-only filesystem).  What bch_journal_flush_step() sets *seq to.
 */
uint64_t bch_journal_seq_needed(struct bch_fs *c);
/*
 * bch_journal_seq_durable(), with an entry whose write has finished (its
 * waiter not back yet) reaped first: for a caller about to let the
 * filesystem be closed under that waiter.  Never waits.
 */
uint64_t bch_journal_seq_durable_now(struct bch_fs *c);
/*
 * Does the open entry hold keys of btree btree_id at level?  (A new root
 * must follow every key of its level journalled for an earlier shape of
 * the tree: btree_update.c, split().)
 */
bool bch_journal_open_has_keys(struct bch_fs *c, unsigned btree_id, unsigned level);
/* The open entry's seq, asking nothing of it (bch_journal_cur_seq() does). */
uint64_t bch_journal_seq_open(struct bch_fs *c);
/*
 * Encrypted: the highest nonce counter value of a valid entry seen by the
 * reads at open, or written since (0: none).  The counter continues past it.
 */
uint64_t bch_journal_nonce_max(struct bch_fs *c);
uint64_t bch_journal_last_seq(struct bch_fs *c);	/* oldest still needed */

void bch_journal_pin_add(struct bch_fs *c, struct bch_journal_pin *pin, uint64_t seq,
			 bch_journal_pin_flush_fn flush);	/* keeps the older seq */
void bch_journal_pin_drop(struct bch_fs *c, struct bch_journal_pin *pin);
/* Flush every pin (clean close); then nothing older than the open entry is needed. */
int bch_journal_reclaim_all(struct bch_fs *c);


/* Iterate the sub-entries of a jset read from disk (already validated). */
#define for_each_jset_entry(e, j)						\
	for (e = (struct bch_jset_entry *)(j)->_data;				\
	     (__le64 *)e < (j)->_data + (j)->u64s;				\
	     e = (struct bch_jset_entry *)((__le64 *)e + 1 + e->u64s))

#endif /* _BCACHEFS_JOURNAL_H */
