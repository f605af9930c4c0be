// SPDX-License-Identifier: GPL-2.0
/*
 * device_review_test.c - findings of the review of the device work
 * (issue 20) that need the engine's API to reproduce (the CLI ones are in
 * tests/cli/t37-device-review.sh).
 *
 * evacuated_member_gets_no_journal: a member set read-only and evacuated
 * while the filesystem stays open (a mounted filesystem: no reopen) "holds
 * nothing" (data_job.h, cmd_device.c's message), so the user may pull it.
 * The journal chose its writable members at open only, so fsynced updates
 * kept going to the evacuated member: a crash, then an open without it,
 * lost them.  The crash state is the images as they are right after the
 * fsync (the filesystem not closed).  Seed printed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "data_job.h"
#include "device.h"
#include "fs.h"
#include "fs_ops.h"
#include "opts.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED	2037
#define NFILES	24	/* half before the evacuation, half after (an fsync each) */
#define FBYTES	(48u << 10)

static void fill(unsigned char *p, size_t n, unsigned f)
{
	for (size_t i = 0; i < n; i++)
		p[i] = random() ^ f;
}

Test(device_review, evacuated_member_gets_no_journal, .timeout = 120)
{
	char dir[64], paths[2][TESTFS_PATH_MAX], crash[1][TESTFS_PATH_MAX], err[512];
	static unsigned char data[NFILES][FBYTES], buf[FBYTES];
	uint64_t inum[NFILES];

	fprintf(stderr, "device_review: seed %u\n", SEED);
	srandom(SEED);
	test_tmpdir_make(dir, sizeof(dir), "devreview");
	testfs_format(dir, 2, 16, 16 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 2, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);

	/* files before: some of them land on member 0 */
	for (unsigned f = 0; f < NFILES / 2; f++) {
		char name[16];
		snprintf(name, sizeof(name), "a%u", f);
		fill(data[f], FBYTES, f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum[f]), 0);
		cr_assert_eq(bch_fs_write(c, inum[f], 0, data[f], FBYTES), (ssize_t)FBYTES);
	}
	cr_assert_eq(bch_fs_fsync(c), 0, "%s", c->err_msg);

	/* device evacuate 0, as its body does it: ro, then the job to its end */
	cr_assert_eq(bch_dev_set_state(c, 0, BCH_MEMBER_STATE_ro, false, err, sizeof(err)), 0, "%s", err);
	struct bch_data_job j = { .kind = BCH_DATA_JOB_evacuate, .dev = 0 };
	cr_assert_eq(bch_data_job_init(c, &j, err, sizeof(err)), 0, "%s", err);
	int r;
	while ((r = bch_data_job_step(c, &j, 1 << 20)) > 0)
		;
	cr_assert_eq(r, 0, "%s", c->err_msg);
	cr_assert_eq(j.stuck, 0, "%s", j.problem);
	struct bch_dev_holdings h;
	bch_dev_holdings(c, 0, 0, &h);
	cr_assert(!h.btree_sectors && !h.user_sectors, "member 0 still holds data after evacuate");

	/* files after, fsynced: then the power goes (the images as they are now) */
	for (unsigned f = NFILES / 2; f < NFILES; f++) {
		char name[16];
		snprintf(name, sizeof(name), "b%u", f);
		fill(data[f], FBYTES, f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum[f]), 0);
		cr_assert_eq(bch_fs_write(c, inum[f], 0, data[f], FBYTES), (ssize_t)FBYTES);
		cr_assert_eq(bch_fs_fsync(c), 0, "%s", c->err_msg);
	}
	snprintf(crash[0], sizeof(crash[0]), "%s/crash1.img", dir);
	testfs_copy_file(paths[1], crash[0]);
	bch_fs_close(c);

	/* the evacuated member pulled: open without it */
	struct bch_opts o;
	char *pp[1] = { crash[0] };
	memset(&o, 0, sizeof(o));
	/* the replicas table of a crash state may still name member 0: a superset */
	bch_opt_set(&o, Opt_very_degraded, 1);
	c = NULL;
	cr_assert_eq(bch_fs_open(pp, 1, &o, &c, err, sizeof(err)), 0,
		     "open without the evacuated member: %s", err);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		uint64_t ino;
		snprintf(name, sizeof(name), f < NFILES / 2 ? "a%u" : "b%u", f);
		cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &ino), 0,
			     "%s (fsynced) lost: %s", name, c->err_msg);
		cr_assert_eq(bch_fs_read(c, ino, 0, buf, FBYTES), (ssize_t)FBYTES, "%s: %s", name,
			     c->err_msg);
		cr_assert(!memcmp(buf, data[f], FBYTES), "%s reads wrong", name);
	}
	bch_fs_close(c);
	test_tmpdir_remove(dir);
}

