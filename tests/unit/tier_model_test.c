// SPDX-License-Identifier: GPL-2.0
/*
 * tier_model_test.c - tiering against a model: three devices labelled
 * ssd, hdd.a and hdd.b (foreground and promote target ssd, background
 * target hdd, two replicas), and a seeded random mix of writes, overwrites,
 * reads, truncates, per-file option changes (compression, background
 * compression, background target) and filesystem option changes, with
 * rebalance steps in between.  After rebalance runs to the end, every
 * extent satisfies its file's effective options, keeps its replicas, every
 * file equals the model, and fsck finds nothing.  The seed is printed;
 * SOAK=1 runs longer.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "btree.h"
#include "compress.h"
#include "extents.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "inode.h"
#include "io.h"
#include "move.h"
#include "opts.h"
#include "rebalance.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NFILES		6
#define MAXSIZE		(512u << 10)
#define NOPS		(getenv("SOAK") ? 3000 : 400)

static char tmpdir[64], paths[3][128];
static struct bch_fs *c;
static unsigned char model[NFILES][MAXSIZE];
static size_t msize[NFILES];
static uint64_t inums[NFILES];

static void open_fs(bool fsck)
{
	char err[256];
	char *p[3] = { paths[0], paths[1], paths[2] };
	struct bch_opts o;

	memset(&o, 0, sizeof(o));
	if (fsck) {
		bch_opt_set(&o, Opt_fsck, 1);
		bch_opt_set(&o, Opt_read_only, 1);
	}
	cr_assert_eq(bch_fs_open(p, 3, &o, &c, err, sizeof(err)), 0, "open: %s", err);
}

/* Change a filesystem option as set-fs-option does, and schedule the scan. */
static void set_fs_opt(unsigned id, const char *val)
{
	char err[128];
	uint64_t v = 0;

	if (bch_opt_table[id].type == BCH_OPT_TARGET)
		cr_assert_eq(val ? bch_target_parse(c->sb, val, &v) : 0, 0);
	else if (val)
		cr_assert_eq(bch_opt_parse(id, val, &v, err, sizeof(err)), 0, "%s", err);
	c->opts.v[id] = v;
	c->sb->opts[bch_opt_table[id].sb_slot] = v;
	cr_assert_eq(bch_rebalance_schedule(c, 0), 0);
}

static void check_file(unsigned f)
{
	static unsigned char got[MAXSIZE];
	struct stat st;

	cr_assert_eq(bch_fs_getattr(c, inums[f], &st), 0);
	cr_assert_eq((size_t)st.st_size, msize[f], "f%u: size %ld, model %zu", f, (long)st.st_size, msize[f]);
	cr_assert_eq(bch_fs_read(c, inums[f], 0, got, msize[f]), (ssize_t)msize[f], "f%u: %s", f, c->err_msg);
	cr_assert(!memcmp(got, model[f], msize[f]), "f%u differs from the model", f);
}

/* Every extent satisfies its file's options and has its replicas. */
static void check_extents(void)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;
	uint64_t cur = 0, n = 0;
	struct bch_io_opts o = { 0 };

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent)
			continue;
		if (k->p.inode != cur) {
			struct bch_inode bi;
			cur = k->p.inode;
			cr_assert_eq(bch_inode_get(c, cur, &bi), 0);
			bch_io_opts_get(c, &bi, &o);
		}
		unsigned why = bch_extent_rebalance_reasons(c, k, &o), dirty = 0;
		const struct bch_extent *e = bkey_val(k);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
			dirty += !(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED);
		cr_assert_eq(why, 0, "inode %llu extent ending %llu still needs rebalance (%u)",
			     (unsigned long long)cur, (unsigned long long)k->p.offset, why);
		cr_assert_geq(dirty, o.replicas, "inode %llu extent ending %llu has %u copies of %u",
			      (unsigned long long)cur, (unsigned long long)k->p.offset, dirty, o.replicas);
		n++;
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
	cr_log_info("tier_model: %llu extents checked", (unsigned long long)n);
}

static void fsck_clean(void)
{
	cr_assert_eq(bch_fs_close(c), 0);
	open_fs(true);
	testfs_assert_fsck_clean(c, false);
	cr_assert_eq(bch_fs_close(c), 0);
	open_fs(false);
}

