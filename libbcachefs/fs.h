/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FS_H
#define _BCACHEFS_FS_H

/*
 * fs.h - opening and closing a filesystem ("mount offline").
 *
 * Open: read the superblock of every device (the newest valid copy; all
 * devices of one filesystem, each member present unless opts degraded or
 * very_degraded: see bch_dev_missing()), set up the journal, the
 * node cache and the allocator; if the superblock holds a current clean
 * record, take the btree roots from it, else read the journal and replay it
 * from the newest entry's last_seq.  Opened read-write, the clean record is
 * removed (written to the superblock) before anything else changes.
 * Opened read-only, nothing is written to any device, ever.
 *
 * Close: write every dirty node, write a final journal entry, record the
 * roots and journal sequence in the clean record, write the superblock.
 */

#include <stddef.h>

#include "bcachefs.h"
#include "opts.h"

/*
 * Open the filesystem on paths.  opts: open options (read_only,
 * btree_cache_size, ...; NULL for defaults).  On failure returns a negative
 * error and a message naming the device or structure in err.
 *
 * A member not among paths: -BCH_ERR_device_missing naming it, unless
 * degraded (opened when fewer members are missing than metadata_replicas
 * and data_replicas, counting those allowed to hold each, and every btree
 * root has a copy present) or very_degraded (opened regardless).  The
 * missing members are c->devs_missing; the caller says so to the user.
 */
int bch_fs_open(char * const *paths, unsigned nr, const struct bch_opts *opts,
		struct bch_fs **ret, char *err, size_t errlen);

/* Close; clean unless an error made the filesystem read-only. */
int bch_fs_close(struct bch_fs *c);

/*
 * Open read-only with only the superblock and the journal set up (no btree,
 * no replay): for reading the journal of a filesystem that will not open.
 * opts (may be NULL): only degraded and very_degraded are read (members may
 * be missing).  Close with bch_fs_close().
 */
int bch_fs_open_journal_only(char * const *paths, unsigned nr, const struct bch_opts *opts,
			     struct bch_fs **ret, char *err, size_t errlen);

/* Give freshly formatted devices an empty root node for every btree, closed clean. */
int bch_fs_init_empty(char * const *paths, unsigned nr, char *err, size_t errlen);

#endif /* _BCACHEFS_FS_H */
