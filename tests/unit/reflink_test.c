// SPDX-License-Identifier: GPL-2.0
/*
 * reflink_test.c - shared extents (reflink.h) against a model: random
 * writes, remaps (aligned and not, between files and within one),
 * truncates and deletes on a few files, each kept as a byte array.  After
 * every step each file reads back equal to its model; every few steps
 * each indirect extent's refcount equals the number of reflink_p keys
 * overlapping it, and none is at 0.  The filesystem is closed and opened
 * again on the way (once after a power cut: replay).  At the end every
 * file goes: the reflink btree is empty and no user data is left; fsck
 * is clean.  Seeds are printed (SEED= repeats one).
 * copygc_keeps_sharing: buckets left with a few live blocks that two files
 * share are emptied by copygc, which moves each shared block once: the
 * files still share it (refcount 2), the live data is counted once, both
 * files equal their models, fsck is clean.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "copygc.h"
#include "move.h"
#include "bcachefs.h"
#include "bcachefs_format.h"
#include "btree.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "reflink.h"
#include "snapshot.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NODE_BYTES	(64 << 10)
#define NR_FILES	4
#define MAX_SIZE	(768 << 10)

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];

struct mfile {
	uint64_t	inum;
	uint8_t		*data;
	size_t		size;
};

static unsigned rnd(unsigned *s, unsigned n)
{
	*s = *s * 1103515245u + 12345u;
	return n ? (*s >> 8) % n : 0;
}

static struct bch_fs *open_fs(unsigned seed)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));

	cr_assert(c, "seed %u: open: %s", seed, err);
	return c;
}

static void check_file(struct bch_fs *c, struct mfile *f, unsigned seed, unsigned step, const char *what)
{
	struct stat st;
	uint8_t *buf = malloc(f->size + 1);

	cr_assert(buf);
	cr_assert_eq(bch_fs_getattr(c, f->inum, &st), 0, "seed %u step %u", seed, step);
	cr_assert_eq((size_t)st.st_size, f->size, "seed %u step %u (%s): inode %lu size %zu, model %zu",
		     seed, step, what, (unsigned long)f->inum, (size_t)st.st_size, f->size);
	ssize_t n = bch_fs_read(c, f->inum, 0, buf, f->size);
	cr_assert_eq(n, (ssize_t)f->size, "seed %u step %u (%s): read %zd: %s", seed, step, what, n,
		     c->err_msg);
	for (size_t i = 0; i < f->size; i++)
		if (buf[i] != f->data[i])
			cr_assert_fail("seed %u step %u (%s): inode %lu byte %zu is %u, model %u", seed, step,
				       what, (unsigned long)f->inum, i, buf[i], f->data[i]);
	free(buf);
}

/* Every reflink_v's refcount is the number of reflink_p keys overlapping it; *nr_v of them. */
static void check_refs(struct bch_fs *c, unsigned seed, unsigned step, unsigned *nr_v)
{
	struct btree_iter it, jt;
	const struct bch_bkey *k, *p;
	int err = 0;

	*nr_v = 0;
	if (!c->roots->r[BCH_BTREE_ID_reflink].key)
		return;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_reflink_v)
			continue;
		struct bch_bkey *v = bch_bkey_dup(k);
		uint64_t vs = bch_extent_start(v), ve = v->p.offset, refs = 0;
		int e2 = 0;
		bch_btree_iter_init(&jt, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
		while ((p = bch_btree_iter_next(&jt, &e2))) {
			if (p->type != BCH_BKEY_reflink_p)
				continue;
			uint64_t idx = ((const struct bch_reflink_p *)bkey_val(p))->idx;
			refs += idx < ve && idx + p->size > vs;
		}
		bch_btree_iter_exit(&jt);
		cr_assert_eq(e2, 0);
		uint64_t have = ((const struct bch_reflink_v *)bkey_val(v))->refcount;
		cr_assert_eq(have, refs, "seed %u step %u: indirect extent %lu..%lu: refcount %lu, "
			     "%lu reflink_p keys", seed, step, (unsigned long)vs, (unsigned long)ve,
			     (unsigned long)have, (unsigned long)refs);
		cr_assert_neq(have, 0);
		++*nr_v;
		free(v);
		/* the extents walk may have moved the leaf: look again after v */
		bch_btree_iter_exit(&it);
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS(0, ve + 1, 0), POS_MAX);
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
}

