// SPDX-License-Identifier: GPL-2.0
/*
 * btree_crash_test.c - power cuts during btree work (DESIGN.md section 7):
 * a recorded workload of transactions (inserts, overwrites, deletes; some
 * committed with BCH_TRANS_SYNC, node writes, splits and moves under a small
 * cache) is cut at every flush and at random points, with random subsets of
 * the unflushed writes and a torn write.  Each image must open (journal
 * replay), and show exactly the state after some prefix of the transactions
 * that includes every durable one (no transaction half there, no garbage);
 * then a clean close and reopen must keep exactly that.  SOAK=1 records a
 * five times longer workload.  The seed of a failure is printed.
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
#include "tests/lib/iorecord.h"
#include "tests/lib/tmpdir.h"

#define NKEYS		300
#define NOPS		(getenv("SOAK") ? 2000 : 400)
#define MAX_GENS	256

static char tmpdir[64];

/* per key: the states it went through (gen 0 = absent) and when each became durable */
struct key_hist {
	unsigned	nr;
	uint16_t	gen[MAX_GENS];
	size_t		durable_at[MAX_GENS];	/* event count; SIZE_MAX: never made durable */
	uint64_t	seq[MAX_GENS];		/* journal entry that holds the state */
	uint16_t	op[MAX_GENS];		/* the transaction that made it */
};
static struct key_hist hist[NKEYS];

static struct bch_bkey *make(unsigned i, unsigned gen)
{
	if (!gen)
		return bch_bkey_alloc(BCH_BKEY_deleted, POS(1, i, 0), 0);
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(1, i, 0), sizeof(struct bch_raw) + 24);
	struct bch_raw *r = bkey_val(k);
	char buf[32];
	snprintf(buf, sizeof(buf), "k%05u-g%05u-xxxxxxxxxxx", i, gen);
	r->len = 24;
	memcpy(r->data, buf, 24);
	return k;
}

static unsigned gen_of(const struct bch_bkey *k, unsigned i)
{
	const struct bch_raw *r = bkey_val(k);
	unsigned ki, g;

	if (k->type != BCH_BKEY_raw || r->len != 24 ||
	    sscanf((const char *)r->data, "k%05u-g%05u", &ki, &g) != 2 || ki != i)
		return UINT32_MAX;
	return g;
}

static struct bch_fs *open_img(char *path, bool ro, char *err)
{
	struct bch_opts o;
	struct bch_fs *c = NULL;

	memset(&o, 0, sizeof(o));
	bch_opt_set(&o, Opt_btree_cache_size, 1 << 20);
	if (ro)
		bch_opt_set(&o, Opt_read_only, 1);
	if (bch_fs_open(&path, 1, &o, &c, err, 256))
		return NULL;
	return c;
}

/*
 * Check the image against the history at cut `at`: the journal is durable
 * as a prefix, so the image must equal the state after transactions 1..P
 * for one P at least as large as the last durable transaction — every key at
 * once (a transaction is never half there).  Returns a message or NULL.
 */
static unsigned found_gen[NKEYS];

static unsigned state_at(const struct key_hist *h, unsigned p)
{
	unsigned g = 0;

	for (unsigned j = 0; j < h->nr && h->op[j] <= p; j++)
		g = h->gen[j];
	return g;
}

static const char *check(struct bch_fs *c, size_t at, char *msg, size_t len)
{
	unsigned durable_op = 0;

	for (unsigned i = 0; i < NKEYS; i++) {
		struct key_hist *h = &hist[i];
		struct bch_bkey *k = NULL;

		for (unsigned j = 0; j < h->nr; j++)
			if (h->durable_at[j] <= at && h->op[j] > durable_op)
				durable_op = h->op[j];
		int r = bch_btree_lookup(c, BCH_BTREE_ID_test, POS(1, i, 0), &k);
		if (r && r != -BCH_ERR_key_not_found)
			return snprintf(msg, len, "key %u: lookup: %s", i, c->err_msg), msg;
		found_gen[i] = r ? 0 : gen_of(k, i);
		free(k);
	}
	for (unsigned p = durable_op; p <= NOPS; p++) {
		unsigned i;
		for (i = 0; i < NKEYS; i++)
			if (state_at(&hist[i], p) != found_gen[i])
				break;
		if (i == NKEYS)
			return NULL;
	}
	/* name the first key that differs from the durable prefix */
	for (unsigned i = 0; i < NKEYS; i++)
		if (state_at(&hist[i], durable_op) != found_gen[i])
			return snprintf(msg, len, "no prefix of the transactions from %u on matches "
					"(key %u is %u, was %u after transaction %u)", durable_op, i,
					found_gen[i], state_at(&hist[i], durable_op), durable_op), msg;
	return snprintf(msg, len, "no prefix of the transactions matches"), msg;
}

