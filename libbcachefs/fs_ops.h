/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FS_OPS_H
#define _BCACHEFS_FS_OPS_H

/*
 * fs_ops.h - the POSIX layer: files, directories, links and xattrs by inode
 * number, shared by the offline image commands, `format --source` and the
 * FUSE driver.
 *
 * Every call returns 0 (or a count) or a negative errno as a POSIX caller
 * expects it (-ENOENT, -ENOTDIR, -EEXIST, -ENAMETOOLONG, -ENOSPC, -EIO ...);
 * details of engine errors are left in c->err_msg.  Each namespace
 * operation is one atomic transaction.  Large data operations (writes,
 * truncates, unlink of a big file) commit in pieces: a crash between them
 * leaves a consistent tree that fsck brings to the final state (extents
 * past i_size, or an unlinked inode with nlink 0, are removed).
 *
 * Names are bytes without '/' or NUL, 1..255 long; "." and ".." are not
 * stored (lookup answers them from the inode's parent pointer).
 * No permission checks happen here: callers (FUSE) do them.  The file
 * flags (immutable, append-only: bch_fs_set_flags() below) are the one rule
 * kept here, for every caller.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "io.h"

struct bch_fs;

/* Root directory and lost+found (format). */
int bch_fs_create_root(struct bch_fs *c, mode_t root_mode, uid_t uid, gid_t gid);

int bch_fs_lookup(struct bch_fs *c, uint64_t dir, const char *name, uint64_t *inum);
int bch_fs_getattr(struct bch_fs *c, uint64_t inum, struct stat *st);
/* The same, and the inode's creation time (ns) from the same read. */
int bch_fs_getattr_btime(struct bch_fs *c, uint64_t inum, struct stat *st, int64_t *btime);
/* bch_fs_getattr() and bch_fs_get_flags()'s FS_*_FL flags, from one inode read. */
int bch_fs_getattr_flags(struct bch_fs *c, uint64_t inum, struct stat *st, unsigned *fs_flags);

/* setattr: which fields to change */
#define BCH_SETATTR_MODE	(1U << 0)
#define BCH_SETATTR_UID		(1U << 1)
#define BCH_SETATTR_GID		(1U << 2)
#define BCH_SETATTR_SIZE	(1U << 3)
#define BCH_SETATTR_ATIME	(1U << 4)
#define BCH_SETATTR_MTIME	(1U << 5)
#define BCH_SETATTR_CTIME	(1U << 6)
#define BCH_SETATTR_BTIME	(1U << 7)
/* with ATIME: the atime a read updates (allowed on immutable and append-only files) */
#define BCH_SETATTR_ATIME_READ	(1U << 8)

struct bch_setattr {
	unsigned	valid;
	mode_t		mode;		/* permission bits (and suid/sgid/sticky) */
	uid_t		uid;
	gid_t		gid;
	uint64_t	size;
	int64_t		atime, mtime, ctime, btime;	/* ns; BCH_TIME_NOW: now */
};
#define BCH_TIME_NOW	INT64_MIN

int bch_fs_setattr(struct bch_fs *c, uint64_t inum, const struct bch_setattr *sa);
/* The same, and on success *st as bch_fs_getattr() would give it after (one inode read less). */
int bch_fs_setattr_stat(struct bch_fs *c, uint64_t inum, const struct bch_setattr *sa, struct stat *st);

/*
 * Set-id rules of Linux (fs/inode.c, fs/attr.c), for callers that act for a
 * user: the FUSE driver.  The library applies none of them by itself
 * (format --source and import-tar copy modes and groups as they are).
 */
struct bch_caller {
	uid_t		uid;		/* fsuid */
	gid_t		gid;		/* fsgid */
	const gid_t	*groups;	/* supplementary groups */
	size_t		nr_groups;
	bool		cap_fsetid;	/* CAP_FSETID: keeps set-id bits */
	bool		cap_fowner;	/* CAP_FOWNER: acts as any file's owner */
	bool		cap_linux_immutable;	/* CAP_LINUX_IMMUTABLE: chattr +i/+a */
	bool		cap_sys_admin;	/* CAP_SYS_ADMIN: sees trusted.* xattrs */
};

