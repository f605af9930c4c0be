// SPDX-License-Identifier: GPL-2.0
/*
 * move_review_test.c - adversarial tests of the move path (move.h),
 * rebalance (rebalance.h), promote (io.c) and cached-pointer accounting
 * (alloc.h).  After each scenario the in-memory bucket counts
 * (bch_alloc_bucket_get) are compared with a recount over the extents:
 * each live pointer's bucket gets its key's share (bch_extent_disk_sectors)
 * as dirty or cached sectors.  Files are compared with a model.  Data comes
 * from fixed seeds (printed; MR_SEED=n overrides the model runs' seeds).
 *
 * Guards (pass): partial keys moved with 1 or 2 replicas, with and without
 * compression or checksums; demotes; a key changed every way between add
 * and flush; the same key twice and two movers; a bad copy skipped; promote
 * of compressed keys then overwrite then move; stale cached pointers dropped;
 * power cuts after promotes; model runs (writes, truncates, promoting reads,
 * rebalance, copygc, evictions, power cuts); rebalance cursors, unlink,
 * truncate; a full promote target; a full rebalance target staying parked.
 *
 * Tests marked "BUG:" found a defect, since fixed, and guard the fix:
 * scan_many_inodes, gen_wrap_no_checksum, no_good_copy_keeps_work_key,
 * promote_partial_keys_amplification.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "compress.h"
#include "errcode.h"
#include "copygc.h"
#include "extent_encode.h"
#include "extents.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "io.h"
#include "journal.h"
#include "move.h"
#include "opts.h"
#include "rebalance.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NDEV	3
#define FBYTES	(128u << 10)

static char tmpdir[64], paths[NDEV][128];
static struct bch_fs *c;
static unsigned ndev;
static const char *bg_target;	/* background_target label for make_fs (NULL: none) */
static const char *promote_target;	/* promote_target label for make_fs (NULL: none) */
static const char *bg_compression;	/* background_compression for make_fs (NULL: none) */
static unsigned dev_mb = 16;
static unsigned dev0_mb;		/* size of device 0 when not 0 (else dev_mb) */
static const char *fg_target = "ssd";	/* foreground_target label for make_fs */
static unsigned data_csum = 1;
static bool encrypted;		/* make_fs formats encrypted (the key stays known to the process) */
static unsigned bucket_kb[NDEV] = { 64, 64, 64 };	/* bucket size per device for make_fs */		/* data_checksum for make_fs: 0 none, 1 crc32c */

static uint64_t dev_target(unsigned dev)
{
	return BCH_TARGET_DEV_START + dev;
}

static void fs_open(bool power_cut_before)
{
	char err[256];
	char *p[NDEV] = { paths[0], paths[1], paths[2] };
	struct bch_opts o;

	if (c) {
		if (power_cut_before)
			c->read_only = true;	/* nothing more is written: a power cut */
		bch_fs_close(c);
	}
	memset(&o, 0, sizeof(o));
	cr_assert_eq(bch_fs_open(p, ndev, &o, &c, err, sizeof(err)), 0, "open: %s", err);
}

static void make_fs(unsigned nr, unsigned replicas, const char *compression)
{
	struct bch_format_dev devs[NDEV];
	struct bch_format_args args = { .have_uuid = true, .user_uuid = { 0x7e, 0x71, 3 } };
	const char *targets[BCH_OPT_NR] = { 0 };
	struct bch_opts o;
	char err[256];
	uint64_t v;

	c = NULL;
	ndev = nr;
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "movereview");
	memset(devs, 0, sizeof(devs));
	for (unsigned d = 0; d < nr; d++) {
		snprintf(paths[d], sizeof(paths[d]), "%s/d%u.img", tmpdir, d);
		devs[d].path = paths[d];
		devs[d].size = (uint64_t)(d == 0 && dev0_mb ? dev0_mb : dev_mb) << 20;
		devs[d].bucket_size = bucket_kb[d] << 10;
		devs[d].durability = 1;
		devs[d].label = d ? "hdd" : "ssd";
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 16 << 10);
	bch_opt_set(&o, Opt_data_replicas, replicas);
	bch_opt_set(&o, Opt_metadata_replicas, 1);
	bch_opt_set(&o, Opt_data_checksum, data_csum);
	if (compression) {
		cr_assert_eq(bch_opt_parse(Opt_compression, compression, &v, err, sizeof(err)), 0, "%s", err);
		bch_opt_set(&o, Opt_compression, v);
	}
	targets[Opt_foreground_target] = fg_target;
	targets[Opt_background_target] = bg_target;
	targets[Opt_promote_target] = promote_target;
	if (bg_compression) {
		cr_assert_eq(bch_opt_parse(Opt_background_compression, bg_compression, &v, err,
					   sizeof(err)), 0, "%s", err);
		bch_opt_set(&o, Opt_background_compression, v);
	}
	if (encrypted) {
		bch_opt_set(&o, Opt_encrypted, 1);
		args.passphrase = "move review";
	}
	cr_assert_eq(bch_format(devs, nr, &o, targets, &args, err, sizeof(err)), 0, "format: %s", err);
	fs_open(false);
}

/* Close, fsck -n (no data check: fsck does not know cached pointers yet), reopen. */
static void fsck_clean_reopen(void)
{
	char err[256];
	char *p[NDEV] = { paths[0], paths[1], paths[2] };
	struct bch_opts o;

	cr_assert_eq(bch_fs_close(c), 0);
	c = NULL;
	memset(&o, 0, sizeof(o));
	bch_opt_set(&o, Opt_fsck, 1);
	bch_opt_set(&o, Opt_read_only, 1);
	cr_assert_eq(bch_fs_open(p, ndev, &o, &c, err, sizeof(err)), 0, "open: %s", err);
	testfs_assert_fsck_clean(c, false);
	fs_open(false);
}

static void done(void)
{
	cr_assert_eq(bch_fs_close(c), 0);
	c = NULL;
	test_tmpdir_remove(tmpdir);
	tmpdir[0] = 0;
}

/* After a failed test too: no image directory is left behind. */
static void cleanup(void)
{
	if (c) {
		c->read_only = true;
		bch_fs_close(c);
		c = NULL;
	}
	if (tmpdir[0])
		test_tmpdir_remove(tmpdir);
	tmpdir[0] = 0;
}

static void fill(unsigned char *buf, size_t len, unsigned seed, bool compressible)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL * (seed + 1);

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = compressible ? (unsigned char)('a' + (i / 64 + seed) % 7) : (unsigned char)x;
	}
}