static void model_write(struct mfile *f, size_t off, const uint8_t *src, size_t len)
{
	if (off + len > f->size) {
		f->data = realloc(f->data, off + len);
		cr_assert(f->data);
		memset(f->data + f->size, 0, off + len - f->size);
		f->size = off + len;
	}
	memmove(f->data + off, src, len);
}

static void model_truncate(struct mfile *f, size_t size)
{
	f->data = realloc(f->data, size ? size : 1);
	cr_assert(f->data);
	if (size > f->size)
		memset(f->data + f->size, 0, size - f->size);
	f->size = size;
}

static void create(struct bch_fs *c, struct mfile *f, unsigned i)
{
	char name[16];

	snprintf(name, sizeof(name), "f%u", i);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &f->inum), 0);
	model_truncate(f, 0);
}

static uint64_t user_sectors(struct bch_fs *c)
{
	struct bch_dev_usage u;

	bch_dev_usage_get(c, 0, &u);
	return u.sectors[BCH_DATA_user];
}

static void run(unsigned def_seed, unsigned steps)
{
	unsigned seed = getenv("SEED") ? (unsigned)atoi(getenv("SEED")) : def_seed, s = seed;
	struct mfile f[NR_FILES] = { 0 };
	unsigned remaps = 0, shared_max = 0, nr_v;
	uint8_t *buf = malloc(MAX_SIZE);

	fprintf(stderr, "reflink_test: seed %u, %u steps\n", seed, steps);
	cr_assert(buf);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "reflink");
	testfs_format(tmpdir, 1, 64, NODE_BYTES, 1, paths);
	struct bch_fs *c = open_fs(seed);
	for (unsigned i = 0; i < NR_FILES; i++)
		create(c, &f[i], i);

	for (unsigned step = 1; step <= steps; step++) {
		unsigned op = rnd(&s, 100), a = rnd(&s, NR_FILES), b = rnd(&s, NR_FILES);
		const char *what;
		if (op < 30) {			/* write */
			what = "write";
			size_t off = rnd(&s, MAX_SIZE - 1), len = 1 + rnd(&s, 64 << 10);
			if (off + len > MAX_SIZE)
				len = MAX_SIZE - off;
			for (size_t i = 0; i < len; i++)
				buf[i] = rnd(&s, 256);
			cr_assert_eq(bch_fs_write(c, f[a].inum, off, buf, len), (ssize_t)len,
				     "seed %u step %u: write: %s", seed, step, c->err_msg);
			model_write(&f[a], off, buf, len);
		} else if (op < 75) {		/* remap, mostly of whole blocks */
			what = "remap";
			bool aligned = rnd(&s, 4) != 0;
			size_t so = rnd(&s, f[a].size + 1), dof = rnd(&s, MAX_SIZE / 2);
			size_t len = rnd(&s, MAX_SIZE / 2);
			if (aligned) {
				so &= ~4095UL;
				dof &= ~4095UL;
				if (rnd(&s, 2))
					len &= ~4095UL;
			}
			if (rnd(&s, 4) == 0) {	/* the whole file, as image cp --reflink */
				so = 0;
				dof = 0;
				len = f[a].size;
			}
			ssize_t want = so >= f[a].size ? 0 : (ssize_t)(len < f[a].size - so ? len : f[a].size - so);
			if (a == b && want && so < dof + want && dof < so + want) {
				cr_assert_eq(bch_fs_remap_range(c, f[a].inum, so, f[b].inum, dof, len), -EINVAL);
				continue;
			}
			ssize_t n = bch_fs_remap_range(c, f[a].inum, so, f[b].inum, dof, len);
			cr_assert_eq(n, want, "seed %u step %u: remap %zu+%zu -> %zu: %zd (%s)", seed, step,
				     so, len, dof, n, c->err_msg);
			if (want) {
				memcpy(buf, f[a].data + so, want);
				model_write(&f[b], dof, buf, want);
				remaps++;
			}
		} else if (op < 85) {		/* truncate */
			what = "truncate";
			size_t size = rnd(&s, f[a].size + 4096 + 1);
			cr_assert_eq(bch_fs_truncate(c, f[a].inum, size), 0, "seed %u step %u", seed, step);
			model_truncate(&f[a], size);
		} else if (op < 93) {		/* delete, and a new empty file in its place */
			what = "delete";
			char name[16];
			snprintf(name, sizeof(name), "f%u", a);
			cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0);
			create(c, &f[a], a);
		} else {			/* close and open again; sometimes a power cut */
			what = "reopen";
			if (rnd(&s, 3) == 0) {
				cr_assert_eq(bch_fs_fsync(c), 0);
				c->read_only = true;
				bch_fs_close(c);
			} else {
				cr_assert_eq(bch_fs_close(c), 0);
			}
			c = open_fs(seed);
		}
		for (unsigned i = 0; i < NR_FILES; i++)
			check_file(c, &f[i], seed, step, what);
		if (step % 8 == 0) {
			check_refs(c, seed, step, &nr_v);
			if (nr_v > shared_max)
				shared_max = nr_v;
		}
	}
	check_refs(c, seed, steps, &nr_v);
	cr_assert_gt(remaps, steps / 4, "seed %u: only %u remaps", seed, remaps);
	cr_assert_gt(shared_max, 0, "seed %u: nothing was ever shared", seed);
	cr_assert_eq(bch_fs_close(c), 0);

	/* fsck -n with data: clean */
	char err[256];
	c = testfs_open(paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "seed %u: open for fsck: %s", seed, err);
	testfs_assert_fsck_clean(c, true);
	bch_fs_close(c);

	/* the last sharer goes: the indirect extents and their space go with it */
	c = open_fs(seed);
	for (unsigned i = 0; i < NR_FILES; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", i);
		cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0);
		free(f[i].data);
	}
	check_refs(c, seed, steps + 1, &nr_v);
	cr_assert_eq(nr_v, 0, "seed %u: %u indirect extents left with no file", seed, nr_v);
	cr_assert_eq(user_sectors(c), 0, "seed %u: %lu sectors of user data left", seed,
		     (unsigned long)user_sectors(c));
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "seed %u: open for fsck: %s", seed, err);
	testfs_assert_fsck_clean(c, true);
	bch_fs_close(c);
	free(buf);
	test_tmpdir_remove(tmpdir);
}