/* in_group_p(): gid is the caller's fsgid or one of its groups */
bool bch_caller_in_group(const struct bch_caller *cr, gid_t gid);
/*
 * mode_strip_sgid(): a new non-directory asked with S_ISGID and S_IXGRP in a
 * setgid directory (mode dir_mode, group dir_gid) loses S_ISGID unless the
 * caller is in that group or has CAP_FSETID.  Before the umask / default ACL.
 */
mode_t bch_mode_strip_sgid(mode_t dir_mode, gid_t dir_gid, const struct bch_caller *cr, mode_t mode);
/*
 * inode_init_owner(): the group of a new inode (*gid, in: the caller's) is
 * the directory's when the directory is setgid, and a directory made there
 * is setgid too (*mode).  After the umask / default ACL.
 */
void bch_inode_init_owner(mode_t dir_mode, gid_t dir_gid, mode_t *mode, gid_t *gid);
/*
 * setattr_should_drop_suidgid(): the bits a change of a regular file's data
 * or size by the caller clears: S_ISUID; S_ISGID when group-execute is set
 * or the caller is not in the file's group; nothing with CAP_FSETID.
 */
mode_t bch_kill_priv_bits(mode_t mode, gid_t file_gid, const struct bch_caller *cr);
/* Clear those bits of inum (one inode update, ctime); the bits cleared (0: none) or -errno. */
int bch_fs_kill_priv(struct bch_fs *c, uint64_t inum, const struct bch_caller *cr);

/* mode holds the file type: S_IFREG, S_IFDIR, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK */
int bch_fs_create(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, dev_t rdev,
		  uid_t uid, gid_t gid, uint64_t *inum);
int bch_fs_symlink(struct bch_fs *c, uint64_t dir, const char *name, const char *target,
		   uid_t uid, gid_t gid, uint64_t *inum);
/*
 * bch_fs_create(), or bch_fs_symlink() when target is not NULL (mode
 * unused), that also says what bch_fs_getattr_btime() would of the new
 * inode (*st, *btime), from the inode it wrote: no read after.
 */
int bch_fs_create_stat(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, dev_t rdev,
		       uid_t uid, gid_t gid, const char *target, uint64_t *inum, struct stat *st,
		       int64_t *btime);
/* The target, NUL-terminated, at most size - 1 bytes; returns its length. */
ssize_t bch_fs_readlink(struct bch_fs *c, uint64_t inum, char *buf, size_t size);
int bch_fs_link(struct bch_fs *c, uint64_t inum, uint64_t dir, const char *name);
/*
 * With c->defer_unlinked_free set, an inode losing its last name (unlink,
 * rmdir, rename over it) is kept with nlink 0 and the UNLINKED flag until
 * bch_fs_inode_free() (FUSE: when the kernel forgets it).
 */
int bch_fs_unlink(struct bch_fs *c, uint64_t dir, const char *name);
int bch_fs_rmdir(struct bch_fs *c, uint64_t dir, const char *name);

#define BCH_RENAME_NOREPLACE	(1U << 0)
#define BCH_RENAME_EXCHANGE	(1U << 1)
#define BCH_RENAME_WHITEOUT	(1U << 2)	/* bch_fs_rename_whiteout() only */
int bch_fs_rename(struct bch_fs *c, uint64_t olddir, const char *oldname, uint64_t newdir,
		  const char *newname, unsigned flags);
/*
 * renameat2(RENAME_WHITEOUT): the rename (flags: NOREPLACE or none) and a
 * whiteout at the old name in the same transaction: a character device 0/0
 * (overlayfs's mark of a deleted lower file) owned by uid:gid, mode 0.
 */
int bch_fs_rename_whiteout(struct bch_fs *c, uint64_t olddir, const char *oldname, uint64_t newdir,
			   const char *newname, unsigned flags, uid_t uid, gid_t gid);

/*
 * File flags (chattr(1), lsattr(1)), kept in the inode (bcachefs_format.h,
 * BCH_INODE_IMMUTABLE..): as FS_IOC_GETFLAGS gives them, FS_IMMUTABLE_FL,
 * FS_APPEND_FL, FS_NODUMP_FL, FS_NOATIME_FL, FS_SYNC_FL; and the project ID
 * (FS_IOC_FSGETXATTR).  Every call here applies the kernel's rules for an
 * immutable file (no change of data, size, attributes, xattrs or names: the
 * call returns -EPERM) and an append-only one (writes only at the end; no
 * truncate, unlink, rename, link, mode, owner or xattr change); a directory's
 * flags govern the names in it (immutable: none added or removed; append-only:
 * none removed).  A file with FS_SYNC_FL is flushed after each write.
 */
