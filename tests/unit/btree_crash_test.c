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
#include "tests/lib/keyhist.h"
#include "tests/lib/tmpdir.h"

#define NKEYS		300
#define NOPS		(getenv("SOAK") ? 2000 : 400)

static char tmpdir[64];

static struct keyhist kh;	/* the keys' states and when each became durable */

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
	keyhist_init(&kh, NKEYS, 24);

	struct btree_trans *t;
	bch_trans_init(c, &t);
	srandom(4242);
	uint64_t last_durable_seq = 0;
	for (unsigned op = 1; op <= NOPS; op++) {
		unsigned n = 1 + random() % 3, keys[3];
		for (unsigned j = 0; j < n; j++) {
			keys[j] = random() % NKEYS;
			keyhist_update(&kh, t, op, keys[j], random() % 5 ? op : 0);
		}
		bool sync = random() % 8 == 0;
		cr_assert_eq(bch_trans_commit(t, sync ? BCH_TRANS_SYNC : 0), 0, "op %u: %s", op, c->err_msg);
		keyhist_committed(&kh, c, sync);
		/* node writes (appends, moves, splits) as reclaim would do them */
		if (op % 40 == 0)
			cr_assert_eq(bch_btree_flush_all(c), 0, "op %u: flush: %s", op, c->err_msg);
		uint64_t durable = bch_journal_seq_durable(c);
		if (durable != last_durable_seq) {
			keyhist_note_durable(&kh, c, iorec_nr_events(rec));
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
			const char *bad = keyhist_check(&kh, r, at, msg, sizeof(msg));
			if (bad && getenv("CRASH_DEBUG")) {
				fprintf(stderr, "%s\n", iorec_plan_describe(rec, &plan));
				iorec_write_image(rec, &plan, 0, "/tmp/crash_fail.img");
			}
			cr_assert_null(bad, "cut %zu seed %u: %s", at, seed, bad);
			cr_assert_eq(bch_fs_close(r), 0, "cut %zu seed %u: clean close", at, seed);
			r = open_img(crash, true, err);
			cr_assert(r, "cut %zu seed %u: reopen after clean close: %s", at, seed, err);
			bad = keyhist_check(&kh, r, at, msg, sizeof(msg));
			cr_assert_null(bad, "cut %zu seed %u, after clean close: %s", at, seed, bad);
			bch_fs_close(r);
			iorec_plan_free(&plan);
			states++;
		}
	}
	cr_log_info("btree crash: %zu events, %u crash states", events, states);
	iorec_free(rec);
	keyhist_exit(&kh);
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