/* A file of FBYTES, then partial overwrites: keys with crc.offset != 0 and size < uncompressed. */
static uint64_t make_file(unsigned char *model, unsigned seed, bool compressible)
{
	uint64_t inum;
	char name[16];

	snprintf(name, sizeof(name), "f%u", seed);
	cr_log_info("move_review: file %s seed %u", name, seed);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
	fill(model, FBYTES, seed, compressible);
	cr_assert_eq(bch_fs_write(c, inum, 0, model, FBYTES), (ssize_t)FBYTES, "%s", c->err_msg);
	/* punch-like overwrites in the middle and at the front of the extent(s) */
	fill(model + 4096, 4096, seed + 100, compressible);
	cr_assert_eq(bch_fs_write(c, inum, 4096, model + 4096, 4096), 4096);
	fill(model + 40960, 8192, seed + 200, compressible);
	cr_assert_eq(bch_fs_write(c, inum, 40960, model + 40960, 8192), 8192);
	return inum;
}

static void check_file(uint64_t inum, const unsigned char *model, size_t len)
{
	unsigned char *got = malloc(len);

	cr_assert_eq(bch_fs_read(c, inum, 0, got, len), (ssize_t)len, "%s", c->err_msg);
	for (size_t i = 0; i < len; i++)
		cr_assert_eq(got[i], model[i], "inode %lu byte %zu differs", (unsigned long)inum, i);
	free(got);
}

/* The extent keys of inum (copies, NULL-terminated). */
static struct bch_bkey **keys_of(uint64_t inum, unsigned *nr)
{
	struct bch_bkey **v = calloc(1, sizeof(*v));
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

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

static unsigned nr_partial(uint64_t inum)
{
	unsigned nr, n = 0;
	struct bch_bkey **v = keys_of(inum, &nr);

	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		n += e->crc.offset || v[i]->size < e->crc.uncompressed_sectors;
	}
	keys_free(v);
	return n;
}

/*
 * Recount every bucket's dirty and cached sectors from the extents and
 * compare with the allocator's counts.  Dirty pointers must be live.
 */
static void recount_check(const char *when)
{
	uint64_t nb[NDEV];
	uint32_t *dirty[NDEV], *cached[NDEV];
	unsigned bs[NDEV];
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	for (unsigned d = 0; d < ndev; d++) {
		nb[d] = bch_alloc_nbuckets(c, d);
		bs[d] = bch_alloc_bucket_sectors(c, d);
		dirty[d] = calloc(nb[d], sizeof(uint32_t));
		cached[d] = calloc(nb[d], sizeof(uint32_t));
	}
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent)
			continue;
		const struct bch_extent *e = bkey_val(k);
		unsigned share = bch_extent_disk_sectors(k);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
			const struct bch_extent_ptr *p = &e->ptrs[i];
			bool is_cached = p->flags & BCH_EXTENT_PTR_CACHED;
			cr_assert_lt(p->dev, ndev, "%s: pointer to device %u", when, p->dev);
			uint64_t b = p->offset / bs[p->dev];
			cr_assert_lt(b, nb[p->dev]);
			if (!bch_alloc_ptr_live(c, p)) {
				cr_assert(is_cached, "%s: inode %lu offset %lu: dirty pointer %u:%lu gen %u is stale",
					  when, (unsigned long)k->p.inode, (unsigned long)k->p.offset, p->dev,
					  (unsigned long)p->offset, p->gen);
				continue;
			}
			(is_cached ? cached : dirty)[p->dev][b] += share;
		}
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0, "%s", c->err_msg);
	for (unsigned d = 0; d < ndev; d++) {
		for (uint64_t b = 0; b < nb[d]; b++) {
			struct bch_bucket_state s;
			if (!bch_alloc_bucket_get(c, d, b, &s)) {
				cr_assert(!dirty[d][b] && !cached[d][b], "%s: data in sb/journal bucket %u:%lu",
					  when, d, (unsigned long)b);
				continue;
			}
			if (s.data_type == BCH_DATA_btree) {
				cr_assert(!dirty[d][b] && !cached[d][b], "%s: data pointer into btree bucket %u:%lu",
					  when, d, (unsigned long)b);
				continue;
			}
			cr_assert_eq(s.sectors, dirty[d][b], "%s: bucket %u:%lu counts %u dirty sectors, extents %u",
				     when, d, (unsigned long)b, s.sectors, dirty[d][b]);
			cr_assert_eq(s.cached_sectors, cached[d][b],
				     "%s: bucket %u:%lu counts %u cached sectors, extents %u", when, d,
				     (unsigned long)b, s.cached_sectors, cached[d][b]);
		}
		free(dirty[d]);
		free(cached[d]);
	}
}

/* Sectors of inum's data with a dirty copy on dev. */
static uint64_t sectors_on_dev(uint64_t inum, unsigned dev)
{
	unsigned nr;
	uint64_t n = 0;
	struct bch_bkey **v = keys_of(inum, &nr);

	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		for (unsigned j = 0; j < bch_extent_nr_ptrs(v[i]); j++)
			if (e->ptrs[j].dev == dev && !(e->ptrs[j].flags & BCH_EXTENT_PTR_CACHED))
				n += v[i]->size;
	}
	keys_free(v);
	return n;
}

static bool tolerate_no_space;	/* move_all: a key without space is left, counted */

/* Move every key of inum with op (rewrite given as a function of the key). */
static void move_all(uint64_t inum, struct bch_move_op op, struct bch_move_stats *s)
{
	unsigned nr;
	struct bch_bkey **v = keys_of(inum, &nr);
	struct bch_mover *m;

	memset(s, 0, sizeof(*s));
	cr_assert_eq(bch_mover_init(c, s, &m), 0);
	for (unsigned i = 0; i < nr; i++) {
		int r = bch_mover_add(m, v[i], &op);
		if (r == -BCH_ERR_no_space && tolerate_no_space)
			continue;
		cr_assert_eq(r, 0, "key %u: %d %s / %s", i, r, s->last_problem, c->err_msg);
	}
	cr_assert_eq(bch_mover_exit(m), 0, "%s", c->err_msg);
	keys_free(v);
}

TestSuite(move_review, .timeout = 120, .fini = cleanup);

/* Partial keys, 2 replicas on 3 devices: one copy rewritten (no re-encode possible). */
static void two_replicas_rewrite_one(const char *compression, bool compressible)
{
	unsigned char *model = malloc(FBYTES);
	struct bch_move_stats s;

	make_fs(3, 2, compression);
	uint64_t inum = make_file(model, 1, compressible);
	cr_assert_gt(nr_partial(inum), 0, "no partial key to test with");
	recount_check("after writes");
	move_all(inum, (struct bch_move_op){ .rewrite = 1, .nr_new = 1 }, &s);
	cr_assert_gt(s.keys_moved, 0);
	recount_check("after moving copy 0");
	check_file(inum, model, FBYTES);
	fsck_clean_reopen();
	fs_open(false);
	recount_check("after reopen");
	check_file(inum, model, FBYTES);
	free(model);
	done();
}

Test(move_review, partial_two_replicas_rewrite_one)
{
	two_replicas_rewrite_one(NULL, false);
}

Test(move_review, partial_two_replicas_rewrite_one_lz4)
{
	two_replicas_rewrite_one("lz4", true);
}

