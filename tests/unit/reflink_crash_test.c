// SPDX-License-Identifier: GPL-2.0
/*
 * reflink_crash_test.c - power cuts across shared-extent work (reflink.h):
 * a recorded workload of writes into files that share extents, remaps
 * (block-aligned, up to 64 KiB: each one step, a conversion transaction
 * and a sharing one), block-aligned truncates and unlinks, with an fsync
 * every few operations, cut at every flush and at points in between, with
 * half the unflushed writes surviving and one torn.  Every image must open
 * (journal replay) and show the files exactly as they were after some
 * operation at or after the last fsync before the cut (a cut between a
 * remap's two transactions shows the state before it: the conversion
 * changes no file's content).  Then each indirect extent's refcount equals
 * the reflink_p keys overlapping it, and fsck -n (a sample of the cuts)
 * finds nothing: no count off, no space lost or doubly used.
 * Seed fixed and printed (SEED= repeats one); SOAK=1 records a longer run.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "bcachefs_format.h"
#include "btree.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "tests/lib/crashfiles.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NFILES		4
#define MAXSIZE		(128 << 10)
#define NOPS		(getenv("SOAK") ? 600 : 120)

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX], crash[1][TESTFS_PATH_MAX];

static struct crash_files m;	/* the files, their states after each op */

/* Every reflink_v's refcount is the number of reflink_p keys overlapping it. */
static const char *check_refs(struct bch_fs *c, char *msg, size_t len)
{
	struct btree_iter it, jt;
	const struct bch_bkey *k, *p;
	struct bch_bpos from = POS_MIN;
	int err = 0;

	if (!c->roots->r[BCH_BTREE_ID_reflink].key)
		return NULL;
	for (;;) {
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, from, POS_MAX);
		k = bch_btree_iter_next(&it, &err);
		struct bch_bkey *v = k ? bch_bkey_dup(k) : NULL;
		bch_btree_iter_exit(&it);
		if (!v)
			break;
		from = bpos_successor(v->p);
		uint64_t vs = bch_extent_start(v), ve = v->p.offset, refs = 0;
		bch_btree_iter_init(&jt, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
		while ((p = bch_btree_iter_next(&jt, &err)))
			if (p->type == BCH_BKEY_reflink_p) {
				uint64_t idx = ((const struct bch_reflink_p *)bkey_val(p))->idx;
				refs += idx < ve && idx + p->size > vs;
			}
		bch_btree_iter_exit(&jt);
		uint64_t have = ((const struct bch_reflink_v *)bkey_val(v))->refcount;
		free(v);
		if (have != refs || !have)
			return snprintf(msg, len, "indirect extent %lu..%lu: refcount %lu, %lu references",
					(unsigned long)vs, (unsigned long)ve, (unsigned long)have,
					(unsigned long)refs), msg;
	}
	return err ? (snprintf(msg, len, "walk: %d", err), msg) : NULL;
}

static uint64_t lookup(struct bch_fs *c, unsigned f)
{
	char name[16];
	uint64_t inum;

	snprintf(name, sizeof(name), "f%u", f);
	cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0, "%s", name);
	return inum;
}

