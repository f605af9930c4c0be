// SPDX-License-Identifier: GPL-2.0
/*
 * scrub_test.c - data scrub (scrub.c): every copy read, bad ones rewritten.
 *
 * Two devices, data and metadata in two copies; files of deterministic
 * content (seed printed).  Copies on one device are damaged by writing into
 * the image files where the extents' pointers say; a scrub (in small steps)
 * must find exactly those, repair them all, and a second scrub find none;
 * the files read back as written, and fsck --data is clean.  Also: only the
 * copies on the member asked for are read; a btree node replica damaged is
 * rewritten; a file kept in one copy whose copy is damaged is reported by
 * name, left alone, and makes no repair; opened degraded, the missing
 * member's copies are skipped and counted.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "scrub.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED	2020u
#define NFILES	12

static char tmpdir[64], paths[2][TESTFS_PATH_MAX];
static bool encrypted;	/* scrub_encrypted: the same filesystem, encrypted (MACs for checksums) */

static void setup(void)
{
	struct bch_format_dev devs[2] = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "scrub");
	for (unsigned i = 0; i < 2; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/d%u.img", tmpdir, i);
		devs[i].path = paths[i];
		devs[i].size = 48 << 20;
		devs[i].bucket_size = 64 << 10;
		devs[i].durability = 1;
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 64 << 10);
	bch_opt_set(&o, Opt_metadata_replicas, 2);
	bch_opt_set(&o, Opt_data_replicas, 2);
	if (encrypted) {
		bch_opt_set(&o, Opt_encrypted, 1);
		args.passphrase = "scrub";
	}
	cr_assert_eq(bch_format(devs, 2, &o, NULL, &args, err, sizeof(err)), 0, "format: %s", err);
}

static void teardown(void)
{
	test_tmpdir_remove(tmpdir);
}

TestSuite(scrub, .init = setup, .fini = teardown);

static struct bch_fs *open_rw(void)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, 2, 0, 0, err, sizeof(err));

	cr_assert(c, "open: %s", err);
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

static size_t file_len(unsigned i)
{
	return 4096 * (8 + (i * 7) % 41) + (i % 3) * 100;
}

/* NFILES files f0..; file "single" (if asked) kept in one copy. */
static void write_files(bool single)
{
	struct bch_fs *c = open_rw();
	char name[16];

	cr_log_info("scrub: seed %u", SEED);
	for (unsigned i = 0; i < NFILES + single; i++) {
		uint64_t inum;
		size_t len = file_len(i);
		char *buf = malloc(len);

		cr_assert(buf);
		fill(buf, len, i);
		if (i == NFILES)
			snprintf(name, sizeof(name), "single");
		else
			snprintf(name, sizeof(name), "f%u", i);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
		if (i == NFILES)
			cr_assert_eq(bch_fs_set_inode_opt(c, inum, "data_replicas", "1"), 0);
		cr_assert_eq(bch_fs_write(c, inum, 0, buf, len), (ssize_t)len);
		free(buf);
	}
	cr_assert_eq(bch_fs_close(c), 0);
}

static void check_files(struct bch_fs *c)
{
	char name[16];

	for (unsigned i = 0; i < NFILES; i++) {
		uint64_t inum;
		size_t len = file_len(i);
		char *want = malloc(len), *got = malloc(len + 1);

		cr_assert(want && got);
		fill(want, len, i);
		snprintf(name, sizeof(name), "f%u", i);
		cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0);
		cr_assert_eq(bch_fs_read(c, inum, 0, got, len + 1), (ssize_t)len, "%s", name);
		cr_assert(!memcmp(want, got, len), "%s differs", name);
		free(want);
		free(got);
	}
}

/*
 * Damage the copy on dev of every `every`-th extent (starting with the
 * first), or of the extents of inode only_inum (0: any); returns how many.
 */
