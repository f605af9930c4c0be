/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FS_OPS_SHARED_H
#define _BCACHEFS_FS_OPS_SHARED_H

/*
 * fs_ops_shared.h - what the POSIX layer's files share: fs_ops.c
 * (namespace), fs_ops_data.c (file data), fs_ops_xattr.c (xattrs, flags,
 * options), fs_ops_subvol.c (subvolumes).  Internal to fs_ops*.c; the
 * entry points are in fs_ops.h, its invariants in fs_ops.c.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "btree.h"
#include "fs_ops.h"
#include "hash_table.h"
#include "snapshot.h"
#include "str_hash.h"

#define MAX_FILE_SIZE		((uint64_t)INT64_MAX)
#define WRITE_CHUNK		(1U << 20)	/* bytes of data per transaction */
#define PUNCH_KEYS_PER_TRANS	256

/*
 * Every entry point taking a file handle runs in the view of its subvolume
 * (snapshot.h): it enters the view, calls its v_ function with the inode
 * number, and leaves the view.
 */
#define VIEW_CALL(c, h, call) ({					\
	struct bch_view _v;						\
	int64_t _r = bch_view_enter(c, &_v, &(h));			\
	if (!_r) {							\
		_r = (call);						\
		bch_view_exit(&_v);					\
	}								\
	_r;								\
})

/* The inodes one operation changes, each loaded once and written once. */
struct ino_set {
	unsigned		nr;
	uint64_t		inum[4];
	struct bch_inode	v[4];
	bool			deleted[4];
};

/*
 * File flags: the kernel's rules for immutable and append-only inodes
 * (fs/namei.c may_delete(), may_create(), vfs_link(); fs/attr.c
 * notify_change(); fs/open.c do_truncate(); fs/xattr.c xattr_permission()).
 * Each helper is one check, -EPERM when the flags refuse.
 */
#define FLAGS_FROZEN	(BCH_INODE_IMMUTABLE | BCH_INODE_APPEND)

struct dirent_copy {
	uint64_t	pos, inum;
	unsigned	d_type, len;
	char		name[BCH_NAME_MAX + 1];
};

/* ------------------------------------------------------------ fs_ops.c */

int fs_ret_errno(int r);
uint64_t fs_block_bytes(struct bch_fs *c);
int fs_check_name(const char *name);

/*
 * An operation that adds metadata leaves the last of the btree reserve to
 * deletes, replay and fsck (alloc.h): on a full filesystem it fails here,
 * before it changes anything, and rm still works.  Nor may its btree nodes
 * take space promised to reservations (fallocate): when what is free for
 * data does not cover the promises, only writes (which may fill their own
 * reservations) go on.
 */
int fs_metadata_room_for(struct bch_fs *c, bool write);

int fs_metadata_room(struct bch_fs *c);
bool fs_is_dot(const char *name);
int fs_ino_get(struct bch_fs *c, struct ino_set *s, uint64_t inum, struct bch_inode **ret);
int fs_ino_set_write(struct bch_fs *c, struct ino_set *s, struct btree_trans *t);
void fs_touch(struct bch_inode *i, bool mtime);

/* i is unlinked, renamed, linked, truncated, or its xattrs change; or a name leaves dir i */
int fs_flags_no_change(const struct bch_inode *i);

/* data written at offset: append-only files only grow at the end */
int fs_flags_write(const struct bch_inode *i, uint64_t offset);

/* fs_flags_no_change() for inum, read here (xattr calls) */
int fs_flags_no_change_inum(struct bch_fs *c, uint64_t inum);

/* Commit t (with u's extent accounting, if any). */
int fs_commit(struct bch_fs *c, struct btree_trans *t, struct bch_extent_update *u);

/* One transaction writing the inodes of s (and nothing else). */
int fs_commit_inodes(struct bch_fs *c, struct ino_set *s);

extern const struct bch_hash_desc fs_dirent_desc;
uint64_t fs_dirent_hash(struct bch_fs *c, const struct bch_inode *dir, const char *name);

/* The dirent of name in dir (malloc'd) or -ENOENT. */
int fs_dirent_lookup(struct bch_fs *c, uint64_t dir, const struct bch_inode *di, const char *name,
			 struct bch_bkey **ret);

int fs_dirent_put(struct btree_trans *t, uint64_t dir, uint64_t slot, const char *name,
		      uint64_t inum, unsigned d_type);

/* Where a new name goes in dir: -EEXIST if taken. */
int fs_dirent_new_slot(struct bch_fs *c, uint64_t dir, const struct bch_inode *di,
			   const char *name, uint64_t *slot);

/*
 * The handle dirent k (in directory dir) names: the inode in this view, or
 * the root of the subvolume a BCH_DT_SUBVOL dirent names (*d_type: DT_DIR
 * for it).  0 for a subvolume name that is not the subvolume's own: a
 * snapshot's copy of the name (a snapshot does not hold the subvolumes
 * named inside it, as in btrfs), or a name left by a crash mid-delete
 * (fsck removes those); lookup and readdir do not show it.
 */
uint64_t fs_dirent_target(struct bch_fs *c, uint64_t dir, const struct bch_bkey *k, unsigned *d_type);

/* ".." of dir: its parent, or at a subvolume's root the directory holding its name. */
uint64_t fs_parent_handle(struct bch_fs *c, uint64_t dir, const struct bch_inode *di);

/*
 * A new name in directory dir (inode di, current view): the checks, and
 * *slot, where its dirent goes.
 */
int fs_new_name_check(struct bch_fs *c, uint64_t dir, struct bch_inode *di, const char *name,
			  uint64_t *slot);

int fs_inode_free(struct bch_fs *c, uint64_t inum);

/* ------------------------------------------------------------ fs_ops_data.c */

/* Remove extents in [start, end) sectors, in as many transactions as needed. */
int fs_punch_range(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t end,
		       uint64_t new_size, bool set_size);

/* ------------------------------------------------------------ fs_ops_subvol.c */

int fs_subvol_commit(struct bch_fs *c, struct btree_trans *t);

#endif /* _BCACHEFS_FS_OPS_SHARED_H */
