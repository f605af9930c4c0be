// SPDX-License-Identifier: GPL-2.0
/*
 * copygc_data_test.c - copygc of user data and eviction of cached data
 * (copygc.h):
 *   - a file filling 95% of what a small filesystem holds (4 KiB blocks
 *     written until ENOSPC, then truncated to 95%) is overwritten at random,
 *     4 KiB at a time, for 3x its size (10x with SOAK=1) through
 *     bch_fs_write: no ENOSPC, the file equals the model, fsck clean; with
 *     SOAK=1 the same at 80% and 90% gives the write amplification (device
 *     sectors written for data / user sectors) printed for each;
 *   - eviction: buckets holding only cached copies are reused when a device
 *     fills up, least recently read first; reads skip the stale cached
 *     pointers; after a power cut right after the reuse no stale cached
 *     pointer is live again (the bumped gen was committed first).
 * Seeds are fixed and printed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "alloc.h"
#include "bcachefs.h"
#include "bkey.h"
#include "blockdev.h"
#include "btree.h"
#include "copygc.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "io.h"
#include "journal.h"
#include "move.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define BLOCK	4096u

static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];

static struct bch_fs *open_fs(unsigned nr, unsigned flags)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, nr, flags, 0, err, sizeof(err));

	cr_assert(c, "open: %s", err);
	return c;
}

/* The block's contents for a given version: distinct per block and version. */
static void fill_block(uint8_t *buf, uint64_t block, uint32_t version, uint32_t seed)
{
	uint64_t x = (block + 1) * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)version << 32) ^ seed;

	for (unsigned i = 0; i < BLOCK; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
}

static void fsck_clean(unsigned nr)
{
	struct bch_fs *c = open_fs(nr, TESTFS_FSCK | TESTFS_RO);
	testfs_assert_fsck_clean(c, true);
	cr_assert_eq(bch_fs_close(c), 0);
}

static void compare_file(struct bch_fs *c, uint64_t inum, uint64_t blocks, const uint32_t *model,
			 uint32_t seed)
{
	uint8_t *want = malloc(BLOCK), *got = malloc(BLOCK);

	for (uint64_t b = 0; b < blocks; b++) {
		fill_block(want, b, model[b], seed);
		cr_assert_eq(bch_fs_read(c, inum, b * BLOCK, got, BLOCK), (ssize_t)BLOCK, "block %lu",
			     (unsigned long)b);
		cr_assert(!memcmp(want, got, BLOCK), "seed %u: block %lu (version %u) differs", seed,
			  (unsigned long)b, model[b]);
	}
	free(want);
	free(got);
}

/*
 * The capacity of a 1-device filesystem of mb MiB for file data in 4 KiB
 * extents: one file written block by block until ENOSPC.  Not statfs's
 * f_blocks: of those, 1/32 is the journal and 1/32 the btree reserve, which
 * user data never takes, and a 4 KiB extent's key costs its share of btree
 * nodes (about 6% of the data here); a filesystem cannot be kept at 95% of
 * f_blocks at all.  Then the file is cut to pct% of that capacity, and
 * random blocks are overwritten mult times its size: no ENOSPC, the file
 * equals the model, fsck clean.  Returns the write amplification of the
 * overwrite phase (data sectors written by the user and by copygc, over
 * the user's).
 */
