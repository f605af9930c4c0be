// SPDX-License-Identifier: GPL-2.0
/*
 * fs_crash_test.c - power cuts during file work: a recorded workload of
 * creates, writes (partial blocks included), block-aligned truncates,
 * renames and unlinks on ten files, with an fsync every few operations, is
 * cut at every flush and at points in between, with random subsets of the
 * unflushed writes surviving and a torn write.  Every image must open
 * (journal replay) and show the files exactly as they were after some
 * operation at or after the last fsync before the cut: everything fsynced
 * is intact, nothing is half done.  A clean close and reopen keeps that.
 * Each operation here is one transaction (writes stay inside one 1 MiB
 * chunk; truncates are block-aligned).  SOAK=1 records a longer workload.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "bcachefs_format.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "btree.h"
#include "journal.h"
#include "tests/lib/crashfiles.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/tmpdir.h"

#define NFILES		10
#define MAXSIZE		(192 << 10)
#define NOPS		(getenv("SOAK") ? 1500 : 300)

static char tmpdir[64];
static struct crash_files m;	/* the files, their states after each op */

static struct bch_fs *open_img(char *path, bool ro, char *err)
{
	struct bch_opts o;
	struct bch_fs *c = NULL;

	memset(&o, 0, sizeof(o));
	bch_opt_set(&o, Opt_btree_cache_size, 1 << 20);
	if (ro)
		bch_opt_set(&o, Opt_read_only, 1);
	return bch_fs_open(&path, 1, &o, &c, err, 256) ? NULL : c;
}

/* Writes in three steps (fs_ops.h bch_fs_write_begin()) as the FUSE daemon's, and how many were planned */
static bool steps;
static unsigned nr_planned;

static ssize_t do_write(struct bch_fs *c, uint64_t inum, size_t off, const void *data, size_t len)
{
	struct bch_fs_writes ws = { 0 };
	struct bch_fs_write_op op;
	ssize_t n;

	if (!steps)
		return bch_fs_write(c, inum, off, data, len);
	if (!(n = bch_fs_write_begin(c, &ws, &op, inum, off, data, len, true))) {
		bch_fs_write_run(&op);
		n = bch_fs_write_end(c, &ws, &op);
		nr_planned += op.planned && !op.redone;
	}
	bch_fs_writes_exit(&ws);
	return n;
}

