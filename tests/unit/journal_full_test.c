// SPDX-License-Identifier: GPL-2.0
/*
 * journal_full_test.c - a journal left full on disk, as versions before the
 * reclaim rule (journal.c) left it after many fsyncs with nothing new: every
 * block of the ring used, the oldest bucket still needed.  Made here with
 * flushes that may not reclaim (as from inside the allocator) until one
 * finds no room; then a power cut.  Opening read-write (and opening for
 * fsck) must recover: replayed nodes written back, the roots put in the
 * clean record, the ring reused; the file intact, the filesystem writable.
 * The same when the journal fills while open: the next fsync recovers.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "journal.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];

#define FILE_BYTES	(64 << 10)

static void pattern(uint8_t *buf, unsigned gen)
{
	for (unsigned i = 0; i < FILE_BYTES; i++)
		buf[i] = (uint8_t)(i * 31 + gen * 7 + i / 4096);
}

static void check_file(struct bch_fs *c, unsigned gen)
{
	static uint8_t want[FILE_BYTES], got[FILE_BYTES];
	uint64_t inum;

	pattern(want, gen);
	cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, "f", &inum), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_read(c, inum, 0, got, FILE_BYTES), FILE_BYTES);
	cr_assert(!memcmp(want, got, FILE_BYTES), "file contents (generation %u) differ", gen);
}

static void write_file(struct bch_fs *c, unsigned gen)
{
	static uint8_t buf[FILE_BYTES];
	uint64_t inum;

	if (bch_fs_lookup(c, BCH_ROOT_INO, "f", &inum))
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	pattern(buf, gen);
	cr_assert_eq(bch_fs_write(c, inum, 0, buf, FILE_BYTES), FILE_BYTES, "%s", c->err_msg);
	cr_assert_eq(bch_fs_fsync(c), 0, "%s", c->err_msg);
}

/*
 * A filesystem whose journal is full: left open in *keep, or (keep NULL)
 * left on disk as by a power cut.
 */
static void make_full(struct bch_fs **keep)
{
	char err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "jfull");
	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	write_file(c, 1);

	unsigned n = 0;
	int r = 0;
	c->alloc_flushing = true;	/* flushes that may not reclaim */
	for (; n < 1000000 && !r; n++) {
		bch_journal_cur_seq(c);
		r = bch_journal_flush(c);
	}
	cr_assert_eq(r, -BCH_ERR_journal_full, "after %u flushes: %d %s", n, r, c->err_msg);
	cr_assert(!c->emergency_ro, "a full journal made the filesystem read-only");
	cr_log_info("journal full after %u flushes that could not reclaim", n);
	c->alloc_flushing = false;
	if (keep) {
		*keep = c;
		return;
	}
	c->read_only = true;	/* power cut: nothing more written */
	bch_fs_close(c);
}

Test(journal_full, open_recovers)
{
	char err[256];

	make_full(NULL);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open of a full journal: %s", err);
	check_file(c, 1);
	for (unsigned gen = 2; gen < 400; gen++)
		write_file(c, gen);
	check_file(c, 399);
	cr_assert_eq(bch_fs_close(c), 0);

	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "reopen: %s", err);
	check_file(c, 399);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

Test(journal_full, fsck_open_recovers)
{
	char err[256];

	make_full(NULL);
	struct bch_fs *c = testfs_open(paths, 1, TESTFS_FSCK, 0, err, sizeof(err));
	cr_assert(c, "fsck open of a full journal: %s", err);
	check_file(c, 1);
	cr_assert_eq(bch_fs_close(c), 0, "%s", c->err_msg);

	/* crash right after the recovery: the clean record it wrote serves */
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "reopen: %s", err);
	check_file(c, 1);
	write_file(c, 2);
	c->read_only = true;
	bch_fs_close(c);
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "reopen after a crash: %s", err);
	check_file(c, 2);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

/* Full while mounted: the next flush from the top spills and goes on. */
Test(journal_full, full_while_open_recovers)
{
	char err[256];
	struct bch_fs *c;

	make_full(&c);
	cr_assert_eq(bch_fs_fsync(c), 0, "fsync of a full journal: %s", c->err_msg);
	check_file(c, 1);
	for (unsigned gen = 2; gen < 100; gen++)
		write_file(c, gen);
	cr_assert_eq(bch_fs_close(c), 0, "%s", c->err_msg);

	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "reopen: %s", err);
	check_file(c, 99);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}