static double overwrite_run(unsigned mb, unsigned pct, unsigned mult, uint32_t seed)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "cgcdata");
	testfs_format(tmpdir, 1, mb, 64 << 10, 1, paths);
	struct bch_fs *c = open_fs(1, 0);
	struct statvfs sv;
	uint64_t inum, cap;
	uint8_t *buf = malloc(BLOCK);

	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	cr_assert_not(bch_copygc_needed(c), "copygc needed on an empty filesystem");
	cr_assert_eq(bch_copygc_step(c, NULL), 0, "copygc found work on an empty filesystem");
	cr_assert_eq(bch_fs_statfs(c, &sv), 0);
	uint64_t f_blocks = sv.f_blocks * sv.f_frsize / BLOCK;
	for (cap = 0; ; cap++) {
		fill_block(buf, cap, 0, seed);
		ssize_t w = bch_fs_write(c, inum, cap * BLOCK, buf, BLOCK);
		if (w == -ENOSPC)
			break;
		cr_assert_eq(w, (ssize_t)BLOCK, "filling block %lu: %zd %s", (unsigned long)cap, w,
			     c->err_msg);
	}
	c->err_msg[0] = 0;
	uint64_t blocks = cap * pct / 100;
	cr_assert_eq(bch_fs_truncate(c, inum, blocks * BLOCK), 0, "%s", c->err_msg);
	uint32_t *model = calloc(blocks, sizeof(*model));
	cr_log_info("copygc %u%%: seed %u, %lu blocks of a capacity of %lu (f_blocks %lu: %.1f%%), "
		    "%ux overwrites", pct, seed, (unsigned long)blocks, (unsigned long)cap,
		    (unsigned long)f_blocks, 100.0 * blocks / f_blocks, mult);

	uint64_t cg0 = c->copygc_sectors_written, freed0 = c->copygc_buckets_freed;
	uint64_t writes = blocks * mult;
	srandom(seed);
	for (uint64_t i = 0; i < writes; i++) {
		uint64_t b = (uint64_t)random() % blocks;
		fill_block(buf, b, ++model[b], seed);
		ssize_t w = bch_fs_write(c, inum, b * BLOCK, buf, BLOCK);
		if (w != (ssize_t)BLOCK) {
			struct bch_alloc_space s;
			bch_alloc_dev_space(c, 0, &s);
			cr_assert_fail("seed %u, %u%%: overwrite %lu of %lu (block %lu): %zd %s "
				       "(empty %lu, reserve %lu, copygc room %lu)", seed, pct,
				       (unsigned long)i, (unsigned long)writes, (unsigned long)b, w,
				       c->err_msg, (unsigned long)s.nr_empty, (unsigned long)s.reserve,
				       (unsigned long)s.copygc_room);
		}
	}
	if (pct >= 90) {
		/* low on buckets; the background takes only victims at most half live */
		struct bch_alloc_space sp;
		struct bch_alloc_candidate one;
		bch_alloc_dev_space(c, 0, &sp);
		cr_assert(sp.nr_empty + sp.nr_cached < sp.reserve + sp.nbuckets / 16,
			  "%u%% full after overwrites: not low on buckets?", pct);
		cr_assert(bch_alloc_copygc_candidates(c, 0, 1, &one), "%u%%: no victim", pct);
		cr_assert_eq(bch_copygc_needed(c), one.sectors <= sp.bucket_sectors / 2 ||
			     sp.nr_empty + sp.nr_cached < sp.reserve + sp.nbuckets / 64,
			     "%u%%: best victim %u of %u sectors live", pct, one.sectors, sp.bucket_sectors);
	}
	uint64_t user = writes * (BLOCK >> 9), moved = c->copygc_sectors_written - cg0;
	double wa = (double)(user + moved) / user;
	cr_log_info("copygc %u%%: %lu user sectors, %lu moved by copygc (%lu buckets freed): "
		    "write amplification %.2f", pct, (unsigned long)user, (unsigned long)moved,
		    (unsigned long)(c->copygc_buckets_freed - freed0), wa);
	compare_file(c, inum, blocks, model, seed);
	if (pct >= 95) {
		/*
		 * More than copygc can ever free: the write stops short (or
		 * ENOSPC) in bounded time, though each failed try leaves dead
		 * space that copygc frees again; what was there stays.
		 */
		size_t big = (size_t)(cap - blocks + 64) * BLOCK;
		uint8_t *huge = calloc(1, big);
		ssize_t w = bch_fs_write(c, inum, blocks * BLOCK, huge, big);
		cr_log_info("copygc %u%%: a %zu KiB write past the end stored %zd bytes", pct,
			    big >> 10, w);
		cr_assert(w == -ENOSPC || (w >= 0 && (size_t)w < big), "%zd", w);
		free(huge);
		c->err_msg[0] = 0;
		cr_assert_eq(bch_fs_truncate(c, inum, blocks * BLOCK), 0, "%s", c->err_msg);
		compare_file(c, inum, blocks, model, seed);
	}
	cr_assert_eq(bch_fs_close(c), 0);
	fsck_clean(1);

	c = open_fs(1, 0);
	compare_file(c, inum, blocks, model, seed);
	cr_assert_eq(bch_fs_close(c), 0);
	free(model);
	free(buf);
	test_tmpdir_remove(tmpdir);
	return wa;
}