/* The workload and every cut of it, with mr metadata copies on the one device. */
static void crash_run(unsigned mr)
{
	struct bch_format_dev d = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256], path[128], crash[128];
	unsigned seed = 31337;

	fprintf(stderr, "fs_crash: seed %u, %u ops, metadata_replicas %u\n", seed, NOPS, mr);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fscrash");
	snprintf(path, sizeof(path), "%s/d.img", tmpdir);
	snprintf(crash, sizeof(crash), "%s/crash.img", tmpdir);
	d.path = path;
	d.size = 24 << 20;
	d.bucket_size = 64 << 10;
	d.durability = 1;
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 8192);
	bch_opt_set(&o, Opt_metadata_replicas, mr);
	cr_assert_eq(bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);

	crash_files_init(&m, NFILES, MAXSIZE, NOPS);
	crash_files_snapshot(&m, 0);

	struct bch_fs *c = open_img(path, false, err);
	cr_assert(c, "%s", err);
	struct iorec *rec = iorec_new(1);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	srandom(seed);
	static unsigned char data[MAXSIZE];

	for (unsigned op = 1; op <= NOPS; op++) {
		unsigned f = random() % NFILES, g = random() % NFILES, k = random() % 10;
		char name[16], other[16];
		uint64_t inum;
		snprintf(name, sizeof(name), "f%u", f);
		snprintf(other, sizeof(other), "f%u", g);
		if (!m.exists[f] || k == 0) {
			if (!m.exists[f]) {
				cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, NULL), 0);
				crash_files_create(&m, f);
			}
		} else if (k < 6) {		/* write, maybe partial blocks */
			size_t off = random() % (MAXSIZE - 1), len = 1 + random() % 40000;
			if (off + len > MAXSIZE)
				len = MAXSIZE - off;
			for (size_t i = 0; i < len; i++)
				data[i] = random();
			cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0);
			cr_assert_eq(do_write(c, inum, off, data, len), (ssize_t)len, "op %u: %s", op, c->err_msg);
			crash_files_write(&m, f, off, data, len);
		} else if (k < 7) {		/* block-aligned truncate (one transaction) */
			size_t size = (random() % (MAXSIZE / 4096)) * 4096;
			cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0);
			cr_assert_eq(bch_fs_truncate(c, inum, size), 0, "op %u: %s", op, c->err_msg);
			crash_files_truncate(&m, f, size);
		} else if (k < 9) {		/* rename over another name */
			if (f != g) {
				cr_assert_eq(bch_fs_rename(c, BCH_ROOT_INO, name, BCH_ROOT_INO, other, 0), 0);
				crash_files_rename(&m, f, g);
			}
		} else {			/* unlink */
			cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0, "op %u: %s", op, c->err_msg);
			crash_files_unlink(&m, f);
		}
		crash_files_snapshot(&m, op);
		/* node writes (appends, moves, splits) as reclaim would do them */
		if (op % 25 == 0)
			cr_assert_eq(bch_btree_flush_all(c), 0, "op %u: flush: %s", op, c->err_msg);
		bool sync = random() % 6 == 0;
		if (sync)
			cr_assert_eq(bch_fs_fsync(c), 0);
		crash_ops_done(&m.ops, op, sync, iorec_nr_events(rec));
	}
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	c->read_only = true;		/* the recording is the workload */
	bch_fs_close(c);

	unsigned states_checked = 0;
	for (size_t at = 0; at <= events; at++) {
		bool flush = at > 0 && iorec_event(rec, at - 1)->type == IOREC_FLUSH;
		if (!flush && at % 3 && at != events)
			continue;
		/* the newest fsync that had returned when power went, and the last op begun */
		unsigned durable, issued;
		crash_ops_bounds(&m.ops, at, &durable, &issued);
		for (unsigned s = 0; s < (flush ? 2 : 1); s++) {
			struct iorec_cut cut = { .at = at, .seed = at * 7 + s, .keep_pct = 50, .torn = s == 0 };
			struct iorec_plan plan;
			char msg[300];

			cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
			cr_assert_eq(iorec_write_image(rec, &plan, 0, crash), 0);
			struct bch_fs *r = open_img(crash, false, err);
			cr_assert(r, "seed %u cut %zu/%u: open failed: %s", seed, at, s, err);
			const char *bad = crash_files_check(&m, r, durable, issued, msg, sizeof(msg));
			cr_assert_null(bad, "seed %u cut %zu/%u: %s", seed, at, s, bad);
			cr_assert_eq(bch_fs_close(r), 0, "seed %u cut %zu: clean close", seed, at);
			r = open_img(crash, true, err);
			cr_assert(r, "seed %u cut %zu: reopen: %s", seed, at, err);
			bad = crash_files_check(&m, r, durable, issued, msg, sizeof(msg));
			cr_assert_null(bad, "seed %u cut %zu/%u after clean close: %s", seed, at, s, bad);
			bch_fs_close(r);
			iorec_plan_free(&plan);
			states_checked++;
		}
	}
	cr_log_info("fs crash: %zu events, %u crash states", events, states_checked);
	fprintf(stderr, "fs_crash: %zu events, %u crash states\n", events, states_checked);
	iorec_free(rec);
	crash_files_exit(&m);
	test_tmpdir_remove(tmpdir);
}

Test(fs_crash, fsynced_files_survive_every_cut, .timeout = 900)
{
	crash_run(1);
}

/* Two copies of every node and journal entry on the one device (version 2). */
Test(fs_crash, two_copies_on_one_device_survive_every_cut, .timeout = 900)
{
	crash_run(2);
}

/* The same with every write planned, run and indexed in steps (io.h: writes outside the engine lock). */
Test(fs_crash, planned_writes_survive_every_cut, .timeout = 900)
{
	steps = true;
	crash_run(1);
	cr_assert_gt(nr_planned, 50, "%u writes planned", nr_planned);
}