Test(reflink_crash, every_cut_opens_consistent, .timeout = 900)
{
	char err[256];
	unsigned seed = getenv("SEED") ? (unsigned)atoi(getenv("SEED")) : 3131, remaps = 0;

	fprintf(stderr, "reflink_crash: seed %u, %u ops\n", seed, NOPS);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "reflinkcrash");
	testfs_format(tmpdir, 1, 24, 64 << 10, 1, paths);
	snprintf(crash[0], sizeof(crash[0]), "%s/crash.img", tmpdir);

	crash_files_init(&m, NFILES, MAXSIZE, NOPS);
	crash_files_snapshot(&m, 0);

	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	struct iorec *rec = iorec_new(1);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	srandom(seed);
	static unsigned char data[MAXSIZE];

	for (unsigned op = 1; op <= NOPS; op++) {
		unsigned f = random() % NFILES, g = random() % NFILES, k = random() % 10;
		char name[16];
		snprintf(name, sizeof(name), "f%u", f);
		if (!m.exists[f]) {
			cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, NULL), 0);
			crash_files_create(&m, f);
		} else if (k < 4) {		/* write (one chunk: one transaction) */
			size_t off = random() % (MAXSIZE - 1), len = 1 + random() % 40000;
			if (off + len > MAXSIZE)
				len = MAXSIZE - off;
			for (size_t i = 0; i < len; i++)
				data[i] = random();
			cr_assert_eq(bch_fs_write(c, lookup(c, f), off, data, len), (ssize_t)len,
				     "op %u: %s", op, c->err_msg);
			crash_files_write(&m, f, off, data, len);
		} else if (k < 8) {		/* remap whole blocks, at most 64 KiB */
			if (!m.exists[g] || f == g)
				continue;
			size_t so = (random() % (MAXSIZE / 4096)) * 4096, dof = (random() % (MAXSIZE / 4096)) * 4096;
			size_t len = (1 + random() % 16) * 4096;
			if (so + len > MAXSIZE)
				len = MAXSIZE - so;
			if (dof + len > MAXSIZE)
				len = MAXSIZE - dof;
			ssize_t want = so >= m.size[g] ? 0 : (ssize_t)(len < m.size[g] - so ? len : m.size[g] - so);
			ssize_t n = bch_fs_remap_range(c, lookup(c, g), so, lookup(c, f), dof, len);
			cr_assert_eq(n, want, "op %u: remap %zd (%s)", op, n, c->err_msg);
			if (want) {
				crash_files_write(&m, f, dof, m.data[g] + so, want);
				remaps++;
			}
		} else if (k < 9) {		/* block-aligned truncate (one transaction) */
			size_t size = (random() % (MAXSIZE / 4096)) * 4096;
			cr_assert_eq(bch_fs_truncate(c, lookup(c, f), size), 0, "op %u: %s", op, c->err_msg);
			crash_files_truncate(&m, f, size);
		} else {			/* unlink: the sharers left keep the data */
			cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0, "op %u: %s", op, c->err_msg);
			crash_files_unlink(&m, f);
		}
		crash_files_snapshot(&m, op);
		if (op % 25 == 0)
			cr_assert_eq(bch_btree_flush_all(c), 0, "op %u: flush: %s", op, c->err_msg);
		bool sync = random() % 6 == 0;
		if (sync)
			cr_assert_eq(bch_fs_fsync(c), 0);
		crash_ops_done(&m.ops, op, sync, iorec_nr_events(rec));
	}
	cr_assert_gt(remaps, NOPS / 8, "seed %u: only %u remaps", seed, remaps);
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	c->read_only = true;		/* the recording is the workload */
	bch_fs_close(c);

	unsigned states_checked = 0, fscks = 0;
	for (size_t at = 0; at <= events; at++) {
		bool flush = at > 0 && iorec_event(rec, at - 1)->type == IOREC_FLUSH;
		if (!flush && at % 5 && at != events)
			continue;
		unsigned durable, issued;
		crash_ops_bounds(&m.ops, at, &durable, &issued);
		struct iorec_cut cut = { .at = at, .seed = at * 7 + seed, .keep_pct = 50, .torn = true };
		struct iorec_plan plan;
		char msg[900];

		cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
		cr_assert_eq(iorec_write_image(rec, &plan, 0, crash[0]), 0);
		struct bch_fs *r = testfs_open(crash, 1, 0, 1 << 20, err, sizeof(err));
		cr_assert(r, "seed %u cut %zu: open failed: %s", seed, at, err);
		const char *bad = crash_files_check(&m, r, durable, issued, msg, sizeof(msg));
		cr_assert_null(bad, "seed %u cut %zu: %s", seed, at, bad);
		bad = check_refs(r, msg, sizeof(msg));
		cr_assert_null(bad, "seed %u cut %zu: %s", seed, at, bad);
		cr_assert_eq(bch_fs_close(r), 0, "seed %u cut %zu: clean close", seed, at);
		if (flush || at == events) {	/* fsck of the state the replay left */
			r = testfs_open(crash, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
			cr_assert(r, "seed %u cut %zu: open for fsck: %s", seed, at, err);
			testfs_assert_fsck_clean(r, false);
			bch_fs_close(r);
			fscks++;
		}
		iorec_plan_free(&plan);
		states_checked++;
	}
	fprintf(stderr, "reflink_crash: %zu events, %u crash states, %u fsck runs, %u remaps\n", events,
		states_checked, fscks, remaps);
	iorec_free(rec);
	crash_files_exit(&m);
	test_tmpdir_remove(tmpdir);
}
