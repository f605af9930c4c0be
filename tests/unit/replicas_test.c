// SPDX-License-Identifier: GPL-2.0
/*
 * replicas_test.c - the superblock's replicas table (replicas.c) and the
 * degraded open it decides (fs.c).
 *
 *   - two and three devices: writes with data_replicas 1 and 2 make exactly
 *     the entries their extents use (one member, then two), every btree node
 *     set is there, the table on disk equals the one in memory and the one
 *     recomputed from the keys;
 *   - gc: a file's entry goes when the file does (after bch_replicas_gc());
 *   - degraded open: with and without a copy left, with and without
 *     -o degraded, and the message saying what would be lost;
 *   - power cuts (write recorder) through a workload that adds entries,
 *     and through one whose gc points drop them (deletes, a rereplicate
 *     job, an explicit gc): whatever survives, the table is a superset of
 *     what the keys use (an entry may outlive its keys, never the reverse);
 *   - an entry no key uses (a crash before a gc point) does not refuse a
 *     degraded open: the open checks the keys; real loss is still refused,
 *     and the close drops the stale entry.
 * Data is deterministic (seed printed in failures).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "data_job.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "replicas.h"
#include "super.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/tmpdir.h"

#define SEED	2020u

static char tmpdir[64], paths[3][128];

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "replicas");
}

static void teardown(void)
{
	test_tmpdir_remove(tmpdir);
}

TestSuite(replicas, .init = setup, .fini = teardown);

static void format_n(unsigned nr, unsigned size_mb, unsigned meta_replicas, unsigned data_replicas)
{
	struct bch_format_dev devs[3] = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256];

	for (unsigned i = 0; i < nr; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/d%u.img", tmpdir, i);
		devs[i].path = paths[i];
		devs[i].size = (uint64_t)size_mb << 20;
		devs[i].bucket_size = 64 << 10;
		devs[i].durability = 1;
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 64 << 10);
	bch_opt_set(&o, Opt_metadata_replicas, meta_replicas);
	bch_opt_set(&o, Opt_data_replicas, data_replicas);
	cr_assert_eq(bch_format(devs, nr, &o, NULL, &args, err, sizeof(err)), 0, "format: %s", err);
}

/* Open the members in mask (bit i: paths[i]); flags as named. */
static int open_mask(unsigned nr, unsigned mask, bool degraded, bool ro, struct bch_fs **c,
		     char *err, size_t len)
{
	char *p[3];
	unsigned n = 0;
	struct bch_opts o;

	for (unsigned i = 0; i < nr; i++)
		if (mask & (1U << i))
			p[n++] = paths[i];
	memset(&o, 0, sizeof(o));
	if (degraded)
		bch_opt_set(&o, Opt_degraded, 1);
	if (ro)
		bch_opt_set(&o, Opt_read_only, 1);
	return bch_fs_open(p, n, &o, c, err, len);
}

static struct bch_fs *open_all(unsigned nr, bool ro)
{
	struct bch_fs *c;
	char err[512];