int bch_fs_get_flags(struct bch_fs *c, uint64_t inum, unsigned *fs_flags, uint32_t *project);
/*
 * Set them all (a read-modify-write is the caller's) for cr as the kernel
 * would (cr NULL: no checks, the offline tools): -EPERM unless the caller
 * owns the file or has CAP_FOWNER, and for a change of FS_IMMUTABLE_FL or
 * FS_APPEND_FL without CAP_LINUX_IMMUTABLE; -EOPNOTSUPP for a flag not kept
 * here.  The first flag or project ID of a filesystem sets
 * BCH_FEATURE_INODE_FLAGS in the superblock (before the inode).  ctime is
 * updated.
 */
int bch_fs_set_flags(struct bch_fs *c, uint64_t inum, unsigned fs_flags, uint32_t project,
		     const struct bch_caller *cr);

ssize_t bch_fs_read(struct bch_fs *c, uint64_t inum, uint64_t offset, void *buf, size_t len);
ssize_t bch_fs_write(struct bch_fs *c, uint64_t inum, uint64_t offset, const void *buf, size_t len);
int bch_fs_truncate(struct bch_fs *c, uint64_t inum, uint64_t size);

/*
 * bch_fs_write() in steps, for a caller that serialises the engine with a
 * lock and serves requests on several threads (the FUSE daemon): the
 * checksum, cipher and device writes of the data run without the lock
 * (io.h, "Writes outside the engine lock").  Each step needs what its
 * BCH_WRITE_ constant says:
 *   begin (BCH_WRITE_PLAN_NEEDS): bch_fs_write_begin() gives the write a
 *     ticket (the order of issue), and plans it when it can (op->planned):
 *     the file's space allocated as bch_fs_write() would allocate it.  0,
 *     or -ENOMEM (no ticket: nothing to end).  What it does not plan is
 *     written the old way at the end: may_plan false; a write that is
 *     not one transaction of bch_fs_write() (it crosses a 1 MiB
 *     boundary); one that fails a check (bch_fs_write() gives the error);
 *     a write needing the old bytes of a partial block while an earlier
 *     write of the file is in flight (that block may be in it); one the
 *     data layer does not plan (compression, erasure coding); any failure
 *     to allocate; any write while the writes not planned in flight would
 *     not fit beside it (it would take their space ahead of them).  A
 *     write not planned waits for every planned write issued before it,
 *     of any file: its answer (ENOSPC) is then the old path's for the
 *     state those writes leave, as if done in turn.
 *   run (BCH_WRITE_RUN_NEEDS): bch_fs_write_run(), planned writes only.
 *   end (BCH_WRITE_INDEX_NEEDS): once bch_fs_write_turn() (every earlier
 *     write of the same handle ended, and when not planned every earlier
 *     planned one: wait with the lock released until it is), bch_fs_write_end() commits the index update (extent keys,
 *     i_size, mtime and ctime: one transaction, the journal), or writes the
 *     old way (not planned, or the commit failed: then nothing of the plan
 *     is kept); a failed run gives the space back and returns its error.
 *     Returns what bch_fs_write() returns.
 * So overlapping writes of one file land in their order of issue, and a
 * crash loses a write whose index update was not journalled as a whole.
 * bch_fs_writes_mark() and bch_fs_writes_before(): whether a write of
 * handle issued before the mark is still in flight (fsync waits for them).
 * ws->planned: planned writes in flight, holding space (a caller that
 * reopens or changes the devices waits until none is, and plans no more).
 */
struct bch_fs_write_op;

struct bch_fs_writes {
	struct bch_fs_write_op	**op;		/* in flight, in order of issue */
	unsigned		nr, cap;
	unsigned		planned;
	uint64_t		seq;		/* the next ticket */
};

