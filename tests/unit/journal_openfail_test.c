// SPDX-License-Identifier: GPL-2.0
/*
 * journal_openfail_test.c - a read-write open that fails partway leaves the
 * image as consistent as it was.
 *
 * The images: files written and fsynced, then a crash (nothing more
 * written), so the open replays the journal, writes its first entry and
 * the superblock, and splits overfull nodes; then a close (every dirty node
 * written, the clean record).  And the same with the journal left full (as
 * older versions left it: flushes that could not reclaim), which the open
 * empties through the clean record (spill) before its first entry.  Each run fails the device's n-th write of
 * that open and close (and, "dead", every write after it; else only that
 * one), for every n up to the writes a good open and close make.  Whatever
 * the open and close return, the image must then open read-only with the
 * files as fsynced and fsck -n clean, and open read-write again.
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
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "journal.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NFILES		6
#define FSIZE		(48u << 10)

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX], orig[TESTFS_PATH_MAX];

static void pattern(uint8_t *buf, unsigned f)
{
	for (unsigned i = 0; i < FSIZE; i++)
		buf[i] = (uint8_t)(i * 13 + f * 101 + i / 512);
}

static struct {
	unsigned	writes;		/* seen since the hook was installed */
	unsigned	fail_at;	/* 0: none */
	bool		dead;		/* every write from fail_at on fails */
	bool		torn;		/* fail_at writes its first sector */
	unsigned	failed;
} inj;

static int hook_fn(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
		   const void *buf, size_t len)
{
	(void)priv; (void)dev; (void)offset; (void)buf; (void)len;
	if (op != BCH_IO_WRITE)
		return 0;
	inj.writes++;
	if (inj.fail_at && (inj.writes == inj.fail_at || (inj.dead && inj.writes > inj.fail_at))) {
		inj.failed++;
		return inj.torn && inj.writes == inj.fail_at && len > 512 ? 512 : -EIO;
	}
	return 0;
}

static const struct bch_io_hook hook = { hook_fn, NULL };

static void on_open(struct bch_blockdev *dev)
{
	bch_dev_set_hook(dev, &hook);
}

static void make_image(bool full)
{
	static uint8_t buf[FSIZE];
	char err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "jopenfail");
	testfs_format(tmpdir, 1, 32, 4096, 1, paths);
	snprintf(orig, sizeof(orig), "%s/orig.img", tmpdir);
	struct bch_fs *c = testfs_open(paths, 1, 0, 1 << 20, err, sizeof(err));
	cr_assert(c, "%s", err);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		uint64_t inum;
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
		pattern(buf, f);
		cr_assert_eq(bch_fs_write(c, inum, 0, buf, FSIZE), FSIZE, "%s", c->err_msg);
	}
	cr_assert_eq(bch_fs_fsync(c), 0, "%s", c->err_msg);
	if (full) {
		int r = 0;
		c->alloc_flushing = true;	/* flushes that may not reclaim */
		for (unsigned n = 0; n < 1000000 && !r; n++) {
			bch_journal_cur_seq(c);
			r = bch_journal_flush(c);
		}
		cr_assert_eq(r, -BCH_ERR_journal_full, "%s", c->err_msg);
		c->alloc_flushing = false;
	}
	c->read_only = true;	/* a crash: the next open replays */
	bch_fs_close(c);
	testfs_copy_file(paths[0], orig);
}

static void check_files(struct bch_fs *c, const char *when)
{
	static uint8_t want[FSIZE], got[FSIZE];

	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		uint64_t inum;
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0, "%s: %s: %s", when, name,
			     c->err_msg);
		pattern(want, f);
		cr_assert_eq(bch_fs_read(c, inum, 0, got, FSIZE), FSIZE, "%s: %s", when, name);
		cr_assert(!memcmp(want, got, FSIZE), "%s: %s differs", when, name);
	}
}

/* The open and close of the image with write fail_at failing; the result. */
enum mode { ONE, DEAD, TORN_DEAD };
static const char * const mode_names[] = { "one error", "dead", "torn, then dead" };

static void one_run(unsigned fail_at, enum mode m, int *open_ret, int *close_ret)
{
	char err[256];

	testfs_copy_file(orig, paths[0]);
	memset(&inj, 0, sizeof(inj));
	inj.fail_at = fail_at;
	inj.dead = m != ONE;
	inj.torn = m == TORN_DEAD;
	bch_dev_on_open(on_open);
	struct bch_fs *c = testfs_open(paths, 1, 0, 1 << 20, err, sizeof(err));
	*open_ret = c ? 0 : -1;
	*close_ret = c ? bch_fs_close(c) : 0;
	bch_dev_on_open(NULL);
}

static void run_all(enum mode m, bool full)
{
	char err[256], msg[512];
	int o, cl;

	make_image(full);
	one_run(0, ONE, &o, &cl);
	cr_assert_eq(o, 0, "the open without a failure");
	cr_assert_eq(cl, 0, "the close without a failure");
	unsigned total = inj.writes;
	cr_log_info("%s%s: a good open and close write %u times", mode_names[m],
		    full ? ", journal full" : "", total);
	cr_assert_gt(total, 4);

	unsigned opens_failed = 0, closes_failed = 0;
	for (unsigned n = 1; n <= total; n++) {
		one_run(n, m, &o, &cl);
		opens_failed += o != 0;
		closes_failed += cl != 0;
		struct bch_fs *c = testfs_open(paths, 1, TESTFS_RO, 1 << 20, err, sizeof(err));
		cr_assert(c, "write %u of %u failed (open %d, close %d): read-only open: %s", n, total,
			  o, cl, err);
		char when[64];
		snprintf(when, sizeof(when), "write %u of %u failed", n, total);
		check_files(c, when);
		cr_assert_eq(bch_fs_close(c), 0);
		const char *bad = testfs_fsck_problem(paths, 1, true, msg, sizeof(msg));
		cr_assert(!bad, "%s: %s", when, bad);
		c = testfs_open(paths, 1, 0, 1 << 20, err, sizeof(err));
		cr_assert(c, "%s: read-write open after: %s", when, err);
		check_files(c, when);
		cr_assert_eq(bch_fs_close(c), 0, "%s: close after", when);
	}
	cr_log_info("%s%s: %u runs, %u opens and %u closes failed", mode_names[m],
		    full ? ", journal full" : "", total, opens_failed, closes_failed);
	test_tmpdir_remove(tmpdir);
}

Test(journal_openfail, one_write_fails, .timeout = 600)
{
	run_all(ONE, false);
}

Test(journal_openfail, device_dies, .timeout = 600)
{
	run_all(DEAD, false);
}

Test(journal_openfail, torn_then_dies, .timeout = 600)
{
	run_all(TORN_DEAD, false);
}

Test(journal_openfail, one_write_fails_journal_full, .timeout = 600)
{
	run_all(ONE, true);
}

Test(journal_openfail, device_dies_journal_full, .timeout = 600)
{
	run_all(DEAD, true);
}

Test(journal_openfail, torn_then_dies_journal_full, .timeout = 600)
{
	run_all(TORN_DEAD, true);
}
