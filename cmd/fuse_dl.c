// SPDX-License-Identifier: GPL-2.0
/*
 * fuse_dl.c - libfuse3, loaded only when fusemount runs (see fuse_dl.h).
 */
#include <errno.h>

#include "cmds.h"
#include "fuse_dl.h"

static struct fuse_dl table;

static const struct bch_dl_sym syms[] = {
#define x(member, func, ver)	BCH_DL_SYM(struct fuse_dl, member, func, ver)
	FUSE_DL_FUNCS()
#undef x
};

static struct bch_dl_lib lib = BCH_DL_LIB(FUSE_DL_SONAME, -ELIBACC, syms, &table);

int fuse_dl_load(const char *cmd, const struct fuse_dl **ret)
{
	int r = bch_dl_load(&lib);

	if (r) {
		cmd_err(cmd, "cannot load %s: %s", lib.soname, lib.why);
		return r;
	}
	*ret = &table;
	return 0;
}
