// SPDX-License-Identifier: GPL-2.0
/*
 * newnode_crash_test.c - power cuts around new btree nodes written ahead of
 * the journal (btree.h invariants (6) and (7)): split halves and merged
 * nodes go to disk before the journal entry that holds their newest keys,
 * and before the entry that links them into their parent, with no flush of
 * the journal first.
 *
 * The workload: transactions that fill small (4 KiB) leaves in random order
 * (each full leaf is split by the commit that finds it full, its newest keys
 * still only in the open entry), then delete runs of keys (leaves left
 * underfull are merged by the deleting commit) and insert again; one commit
 * in eight is synchronous, and now and then every dirty node is written.
 * The test first checks that the workload does what it is for: splits and
 * merges whose new node held keys of an entry that was not durable yet.
 *
 * Then a cut at EVERY event (each write and each flush), unflushed writes
 * kept at random, every other cut tearing one of them: the image must open
 * (replay), hold exactly the state after some prefix of the transactions
 * that includes every one acknowledged durable (no transaction half there),
 * and fsck -n must find nothing.  Every eighth cut also opens read-write,
 * closes cleanly, and checks again.  The seed of a failure is printed.
 * Once in the clear, once encrypted.
 *
 * newnode_scan: what such a cut may leave for fsck's node scan, an unlinked
 * leaf newer than the journal, is not taken over the leaf the journal
 * describes (btree_node_scan.c rule (5)).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "bkey.h"
#include "btree.h"
#include "btree_node_scan.h"
#include "errcode.h"
#include "fsck.h"
#include "fs.h"
#include "journal.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/keyhist.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NKEYS		240
#define NOPS		150
#define VAL_BYTES	96	/* ~40 keys fill a 4 KiB leaf past its split point */

static char tmpdir[64];

static struct keyhist kh;	/* the keys' states and when each became durable */

/* One transaction: keys[0..n) set to generation op, or deleted; recorded in the history. */
static void txn(struct bch_fs *c, struct btree_trans *t, unsigned op, const unsigned *keys,
		unsigned n, bool del, bool sync)
{
	for (unsigned j = 0; j < n; j++)
		keyhist_update(&kh, t, op, keys[j], del ? 0 : op);
	cr_assert_eq(bch_trans_commit(t, sync ? BCH_TRANS_SYNC : 0), 0, "op %u: %s", op, c->err_msg);
	keyhist_committed(&kh, c, sync);
}

static void crash_run(bool encrypted)
{
	char paths[1][TESTFS_PATH_MAX], crash[1][TESTFS_PATH_MAX], err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "nncrash");
	testfs_encrypted = encrypted;
	testfs_format(tmpdir, 1, 8, 4096, 1, paths);
	testfs_encrypted = false;
	snprintf(crash[0], TESTFS_PATH_MAX, "%s/crash.img", tmpdir);
	keyhist_init(&kh, NKEYS, VAL_BYTES);

	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	cr_assert_eq(c->crypt != NULL, encrypted);
	struct iorec *rec = iorec_new(1);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	struct btree_trans *t;
	bch_trans_init(c, &t);
	srandom(3131);
	unsigned order[NKEYS];
	for (unsigned i = 0; i < NKEYS; i++)
		order[i] = i;
	for (unsigned i = NKEYS - 1; i > 0; i--) {
		unsigned j = random() % (i + 1), x = order[i];
		order[i] = order[j];
		order[j] = x;
	}
	unsigned pos = 0, op = 1;
	for (; op <= NOPS; op++) {
		unsigned keys[8], n;
		bool del = false;
		if (pos < NKEYS) {
			/* fill: the keys in random order, 4 a transaction */
			for (n = 0; n < 4 && pos < NKEYS; n++)
				keys[n] = order[pos++];
		} else if (op % 3) {
			/* empty a run: its leaf underfull, merged with a sibling */
			unsigned from = random() % (NKEYS - 8);
			for (n = 0; n < 8; n++)
				keys[n] = from + n;
			del = true;
		} else {
			/* and fill some again: more splits */
			unsigned from = random() % (NKEYS - 8);
			for (n = 0; n < 8; n++)
				keys[n] = from + n;
		}
		txn(c, t, op, keys, n, del, random() % 8 == 0);
		if (op % 50 == 0)
			cr_assert_eq(bch_btree_flush_all(c), 0, "op %u: flush: %s", op, c->err_msg);
		keyhist_note_durable(&kh, c, iorec_nr_events(rec));
	}
	bch_trans_exit(t);
	/* what the test is for happened, several times over */
	cr_assert_geq(c->roots->ahead_splits, 4, "splits written ahead of the journal: %llu",
		      (unsigned long long)c->roots->ahead_splits);
	cr_assert_geq(c->roots->ahead_merges, 4, "merges written ahead of the journal: %llu",
		      (unsigned long long)c->roots->ahead_merges);
	unsigned long long splits = c->roots->ahead_splits, merges = c->roots->ahead_merges;
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	c->read_only = true;	/* stop here: the recording is the workload */
	bch_fs_close(c);

	unsigned states = 0;
	for (size_t at = 0; at <= events; at++) {
		struct iorec_cut cut = { .at = at, .seed = at * 977 + 5, .keep_pct = 50,
					 .torn = at % 2 };
		struct iorec_plan plan;
		char msg[300];

		cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
		cr_assert_eq(iorec_write_image(rec, &plan, 0, crash[0]), 0);
		struct bch_fs *r = testfs_open(crash, 1, TESTFS_RO | TESTFS_FSCK, 0, err, sizeof(err));
		if (!r && getenv("CRASH_DEBUG"))
			fprintf(stderr, "%s\n", iorec_plan_describe(rec, &plan));
		cr_assert(r, "cut %zu seed %llu: open failed: %s", at, (unsigned long long)cut.seed, err);
		const char *bad = keyhist_check(&kh, r, at, msg, sizeof(msg));
		if (!bad)
			bad = testfs_fsck_problem_fs(r, false, msg, sizeof(msg));
		if (bad && getenv("CRASH_DEBUG"))
			fprintf(stderr, "%s\n", iorec_plan_describe(rec, &plan));
		cr_assert_null(bad, "cut %zu seed %llu: %s", at, (unsigned long long)cut.seed, bad);
		bch_fs_close(r);
		if (at % 8 == 0) {
			r = testfs_open(crash, 1, 0, 0, err, sizeof(err));
			cr_assert(r, "cut %zu: read-write open: %s", at, err);
			cr_assert_eq(bch_fs_close(r), 0, "cut %zu: clean close", at);
			r = testfs_open(crash, 1, TESTFS_RO, 0, err, sizeof(err));
			cr_assert(r, "cut %zu: reopen after clean close: %s", at, err);
			bad = keyhist_check(&kh, r, at, msg, sizeof(msg));
			cr_assert_null(bad, "cut %zu, after clean close: %s", at, bad);
			bch_fs_close(r);
		}
		iorec_plan_free(&plan);
		states++;
	}
	cr_log_info("newnode crash%s: %zu events, %u crash states, %llu splits and %llu merges "
		    "written ahead", encrypted ? " (encrypted)" : "", events, states, splits, merges);
	iorec_free(rec);
	keyhist_exit(&kh);
	test_tmpdir_remove(tmpdir);
}

