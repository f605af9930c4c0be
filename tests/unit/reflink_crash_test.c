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
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NFILES		4
#define MAXSIZE		(128 << 10)
#define NOPS		(getenv("SOAK") ? 600 : 120)

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX], crash[1][TESTFS_PATH_MAX];

static unsigned char *model[NFILES];
static size_t msize[NFILES];
static bool mexists[NFILES];

struct file_state {
	bool		exists;
	size_t		size;
	uint64_t	hash;
};
static struct file_state (*states)[NFILES];	/* [op][file], op 0 = after format */
static size_t *op_event;			/* events issued when op finished */

static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static void snapshot(unsigned op)
{
	for (unsigned f = 0; f < NFILES; f++)
		states[op][f] = (struct file_state) { mexists[f], msize[f],
						      mexists[f] ? fnv(model[f], msize[f]) : 0 };
}

static const char *check(struct bch_fs *c, unsigned from, unsigned to, char *msg, size_t len)
{
	static unsigned char buf[MAXSIZE + 4096];
	struct file_state found[NFILES];

	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		uint64_t inum;
		struct stat st;
		snprintf(name, sizeof(name), "f%u", f);
		int r = bch_fs_lookup(c, BCH_ROOT_INO, name, &inum);
		if (r == -ENOENT) {
			found[f] = (struct file_state) { false, 0, 0 };
			continue;
		}
		if (r || (r = bch_fs_getattr(c, inum, &st)))
			return snprintf(msg, len, "%s: %d (%s)", name, r, c->err_msg), msg;
		ssize_t n = bch_fs_read(c, inum, 0, buf, sizeof(buf));
		if (n < 0 || (size_t)n != (size_t)st.st_size)
			return snprintf(msg, len, "%s: read %zd of %ld (%s)", name, n, (long)st.st_size,
					c->err_msg), msg;
		found[f] = (struct file_state) { true, (size_t)n, fnv(buf, n) };
	}
	for (unsigned p = from; p <= to; p++) {
		bool same = true;
		for (unsigned f = 0; f < NFILES && same; f++)	/* field by field: no padding compared */
			same = found[f].exists == states[p][f].exists && found[f].size == states[p][f].size &&
			       found[f].hash == states[p][f].hash;
		if (same)
			return NULL;
	}
	return snprintf(msg, len, "no state after ops %u..%u matches", from, to), msg;
}

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

	states = calloc(NOPS + 1, sizeof(*states));
	op_event = calloc(NOPS + 1, sizeof(*op_event));
	unsigned *synced_op = calloc(NOPS + 1, sizeof(*synced_op));
	cr_assert(states && op_event && synced_op);
	for (unsigned f = 0; f < NFILES; f++)
		cr_assert(model[f] = calloc(1, MAXSIZE));
	snapshot(0);

	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	struct iorec *rec = iorec_new(1);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	srandom(seed);
	unsigned last_sync = 0;
	static unsigned char data[MAXSIZE];

	for (unsigned op = 1; op <= NOPS; op++) {
		unsigned f = random() % NFILES, g = random() % NFILES, k = random() % 10;
		char name[16];
		snprintf(name, sizeof(name), "f%u", f);
		if (!mexists[f]) {
			cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, NULL), 0);
			mexists[f] = true;
			msize[f] = 0;
		} else if (k < 4) {		/* write (one chunk: one transaction) */
			size_t off = random() % (MAXSIZE - 1), len = 1 + random() % 40000;
			if (off + len > MAXSIZE)
				len = MAXSIZE - off;
			for (size_t i = 0; i < len; i++)
				data[i] = random();
			cr_assert_eq(bch_fs_write(c, lookup(c, f), off, data, len), (ssize_t)len,
				     "op %u: %s", op, c->err_msg);
			memcpy(model[f] + off, data, len);
			if (off + len > msize[f])
				msize[f] = off + len;
		} else if (k < 8) {		/* remap whole blocks, at most 64 KiB */
			if (!mexists[g] || f == g)
				continue;
			size_t so = (random() % (MAXSIZE / 4096)) * 4096, dof = (random() % (MAXSIZE / 4096)) * 4096;
			size_t len = (1 + random() % 16) * 4096;
			if (so + len > MAXSIZE)
				len = MAXSIZE - so;
			if (dof + len > MAXSIZE)
				len = MAXSIZE - dof;
			ssize_t want = so >= msize[g] ? 0 : (ssize_t)(len < msize[g] - so ? len : msize[g] - so);
			ssize_t n = bch_fs_remap_range(c, lookup(c, g), so, lookup(c, f), dof, len);
			cr_assert_eq(n, want, "op %u: remap %zd (%s)", op, n, c->err_msg);
			if (want) {
				memcpy(data, model[g] + so, want);
				memcpy(model[f] + dof, data, want);
				if (dof + want > msize[f])
					msize[f] = dof + want;
				remaps++;
			}
		} else if (k < 9) {		/* block-aligned truncate (one transaction) */
			size_t size = (random() % (MAXSIZE / 4096)) * 4096;
			cr_assert_eq(bch_fs_truncate(c, lookup(c, f), size), 0, "op %u: %s", op, c->err_msg);
			if (size < msize[f])
				memset(model[f] + size, 0, msize[f] - size);
			msize[f] = size;
		} else {			/* unlink: the sharers left keep the data */
			cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0, "op %u: %s", op, c->err_msg);
			mexists[f] = false;
			memset(model[f], 0, MAXSIZE);
			msize[f] = 0;
		}
		snapshot(op);
		if (op % 25 == 0)
			cr_assert_eq(bch_btree_flush_all(c), 0, "op %u: flush: %s", op, c->err_msg);
		if (random() % 6 == 0) {
			cr_assert_eq(bch_fs_fsync(c), 0);
			last_sync = op;
		}
		synced_op[op] = last_sync;
		op_event[op] = iorec_nr_events(rec);
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
		unsigned durable = 0, issued = 0;
		for (unsigned op = 1; op <= NOPS; op++) {
			if (op_event[op] <= at)
				durable = synced_op[op];
			if (op == 1 || op_event[op - 1] <= at)
				issued = op;
		}
		struct iorec_cut cut = { .at = at, .seed = at * 7 + seed, .keep_pct = 50, .torn = true };
		struct iorec_plan plan;
		char msg[900];

		cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
		cr_assert_eq(iorec_write_image(rec, &plan, 0, crash[0]), 0);
		struct bch_fs *r = testfs_open(crash, 1, 0, 1 << 20, err, sizeof(err));
		cr_assert(r, "seed %u cut %zu: open failed: %s", seed, at, err);
		const char *bad = check(r, durable, issued, msg, sizeof(msg));
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
	for (unsigned f = 0; f < NFILES; f++)
		free(model[f]);
	free(states);
	free(op_event);
	free(synced_op);
	test_tmpdir_remove(tmpdir);
}