/* Partial keys, 1 replica: moving the only copy re-encodes (dead sectors freed). */
static void one_replica_move(const char *compression, bool compressible, uint32_t demote)
{
	unsigned char *model = malloc(FBYTES);
	struct bch_move_stats s;

	make_fs(2, 1, compression);
	uint64_t inum = make_file(model, 2, compressible);
	cr_assert_gt(nr_partial(inum), 0);
	move_all(inum, (struct bch_move_op){ .rewrite = 1, .nr_new = 1, .target = dev_target(1),
					     .demote = demote }, &s);
	cr_assert_gt(s.keys_moved, 0);
	recount_check("after the move");
	cr_assert_eq(nr_partial(inum), 0, "a moved partial key was not re-encoded");
	check_file(inum, model, FBYTES);
	if (!demote)
		fsck_clean_reopen();
	fs_open(false);
	recount_check("after reopen");
	check_file(inum, model, FBYTES);
	free(model);
	done();
}

Test(move_review, partial_one_replica_move)
{
	one_replica_move(NULL, false, 0);
}

Test(move_review, partial_one_replica_move_lz4)
{
	one_replica_move("lz4", true, 0);
}

Test(move_review, partial_one_replica_demote)
{
	one_replica_move(NULL, false, 1);
}

/* No checksum, no compression: the plain encoding (crc.offset handled by the read). */
Test(move_review, partial_one_replica_move_no_checksum)
{
	data_csum = 0;
	one_replica_move(NULL, false, 0);
	data_csum = 1;
}

Test(move_review, partial_two_replicas_rewrite_one_no_checksum)
{
	data_csum = 0;
	two_replicas_rewrite_one(NULL, false);
	data_csum = 1;
}

/* Demote with 2 replicas: copy 0 becomes cached, a new dirty copy elsewhere. */
Test(move_review, demote_two_replicas)
{
	unsigned char *model = malloc(FBYTES);
	struct bch_move_stats s;

	make_fs(3, 2, NULL);
	uint64_t inum = make_file(model, 3, false);
	move_all(inum, (struct bch_move_op){ .rewrite = 1, .nr_new = 1, .demote = 1 }, &s);
	cr_assert_gt(s.keys_moved, 0);
	recount_check("after demote");
	check_file(inum, model, FBYTES);
	free(model);
	done();
}

/* A key changed in every way between bch_mover_add and bch_mover_flush. */
Test(move_review, raced_every_way)
{
	unsigned char *model[4];
	uint64_t inum[4];
	struct bch_move_stats s = { 0 };
	struct bch_mover *m;

	make_fs(2, 1, NULL);
	for (unsigned f = 0; f < 4; f++) {
		model[f] = malloc(FBYTES);
		inum[f] = make_file(model[f], 10 + f, false);
	}
	cr_assert_eq(bch_mover_init(c, &s, &m), 0);
	unsigned total = 0, below = 0;
	for (unsigned f = 0; f < 4; f++) {
		unsigned nr;
		struct bch_bkey **v = keys_of(inum[f], &nr);
		for (unsigned i = 0; i < nr; i++)
			below += f == 1 && v[i]->p.offset <= 40;	/* untouched by the truncate */
		for (unsigned i = 0; i < nr; i++)
			cr_assert_eq(bch_mover_add(m, v[i], &(struct bch_move_op){ .rewrite = 1, .nr_new = 1,
				     .target = dev_target(1) }), 0, "%s", s.last_problem);
		total += nr;
		keys_free(v);
	}
	/* overwrite everything of f0; truncate f1 to 20 KiB; punch f2; delete f3 */
	fill(model[0], FBYTES, 77, false);
	cr_assert_eq(bch_fs_write(c, inum[0], 0, model[0], FBYTES), (ssize_t)FBYTES);
	cr_assert_eq(bch_fs_truncate(c, inum[1], 20480), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_fallocate(c, inum[2], 0x01 | 0x02 /* KEEP_SIZE|PUNCH_HOLE */, 0, FBYTES), 0,
		     "%s", c->err_msg);
	memset(model[2], 0, FBYTES);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "f13"), 0, "%s", c->err_msg);
	cr_assert_eq(bch_mover_exit(m), 0, "%s", c->err_msg);
	cr_log_info("raced: %lu of %u keys raced, %lu moved", (unsigned long)s.keys_raced, total,
		    (unsigned long)s.keys_moved);
	cr_assert_eq(s.keys_raced, total - below, "a changed key was replaced");
	cr_assert_eq(s.keys_moved, below);
	recount_check("after raced moves");
	check_file(inum[0], model[0], FBYTES);
	check_file(inum[1], model[1], 20480);
	check_file(inum[2], model[2], FBYTES);
	fsck_clean_reopen();
	recount_check("after reopen");
	check_file(inum[0], model[0], FBYTES);
	check_file(inum[1], model[1], 20480);
	for (unsigned f = 0; f < 4; f++)
		free(model[f]);
	done();
}

/* The same key added twice to one mover, and one key to two movers. */
Test(move_review, same_key_twice_and_two_movers)
{
	unsigned char *model = malloc(FBYTES);
	struct bch_move_stats s1 = { 0 }, s2 = { 0 };
	struct bch_mover *m1, *m2;
	unsigned nr;

	make_fs(3, 1, NULL);
	uint64_t inum = make_file(model, 4, false);
	struct bch_bkey **v = keys_of(inum, &nr);
	struct bch_move_op op = { .rewrite = 1, .nr_new = 1, .target = dev_target(1) };
	struct bch_move_op op2 = { .rewrite = 1, .nr_new = 1, .target = dev_target(2) };
	cr_assert_eq(bch_mover_init(c, &s1, &m1), 0);
	cr_assert_eq(bch_mover_init(c, &s2, &m2), 0);
	for (unsigned i = 0; i < nr; i++) {
		cr_assert_eq(bch_mover_add(m1, v[i], &op), 0, "%s", s1.last_problem);
		cr_assert_eq(bch_mover_add(m2, v[i], &op2), 0, "%s", s2.last_problem);
		bch_mover_add(m1, v[i], &op);	/* again: must not replace twice */
	}
	cr_assert_eq(bch_mover_exit(m2), 0);
	cr_assert_eq(bch_mover_exit(m1), 0);
	cr_log_info("twice: m1 moved %lu raced %lu; m2 moved %lu raced %lu", (unsigned long)s1.keys_moved,
		    (unsigned long)s1.keys_raced, (unsigned long)s2.keys_moved, (unsigned long)s2.keys_raced);
	cr_assert_eq(s1.keys_moved + s2.keys_moved, nr);
	recount_check("after two movers");
	check_file(inum, model, FBYTES);
	fsck_clean_reopen();
	check_file(inum, model, FBYTES);
	keys_free(v);
	free(model);
	done();
}

