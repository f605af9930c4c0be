// SPDX-License-Identifier: GPL-2.0
/*
 * fs_err.c - the library's error message slot.
 *
 * The library never prints.  A function that fails with a detailed reason
 * stores it in c->err_msg through bch_fs_err(); the command that called it
 * prints that message (or the bare error string when it is empty).
 * Invariant: the first message of a failing call chain is the most specific
 * one, so bch_fs_err() only overwrites an empty slot or one from an earlier,
 * already-reported call (callers clear it with c->err_msg[0] = 0).
 */
#include <stdarg.h>
#include <stdio.h>

#include "bcachefs.h"

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