	cr_assert_eq(open_mask(nr, (1U << nr) - 1, false, ro, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

static void fill(char *buf, size_t len, unsigned i)
{
	unsigned x = SEED ^ (i * 2654435761u);

	for (size_t k = 0; k < len; k++) {
		x = x * 1103515245u + 12345u;
		buf[k] = (char)(x >> 16);
	}
}

/* Write file name of len bytes with data_replicas set to replicas for this write. */
static void put_file(struct bch_fs *c, const char *name, size_t len, unsigned replicas, unsigned i)
{
	static char buf[512 * 1024];
	uint64_t inum;

	cr_assert_leq(len, sizeof(buf));
	c->opts.v[Opt_data_replicas] = replicas;
	int r = bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum);
	cr_assert_eq(r, 0, "seed %u: create %s: %s", SEED, name, c->err_msg);
	fill(buf, len, i);
	cr_assert_eq(bch_fs_write(c, inum, 0, buf, len), (ssize_t)len, "seed %u: write %s: %s",
		     SEED, name, c->err_msg);
}

static unsigned count_type(const struct bch_replicas_cpu *t, unsigned type)
{
	unsigned n = 0;

	for (size_t i = 0; i < t->nr; i++)
		n += t->e[i].data_type == type;
	return n;
}

static bool subset(const struct bch_replicas_cpu *a, const struct bch_replicas_cpu *b)
{
	for (size_t i = 0; i < a->nr; i++)
		if (!bch_replicas_cpu_has(b, a->e[i].data_type, a->e[i].devs))
			return false;
	return true;
}

static bool same(const struct bch_replicas_cpu *a, const struct bch_replicas_cpu *b)
{
	return a->nr == b->nr && subset(a, b);
}

/* The table in memory, on disk and recomputed from the keys are all the same set. */
static void assert_exact(struct bch_fs *c, const char *when)
{
	struct bch_replicas_cpu used, disk;

	cr_assert_eq(bch_replicas_used(c, &used), 0, "%s: %s", when, c->err_msg);
	cr_assert_eq(bch_replicas_from_sb(c->sb, &disk), 0);
	cr_assert(same(c->replicas, &disk), "%s: table in memory differs from the superblock", when);
	cr_assert(same(&used, c->replicas), "%s: table (%zu entries) is not what the keys use (%zu)",
		  when, c->replicas->nr, used.nr);
	bch_replicas_cpu_free(&used);
	bch_replicas_cpu_free(&disk);
}

/* Every user entry has exactly want members. */
static void assert_user_width(const struct bch_replicas_cpu *t, unsigned want, unsigned nr_devs)
{
	for (size_t i = 0; i < t->nr; i++)
		if (t->e[i].data_type == BCH_DATA_user) {
			cr_assert_eq(__builtin_popcountll(t->e[i].devs), want,
				     "user entry 0x%llx: want %u members",
				     (unsigned long long)t->e[i].devs, want);
			cr_assert_eq(t->e[i].devs >> nr_devs, 0);
		}
}

Test(replicas, two_devices_replicas_1_then_2)
{
	format_n(2, 32, 1, 1);
	struct bch_fs *c = open_all(2, false);
	cr_assert_eq(count_type(c->replicas, BCH_DATA_user), 0, "no file data yet");
	cr_assert_eq(count_type(c->replicas, BCH_DATA_journal), 2);
	cr_assert_geq(count_type(c->replicas, BCH_DATA_btree), 1, "format made btree nodes");
	for (unsigned i = 0; i < 8; i++) {
		char name[16];
		snprintf(name, sizeof(name), "one%u", i);
		put_file(c, name, 192 * 1024, 1, i);
	}
	assert_exact(c, "replicas 1");
	assert_user_width(c->replicas, 1, 2);
	cr_assert_geq(count_type(c->replicas, BCH_DATA_user), 1);
	unsigned ones = count_type(c->replicas, BCH_DATA_user);

	put_file(c, "two", 300 * 1024, 2, 100);
	assert_exact(c, "replicas 2");
	cr_assert_eq(count_type(c->replicas, BCH_DATA_user), ones + 1, "one entry for both members");
	cr_assert(bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 3));
	cr_assert_eq(bch_fs_close(c), 0);

	/* what the next open loads is the same */
	c = open_all(2, true);
	assert_exact(c, "reopened");
	cr_assert_eq(bch_fs_close(c), 0);
}

Test(replicas, three_devices_pairs_and_gc)
{
	format_n(3, 32, 2, 2);
	struct bch_fs *c = open_all(3, false);
	for (unsigned i = 0; i < 9; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", i);
		put_file(c, name, 128 * 1024, 2, i);
	}
	assert_exact(c, "three devices, replicas 2");
	assert_user_width(c->replicas, 2, 3);
	for (size_t i = 0; i < c->replicas->nr; i++)
		if (c->replicas->e[i].data_type == BCH_DATA_btree)
			cr_assert_eq(__builtin_popcountll(c->replicas->e[i].devs), 2,
				     "metadata_replicas 2: btree entry 0x%llx",
				     (unsigned long long)c->replicas->e[i].devs);
	/* a file with copies on three members, then gone: gc drops its entry */
	put_file(c, "three", 64 * 1024, 3, 50);
	cr_assert(bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 7));
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "three"), 0, "%s", c->err_msg);
	cr_assert(bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 7), "only gc removes entries");
	size_t before = c->replicas->nr;
	cr_assert_eq(bch_replicas_gc(c), 0, "%s", c->err_msg);
	cr_assert(!bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 7), "gc kept an unused entry");
	cr_assert_eq(c->replicas->nr, before - 1);
	assert_exact(c, "after gc");
	cr_assert_eq(count_type(c->replicas, BCH_DATA_journal), 3, "gc keeps the journal entries");
	cr_assert_eq(bch_fs_close(c), 0);
	c = open_all(3, true);
	cr_assert(!bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 7), "gc not on disk");
	assert_exact(c, "reopened after gc");
	cr_assert_eq(bch_fs_close(c), 0);
}