/* 2 replicas, copy 0's bytes corrupted on disk: the move reads copy 1, counts the bad one. */
Test(move_review, bad_copy_skipped)
{
	unsigned char *model = malloc(FBYTES);
	struct bch_move_stats s;
	unsigned nr;

	make_fs(3, 2, NULL);
	uint64_t inum = make_file(model, 5, false);
	struct bch_bkey **v = keys_of(inum, &nr);
	void *junk = bch_dev_alloc_buf(4096);
	memset(junk, 0xa5, 4096);
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		cr_assert_eq(bch_dev_write(c->devs[e->ptrs[0].dev]->bdev, junk, 4096,
					   (uint64_t)e->ptrs[0].offset << 9), 0);
	}
	free(junk);
	keys_free(v);
	move_all(inum, (struct bch_move_op){ .rewrite = 2, .nr_new = 1 }, &s);
	cr_assert_eq(s.keys_moved, nr);
	cr_assert_eq(s.bad_copies, nr, "bad copies counted %lu of %u", (unsigned long)s.bad_copies, nr);
	recount_check("after the move");
	check_file(inum, model, FBYTES);
	free(model);
	done();
}

/* Promote (cached copy) of compressed partial keys, then overwrite, then move the dirty copy. */
Test(move_review, promote_compressed_overwrite_move)
{
	unsigned char *model = malloc(FBYTES);
	struct bch_move_stats s;

	make_fs(3, 1, "lz4");
	uint64_t inum = make_file(model, 6, true);
	move_all(inum, (struct bch_move_op){ .nr_new = 1, .cached = true, .target = dev_target(2),
					     .target_only = true }, &s);
	cr_assert_gt(s.keys_moved, 0);
	recount_check("after promote");
	check_file(inum, model, FBYTES);
	fill(model + 8192, 16384, 66, true);
	cr_assert_eq(bch_fs_write(c, inum, 8192, model + 8192, 16384), 16384);
	recount_check("after overwrite of promoted data");
	move_all(inum, (struct bch_move_op){ .rewrite = 1, .nr_new = 1, .target = dev_target(1) }, &s);
	recount_check("after moving the dirty copies");
	check_file(inum, model, FBYTES);
	fs_open(false);
	recount_check("after reopen");
	check_file(inum, model, FBYTES);
	free(model);
	done();
}

/* Cached copies evicted (stale), then the key moved: stale pointers dropped, counts exact. */
Test(move_review, stale_cached_then_move)
{
	unsigned char *model = malloc(FBYTES);
	struct bch_move_stats s;

	make_fs(3, 1, NULL);
	uint64_t inum = make_file(model, 7, false);
	move_all(inum, (struct bch_move_op){ .nr_new = 1, .cached = true, .target = dev_target(2),
					     .target_only = true }, &s);
	cr_assert_gt(s.keys_moved, 0);
	/* fill the rest of device 2's open bucket so the cached buckets close */
	struct bch_alloc_space sp;
	bch_alloc_dev_space(c, 2, &sp);
	int ev = bch_alloc_evict(c, 2, 64);
	cr_log_info("stale: evicted %d buckets of device 2 (%lu cached before)", ev, (unsigned long)sp.nr_cached);
	recount_check("after eviction");
	move_all(inum, (struct bch_move_op){ .rewrite = 1, .nr_new = 1, .target = dev_target(2) }, &s);
	recount_check("after moving onto the evicted device");
	check_file(inum, model, FBYTES);
	cr_assert_eq(c->data_bad_copies, 0);
	free(model);
	done();
}

/* Promote, then a power cut; after reopen every live cached pointer holds its data. */
Test(move_review, promote_power_cut)
{
	unsigned char *model = malloc(FBYTES);
	struct bch_move_stats s;
	unsigned nr;

	make_fs(3, 1, NULL);
	uint64_t inum = make_file(model, 8, false);
	cr_assert_eq(bch_fs_fsync(c), 0);
	move_all(inum, (struct bch_move_op){ .nr_new = 1, .cached = true, .target = dev_target(2),
					     .target_only = true }, &s);
	bch_alloc_evict(c, 2, 1);
	fill(model, 8192, 88, false);
	cr_assert_eq(bch_fs_write(c, inum, 0, model, 8192), 8192);
	fs_open(true);
	recount_check("after the power cut");
	struct bch_bkey **v = keys_of(inum, &nr);
	void *enc = bch_dev_alloc_buf(FBYTES), *dec = malloc(FBYTES);
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		for (unsigned j = 0; j < bch_extent_nr_ptrs(v[i]); j++)
			if ((e->ptrs[j].flags & BCH_EXTENT_PTR_CACHED) && bch_alloc_ptr_live(c, &e->ptrs[j]))
				cr_assert_eq(bch_extent_read_copy(c, v[i], j, enc,
								  bch_crc_plain(&e->crc) ? NULL : dec), 0,
					     "live cached pointer %u:%lu does not hold its data",
					     e->ptrs[j].dev, (unsigned long)e->ptrs[j].offset);
	}
	free(enc);
	free(dec);
	keys_free(v);
	cr_assert_eq(c->data_bad_copies, 0);
	free(model);
	done();
}

/*
 * BUG: a scan (bch_rebalance_schedule(c, 0), as set-fs-option does) over
 * more regular files than one transaction holds: scan_step() puts a work
 * key for each of up to SCAN_INODES_PER_STEP (512) inodes in a single
 * transaction, which on 16 KiB btree nodes exceeds bch_trans_max_u64s()
 * (about 1000 words, ~6 per work key): the commit fails with "transaction
 * too big", every step returns the error, and the scan never progresses.
 */