Test(reflink, model)
{
	run(20261206, getenv("SOAK") ? 2000 : 160);
}

Test(reflink, model_seed2)
{
	run(7, getenv("SOAK") ? 2000 : 120);
}

/* block b of generation g: its bytes are a function of both */
static void fill(uint8_t *buf, uint64_t b, unsigned g)
{
	unsigned x = (unsigned)b * 2654435761u + g * 40503u + 1;

	for (unsigned i = 0; i < 4096; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = x >> 16;
	}
}

Test(reflink, copygc_keeps_sharing, .timeout = 300)
{
	const uint64_t blocks = 384;
	uint8_t buf[4096], got[4096];
	unsigned gen[2][384] = { { 0 } }, seed = 31, nr_v, shared = 0;
	uint64_t inum[2];

	fprintf(stderr, "reflink copygc: seed %u\n", seed);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "reflinkgc");
	testfs_format(tmpdir, 1, 8, 64 << 10, 1, paths);
	struct bch_fs *c = open_fs(seed);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum[0]), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "g", S_IFREG | 0644, 0, 0, 0, &inum[1]), 0);
	/* last block first: appends in order would grow one extent per bucket (io.c) */
	for (uint64_t b = blocks; b-- > 0; ) {
		fill(buf, b, 0);
		cr_assert_eq(bch_fs_write(c, inum[0], b * 4096, buf, 4096), 4096, "%s", c->err_msg);
	}
	cr_assert_eq(bch_fs_remap_range(c, inum[0], 0, inum[1], 0, blocks * 4096), (ssize_t)(blocks * 4096),
		     "%s", c->err_msg);
	/* both files overwrite the same 3 blocks in 4: the shared rest is sparse in its buckets */
	srandom(seed);
	for (uint64_t b = 0; b < blocks; b++) {
		if (!(random() % 4)) {
			shared++;
			continue;
		}
		for (unsigned f = 0; f < 2; f++) {
			gen[f][b] = 1 + f;
			fill(buf, b, gen[f][b]);
			cr_assert_eq(bch_fs_write(c, inum[f], b * 4096, buf, 4096), 4096, "%s", c->err_msg);
		}
	}
	check_refs(c, seed, 0, &nr_v);
	cr_assert_eq(nr_v, shared, "seed %u: %u indirect extents for %u shared blocks", seed, nr_v, shared);
	struct bch_move_stats ms = { 0 };
	cr_assert_eq(bch_copygc_step(c, &ms), 1, "seed %u: copygc freed nothing: %s", seed, c->err_msg);
	cr_assert_gt(ms.keys_moved, 0);
	fprintf(stderr, "reflink copygc: %u shared blocks, %lu keys moved, %lu sectors written\n", shared,
		(unsigned long)ms.keys_moved, (unsigned long)ms.sectors_written);
	/* each shared block moved once: no more written than the live data copygc took */
	cr_assert_leq(ms.sectors_written, (uint64_t)(2 * (blocks - shared) + shared) * 8);
	check_refs(c, seed, 1, &nr_v);
	cr_assert_eq(nr_v, shared, "seed %u: copygc changed the sharing: %u indirect extents, %u shared "
		     "blocks", seed, nr_v, shared);
	cr_assert_eq(user_sectors(c), (uint64_t)(2 * (blocks - shared) + shared) * 8,
		     "seed %u: live data %lu sectors (shared data counted more than once?)", seed,
		     (unsigned long)user_sectors(c));
	for (unsigned f = 0; f < 2; f++)
		for (uint64_t b = 0; b < blocks; b++) {
			fill(buf, b, gen[f][b]);
			cr_assert_eq(bch_fs_read(c, inum[f], b * 4096, got, 4096), 4096);
			cr_assert(!memcmp(buf, got, 4096), "seed %u: file %u block %lu differs", seed, f,
				  (unsigned long)b);
		}
	cr_assert_eq(bch_fs_close(c), 0);
	char err[256];
	c = testfs_open(paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	testfs_assert_fsck_clean(c, true);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

/*
 * Shared extents and snapshots: a file of a subvolume is shared with
 * another file there, the subvolume is snapshotted, the snapshot's copy is
 * shared into subvolume 0, the original is overwritten; every file keeps
 * its content, refcounts stay exact, and deleting the snapshot (gc) drops
 * its references while subvolume 0's copy keeps the data; when every file
 * is gone (and gc drops what the frozen parent snapshot held) no indirect
 * extent and no data is left.
 */
Test(reflink, snapshots)
{
	const size_t len = 256 << 10;
	uint8_t *data = malloc(len), *over = malloc(len), *got = malloc(len);
	uint64_t root, a, b, snap, a2, cc, freed;
	unsigned s = 66, nr_v;
	char err[256];

	cr_assert(data && over && got);
	for (size_t i = 0; i < len; i++) {
		data[i] = rnd(&s, 256);
		over[i] = rnd(&s, 256);
	}
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "reflinksnap");
	testfs_format(tmpdir, 1, 64, NODE_BYTES, 1, paths);
	struct bch_fs *c = open_fs(s);
#define SAME(h, want) do {								\
		cr_assert_eq(bch_fs_read(c, (h), 0, got, len), (ssize_t)len, "%s", c->err_msg);	\
		cr_assert(!memcmp(got, (want), len), "%s differs", #h);			\
	} while (0)
	cr_assert_eq(bch_fs_subvol_create(c, BCH_ROOT_INO, "sv", 0755, 0, 0, &root), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_create(c, root, "a", S_IFREG | 0644, 0, 0, 0, &a), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_write(c, a, 0, data, len), (ssize_t)len, "%s", c->err_msg);
	cr_assert_eq(bch_fs_create(c, root, "b", S_IFREG | 0644, 0, 0, 0, &b), 0);
	cr_assert_eq(bch_fs_remap_range(c, a, 0, b, 0, len), (ssize_t)len, "%s", c->err_msg);
	cr_assert_eq(bch_fs_subvol_snapshot(c, root, BCH_ROOT_INO, "snap", false, &snap), 0, "%s",
		     c->err_msg);
	cr_assert_eq(bch_fs_lookup(c, snap, "a", &a2), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "c", S_IFREG | 0644, 0, 0, 0, &cc), 0);
	cr_assert_eq(bch_fs_remap_range(c, a2, 0, cc, 0, len), (ssize_t)len, "%s", c->err_msg);
	/* the original overwritten in half: nobody else sees it */
	cr_assert_eq(bch_fs_write(c, a, 0, over, len / 2), (ssize_t)(len / 2), "%s", c->err_msg);
	uint8_t *mixed = malloc(len);
	memcpy(mixed, over, len / 2);
	memcpy(mixed + len / 2, data + len / 2, len - len / 2);
	SAME(a, mixed);
	SAME(b, data);
	SAME(a2, data);
	SAME(cc, data);
	check_refs(c, s, 0, &nr_v);
	cr_assert_gt(nr_v, 0);
	/* the snapshot goes: its keys' references with it */
	cr_assert_eq(bch_fs_subvol_delete(c, BCH_ROOT_INO, "snap"), 0, "%s", c->err_msg);
	cr_assert_eq(bch_snapshot_gc(c, NULL, NULL, &freed), 0, "%s", c->err_msg);
	check_refs(c, s, 1, &nr_v);
	SAME(b, data);
	SAME(cc, data);
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	testfs_assert_fsck_clean(c, true);
	bch_fs_close(c);
	/* every file goes: no indirect extent, no data left */
	c = open_fs(s);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "c"), 0);
	cr_assert_eq(bch_fs_unlink(c, root, "a"), 0);
	cr_assert_eq(bch_fs_unlink(c, root, "b"), 0);
	/* what the subvolume's frozen parent snapshot held goes with gc (hidden from every leaf) */
	cr_assert_eq(bch_snapshot_gc(c, NULL, NULL, &freed), 0, "%s", c->err_msg);
	check_refs(c, s, 2, &nr_v);
	cr_assert_eq(nr_v, 0, "%u indirect extents left", nr_v);
	cr_assert_eq(user_sectors(c), 0, "%lu sectors of data left", (unsigned long)user_sectors(c));
	cr_assert_eq(bch_fs_close(c), 0);
