// SPDX-License-Identifier: GPL-2.0
/*
 * fs_err_test.c - the errors option (fs_err.c): what a filesystem error does.
 *
 * A failed metadata write (the journal entry of an fsync, refused by a test
 * hook) is never safe to go on from: read-only under continue and ro; under
 * panic the filesystem is marked panicked and every later node read fails
 * with fs_panic.  A damaged node met on a read (kind (1) of fs_err.c) keeps
 * the filesystem writable only under continue.  The CLI side (fusemount)
 * is t48-errors-option.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "opts.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static char dir[256];
static char paths[1][TESTFS_PATH_MAX];

static int refuse_writes(void *priv, struct bch_blockdev *dev, enum bch_io_op op,
			 uint64_t offset, const void *buf, size_t len)
{
	(void)priv; (void)dev; (void)op; (void)offset; (void)buf; (void)len;
	return -EIO;
}

static struct bch_fs *open_with(unsigned errors)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));

	cr_assert(c, "open: %s", err);
	c->opts.v[Opt_errors] = errors;
	return c;
}

/* a journal write that fails: what does the filesystem do next? */
static struct bch_fs *fail_a_write(unsigned errors)
{
	static const struct bch_io_hook hook = { .fn = refuse_writes };
	struct bch_fs *c = open_with(errors);
	uint64_t inum;

	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	bch_dev_set_hook(c->devs[0]->bdev, &hook);
	cr_assert_neq(bch_fs_fsync(c), 0, "an fsync whose journal write failed succeeded");
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_assert_geq(c->nr_errors, 1, "the failed write was not counted as a filesystem error");
	return c;
}

static void setup(void)
{
	test_tmpdir_make(dir, sizeof(dir), "fs_err");
	testfs_format(dir, 1, 16, 16 << 10, 1, paths);
}

static void teardown(void)
{
	test_tmpdir_remove(dir);
}

TestSuite(fs_err, .init = setup, .fini = teardown);

Test(fs_err, continue_goes_read_only_after_a_failed_write)
{
	struct bch_fs *c = fail_a_write(0);
	uint64_t inum;

	cr_assert(c->emergency_ro, "errors=continue went on after a half-done metadata write");
	cr_assert(!bch_fs_panicked(c));
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "g", S_IFREG | 0644, 0, 0, 0, &inum), -EROFS);
	bch_fs_close(c);
}

Test(fs_err, ro_goes_read_only)
{
	struct bch_fs *c = fail_a_write(1);
	uint64_t inum;

	cr_assert(c->emergency_ro);
	cr_assert(!bch_fs_panicked(c), "errors=ro panicked");
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "g", S_IFREG | 0644, 0, 0, 0, &inum), -EROFS);
	bch_fs_close(c);
}

Test(fs_err, panic_stops_everything)
{
	struct bch_fs *c = fail_a_write(2);
	struct btree *b;

	cr_assert(bch_fs_panicked(c), "errors=panic did not mark the filesystem panicked");
	cr_assert(c->emergency_ro, "errors=panic left the filesystem writable");
	struct btree_root *root = &c->roots->r[BCH_BTREE_ID_inodes];
	cr_assert_eq(bch_btree_node_get(c, BCH_BTREE_ID_inodes, root->level, root->key, &b),
		     -BCH_ERR_fs_panic, "a node read after the panic did not fail");
	bch_fs_close(c);
}

Test(fs_err, fsck_takes_no_action)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));

	cr_assert(c, "open: %s", err);
	c->opts.v[Opt_errors] = 2;
	cr_assert_eq(bch_fs_error(c, -BCH_ERR_btree_node_bad, true), -BCH_ERR_btree_node_bad);
	cr_assert(!bch_fs_panicked(c) && !c->emergency_ro, "fsck's open acted on the errors option");
	bch_fs_close(c);
}

Test(fs_err, read_error_keeps_writing_only_under_continue)
{
	for (unsigned errors = 0; errors < 3; errors++) {
		struct bch_fs *c = open_with(errors);
		int r = bch_fs_error(c, -BCH_ERR_btree_node_bad, true);
		uint64_t inum;
		char name[8];

		snprintf(name, sizeof(name), "e%u", errors);
		r = bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum);
		if (errors == 0)
			cr_assert_eq(r, 0, "errors=continue: a write after a read error failed: %d", r);
		else
			cr_assert_neq(r, 0, "errors=%u: a write after a read error succeeded", errors);
		cr_assert_eq(bch_fs_panicked(c), errors == 2);
		bch_fs_close(c);
	}
}