/* Degraded opens decided by the table, and what the refusals say. */
Test(replicas, degraded_open_with_and_without_loss)
{
	struct bch_fs *c;
	char err[512];

	/* data_replicas 1 on two members: each holds the only copy of something */
	format_n(2, 32, 2, 1);
	c = open_all(2, false);
	for (unsigned i = 0; i < 6; i++) {
		char name[16];
		snprintf(name, sizeof(name), "one%u", i);
		put_file(c, name, 256 * 1024, 1, i);
	}
	bool on0 = bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 1);
	bool on1 = bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 2);
	cr_assert_eq(bch_fs_close(c), 0);
	cr_assert(on0 || on1);
	unsigned gone = on1 ? 1 : 0;
	char want[64];
	snprintf(want, sizeof(want), "file data kept only on member %u would be lost", gone);

	int r = open_mask(2, 1U << (1 - gone), false, true, &c, err, sizeof(err));
	cr_assert_eq(r, -BCH_ERR_device_missing);
	cr_assert(strstr(err, want) && strstr(err, "-o very_degraded"), "message: %s", err);
	r = open_mask(2, 1U << (1 - gone), true, true, &c, err, sizeof(err));
	cr_assert_eq(r, -BCH_ERR_device_missing, "-o degraded opened with data lost");
	cr_assert(strstr(err, want), "message: %s", err);

	/* everything in two copies: nothing lost; refused without -o degraded only */
	format_n(2, 32, 2, 2);
	c = open_all(2, false);
	put_file(c, "two", 256 * 1024, 2, 7);
	cr_assert_eq(bch_fs_close(c), 0);
	r = open_mask(2, 1, false, true, &c, err, sizeof(err));
	cr_assert_eq(r, -BCH_ERR_device_missing);
	cr_assert(strstr(err, "member 1 (") && strstr(err, "nothing would be lost") &&
		  strstr(err, "-o degraded opens it"), "message: %s", err);
	cr_assert_eq(open_mask(2, 1, true, false, &c, err, sizeof(err)), 0, "%s", err);
	/* written degraded: the new set (member 0 alone) is marked on the present member */
	put_file(c, "degraded", 64 * 1024, 2, 8);
	cr_assert(bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 1));
	cr_assert_eq(bch_fs_close(c), 0);
	/*
	 * ... so member 0 now holds the only copy of something, and its
	 * superblock says so (member 1 missed that write: opened alone, its
	 * older table cannot know).  With both, the newest table is used.
	 */
	c = open_all(2, true);
	cr_assert(bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 1));
	char lost[256];
	bool trusted;
	c->devs_missing = 1;	/* as if member 0 were gone */
	cr_assert(bch_replicas_degraded(c, lost, sizeof(lost), &trusted) && trusted);
	cr_assert(strstr(lost, "file data kept only on member 0"), "%s", lost);
	c->devs_missing = 0;
	cr_assert_eq(bch_fs_close(c), 0);
}