#undef SAME
	free(mixed);
	free(data);
	free(over);
	free(got);
	test_tmpdir_remove(tmpdir);
}

/* reflink_p keys of inum, and the sectors they cover */
static unsigned count_p(struct bch_fs *c, uint64_t inum, uint64_t *sectors)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	unsigned n = 0;
	int err = 0;

	*sectors = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err)))
		if (k->type == BCH_BKEY_reflink_p) {
			n++;
			*sectors += k->size;
		}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
	return n;
}

/*
 * runs: a file of 40 extents back to back shares as 3 reflink_p keys (16,
 * 16 and 8 indirect extents), in the source and in the copy; writes into
 * the middle of a run split it (the indirect extent under both pieces
 * counts both), a truncate and a delete give every reference back; fsck
 * clean.
 */
Test(reflink, runs)
{
	const size_t blk = 4096, nblk = 40, len = nblk * blk;
	uint8_t *data = malloc(len), *got = malloc(len), x[100];
	uint64_t a, b, sectors, freed;
	unsigned s = 40, nr_v;
	char err[256];

	cr_assert(data && got);
	for (size_t i = 0; i < len; i++)
		data[i] = rnd(&s, 256);
	memset(x, 0xab, sizeof(x));
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "reflinkruns");
	testfs_format(tmpdir, 1, 64, NODE_BYTES, 1, paths);
	struct bch_fs *c = open_fs(s);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &a), 0);
	/* one write per block, each its own extent (a gap first, filled after: no merge) */
	for (size_t i = 0; i < nblk; i += 2)
		cr_assert_eq(bch_fs_write(c, a, i * blk, data + i * blk, blk), (ssize_t)blk, "%s", c->err_msg);
	for (size_t i = 1; i < nblk; i += 2)
		cr_assert_eq(bch_fs_write(c, a, i * blk, data + i * blk, blk), (ssize_t)blk, "%s", c->err_msg);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, &b), 0);
	cr_assert_eq(bch_fs_remap_range(c, a, 0, b, 0, len), (ssize_t)len, "%s", c->err_msg);
	check_refs(c, s, 0, &nr_v);
	cr_assert_eq(nr_v, nblk, "%u indirect extents", nr_v);
	unsigned pa = count_p(c, a, &sectors);
	cr_assert_eq(sectors, len >> 9);
	unsigned pb = count_p(c, b, &sectors);
	cr_assert_eq(sectors, len >> 9);
	cr_assert(pa == 3 && pb == 3, "reflink_p keys: %u in the source, %u in the copy", pa, pb);
	/* split runs: a write into the middle of one, in each file */
	cr_assert_eq(bch_fs_write(c, a, 5 * blk + 100, x, sizeof(x)), (ssize_t)sizeof(x));
	cr_assert_eq(bch_fs_write(c, b, 20 * blk + 7, x, sizeof(x)), (ssize_t)sizeof(x));
	check_refs(c, s, 1, &nr_v);
	cr_assert_eq(bch_fs_read(c, a, 0, got, len), (ssize_t)len, "%s", c->err_msg);
	cr_assert(!memcmp(got + 5 * blk + 100, x, sizeof(x)));
	memcpy(got + 5 * blk + 100, data + 5 * blk + 100, sizeof(x));
	cr_assert(!memcmp(got, data, len), "a differs outside the write");
	cr_assert_eq(bch_fs_read(c, b, 0, got, len), (ssize_t)len, "%s", c->err_msg);
	cr_assert(!memcmp(got + 20 * blk + 7, x, sizeof(x)));
	memcpy(got + 20 * blk + 7, data + 20 * blk + 7, sizeof(x));
	cr_assert(!memcmp(got, data, len), "b differs outside the write");
	/* truncate and delete: the references go with the keys */
	struct bch_setattr sa = { .valid = BCH_SETATTR_SIZE, .size = 3 * blk };
	cr_assert_eq(bch_fs_setattr(c, a, &sa), 0, "%s", c->err_msg);
	check_refs(c, s, 2, &nr_v);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "a"), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "b"), 0, "%s", c->err_msg);
	cr_assert_eq(bch_snapshot_gc(c, NULL, NULL, &freed), 0, "%s", c->err_msg);
	check_refs(c, s, 3, &nr_v);
	cr_assert_eq(nr_v, 0, "%u indirect extents left", nr_v);
	cr_assert_eq(user_sectors(c), 0, "%lu sectors of data left", (unsigned long)user_sectors(c));
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	testfs_assert_fsck_clean(c, true);
	bch_fs_close(c);
	free(data);
	free(got);
	test_tmpdir_remove(tmpdir);
}