struct bch_fs_write_op {
	uint64_t		handle, offset;
	const void		*buf;
	size_t			len;
	uint64_t		ticket;
	bool			planned;
	bool			redone;		/* planned, but written the old way at the end */
	int			run_r;		/* the run's result */
	char			*bounce;	/* whole blocks: the old bytes around buf (read at
					 * the plan) and buf (copied in at the run) */
	size_t			bounce_off;	/* where buf goes in it */
	char			*rmw_keys;	/* the extent keys under those old bytes */
	size_t			rmw_keys_len;
	bool			rmw_keys_ok;	/* they were taken (none: NULL, 0) */
	uint64_t		rmw_size;	/* and the file's size, when they were read */
	struct bch_write_plan	pl;
	/* the inode as the plan read it, current while bch_btree_inode_commits() is inode_gen */
	struct bch_inode	inode;
	uint64_t		inode_gen;
};

int bch_fs_write_begin(struct bch_fs *c, struct bch_fs_writes *ws, struct bch_fs_write_op *op,
		       uint64_t handle, uint64_t offset, const void *buf, size_t len, bool may_plan);
void bch_fs_write_run(struct bch_fs_write_op *op);
bool bch_fs_write_turn(const struct bch_fs_writes *ws, const struct bch_fs_write_op *op);
ssize_t bch_fs_write_end(struct bch_fs *c, struct bch_fs_writes *ws, struct bch_fs_write_op *op);
uint64_t bch_fs_writes_mark(const struct bch_fs_writes *ws);
bool bch_fs_writes_before(const struct bch_fs_writes *ws, uint64_t handle, uint64_t mark);
void bch_fs_writes_exit(struct bch_fs_writes *ws);
/*
 * Share len bytes of src at src_off as dst at dst_off (reflink.h: no data
 * is copied for whole blocks; the unaligned head and tail, and everything
 * when the two offsets differ modulo the block size, are copied; so is a
 * source in a read-only subvolume whose extents are not shared yet: they
 * cannot be made indirect there).  The
 * handles may name different subvolumes.  Stops at src's end; dst grows
 * as a write would.  Returns the bytes done (fewer after an error part
 * way: each step is committed on its own) or -errno: -EINVAL for
 * overlapping ranges of one file or a file that is not regular, -EISDIR,
 * -EFBIG, -EROFS, -ENOSPC.  What copy_file_range needs beyond that
 * (EXDEV, EBADF, flags) is the caller's.
 */
ssize_t bch_fs_remap_range(struct bch_fs *c, uint64_t src, uint64_t src_off, uint64_t dst,
			   uint64_t dst_off, uint64_t len);
/* mode: 0 or FALLOC_FL_* (KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE) */
int bch_fs_fallocate(struct bch_fs *c, uint64_t inum, int mode, uint64_t offset, uint64_t len);
/* SEEK_DATA / SEEK_HOLE from offset; -ENXIO past the end */
int64_t bch_fs_seek(struct bch_fs *c, uint64_t inum, uint64_t offset, int whence);
int bch_fs_fsync(struct bch_fs *c);
/*
 * bch_fs_fsync() in steps, for a caller that lets its lock go while the
 * devices work (journal.h, bch_journal_flush_step()): *seq 0 at first; 0 or
 * -errno: done; 1: call bch_fs_fsync_wait() without the lock, then this
 * again.
 */
int bch_fs_fsync_step(struct bch_fs *c, uint64_t *seq);
void bch_fs_fsync_wait(struct bch_fs *c);
/*
 * For a caller that may have c closed and another filesystem opened in its
 * place while an fsync waits (fusemount's command bodies): whether that
 * fsync's seq survived is told by journal seqs, which continue across an
 * open (the journal restarts after c->open_seq, never at a seq written
 * before).  bch_fs_journal_seqs(): *durable, the newest seq durable now;
 * *need, the newest a flush now would make durable (0: nothing to flush).
 * bch_fs_open_durable(): of a filesystem just opened, the newest seq of
 * the earlier sessions that is durable: c->open_seq when the open proves
 * it (opened clean: that close flushed it; read-write: the session's first
 * entry flushed every device first), else 0 (read-only after a close that
 * did not finish: what it read back may be only in a volatile cache).
 */
void bch_fs_journal_seqs(struct bch_fs *c, uint64_t *durable, uint64_t *need);
uint64_t bch_fs_open_durable(struct bch_fs *c);

/*
 * Entries of dir from cursor pos ("." is 0, ".." 1, then name hashes):
 * fn gets each with the cursor of the entry after it; a nonzero return
 * stops the listing (and is returned).  Cursors stay valid across changes.
 */