Test(tier_model, random_ops_then_rebalance, .timeout = 600)
{
	struct bch_format_dev devs[3] = {
		{ .path = paths[0], .size = 24 << 20, .bucket_size = 64 << 10, .durability = 1, .label = "ssd" },
		{ .path = paths[1], .size = 32 << 20, .bucket_size = 64 << 10, .durability = 1, .label = "hdd.a" },
		{ .path = paths[2], .size = 32 << 20, .bucket_size = 64 << 10, .durability = 1, .label = "hdd.b" },
	};
	struct bch_format_args args = { .have_uuid = true, .user_uuid = { 0x71, 0xe7 } };
	const char *targets[BCH_OPT_NR] = { 0 };
	static const char *const compressions[] = { NULL, "lz4", "zstd", "gzip" };
	struct bch_opts o;
	char err[256];
	unsigned seed = 20261205;

	fprintf(stderr, "tier_model: seed %u, %u ops\n", seed, NOPS);
	srandom(seed);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "tiermodel");
	for (unsigned d = 0; d < 3; d++)
		snprintf(paths[d], sizeof(paths[d]), "%s/d%u.img", tmpdir, d);
	targets[Opt_foreground_target] = "ssd";
	targets[Opt_promote_target] = "ssd";
	targets[Opt_background_target] = "hdd";
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 16 << 10);
	bch_opt_set(&o, Opt_data_replicas, 2);
	bch_opt_set(&o, Opt_metadata_replicas, 2);
	cr_assert_eq(bch_format(devs, 3, &o, targets, &args, err, sizeof(err)), 0, "%s", err);
	open_fs(false);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inums[f]), 0);
	}

	static unsigned char data[MAXSIZE];
	for (unsigned op = 0; op < NOPS; op++) {
		unsigned f = random() % NFILES, k = random() % 100;
		if (k < 45) {			/* write or overwrite, compressible or not */
			size_t off = random() % (MAXSIZE - 1), len = 1 + random() % 65536;
			if (off + len > MAXSIZE)
				len = MAXSIZE - off;
			bool text = random() % 2;
			for (size_t i = 0; i < len; i++)
				data[i] = text ? "tiering "[(off + i) % 8] : (unsigned char)random();
			cr_assert_eq(bch_fs_write(c, inums[f], off, data, len), (ssize_t)len,
				     "op %u: write: %s", op, c->err_msg);
			memcpy(model[f] + off, data, len);
			if (off + len > msize[f])
				msize[f] = off + len;
		} else if (k < 60) {		/* read (promotes) */
			check_file(f);
		} else if (k < 66) {		/* truncate */
			size_t size = random() % MAXSIZE;
			cr_assert_eq(bch_fs_truncate(c, inums[f], size), 0, "op %u: %s", op, c->err_msg);
			if (size < msize[f])
				memset(model[f] + size, 0, msize[f] - size);
			msize[f] = size;
		} else if (k < 74) {		/* a per-file option */
			static const char *const names[] = { "compression", "background_compression",
							     "background_target" };
			static const char *const tvals[] = { NULL, "hdd", "hdd.a", "hdd.b", "ssd" };
			unsigned which = random() % 3;
			const char *val = which == 2 ? tvals[random() % 5] : compressions[random() % 4];
			int r = bch_fs_set_inode_opt(c, inums[f], names[which], val);
			cr_assert_eq(r, 0, "op %u: set %s=%s on f%u: %d %s", op, names[which],
				     val ? val : "(inherit)", f, r, c->err_msg);
		} else if (k < 77) {		/* a filesystem option */
			if (random() % 2)
				set_fs_opt(Opt_background_compression, compressions[random() % 4]);
			else
				set_fs_opt(Opt_background_target, random() % 3 ? "hdd" : "hdd.a");
		} else {			/* some rebalance */
			struct bch_move_stats s = { 0 };
			bool parked;
			cr_assert_geq(bch_rebalance_step(c, 256 + random() % 2048, &s, &parked), 0,
				      "op %u: rebalance: %s", op, c->err_msg);
		}
	}
	/* to the end */
	struct bch_move_stats s = { 0 };
	bool parked = false;
	unsigned steps = 0;
	int r;
	while ((r = bch_rebalance_step(c, 4096, &s, &parked)) == 1)
		cr_assert_lt(++steps, 100000, "rebalance does not end");
	cr_assert_eq(r, 0, "rebalance: %s", c->err_msg);
	cr_assert(!parked, "rebalance parked: %s", s.last_problem);
	cr_assert_eq(s.keys_no_good_copy + s.keys_no_space, 0, "%s", s.last_problem);
	check_extents();
	for (unsigned f = 0; f < NFILES; f++)
		check_file(f);
	fsck_clean();
	check_extents();
	for (unsigned f = 0; f < NFILES; f++)
		check_file(f);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}