Test(move_review, scan_many_inodes)
{
	struct bch_move_stats s;
	struct bch_rebalance_pending pend;
	unsigned char buf[4096];
	bool parked;
	int r;

	bg_target = "hdd";
	make_fs(2, 1, NULL);
	bg_target = NULL;
	const unsigned nfiles = 300;
	for (unsigned f = 0; f < nfiles; f++) {
		char name[16];
		uint64_t inum;
		snprintf(name, sizeof(name), "s%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
		fill(buf, sizeof(buf), 1000 + f, false);
		cr_assert_eq(bch_fs_write(c, inum, 0, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	}
	unsigned steps = 0;
	memset(&s, 0, sizeof(s));
	while ((r = bch_rebalance_step(c, 1 << 20, &s, &parked)) == 1)
		cr_assert_lt(++steps, 10000, "rebalance does not end");
	cr_assert_eq(r, 0, "first pass: %s", c->err_msg);
	/* everything moved; now a filesystem option change schedules a scan */
	cr_assert_eq(bch_rebalance_schedule(c, 0), 0, "%s", c->err_msg);
	steps = 0;
	while ((r = bch_rebalance_step(c, 1 << 20, &s, &parked)) == 1)
		cr_assert_lt(++steps, 10000, "rebalance does not end");
	cr_assert_eq(r, 0, "scan of %u files: step %u: %d %s", nfiles, steps, r, c->err_msg);
	cr_assert_eq(bch_rebalance_pending(c, &pend), 0);
	cr_assert_not(pend.scan, "the scan key is left");
	cr_assert_eq(pend.inodes, 0, "%lu work keys left", (unsigned long)pend.inodes);
	done();
}

/*
 * A model run: writes, partial overwrites, truncates, reads (which promote
 * to ssd), rebalance steps with a small budget (moves to hdd, demotes,
 * recompresses) and evictions on ssd, in a random order (fixed seed).
 * After every operation the bucket counts equal the recount; at the end
 * (and after a clean reopen and a power cut) the files equal the model.
 */
#define MFILES	4
#define MBYTES	(192u << 10)

static void model_run(unsigned seed, unsigned replicas, const char *fg_comp, const char *bgc)
{
	if (getenv("MR_SEED"))
		seed = atoi(getenv("MR_SEED"));
	static unsigned char model[MFILES][MBYTES];
	unsigned char *buf = malloc(MBYTES);
	uint64_t inum[MFILES], size[MFILES] = { 0 };
	struct bch_move_stats s;
	bool parked;
	char when[64];

	cr_log_info("model_run: seed %u replicas %u compression %s background_compression %s", seed,
		    replicas, fg_comp ? fg_comp : "none", bgc ? bgc : "none");
	bg_target = "hdd";
	promote_target = "ssd";
	bg_compression = bgc;
	make_fs(3, replicas, fg_comp);
	bg_target = promote_target = bg_compression = NULL;
	memset(model, 0, sizeof(model));
	for (unsigned f = 0; f < MFILES; f++) {
		char name[16];
		snprintf(name, sizeof(name), "m%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum[f]), 0);
	}
	srandom(seed);
	for (unsigned op = 0; op < 300; op++) {
		unsigned f = random() % MFILES, k = random() % 10;
		if (k < 4) {
			uint64_t off = (random() % (MBYTES / 4096)) * 4096;
			uint64_t len = (1 + random() % 16) * 4096;
			if (off + len > MBYTES)
				len = MBYTES - off;
			fill(model[f] + off, len, seed * 1000 + op, random() % 2);
			ssize_t w = bch_fs_write(c, inum[f], off, model[f] + off, len);
			cr_assert_eq(w, (ssize_t)len, "op %u: write: %zd %s", op, w, c->err_msg);
			if (off + len > size[f])
				size[f] = off + len;
			snprintf(when, sizeof(when), "op %u (write %u)", op, f);
		} else if (k < 6) {
			if (size[f]) {
				cr_assert_eq(bch_fs_read(c, inum[f], 0, buf, size[f]), (ssize_t)size[f],
					     "op %u: %s", op, c->err_msg);
				cr_assert(!memcmp(buf, model[f], size[f]), "op %u: file %u differs", op, f);
			}
			snprintf(when, sizeof(when), "op %u (read %u)", op, f);
		} else if (k < 8) {
			int r = bch_rebalance_step(c, 8 + random() % 200, &s, &parked);
			cr_assert_geq(r, 0, "op %u: rebalance: %s", op, c->err_msg);
			snprintf(when, sizeof(when), "op %u (rebalance)", op);
		} else if (k < 9) {
			uint64_t to = (random() % (MBYTES / 4096 + 1)) * 4096;
			if (to < size[f])
				memset(model[f] + to, 0, MBYTES - to);
			cr_assert_eq(bch_fs_truncate(c, inum[f], to), 0, "op %u: %s", op, c->err_msg);
			if (to > size[f])
				memset(model[f] + size[f], 0, to - size[f]);
			size[f] = to;
			snprintf(when, sizeof(when), "op %u (truncate %u)", op, f);
		} else if (random() % 4 == 0) {
			/* a power cut right after an fsync: everything so far is durable */
			cr_assert_eq(bch_fs_fsync(c), 0, "op %u: %s", op, c->err_msg);
			fs_open(true);
			snprintf(when, sizeof(when), "op %u (power cut)", op);
		} else if (random() % 2) {
			int r = bch_copygc_step(c, NULL);
			cr_assert_geq(r, 0, "op %u: copygc: %s", op, c->err_msg);
			snprintf(when, sizeof(when), "op %u (copygc)", op);
		} else {
			int r = bch_alloc_evict(c, 0, 1 + random() % 3);
			cr_assert_geq(r, 0, "op %u: evict: %s", op, c->err_msg);
			snprintf(when, sizeof(when), "op %u (evict)", op);
		}
		recount_check(when);
	}
	cr_log_info("model_run: seed %u: %lu promoted, %lu bad copies, copygc moved %lu keys", seed,
		    (unsigned long)c->promoted, (unsigned long)c->data_bad_copies,
		    (unsigned long)c->copygc_keys_moved);
	unsigned steps = 0;
	int r;
	while ((r = bch_rebalance_step(c, 4096, &s, &parked)) == 1)
		cr_assert_lt(++steps, 10000, "rebalance does not end");
	cr_assert_eq(r, 0, "%s", c->err_msg);
	recount_check("after the last rebalance");
	for (unsigned pass = 0; pass < 3; pass++) {
		for (unsigned f = 0; f < MFILES; f++) {
			if (!size[f])
				continue;
			cr_assert_eq(bch_fs_read(c, inum[f], 0, buf, size[f]), (ssize_t)size[f], "%s", c->err_msg);
			cr_assert(!memcmp(buf, model[f], size[f]), "pass %u: file %u differs", pass, f);
		}
		cr_assert_eq(c->data_bad_copies, 0, "pass %u: bad copies read", pass);
		if (pass == 0)
			fs_open(false);
		else if (pass == 1)
			fs_open(true);
		recount_check(pass == 0 ? "after a clean reopen" : pass == 1 ? "after a power cut" : "end");
	}
	free(buf);
	done();
}

Test(move_review, model_1replica)
{
	model_run(11, 1, NULL, NULL);
}

Test(move_review, model_1replica_bgcompress)
{
	model_run(12, 1, NULL, "lz4");
}

Test(move_review, model_2replicas_compress)
{
	model_run(13, 2, "lz4", NULL);
}

Test(move_review, model_2replicas_bgcompress)
{
	model_run(14, 2, NULL, "zstd");
}

/* Encrypted: moves copy ciphertext, recompression encrypts anew, promotes, a power cut. */
Test(move_review, model_encrypted)
{
	encrypted = true;
	model_run(16, 2, NULL, "zstd");
	encrypted = false;
}

/* Small devices: ssd fills up, so promotes meet a full target, evictions and copygc run. */
Test(move_review, model_small_devices)
{
	dev_mb = 6;
	model_run(15, 1, NULL, NULL);
	dev_mb = 16;
}

Test(move_review, model_small_devices_2replicas)
{
	dev_mb = 6;
	model_run(16, 2, NULL, "lz4");
	dev_mb = 16;
}

/*
 * 8-bit generation wrap of a cached pointer (alloc.h's documented limit):
 * a cached copy of file a on device 1 (bucket X, gen g) is evicted; X's gen
 * is then set to g-1 with bch_alloc_bucket_set_gen() - the state X reaches
 * after 255 more reuses, without writing 16 MiB 255 times - and data is
 * moved through device 1 until X is reused (gen g again) for other data.
 * The stale cached pointer now looks live.  Reading a must still return a's
 * data: with a checksum the cached copy is a counted bad copy.
 * BUG (with data_checksum=none): nothing checks the copy, read_order() tries
 * live cached copies first, and the read returns the other file's data.
 */
static void gen_wrap(unsigned csum)
{
	unsigned char *a = malloc(64 << 10), *f = malloc(512 << 10), *got = malloc(64 << 10);
	struct bch_move_stats s;
	uint64_t ia, iff;
	unsigned nr;

	data_csum = csum;
	dev_mb = 6;
	make_fs(2, 1, NULL);
	data_csum = 1;
	dev_mb = 16;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &ia), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &iff), 0);
	fill(a, 64 << 10, 500, false);
	fill(f, 512 << 10, 501, false);
	cr_assert_eq(bch_fs_write(c, ia, 0, a, 64 << 10), 64 << 10);
	cr_assert_eq(bch_fs_write(c, iff, 0, f, 512 << 10), 512 << 10);
	if (!csum) {
		/* the fix: data without a checksum gets no cached copy at all */
		unsigned n;
		struct bch_bkey **kv = keys_of(ia, &n);
		struct bch_mover *mv;
		struct bch_move_op op = { .nr_new = 1, .cached = true, .target = dev_target(1),
					  .target_only = true };
		cr_assert_eq(bch_mover_init(c, &s, &mv), 0);
		cr_assert_eq(bch_mover_add(mv, kv[0], &op), -EINVAL,
			     "a cached copy of data without a checksum was made");
		cr_assert_eq(bch_mover_exit(mv), 0);
		keys_free(kv);
		free(a);
		free(f);
		free(got);
		done();
		return;
	}
	move_all(ia, (struct bch_move_op){ .nr_new = 1, .cached = true, .target = dev_target(1),
					   .target_only = true }, &s);
	cr_assert_eq(s.keys_moved, 1);
	struct bch_bkey **v = keys_of(ia, &nr);
	cr_assert_eq(nr, 1);
	const struct bch_extent *e = bkey_val(v[0]);
	struct bch_extent_ptr p = e->ptrs[1];
	cr_assert(p.flags & BCH_EXTENT_PTR_CACHED);
	keys_free(v);
	uint64_t x = p.offset / bch_alloc_bucket_sectors(c, 1);
	cr_log_info("gen_wrap: cached copy of a at 1:%lu (bucket %lu) gen %u", (unsigned long)p.offset,
		    (unsigned long)x, p.gen);

	/* f's data to device 1 and back until X holds f's data with gen p.gen */
	bool reused = false;
	int evicted = 0;
	for (unsigned round = 0; round < 200 && !reused; round++) {
		move_all(iff, (struct bch_move_op){ .rewrite = 1, .nr_new = 1, .target = dev_target(round % 2 ? 0 : 1),
						    .target_only = true }, &s);
		cr_assert_eq(bch_journal_flush(c), 0);
		if (!evicted && (evicted = bch_alloc_evict(c, 1, 8)) > 0) {
			cr_assert_eq(bch_journal_flush(c), 0);
			cr_assert_neq(bch_alloc_bucket_gen(c, 1, x), p.gen, "X was not evicted");
			/* 255 more reuses, in one step */
			bch_alloc_bucket_set_gen(c, 1, x, (uint8_t)(p.gen - 1));
		}
		if (evicted > 0 && bch_alloc_ptr_live(c, &p))
			reused = true;
	}
	cr_assert(reused, "bucket X was not reused with gen %u (evicted %d)", p.gen, evicted);
	v = keys_of(iff, &nr);
	bool f_in_x = false;
	for (unsigned i = 0; i < nr; i++) {
		e = bkey_val(v[i]);
		f_in_x |= e->ptrs[0].dev == 1 && e->ptrs[0].offset / bch_alloc_bucket_sectors(c, 1) == x;
	}
	keys_free(v);
	cr_log_info("gen_wrap: bucket %lu reused with gen %u; f's data there: %d", (unsigned long)x, p.gen, f_in_x);
	uint64_t bad = c->data_bad_copies;
	cr_assert_eq(bch_fs_read(c, ia, 0, got, 64 << 10), 64 << 10, "%s", c->err_msg);
	cr_log_info("gen_wrap: data_checksum %u: bad copies %lu", csum, (unsigned long)(c->data_bad_copies - bad));
	cr_assert(!memcmp(got, a, 64 << 10), "data_checksum %u: a read returns other data "
		  "(a stale cached pointer whose gen wrapped)", csum);
	free(a);
	free(f);
	free(got);
	done();
}

Test(move_review, gen_wrap_checksummed)
{
	gen_wrap(1);
}

Test(move_review, gen_wrap_no_checksum)
{
	gen_wrap(0);
}

/*
 * BUG (rebalance.h invariant 1): an extent rebalance cannot move because no
 * copy is good is counted and left as it is, but inode_step() then ends
 * the pass as done and work_del() deletes the inode's work key: the extent
 * still needs work (bch_extent_rebalance_reasons) and has no work key, so
 * bch_rebalance_pending() reports nothing and fsck's check of invariant 1
 * (rebalance_work_missing, when it lands) will flag it on every run.
 */
Test(move_review, no_good_copy_keeps_work_key)
{
	unsigned char *a = malloc(64 << 10);
	struct bch_move_stats s;
	struct bch_rebalance_pending pend;
	uint64_t ia;
	unsigned nr;
	bool parked;
	int r;

	bg_target = "hdd";
	make_fs(2, 1, NULL);
	bg_target = NULL;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &ia), 0);
	fill(a, 64 << 10, 600, false);
	cr_assert_eq(bch_fs_write(c, ia, 0, a, 64 << 10), 64 << 10);
	struct bch_bkey **v = keys_of(ia, &nr);
	void *junk = bch_dev_alloc_buf(4096);
	memset(junk, 0x5a, 4096);
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		cr_assert_eq(e->ptrs[0].dev, 0);
		cr_assert_eq(bch_dev_write(c->devs[0]->bdev, junk, 4096, (uint64_t)e->ptrs[0].offset << 9), 0);
	}
	free(junk);
	keys_free(v);
	memset(&s, 0, sizeof(s));
	unsigned steps = 0;
	while ((r = bch_rebalance_step(c, 4096, &s, &parked)) == 1)
		cr_assert_lt(++steps, 1000, "rebalance does not end");
	cr_assert_eq(r, 0, "%s", c->err_msg);
	cr_assert_eq(s.keys_no_good_copy, nr, "%lu of %u", (unsigned long)s.keys_no_good_copy, nr);
	cr_log_info("no_good_copy: %s", s.last_problem);
	recount_check("after the failed moves");
	cr_assert_eq(bch_rebalance_pending(c, &pend), 0);
	cr_assert_gt(pend.sectors_target, 0,
		     "extents still off their background target, but no work key records them "
		     "(%lu work keys)", (unsigned long)pend.inodes);
	free(a);
	done();
}

