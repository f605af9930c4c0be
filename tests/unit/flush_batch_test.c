// SPDX-License-Identifier: GPL-2.0
/*
 * flush_batch_test.c - how many device flushes the engine spends, and that
 * what it skips changes nothing durable (issues 32 and 33).
 *
 *  - a journal entry written because it is full is flushed by the next
 *    flush of the devices, not on its own: a run of N full entries costs
 *    about N flushes, not 2N, and is durable once anyone asks (fsync)
 *    (not with journal stubs: one copy, in lanes);
 *  - at close the node writes wait for one journal entry, their parents'
 *    hints for one flush of the devices (not an entry per level), then the
 *    entry with the roots and the clean superblock;
 *  - a clean open writes its first entry without a preflush;
 *  - a flush with nothing written since the last one reaches no device.
 * Every count is of flushes that reach the device (the test hook sees
 * them).  Durability itself is the crash tests' (btree_crash, fs_crash,
 * device_crash: every cut replays the durable state); here each case also
 * reopens and finds every key.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "bkey.h"
#include "blockdev.h"
#include "btree.h"
#include "errcode.h"
#include "fs.h"
#include "journal.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define VAL_BYTES	40

static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];
static unsigned nr_devs;

struct counts {
	unsigned	writes, flushes;
};

static int count_io(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
		    const void *buf, size_t len)
{
	struct counts *n = priv;

	(void)dev; (void)offset; (void)buf; (void)len;
	if (op == BCH_IO_FLUSH)
		n->flushes++;
	else if (op == BCH_IO_WRITE)
		n->writes++;
	return 0;
}

/* bch_dev_on_open(): the devices an open opens count into open_counts. */
static struct counts *open_counts;
static void hook_on_open(struct bch_blockdev *dev)
{
	struct bch_io_hook h = { .fn = count_io, .priv = open_counts };

	bch_dev_set_hook(dev, &h);
}

static void hook(struct bch_fs *c, struct counts *n)
{
	struct bch_io_hook h = { .fn = count_io, .priv = n };

	memset(n, 0, sizeof(*n));
	bch_dev_set_hook(c->devs[0]->bdev, &h);
}

static struct bch_bkey *make(unsigned i, unsigned gen)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(1, i, 0), sizeof(struct bch_raw) + VAL_BYTES);
	struct bch_raw *r = bkey_val(k);
	char buf[VAL_BYTES + 8];

	snprintf(buf, sizeof(buf), "k%06u-g%u-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i, gen);
	r->len = VAL_BYTES;
	memcpy(r->data, buf, VAL_BYTES);
	return k;
}

/* nkeys keys of generation gen, 16 to a transaction, none of them synced. */
static void commit_keys(struct bch_fs *c, unsigned nkeys, unsigned gen)
{
	struct btree_trans *t;

	bch_trans_init(c, &t);
	for (unsigned i = 0; i < nkeys; i++) {
		struct bch_bkey *k = make(i, gen);
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		free(k);
		if (i % 16 == 15 || i == nkeys - 1)
			cr_assert_eq(bch_trans_commit(t, 0), 0, "gen %u key %u: %s", gen, i, c->err_msg);
	}
	bch_trans_exit(t);
}

static void check_keys(struct bch_fs *c, unsigned nkeys, unsigned gen)
{
	for (unsigned i = 0; i < nkeys; i++) {
		struct bch_bkey *k = NULL, *want = make(i, gen);
		int r = bch_btree_lookup(c, BCH_BTREE_ID_test, POS(1, i, 0), &k);
		cr_assert_eq(r, 0, "key %u: %s %s", i, bch_err_str(r), c->err_msg);
		cr_assert(!memcmp(bkey_val(k), bkey_val(want), sizeof(struct bch_raw) + VAL_BYTES),
			  "key %u: not generation %u", i, gen);
		free(k);
		free(want);
	}
}

static struct bch_fs *open_rw(void)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, nr_devs, 0, 0, err, sizeof(err));

	cr_assert(c, "open: %s", err);
	return c;
}

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "flushbatch");
}

static void teardown(void)
{
	test_tmpdir_remove(tmpdir);
}

TestSuite(flush_batch, .init = setup, .fini = teardown);

