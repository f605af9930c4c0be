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
 *
 * The dl_* codes say that a library loaded on first use (dl.h) is not
 * there: a missing piece of the system, never damage on disk.  Their class,
 * ELIBACC, is theirs alone (bch_err_is_dl()); their messages name the
 * library by the soname dl.h gives it.
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "dl.h"

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
	x(device_delay_spec,	EINVAL,	"BCACHEFS_TEST_DEVICE_DELAY is not PATH=USEC[,PATH=USEC...]") \
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
	x(fs_panic,		EIO,	"filesystem error with errors=panic: stopping") \
	x(transaction_poisoned,	EIO,	"transaction already failed")		\
	x(key_not_found,	ENOENT,	"key not found")				\
	x(compress_failed,	EIO,	"compression failed")			\
	x(decompress_failed,	EIO,	"compressed data is corrupt")		\
	x(key_missing,		ENOKEY,	"filesystem is encrypted and no key was given") \
	x(key_wrong,		EKEYREJECTED, "wrong passphrase or key")	\
	x(key_unwritten,	ENOKEY,	"no key recorded: the format did not finish")	\
	x(dl_zlib,		ELIBACC, "cannot load " BCH_SONAME_ZLIB " (gzip compression)")	\
	x(dl_lz4,		ELIBACC, "cannot load " BCH_SONAME_LZ4 " (lz4 compression)")	\
	x(dl_zstd,		ELIBACC, "cannot load " BCH_SONAME_ZSTD " (zstd compression)")	\
	x(dl_xxhash,		ELIBACC, "cannot load " BCH_SONAME_XXHASH " (xxhash64)")	\
	x(dl_isal,		ELIBACC, "cannot load " BCH_SONAME_ISAL " (erasure coding)")

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
 * err says a shared library could not be loaded (a dl_* code, or -ELIBACC):
 * the environment is missing a piece, so callers that would otherwise take a
 * failed check for damage (and repair it) must pass err up instead.
 */
static inline bool bch_err_is_dl(int err)
{
	return err < 0 && bch_err_class(err) == ELIBACC;
}

/*
 * Write a message into err (errlen bytes; err may be NULL) and return ret:
 * for functions that report why they failed without a struct bch_fs.
 */
int bch_errf(char *err, size_t errlen, int ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* _BCACHEFS_ERRCODE_H */