/*
 * BUG (space amplification): promote of keys that cover only part of their
 * encoded extent copies the whole encoded extent for each key (move.c
 * re-encodes a partial key only when dirty copies are rewritten, never for
 * op->cached).  A 128 KiB extent left as 16 keys of 4 KiB by overwrites of
 * every other block is written 16 times over to the promote target: 16x
 * the data read, while the buckets count only each key's share.
 */
Test(move_review, promote_partial_keys_amplification)
{
	unsigned char *a = malloc(128 << 10), *got = malloc(128 << 10);
	uint64_t ia;
	unsigned nr;

	fg_target = "hdd";
	promote_target = "ssd";
	make_fs(2, 1, NULL);
	fg_target = "ssd";
	promote_target = NULL;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &ia), 0);
	fill(a, 128 << 10, 700, false);
	cr_assert_eq(bch_fs_write(c, ia, 0, a, 128 << 10), 128 << 10);
	for (unsigned b = 1; b < 32; b += 2) {
		fill(a + b * 4096, 4096, 701 + b, false);
		cr_assert_eq(bch_fs_write(c, ia, b * 4096, a + b * 4096, 4096), 4096);
	}
	struct bch_bkey **v = keys_of(ia, &nr);
	keys_free(v);
	struct bch_dev_usage u0;
	bch_dev_usage_get(c, 0, &u0);
	uint64_t promoted = c->promoted;
	struct bch_alloc_space before, after;
	bch_alloc_dev_space(c, 0, &before);
	cr_assert_eq(bch_fs_read(c, ia, 0, got, 128 << 10), 128 << 10, "%s", c->err_msg);
	cr_assert(!memcmp(got, a, 128 << 10));
	bch_alloc_dev_space(c, 0, &after);
	recount_check("after promote");
	uint64_t used = (before.nr_empty - after.nr_empty) * before.bucket_sectors;
	cr_log_info("promote: %u keys, %lu promoted; ssd empty buckets %lu -> %lu (%lu sectors taken "
		    "for 256 sectors of data)", nr, (unsigned long)(c->promoted - promoted),
		    (unsigned long)before.nr_empty, (unsigned long)after.nr_empty, (unsigned long)used);
	cr_assert_gt(c->promoted - promoted, 0, "nothing promoted");
	cr_assert_leq(used, 2 * 256 + before.bucket_sectors,
		      "promoting 128 KiB of data took %lu sectors of the promote target", (unsigned long)used);
	free(a);
	free(got);
	done();
}