/*
 * reshare: a file of 800 extents shared twice.  The second sharing's
 * steps weigh each reflink_p by the indirect extents it covers (up to 16):
 * counted as one key, a step of 42 of them changed 672 counts in one
 * transaction, more than a journal entry holds (ENOSPC).
 */
Test(reflink, reshare, .timeout = 120)
{
	const size_t blk = 4096, nblk = 800, len = nblk * blk;
	uint8_t *data = malloc(len), *got = malloc(len);
	uint64_t a, b, d;
	unsigned s = 800, nr_v;

	cr_assert(data && got);
	for (size_t i = 0; i < len; i++)
		data[i] = rnd(&s, 256);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "reflinkreshare");
	testfs_format(tmpdir, 1, 64, NODE_BYTES, 1, paths);
	struct bch_fs *c = open_fs(s);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &a), 0);
	/* last block first: one extent per block (appends in order grow one: io.c) */
	for (size_t i = nblk; i-- > 0; )
		cr_assert_eq(bch_fs_write(c, a, i * blk, data + i * blk, blk), (ssize_t)blk, "%s", c->err_msg);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, &b), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "d", S_IFREG | 0644, 0, 0, 0, &d), 0);
	cr_assert_eq(bch_fs_remap_range(c, a, 0, b, 0, len), (ssize_t)len, "%s", c->err_msg);
	cr_assert_eq(bch_fs_remap_range(c, a, 0, d, 0, len), (ssize_t)len, "%s", c->err_msg);
	check_refs(c, s, 0, &nr_v);
	cr_assert_eq(nr_v, nblk, "%u indirect extents", nr_v);
	cr_assert_eq(bch_fs_read(c, d, 0, got, len), (ssize_t)len, "%s", c->err_msg);
	cr_assert(!memcmp(got, data, len), "the second copy differs");
	cr_assert_eq(bch_fs_close(c), 0);
	free(data);
	free(got);
	test_tmpdir_remove(tmpdir);
}
