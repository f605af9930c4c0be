// SPDX-License-Identifier: GPL-2.0
/*
 * errcode.c - messages and errno classes for the codes in errcode.h.
 */
#include <errno.h>
#include <string.h>

#include <stdarg.h>
#include <stdio.h>

#include "errcode.h"

static const struct {
	int		class;
	const char	*msg;
} bch_errcodes[] = {
#define x(name, class, msg)	[BCH_ERR_##name - BCH_ERR_START] = { class, msg },
	BCH_ERRCODES()
#undef x
};

const char *bch_err_str(int err)
{
	if (err < 0)
		err = -err;
	if (err >= BCH_ERR_START && err < BCH_ERR_MAX)
		return bch_errcodes[err - BCH_ERR_START].msg;
	return strerror(err);
}

int bch_err_class(int err)
{
	if (err < 0)
		err = -err;
	if (err >= BCH_ERR_START && err < BCH_ERR_MAX)
		return bch_errcodes[err - BCH_ERR_START].class;
	return err;
}

int bch_errf(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}
