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

#include "io.h"

struct bch_fs;

int bch_fs_read_plan(struct bch_fs *c, uint64_t inum, uint64_t offset, size_t len,
		     struct bch_read_plan *pl);

#endif /* _BCACHEFS_FS_READ_H */
