/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_TEST_TMPDIR_H
#define _BCH_TEST_TMPDIR_H

/*
 * tmpdir.h - a private directory per test for image files, removed after.
 * Tests create files directly inside it (one level), never subdirectories.
 */

#include <stddef.h>

/*
 * mkdtemp "/tmp/bch-<name>-XXXXXX" into dir (len >= 64); fails the test on
 * error.  BCH_TEST_TMPDIR replaces /tmp (tests/run-all.sh: a tmpfs, where
 * the images' fdatasync() costs nothing; a short path: dir is 64 bytes).
 */
void test_tmpdir_make(char *dir, size_t len, const char *name);
/* Remove every file in dir, then dir.  A missing dir is not an error. */
void test_tmpdir_remove(const char *dir);

#endif