#define MULT	(getenv("SOAK") ? 10u : 3u)

Test(copygc_data, overwrites_at_95_percent, .timeout = 600)
{
	double wa = overwrite_run(16, 95, MULT, 19);

	cr_assert_gt(wa, 1.0, "95%% full and copygc moved nothing?");
}

Test(copygc_data, write_amplification_80_90, .timeout = 600)
{
	/* a measurement (bench/copygc.sh reports it through FUSE): soak only */
	if (!getenv("SOAK"))
		cr_skip_test("write amplification at 80/90%%: SOAK=1 runs it");
	double wa80 = overwrite_run(16, 80, MULT, 80);
	double wa90 = overwrite_run(16, 90, MULT, 90);

	cr_log_info("write amplification: 80%% %.2f, 90%% %.2f", wa80, wa90);
	cr_assert_leq(wa80, wa90 + 0.01, "emptier filesystems should not cost more");
}

/* ------------------------------------------------------------ eviction */

/* The extent keys of inum (copies, NULL-terminated; free with keys_free). */
static struct bch_bkey **keys_of(struct bch_fs *c, uint64_t inum, unsigned *nr)
{
	struct bch_bkey **v = NULL;
	struct btree_iter it;
	const struct bch_bkey *k;
	int err;

	*nr = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0), POS(inum, UINT64_MAX, UINT32_MAX));
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent)
			continue;
		v = realloc(v, (*nr + 2) * sizeof(*v));
		v[(*nr)++] = bch_bkey_dup(k);
		v[*nr] = NULL;
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0, "%s", c->err_msg);
	return v;
}

