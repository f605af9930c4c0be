// SPDX-License-Identifier: GPL-2.0
/*
 * degraded_test.c - opening with a member missing (fs.c, alloc*.c, io.c,
 * btree_update.c).
 *
 * Two devices, everything in two copies (64 KiB nodes: writes append bsets,
 * split and move nodes).  Without -o degraded the open is refused naming the member;
 * with it, a file workload (fixed seed) runs read-write on the remaining
 * device: what it wrote reads back degraded and, once the member is back,
 * with both; the missing member's image is not changed by a byte and its
 * alloc keys are all still there; every new pointer is on the present
 * device.  Then the same with the other member missing.  A file of one copy
 * makes its member needed: the refusal names it (the replicas table).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "tests/lib/tmpdir.h"

#define SEED	1717u
#define NFILES	24

static char tmpdir[64], paths[2][128];

static void format2(void)
{
	struct bch_format_dev devs[2] = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256];

	for (unsigned i = 0; i < 2; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/d%u.img", tmpdir, i);
		devs[i].path = paths[i];
		devs[i].size = 48 << 20;
		devs[i].bucket_size = 64 << 10;
		devs[i].durability = 1;
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 64 << 10);	/* room to append bsets */
	bch_opt_set(&o, Opt_metadata_replicas, 2);
	bch_opt_set(&o, Opt_data_replicas, 2);
	int r = bch_format(devs, 2, &o, NULL, &args, err, sizeof(err));
	cr_assert_eq(r, 0, "format: %s", err);
}

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "degraded");
	format2();
}

static void teardown(void)
{
	test_tmpdir_remove(tmpdir);
}

TestSuite(degraded, .init = setup, .fini = teardown);

static int open_some(unsigned mask, bool degraded, bool ro, struct bch_fs **c, char *err, size_t len)
{
	char *p[2];
	unsigned nr = 0;
	struct bch_opts o;

	for (unsigned i = 0; i < 2; i++)
		if (mask & (1U << i))
			p[nr++] = paths[i];
	memset(&o, 0, sizeof(o));
	if (degraded)
		bch_opt_set(&o, Opt_degraded, 1);
	if (ro)
		bch_opt_set(&o, Opt_read_only, 1);
	return bch_fs_open(p, nr, &o, c, err, len);
}

/* Content of file i, generation g: deterministic from the seed. */
static void fill(char *buf, size_t len, unsigned i, unsigned g)
{
	unsigned x = SEED ^ (i * 2654435761u) ^ (g * 40503u);

	for (size_t k = 0; k < len; k++) {
		x = x * 1103515245u + 12345u;
		buf[k] = (char)(x >> 16);
	}
}

static size_t file_len(unsigned i)
{
	return 4096 * (1 + (i * 7) % 19) + (i % 3) * 100;
}

static uint64_t hash_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint64_t h = 1469598103934665603ull;
	int ch;

	cr_assert(f, "%s", path);
	while ((ch = getc(f)) != EOF)
		h = (h ^ (unsigned)ch) * 1099511628211ull;
	fclose(f);
	return h;
}

static unsigned count_alloc_keys(struct bch_fs *c, unsigned dev)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	unsigned n = 0;
	int err = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_alloc, POS(dev, 0, 0), POS(dev, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err)))
		n += k->type == BCH_BKEY_alloc;
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
	return n;
}

/* Write NFILES files (two generations each, the second over the first). */
static void workload(struct bch_fs *c, unsigned tag)
{
	static char buf[160 * 1024];

	for (unsigned g = 0; g < 2; g++)
		for (unsigned i = 0; i < NFILES; i++) {
			char name[32];
			uint64_t inum;
			snprintf(name, sizeof(name), "t%u-f%u", tag, i);
			int r = bch_fs_lookup(c, BCH_ROOT_INO, name, &inum);
			if (r == -ENOENT)
				r = bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum);
			cr_assert_eq(r, 0, "seed %u: create %s: %d (%s)", SEED, name, r, c->err_msg);
			size_t len = file_len(i);
			fill(buf, len, i, g);
			cr_assert_eq(bch_fs_write(c, inum, 0, buf, len), (ssize_t)len,
				     "seed %u: write %s: %s", SEED, name, c->err_msg);
		}
}

static void verify(struct bch_fs *c, unsigned tag, const char *when)
{
	static char want[160 * 1024], got[160 * 1024];

	for (unsigned i = 0; i < NFILES; i++) {
		char name[32];
		uint64_t inum;
		snprintf(name, sizeof(name), "t%u-f%u", tag, i);
		cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0, "%s: %s", when, name);
		size_t len = file_len(i);
		fill(want, len, i, 1);
		cr_assert_eq(bch_fs_read(c, inum, 0, got, len), (ssize_t)len, "%s: read %s: %s",
			     when, name, c->err_msg);
		cr_assert(!memcmp(want, got, len), "seed %u: %s: %s differs", SEED, when, name);
	}
	cr_assert_eq(c->data_bad_copies, 0, "%s: a missing copy counted as damaged", when);
}

/* Every extent of the files written with dev missing points only at the other device. */
static void check_ptrs(struct bch_fs *c, unsigned missing)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err)))
		if (k->type == BCH_BKEY_extent) {
			const struct bch_extent *e = bkey_val(k);
			for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
				cr_assert_neq(e->ptrs[i].dev, missing,
					      "extent of inode %lu on the missing device",
					      (unsigned long)k->p.inode);
		}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
}