Test(replicas, three_devices_two_missing)
{
	struct bch_fs *c;
	char err[512];

	format_n(3, 32, 2, 2);
	c = open_all(3, false);
	for (unsigned i = 0; i < 6; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", i);
		put_file(c, name, 128 * 1024, 2, i);
	}
	cr_assert_eq(bch_fs_close(c), 0);
	/* any one missing: every pair keeps a member */
	for (unsigned gone = 0; gone < 3; gone++) {
		cr_assert_eq(open_mask(3, 7 & ~(1U << gone), true, true, &c, err, sizeof(err)), 0,
			     "member %u missing: %s", gone, err);
		cr_assert_eq(bch_fs_close(c), 0);
	}
	/* two missing: lost exactly when some entry has neither (the table says which) */
	c = open_all(3, true);
	struct bch_replicas_cpu t;
	cr_assert_eq(bch_replicas_from_sb(c->sb, &t), 0);
	cr_assert_eq(bch_fs_close(c), 0);
	unsigned losses = 0;
	for (unsigned here = 0; here < 3; here++) {
		bool loses = false;
		for (size_t i = 0; i < t.nr; i++)
			loses |= t.e[i].data_type != BCH_DATA_journal && !(t.e[i].devs & (1ULL << here));
		int r = open_mask(3, 1U << here, true, true, &c, err, sizeof(err));
		if (!loses) {
			cr_assert_eq(r, 0, "only member %u: %s", here, err);
			cr_assert_eq(bch_fs_close(c), 0);
			continue;
		}
		losses++;
		cr_assert_eq(r, -BCH_ERR_device_missing, "only member %u: opened with data lost", here);
		cr_assert(strstr(err, "were not given") && strstr(err, "kept only on members") &&
			  strstr(err, "-o very_degraded"), "message: %s", err);
	}
	cr_assert_geq(losses, 1, "every pair excludes some member");
	bch_replicas_cpu_free(&t);
}

/*
 * Cut the recorded writes at every `every`th event and on both sides of every
 * write of a superblock's primary copy (where the table changes): each
 * crash state must open, and its table must hold every set its keys use.
 */
static void check_cuts(struct iorec *rec, const char *what, unsigned every)
{
	char crash[3][128];
	size_t nr_events = iorec_nr_events(rec);
	unsigned checked = 0;

	for (unsigned d = 0; d < 3; d++)
		snprintf(crash[d], sizeof(crash[d]), "%s/crash%u.img", tmpdir, d);
	for (size_t at = 1; at <= nr_events; at++) {
		const struct iorec_event *ev = iorec_event(rec, at - 1);
		const struct iorec_event *nx = at < nr_events ? iorec_event(rec, at) : NULL;
		bool sb = (ev->type == IOREC_WRITE && ev->offset == BCH_SB_SECTOR * 512) ||
			  (nx && nx->type == IOREC_WRITE && nx->offset == BCH_SB_SECTOR * 512);
		if (at % every && !sb)
			continue;
		struct iorec_cut cut = { .at = at, .seed = SEED + at, .keep_pct = 50, .torn = at % 2 };
		struct iorec_plan plan;
		cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
		for (unsigned d = 0; d < 3; d++)
			cr_assert_eq(iorec_write_image(rec, &plan, d, crash[d]), 0);
		iorec_plan_free(&plan);

		char *p[3] = { crash[0], crash[1], crash[2] }, err[512];
		struct bch_opts o;
		struct bch_fs *x;
		memset(&o, 0, sizeof(o));
		bch_opt_set(&o, Opt_read_only, 1);
		cr_assert_eq(bch_fs_open(p, 3, &o, &x, err, sizeof(err)), 0, "%s: cut %zu: %s", what, at, err);
		struct bch_replicas_cpu used;
		cr_assert_eq(bch_replicas_used(x, &used), 0, "%s: cut %zu: %s", what, at, x->err_msg);
		cr_assert(subset(&used, x->replicas),
			  "%s: cut %zu (seed %u): keys use a member set the table lacks", what, at,
			  SEED + (unsigned)at);
		bch_replicas_cpu_free(&used);
		bch_fs_close(x);
		checked++;
	}
	cr_log_info("replicas crash (%s): %zu events, %u cuts checked", what, nr_events, checked);
}

static struct iorec *record(struct bch_fs *c)
{
	struct iorec *rec = iorec_new(3);

	cr_assert(rec);
	for (unsigned d = 0; d < 3; d++)
		cr_assert_eq(iorec_attach(rec, d, c->devs[d]->bdev), 0);
	return rec;
}

/*
 * Power cuts through a workload that adds entries (replicas 1, then 2, then
 * 3 on three members): after any cut the table the superblock holds is a
 * superset of what the keys (after replay) use.
 */
Test(replicas, crash_cut_table_is_superset, .timeout = 240)
{
	format_n(3, 8, 1, 1);
	struct bch_fs *c = open_all(3, false);
	struct iorec *rec = record(c);

	for (unsigned i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "r%u", i + 1);
		put_file(c, name, 96 * 1024, i + 1, i);
		cr_assert_eq(bch_fs_fsync(c), 0, "%s", c->err_msg);
	}
	check_cuts(rec, "adds", 8);
	iorec_free(rec);
	cr_assert_eq(bch_fs_close(c), 0);
}

