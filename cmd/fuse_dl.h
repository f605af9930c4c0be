/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMD_FUSE_DL_H
#define _BCACHEFS_CMD_FUSE_DL_H

/*
 * fuse_dl.h - libfuse3, loaded only when `bcachefs fusemount` runs.
 *
 * Linking libfuse3 mapped it into every command (~136 KB of peak RSS) while
 * only fusemount (and mount.fuse.bcachefs) calls it.  So the binary does
 * not link it: this module owns the table of the entry points
 * cmd_fusemount.c calls, filled by dl.h's loader from FUSE_DL_SONAME on
 * first use.  Member `x` is libfuse's `fuse_x` (reply_err is
 * fuse_reply_err), typed with __typeof__ of the prototype from
 * <fuse_lowlevel.h>, so the compiler checks every call.
 *
 * libfuse3 versions its symbols, and the header maps some names by
 * FUSE_USE_VERSION: at 35, fuse_session_loop_mt() is the macro for
 * fuse_session_loop_mt_32@FUSE_3.2, everything else is @FUSE_3.0.  Each
 * entry names the exact symbol and version a link against these headers
 * imports (`nm -D --undefined-only` of such a binary), resolved with
 * dlvsym(): a newer libfuse3 with a newer default version still gives the
 * ABI these prototypes describe.
 *
 * (1) Opened once and never closed; the table is filled completely or not
 *     at all (dl.h).
 * (2) cmd_fusemount() loads it before it opens the filesystem, so the
 *     session's threads find it loaded; loading is thread-safe anyway.
 */

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>

#include "dl.h"

#define FUSE_DL_SONAME	"libfuse3.so.3"		/* Debian package libfuse3-3 */

/* x(member, function, symbol version): every libfuse3 function fusemount calls. */
#define FUSE_DL_FUNCS()								\
	x(add_direntry,		fuse_add_direntry,		"FUSE_3.0")	\
	x(add_direntry_plus,	fuse_add_direntry_plus,		"FUSE_3.0")	\
	x(daemonize,		fuse_daemonize,			"FUSE_3.0")	\
	x(lowlevel_notify_inval_entry, fuse_lowlevel_notify_inval_entry, "FUSE_3.0") \
	x(lowlevel_notify_inval_inode, fuse_lowlevel_notify_inval_inode, "FUSE_3.0") \
	x(opt_free_args,	fuse_opt_free_args,		"FUSE_3.0")	\
	x(remove_signal_handlers, fuse_remove_signal_handlers,	"FUSE_3.0")	\
	x(reply_attr,		fuse_reply_attr,		"FUSE_3.0")	\
	x(reply_buf,		fuse_reply_buf,			"FUSE_3.0")	\
	x(reply_create,		fuse_reply_create,		"FUSE_3.0")	\
	x(reply_entry,		fuse_reply_entry,		"FUSE_3.0")	\
	x(reply_err,		fuse_reply_err,			"FUSE_3.0")	\
	x(reply_iov,		fuse_reply_iov,			"FUSE_3.0")	\
	x(reply_ioctl,		fuse_reply_ioctl,		"FUSE_3.0")	\
	x(reply_lseek,		fuse_reply_lseek,		"FUSE_3.0")	\
	x(reply_none,		fuse_reply_none,		"FUSE_3.0")	\
	x(reply_open,		fuse_reply_open,		"FUSE_3.0")	\
	x(reply_readlink,	fuse_reply_readlink,		"FUSE_3.0")	\
	x(reply_statfs,		fuse_reply_statfs,		"FUSE_3.0")	\
	x(reply_write,		fuse_reply_write,		"FUSE_3.0")	\
	x(reply_xattr,		fuse_reply_xattr,		"FUSE_3.0")	\
	x(req_ctx,		fuse_req_ctx,			"FUSE_3.0")	\
	x(req_userdata,		fuse_req_userdata,		"FUSE_3.0")	\
	x(session_custom_io,	fuse_session_custom_io,		"FUSE_3.0")	\
	x(session_destroy,	fuse_session_destroy,		"FUSE_3.0")	\
	x(session_fd,		fuse_session_fd,		"FUSE_3.0")	\
	x(session_loop_mt,	fuse_session_loop_mt_32,	"FUSE_3.2")	\
	x(session_mount,	fuse_session_mount,		"FUSE_3.0")	\
	x(session_new,		fuse_session_new,		"FUSE_3.0")	\
	x(session_unmount,	fuse_session_unmount,		"FUSE_3.0")	\
	x(set_signal_handlers,	fuse_set_signal_handlers,	"FUSE_3.0")

struct fuse_dl {
#define x(member, func, ver)	BCH_DL_MEMBER(member, func)
	FUSE_DL_FUNCS()
#undef x
};

/*
 * Load libfuse3 if it is not loaded yet, and point *ret at the table.
 * Returns 0, or -ELIBACC when the library or one of its functions is
 * missing, after printing "bcachefs CMD: cannot load libfuse3.so.3:
 * <dlerror()>" on stderr.
 */
int fuse_dl_load(const char *cmd, const struct fuse_dl **ret);

#endif /* _BCACHEFS_CMD_FUSE_DL_H */