static unsigned damage_data(unsigned dev, unsigned every, uint64_t only_inum)
{
	struct bch_fs *c = open_rw();
	struct btree_iter it;
	const struct bch_bkey *k;
	uint64_t off[256];
	unsigned n = 0, seen = 0;
	int err = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err)) && n < 256) {
		const struct bch_extent *e = bkey_val(k);
		if (k->type != BCH_BKEY_extent || (only_inum && k->p.inode != only_inum))
			continue;
		if (seen++ % every)
			continue;
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
			if (e->ptrs[i].dev == dev)
				off[n++] = ((uint64_t)e->ptrs[i].offset << 9) + 1000;
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
	cr_assert_eq(bch_fs_close(c), 0);

	int fd = open(paths[dev], O_WRONLY);
	cr_assert(fd >= 0);
	for (unsigned i = 0; i < n; i++)
		cr_assert_eq(pwrite(fd, "DAMAGED!", 8, off[i]), 8);
	close(fd);
	return n;
}

static void run_scrub(struct bch_fs *c, int dev, struct bch_scrub *s)
{
	char err[256];
	int r;

	cr_assert_eq(bch_scrub_init(c, s, dev, err, sizeof(err)), 0, "%s", err);
	cr_assert_gt(s->bytes_total, 0);
	unsigned steps = 0;
	while ((r = bch_scrub_step(c, s, 256 << 10)) == 1)
		steps++;
	cr_assert_eq(r, 0, "scrub: %s", c->err_msg);
	cr_assert_gt(steps, 1, "small budget: more than one step");
}

static void assert_fsck_clean(void)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, 2, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));

	cr_assert(c, "%s", err);
	testfs_assert_fsck_clean(c, true);
	cr_assert_eq(bch_fs_close(c), 0);
}

static void repairs_all_then_finds_nothing(void);

Test(scrub, repairs_all_then_finds_nothing)
{
	repairs_all_then_finds_nothing();
}

static void setup_encrypted(void)
{
	encrypted = true;
	setup();
}

TestSuite(scrub_encrypted, .init = setup_encrypted, .fini = teardown);

/* Encrypted: a damaged copy fails its MAC and is rewritten from the ciphertext of a good one. */
Test(scrub_encrypted, repairs_all_then_finds_nothing)
{
	repairs_all_then_finds_nothing();
}

static void repairs_all_then_finds_nothing(void)
{
	struct bch_scrub *s = calloc(1, sizeof(*s));
	write_files(false);
	unsigned n = damage_data(0, 2, 0);
	cr_assert_gt(n, 5);

	struct bch_fs *c = open_rw();
	run_scrub(c, -1, s);
	cr_assert_eq(s->copies_bad, n);
	cr_assert_eq(s->copies_repaired, n);
	cr_assert_eq(s->unrepairable, 0);
	cr_assert_eq(s->copies_skipped, 0);
	cr_assert_geq(s->copies_checked, 2 * s->extents_checked);
	cr_assert_geq(s->bytes_read, s->extents_checked * 4096);
	check_files(c);
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_rw();
	run_scrub(c, -1, s);
	cr_assert_eq(s->copies_bad, 0, "second scrub: %llu bad", (unsigned long long)s->copies_bad);
	check_files(c);
	cr_assert_eq(bch_fs_close(c), 0);
	assert_fsck_clean();
	free(s);
}

Test(scrub, member_filter)
{
	struct bch_scrub *s = calloc(1, sizeof(*s));
	write_files(false);
	unsigned n = damage_data(1, 3, 0);
	cr_assert_gt(n, 3);

	struct bch_fs *c = open_rw();
	run_scrub(c, 0, s);		/* the other member: its copies are good */
	cr_assert_eq(s->copies_bad, 0);
	cr_assert_eq(s->copies_checked, s->extents_checked + s->nodes_checked,
		     "one copy per extent and node: %llu", (unsigned long long)s->copies_checked);
	run_scrub(c, 1, s);
	cr_assert_eq(s->copies_bad, n);
	cr_assert_eq(s->copies_repaired, n);
	cr_assert_eq(s->unrepairable, 0);
	run_scrub(c, 1, s);
	cr_assert_eq(s->copies_bad, 0);
	check_files(c);
	cr_assert_eq(bch_fs_close(c), 0);
	assert_fsck_clean();
	free(s);
}

