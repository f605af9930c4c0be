// SPDX-License-Identifier: GPL-2.0
/*
 * archive_dl.c - libarchive, loaded only when a tar verb runs (see
 * archive_dl.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "archive_dl.h"
#include "cmds.h"

static struct archive_dl table;
static bool loaded;

int archive_dl_load(const char *cmd, const char *verb, const struct archive_dl **ret)
{
	void *lib = NULL;

	if (!loaded) {
		if (!(lib = dlopen(ARCHIVE_DL_SONAME, RTLD_NOW | RTLD_LOCAL)))
			goto err;
#define x(name)								\
		if (!(table.name = (__typeof__(table.name))dlsym(lib, "archive_" #name))) \
			goto err;
		ARCHIVE_DL_FUNCS()
#undef x
		loaded = true;
	}
	*ret = &table;
	return 0;
err:
	/* dlerror() describes the failed dlopen or dlsym until the next dl call */
	cmd_err(cmd, "%s: cannot load %s: %s", verb, ARCHIVE_DL_SONAME, dlerror());
	memset(&table, 0, sizeof(table));
	if (lib)
		dlclose(lib);
	return -ELIBACC;
}
