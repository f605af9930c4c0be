/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMD_ARCHIVE_DL_H
#define _BCACHEFS_CMD_ARCHIVE_DL_H

/*
 * archive_dl.h - libarchive, loaded only when a tar verb runs.
 *
 * Linking libarchive cost every command ~3.4 MB of peak RSS at startup (it
 * brings libxml2, libicu, libstdc++, nettle, lzma, bz2 and acl, with their
 * relocations and static constructors), while only `image import-tar` and
 * `image export-tar` use it.  So the binary does not link it: this module
 * owns the table of the entry points cmd/tar.c calls, filled by dl.h's
 * loader from ARCHIVE_DL_SONAME on first use.
 *
 * The types and prototypes still come from <archive.h> and
 * <archive_entry.h>: each member is declared as a pointer to the __typeof__
 * of the real function, so the compiler checks every call.  Member `x` is
 * libarchive's `archive_x` (read_new is archive_read_new, entry_size is
 * archive_entry_size).
 *
 * (1) The library is opened once and never closed; the table is filled
 *     completely or not at all; a failed load is not retried, every call
 *     prints its reason (dl.h).
 * (2) Loading is thread-safe (dl.h), though tar import and export run on
 *     the command's one thread.
 */

#include <archive.h>
#include <archive_entry.h>

#include "dl.h"

#define ARCHIVE_DL_SONAME	"libarchive.so.13"	/* Debian package libarchive13 */

/* Every libarchive function cmd/tar.c calls, without the "archive_" prefix. */
#define ARCHIVE_DL_FUNCS()			\
	x(error_string)				\
	x(read_new)				\
	x(read_support_filter_all)		\
	x(read_support_format_all)		\
	x(read_open_filename)			\
	x(read_next_header)			\
	x(read_data_block)			\
	x(read_free)				\
	x(write_new)				\
	x(write_set_format_pax)			\
	x(write_set_format_option)		\
	x(write_open_filename)			\
	x(write_header)				\
	x(write_data)				\
	x(write_close)				\
	x(write_free)				\
	x(entry_new)				\
	x(entry_free)				\
	x(entry_pathname)			\
	x(entry_hardlink)			\
	x(entry_symlink)			\
	x(entry_filetype)			\
	x(entry_perm)				\
	x(entry_rdev)				\
	x(entry_uid)				\
	x(entry_gid)				\
	x(entry_size)				\
	x(entry_atime)				\
	x(entry_atime_nsec)			\
	x(entry_atime_is_set)			\
	x(entry_mtime)				\
	x(entry_mtime_nsec)			\
	x(entry_mtime_is_set)			\
	x(entry_xattr_reset)			\
	x(entry_xattr_next)			\
	x(entry_xattr_add_entry)		\
	x(entry_set_pathname)			\
	x(entry_set_hardlink)			\
	x(entry_set_symlink)			\
	x(entry_set_size)			\
	x(entry_unset_ctime)			\
	x(entry_copy_stat)			\
	x(entry_sparse_add_entry)

struct archive_dl {
#define x(name)	BCH_DL_MEMBER(name, archive_##name)
	ARCHIVE_DL_FUNCS()
#undef x
};

/*
 * Load libarchive if it is not loaded yet, and point *ret at the table.
 * Returns 0, or -ELIBACC when the library or one of its functions is
 * missing, after printing "bcachefs CMD: VERB: cannot load libarchive.so.13:
 * <dlerror()>" on stderr; the commands then exit 1 (failure).
 */
int archive_dl_load(const char *cmd, const char *verb, const struct archive_dl **ret);

#endif /* _BCACHEFS_CMD_ARCHIVE_DL_H */
