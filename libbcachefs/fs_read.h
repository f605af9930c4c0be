/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FS_READ_H
#define _BCACHEFS_FS_READ_H

/*
 * fs_read.h - a file's read (bch_fs_read(), fs_ops.h) split for a caller
 * that serialises the engine with a lock and wants the I/O outside it (the
 * FUSE daemon): the plan under the lock, the reads and checks without
 * (io.h, "Reads outside the engine lock", for what each step needs).
 *
 * bch_fs_read_plan() (BCH_READ_PLAN_NEEDS) plans the read of len bytes at
 * offset of handle inum, clamped to the file's size as bch_fs_read()
 * clamps it (pl->len is what a run returns; 0 at or past the end).
 * Nonzero: this read is not planned (not a regular file or symlink, no
 * such inode, a promote wanted, anything io.h refuses): the caller calls
 * bch_fs_read() under the lock, which gives every error its old answer.
 * On 0 the caller runs pl with bch_data_read_plan_run() (BCH_READ_RUN_NEEDS)
 * and frees it with bch_data_read_plan_free(); a run's -EAGAIN means the
 * same: bch_fs_read() under the lock.
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "io.h"

struct bch_fs;

int bch_fs_read_plan(struct bch_fs *c, uint64_t inum, uint64_t offset, size_t len,
		     struct bch_read_plan *pl);

/*
 * The read-ahead of a sequential reader: a file read sequentially has the
 * uncompressed extents just past each read (encrypted, or plain with a
 * checksum on a device that reads uncached) read and checked by the thread
 * that served it, after its reply, while the kernel has not yet asked for
 * them; an encrypted one is decrypted there once its MAC matched.  The run
 * of a later read then only copies them into its buffer, or replies from
 * them, instead of reading, verifying and decrypting on its reply's path
 * (that path idles between the kernel's bursts of requests); a plain one
 * never passes through the page cache (read there, it was copied out once
 * more and its pages filled and reclaimed: a third of the daemon's CPU in
 * a sequential read).  A cache of at most
 * 128 extents of at most 256 KiB each (larger and compressed extents are
 * not read ahead), in huge pages where the kernel has them, one per mount:
 * bch_fs_read_cache_new(), and _free() once no thread uses it.
 *   bch_fs_read_ahead_plan() (BCH_READ_PLAN_NEEDS, and serialised with
 *     itself: the caller's engine lock), after a read of [offset, offset +
 *     len) of inum was planned: when the read follows the last one (within
 *     1 MiB of its end), plans up to 4 MiB past it, from where the last
 *     plan ahead of this file stopped, into ahead.  0: run ahead with
 *     bch_fs_read_ahead_run() (which frees it); nonzero: nothing to do (not
 *     sequential, at the end of the file, ra NULL, less
 *     than 1 MiB of the window missing: it is planned in such units).
 *   bch_fs_read_ahead_run() (BCH_READ_RUN_NEEDS): reads each extent of
 *     ahead the cache takes, not cached (or cached for an older plan:
 *     stale), being read or just read by a run, and
 *     checks its checksum or MAC; extents that follow each other on a
 *     device are read at once (up to 16) and uncached where the device can
 *     (blockdev.h bch_dev_readv_uncached(): the bytes go straight into the
 *     slots, no page cache to fill, copy and reclaim; io.h's readahead
 *     hint leaves them out); one that fails a check, or whose space was reused
 *     since the plan (c->data_reuse_seq moved), is dropped without a word:
 *     the read that wants it reads it itself, and reports.
 *     Each encrypted extent whose MAC matched is then decrypted in place (decrypt-
 *     ahead; a run's extents verified and decrypted on this thread and
 *     the cipher pool's free workers, io.h bch_io_pool_run()), so the
 *     reply of the read that wants it only copies; its
 *     plaintext is kept in memory locked against swapping, out of core
 *     dumps, wiped when the buffer goes, and used only by this mount's
 *     own reads (where mlock() fails, the slot keeps the ciphertext and
 *     the run decrypts it, as before).
 *   bch_fs_read_run() (BCH_READ_RUN_NEEDS): bch_data_read_plan_run() of pl,
 *     with the same answers, but each piece whose extent the cache holds
 *     for a plan of the same c->data_reuse_seq (so no space was reused
 *     between that extent's read and this plan; the run's own check covers
 *     the rest) is copied (or decrypted) from the cache; one being read
 *     ahead is waited for.  ra may be NULL (no cache).
 * Nothing is decrypted before its MAC matched (DESIGN.md 4.3), nor used
 * before its checksum matched: the cache holds verified extents only.
 */
struct bch_fs_read_cache;

int bch_fs_read_cache_new(struct bch_fs_read_cache **ra);
void bch_fs_read_cache_free(struct bch_fs_read_cache *ra);
/* Pieces served from the cache, extents read ahead, of those decrypted ahead (tests, benchmarks). */
void bch_fs_read_cache_counts(struct bch_fs_read_cache *ra, uint64_t *hits, uint64_t *filled,
			      uint64_t *decrypted);
int bch_fs_read_ahead_plan(struct bch_fs *c, struct bch_fs_read_cache *ra, uint64_t inum,
			   uint64_t offset, size_t len, struct bch_read_plan *ahead);
void bch_fs_read_ahead_run(struct bch_fs_read_cache *ra, struct bch_read_plan *ahead);
ssize_t bch_fs_read_run(struct bch_fs_read_cache *ra, struct bch_read_plan *pl, void *buf);

/*
 * A reply written from where the bytes lie (the FUSE daemon's
 * fuse_reply_iov()): bch_fs_read_run_reply() is bch_fs_read_run(), with
 * the same answers, but a piece the cache holds in plain (decrypted, or
 * never encrypted) is not copied
 * into buf: rep->iov[0..rep->nr) is then the read's bytes in order, each
 * piece either in its slot or in buf, and those slots are kept (neither
 * reused nor freed, their plaintext still locked) until
 * bch_fs_read_reply_done(rep), which the caller calls once the reply is
 * written, whatever the result.  rep->nr 0: the bytes are all in buf, as
 * bch_fs_read_run() leaves them (nothing held: an error, a run with no
 * piece from the cache, more than 256 pieces).  The copy saved was a
 * tenth of the daemon's CPU in an encrypted sequential read.
 */
struct bch_fs_read_reply {
	struct iovec		*iov;		/* malloc'd */
	unsigned		nr;
	/* private */
	struct bch_fs_read_cache *ra;
	void			**held;		/* a piece's slot, or NULL */
	unsigned		nr_held;
};

ssize_t bch_fs_read_run_reply(struct bch_fs_read_cache *ra, struct bch_read_plan *pl, void *buf,
			      struct bch_fs_read_reply *rep);
void bch_fs_read_reply_done(struct bch_fs_read_reply *rep);

#endif /* _BCACHEFS_FS_READ_H */