Test(scrub, btree_replica_repaired)
{
	struct bch_scrub *s = calloc(1, sizeof(*s));
	write_files(false);

	/* the extents root's copy on device 1: its header destroyed */
	struct bch_fs *c = open_rw();
	const struct bch_bkey *rk = c->roots->r[BCH_BTREE_ID_extents].key;
	const struct bch_btree_ptr *bp = bkey_val(rk);
	uint64_t off = UINT64_MAX;
	for (unsigned i = 0; i < bch_btree_ptr_nr(rk); i++)
		if (bp->ptrs[i].dev == 1)
			off = (uint64_t)bp->ptrs[i].offset << 9;
	cr_assert_neq(off, UINT64_MAX);
	cr_assert_eq(bch_fs_close(c), 0);
	int fd = open(paths[1], O_WRONLY);
	char zero[4096] = { 0 };
	cr_assert(fd >= 0);
	cr_assert_eq(pwrite(fd, zero, sizeof(zero), off), (ssize_t)sizeof(zero));
	close(fd);

	c = open_rw();
	run_scrub(c, -1, s);
	cr_assert_eq(s->copies_bad, 1);
	cr_assert_eq(s->copies_repaired, 1);
	cr_assert_eq(s->unrepairable, 0);
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_rw();
	run_scrub(c, -1, s);
	cr_assert_eq(s->copies_bad, 0);
	check_files(c);
	cr_assert_eq(bch_fs_close(c), 0);
	assert_fsck_clean();
	free(s);
}

Test(scrub, single_copy_unrepairable)
{
	struct bch_scrub *s = calloc(1, sizeof(*s));
	uint64_t inum;
	write_files(true);

	struct bch_fs *c = open_rw();
	cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, "single", &inum), 0);
	cr_assert_eq(bch_fs_close(c), 0);
	unsigned n = damage_data(0, 1, inum) + damage_data(1, 1, inum);
	cr_assert_gt(n, 0);

	c = open_rw();
	run_scrub(c, -1, s);
	cr_assert_eq(s->copies_bad, n);
	cr_assert_eq(s->copies_repaired, 0);
	cr_assert_eq(s->unrepairable, n, "each damaged extent of the file has its only copy bad");
	cr_assert_gt(s->unrepairable_bytes, 0);
	cr_assert_geq(s->nr_bad, 1);
	cr_assert_eq(s->bad[0].inode, inum);
	cr_assert(!s->bad[0].btree);
	cr_assert(strstr(s->bad[0].what, "/single"), "named: %s", s->bad[0].what);
	cr_assert(strstr(s->bad[0].why, "no good copy"), "why: %s", s->bad[0].why);
	check_files(c);		/* the others are untouched */
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_rw();
	run_scrub(c, -1, s);
	cr_assert_eq(s->unrepairable, n, "still bad, still reported");
	cr_assert_eq(bch_fs_close(c), 0);
	free(s);
}

Test(scrub, degraded_copies_skipped)
{
	struct bch_scrub *s = calloc(1, sizeof(*s));
	struct bch_opts o;
	struct bch_fs *c;
	char err[256], *p[1] = { paths[0] };

	write_files(false);
	memset(&o, 0, sizeof(o));
	bch_opt_set(&o, Opt_degraded, 1);
	cr_assert_eq(bch_fs_open(p, 1, &o, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_neq(bch_scrub_init(c, s, 1, err, sizeof(err)), 0, "the missing member refused");
	run_scrub(c, -1, s);
	cr_assert_eq(s->copies_bad, 0);
	cr_assert_eq(s->unrepairable, 0);
	cr_assert_eq(s->copies_checked, s->extents_checked + s->nodes_checked,
		     "only the present member's copies read");
	cr_assert_eq(s->copies_skipped, s->extents_checked + s->nodes_checked,
		     "the missing member's copies counted as skipped");
	cr_assert_eq(bch_fs_close(c), 0);
	free(s);
}
