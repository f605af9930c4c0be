// SPDX-License-Identifier: GPL-2.0
/*
 * append_merge_test.c - appends grow the file's last extent (io.c,
 * append_merge()): small aligned writes in order end up as extents of a
 * whole encoding unit (64 KiB here: testfs buckets), with a checksum that
 * verifies (fsck with data), on one device and replicated on two; what
 * must not merge does not: a gap, a compressed or crc64 file, an
 * overwrite in the middle.  The file always reads back as written.
 * Fixed data (seed 7).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "bcachefs_format.h"
#include "btree.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "move.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];

#define LEN	(512 << 10)

static uint8_t data[LEN];

static void fill(void)
{
	unsigned s = 7;

	for (size_t i = 0; i < LEN; i++) {
		s = s * 1103515245u + 12345u;
		data[i] = s >> 16;
	}
}

/* extent keys of inum */
static unsigned extents_of(struct bch_fs *c, uint64_t inum)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	unsigned n = 0;
	int err = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err)))
		n += k->type == BCH_BKEY_extent;
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
	return n;
}

/* write [0, len) of data to a new file name in pieces of step bytes (skip: leave a gap after the first) */
static uint64_t write_file(struct bch_fs *c, const char *name, size_t len, size_t step, const char *opt,
			   const char *val, bool gap)
{
	uint64_t inum;

	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0, "%s", c->err_msg);
	if (opt)
		cr_assert_eq(bch_fs_set_inode_opt(c, inum, opt, val), 0, "%s", c->err_msg);
	for (size_t off = 0; off < len; off += step) {
		if (gap && off == step)
			continue;
		cr_assert_eq(bch_fs_write(c, inum, off, data + off, step), (ssize_t)step, "%s", c->err_msg);
	}
	return inum;
}

static void same(struct bch_fs *c, uint64_t inum, size_t len, bool gap, size_t step)
{
	uint8_t *got = malloc(len);

	cr_assert(got);
	cr_assert_eq(bch_fs_read(c, inum, 0, got, len), (ssize_t)len, "%s", c->err_msg);
	for (size_t i = 0; i < len; i++) {
		uint8_t want = gap && i >= step && i < 2 * step ? 0 : data[i];
		if (got[i] != want)
			cr_assert_fail("inode %lu byte %zu: %u, written %u", (unsigned long)inum, i, got[i], want);
	}
	free(got);
}

static void run(unsigned nr_devs)
{
	char err[256];

	fill();
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "appendmerge");
	testfs_format(tmpdir, nr_devs, 32, 64 << 10, nr_devs, paths);
	struct bch_fs *c = testfs_open(paths, nr_devs, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	if (nr_devs > 1)
		cr_assert_eq(bch_fs_set_inode_opt(c, BCH_ROOT_INO, "data_replicas", "2"), 0, "%s", c->err_msg);

	uint64_t a = write_file(c, "a", LEN, 8192, NULL, NULL, false);
	uint64_t b = write_file(c, "b", LEN, 4096, NULL, NULL, false);
	uint64_t g = write_file(c, "gap", 64 << 10, 8192, NULL, NULL, true);
	uint64_t z = write_file(c, "lz4", 64 << 10, 8192, "compression", "lz4", false);
	uint64_t x = write_file(c, "crc64", 64 << 10, 8192, "data_checksum", "crc64", false);
	/* 512 KiB in 64 KiB units; a few more where another file's write came between */
	cr_assert_leq(extents_of(c, a), 10, "8 KiB appends: %u extents", extents_of(c, a));
	cr_assert_leq(extents_of(c, b), 10, "4 KiB appends: %u extents", extents_of(c, b));
	cr_assert_eq(extents_of(c, g), 2, "across a gap: %u extents", extents_of(c, g));
	cr_assert_eq(extents_of(c, z), 8, "compressed: %u extents", extents_of(c, z));
	cr_assert_eq(extents_of(c, x), 8, "crc64: %u extents", extents_of(c, x));
	same(c, b, LEN, false, 0);
	same(c, g, 64 << 10, true, 8192);
	same(c, z, 64 << 10, false, 0);
	same(c, x, 64 << 10, false, 0);
	/* an overwrite inside a grown extent splits it; the rest still reads right */
	memset(data + 20000, 0x5a, 3000);
	cr_assert_eq(bch_fs_write(c, a, 20000, data + 20000, 3000), 3000, "%s", c->err_msg);
	same(c, a, LEN, false, 0);
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, nr_devs, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	testfs_assert_fsck_clean(c, true);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

Test(append_merge, one_device)
{
	run(1);
}

Test(append_merge, two_replicas)
{
	run(2);
}

/* The extent key of inum ending at end (a copy), or NULL. */
static struct bch_bkey *key_ending(struct bch_fs *c, uint64_t inum, uint64_t end)
{
	struct bch_bkey *k = NULL;

	cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_extents, POS(inum, end, 0), &k), 0, "no key ending at %lu",
		     (unsigned long)end);
	return k;
}

