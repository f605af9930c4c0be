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

#include "io.h"

struct bch_fs;

int bch_fs_read_plan(struct bch_fs *c, uint64_t inum, uint64_t offset, size_t len,
		     struct bch_read_plan *pl);

/*
 * The decrypted read-ahead: an encrypted file read sequentially has the
 * extents just past each read read, verified and decrypted by the thread
 * that served it, after its reply, while the kernel has not yet asked for
 * them; the run of a later read copies their plaintext out instead of
 * doing that work on its reply's path.  A cache of at most 16 extents
 * (each at most 1 MiB; larger and compressed extents are not read ahead),
 * one per mount (bch_fs_read_cache_new(), _free() when no thread uses it).
 *   bch_fs_read_ahead_plan() (BCH_READ_PLAN_NEEDS, and serialised with
 *     itself: the caller's engine lock), after a read of [offset, offset +
 *     len) of inum was planned: when the read follows the last one (within
 *     1 MiB), plans the next MiB past what was planned ahead already into
 *     ahead.  0: run ahead with bch_fs_read_ahead_run() (which frees it);
 *     nonzero: nothing to do (not sequential, not encrypted, at the end).
 *   bch_fs_read_ahead_run() (BCH_READ_RUN_NEEDS): reads each encrypted
 *     extent of ahead not cached or being read, checks its MAC, decrypts
 *     it; an extent that fails any check, or whose space was reused since
 *     the plan (c->data_reuse_seq moved), is dropped without a word: the
 *     read that wants it reads it itself and reports.
 *   bch_fs_read_run() (BCH_READ_RUN_NEEDS): bch_data_read_plan_run() of pl,
 *     the same answers, but each piece whose extent is cached for a plan
 *     of the same c->data_reuse_seq (so no space was reused between that
 *     extent's read and this plan, and the run's check covers the rest) is
 *     copied from the cache; one being read ahead is waited for.  ra may
 *     be NULL (no cache).
 * The cache holds plaintext only after its MAC matched (DESIGN.md 4.3),
 * and wipes it when freed.
 */
struct bch_fs_read_cache;

int bch_fs_read_cache_new(struct bch_fs_read_cache **ra);
void bch_fs_read_cache_free(struct bch_fs_read_cache *ra);
/* Reads served from the cache, extents read ahead (tests, benchmarks). */
void bch_fs_read_cache_counts(struct bch_fs_read_cache *ra, uint64_t *hits, uint64_t *filled);
int bch_fs_read_ahead_plan(struct bch_fs *c, struct bch_fs_read_cache *ra, uint64_t inum,
			   uint64_t offset, size_t len, struct bch_read_plan *ahead);
void bch_fs_read_ahead_run(struct bch_fs_read_cache *ra, struct bch_read_plan *ahead);
ssize_t bch_fs_read_run(struct bch_fs_read_cache *ra, struct bch_read_plan *pl, void *buf);

#endif /* _BCACHEFS_FS_READ_H */
