// SPDX-License-Identifier: GPL-2.0
/*
 * fs_readwrite_test.c - bch_fs_read_write(): a read-only open made
 * read-write in place (the image verbs' check pass, then their writes).
 *  - upgrade: open read-only, read, upgrade, write, close; the filesystem
 *    fscks clean and reopens with the writes; the upgrade kept the node
 *    cache (no node read again) and the journal restarted after the clean
 *    record's seq.
 *  - refusals: an open that replayed, one for fsck, one whose device
 *    another writer holds, and one whose superblock another writer changed
 *    since it was read each get 1 (nothing written, still read-only and
 *    usable); the caller's close and reopen then works.
 *  - crash: the upgrade and a workload after it (writes, fsyncs, a clean
 *    close) recorded from the read-write reopen of the device on, cut at
 *    every flush and every third write, unflushed writes kept at random and
 *    one torn: every cut opens (replay), shows the files as after some op
 *    at or after the last fsync, and fscks clean.  Seed printed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "btree.h"
#include "fs.h"
#include "fs_ops.h"
#include "journal.h"
#include "tests/lib/crashfiles.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NFILES		4
#define FSIZE		(64u << 10)
#define NOPS		40

static char tmpdir[64], paths[1][TESTFS_PATH_MAX], crash[1][TESTFS_PATH_MAX];
static unsigned char model[NFILES][FSIZE];
static uint64_t states[NOPS + 1][NFILES];

static void snapshot(unsigned op)
{
	testfs_model_digest(&model[0][0], NFILES, FSIZE, &states[0][0], op);
}

static const char *check(struct bch_fs *c, unsigned from, unsigned to, char *msg, size_t len)
{
	return testfs_model_check(c, NFILES, FSIZE, &states[0][0], from, to, msg, len);
}

/* Files f0..f3 of FSIZE random bytes, closed clean: state 0 of the model. */
static void populate(unsigned seed)
{
	char err[256];
	struct bch_fs *c;

	testfs_format(tmpdir, 1, 16, 8192, 1, paths);
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	srandom(seed);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		uint64_t inum;
		snprintf(name, sizeof(name), "f%u", f);
		for (unsigned i = 0; i < FSIZE; i++)
			model[f][i] = random();
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
		cr_assert_eq(bch_fs_write(c, inum, 0, model[f], FSIZE), (ssize_t)FSIZE, "%s", c->err_msg);
	}
	cr_assert_eq(bch_fs_close(c), 0);
	snapshot(0);
}

/* One op: a random piece of a random file rewritten. */
static void do_op(struct bch_fs *c, unsigned op)
{
	static unsigned char data[FSIZE];
	unsigned f = random() % NFILES;
	size_t off = random() % FSIZE, len = 1 + random() % 20000;
	char name[16];
	uint64_t inum;

	if (off + len > FSIZE)
		len = FSIZE - off;
	for (size_t i = 0; i < len; i++)
		data[i] = random();
	snprintf(name, sizeof(name), "f%u", f);
	cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0);
	cr_assert_eq(bch_fs_write(c, inum, off, data, len), (ssize_t)len, "op %u: %s", op, c->err_msg);
	memcpy(model[f] + off, data, len);
}

