// SPDX-License-Identifier: GPL-2.0
/*
 * btree_model_test.c - the btree against an in-memory reference: random
 * inserts, overwrites and deletes of raw keys in the test btree, checked by
 * lookups, forward and backward range iteration, with clean close/reopen
 * cycles and crash-reopen cycles (journal replay), a node cache far smaller
 * than the tree (4 KiB nodes, 1 MiB cache), on one and on two devices
 * (metadata replicated).  SOAK=1 runs 1,000,000 and 400,000 operations.
 * Seeds are printed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "journal.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define KEYSPACE	20000

static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];
static unsigned nr_paths;

/* the reference: value length per position (0 = absent), value bytes derived */
static uint16_t model[KEYSPACE];

static struct bch_bpos pos_of(unsigned i)
{
	return POS(i % 4, i / 4, 0);
}

static unsigned idx_of(struct bch_bpos p)
{
	return p.offset * 4 + p.inode;
}

static struct bch_bkey *make_key(unsigned i, unsigned len, unsigned gen)
{
	return testfs_raw_key(pos_of(i), i, len, gen);
}

static uint8_t model_gen[KEYSPACE];

static void setup_fs(unsigned nr)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "btree");
	nr_paths = nr;
	testfs_format(tmpdir, nr, 64, 4096, nr, paths);
	memset(model, 0, sizeof(model));
	memset(model_gen, 0, sizeof(model_gen));
}

static struct bch_fs *open_fs(void)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, nr_paths, 0, 1 << 20, err, sizeof(err));

	cr_assert(c, "open: %s", err);
	return c;
}

static void check_key(struct bch_fs *c, unsigned i, unsigned seed, unsigned op)
{
	struct bch_bkey *k = NULL;
	int r = bch_btree_lookup(c, BCH_BTREE_ID_test, pos_of(i), &k);

	if (!model[i]) {
		cr_assert_eq(r, -BCH_ERR_key_not_found, "seed %u op %u: key %u present (%d) %s", seed,
			     op, i, r, c->err_msg);
		return;
	}
	cr_assert_eq(r, 0, "seed %u op %u: key %u missing (%d: %s)", seed, op, i, r, c->err_msg);
	struct bch_bkey *want = make_key(i, model[i] - 1, model_gen[i]);
	cr_assert_eq(k->u64s, want->u64s, "seed %u op %u: key %u size", seed, op, i);
	cr_assert_eq(memcmp(k, want, bkey_bytes(k)), 0, "seed %u op %u: key %u value", seed, op, i);
	free(k);
	free(want);
}

static void check_all(struct bch_fs *c, unsigned seed, unsigned op)
{
	/* forward over everything: exactly the model's keys, in order */
	struct bch_bpos p = POS_MIN;
	unsigned seen = 0, want = 0;
	for (unsigned i = 0; i < KEYSPACE; i++)
		want += model[i] != 0;
	for (;;) {
		struct bch_bkey *k;
		int r = bch_btree_peek(c, BCH_BTREE_ID_test, p, POS_MAX, &k);
		if (r == -BCH_ERR_key_not_found)
			break;
		cr_assert_eq(r, 0, "seed %u op %u: iterate: %s", seed, op, c->err_msg);
		unsigned i = idx_of(k->p);
		cr_assert(i < KEYSPACE && model[i], "seed %u op %u: stray key %u", seed, op, i);
		seen++;
		p = bpos_successor(k->p);
		free(k);
	}
	if (seen != want && getenv("MODEL_DEBUG"))
		for (unsigned i = 0; i < KEYSPACE; i++)
			if (model[i]) {
				struct bch_bkey *k;
				if (bch_btree_lookup(c, BCH_BTREE_ID_test, pos_of(i), &k))
					fprintf(stderr, "missing %u (%llu:%llu)\n", i,
						(unsigned long long)pos_of(i).inode,
						(unsigned long long)pos_of(i).offset);
				else
					free(k);
			}
	cr_assert_eq(seen, want, "seed %u op %u: iteration saw %u of %u", seed, op, seen, want);
	/* the same with the leaf-walking iterator */
	struct btree_iter it;
	const struct bch_bkey *ik;
	struct bch_bpos prev = POS_MIN;
	unsigned iseen = 0;
	int ierr;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_test, POS_MIN, POS_MAX);
	while ((ik = bch_btree_iter_next(&it, &ierr))) {
		cr_assert(!iseen || bpos_cmp(prev, ik->p) < 0, "seed %u op %u: iterator order", seed, op);
		cr_assert(model[idx_of(ik->p)], "seed %u op %u: iterator stray key", seed, op);
		prev = ik->p;
		iseen++;
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(ierr, 0);
	cr_assert_eq(iseen, want, "seed %u op %u: iterator saw %u of %u", seed, op, iseen, want);
	/* a backward range */
	unsigned hi = random() % KEYSPACE, lo = hi > 500 ? hi - 500 : 0;
	struct bch_bpos q = pos_of(hi);
	unsigned back = 0, back_want = 0;
	for (unsigned i = 0; i < KEYSPACE; i++)
		if (model[i] && bpos_cmp(pos_of(i), pos_of(lo)) >= 0 && bpos_cmp(pos_of(i), q) <= 0)
			back_want++;
	for (;;) {
		struct bch_bkey *k;
		int r = bch_btree_peek_prev(c, BCH_BTREE_ID_test, q, pos_of(lo), &k);
		if (r == -BCH_ERR_key_not_found)
			break;
		cr_assert_eq(r, 0);
		back++;
		bool at_min = bpos_eq(k->p, POS_MIN);
		q = bpos_predecessor(k->p);
		free(k);
		if (at_min)
			break;
	}
	cr_assert_eq(back, back_want, "seed %u op %u: backward saw %u of %u", seed, op, back,
		     back_want);
}

