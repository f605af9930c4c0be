// SPDX-License-Identifier: GPL-2.0
/* tmpdir.c - per-test temporary directories (see tmpdir.h). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tmpdir.h"

void test_tmpdir_make(char *dir, size_t len, const char *name)
{
	const char *base = getenv("BCH_TEST_TMPDIR");

	snprintf(dir, len, "%s/bch-%s-XXXXXX", base && *base ? base : "/tmp", name);
	cr_assert(mkdtemp(dir), "mkdtemp %s: %s", dir, strerror(errno));
}

void test_tmpdir_remove(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(dir);
}