/*
 * Power cuts through gc points that drop entries: files of one, two and
 * three copies, then deletes and overwrites (their sets left unused), a
 * rereplicate job (which moves the one-copy files to two and ends with a
 * gc), more deletes and an explicit gc, and the close (another gc point).
 * A gc flushes the journal before it walks, so no crash state replays to
 * a key whose set was dropped: the table stays a superset at every cut.
 */
Test(replicas, crash_cut_through_gc_table_is_superset, .timeout = 300)
{
	format_n(3, 8, 1, 2);
	struct bch_fs *c = open_all(3, false);
	char err[256];
	int r;

	put_file(c, "a1", 64 * 1024, 1, 1);
	put_file(c, "b1", 64 * 1024, 1, 2);
	put_file(c, "c2", 64 * 1024, 2, 3);
	put_file(c, "d3", 64 * 1024, 3, 4);
	cr_assert_eq(bch_fs_fsync(c), 0, "%s", c->err_msg);
	struct iorec *rec = record(c);
	for (unsigned d = 0; d < 3; d++)	/* the close is recorded too: its handles are closed there */
		cr_assert_eq(iorec_follow(rec, d, paths[d]), 0);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "d3"), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "a1"), 0, "%s", c->err_msg);
	put_file(c, "c2b", 64 * 1024, 3, 5);
	c->opts.v[Opt_data_replicas] = 2;
	struct bch_data_job j = { .kind = BCH_DATA_JOB_rereplicate };
	cr_assert_eq(bch_data_job_init(c, &j, err, sizeof(err)), 0, "%s", err);
	while ((r = bch_data_job_step(c, &j, 1 << 20)) > 0)
		;
	cr_assert_eq(r, 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "c2b"), 0, "%s", c->err_msg);
	cr_assert_eq(bch_replicas_gc(c), 0, "%s", c->err_msg);
	assert_exact(c, "after the gc");
	cr_assert(!bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 7), "the three-copy set is left");
	cr_assert_eq(bch_fs_close(c), 0);
	check_cuts(rec, "gc points", 1);
	iorec_free(rec);
}

/*
 * An entry no key uses, as a crash before a gc point leaves it: a degraded
 * open without its member does not refuse for it (the keys are checked),
 * fsck -n counts it, and a read-write session's close drops it.  Data with
 * no copy left is refused all the same, naming what.
 */