static void run_model(unsigned nr_devs, unsigned seed, unsigned ops)
{
	setup_fs(nr_devs);
	srandom(seed);
	struct bch_fs *c = open_fs();
	struct btree_trans *t;

	cr_assert_eq(bch_trans_init(c, &t), 0);
	for (unsigned op = 1; op <= ops; op++) {
		unsigned r = random() % 100;
		unsigned n = 1 + random() % 4;
		/* the last third mostly deletes: leaves empty out and merge, the tree shrinks */
		unsigned insert_pct = op > ops * 2 / 3 ? 25 : 75;

		if (r < insert_pct) {		/* insert/overwrite a small batch, atomically */
			unsigned idx[4], len[4];
			for (unsigned j = 0; j < n; j++) {
				idx[j] = random() % KEYSPACE;
				len[j] = random() % 64;
				struct bch_bkey *k = make_key(idx[j], len[j], op & 0xff);
				bch_trans_update(t, BCH_BTREE_ID_test, k);
				free(k);
			}
			cr_assert_eq(bch_trans_commit(t, 0), 0, "seed %u op %u: commit: %s", seed, op,
				     c->err_msg);
			for (unsigned j = 0; j < n; j++) {
				model[idx[j]] = len[j] + 1;
				model_gen[idx[j]] = op & 0xff;
			}
		} else if (r < 95) {	/* delete (a few at a time late on) */
			unsigned nd = op > ops * 2 / 3 ? 1 + random() % 4 : 1, del[4];
			for (unsigned j = 0; j < nd; j++) {
				/* late on, delete keys that exist: scan forward from a random point */
				unsigned i = random() % KEYSPACE;
				for (unsigned probe = 0; probe < KEYSPACE && !model[i] && nd > 1; probe++)
					i = (i + 1) % KEYSPACE;
				del[j] = i;
				struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_deleted, pos_of(i), 0);
				bch_trans_update(t, BCH_BTREE_ID_test, k);
				free(k);
			}
			cr_assert_eq(bch_trans_commit(t, 0), 0, "seed %u op %u: delete: %s", seed, op,
				     c->err_msg);
			for (unsigned j = 0; j < nd; j++)
				model[del[j]] = 0;
		} else if (r < 98) {	/* clean close and reopen */
			bch_trans_exit(t);
			cr_assert_eq(bch_fs_close(c), 0, "seed %u op %u: close", seed, op);
			c = open_fs();
			cr_assert_eq(bch_trans_init(c, &t), 0);
		} else {		/* crash after a journal flush: replay must restore all */
			cr_assert_eq(bch_journal_flush(c), 0);
			bch_trans_exit(t);
			c->read_only = true;	/* close writes nothing: as if power was lost */
			bch_fs_close(c);
			c = open_fs();
			cr_assert_eq(bch_trans_init(c, &t), 0);
		}
		if (op % 97 == 0)
			for (unsigned j = 0; j < 20; j++)
				check_key(c, random() % KEYSPACE, seed, op);
		if (op % 2000 == 0 || getenv("MODEL_DEBUG")) {
			if (getenv("MODEL_DEBUG"))
				fprintf(stderr, "op %u kind %u\n", op, r);
			check_all(c, seed, op);
		}
	}
	check_all(c, seed, ops);
	bch_trans_exit(t);
	cr_assert_eq(bch_fs_close(c), 0);
	c = open_fs();
	check_all(c, seed, ops + 1);
	cr_log_info("btree model seed %u: %u ops, %u devices, cache %zu bytes", seed, ops, nr_devs,
		    bch_btree_cache_bytes(c));
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

Test(btree_model, one_device, .timeout = 600)
{
	run_model(1, 1, getenv("SOAK") ? 1000000 : 20000);
}

Test(btree_model, two_devices_replicated, .timeout = 600)
{
	run_model(2, 2, getenv("SOAK") ? 400000 : 10000);
}
