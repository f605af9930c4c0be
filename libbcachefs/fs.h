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
 * Opened read-only, nothing is written to any device, ever, unless the
 * caller asks for the read-write start later (bch_fs_read_write(): the
 * same start, on the same open, when it was clean and nothing differs).
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

/*
 * Make a read-only open read-write in place: what bch_fs_open() would have
 * done for a read-write open, done now, keeping what the read-only open
 * read (superblocks, journal positions, roots, bucket state, the node
 * cache).  In the same order and with the same crash guarantees as the
 * open: every member is opened again for writing (the exclusive claim)
 * and its superblock read again; then the journal restarts after the
 * clean record's seq, the session's first entry is made durable, the
 * superblock drops the clean record and names that entry, and overfull
 * nodes are split.
 * Returns 1, nothing written and c still read-only and usable, when it
 * cannot be done in place: the open was not clean (a replay), members are
 * missing, very_degraded, fsck, a member with discard on, an error met, a
 * device that will not open for writing, or a superblock that changed since
 * it was read (another writer came between): the caller closes and opens
 * read-write, which reads everything again (and reports what refuses).
 * Another writer that began after this open read the journal and died
 * before its first superblock write left at most its first entry, with no
 * keys, at the place and seq this session's first entry takes (both
 * computed from the same disk): it is overwritten, as if never written.
 * Returns 0 when c is read-write, or a negative error when the start
 * failed (c then read-only: close it; the next open replays what was
 * written, as after a failed read-write open).
 * The caller's read-only session must only have read: a change tried
 * and refused (EROFS) may leave state in memory a writer must not
 * inherit (buckets taken for nodes or data: cmd_image.c's in_place says
 * which verbs may); the inode number cursor is recomputed here.
 */
int bch_fs_read_write(struct bch_fs *c);

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
