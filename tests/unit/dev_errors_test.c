// SPDX-License-Identifier: GPL-2.0
/*
 * dev_errors_test.c - the members' error counters (superblock field
 * dev_errors, format version 2) and the space figures fs usage and statfs
 * share (bch_fs_space):
 *   - counts reach the disk with the close of a read-write session and come
 *     back at the next open; a read-only session's counts are not written;
 *   - a reset zeroes them and notes the time;
 *   - a field that is not a whole number of entries invalidates the copy;
 *   - the blockdev counts the read and write requests a device fails;
 *   - statfs gives size, free and available exactly as bch_fs_space says,
 *     and available = (free - reserve + reclaimable - promised) / replicas.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "deverr");
	testfs_format(tmpdir, 2, 32, 64 << 10, 2, paths);
}

static void teardown(void)
{
	test_tmpdir_remove(tmpdir);
}

TestSuite(dev_errors, .init = setup, .fini = teardown);

static struct bch_fs *open_fs(unsigned flags)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, 2, flags, 0, err, sizeof(err));

	cr_assert_not_null(c, "open: %s", err);
	return c;
}

static uint64_t count(struct bch_fs *c, unsigned dev, unsigned type, uint64_t *reset)
{
	uint64_t n[BCH_DEV_ERROR_NR];

	bch_dev_errors_get(c, dev, n, reset);
	return n[type];
}

Test(dev_errors, persisted_by_a_read_write_close)
{
	struct bch_fs *c = open_fs(0);
	uint64_t reset;

	cr_assert_eq(count(c, 1, BCH_DEV_ERROR_checksum, &reset), 0);
	cr_assert_eq(reset, 0);
	for (int i = 0; i < 3; i++)
		bch_dev_error_inc(c, 1, BCH_DEV_ERROR_checksum);
	bch_dev_error_inc(c, 0, BCH_DEV_ERROR_read);
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_fs(TESTFS_RO);
	cr_assert_eq(count(c, 1, BCH_DEV_ERROR_checksum, NULL), 3);
	cr_assert_eq(count(c, 0, BCH_DEV_ERROR_read, NULL), 1);
	cr_assert_eq(count(c, 0, BCH_DEV_ERROR_checksum, NULL), 0);
	/* counted in a read-only session: shown, never written */
	bch_dev_error_inc(c, 1, BCH_DEV_ERROR_checksum);
	cr_assert_eq(count(c, 1, BCH_DEV_ERROR_checksum, NULL), 4);
	cr_assert_eq(bch_dev_errors_reset(c), -BCH_ERR_fs_read_only);
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_fs(0);
	cr_assert_eq(count(c, 1, BCH_DEV_ERROR_checksum, NULL), 3);
	cr_assert_eq(bch_dev_errors_reset(c), 0);
	cr_assert_eq(count(c, 1, BCH_DEV_ERROR_checksum, &reset), 0);
	cr_assert_gt(reset, 0);
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_fs(TESTFS_RO);
	cr_assert_eq(count(c, 1, BCH_DEV_ERROR_checksum, &reset), 0);
	cr_assert_eq(count(c, 0, BCH_DEV_ERROR_read, NULL), 0);
	cr_assert_gt(reset, 0, "the reset time was not kept");
	struct bch_sb_field *f = bch_sb_field_get(c->sb, BCH_SB_FIELD_dev_errors);
	cr_assert_not_null(f, "no dev_errors field on a version-2 filesystem");
	cr_assert_eq((f->u64s * 8 - sizeof(*f)) / sizeof(struct bch_dev_errors), 2);

	/* a length that is not whole entries invalidates the copy */
	struct bch_sb *sb = malloc(c->sb_bytes);
	char err[256];
	memcpy(sb, c->sb, c->sb_bytes);
	cr_assert_eq(bch_sb_validate(sb, c->sb_bytes, err, sizeof(err)), 0, "%s", err);
	struct bch_sb_field *g = bch_sb_field_get(sb, BCH_SB_FIELD_dev_errors);
	g->u64s--;	/* the bytes after it now start mid-field: fix the walk by padding */
	((struct bch_sb_field *)((uint64_t *)g + g->u64s))->u64s = 1;
	((struct bch_sb_field *)((uint64_t *)g + g->u64s))->type = 99;	/* unknown: skipped */
	cr_assert_eq(bch_sb_set_csum(sb), 0);
	cr_assert_eq(bch_sb_validate(sb, c->sb_bytes, err, sizeof(err)), -BCH_ERR_sb_invalid);
	cr_assert(strstr(err, "dev_errors"), "%s", err);
	/* an unknown field type alone is skipped */
	memcpy(sb, c->sb, c->sb_bytes);
	g = bch_sb_field_get(sb, BCH_SB_FIELD_dev_errors);
	g->type = 99;
	cr_assert_eq(bch_sb_set_csum(sb), 0);
	cr_assert_eq(bch_sb_validate(sb, c->sb_bytes, err, sizeof(err)), 0, "%s", err);
	free(sb);
	cr_assert_eq(bch_fs_close(c), 0);
}

Test(dev_errors, statfs_is_fs_space)
{
	struct bch_fs *c = open_fs(0);
	uint64_t inum;
	struct statvfs st;
	struct bch_fs_space sp;
	char *buf = calloc(1, 1 << 20);

	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(bch_fs_write(c, inum, (uint64_t)i << 20, buf, 1 << 20), 1 << 20, "%s", c->err_msg);
	/* a bucket left part written: its rest is reclaimable */
	cr_assert_eq(bch_fs_write(c, inum, 3 << 20, buf, 4096), 4096, "%s", c->err_msg);
	free(buf);
	cr_assert_eq(bch_fs_statfs(c, &st), 0);
	bch_fs_space(c, &sp);
	uint64_t bs = st.f_frsize;
	cr_assert_eq(st.f_blocks, sp.size / bs);
	cr_assert_eq(st.f_bfree, sp.free / bs);
	cr_assert_eq(st.f_bavail, sp.available / bs);
	cr_assert_eq(sp.used, sp.size - sp.free);
	uint64_t take = sp.free - sp.reserve + sp.reclaimable;
	cr_assert_eq(sp.available, take > sp.promised ? (take - sp.promised) / sp.replicas : 0);
	cr_assert_gt(sp.reclaimable, 0, "the open data bucket's rest is reclaimable");
	cr_assert_eq(bch_fs_close(c), 0);
}

/*
 * The blockdev counts the requests a device fails (here: a read past the
 * end of a file that shrank under it), not those it refuses up front.
 */
Test(dev_errors, blockdev_counts_failed_requests)
{
	char path[TESTFS_PATH_MAX], buf[4096];
	struct bch_blockdev *d;
	struct bch_dev_io_stats io;

	snprintf(path, sizeof(path), "%s/shrinks.img", tmpdir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(ftruncate(fileno(f), 1 << 20), 0);
	fclose(f);
	cr_assert_eq(bch_dev_open(path, 0, &d), 0);
	cr_assert_eq(bch_dev_read(d, buf, sizeof(buf), 4096), 0);
	cr_assert_eq(truncate(path, 8192), 0);
	cr_assert_neq(bch_dev_read(d, buf, sizeof(buf), 512 << 10), 0);
	cr_assert_eq(bch_dev_read(d, buf, sizeof(buf), 2 << 20), -BCH_ERR_device_short_io);	/* refused */
	bch_dev_io_stats(d, &io);
	cr_assert_eq(io.read_errors, 1);
	cr_assert_eq(io.write_errors, 0);
	bch_dev_close(d);
}
