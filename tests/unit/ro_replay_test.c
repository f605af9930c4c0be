// SPDX-License-Identifier: GPL-2.0
/*
 * ro_replay_test.c - a read-only open that replays the journal must see what
 * a read-write open sees (issue 18 item 5).  Replay dirties the nodes it puts
 * keys in; read-only, they cannot be written, so a cache over its limit must
 * keep them rather than fail the read that made room ("filesystem is
 * read-only", which fsck -n reported as btree_node_unreadable).
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
#include "tests/lib/tmpdir.h"

#define NKEYS	12000

static char tmpdir[64];

static struct bch_bkey *make(unsigned i, unsigned gen)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(1, i, 0), sizeof(struct bch_raw) + 40);
	struct bch_raw *r = bkey_val(k);
	char buf[48];

	snprintf(buf, sizeof(buf), "k%06u-g%u-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i, gen);
	r->len = 40;
	memcpy(r->data, buf, 40);
	return k;
}

static struct bch_fs *open_img(char *path, bool ro, char *err)
{
	struct bch_opts o;
	struct bch_fs *c = NULL;

	memset(&o, 0, sizeof(o));
	bch_opt_set(&o, Opt_btree_cache_size, 1 << 20);	/* the minimum */
	if (ro)
		bch_opt_set(&o, Opt_read_only, 1);
	if (bch_fs_open(&path, 1, &o, &c, err, 256))
		return NULL;
	return c;
}

static void commit_all(struct bch_fs *c, unsigned gen)
{
	struct btree_trans *t;

	bch_trans_init(c, &t);
	for (unsigned i = 0; i < NKEYS; i++) {
		struct bch_bkey *k = make(i, gen);
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		free(k);
		if (i % 16 == 15 || i == NKEYS - 1)
			cr_assert_eq(bch_trans_commit(t, i == NKEYS - 1 ? BCH_TRANS_SYNC : 0), 0,
				     "gen %u key %u: %s", gen, i, c->err_msg);
	}
	bch_trans_exit(t);
}

static void check_all(struct bch_fs *c, unsigned gen, const char *when)
{
	for (unsigned i = 0; i < NKEYS; i++) {
		struct bch_bkey *k = NULL, *want = make(i, gen);
		int r = bch_btree_lookup(c, BCH_BTREE_ID_test, POS(1, i, 0), &k);
		cr_assert_eq(r, 0, "%s: key %u: %s %s", when, i, bch_err_str(r), c->err_msg);
		cr_assert(!memcmp(bkey_val(k), bkey_val(want), sizeof(struct bch_raw) + 40),
			  "%s: key %u: not generation %u", when, i, gen);
		free(k);
		free(want);
	}
}

Test(ro_replay, more_dirty_nodes_than_cache)
{
	struct bch_format_dev d = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256], path[128];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "roreplay");
	snprintf(path, sizeof(path), "%s/d.img", tmpdir);
	d.path = path;
	d.size = 64 << 20;
	d.bucket_size = 64 << 10;
	d.durability = 1;
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 4096);
	cr_assert_eq(bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);

	struct bch_fs *c = open_img(path, false, err);
	cr_assert(c, "%s", err);
	commit_all(c, 1);
	cr_assert_eq(bch_btree_flush_all(c), 0, "%s", c->err_msg);
	/* every leaf changed again, in the journal only: then a crash */
	commit_all(c, 2);
	c->read_only = true;	/* nothing more written: as if killed */
	bch_fs_close(c);

	c = open_img(path, true, err);
	cr_assert(c, "read-only open with replay: %s", err);
	cr_assert_gt(c->journal_replayed, 0);
	check_all(c, 2, "read-only replay");
	bch_fs_close(c);

	/* and the read-write replay agrees */
	c = open_img(path, false, err);
	cr_assert(c, "read-write open with replay: %s", err);
	check_all(c, 2, "read-write replay");
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}