/* The workload and every cut of it, with mr copies of each node on the one device. */
static void crash_run(unsigned mr)
{
	struct bch_format_dev d = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256], path[128], crash[128];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "btcrash");
	snprintf(path, sizeof(path), "%s/d.img", tmpdir);
	snprintf(crash, sizeof(crash), "%s/crash.img", tmpdir);
	d.path = path;
	d.size = 16 << 20;
	d.bucket_size = 64 << 10;
	d.durability = 1;
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 4096);
	bch_opt_set(&o, Opt_metadata_replicas, mr);
	cr_assert_eq(bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);

	struct bch_fs *c = open_img(path, false, err);
	cr_assert(c, "%s", err);
	struct iorec *rec = iorec_new(1);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	for (unsigned i = 0; i < NKEYS; i++) {
		hist[i].nr = 1;
		hist[i].gen[0] = 0;
		hist[i].durable_at[0] = 0;
	}

	struct btree_trans *t;
	bch_trans_init(c, &t);
	srandom(4242);
	uint64_t last_durable_seq = 0;
	for (unsigned op = 1; op <= NOPS; op++) {
		unsigned n = 1 + random() % 3, keys[3];
		for (unsigned j = 0; j < n; j++) {
			keys[j] = random() % NKEYS;
			unsigned gen = random() % 5 ? op : 0;
			struct bch_bkey *k = make(keys[j], gen);
			bch_trans_update(t, BCH_BTREE_ID_test, k);
			free(k);
			struct key_hist *h = &hist[keys[j]];
			cr_assert_lt(h->nr, MAX_GENS);
			h->gen[h->nr] = gen;
			h->op[h->nr] = op;
			h->durable_at[h->nr++] = SIZE_MAX;
		}
		bool sync = random() % 8 == 0;
		cr_assert_eq(bch_trans_commit(t, sync ? BCH_TRANS_SYNC : 0), 0, "op %u: %s", op, c->err_msg);
		/* the keys went into the open entry; a sync commit wrote it */
		uint64_t op_seq = sync ? bch_journal_seq_durable(c) : bch_journal_cur_seq(c);
		for (unsigned j = 0; j < n; j++) {
			struct key_hist *h = &hist[keys[j]];
			for (unsigned g = 0; g < h->nr; g++)
				if (h->durable_at[g] == SIZE_MAX && !h->seq[g])
					h->seq[g] = op_seq;
		}
		/* node writes (appends, moves, splits) as reclaim would do them */
		if (op % 40 == 0)
			cr_assert_eq(bch_btree_flush_all(c), 0, "op %u: flush: %s", op, c->err_msg);
		uint64_t durable = bch_journal_seq_durable(c);
		if (durable != last_durable_seq) {
			/* states whose entry is now durable became so at this event */
			size_t ev = iorec_nr_events(rec);
			for (unsigned i = 0; i < NKEYS; i++)
				for (unsigned j = 0; j < hist[i].nr; j++)
					if (hist[i].durable_at[j] == SIZE_MAX && hist[i].seq[j] <= durable)
						hist[i].durable_at[j] = ev;
			last_durable_seq = durable;
		}
	}
	bch_trans_exit(t);
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	c->read_only = true;	/* stop here: the recording is the workload */
	bch_fs_close(c);

	unsigned states = 0;
	for (size_t at = 0; at <= events; at++) {
		bool flush = at > 0 && iorec_event(rec, at - 1)->type == IOREC_FLUSH;
		if (!flush && at % 17 && at != events)
			continue;
		for (unsigned seed = 0; seed < (flush ? 3 : 1); seed++) {
			struct iorec_cut cut = { .at = at, .seed = at * 131 + seed, .keep_pct = 50,
						 .torn = seed != 1 };
			struct iorec_plan plan;
			char msg[300];

			cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
			cr_assert_eq(iorec_write_image(rec, &plan, 0, crash), 0);
			struct bch_fs *r = open_img(crash, false, err);
			if (!r && getenv("CRASH_DEBUG")) {
				fprintf(stderr, "%s\n", iorec_plan_describe(rec, &plan));
				iorec_write_image(rec, &plan, 0, "/tmp/crash_fail.img");
			}
			cr_assert(r, "cut %zu seed %u: open failed: %s", at, seed, err);
			const char *bad = check(r, at, msg, sizeof(msg));
			if (bad && getenv("CRASH_DEBUG")) {
				fprintf(stderr, "%s\n", iorec_plan_describe(rec, &plan));
				iorec_write_image(rec, &plan, 0, "/tmp/crash_fail.img");
			}
			cr_assert_null(bad, "cut %zu seed %u: %s", at, seed, bad);
			cr_assert_eq(bch_fs_close(r), 0, "cut %zu seed %u: clean close", at, seed);
			r = open_img(crash, true, err);
			cr_assert(r, "cut %zu seed %u: reopen after clean close: %s", at, seed, err);
			bad = check(r, at, msg, sizeof(msg));
			cr_assert_null(bad, "cut %zu seed %u, after clean close: %s", at, seed, bad);
			bch_fs_close(r);
			iorec_plan_free(&plan);
			states++;
		}
	}
	cr_log_info("btree crash: %zu events, %u crash states", events, states);
	iorec_free(rec);
	test_tmpdir_remove(tmpdir);
}

Test(btree_crash, every_cut_replays_durable_state, .timeout = 600)
{
	crash_run(1);
}

/* Two copies of every node and journal entry on the one device (version 2). */
Test(btree_crash, two_copies_every_cut_replays_durable_state, .timeout = 600)
{
	crash_run(2);
}