typedef int (*bch_readdir_fn)(void *priv, const char *name, size_t len, uint64_t inum,
			      unsigned d_type, uint64_t next_pos);
int bch_fs_readdir(struct bch_fs *c, uint64_t dir, uint64_t pos, bch_readdir_fn fn, void *priv);

/*
 * xattrs by full name ("user.x", "trusted.x", "security.x", "system.posix_acl_*",
 * the per-file options "bcachefs.<option>", below, and the read-only
 * "bcachefs_effective.<option>" of xattr_effective.h: get and list only,
 * set and remove -EOPNOTSUPP)
 */
ssize_t bch_fs_getxattr(struct bch_fs *c, uint64_t inum, const char *name, void *buf, size_t size);
int bch_fs_setxattr(struct bch_fs *c, uint64_t inum, const char *name, const void *val,
		    size_t size, int flags);	/* XATTR_CREATE / XATTR_REPLACE */
ssize_t bch_fs_listxattr(struct bch_fs *c, uint64_t inum, char *buf, size_t size);
int bch_fs_removexattr(struct bch_fs *c, uint64_t inum, const char *name);
/*
 * A write's loss of file capabilities (Linux's cap_inode_killpriv): the
 * security.capability xattr removed whatever the file flags (append-only
 * files included, as the kernel's own removal is not a user's change).
 * 0 when removed, -ENODATA when there was none.
 */
int bch_fs_kill_caps(struct bch_fs *c, uint64_t inum);
/*
 * setfacl: the access ACL (acl NULL: none, removed if there is one) and the
 * mode's permission and set-id bits in one transaction, so a refused change
 * (-ENOSPC, -EROFS) changes neither.
 */
int bch_fs_set_acl(struct bch_fs *c, uint64_t inum, const void *acl, size_t size, mode_t mode);

int bch_fs_statfs(struct bch_fs *c, struct statvfs *st);

/*
 * Per-file options: foreground_target, background_target, promote_target,
 * compression, background_compression, data_checksum, data_replicas.  Kept
 * in the inode, copied into files and directories created inside a
 * directory later (not into existing ones), and seen as xattrs
 * "bcachefs.<option>" by the xattr calls above: get gives the value as
 * text (a target as its label, "dev N" or "none"; "zstd:3"), -ENODATA when
 * the file inherits the filesystem's; set parses it as `format` does
 * (-EINVAL with the reason in c->err_msg: an unknown label, a bad value, a
 * file that is not a regular file or directory); remove makes the file
 * inherit again; list names the ones set.  A name under "bcachefs." that is
 * not an option: -EINVAL to set, -ENODATA to get or remove.  On a
 * read-only filesystem a change that passes every other check gets -EROFS
 * (so a read-only open can check a change before a read-write one).  Setting
 * background_target or background_compression of a regular file schedules
 * rebalance for it.
 */
/* Is name (without "bcachefs.") a per-file option? */
bool bch_fs_is_inode_opt(const char *name);
/* Set one (value NULL: inherit the filesystem's again); -EINVAL as above. */
int bch_fs_set_inode_opt(struct bch_fs *c, uint64_t inum, const char *opt, const char *value);

/*
 * Resolve a path from the root without following symlinks in its last
 * component (follow_last: follow there too).  Symlinks inside the path are
 * followed within the filesystem (at most 40).
 */
int bch_fs_lookup_path(struct bch_fs *c, const char *path, bool follow_last, uint64_t *inum);
/* The same from directory start for relative paths. */
int bch_fs_lookup_path_at(struct bch_fs *c, uint64_t start, const char *path, bool follow_last,
			  uint64_t *inum);
/*
 * The directory holding path's last name (resolved from the root) and the
 * name itself, which points into buf (a copy of path, trailing slashes
 * dropped).  -EEXIST for the root itself.
 */
int bch_fs_lookup_parent(struct bch_fs *c, const char *path, uint64_t *dir, char *buf, size_t len,
			 char **name);

/*
 * For fsck: name hashes and direct dirent/xattr changes that keep the
 * probing invariant of hash_table.h but touch no inode (fsck fixes link
 * counts and back pointers itself).
 */