static void keys_free(struct bch_bkey **v)
{
	for (unsigned i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* The cached pointers of inum's extents: live ones into *live, stale ones into *stale. */
static unsigned cached_ptrs(struct bch_fs *c, uint64_t inum, struct bch_extent_ptr *out,
			    unsigned max, unsigned *live, unsigned *stale)
{
	unsigned nr, n = 0;
	struct bch_bkey **v = keys_of(c, inum, &nr);

	*live = *stale = 0;
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		for (unsigned j = 0; j < bch_extent_nr_ptrs(v[i]); j++) {
			if (!(e->ptrs[j].flags & BCH_EXTENT_PTR_CACHED))
				continue;
			if (bch_alloc_ptr_live(c, &e->ptrs[j]))
				(*live)++;
			else
				(*stale)++;
			if (n < max)
				out[n++] = e->ptrs[j];
		}
	}
	keys_free(v);
	return n;
}

static void read_compare(struct bch_fs *c, uint64_t inum, const uint8_t *want, size_t len)
{
	uint8_t *got = malloc(len);

	cr_assert_eq(bch_fs_read(c, inum, 0, got, len), (ssize_t)len, "%s", c->err_msg);
	cr_assert(!memcmp(got, want, len), "file data differs");
	free(got);
}

Test(copygc_data, eviction_lru_reuse_and_crash, .timeout = 300)
{
	const uint32_t seed = 7;
	const size_t alen = 1 << 20;	/* 1 MiB: 16 buckets of cached copies */
	uint8_t *a = malloc(alen), *chunk = malloc(64 << 10);
	uint64_t ia, ib;
	unsigned nr, live, stale;

	cr_log_info("eviction: seed %u", seed);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "cgcevict");
	testfs_format(tmpdir, 2, 8, 64 << 10, 1, paths);
	struct bch_fs *c = open_fs(2, 0);
	for (size_t i = 0; i < alen; i += BLOCK)
		fill_block(a + i, i / BLOCK, 0, seed);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &ia), 0);
	/* on device 0 (the allocator would spread it over both) */
	c->opts.v[Opt_foreground_target] = BCH_TARGET_DEV_START + 0;
	cr_assert_eq(bch_fs_write(c, ia, 0, a, alen), (ssize_t)alen, "%s", c->err_msg);
	c->opts.v[Opt_foreground_target] = 0;

	/* cached copies of every extent of a, on the other device (the mover's promote op) */
	struct bch_bkey **v = keys_of(c, ia, &nr);
	struct bch_move_stats ms = { 0 };
	struct bch_mover *m;
	cr_assert_eq(bch_mover_init(c, &ms, &m), 0);
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		cr_assert_eq(e->ptrs[0].dev, 0, "a's data should be on device 0 first");
		struct bch_move_op op = { .nr_new = 1, .cached = true };
		cr_assert_eq(bch_mover_add(m, v[i], &op), 0, "%s", ms.last_problem);
	}
	cr_assert_eq(bch_mover_exit(m), 0, "%s", c->err_msg);
	keys_free(v);
	struct bch_alloc_space s1;
	bch_alloc_dev_space(c, 1, &s1);
	cr_assert_geq(s1.nr_cached, 8, "cached buckets on device 1: %lu", (unsigned long)s1.nr_cached);

	/*
	 * LRU: read (as the read path would) the cached copies of the first
	 * half of a; eviction then takes buckets of the second half.
	 */
	v = keys_of(c, ia, &nr);
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		for (unsigned j = 0; j < bch_extent_nr_ptrs(v[i]); j++)
			if ((e->ptrs[j].flags & BCH_EXTENT_PTR_CACHED) && v[i]->p.offset <= (alen >> 9) / 2)
				bch_alloc_bucket_read(c, &e->ptrs[j]);
	}
	cr_assert_eq(bch_alloc_evict(c, 1, 2), 2, "%s", c->err_msg);
	unsigned stale_first = 0, stale_second = 0;
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		for (unsigned j = 0; j < bch_extent_nr_ptrs(v[i]); j++)
			if ((e->ptrs[j].flags & BCH_EXTENT_PTR_CACHED) && !bch_alloc_ptr_live(c, &e->ptrs[j])) {
				if (v[i]->p.offset <= (alen >> 9) / 2)
					stale_first++;
				else
					stale_second++;
			}
	}
	keys_free(v);
	cr_assert_eq(stale_first, 0, "a recently read cached bucket was evicted");
	cr_assert_gt(stale_second, 0, "nothing of the least recently read half was evicted");
	read_compare(c, ia, a, alen);

	/*
	 * Fill the filesystem with b: once both devices are out of empty
	 * buckets, writes must evict cached buckets rather than fail.
	 */
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, &ib), 0);
	bch_alloc_dev_space(c, 1, &s1);
	uint64_t cached_before = s1.nr_cached, off = 0;
	struct bch_extent_ptr before[64];
	bool was_reused[64];
	unsigned n_before, reused = 0;
	for (unsigned n = 0; !reused; n++) {
		cr_assert_lt(n, 400, "16 MiB written and no cached bucket reused");
		for (unsigned i = 0; i < (64 << 10); i += BLOCK)
			fill_block(chunk + i, 100000 + n * 16 + i / BLOCK, 0, seed);
		ssize_t w = bch_fs_write(c, ib, off, chunk, 64 << 10);
		cr_assert_eq(w, 64 << 10, "writing b at %lu with %lu cached buckets left: %zd %s",
			     (unsigned long)off, (unsigned long)cached_before, w, c->err_msg);
		off += w;
		/* the stale ones whose bucket holds new data now: what a power cut must not revive */
		n_before = cached_ptrs(c, ia, before, 64, &live, &stale);
		for (unsigned i = 0; i < n_before; i++) {
			was_reused[i] = !bch_alloc_ptr_live(c, &before[i]) &&
					bch_alloc_bucket_type(c, &before[i], 1) != BCH_DATA_free;
			reused += was_reused[i];
		}
	}
	bch_alloc_dev_space(c, 1, &s1);
	cr_assert_lt(s1.nr_cached, cached_before);
	cr_log_info("eviction: %lu KiB of b written; cached buckets %lu -> %lu; cached pointers of a: "
		    "%u live, %u stale (%u into reused buckets)", (unsigned long)(off >> 10),
		    (unsigned long)cached_before, (unsigned long)s1.nr_cached, live, stale, reused);
	cr_assert_gt(live, 0);
	cr_assert_eq(c->data_bad_copies, 0);
	read_compare(c, ia, a, alen);	/* stale cached pointers are skipped */
	cr_assert_eq(c->data_bad_copies, 0, "a stale cached pointer was read");

	/* power cut right after the write that reused a cached bucket: nothing more is written */
	c->read_only = true;
	bch_fs_close(c);
	c = open_fs(2, 0);
	for (unsigned i = 0; i < n_before; i++)
		if (was_reused[i])
			cr_assert_not(bch_alloc_ptr_live(c, &before[i]),
				      "after the power cut, stale cached pointer %u:%lu gen %u is live again",
				      before[i].dev, (unsigned long)before[i].offset, before[i].gen);
	/* every cached pointer that counts as live holds its data */
	v = keys_of(c, ia, &nr);
	void *enc = bch_dev_alloc_buf(64 << 10);
	unsigned live2 = 0;
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		for (unsigned j = 0; j < bch_extent_nr_ptrs(v[i]); j++)
			if ((e->ptrs[j].flags & BCH_EXTENT_PTR_CACHED) && bch_alloc_ptr_live(c, &e->ptrs[j])) {
				live2++;
				cr_assert_eq(bch_extent_read_copy(c, v[i], j, enc, NULL), 0,
					     "cached pointer %u:%lu counts as live but does not hold its data",
					     e->ptrs[j].dev, (unsigned long)e->ptrs[j].offset);
			}
	}
	free(enc);
	keys_free(v);
	cr_log_info("eviction: after the power cut %u cached pointers live (all verified)", live2);
	cr_assert_gt(live2, 0, "cached copies that were not evicted should still count");
	read_compare(c, ia, a, alen);
	cr_assert_eq(c->data_bad_copies, 0, "a stale cached pointer was read");
	cr_assert_eq(bch_fs_close(c), 0);
	free(a);
	free(chunk);
	test_tmpdir_remove(tmpdir);
}