/*
 * Rebalance work keys: a pass over an inode with a small budget stops
 * mid-inode; a write behind its cursor must still be moved; a file unlinked
 * or truncated while it has a work key leaves no work and no error.
 */
Test(move_review, rebalance_cursor_unlink_truncate)
{
	unsigned char *a = malloc(FBYTES * 2), *b = malloc(FBYTES), *d = malloc(FBYTES);
	struct bch_move_stats s;
	struct bch_rebalance_pending pend;
	uint64_t ia, ib, id;
	bool parked;
	int r;

	bg_target = "hdd";
	make_fs(2, 1, NULL);
	bg_target = NULL;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &ia), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, &ib), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "d", S_IFREG | 0644, 0, 0, 0, &id), 0);
	/* a in 4 KiB writes: many small extents */
	fill(a, FBYTES * 2, 800, false);
	for (unsigned off = 0; off < FBYTES * 2; off += 4096)
		cr_assert_eq(bch_fs_write(c, ia, off, a + off, 4096), 4096);
	fill(b, FBYTES, 801, false);
	cr_assert_eq(bch_fs_write(c, ib, 0, b, FBYTES), (ssize_t)FBYTES);
	fill(d, FBYTES, 802, false);
	cr_assert_eq(bch_fs_write(c, id, 0, d, FBYTES), (ssize_t)FBYTES);
	/* one small step: a is worked part way */
	memset(&s, 0, sizeof(s));
	cr_assert_eq(bch_rebalance_step(c, 64, &s, &parked), 1, "%s", c->err_msg);
	cr_assert_gt(s.keys_moved, 0);
	cr_assert_gt(sectors_on_dev(ia, 0), 0, "the budget did not stop the pass mid-inode");
	/* behind a's cursor: new data on ssd */
	fill(a, 8192, 803, false);
	cr_assert_eq(bch_fs_write(c, ia, 0, a, 8192), 8192);
	/* b unlinked and d truncated while they have work keys */
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "b"), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_truncate(c, id, 4096), 0, "%s", c->err_msg);
	unsigned steps = 0;
	while ((r = bch_rebalance_step(c, 64, &s, &parked)) == 1)
		cr_assert_lt(++steps, 10000, "rebalance does not end");
	cr_assert_eq(r, 0, "%s", c->err_msg);
	cr_assert_not(parked);
	cr_assert_eq(sectors_on_dev(ia, 0), 0, "a's data left on ssd (written behind the cursor?)");
	cr_assert_eq(sectors_on_dev(id, 0), 0);
	cr_assert_eq(bch_rebalance_pending(c, &pend), 0);
	cr_assert_eq(pend.inodes, 0);
	recount_check("after rebalance");
	check_file(ia, a, FBYTES * 2);
	check_file(id, d, 4096);
	free(a);
	free(b);
	free(d);
	done();
}

/*
 * Devices with different bucket sizes: ssd 256 KiB buckets, hdd 64 KiB.
 * A 128 KiB write on ssd is one 128 KiB extent (encoded_extent_max); moving
 * it to hdd needs 256 sectors in one bucket of 128: the mover cannot split
 * an extent.  Rebalance must still move the data (or at least not wait for
 * space that can never appear).
 */
Test(move_review, rebalance_extent_larger_than_target_bucket)
{
	unsigned char *a = malloc(FBYTES);
	struct bch_move_stats s;
	struct bch_rebalance_pending pend;
	uint64_t ia;
	bool parked;
	int r;

	bg_target = "hdd";
	bucket_kb[0] = 256;
	dev_mb = 32;
	make_fs(2, 1, NULL);
	bucket_kb[0] = 64;
	dev_mb = 16;
	bg_target = NULL;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &ia), 0);
	fill(a, FBYTES, 900, false);
	cr_assert_eq(bch_fs_write(c, ia, 0, a, FBYTES), (ssize_t)FBYTES);
	unsigned nr;
	struct bch_bkey **v = keys_of(ia, &nr);
	unsigned biggest = 0;
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_extent *e = bkey_val(v[i]);
		if (e->crc.compressed_sectors > biggest)
			biggest = e->crc.compressed_sectors;
	}
	keys_free(v);
	cr_log_info("big extent: %u keys, the largest %u sectors; hdd buckets %u sectors", nr, biggest,
		    bch_alloc_bucket_sectors(c, 1));
	memset(&s, 0, sizeof(s));
	unsigned steps = 0;
	while ((r = bch_rebalance_step(c, 4096, &s, &parked)) == 1)
		cr_assert_lt(++steps, 1000, "rebalance does not end");
	cr_assert_eq(r, 0, "%s", c->err_msg);
	cr_assert_eq(bch_rebalance_pending(c, &pend), 0);
	cr_log_info("big extent: moved %lu, no space %lu, parked %d, waiting %lu sectors; %s",
		    (unsigned long)s.keys_moved, (unsigned long)s.keys_no_space, parked,
		    (unsigned long)pend.sectors_waiting, s.last_problem);
	cr_assert_eq(sectors_on_dev(ia, 0), 0, "%lu sectors left on ssd with hdd nearly empty (parked %d)",
		     (unsigned long)sectors_on_dev(ia, 0), parked);
	check_file(ia, a, FBYTES);
	free(a);
	done();
}

