/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMD_COPY_H
#define _BCACHEFS_CMD_COPY_H

/*
 * copy.h - copying trees between the host and an open filesystem, for
 * `format --source`, `image put/get/extract`.
 *
 * Copy in: regular files (holes kept through SEEK_DATA/SEEK_HOLE), hard
 * links (by host device and inode), symlinks, device nodes, fifos,
 * sockets, xattrs, owners, modes and times in ns.  Directory entries are
 * taken in name order, so the same tree gives the same image.  It streams:
 * memory holds one directory listing per level and the hard-link map.
 *
 * Copy out never writes outside the destination: every file is created
 * relative to a directory descriptor this code opened itself, with
 * O_NOFOLLOW and O_EXCL, so neither symlinks from the image nor ones
 * already in the destination are followed.
 *
 * Copy out with keep_going (image extract) does not stop at a file or a
 * directory the filesystem cannot read: it names it on stderr as
 * "bcachefs CMD: DEV: /path/in/image: what: error", counts it in failed,
 * and goes on with the rest of the tree.  A regular file whose data could
 * not all be read is removed, never left truncated or zeroed; a directory
 * that cannot be listed (wholly or in part) keeps what could be extracted.
 * Errors of the host side that would repeat for every file (no space,
 * read-only destination, no memory, a missing library) stop the copy.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct bch_fs;
struct copy_links;
struct bch_spec;

struct copy_ctx {
	struct bch_fs		*c;
	const char		*cmd;		/* for messages */
	bool			progress;	/* on a terminal: progress line on stderr */
	bool			owners;		/* copy out: set owners (root) */
	uint64_t		files, bytes;
	uint64_t		warnings;
	bool			keep_going;	/* copy out: go on past unreadable files */
	uint64_t		failed;		/* copy out: files and dirs not (wholly) copied */
	const char		*dev;		/* copy out: the device list, for messages */
	double			last_progress;
	struct copy_links	*links;
	char			*buf;		/* 1 MiB */
	const struct bch_spec	*spec;		/* copy in: owner maps, --timestamp (or NULL) */
};

int  copy_ctx_init(struct copy_ctx *x, struct bch_fs *c, const char *cmd);
void copy_ctx_exit(struct copy_ctx *x);
void copy_progress_done(struct copy_ctx *x);

/*
 * Copy host path src into directory dir of the filesystem as name; with
 * name NULL, src must be a directory whose contents (and attributes) go
 * into dir itself (format --source).  Negative errno, message printed.
 */
int copy_in(struct copy_ctx *x, const char *src, uint64_t dir, const char *name);

/*
 * Copy in: host file (dev, ino) is already inode inum of the filesystem, so
 * a name of it copied in later becomes a hard link to inum (image update:
 * the files it keeps).
 */
void copy_link_note(struct copy_ctx *x, uint64_t dev, uint64_t ino, uint64_t inum);

/*
 * Write host file src's data (st: its lstat) into the regular file inum,
 * holes kept, and set its size (image update: inum is empty, or only its
 * tail past st_size would be left).  Negative errno, message printed.
 */
int copy_in_data(struct copy_ctx *x, const char *src, uint64_t inum, const struct stat *st);
/* st's atime; its mtime when times are fixed (SOURCE_DATE_EPOCH: reading a source moves its atime). */
int64_t copy_host_atime(const struct stat *st);
struct bch_setattr;
/* sa gets st's ctime (BCH_SETATTR_CTIME), unless SOURCE_DATE_EPOCH is set. */
void copy_host_ctime(struct bch_setattr *sa, const struct stat *st);

/*
 * Copy out: the path in the image of what the next copy_out() or
 * copy_out_contents() call copies, for messages.
 */
void copy_out_set_root(struct copy_ctx *x, const char *image_path);

/*
 * Copy inum (named name in the image, for messages) into host directory
 * dirfd as dst_name; directories recursively.  Negative errno when the
 * copy stopped (message printed); with keep_going, 0 after a failure that
 * was named and counted in x->failed.
 */
int copy_out(struct copy_ctx *x, uint64_t inum, int dirfd, const char *dst_name);

/* Copy the contents of directory inum into the host directory dirfd. */
int copy_out_contents(struct copy_ctx *x, uint64_t inum, int dirfd);

/*
 * Remove dir/name from the open filesystem, a whole tree for a directory
 * (children first).  0 or -errno of the first failure (what came before it
 * is gone).  image rm -r and import-tar's whiteouts.
 */
int copy_rm_tree(struct bch_fs *c, uint64_t dir, const char *name);
/* The names in directory dir of the image ("." and ".." left out), read whole before any change. */
struct copy_names {
	char		**name;
	size_t		nr, cap;
};
int copy_names_read(struct bch_fs *c, uint64_t dir, struct copy_names *l);
void copy_names_free(struct copy_names *l);

#endif /* _BCACHEFS_CMD_COPY_H */
