// SPDX-License-Identifier: GPL-2.0
/*
 * journal_evict_test.c - evictions cannot exhaust the journal's reserve.
 *
 * A read walks a tree with more dirty nodes than the cache holds: every node
 * read from disk makes the cache shrink, which writes the coldest dirty
 * nodes.  With 4 KiB nodes and 4 KiB blocks no node has room for an append,
 * so each write is a move, and each move relinks its parent through the
 * journal's reserve (an internal reservation: no reclaim, nothing given
 * back between them).  The journal is small (4 buckets) and the walk makes
 * no commit.  The walk must read every key, the close must succeed, and
 * the image must reopen with fsck -n clean.  Geometries: one journal device
 * with one copy (two lanes, stubs), one with two copies (metadata on one
 * device twice), two devices with one and with two copies, and a version-1
 * filesystem (one ring, no lanes).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "bkey.h"
#include "blockdev.h"
#include "btree.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "journal.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

struct geom {
	char		name[32];
	unsigned	nr_devs, replicas, version;	/* version 0: current */
	unsigned	bucket_kb;			/* 0: 64 */
};

/*
 * 20000 keys of 40-byte values make about 600 leaves; every 7th key changed
 * dirties nearly all of them, more than the 1 MiB cache holds.  The images
 * are 64 MiB with a journal planned for 16 MiB: 4 buckets of 64 KiB.
 * (Also passed: strides 1, 2, 3, 5, 13; values 0, 8, 24; 40000 keys; a
 * journal planned for 64 MiB.)
 */
#define NKEYS		20000
#define VAL_LEN		40
#define STRIDE		7
#define SIZE_MB		64
#define PLAN_MB		16

static unsigned nkeys = NKEYS, val_len = VAL_LEN, plan_mb = PLAN_MB, size_mb = SIZE_MB;
static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];

static struct bch_bkey *make(unsigned i, unsigned gen)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(1, i, 0), sizeof(struct bch_raw) + val_len);
	struct bch_raw *r = bkey_val(k);
	char buf[64];

	snprintf(buf, sizeof(buf), "k%06u-g%u-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i, gen);
	r->len = val_len;
	memcpy(r->data, buf, val_len);
	return k;
}

/* Key i's generation in the model: gen 2 for every stride-th key, else 1. */
static unsigned gen_of(unsigned i, unsigned stride)
{
	return i % stride == 0 ? 2 : 1;
}

static void format(const struct geom *g)
{
	struct bch_format_dev d[2] = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256];

	for (unsigned i = 0; i < g->nr_devs; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/d%u.img", tmpdir, i);
		d[i].path = paths[i];
		d[i].size = (uint64_t)size_mb << 20;
		d[i].plan_size = (uint64_t)plan_mb << 20;	/* a small journal */
		d[i].bucket_size = (g->bucket_kb ? g->bucket_kb : 64) << 10;
		d[i].durability = 1;
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 4096);
	bch_opt_set(&o, Opt_metadata_replicas, g->replicas);
	cr_assert_eq(bch_format(d, g->nr_devs, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);
	if (!g->version)
		return;
	/* an older version: one ring a device, no stubs */
	for (unsigned i = 0; i < g->nr_devs; i++) {
		struct bch_blockdev *bd;
		struct bch_sb *sb;
		cr_assert_eq(bch_dev_open(paths[i], 0, &bd), 0);
		cr_assert_eq(bch_sb_read(bd, &sb, NULL), 0);
		sb->version = sb->version_min = g->version;
		cr_assert_eq(bch_sb_write_dev(bd, sb, sb->dev_idx, &sb->layout), 0);
		free(sb);
		bch_dev_close(bd);
	}
}

static struct bch_fs *open_fs(const struct geom *g, char *err)
{
	char *p[2] = { paths[0], paths[1] };
	struct bch_opts o;
	struct bch_fs *c = NULL;

	memset(&o, 0, sizeof(o));
	bch_opt_set(&o, Opt_btree_cache_size, 1 << 20);	/* the minimum */
	if (bch_fs_open(p, g->nr_devs, &o, &c, err, 256))
		return NULL;
	return c;
}

static void commit_keys(struct bch_fs *c, unsigned gen, unsigned stride)
{
	struct btree_trans *t;
	unsigned n = 0;

	bch_trans_init(c, &t);
	for (unsigned i = 0; i < nkeys; i += stride) {
		struct bch_bkey *k = make(i, gen);
		cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_test, k), 0);
		free(k);
		bool last = i + stride >= nkeys;
		/* the last one durable: a crash after it keeps every key */
		if (++n % 16 == 0 || last)
			cr_assert_eq(bch_trans_commit(t, last ? BCH_TRANS_SYNC : 0), 0, "gen %u key %u: %s",
				     gen, i, c->err_msg);
	}
	bch_trans_exit(t);
}

