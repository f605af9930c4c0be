// SPDX-License-Identifier: GPL-2.0
/*
 * alloc_usage_test.c - device usage sums (bch_dev_usage_get(), kept as
 * buckets change) against a scan of every bucket (bch_dev_usage_scan()):
 * after each of many random writes, overwrites, truncates and unlinks on
 * two devices (fixed seed, printed), with cached copies made (the mover's
 * promote op) and evicted, copygc steps, btree node churn, nodes
 * allocated and freed at once, members set read-only and back, a power
 * cut (the next open counts every pointer), a recount as fsck does, a clean
 * close and reopen (state loaded from the alloc btree), and a shrink and
 * grow of a member.  A change of a bucket that skips the sums shows here.
 *
 * (Sanitizer builds also compare the two inside bch_dev_usage_get(), and
 * abort on a difference: then a failure here is that abort.)
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "alloc_btree.h"
#include "bcachefs.h"
#include "bkey.h"
#include "errcode.h"
#include "btree.h"
#include "copygc.h"
#include "device.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "move.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED	35353535u
#define NR_DEVS	2
#define NFILES	24

static char tmpdir[64], paths[NR_DEVS][TESTFS_PATH_MAX];

/* What a phase left on the devices: so the log shows the workload did something. */
static void usage_log(struct bch_fs *c, const char *when)
{
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_dev_usage u;
		bch_dev_usage_scan(c, d, &u);
		cr_log_info("%s: dev %u: %lu buckets, %lu free, user %lu (%lu sectors), btree %lu, "
			    "cached %lu (%lu cached sectors)", when, d, (unsigned long)u.nbuckets,
			    (unsigned long)u.free_buckets, (unsigned long)u.buckets[BCH_DATA_user],
			    (unsigned long)u.sectors[BCH_DATA_user], (unsigned long)u.buckets[BCH_DATA_btree],
			    (unsigned long)u.buckets[BCH_DATA_cached], (unsigned long)u.cached_sectors);
	}
}

static void usage_check(struct bch_fs *c, const char *when, unsigned op)
{
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_dev_usage got, want;
		bch_dev_usage_get(c, d, &got);
		bch_dev_usage_scan(c, d, &want);
		cr_assert_eq(got.nbuckets, want.nbuckets, "seed %u %s op %u dev %u: nbuckets",
			     SEED, when, op, d);
		cr_assert_eq(got.free_buckets, want.free_buckets,
			     "seed %u %s op %u dev %u: free buckets %lu, scan %lu", SEED, when, op, d,
			     (unsigned long)got.free_buckets, (unsigned long)want.free_buckets);
		cr_assert_eq(got.cached_sectors, want.cached_sectors,
			     "seed %u %s op %u dev %u: cached sectors %lu, scan %lu", SEED, when, op, d,
			     (unsigned long)got.cached_sectors, (unsigned long)want.cached_sectors);
		for (unsigned t = 0; t < BCH_DATA_NR; t++) {
			cr_assert_eq(got.buckets[t], want.buckets[t],
				     "seed %u %s op %u dev %u: type %u buckets %lu, scan %lu", SEED, when,
				     op, d, t, (unsigned long)got.buckets[t], (unsigned long)want.buckets[t]);
			cr_assert_eq(got.sectors[t], want.sectors[t],
				     "seed %u %s op %u dev %u: type %u sectors %lu, scan %lu", SEED, when,
				     op, d, t, (unsigned long)got.sectors[t], (unsigned long)want.sectors[t]);
			cr_assert_eq(got.cached_by_type[t], want.cached_by_type[t],
				     "seed %u %s op %u dev %u: type %u cached %lu, scan %lu", SEED, when,
				     op, d, t, (unsigned long)got.cached_by_type[t],
				     (unsigned long)want.cached_by_type[t]);
		}
	}
}