struct bch_inode;
struct bch_bkey;
uint64_t bch_fs_dirent_hash(struct bch_fs *c, const struct bch_inode *dir, const char *name);
/* The slot a lookup of name in dir finds (the first entry of that name). */
int bch_fs_dirent_first(struct bch_fs *c, uint64_t dir, const struct bch_inode *di, const char *name,
			uint64_t *slot);
int bch_fs_dirent_add(struct bch_fs *c, uint64_t dir, const char *name, uint64_t inum, unsigned d_type);
int bch_fs_dirent_delete(struct bch_fs *c, uint64_t dir, uint64_t slot);
uint64_t bch_fs_xattr_hash(struct bch_fs *c, const struct bch_inode *i, const struct bch_bkey *k);
int bch_fs_xattr_first(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
		       const struct bch_bkey *k, uint64_t *slot);
int bch_fs_xattr_reinsert(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
			  const struct bch_bkey *k);
/*
 * fsck: is every piece of a value kept in pieces there, of the right
 * length?  0, or -EIO (message in c->err_msg).
 */
int bch_fs_xattr_pieces_check(struct bch_fs *c, uint64_t inum, uint32_t pieces);
/* fsck: delete the pieces of value id of inum from piece `from` on. */
int bch_fs_xattr_pieces_drop(struct bch_fs *c, uint64_t inum, uint32_t id, unsigned from);
/* fsck: remove the xattr at slot (its pieces are left to fsck: orphans). */
int bch_fs_xattr_delete_at(struct bch_fs *c, uint64_t inum, uint64_t slot);
/* Free an inode with no links: its extents, xattrs, leftover whiteouts, the inode. */
int bch_fs_inode_free(struct bch_fs *c, uint64_t inum);
/*
 * bch_fs_inode_free() of those of inums[0..nr) that have no links (others,
 * and those gone, are left alone), the small ones (no xattrs, at most a few
 * extent keys) of one subvolume together, up to 64 in one transaction: the
 * FUSE driver frees the files an rm -rf unlinked in batches, not one commit
 * each.  An inode given twice is freed once.  The first error (-errno),
 * the others still tried.
 */
int bch_fs_inodes_free(struct bch_fs *c, const uint64_t *inums, size_t nr);

/*
 * Subvolumes and snapshots (snapshot.h, bcachefs_format.h).  File handles:
 * every inum taken or given above is a handle, the subvolume ID in the top
 * 16 bits and the inode number in the low 48 (BCH_HANDLE_INUM_BITS), so the
 * same file in two snapshots has two numbers; subvolume 0's handles are
 * plain inode numbers.  Links and renames between subvolumes: -EXDEV.
 * A subvolume shows as a directory in its parent (lookup and readdir give
 * its root's handle, DT_DIR); unlink/rmdir of it -EPERM, a rename over it
 * -EBUSY; its own name moves with rename inside its parent subvolume.  In a read-only subvolume every change is -EROFS.
 * The filesystem must be format version 3 (-EOPNOTSUPP, reason in
 * c->err_msg).  Inside a view the library entered itself (fsck, the
 * subvolume calls), the numbers these calls give back are handles too:
 * mask them (BCH_HANDLE_INUM_MASK) before using them as inode numbers.
 */
/* A new empty subvolume named name in dir; *ret: its root's handle. */
int bch_fs_subvol_create(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, uid_t uid,
			 gid_t gid, uint64_t *ret);
/*
 * A snapshot of the subvolume whose root is src, named name in dir (ro:
 * read-only).  Costs the same for any size of tree: no key is copied.
 * -EINVAL when src is not a subvolume's root.
 */
int bch_fs_subvol_snapshot(struct bch_fs *c, uint64_t src, uint64_t dir, const char *name, bool ro,
			   uint64_t *ret);
/*
 * Delete the subvolume named name in dir (its keys go with
 * bch_snapshot_gc(), in the background or offline).  -EINVAL: not a
 * subvolume; -ENOTEMPTY: another subvolume is named inside it.
 */
int bch_fs_subvol_delete(struct bch_fs *c, uint64_t dir, const char *name);
/* Where subvolume subvol is named, from the filesystem's root ("/" for 0). */
int bch_fs_subvol_path(struct bch_fs *c, uint32_t subvol, char *buf, size_t len);
/* The subvolume of a handle. */
uint32_t bch_fs_subvol_of(uint64_t handle);

#endif /* _BCACHEFS_FS_OPS_H */