/*
 * Promote when the promote target is full: of dirty data (nothing to
 * evict: the read still succeeds, nothing is counted twice or leaked), then
 * of cached data only (the read evicts the least recently read; a later
 * read promotes).
 */
Test(move_review, promote_target_full)
{
	unsigned char *a = malloc(FBYTES), *got = malloc(FBYTES), *blk = malloc(64 << 10);
	uint64_t ia, ifill;
	ssize_t w;

	fg_target = "hdd";
	promote_target = "ssd";
	dev0_mb = 6;
	make_fs(2, 1, NULL);
	fg_target = "ssd";
	promote_target = NULL;
	dev0_mb = 0;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &ia), 0);
	fill(a, FBYTES, 1100, false);
	cr_assert_eq(bch_fs_write(c, ia, 0, a, FBYTES), (ssize_t)FBYTES);
	/* fill ssd with dirty data: a file whose data is moved there */
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "fill", S_IFREG | 0644, 0, 0, 0, &ifill), 0);
	uint64_t off = 0;
	struct bch_move_stats s;
	for (unsigned n = 0; n < 120; n++) {
		fill(blk, 64 << 10, 1200 + n, false);
		w = bch_fs_write(c, ifill, off, blk, 64 << 10);
		cr_assert_eq(w, 64 << 10, "%s", c->err_msg);
		off += w;
	}
	tolerate_no_space = true;
	move_all(ifill, (struct bch_move_op){ .rewrite = 1, .nr_new = 1, .target = dev_target(0),
					      .target_only = true }, &s);
	tolerate_no_space = false;
	cr_log_info("promote_full: %lu keys moved to ssd, %lu found no space", (unsigned long)s.keys_moved,
		    (unsigned long)s.keys_no_space);
	cr_assert_gt(s.keys_no_space, 0, "ssd did not fill up");
	recount_check("ssd full");
	uint64_t promoted = c->promoted;
	for (unsigned i = 0; i < 3; i++) {
		cr_assert_eq(bch_fs_read(c, ia, 0, got, FBYTES), (ssize_t)FBYTES, "%s", c->err_msg);
		cr_assert(!memcmp(got, a, FBYTES));
		recount_check("read with ssd full of dirty data");
	}
	cr_assert_eq(c->promoted, promoted, "promoted onto a full device");
	/* free ssd: fill's data goes back to hdd; then read a to promote it */
	tolerate_no_space = true;	/* the keys still on hdd */
	move_all(ifill, (struct bch_move_op){ .rewrite = 1, .nr_new = 1, .target = dev_target(1),
					      .target_only = true }, &s);
	tolerate_no_space = false;
	cr_assert_eq(bch_journal_flush(c), 0);
	cr_assert_eq(bch_fs_read(c, ia, 0, got, FBYTES), (ssize_t)FBYTES, "%s", c->err_msg);
	cr_assert(!memcmp(got, a, FBYTES));
	cr_assert_gt(c->promoted, promoted, "nothing promoted once ssd had room");
	recount_check("after promote");
	free(a);
	free(got);
	free(blk);
	done();
}

/*
 * Target full: rebalance parks and stays parked across many steps (nothing
 * read, no step reports work), including steps after foreground writes to
 * another file and after deletes on the source device; once space is freed
 * on the target it finishes.
 */
Test(move_review, full_target_stays_parked)
{
	unsigned char *blk = malloc(64 << 10);
	struct bch_move_stats s;
	uint64_t ia, ib;
	bool parked;
	int r;

	fg_target = "hdd";
	bg_target = "ssd";
	dev0_mb = 6;
	make_fs(2, 1, NULL);
	fg_target = "ssd";
	bg_target = NULL;
	dev0_mb = 0;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &ia), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, &ib), 0);
	for (unsigned n = 0; n < 120; n++) {
		fill(blk, 64 << 10, 1300 + n, false);
		cr_assert_eq(bch_fs_write(c, ia, (uint64_t)n << 16, blk, 64 << 10), 64 << 10, "%s", c->err_msg);
	}
	unsigned steps = 0;
	memset(&s, 0, sizeof(s));
	while ((r = bch_rebalance_step(c, 1 << 20, &s, &parked)) == 1)
		cr_assert_lt(++steps, 1000, "rebalance does not end");
	cr_assert_eq(r, 0, "%s", c->err_msg);
	/*
	 * The step that finds the target full returns 0 with *parked false
	 * (the waiting inode was worked, not skipped), although rebalance.h
	 * says *parked is true whenever work waits; the next step parks.
	 */
	if (!parked)
		cr_assert_eq(bch_rebalance_step(c, 1 << 20, &s, &parked), 0, "%s", c->err_msg);
	cr_assert(parked, "ssd full: rebalance should park (moved %lu, no space %lu)",
		  (unsigned long)s.keys_moved, (unsigned long)s.keys_no_space);
	recount_check("parked");
	unsigned busy = 0;
	uint64_t read = 0;
	for (unsigned i = 0; i < 60; i++) {
		if (i % 10 == 5) {	/* unrelated foreground activity on hdd */
			fill(blk, 4096, 1500 + i, false);
			cr_assert_eq(bch_fs_write(c, ib, (uint64_t)i << 12, blk, 4096), 4096);
		}
		memset(&s, 0, sizeof(s));
		r = bch_rebalance_step(c, 1 << 20, &s, &parked);
		cr_assert_geq(r, 0, "%s", c->err_msg);
		busy += r == 1 || !parked;
		/* an extent the target check leaves for want of space is seen, not read */
		read += s.sectors_read + s.keys_seen - s.keys_no_space;
	}
	cr_log_info("parked: of 60 steps %u not parked; %lu sectors+keys handled meanwhile", busy,
		    (unsigned long)read);
	cr_assert_eq(busy, 0, "rebalance did not stay parked on a full target");
	cr_assert_eq(read, 0, "rebalance read data while the target stayed full");
	free(blk);
	done();
}
