/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_INODE_H
#define _BCACHEFS_INODE_H

/*
 * inode.h - inode keys: read, write, number allocation, defaults.
 *
 * An inode lives at (0, inum, 0) in the inodes btree (struct bch_inode in
 * bcachefs_format.h).  New numbers are handed out above the highest number
 * in use (found once per open), so a number is never reused while any key
 * of the old inode could remain.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bcachefs_format.h"
#include "opts.h"

struct bch_fs;
struct btree_trans;

/* Is SOURCE_DATE_EPOCH set (a number, read at the first call): times are fixed? */
bool bch_time_fixed(void);
/* Current time in ns (SOURCE_DATE_EPOCH, when set at the first call, for reproducible images). */
int64_t bch_now_ns(void);

int  bch_inode_get(struct bch_fs *c, uint64_t inum, struct bch_inode *inode);	/* -ENOENT */
int  bch_inode_update(struct btree_trans *t, uint64_t inum, const struct bch_inode *inode);
int  bch_inode_delete(struct btree_trans *t, uint64_t inum);
int  bch_inode_alloc_num(struct bch_fs *c, uint64_t *inum);

/* A new inode: mode, owner, times now, nlink 1 (2 for directories). */
void bch_inode_init(struct bch_fs *c, struct bch_inode *inode, uint64_t inum, mode_t mode,
		    uid_t uid, gid_t gid, dev_t rdev, const struct bch_inode *parent);

/* DT_* for a mode */
unsigned bch_mode_to_dtype(mode_t mode);

/*
 * A per-file option as the inode stores it: the value + 1, 0 when the
 * inode inherits it (every option that is not per-file: 0).
 */
unsigned bch_inode_opt_raw(const struct bch_inode *i, enum bch_opt_id id);
/* Store raw (value + 1, 0: inherit) as option id of i; other options: nothing. */
void bch_inode_opt_raw_set(struct bch_inode *i, enum bch_opt_id id, unsigned raw);
/* The options an inode stores (bcachefs.<option> xattrs, setattr), in one list. */
extern const enum bch_opt_id bch_inode_opts[];
extern const unsigned bch_inode_opts_nr;
/*
 * The feature bit an inode needs in the superblock before it stores a value
 * of option id (erasure_code: BCH_FEATURE_INODE_EC), else 0; and setting it
 * (the superblock written; 0 when it was already set, or the write's error).
 */
uint64_t bch_inode_opt_feature(enum bch_opt_id id);
int bch_inode_feature_enable(struct bch_fs *c, uint64_t feature);

/* The effective erasure_code of an inode (NULL: the filesystem's). */
bool bch_inode_ec_effective(struct bch_fs *c, const struct bch_inode *i);
/*
 * Are the file's extents striped (ec.h)?  Its effective erasure_code is on
 * and it asks no more copies than the filesystem's data_replicas: a
 * stripe's parity count is the filesystem's data_replicas - 1, so a file
 * asking more keeps its copies (durability is never lowered by striping);
 * one asking fewer is striped with the filesystem's parity.  NULL: the
 * filesystem's.  bch_ec_replicas_fit(): replicas copies fit the stripes.
 */
bool bch_inode_ec_stripes(struct bch_fs *c, const struct bch_inode *inode);
bool bch_ec_replicas_fit(struct bch_fs *c, unsigned replicas);

/*
 * bch_inode_ec_stripes() by inode number, for a walk in key order (the
 * stripe builder, fs usage): one inode read per inode number, remembered in
 * m (zeroed by the caller).  Without BCH_FEATURE_INODE_EC and with the
 * filesystem's erasure_code off, nothing is striped and nothing is read.
 */
struct bch_inode_ec_memo {
	uint64_t	inum;
	bool		valid;
	bool		on;
};
bool bch_inode_ec_memo_on(struct bch_fs *c, struct bch_inode_ec_memo *m, uint64_t inum);

/*
 * File flags (bcachefs_format.h, BCH_INODE_IMMUTABLE..): what
 * bch_bkey_validate() leaves to the filesystem.  BCH_INODE_FLAGS_UNKNOWN: a
 * flag bit this version does not know; BCH_INODE_FLAGS_NO_FEATURE: a file
 * flag or a project ID on a filesystem without BCH_FEATURE_INODE_FLAGS, or
 * the erasure_code field without BCH_FEATURE_INODE_EC (features: the
 * superblock's).  bch_bkey_validate_fs() refuses both; fsck
 * reports and clears them (inode_flags_unknown, inode_flags_no_feature).
 */
enum bch_inode_flags_state {
	BCH_INODE_FLAGS_OK,
	BCH_INODE_FLAGS_UNKNOWN,
	BCH_INODE_FLAGS_NO_FEATURE,
};
enum bch_inode_flags_state bch_inode_flags_check(uint64_t features, const struct bch_inode *i);
/*
 * The repairs of those two states, for fsck: the bits that make a flags word
 * unknown (an unknown bit, or the erasure_code field at its invalid 3), and
 * clearing what needs a feature bit features lacks (file flags and project
 * without inode_flags, the erasure_code field without inode_ec).
 */
uint32_t bch_inode_flags_unknown(const struct bch_inode *i);
void bch_inode_flags_clear_no_feature(uint64_t features, struct bch_inode *i);
/* The check above for an inode key k (any other key: 0); none while fsck runs. */
struct bch_bkey;
int bch_inode_validate_fs(struct bch_fs *c, const struct bch_bkey *k, char *err, size_t errlen);

/*
 * The file flags as FS_IOC_GETFLAGS gives them (FS_*_FL of <linux/fs.h>)
 * and back; bch_inode_flags_from_fs() returns -EOPNOTSUPP for a flag the
 * inode cannot keep.
 */
unsigned bch_inode_flags_to_fs(uint32_t flags);
int bch_inode_flags_from_fs(unsigned fs_flags, uint32_t *flags);
/* "immutable,append" (the chattr letters' names), "" for none, into buf */
void bch_inode_flags_to_text(uint32_t flags, char *buf, size_t len);

#endif /* _BCACHEFS_INODE_H */