/* Random writes at random offsets (overwrites), truncates and unlinks. */
static void churn(struct bch_fs *c, uint64_t *rng, unsigned ops, const char *when)
{
	static char buf[128 * 1024];

	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 13 + 5);
	for (unsigned op = 0; op < ops; op++) {
		uint64_t x = testfs_xorshift(rng), inum;
		char name[32];
		snprintf(name, sizeof(name), "f%u", (unsigned)(x % NFILES));
		unsigned what = (x >> 8) % 8;
		if (what == 0) {
			int r = bch_fs_unlink(c, BCH_ROOT_INO, name);
			cr_assert(!r || r == -ENOENT, "seed %u %s op %u: unlink: %d", SEED, when, op, r);
			usage_check(c, when, op);
			continue;
		}
		int r = bch_fs_lookup(c, BCH_ROOT_INO, name, &inum);
		if (r == -ENOENT)
			r = bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum);
		cr_assert_eq(r, 0, "seed %u %s op %u: create: %d", SEED, when, op, r);
		if (what == 1) {
			r = bch_fs_truncate(c, inum, 4096 * ((x >> 16) % 32));
			cr_assert_eq(r, 0, "seed %u %s op %u: truncate: %d", SEED, when, op, r);
		} else {
			uint64_t off = 4096 * ((x >> 16) % 48);
			size_t len = 4096 * (1 + (x >> 24) % 32);
			ssize_t w = bch_fs_write(c, inum, off, buf, len);
			cr_assert(w == (ssize_t)len || w == -BCH_ERR_no_space || w == -ENOSPC,
				  "seed %u %s op %u: write: %zd %s", SEED, when, op, w, c->err_msg);
		}
		usage_check(c, when, op);
	}
	usage_log(c, when);
}

/*
 * Btree node churn: many files with long names created, then unlinked
 * (nodes split, merge and are rewritten, so node buckets empty and the
 * open one can be left with no live node); then each member set read-only
 * (its open buckets close) and read-write again.
 */
static void btree_churn(struct bch_fs *c, uint64_t *rng, unsigned rounds)
{
	char err[256];

	for (unsigned r = 0; r < rounds; r++) {
		unsigned n = 100 + testfs_xorshift(rng) % 200;
		for (unsigned i = 0; i < n; i++) {
			char name[200];
			uint64_t inum;
			snprintf(name, sizeof(name), "node-churn-%u-%0120u", r, i);
			int e = bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum);
			cr_assert_eq(e, 0, "seed %u round %u create %u: %d %s", SEED, r, i, e, c->err_msg);
			usage_check(c, "node churn create", i);
		}
		for (unsigned i = 0; i < n; i++) {
			char name[200];
			snprintf(name, sizeof(name), "node-churn-%u-%0120u", r, i);
			int e = bch_fs_unlink(c, BCH_ROOT_INO, name);
			cr_assert_eq(e, 0, "seed %u round %u unlink %u: %d %s", SEED, r, i, e, c->err_msg);
			usage_check(c, "node churn unlink", i);
		}
		for (unsigned d = 0; d < NR_DEVS; d++) {
			int e = bch_dev_set_state(c, d, BCH_MEMBER_STATE_ro, false, err, sizeof(err));
			cr_assert_eq(e, 0, "seed %u round %u: dev %u read-only: %s", SEED, r, d, err);
			usage_check(c, "member read-only", d);
			e = bch_dev_set_state(c, d, BCH_MEMBER_STATE_rw, false, err, sizeof(err));
			cr_assert_eq(e, 0, "seed %u round %u: dev %u read-write: %s", SEED, r, d, err);
			usage_check(c, "member read-write", d);
		}
	}
	usage_log(c, "node churn");
}

/*
 * Nodes allocated and freed at once (as alloc_nodes() does when it cannot
 * get all it wants): the open node bucket is left with no live sectors,
 * so the next one opened frees it; then the stream is closed empty (a
 * member set read-only, or shrunk, closes it the same way).
 */
static void node_alloc_free(struct bch_fs *c)
{
	unsigned per_bucket = bch_alloc_bucket_sectors(c, 0) / c->sb->btree_node_size;

	for (unsigned i = 0; i < 2 * per_bucket + 1; i++) {
		struct bch_extent_ptr p;
		cr_assert_eq(bch_alloc_btree_node(c, 1, &p), 0, "node %u: %s", i, c->err_msg);
		usage_check(c, "node allocated", i);
		bch_free_btree_node(c, &p, 1);
		usage_check(c, "node freed", i);
	}
	for (unsigned d = 0; d < NR_DEVS; d++) {
		bch_alloc_dev_set_limit(c, d, 0);
		usage_check(c, "streams closed", d);
		bch_alloc_dev_set_limit(c, d, UINT64_MAX);
	}
}

