/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_ERRCODE_H
#define _BCACHEFS_ERRCODE_H

/*
 * errcode.h - the project's error codes.
 *
 * Library functions return 0 on success and a negative number on failure:
 * either -errno, or -BCH_ERR_* for conditions errno cannot name.  Each
 * project code maps to an errno class (bch_err_class()) for callers, such as
 * the FUSE driver, that must hand an errno to someone else.
 *
 * x(name, errno class, message)
 */
#define BCH_ERRCODES()								\
	x(sb_not_found,		EINVAL,	"no bcachefs superblock found")		\
	x(sb_bad_magic,		EINVAL,	"superblock: bad magic")		\
	x(sb_bad_csum,		EIO,	"superblock: bad checksum")		\
	x(sb_bad_version,	EINVAL,	"superblock: unsupported format version") \
	x(sb_invalid,		EINVAL,	"superblock: invalid field")		\
	x(sb_too_big,		ENOSPC,	"superblock: does not fit its area")	\
	x(sb_features,		EOPNOTSUPP, "superblock: unknown feature bits")	\
	x(sb_mismatch,		EINVAL,	"devices belong to different filesystems") \
	x(device_too_small,	ENOSPC,	"device too small")			\
	x(device_missing,	ENODEV,	"a member device is missing")		\
	x(device_busy,		EBUSY,	"device is open elsewhere")		\
	x(device_short_io,	EIO,	"short read or write at end of device")	\
	x(injected_fault,	EIO,	"injected fault (test hook)")		\
	x(opt_invalid,		EINVAL,	"invalid option value")			\
	x(opt_unknown,		EINVAL,	"unknown option")			\
	x(csum_mismatch,	EIO,	"checksum mismatch")			\
	x(btree_node_bad,	EIO,	"btree node invalid")			\
	x(btree_node_read,	EIO,	"btree node could not be read")		\
	x(bkey_invalid,		EINVAL,	"invalid key")				\
	x(journal_bad,		EIO,	"journal entry invalid")		\
	x(journal_full,		ENOSPC,	"journal full")				\
	x(journal_missing,	EIO,	"journal entries missing")		\
	x(no_space,		ENOSPC,	"no space left on filesystem")		\
	x(fs_read_only,		EROFS,	"filesystem is read-only")		\
	x(fs_emergency_ro,	EROFS,	"filesystem went read-only after an error") \
	x(transaction_poisoned,	EIO,	"transaction already failed")		\
	x(key_not_found,	ENOENT,	"key not found")				\
	x(compress_failed,	EIO,	"compression failed")			\
	x(decompress_failed,	EIO,	"compressed data is corrupt")

#define BCH_ERR_START	2048	/* above every errno */

enum bch_errcode {
	BCH_ERR_START_ = BCH_ERR_START - 1,
#define x(name, class, msg)	BCH_ERR_##name,
	BCH_ERRCODES()
#undef x
	BCH_ERR_MAX
};

/* Message for a negative return value (project code or -errno). Static string. */
const char *bch_err_str(int err);

/* The errno a project code stands for; -errno values pass through (positive result). */
int bch_err_class(int err);

/*
 * Write a message into err (errlen bytes; err may be NULL) and return ret:
 * for functions that report why they failed without a struct bch_fs.
 */
#include <stddef.h>
int bch_errf(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* _BCACHEFS_ERRCODE_H */