/* ------------------------------------------------------- power cuts */

static bool fsck_finds_nothing(char p[][TESTFS_PATH_MAX], unsigned nr, char *why, size_t len)
{
	char err[256];
	struct bch_fs *c = testfs_open(p, nr, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	struct bch_fsck_file_stats st;
	uint64_t nodes;
	bool ok = true;

	if (!c) {
		snprintf(why, len, "open for fsck: %.200s", err);
		return false;
	}
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	n->mode = BCH_FSCK_NO;
	if (bch_fsck_btrees(n, c, &nodes) || bch_fsck_files(n, c, false, &st)) {
		snprintf(why, len, "fsck: %.200s", n->err_msg);
		ok = false;
	}
	for (unsigned i = 0; ok && i < BCH_FSCK_PROBLEM_NR; i++)
		if (n->found[i]) {
			snprintf(why, len, "fsck -n finds %s", bch_fsck_problems[i].name);
			ok = false;
		}
	free(n);
	bch_fs_close(c);
	return ok;
}

/*
 * A copygc step under the write recorder: a power cut after any of its
 * writes and flushes (unflushed writes kept or lost at random, one torn)
 * leaves the fsynced file whole and fsck clean, whether the moves made it
 * or not.
 */
Test(copygc_data, power_cut_during_copygc, .timeout = 300)
{
	const uint32_t seed = 11;
	const uint64_t blocks = 384;
	uint8_t *buf = malloc(BLOCK);
	uint32_t *model = calloc(blocks, sizeof(*model));
	uint64_t inum;
	char err[256];

	cr_log_info("copygc power cut: seed %u", seed);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "cgccut");
	testfs_format(tmpdir, 1, 8, 64 << 10, 1, paths);
	struct bch_fs *c = open_fs(1, 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	for (uint64_t b = 0; b < blocks; b++) {
		fill_block(buf, b, 0, seed);
		cr_assert_eq(bch_fs_write(c, inum, b * BLOCK, buf, BLOCK), (ssize_t)BLOCK, "%s", c->err_msg);
	}
	/* every bucket of the first write left with a few live blocks */
	srandom(seed);
	for (uint64_t b = 0; b < blocks; b++)
		if (random() % 4) {
			fill_block(buf, b, ++model[b], seed);
			cr_assert_eq(bch_fs_write(c, inum, b * BLOCK, buf, BLOCK), (ssize_t)BLOCK, "%s",
				     c->err_msg);
		}
	cr_assert_eq(bch_fs_fsync(c), 0);

	struct iorec *rec = iorec_new(1);
	struct bch_move_stats ms = { 0 };
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	cr_assert_eq(bch_copygc_step(c, &ms), 1, "copygc freed nothing: %s", c->err_msg);
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	cr_assert_gt(ms.keys_moved, 0);
	compare_file(c, inum, blocks, model, seed);
	c->read_only = true;		/* the recording is the workload */
	bch_fs_close(c);

	char crash[1][TESTFS_PATH_MAX];
	snprintf(crash[0], sizeof(crash[0]), "%s/crash.img", tmpdir);
	unsigned states = 0;
	for (size_t at = 0; at <= events; at++) {
		bool flush = at > 0 && iorec_event(rec, at - 1)->type == IOREC_FLUSH;
		if (!flush && at % (getenv("SOAK") ? 1 : 8) && at != events)
			continue;
		for (unsigned s = 0; s < (flush ? 2 : 1); s++) {
			struct iorec_cut cut = { .at = at, .seed = at * 7 + s, .keep_pct = 50, .torn = s == 0 };
			struct iorec_plan plan;
			char why[300];
			cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
			cr_assert_eq(iorec_write_image(rec, &plan, 0, crash[0]), 0);
			struct bch_fs *r = testfs_open(crash, 1, 0, 0, err, sizeof(err));
			cr_assert(r, "seed %u cut %zu/%u: open: %s", seed, at, s, err);
			compare_file(r, inum, blocks, model, seed);
			cr_assert_eq(bch_fs_close(r), 0, "seed %u cut %zu/%u: close", seed, at, s);
			cr_assert(fsck_finds_nothing(crash, 1, why, sizeof(why)), "seed %u cut %zu/%u: %s",
				  seed, at, s, why);
			iorec_plan_free(&plan);
			states++;
		}
	}
	cr_log_info("copygc power cut: %lu keys moved, %zu events, %u crash states checked",
		    (unsigned long)ms.keys_moved, events, states);
	iorec_free(rec);
	free(model);
	free(buf);
	test_tmpdir_remove(tmpdir);
}

/*
 * Keys left covering parts of 64 KiB extents by 4 KiB overwrites: copygc
 * writes only their live sectors (the move path trims them), not the
 * extents' dead rest.
 */
Test(copygc_data, partial_extents_are_trimmed)
{
	const uint32_t seed = 3;
	const uint64_t blocks = 256;	/* 1 MiB: 16 extents of 64 KiB */
	uint8_t *big = malloc(64 << 10), *buf = malloc(BLOCK);
	uint32_t *model = calloc(blocks, sizeof(*model));
	uint64_t inum;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "cgctrim");
	testfs_format(tmpdir, 1, 8, 64 << 10, 1, paths);
	struct bch_fs *c = open_fs(1, 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	for (uint64_t b = 0; b < blocks; b += 16) {
		for (unsigned i = 0; i < 16; i++)
			fill_block(big + i * BLOCK, b + i, 0, seed);
		cr_assert_eq(bch_fs_write(c, inum, b * BLOCK, big, 64 << 10), 64 << 10, "%s", c->err_msg);
	}
	/* 3 blocks in 4 overwritten: each old extent keeps a few 4 KiB pieces */
	for (uint64_t b = 0; b < blocks; b++)
		if (b % 4 != 1) {
			fill_block(buf, b, ++model[b], seed);
			cr_assert_eq(bch_fs_write(c, inum, b * BLOCK, buf, BLOCK), (ssize_t)BLOCK, "%s",
				     c->err_msg);
		}
	struct bch_move_stats ms = { 0 };
	cr_assert_eq(bch_copygc_step(c, &ms), 1, "%s", c->err_msg);
	cr_log_info("copygc trim: %lu keys moved, %lu file sectors, %lu written",
		    (unsigned long)ms.keys_moved, (unsigned long)ms.sectors_moved,
		    (unsigned long)ms.sectors_written);
	cr_assert_geq(ms.keys_moved, blocks / 4);
	cr_assert_eq(ms.sectors_written, ms.sectors_moved, "dead sectors were moved along");
	compare_file(c, inum, blocks, model, seed);
	cr_assert_eq(bch_fs_close(c), 0);
	fsck_clean(1);
	c = open_fs(1, 0);
	compare_file(c, inum, blocks, model, seed);
	cr_assert_eq(bch_fs_close(c), 0);
	free(big);
	free(buf);
	free(model);
	test_tmpdir_remove(tmpdir);
}