/* Cached copies of every extent of the files (the mover's promote op). */
static void promote_all(struct bch_fs *c)
{
	struct bch_move_stats ms = { 0 };
	struct bch_mover *m;

	cr_assert_eq(bch_mover_init(c, &ms, &m), 0);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[32];
		uint64_t inum;
		snprintf(name, sizeof(name), "f%u", f);
		if (bch_fs_lookup(c, BCH_ROOT_INO, name, &inum))
			continue;
		struct btree_iter it;
		const struct bch_bkey *k;
		int err;
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0),
				    POS(inum, UINT64_MAX, UINT32_MAX));
		struct bch_bkey *v[256];
		unsigned n = 0;
		while ((k = bch_btree_iter_next(&it, &err)) && n < 256)
			if (k->type == BCH_BKEY_extent)
				v[n++] = bch_bkey_dup(k);
		bch_btree_iter_exit(&it);
		cr_assert_eq(err, 0, "%s", c->err_msg);
		for (unsigned i = 0; i < n; i++) {
			struct bch_move_op op = { .nr_new = 1, .cached = true };
			bch_mover_add(m, v[i], &op);	/* no room is not a failure here */
			free(v[i]);
		}
	}
	cr_assert_eq(bch_mover_exit(m), 0, "%s", c->err_msg);
}

static struct bch_fs *open_fs(char ***pp, unsigned *nr)
{
	char err[256];
	struct bch_opts o;
	struct bch_fs *c = NULL;

	*pp = calloc(NR_DEVS + 2, sizeof(char *));
	*nr = NR_DEVS;
	for (unsigned i = 0; i < NR_DEVS; i++)
		(*pp)[i] = strdup(paths[i]);
	memset(&o, 0, sizeof(o));
	cr_assert_eq(bch_fs_open(*pp, *nr, &o, &c, err, sizeof(err)), 0, "open: %s", err);
	return c;
}

static void paths_free(char **pp, unsigned nr)
{
	for (unsigned i = 0; i < nr; i++)
		free(pp[i]);
	free(pp);
}

Test(alloc_usage, sums_equal_scan, .timeout = 300)
{
	uint64_t rng = SEED;
	char **pp, err[256];
	unsigned nr;
	struct bch_opts o;

	cr_log_info("alloc_usage: seed %u", SEED);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "allocusage");
	testfs_format(tmpdir, NR_DEVS, 12, 16 << 10, 1, paths);
	struct bch_fs *c = open_fs(&pp, &nr);
	usage_check(c, "open", 0);

	churn(c, &rng, 300, "churn");
	promote_all(c);
	usage_check(c, "promote", 0);
	usage_log(c, "promote");
	churn(c, &rng, 150, "churn cached");
	for (unsigned d = 0; d < NR_DEVS; d++) {
		int r = bch_alloc_evict(c, d, 4);
		cr_assert_geq(r, 0, "evict: %d %s", r, c->err_msg);
		usage_check(c, "evict", d);
		cr_log_info("evict: dev %u: %d buckets", d, r);
	}
	for (unsigned i = 0; i < 8; i++) {
		int r = bch_copygc_step(c, NULL);
		cr_assert_geq(r, 0, "copygc: %d %s", r, c->err_msg);
		usage_check(c, "copygc", i);
		cr_log_info("copygc step %u: %d", i, r);
	}
	btree_churn(c, &rng, 6);
	node_alloc_free(c);

	/* power cut with cached copies about: the next open counts every pointer */
	promote_all(c);
	usage_check(c, "promote again", 0);
	c->read_only = true;
	bch_fs_close(c);
	paths_free(pp, nr);
	c = open_fs(&pp, &nr);
	usage_check(c, "open after a power cut", 0);
	usage_log(c, "open after a power cut");
	churn(c, &rng, 60, "after a power cut");

	cr_assert_eq(bch_alloc_btree_recount(c), 0, "recount: %s", c->err_msg);
	usage_check(c, "recount", 0);
	usage_log(c, "recount");
	churn(c, &rng, 100, "after recount");

	/* clean close; the state is loaded from the alloc btree */
	cr_assert_eq(bch_fs_close(c), 0);
	paths_free(pp, nr);
	c = open_fs(&pp, &nr);
	usage_check(c, "reopen", 0);
	churn(c, &rng, 100, "reopened");

	/* shrink member 1 (what lies past the new end moves), then grow it back */
	memset(&o, 0, sizeof(o));
	cr_assert_eq(bch_dev_resize(&c, &pp, &nr, &o, 1, 8 << 20, err, sizeof(err)), 0, "shrink: %s", err);
	usage_check(c, "shrunk", 0);
	churn(c, &rng, 60, "shrunk");
	cr_assert_eq(bch_dev_resize(&c, &pp, &nr, &o, 1, 12 << 20, err, sizeof(err)), 0, "grow: %s", err);
	usage_check(c, "grown", 0);
	churn(c, &rng, 60, "grown");

	cr_assert_eq(bch_fs_close(c), 0);
	paths_free(pp, nr);
	test_tmpdir_remove(tmpdir);
}