Test(newnode_crash, splits_and_merges_written_ahead_every_cut, .timeout = 600)
{
	crash_run(false);
}

/* Encrypted nodes: each new node takes a nonce counter value (crypt.h), the same cuts. */
Test(newnode_crash, encrypted_every_cut, .timeout = 600)
{
	crash_run(true);
}

static bool none_reachable(void *priv, const struct bch_found_node *f)
{
	(void)priv; (void)f;
	return false;
}

/*
 * Under a lost interior node: the leaf the journal describes (journal_seq
 * 10) and a split half a crash left unlinked (journal_seq 30, newer than the
 * newest entry read, 25).  Only the first is taken; with no journal replayed,
 * or a lost tail after entry 25, the newest wins as before (rule (4)).
 */
Test(newnode_scan, unlinked_leaf_newer_than_journal_not_taken)
{
	char paths[1][TESTFS_PATH_MAX], err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "nnscan");
	testfs_format(tmpdir, 1, 8, 4096, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	/* a place in a bucket of btree nodes: the test btree's root */
	const struct bch_btree_ptr *bp = bkey_val(c->roots->r[BCH_BTREE_ID_test].key);
	struct bch_found_node n[2] = {
		{ .min_key = POS(4, 0, 0), .max_key = POS(4, 100, 0), .seq = 11, .journal_seq = 10,
		  .ptr = bp->ptrs[0], .sectors_written = 16, .id = BCH_BTREE_ID_test },
		{ .min_key = POS(4, 0, 0), .max_key = POS(4, 50, 0), .seq = 12, .journal_seq = 30,
		  .ptr = bp->ptrs[0], .sectors_written = 8, .id = BCH_BTREE_ID_test },
	};
	struct bch_node_scan s = { .n = n, .nr = 2 };
	struct bch_lost_range lost = { .min_key = POS(4, 0, 0), .max_key = POS(4, 200, 0),
				       .level = 1, .seq = 99 };
	struct bch_node_pick *p;
	size_t nr;

	c->journal_replayed = 3;
	c->replay_newest = 25;
	cr_assert_eq(bch_node_scan_pick(c, &s, BCH_BTREE_ID_test, &lost, 1, none_reachable, NULL,
					&p, &nr), 0);
	cr_assert_eq(nr, 1);
	cr_assert_eq(p[0].f, &n[0]);
	cr_assert(bpos_eq(p[0].min_key, POS(4, 0, 0)) && bpos_eq(p[0].max_key, POS(4, 100, 0)));
	free(p);

	/* entries after 25 were written and lost (fsck): the newer leaf may be all that is left */
	uint64_t gap[1][2] = { { 26, UINT64_MAX } };
	c->journal_gaps = gap;
	c->nr_journal_gaps = 1;
	cr_assert_eq(bch_node_scan_pick(c, &s, BCH_BTREE_ID_test, &lost, 1, none_reachable, NULL,
					&p, &nr), 0);
	cr_assert_eq(nr, 2);
	cr_assert_eq(p[0].f, &n[1]);
	free(p);
	c->journal_gaps = NULL;
	c->nr_journal_gaps = 0;

	/* opened clean (nothing replayed): no limit */
	c->journal_replayed = 0;
	cr_assert_eq(bch_node_scan_pick(c, &s, BCH_BTREE_ID_test, &lost, 1, none_reachable, NULL,
					&p, &nr), 0);
	cr_assert_eq(nr, 2);
	cr_assert_eq(p[0].f, &n[1]);
	free(p);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

/* Commit keys lo..hi (step 1) of the test btree, set (gen) or deleted (gen 0). */
static void put_range(struct bch_fs *c, unsigned lo, unsigned hi, unsigned gen, bool sync)
{
	struct btree_trans *t;

	bch_trans_init(c, &t);
	for (unsigned i = lo; i <= hi; i++) {
		struct bch_bkey *k = keyhist_key(i, gen, VAL_BYTES);
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		free(k);
	}
	cr_assert_eq(bch_trans_commit(t, sync ? BCH_TRANS_SYNC : 0), 0, "%s", c->err_msg);
	bch_trans_exit(t);
}

/* The root's level and number of keys. */
static void root_shape(struct bch_fs *c, unsigned *level, unsigned *nr)
{
	struct btree *b;
	struct btree_root *rt = &c->roots->r[BCH_BTREE_ID_test];

	cr_assert_eq(bch_btree_node_get(c, BCH_BTREE_ID_test, rt->level, rt->key, &b), 0, "%s",
		     c->err_msg);
	*level = b->level;
	*nr = b->nr;
	bch_btree_node_put(c, b);
}

/*
 * A root that a merge left with one child is replaced by it, and that child
 * splits into a new root, all in one journal entry: the merge's keys of the
 * root's level (a delete and a pointer to the merged node) are in that
 * entry, and replay must not apply them to the new root (btree.h invariant
 * (7): the entry is written before the new root is made).  No clean close:
 * the reopen replays.
 */
Test(newnode_crash, root_regrown_in_the_entry_of_its_collapse)
{
	char paths[1][TESTFS_PATH_MAX], err[256];
	unsigned level, nr;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "nnroot");
	testfs_format(tmpdir, 1, 8, 4096, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	/* two leaves under a root */
	for (unsigned i = 0; i < 24; i += 4)
		put_range(c, i, i + 3, 1, true);
	cr_assert_eq(bch_btree_flush_all(c), 0, "%s", c->err_msg);
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	root_shape(c, &level, &nr);
	cr_assert_eq(level, 1);
	cr_assert_eq(nr, 2, "the root has %u children", nr);
	/* both leaves emptied to two keys: merged, and the root collapses onto the merged leaf */
	uint64_t entry = bch_journal_seq_open(c);
	put_range(c, 2, 21, 0, false);
	root_shape(c, &level, &nr);
	cr_assert_eq(level, 0, "the root did not collapse");
	/* the same entry: fill the leaf until it splits into a new root */
	for (unsigned i = 100; level == 0 && i < 200; i += 4) {
		put_range(c, i, i + 3, 2, false);
		root_shape(c, &level, &nr);
	}
	cr_assert_eq(level, 1, "the root did not split");
	uint64_t seq = bch_journal_seq_open(c);
	cr_assert(seq == entry || seq == entry + 1, "entries %llu..%llu",
		  (unsigned long long)entry, (unsigned long long)seq);
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	unsigned inserted = 0;
	for (unsigned i = 100; i < 200; i++) {
		struct bch_bkey *k = NULL;
		if (!bch_btree_lookup(c, BCH_BTREE_ID_test, POS(1, i, 0), &k))
			inserted = i + 1;
		free(k);
	}
	c->read_only = true;	/* a crash: nothing more reaches the disk */
	bch_fs_close(c);

	c = testfs_open(paths, 1, TESTFS_RO | TESTFS_FSCK, 0, err, sizeof(err));
	cr_assert(c, "replay: %s", err);
	for (unsigned i = 0; i < 200; i++) {
		struct bch_bkey *k = NULL;
		int r = bch_btree_lookup(c, BCH_BTREE_ID_test, POS(1, i, 0), &k);
		bool want = i < 2 || (i >= 22 && i < 24) || (i >= 100 && i < inserted);
		cr_assert_eq(r == 0, want, "key %u: %s", i, r ? c->err_msg : "there");
		if (!r)
			cr_assert_eq(keyhist_gen_of(k, i, VAL_BYTES), i < 100 ? 1u : 2u, "key %u", i);
		free(k);
	}
	char msg[300];
	const char *bad = testfs_fsck_problem_fs(c, false, msg, sizeof(msg));
	cr_assert_null(bad, "%s", bad);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}