/*
 * close_failure_keeps_the_fs_open: a membership change closes the
 * filesystem first; when that close failed (a write error), add, drop and
 * resize returned with *cp NULL without trying to open it again.  In the
 * fusemount daemon *cp is the mounted filesystem: every later request would
 * find none.  Now the old member list is opened again and the error says
 * what failed.
 */
static int fail_writes(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
		       const void *buf, size_t len)
{
	(void)priv, (void)dev, (void)op, (void)offset, (void)buf, (void)len;
	return -EIO;
}

Test(device_review, close_failure_keeps_the_fs_open, .timeout = 60)
{
	char dir[64], paths[3][TESTFS_PATH_MAX], err[512];
	struct bch_io_hook hook = { .fn = fail_writes };

	test_tmpdir_make(dir, sizeof(dir), "devreview");
	testfs_format(dir, 3, 16, 16 << 10, 1, paths);
	for (unsigned op = 0; op < 3; op++) {
		char **pp = calloc(4, sizeof(char *));
		unsigned nr = 3;
		for (unsigned i = 0; i < 3; i++)
			pp[i] = strdup(paths[i]);
		struct bch_fs *c = NULL;
		struct bch_opts o;
		memset(&o, 0, sizeof(o));
		cr_assert_eq(bch_fs_open(pp, nr, &o, &c, err, sizeof(err)), 0, "%s", err);
		/* something to close: a dirty (journalled, fsynced) update */
		uint64_t inum;
		char name[16];
		snprintf(name, sizeof(name), "f%u", op);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
		cr_assert_eq(bch_fs_fsync(c), 0, "%s", c->err_msg);
		bch_dev_set_hook(c->devs[0]->bdev, &hook);
		int r;
		err[0] = 0;
		if (op == 0) {
			char np[TESTFS_PATH_MAX + 8];
			snprintf(np, sizeof(np), "%s/new.img", dir);
			int fd = open(np, O_RDWR | O_CREAT | O_TRUNC, 0644);
			cr_assert(fd >= 0 && !ftruncate(fd, 16 << 20));
			close(fd);
			struct bch_dev_add_args a = { .path = np, .durability = 1, .durability_set = true };
			unsigned idx;
			r = bch_dev_add(&c, &pp, &nr, &o, &a, &idx, err, sizeof(err));
		} else if (op == 1) {
			uint64_t lost;
			r = bch_dev_drop(&c, &pp, &nr, &o, 2, false, &lost, err, sizeof(err));
		} else {
			r = bch_dev_resize(&c, &pp, &nr, &o, 1, 20 << 20, err, sizeof(err));
		}
		fprintf(stderr, "op %u: %d %s\n", op, r, err);
		cr_assert_neq(r, 0, "op %u: the close failed, yet it went on", op);
		cr_assert(c, "op %u: the filesystem is not open again after a failed close (%s)", op, err);
		cr_assert_eq(nr, 3, "op %u: the member list changed", op);
		cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0,
			     "op %u: the fsynced update before the failed close is gone", op);
		bch_fs_close(c);
		for (unsigned i = 0; i < nr; i++)
			free(pp[i]);
		free(pp);
	}
	test_tmpdir_remove(dir);
}