/*
 * A shrink with nothing to move: the member's open user bucket lies past
 * the new end, empty (its file deleted) but still open, so the forgetting
 * of the buckets past the end (bch_alloc_dev_forget) frees it.
 */
Test(alloc_usage, shrink_past_empty_open_bucket, .timeout = 120)
{
	static char buf[256 * 1024];
	char **pp, err[256];
	unsigned nr;
	uint64_t inum;
	struct bch_opts o;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "allocusage2");
	testfs_format(tmpdir, NR_DEVS, 12, 16 << 10, 1, paths);
	struct bch_fs *c = open_fs(&pp, &nr);
	memset(buf, 0x5a, sizeof(buf));
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "big", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	/* on member 1 only, past 8 MiB of it */
	c->opts.v[Opt_foreground_target] = BCH_TARGET_DEV_START + 1;
	for (uint64_t off = 0; off < (9 << 20); off += sizeof(buf))
		cr_assert_eq(bch_fs_write(c, inum, off, buf, sizeof(buf)), (ssize_t)sizeof(buf),
			     "%s", c->err_msg);
	c->opts.v[Opt_foreground_target] = 0;
	usage_check(c, "big file", 0);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "big"), 0);
	usage_check(c, "big file deleted", 0);
	struct bch_dev_usage u;
	bch_dev_usage_scan(c, 1, &u);
	cr_assert_eq(u.buckets[BCH_DATA_user], 1, "member 1 should hold only its open bucket: %lu",
		     (unsigned long)u.buckets[BCH_DATA_user]);
	cr_assert_eq(bch_fs_fsync(c), 0, "%s", c->err_msg);

	/*
	 * What the shrink does first, alone: a shrink reopens the filesystem
	 * (the sums are summed again), so the forgetting is checked before.
	 * Then a power cut: nothing of it is written.
	 */
	uint64_t keep = (8ULL << 20 >> 9) / bch_alloc_bucket_sectors(c, 1);
	cr_assert_eq(bch_alloc_dev_forget(c, 1, keep), 0, "%s", c->err_msg);
	usage_check(c, "buckets past the new end forgotten", 0);
	bch_dev_usage_scan(c, 1, &u);
	cr_assert_eq(u.buckets[BCH_DATA_user], 0, "member 1's open bucket was not past %lu",
		     (unsigned long)keep);
	c->read_only = true;
	bch_fs_close(c);
	paths_free(pp, nr);

	c = open_fs(&pp, &nr);
	usage_check(c, "reopened", 0);
	memset(&o, 0, sizeof(o));
	cr_assert_eq(bch_dev_resize(&c, &pp, &nr, &o, 1, 8 << 20, err, sizeof(err)), 0, "shrink: %s", err);
	usage_check(c, "shrunk", 0);
	cr_assert_eq(bch_fs_close(c), 0);
	paths_free(pp, nr);
	test_tmpdir_remove(tmpdir);
}