static void check_all(struct bch_fs *c, unsigned stride, const char *when)
{
	for (unsigned i = 0; i < nkeys; i++) {
		struct bch_bkey *k = NULL, *want = make(i, gen_of(i, stride));
		int r = bch_btree_lookup(c, BCH_BTREE_ID_test, POS(1, i, 0), &k);
		cr_assert_eq(r, 0, "%s: key %u: %s %s", when, i, bch_err_str(r), c->err_msg);
		cr_assert(!memcmp(bkey_val(k), bkey_val(want), sizeof(struct bch_raw) + val_len),
			  "%s: key %u: not generation %u", when, i, gen_of(i, stride));
		free(k);
		free(want);
	}
}

static void run(const struct geom *g, bool crash, unsigned stride)
{
	char err[256], msg[512];

	cr_log_info("%s: %u keys, value %u, stride %u, image %u MiB planned as %u, crash %d",
		    g->name, nkeys, val_len, stride, size_mb, plan_mb, crash);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "jevict");
	format(g);

	struct bch_fs *c = open_fs(g, err);
	cr_assert(c, "%s", err);
	commit_keys(c, 1, 1);
	cr_assert_eq(bch_btree_flush_all(c), 0, "%s", c->err_msg);
	uint64_t seq0 = bch_journal_seq_open(c);
	commit_keys(c, 2, stride);
	cr_log_info("%s: gen 2 took journal %llu..%llu, last_seq %llu, moves %llu", g->name,
		    (unsigned long long)seq0, (unsigned long long)bch_journal_seq_open(c),
		    (unsigned long long)bch_journal_last_seq(c),
		    (unsigned long long)c->roots->ahead_moves);
	if (crash) {
		c->read_only = true;	/* nothing more written: as if killed */
		bch_fs_close(c);
		c = open_fs(g, err);
		cr_assert(c, "read-write open with replay: %s", err);
		cr_log_info("%s: replayed %u entries", g->name, (unsigned)c->journal_replayed);
	}
	/*
	 * The walk relinks nothing: what it evicts dirty is written in place
	 * or left for the close (a move's relink could split the parent the
	 * walk holds, freed under it: ASan use-after-free before).
	 */
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	size_t before = bch_btree_cache_bytes(c);
	seq0 = bch_journal_seq_open(c);
	check_all(c, stride, "walk");
	cr_log_info("%s: the walk took journal %llu..%llu, cache %zu -> %zu bytes", g->name,
		    (unsigned long long)seq0, (unsigned long long)bch_journal_seq_open(c), before,
		    bch_btree_cache_bytes(c));
	cr_assert_eq(bch_journal_seq_open(c), seq0, "the walk wrote journal entries");
	for (unsigned level = 1; level < 4; level++)
		cr_assert(!bch_journal_open_has_keys(c, BCH_BTREE_ID_test, level),
			  "the walk relinked nodes (level %u keys journalled)", level);
	int r = bch_fs_close(c);
	cr_assert_eq(r, 0, "close: %s", bch_err_str(r));

	c = open_fs(g, err);
	cr_assert(c, "reopen: %s", err);
	check_all(c, stride, "reopened");
	cr_assert_eq(bch_fs_close(c), 0);
	const char *bad = testfs_fsck_problem(paths, g->nr_devs, false, msg, sizeof(msg));
	cr_assert(!bad, "%s", bad);
	test_tmpdir_remove(tmpdir);
}

static const struct geom geoms[] = {
	{ "one device, one copy", 1, 1, 0 },
	{ "one device, two copies", 1, 2, 0 },
	{ "two devices, one copy", 2, 1, 0 },
	{ "two devices, two copies", 2, 2, 0 },
	{ "version 1, one ring", 1, 1, BCH_VERSION_1 },
	/* entries of 128 KiB: more pinned nodes, more dirty than the cache after replay */
	{ "256k buckets, one copy", 1, 1, 0, 256 },
	{ "256k buckets, two devices", 2, 2, 0, 256 },
};

ParameterizedTestParameters(journal_evict, walk)
{
	return cr_make_param_array(struct geom, (void *)geoms, sizeof(geoms) / sizeof(geoms[0]));
}

ParameterizedTest(const struct geom *g, journal_evict, walk)
{
	run(g, false, STRIDE);
}

ParameterizedTestParameters(journal_evict, walk_after_replay)
{
	return cr_make_param_array(struct geom, (void *)geoms, sizeof(geoms) / sizeof(geoms[0]));
}

ParameterizedTest(const struct geom *g, journal_evict, walk_after_replay)
{
	run(g, true, STRIDE);
}
