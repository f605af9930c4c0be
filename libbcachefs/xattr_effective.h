/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_XATTR_EFFECTIVE_H
#define _BCACHEFS_XATTR_EFFECTIVE_H

/*
 * xattr_effective.h - the read-only xattrs "bcachefs_effective.<option>":
 * the value of a per-file option (fs_ops.h) that a file's new data is
 * written with, whether it is the file's own or the filesystem's.
 *
 * A file's options live in its inode (value + 1, 0: take the filesystem's);
 * a directory's are copied into what is created in it, so the inode already
 * holds whatever the directory chain gave it.  The effective value is the
 * inode's when it has one, else the filesystem's option: exactly what
 * bch_io_opts_get() (io.h) hands the data path, which this module asks.
 *
 * Rules (kept by fs_ops_xattr.c's xattr calls, which route the prefix here):
 *   (1) get: the value as text, for every per-file option of a regular file
 *       or directory (the filesystem's when the inode has none); -ENODATA for
 *       a name that is not a per-file option or an inode of another type.
 *   (2) list: names only the options the inode carries a value for, as
 *       bcachefs does (its list emits the inode's defined options), so a
 *       file with no options of its own lists none and copying tools see
 *       nothing extra.
 *   (3) set and remove: -EOPNOTSUPP (ENOTSUP), with the reason in
 *       c->err_msg.  Not EPERM: nobody may set them, and copying tools
 *       (cp -a, tar --xattrs, rsync -X, image put) skip an attribute whose
 *       set is ENOTSUP quietly where EPERM would fail each file.  The value
 *       is changed through "bcachefs.<option>" (or `bcachefs setattr`).
 *   (4) Nothing is stored: no key, no on-disk field.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "opts.h"

struct bch_fs;
struct bch_inode;

#define BCH_XATTR_EFFECTIVE_PREFIX	"bcachefs_effective."

/* Does name start with "bcachefs_effective."? */
bool bch_xattr_is_effective(const char *name);

/*
 * The effective value of per-file option id for inode as text into buf
 * (always NUL-terminated).  -EINVAL when id is not a per-file option.
 */
int bch_inode_opt_effective_text(struct bch_fs *c, const struct bch_inode *inode,
				 enum bch_opt_id id, char *buf, size_t len);

/* getxattr of a full "bcachefs_effective.<option>" name (rule 1). */
ssize_t bch_xattr_effective_get(struct bch_fs *c, uint64_t inum, const char *name, void *buf,
				size_t size);

/*
 * Append to a listxattr buffer at *total the effective names of the options
 * inode carries (rule 2); size 0 counts only.  -ERANGE when buf is short.
 */
int bch_xattr_effective_list(const struct bch_inode *inode, char *buf, size_t size,
			     size_t *total);

/* setxattr / removexattr of one: -EOPNOTSUPP with the reason (rule 3). */
int bch_xattr_effective_set(struct bch_fs *c, const char *name);

#endif /* _BCACHEFS_XATTR_EFFECTIVE_H */
