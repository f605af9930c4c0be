// SPDX-License-Identifier: GPL-2.0
/* tmpdir.c - per-test temporary directories (see tmpdir.h). */
#include <criterion/criterion.h>
#include <ftw.h>
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

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* The directory and everything in it (a test may make subdirectories). */
void test_tmpdir_remove(const char *dir)
{
	nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
