// SPDX-License-Identifier: GPL-2.0
/*
 * fs_err.c - the library's error message slot, and what a filesystem
 * error does (the errors option).
 *
 * The library never prints.  A function that fails with a detailed reason
 * stores it in c->err_msg through bch_fs_err(); the command that called it
 * prints that message (or the bare error string when it is empty).
 * Invariant: the first message of a failing call chain is the most specific
 * one, so bch_fs_err() only overwrites an empty slot or one from an earlier,
 * already-reported call (callers clear it with c->err_msg[0] = 0).
 *
 * Filesystem errors: bch_fs_error() is the one place that reads the errors
 * option.  Two kinds reach it:
 *   (1) metadata found damaged outside fsck (a btree node that cannot be
 *       read or fails validation): nothing was changed; the call that met
 *       it fails.
 *   (2) a metadata write that failed (a node write, a journal entry, a
 *       split or commit applied in part): what is in memory is no longer
 *       what can reach the disk.
 * and then, by the option:
 *   continue  (1): the filesystem stays writable; the error is counted
 *             (c->nr_errors) and its message left for the command.  (2) is
 *             never safe to continue from: it goes read-only as with ro.
 *   ro        the filesystem goes read-only (c->emergency_ro): every later
 *             write fails with fs_emergency_ro and close writes nothing.
 *   panic     read-only as ro, c->panicked set, and -BCH_ERR_fs_panic
 *             returned: the command (bch_fs_panicked()) exits at once
 *             without closing, so nothing more is written.
 * fsck (opts fsck) is looking for damage: its opens take no action here.
 */
#include <stdarg.h>
#include <stdio.h>

#include "bcachefs.h"
#include "errcode.h"
#include "opts.h"

int bch_fs_err(struct bch_fs *c, int err, const char *fmt, ...)
{
	va_list ap;

	if (!c || c->err_msg[0])
		return err;
	va_start(ap, fmt);
	vsnprintf(c->err_msg, sizeof(c->err_msg), fmt, ap);
	va_end(ap);
	return err;
}

int bch_fs_error(struct bch_fs *c, int err, bool can_continue)
{
	if (!c || c->opts.v[Opt_fsck])
		return err;
	c->nr_errors++;
	if (!c->first_error)
		c->first_error = err;
	if (c->read_only && c->opts.v[Opt_errors] != 2)
		return err;	/* nothing to stop writing */
	switch (c->opts.v[Opt_errors]) {
	case 0:		/* continue */
		if (can_continue)
			return err;
		break;
	case 2:		/* panic */
		c->panicked = true;
		c->emergency_ro = true;
		return -BCH_ERR_fs_panic;
	}
	c->emergency_ro = true;
	return err;
}