Test(flush_batch, full_entries_cost_one_flush_each)
{
	/*
	 * Two devices, two copies of the metadata: no journal stubs (with one
	 * copy in lanes each entry's stub follows its own flush, so entries
	 * there are flushed one by one as before).  Counted on device 0.
	 */
	nr_devs = 2;
	testfs_format(tmpdir, 2, 256, 65536, 2, paths);
	struct bch_fs *c = open_rw();
	struct counts n;

	commit_keys(c, 3000, 1);
	cr_assert_eq(bch_btree_flush_all(c), 0, "%s", c->err_msg);
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);

	/*
	 * One overwrite of every key: leaves split at 3/4 of a node have room
	 * for it, so no leaf is written meanwhile, and the entries fill.
	 */
	hook(c, &n);
	uint64_t seq0 = bch_journal_seq_open(c);
	commit_keys(c, 3000, 2);
	uint64_t entries = bch_journal_seq_open(c) - seq0;
	cr_assert_gt(entries, 3, "only %" PRIu64 " entries written", entries);
	/* the last full entry waits for the next flush: written, not yet durable */
	cr_assert_lt(bch_journal_seq_durable(c), bch_journal_seq_open(c) - 1);
	unsigned before_fsync = n.flushes;
	cr_assert_leq(before_fsync, entries + 2, "%u flushes for %" PRIu64 " full entries",
		      before_fsync, entries);

	/* an fsync makes all of it durable */
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	cr_assert_eq(bch_journal_seq_durable(c), bch_journal_seq_open(c) - 1);
	cr_log_info("flush_batch: %" PRIu64 " full entries, %u flushes (then %u for the fsync)",
		    entries, before_fsync, n.flushes - before_fsync);

	/* nothing written since: a second fsync reaches no device */
	unsigned f = n.flushes;
	cr_assert_eq(bch_journal_flush(c), 0);
	cr_assert_eq(n.flushes, f, "a flush with nothing new reached the device");

	/* as if killed: replay finds every key */
	c->read_only = true;
	bch_fs_close(c);
	c = open_rw();
	cr_assert_gt(c->journal_replayed, 0);
	check_keys(c, 3000, 2);
	cr_assert_eq(bch_fs_close(c), 0);
}

Test(flush_batch, close_and_clean_open_flush_a_bounded_number)
{
	nr_devs = 1;
	testfs_format(tmpdir, 1, 64, 16384, 1, paths);	/* 16 KiB nodes: two levels */
	struct bch_fs *c = open_rw();
	struct counts n;

	commit_keys(c, 6000, 1);
	cr_assert_eq(bch_fs_close(c), 0);

	/* changes in many leaves of a tree of two levels or more */
	c = open_rw();
	cr_assert_geq(c->roots->r[BCH_BTREE_ID_test].level, 1, "the test btree is one node");
	for (unsigned i = 0; i < 6000; i += 97) {
		struct btree_trans *t;
		struct bch_bkey *k = make(i, 2);
		bch_trans_init(c, &t);
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
		bch_trans_exit(t);
		free(k);
	}
	hook(c, &n);
	/*
	 * Per round of the alloc btree's sync: the entry the node writes wait
	 * for (its preflush and its flush), one flush before the parents with
	 * the children's hints, the entry with the roots (two); leaves whose
	 * space is used up move, which changes buckets, so a second round
	 * writes the alloc keys (4 more); then the clean superblock: 10.  It
	 * was 15: an entry (two flushes) for each level of hints, and a second
	 * entry at each reclaim.
	 */
	cr_assert_eq(bch_fs_close(c), 0);
	cr_log_info("flush_batch: close after 62 leaf changes: %u writes, %u flushes", n.writes,
		    n.flushes);
	cr_assert_leq(n.flushes, 10, "%u flushes at close", n.flushes);

	/* a clean open: the first entry without a preflush, then the superblock */
	struct counts o;
	memset(&o, 0, sizeof(o));
	open_counts = &o;
	bch_dev_on_open(hook_on_open);
	c = open_rw();
	bch_dev_on_open(NULL);
	cr_log_info("flush_batch: clean open: %u flushes", o.flushes);
	cr_assert_leq(o.flushes, 2, "%u flushes to open a clean filesystem (was 3)", o.flushes);
	for (unsigned i = 0; i < 6000; i++) {
		struct bch_bkey *k = NULL, *want = make(i, i % 97 ? 1 : 2);
		cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_test, POS(1, i, 0), &k), 0);
		cr_assert(!memcmp(bkey_val(k), bkey_val(want), sizeof(struct bch_raw) + VAL_BYTES),
			  "key %u", i);
		free(k);
		free(want);
	}
	cr_assert_eq(bch_fs_close(c), 0);
}
