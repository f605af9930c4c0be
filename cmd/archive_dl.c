// SPDX-License-Identifier: GPL-2.0
/*
 * archive_dl.c - libarchive, loaded only when a tar verb runs (see
 * archive_dl.h).
 */
#include <errno.h>

#include "archive_dl.h"
#include "cmds.h"

static struct archive_dl table;

static const struct bch_dl_sym syms[] = {
#define x(name)	BCH_DL_SYM(struct archive_dl, name, archive_##name, NULL)
	ARCHIVE_DL_FUNCS()
#undef x
};

static struct bch_dl_lib lib = BCH_DL_LIB(ARCHIVE_DL_SONAME, -ELIBACC, syms, &table);

int archive_dl_load(const char *cmd, const char *verb, const struct archive_dl **ret)
{
	int r = bch_dl_load(&lib);

	if (r) {
		cmd_err(cmd, "%s: cannot load %s: %s", verb, lib.soname, lib.why);
		return r;
	}
	*ret = &table;
	return 0;
}