Test(replicas, stale_entry_no_refusal)
{
	struct bch_fs *c;
	char err[512];

	format_n(2, 32, 2, 2);
	c = open_all(2, false);
	put_file(c, "two", 128 * 1024, 2, 1);
	/* a set only member 1 holds, that no key uses */
	struct bch_replicas_cpu t = { 0 };
	for (size_t i = 0; i < c->replicas->nr; i++)
		cr_assert_geq(bch_replicas_cpu_add(&t, c->replicas->e[i].data_type, c->replicas->e[i].devs), 0);
	cr_assert_eq(bch_replicas_cpu_add(&t, BCH_DATA_user, 2), 1);
	cr_assert_eq(bch_replicas_set(c, &t, true), 0);
	bch_replicas_cpu_free(&t);
	cr_assert_eq(bch_fs_close(c), 0);

	/* the table alone says member 1 holds the only copy of something */
	c = open_all(2, true);
	char lost[256];
	bool trusted;
	c->devs_missing = 2;
	cr_assert(bch_replicas_degraded(c, lost, sizeof(lost), &trusted) && trusted);
	c->devs_missing = 0;
	struct bch_fsck_ctx *ctx = calloc(1, sizeof(*ctx));
	ctx->mode = BCH_FSCK_NO;
	cr_assert_eq(bch_fsck_replicas(ctx, c), 0, "%s", ctx->err_msg);
	cr_assert_eq(ctx->found[BCH_FSCK_replicas_unused], 1);
	cr_assert_eq(bch_fsck_nr_found(ctx), 1, "an unused entry is counted");
	free(ctx);
	cr_assert_eq(bch_fs_close(c), 0);

	/* ... but the keys say otherwise: -o degraded opens, read-only and read-write */
	cr_assert_eq(open_mask(2, 1, true, true, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(bch_fs_close(c), 0);
	cr_assert_eq(open_mask(2, 1, true, false, &c, err, sizeof(err)), 0, "%s", err);
	put_file(c, "degraded", 64 * 1024, 2, 2);	/* only on member 0 */
	cr_assert_eq(bch_fs_close(c), 0);
	c = open_all(2, false);		/* both: member 1 learns of the write */
	cr_assert(!bch_replicas_cpu_has(c->replicas, BCH_DATA_user, 2), "the close kept the stale entry");
	assert_exact(c, "after the degraded session");
	cr_assert_eq(bch_fs_close(c), 0);

	/* now member 0 does hold the only copy of "degraded": refused, and said so */
	int r = open_mask(2, 2, true, true, &c, err, sizeof(err));
	cr_assert_eq(r, -BCH_ERR_device_missing, "opened without the only copy");
	cr_assert(strstr(err, "file data kept only on member 0") && strstr(err, "would be lost"),
		  "message: %s", err);
}

/*
 * A table an older version wrote (only the journal entries, no
 * REPLICAS_KEPT) is not used to judge a degraded open: the replication
 * options are; fsck pass 12 rebuilds it, marks it kept, and from then on
 * the table decides.
 */
Test(replicas, older_table_not_trusted_until_fsck)
{
	struct bch_fs *c;
	char err[512];

	format_n(2, 32, 2, 2);
	c = open_all(2, false);
	put_file(c, "two", 128 * 1024, 2, 1);
	/* as an older version left it: journal entries only, bit clear */
	struct bch_replicas_cpu old = { 0 };
	cr_assert_eq(bch_replicas_cpu_add(&old, BCH_DATA_journal, 1), 1);
	cr_assert_eq(bch_replicas_cpu_add(&old, BCH_DATA_journal, 2), 1);
	cr_assert_eq(bch_replicas_set(c, &old, false), 0);
	c->sb->compat &= ~BCH_COMPAT_REPLICAS_KEPT;
	cr_assert_eq(bch_write_super(c), 0);
	cr_assert_eq(bch_fs_close(c), 0);

	/* not trusted: without -o degraded, the old refusal; with it, the options (2 copies) */
	int r = open_mask(2, 1, false, true, &c, err, sizeof(err));
	cr_assert_eq(r, -BCH_ERR_device_missing);
	cr_assert(strstr(err, "give every device") && !strstr(err, "nothing would be lost"),
		  "message: %s", err);
	cr_assert_eq(open_mask(2, 1, true, true, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(bch_fs_close(c), 0);

	/* fsck -n reports the missing sets and writes nothing */
	struct bch_fsck_ctx *ctx = calloc(1, sizeof(*ctx));
	c = open_all(2, true);
	ctx->mode = BCH_FSCK_NO;
	cr_assert_eq(bch_fsck_replicas(ctx, c), 0, "%s", ctx->err_msg);
	cr_assert_geq(ctx->found[BCH_FSCK_replicas_missing], 2, "btree and user sets missing");
	cr_assert_eq(ctx->fixed[BCH_FSCK_replicas_missing], 0);
	cr_assert_eq(bch_fs_close(c), 0);

	/* fsck -y adds them and marks the table kept */
	memset(ctx, 0, sizeof(*ctx));
	ctx->mode = BCH_FSCK_YES;
	c = open_all(2, false);
	cr_assert_eq(bch_fsck_replicas(ctx, c), 0, "%s", ctx->err_msg);
	cr_assert_eq(ctx->fixed[BCH_FSCK_replicas_missing], ctx->found[BCH_FSCK_replicas_missing]);
	cr_assert(c->sb->compat & BCH_COMPAT_REPLICAS_KEPT);
	assert_exact(c, "after fsck -y");
	cr_assert_eq(bch_fs_close(c), 0);
	free(ctx);
	bch_replicas_cpu_free(&old);

	r = open_mask(2, 1, false, true, &c, err, sizeof(err));
	cr_assert_eq(r, -BCH_ERR_device_missing);
	cr_assert(strstr(err, "nothing would be lost"), "the table decides now: %s", err);
}
