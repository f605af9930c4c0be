/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FSCK_FILES_H
#define _BCACHEFS_FSCK_FILES_H

/*
 * fsck_files.h - what the passes over files (5 to 11) share: the inode
 * table, the pass state, and helpers that repair through transactions.
 * Internal to fsck_*.c; the entry point is bch_fsck_files() in fsck.h.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"
#include "fsck.h"

struct bch_fs;

/* One entry per inode (about 64 bytes): what the scans counted. */
struct ino_info {
	uint64_t	inum;		/* 0: empty slot */
	uint64_t	sectors;	/* counted from extents */
	uint64_t	parent;		/* first name seen: directory ... */
	uint64_t	parent_slot;	/* ... and dirent offset */
	uint32_t	names;		/* dirents naming it */
	uint32_t	subdirs;	/* directories: subdirectories named in it */
	uint32_t	mode;		/* 0: no inode key (only referenced) */
	uint8_t		state;		/* pass 9 loop walk: 0 new, 1 walking, 2 reaches root */
};

/* Open addressing by inode number. */
struct ino_table {
	struct ino_info	*e;
	size_t		nr, cap;	/* cap: power of two */
};

struct fstate {
	struct bch_fsck_ctx	*ctx;
	struct bch_fs		*c;
	struct ino_table	inodes;
	struct bch_fsck_file_stats *stats;
	int			err;

	/* pass 5: blocks claimed, per device; recently seen encoded extents */
	uint8_t			*claimed[BCH_SB_MEMBERS_MAX];
	uint64_t		claimed_blocks[BCH_SB_MEMBERS_MAX];
	struct {
		struct bch_extent_ptr	ptr;
		struct bch_csum		csum;
	}			recent[128];
	unsigned		recent_next;

	/* pass 6: the inode whose extents are being scanned */
	uint64_t		cur_inum;
	bool			cur_exists;
	struct bch_inode	cur;
	uint64_t		prev_end;

	uint64_t		max_inum;	/* highest inode number: for progress */

	/* pass 8: dirents re-hashed (and counted) this pass */
	struct bch_bpos		*moved;
	size_t			nr_moved;

	/* pass 8: the directory whose entries are being scanned */
	uint64_t		dir_cached;
	struct bch_inode	dir_inode;
};

struct ino_info *fsck_ino_find(struct ino_table *t, uint64_t inum, bool add);
/* Room for extra entries without moving the table (pointers into it stay valid). */
void fsck_ino_reserve(struct ino_table *t, size_t extra);

/* Report p; true when it is to be repaired (and the filesystem is writable). */
bool fsck_fixing(struct fstate *s, enum bch_fsck_problem p, const char *where, const char *detail);
/* Count the repair of p, or keep its error. */
void fsck_fix_done(struct fstate *s, enum bch_fsck_problem p, int r);
/* "inode 4100 (/etc/passwd)": the path from parent pointers, best effort. */
void fsck_inode_where(struct bch_fs *c, uint64_t inum, char *buf, size_t len);

/* One-key transactions. */
int fsck_put_key(struct bch_fs *c, unsigned id, const struct bch_bkey *k);
int fsck_delete_key(struct bch_fs *c, unsigned id, struct bch_bpos p);
/* Replace extent old by new (NULL: delete it), with space accounting. */
int fsck_replace_extent(struct bch_fs *c, const struct bch_bkey *old, const struct bch_bkey *new,
			bool account_new);
int fsck_update_inode(struct bch_fs *c, uint64_t inum, const struct bch_inode *i);
/* A repair that adds or removes a subdirectory keeps its parent's nlink in step. */
int fsck_adjust_nlink(struct bch_fs *c, uint64_t inum, int delta);

/*
 * Visit every key of btree id in order, in batches: fn gets a copy and may
 * change the tree (no iterator is open while it runs).
 */
typedef int (*key_fn)(struct fstate *s, const struct bch_bkey *k);
int fsck_for_each_key(struct fstate *s, unsigned id, key_fn fn);

/* The passes (one file each). */
int fsck_check_extent(struct fstate *s, const struct bch_bkey *k);	/* 5, 6: fsck_extents.c */
int fsck_check_alloc(struct fstate *s);				/* 5: fsck_extents.c */
int fsck_scan_inode(struct fstate *s, const struct bch_bkey *k);	/* 7: fsck_inodes.c */
int fsck_check_dirent(struct fstate *s, const struct bch_bkey *k);	/* 8: fsck_dirents.c */
int fsck_check_xattr(struct fstate *s, const struct bch_bkey *k);	/* 8 */
int fsck_check_root(struct fstate *s);				/* 9: fsck_dirs.c */
int fsck_check_structure(struct fstate *s);				/* 9 */
int fsck_check_links(struct fstate *s);				/* 10: fsck_links.c */
int fsck_check_data(struct fstate *s, const struct bch_bkey *k);	/* 11: fsck_data.c */

#endif /* _BCACHEFS_FSCK_FILES_H */