Test(fs_readwrite, upgrade_keeps_cache_writes_fsck_clean, .timeout = 120)
{
	char err[256], msg[400];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fsrw");
	populate(7);
	struct bch_fs *c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	cr_assert_null(check(c, 0, 0, msg, sizeof(msg)), "%s", msg);
	uint64_t seq = c->open_seq;
	struct bch_dev_io_stats after;
	cr_assert_eq(bch_fs_read_write(c), 0, "%s", c->err_msg);
	cr_assert(!c->read_only);
	/* the journal went on after the clean record's seq: no rewind, no gap */
	cr_assert_eq(bch_journal_seq_durable(c), seq + 1);
	/*
	 * What the upgrade read: the superblock's copies again (their heads,
	 * then each whole: sb_max_size), no journal bucket, no node.
	 */
	bch_dev_io_stats(c->devs[0]->bdev, &after);
	uint64_t sb_max = 512ULL << c->sb->layout.sb_max_size_bits;
	cr_assert_leq(after.read_bytes, c->sb->layout.nr_superblocks * (sb_max + 512) + 4096,
		      "the upgrade read %llu bytes", (unsigned long long)after.read_bytes);
	cr_assert_null(check(c, 0, 0, msg, sizeof(msg)), "%s", msg);
	srandom(8);
	for (unsigned op = 1; op <= 10; op++) {
		do_op(c, op);
		snapshot(op);
	}
	cr_assert_eq(bch_fs_close(c), 0);
	cr_assert_null(testfs_fsck_problem(paths, 1, true, msg, sizeof(msg)), "%s", msg);
	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	cr_assert(c->open_clean, "closed clean after the upgrade");
	cr_assert_null(check(c, 10, 10, msg, sizeof(msg)), "%s", msg);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

/* 1, still read-only and readable; then a close and a read-write open work. */
static void refused(struct bch_fs *c, const char *why)
{
	char err[256], msg[400];

	cr_assert_eq(bch_fs_read_write(c), 1, "%s: upgraded in place", why);
	cr_assert(c->read_only, "%s", why);
	cr_assert_null(check(c, 0, 0, msg, sizeof(msg)), "%s: %s", why, msg);
	bch_fs_close(c);
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s: reopen: %s", why, err);
	cr_assert_eq(bch_fs_close(c), 0, "%s", why);
}

Test(fs_readwrite, refused_where_unsafe, .timeout = 120)
{
	char err[256];
	struct bch_fs *c, *w;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fsrw");
	populate(9);

	/* another writer holds the device */
	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	w = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(w, "%s", err);
	cr_assert_eq(bch_fs_read_write(c), 1, "upgraded while another writer holds the device");
	cr_assert(c->read_only);
	cr_assert_eq(bch_fs_close(w), 0);
	/* ... and wrote (its session changed the superblock): still refused */
	refused(c, "superblock changed since the read-only open");

	/* opened for fsck */
	c = testfs_open(paths, 1, TESTFS_RO | TESTFS_FSCK, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	refused(c, "fsck open");

	/* not clean: a session that ended without its close (the journal is replayed) */
	w = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(w, "%s", err);
	cr_assert_eq(bch_fs_fsync(w), 0);
	w->read_only = true;	/* nothing more written: as a crash after the fsync */
	bch_fs_close(w);
	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	cr_assert(!c->open_clean);
	refused(c, "replayed open");
	test_tmpdir_remove(tmpdir);
}

Test(fs_readwrite, upgrade_survives_every_cut, .timeout = 900)
{
	char err[256], msg[400];
	unsigned seed = 3333;

	fprintf(stderr, "fs_readwrite crash: seed %u, %u ops\n", seed, NOPS);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fsrwcrash");
	snprintf(crash[0], sizeof(crash[0]), "%s/crash.img", tmpdir);
	populate(seed);

	struct bch_fs *c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	cr_assert_null(check(c, 0, 0, msg, sizeof(msg)), "%s", msg);
	/* the base is the device as the read-only open found it; the reopen is followed */
	struct iorec *rec = iorec_new(1);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	cr_assert_eq(iorec_follow(rec, 0, paths[0]), 0);
	cr_assert_eq(bch_fs_read_write(c), 0, "%s", c->err_msg);
	cr_assert_gt(iorec_nr_events(rec), 0, "the upgrade's writes were not recorded");
	struct crash_ops ops;
	crash_ops_init(&ops, NOPS);
	ops.op_event[0] = iorec_nr_events(rec);
	srandom(seed + 1);
	for (unsigned op = 1; op <= NOPS; op++) {
		do_op(c, op);
		snapshot(op);
		if (op % 10 == 0)
			cr_assert_eq(bch_btree_flush_all(c), 0, "op %u: %s", op, c->err_msg);
		bool sync = random() % 5 == 0;
		if (sync)
			cr_assert_eq(bch_fs_fsync(c), 0);
		crash_ops_done(&ops, op, sync, iorec_nr_events(rec));
	}
	cr_assert_eq(bch_fs_close(c), 0, "clean close");
	size_t events = iorec_nr_events(rec);
	iorec_unfollow(rec);

	unsigned cuts = 0;
	for (size_t at = 0; at <= events; at++) {
		bool flush = at > 0 && iorec_event(rec, at - 1)->type == IOREC_FLUSH;
		if (!flush && at % 3 && at != events)
			continue;
		unsigned durable, issued;
		crash_ops_bounds(&ops, at, &durable, &issued);
		if (at == events)
			durable = NOPS;		/* the clean close made everything durable */
		struct iorec_cut cut = { .at = at, .seed = at * 11 + seed, .keep_pct = 50, .torn = true };
		struct iorec_plan plan;
		cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
		cr_assert_eq(iorec_write_image(rec, &plan, 0, crash[0]), 0);
		struct bch_fs *r = testfs_open(crash, 1, 0, 0, err, sizeof(err));
		cr_assert(r, "seed %u cut %zu: open failed: %s", seed, at, err);
		const char *bad = check(r, durable, issued, msg, sizeof(msg));
		cr_assert_null(bad, "seed %u cut %zu: %s", seed, at, bad);
		cr_assert_eq(bch_fs_close(r), 0, "seed %u cut %zu: close", seed, at);
		bad = testfs_fsck_problem(crash, 1, false, msg, sizeof(msg));
		cr_assert_null(bad, "seed %u cut %zu: %s", seed, at, bad);
		iorec_plan_free(&plan);
		cuts++;
	}
	fprintf(stderr, "fs_readwrite crash: %zu events, %u cuts\n", events, cuts);
	crash_ops_exit(&ops);
	iorec_free(rec);
	test_tmpdir_remove(tmpdir);
}