static void run_missing(unsigned missing)
{
	unsigned present = 1 - missing;
	struct bch_fs *c;
	char err[512], want[32];

	/* a workload with both, so the missing member holds data and alloc keys */
	cr_assert_eq(open_some(3, false, false, &c, err, sizeof(err)), 0, "%s", err);
	workload(c, 9);
	cr_assert_eq(bch_fs_close(c), 0);
	cr_assert_eq(open_some(3, false, true, &c, err, sizeof(err)), 0, "%s", err);
	unsigned alloc_keys = count_alloc_keys(c, missing);
	cr_assert_eq(bch_fs_close(c), 0);
	cr_assert_gt(alloc_keys, 0);
	uint64_t before = hash_file(paths[missing]);

	int r = open_some(1U << present, false, true, &c, err, sizeof(err));
	cr_assert_eq(r, -BCH_ERR_device_missing, "open without degraded: %d", r);
	snprintf(want, sizeof(want), "member %u (", missing);
	cr_assert(strstr(err, want) && strstr(err, "-o degraded"), "message: %s", err);

	cr_assert_eq(open_some(1U << present, true, false, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert(bch_dev_missing(c, missing) && !bch_dev_missing(c, present));
	verify(c, 9, "degraded, written with both");
	workload(c, missing);
	verify(c, missing, "degraded, just written");
	cr_assert_eq(bch_fs_close(c), 0);

	cr_assert_eq(hash_file(paths[missing]), before, "the missing member was written");
	cr_assert_eq(open_some(1U << present, true, true, &c, err, sizeof(err)), 0, "%s", err);
	verify(c, missing, "degraded, reopened");
	verify(c, 9, "degraded, reopened, written with both");
	cr_assert_eq(bch_fs_close(c), 0);

	/* the member is back: both open, the alloc keys of the missing one are all there */
	cr_assert_eq(open_some(3, false, true, &c, err, sizeof(err)), 0, "%s", err);
	verify(c, missing, "member back");
	verify(c, 9, "member back, written with both");
	cr_assert_eq(count_alloc_keys(c, missing), alloc_keys, "alloc keys of the missing member changed");
	cr_assert_eq(bch_fs_close(c), 0);
}

Test(degraded, refused_then_read_write_without_member_1)
{
	run_missing(1);
}

Test(degraded, refused_then_read_write_without_member_0)
{
	run_missing(0);
}

Test(degraded, new_data_only_on_present_device)
{
	struct bch_fs *c;
	char err[512];

	cr_assert_eq(open_some(1, true, false, &c, err, sizeof(err)), 0, "%s", err);
	workload(c, 5);
	cr_assert_eq(bch_fs_close(c), 0);
	cr_assert_eq(open_some(3, false, true, &c, err, sizeof(err)), 0, "%s", err);
	check_ptrs(c, 1);
	verify(c, 5, "both, after writing degraded");
	cr_assert_eq(bch_fs_close(c), 0);
}

/*
 * The decision is exact (the replicas table), not a guess from the options:
 * a file written with one copy on a filesystem of two makes a member the
 * only holder of something, and -o degraded without it is refused, naming
 * it; before, the options said two copies and the open went ahead.
 */
Test(degraded, one_copy_file_refuses_without_its_member)
{
	struct bch_fs *c;
	char err[512], want[64];
	static char buf[96 * 1024];
	uint64_t inum;

	cr_assert_eq(open_some(3, false, false, &c, err, sizeof(err)), 0, "%s", err);
	workload(c, 3);
	c->opts.v[Opt_data_replicas] = 1;	/* as a file's own data_replicas would */
	/* all of it on one member (the allocator would spread it over both) */
	c->opts.v[Opt_foreground_target] = BCH_TARGET_DEV_START + 0;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "single", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	fill(buf, sizeof(buf), 99, 0);
	cr_assert_eq(bch_fs_write(c, inum, 0, buf, sizeof(buf)), (ssize_t)sizeof(buf), "%s", c->err_msg);
	c->opts.v[Opt_foreground_target] = 0;
	/* which member holds it: the one extent's only pointer */
	struct btree_iter it;
	const struct bch_bkey *k;
	int e = 0;
	unsigned holder = 2;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &e)))
		if (k->type == BCH_BKEY_extent && bch_extent_nr_ptrs(k) == 1)
			holder = ((const struct bch_extent *)bkey_val(k))->ptrs[0].dev;
	bch_btree_iter_exit(&it);
	cr_assert_eq(e, 0);
	cr_assert_lt(holder, 2, "the one-copy file has no one-pointer extent");
	cr_assert_eq(bch_fs_close(c), 0);

	int r = open_some(1U << (1 - holder), true, true, &c, err, sizeof(err));
	cr_assert_eq(r, -BCH_ERR_device_missing, "opened degraded with the only copy missing");
	snprintf(want, sizeof(want), "file data kept only on member %u", holder);
	cr_assert(strstr(err, want) && strstr(err, "-o very_degraded"), "message: %s", err);
	/* the other member missing: everything has a copy; without -o degraded it says so */
	r = open_some(1U << holder, false, true, &c, err, sizeof(err));
	cr_assert_eq(r, -BCH_ERR_device_missing);
	cr_assert(strstr(err, "nothing would be lost") && strstr(err, "-o degraded opens it"),
		  "message: %s", err);
	cr_assert_eq(open_some(1U << holder, true, true, &c, err, sizeof(err)), 0, "%s", err);
	verify(c, 3, "degraded, the one-copy file's member present");
	cr_assert_eq(bch_fs_close(c), 0);
}