/*
 * Copygc moving what an overwrite left of a grown extent: the piece does
 * not fit the rest of the open bucket, so it is cut there (move.c,
 * move_split; copygc.h invariant 6): two keys, the first ending the open
 * bucket exactly, each with a checksum of its own (fsck reads the data).
 */
Test(append_merge, copygc_move_cut_at_open_bucket)
{
	char err[256];
	uint64_t a, s;

	fill();
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "appendcut");
	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	a = write_file(c, "a", 128 << 10, 4096, NULL, NULL, false);
	cr_assert_eq(extents_of(c, a), 2, "two buckets of 4 KiB appends: %u extents", extents_of(c, a));
	/* another file takes half of the next bucket, then block 1 of a is overwritten */
	s = write_file(c, "s", 32 << 10, 4096, NULL, NULL, false);
	memset(data + 4096, 0xa5, 4096);
	cr_assert_eq(bch_fs_write(c, a, 4096, data + 4096, 4096), 4096, "%s", c->err_msg);

	struct bch_alloc_space sp;
	bch_alloc_dev_space(c, 0, &sp);
	unsigned rest = sp.copygc_room % sp.bucket_sectors;
	struct bch_bkey *back = key_ending(c, a, 128);
	cr_assert_eq(back->size, 112, "the back of a's first extent: %u sectors", back->size);
	cr_assert(rest > 0 && rest < back->size, "the open bucket's rest: %u sectors", rest);

	struct bch_move_stats ms = { 0 };
	struct bch_mover *m;
	struct bch_move_op op = { .rewrite = 1, .nr_new = 1, .same_dev = true };
	cr_assert_eq(bch_mover_init(c, &ms, &m), 0);
	cr_assert_eq(bch_mover_add(m, back, &op), 0, "%s", ms.last_problem);
	cr_assert_eq(bch_mover_exit(m), 0, "%s", c->err_msg);
	cr_assert_eq(ms.keys_moved, 1);
	cr_assert_eq(ms.sectors_written, 112);

	struct bch_bkey *front = key_ending(c, a, 16 + rest), *tail = key_ending(c, a, 128);
	const struct bch_extent *fe = bkey_val(front), *te = bkey_val(tail);
	cr_assert_eq(front->size, rest);
	cr_assert_eq(tail->size, 112 - rest);
	cr_assert_eq((fe->ptrs[0].offset + rest) % sp.bucket_sectors, 0, "the front should end the open bucket");
	cr_assert_eq(te->ptrs[0].offset % sp.bucket_sectors, 0, "the rest should start a bucket");
	cr_assert_eq(fe->crc.uncompressed_sectors, rest, "the front is encoded on its own");
	cr_assert_eq(te->crc.uncompressed_sectors, 112 - rest, "the rest is encoded on its own");
	cr_assert_eq(extents_of(c, a), 5, "front, overwrite, two halves of the back, second: %u extents", extents_of(c, a));
	free(back);
	free(front);
	free(tail);
	same(c, a, 128 << 10, false, 0);
	fill();		/* s holds the data as it was */
	same(c, s, 32 << 10, false, 0);
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	testfs_assert_fsck_clean(c, true);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}
