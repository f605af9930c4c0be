// SPDX-License-Identifier: GPL-2.0
/*
 * ec_inplace_test.c - stripes built in place (issue 34; ec.c "in place",
 * alloc.h "stripe candidate stream").  Six devices, erasure_code and
 * data_replicas=3: stripes of 4 data and 2 parity blocks.
 *   candidate_stream  an erasure-coded file's first copies lie in buckets
 *                     that hold nothing else (no other copy, no file with
 *                     erasure_code off), spread over every member.
 *   in_place          a step with ec_build_deferred set (the daemon while
 *                     writes stream) builds nothing; then the background
 *                     step builds full stripes (4 blocks of
 *                     a bucket) only; data rebalance's (finish) the rest.
 *                     Every extent of the file then has one striped
 *                     pointer exactly where its first copy was, each data
 *                     block starts a bucket, the build wrote the parity and
 *                     the zeros past a shorter block's last extent and
 *                     nothing else; the file with erasure_code off is
 *                     untouched; both read back, after a reopen too, and
 *                     fsck (with data: buckets recounted) is clean.
 *   crash_cuts        writes, background steps, fsyncs and a finishing
 *                     step under the write recorder, cut at every write and
 *                     flush (unflushed writes kept at random, one torn):
 *                     every crash image opens, shows the files as after
 *                     some operation at or after the last fsync, and
 *                     passes fsck -n.
 * Seed fixed (printed).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "btree.h"
#include "ec.h"
#include "extents.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "move.h"
#include "rebalance.h"
#include "tests/lib/crashcut.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NDEV		6
#define BUCKET		128			/* sectors: 64 KiB */
#define EC_SIZE		((1u << 20) + (20u << 10))
#define PLAIN_SIZE	(256u << 10)

static char tmpdir[64], paths[NDEV][128], crash[NDEV][128];

static uint64_t rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void fill(unsigned char *p, size_t n, uint64_t *seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)rng(seed);
}

static struct bch_fs *format_open(unsigned size_mb)
{
	const struct testfs_ec geom = { .nr = NDEV, .size_mb = size_mb, .bucket_bytes = BUCKET << 9,
					.data_replicas = 3, .uuid = { 0xec, 0x34, 0x1 } };

	return testfs_ec_up(tmpdir, &geom, paths, crash);
}

/* Write n bytes of buf to inum in chunks of chunk bytes (appends merge into extents). */
static void write_chunks(struct bch_fs *c, uint64_t inum, const unsigned char *buf, size_t n,
			 size_t chunk)
{
	for (size_t off = 0; off < n; off += chunk) {
		size_t len = n - off < chunk ? n - off : chunk;
		cr_assert_eq(bch_fs_write(c, inum, off, buf + off, len), (ssize_t)len, "%s", c->err_msg);
	}
}

static void expect_file(struct bch_fs *c, uint64_t inum, const unsigned char *want, size_t n)
{
	unsigned char *got = malloc(n);

	cr_assert(got);
	cr_assert_eq(bch_fs_read(c, inum, 0, got, n), (ssize_t)n, "%s", c->err_msg);
	cr_assert(!memcmp(got, want, n), "inode %llu reads back other data", (unsigned long long)inum);
	free(got);
}

/* The extents of inum, as they are (copies, malloc'd; *nr of them). */
static struct bch_bkey **extents_of(struct bch_fs *c, uint64_t inum, size_t *nr)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	struct bch_bkey **v = NULL;
	int err = 0;

	*nr = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0), POS(inum, UINT64_MAX, UINT32_MAX));
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent)
			continue;
		v = realloc(v, (*nr + 1) * sizeof(*v));
		cr_assert(v);
		v[(*nr)++] = bch_bkey_dup(k);
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
	return v;
}

static void free_keys(struct bch_bkey **v, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		free(v[i]);
	free(v);
}

static uint64_t bucket_id(const struct bch_extent_ptr *p)
{
	return ((uint64_t)p->dev << 48) | (p->offset / BUCKET);
}

static uint64_t make_file(struct bch_fs *c, const char *name, bool ec, unsigned char *data,
			  size_t n, uint64_t *seed, size_t chunk)
{
	uint64_t inum;

	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
	if (!ec)
		cr_assert_eq(bch_fs_set_inode_opt(c, inum, "erasure_code", "0"), 0, "%s", c->err_msg);
	fill(data, n, seed);
	write_chunks(c, inum, data, n, chunk);
	return inum;
}

TestSuite(ec_inplace, .timeout = 900);

Test(ec_inplace, candidate_stream_and_in_place)
{
	static unsigned char ecd[EC_SIZE], plain[PLAIN_SIZE];
	uint64_t seed = 0xec34bdULL;
	char err[256];

	fprintf(stderr, "ec_inplace: seed %#llx\n", (unsigned long long)seed);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "ecinplace");
	struct bch_fs *c = format_open(16);
	/* interleaved, so the two files' copies are handed out side by side */
	uint64_t fe = make_file(c, "ec", true, ecd, 256 << 10, &seed, 16 << 10);
	uint64_t fp = make_file(c, "plain", false, plain, PLAIN_SIZE, &seed, 16 << 10);
	fill(ecd + (256 << 10), EC_SIZE - (256 << 10), &seed);
	for (size_t off = 256 << 10; off < EC_SIZE; off += 16 << 10) {
		size_t len = EC_SIZE - off < (16u << 10) ? EC_SIZE - off : 16u << 10;
		cr_assert_eq(bch_fs_write(c, fe, off, ecd + off, len), (ssize_t)len);
	}
	cr_assert_eq(bch_fs_fsync(c), 0);

	/* candidate_stream: first copies alone in their buckets, on every member */
	size_t ne, np;
	struct bch_bkey **ek = extents_of(c, fe, &ne), **pk = extents_of(c, fp, &np);
	uint64_t firsts[64];
	unsigned nf = 0, on_dev[NDEV] = { 0 };
	cr_assert_gt(ne, 8);
	for (size_t i = 0; i < ne; i++) {
		const struct bch_extent *e = bkey_val(ek[i]);
		cr_assert_eq(bch_extent_nr_ptrs(ek[i]), 3);
		unsigned j;
		for (j = 0; j < nf && firsts[j] != bucket_id(&e->ptrs[0]); j++)
			;
		if (j == nf) {
			cr_assert_lt(nf, 64);
			firsts[nf++] = bucket_id(&e->ptrs[0]);
			on_dev[e->ptrs[0].dev]++;
		}
	}
	for (size_t i = 0; i < ne + np; i++) {
		struct bch_bkey *k = i < ne ? ek[i] : pk[i - ne];
		const struct bch_extent *e = bkey_val(k);
		for (unsigned p = i < ne ? 1 : 0; p < bch_extent_nr_ptrs(k); p++)
			for (unsigned j = 0; j < nf; j++)
				cr_assert_neq(bucket_id(&e->ptrs[p]), firsts[j],
					      "%s extent %zu copy %u in a candidate bucket",
					      i < ne ? "ec" : "plain", i, p);
	}
	for (unsigned d = 0; d < NDEV; d++)
		cr_assert_gt(on_dev[d], 0, "no candidate bucket on member %u", d);

	/* deferred (the FUSE daemon while writes stream in): the step builds no stripe */
	struct bch_move_stats s = { 0 };
	bool parked;
	c->ec_build_deferred = true;
	cr_assert_geq(bch_rebalance_step(c, UINT64_MAX >> 1, &s, &parked), 0, "%s", c->err_msg);
	c->ec_build_deferred = false;
	cr_assert_eq(testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe), 0,
		     "a deferred step built a stripe");
	cr_assert_eq(s.sectors_written, 0);

	/* in_place: the background step builds full stripes only */
	cr_assert_geq(bch_rebalance_step(c, UINT64_MAX >> 1, &s, &parked), 0, "%s", c->err_msg);
	unsigned bg = testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe);
	cr_assert_gt(bg, 0, "the background built no stripe");
	struct btree_iter it;
	const struct bch_bkey *k;
	int ierr = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &ierr))) {
		const struct bch_stripe *sv = bch_stripe_val(k);
		cr_assert_eq(bch_stripe_data_blocks(sv), 4, "background stripe of %u blocks",
			     bch_stripe_data_blocks(sv));
		cr_assert_eq(sv->block_sectors, BUCKET);
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(ierr, 0);
	cr_assert_eq(s.sectors_written, (uint64_t)bg * 2 * BUCKET, "background wrote %llu sectors",
		     (unsigned long long)s.sectors_written);

	/* data rebalance: the rest, in narrower or shorter stripes */
	struct bch_move_stats f = { 0 };
	int r;
	while ((r = bch_ec_step(c, UINT64_MAX >> 1, true, &f)) == 1)
		;
	cr_assert_eq(r, 0, "%s", c->err_msg);

	size_t ne2, np2;
	struct bch_bkey **ek2 = extents_of(c, fe, &ne2), **pk2 = extents_of(c, fp, &np2);
	cr_assert_eq(ne2, ne);
	cr_assert_eq(np2, np);
	/*
	 * Every extent striped; in place (where its first copy was) unless its
	 * bucket was left over alone at the end (a stripe needs two data
	 * blocks on distinct members): then the other path rewrote it
	 */
	uint64_t sectors_in_place = 0, sectors_all = 0;
	for (size_t i = 0; i < ne; i++) {
		const struct bch_extent *was = bkey_val(ek[i]), *now = bkey_val(ek2[i]);
		cr_assert_eq(bch_extent_nr_ptrs(ek2[i]), 1, "ec extent %zu: %u pointers", i,
			     bch_extent_nr_ptrs(ek2[i]));
		cr_assert(now->ptrs[0].flags & BCH_EXTENT_PTR_STRIPED);
		sectors_all += ek[i]->size;
		if (now->ptrs[0].dev == was->ptrs[0].dev && now->ptrs[0].offset == was->ptrs[0].offset &&
		    now->ptrs[0].gen == was->ptrs[0].gen)
			sectors_in_place += ek[i]->size;
	}
	cr_assert_geq(sectors_in_place * 10, sectors_all * 9, "%llu of %llu sectors striped in place",
		      (unsigned long long)sectors_in_place, (unsigned long long)sectors_all);
	for (size_t i = 0; i < np; i++)
		cr_assert(bkey_bytes(pk[i]) == bkey_bytes(pk2[i]) &&
			  !memcmp(pk[i], pk2[i], bkey_bytes(pk[i])), "plain extent %zu changed", i);

	/*
	 * What both steps wrote: for a stripe in place (its data blocks are
	 * candidate buckets, from their start) the parity and the zeros past
	 * each shorter block's last extent; for one the other path built,
	 * every block
	 */
	uint64_t want = 0;
	unsigned other = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &ierr))) {
		const struct bch_stripe *sv = bch_stripe_val(k);
		bool in_place = true;
		for (unsigned b = 0; b < bch_stripe_data_blocks(sv); b++) {
			unsigned j;
			for (j = 0; j < nf && firsts[j] != bucket_id(&sv->blocks[b].ptr); j++)
				;
			in_place &= j < nf && sv->blocks[b].ptr.offset % BUCKET == 0;
		}
		if (!in_place) {
			other++;
			want += (uint64_t)sv->nr_blocks * sv->block_sectors;
			continue;
		}
		want += (uint64_t)sv->nr_parity * sv->block_sectors;
		for (unsigned b = 0; b < bch_stripe_data_blocks(sv); b++) {
			uint64_t end = 0;
			for (size_t i = 0; i < ne; i++) {
				const struct bch_extent *e = bkey_val(ek2[i]);
				if (e->ptrs[0].stripe == k->p.offset && e->ptrs[0].stripe_block == b &&
				    e->ptrs[0].offset - sv->blocks[b].ptr.offset + e->crc.compressed_sectors > end)
					end = e->ptrs[0].offset - sv->blocks[b].ptr.offset +
					      e->crc.compressed_sectors;
			}
			cr_assert_gt(end, 0, "stripe %llu block %u holds no extent",
				     (unsigned long long)k->p.offset, b);
			want += sv->block_sectors - end;
		}
	}
	bch_btree_iter_exit(&it);
	cr_assert_leq(other, 1, "%u stripes not in place", other);
	cr_assert_eq(s.sectors_written + f.sectors_written, want, "wrote %llu sectors, expected %llu",
		     (unsigned long long)(s.sectors_written + f.sectors_written), (unsigned long long)want);
	cr_assert_lt(want, (uint64_t)EC_SIZE >> 9, "no less written than the data itself");

	expect_file(c, fe, ecd, EC_SIZE);
	expect_file(c, fp, plain, PLAIN_SIZE);
	free_keys(ek, ne);
	free_keys(pk, np);
	free_keys(ek2, ne2);
	free_keys(pk2, np2);
	cr_assert_eq(bch_fs_close(c), 0);

	c = testfs_open(paths, NDEV, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	expect_file(c, fe, ecd, EC_SIZE);
	expect_file(c, fp, plain, PLAIN_SIZE);
	cr_assert_eq(bch_fs_close(c), 0);
	char msg[256];
	const char *bad = testfs_fsck_problem(paths, NDEV, true, msg, sizeof(msg));
	cr_assert(!bad, "fsck: %s", bad);
	test_tmpdir_remove(tmpdir);
}

/* ---------------------------------------------------------- crash cuts */

#define NFILES		3
#define FSIZE		(384u << 10)
#define NOPS		7

static unsigned char model[NFILES][FSIZE];
static uint64_t states[NOPS + 1][NFILES];

static void snapshot(unsigned op)
{
	testfs_model_digest(&model[0][0], NFILES, FSIZE, &states[0][0], op);
}

static const char *check(struct bch_fs *c, unsigned from, unsigned to, char *msg, size_t len)
{
	return testfs_model_check(c, NFILES, FSIZE, &states[0][0], from, to, msg, len);
}

Test(ec_inplace, crash_cuts)
{
	uint64_t seed = 0xec34c0ULL;
	size_t op_event[NOPS + 1] = { 0 };
	unsigned synced_op[NOPS + 1] = { 0 }, last_sync = 0;
	uint64_t inum[NFILES], written = 0, moved = 0;
	static unsigned char buf[FSIZE];

	fprintf(stderr, "ec_inplace crash: seed %#llx, %u ops\n", (unsigned long long)seed, NOPS);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "ecinplcrash");
	struct bch_fs *c = format_open(6);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];

		snprintf(name, sizeof(name), "f%u", f);
		inum[f] = make_file(c, name, true, model[f], FSIZE, &seed, 64 << 10);
	}
	cr_assert_eq(bch_fs_fsync(c), 0);
	snapshot(0);

	struct iorec *rec = iorec_new(NDEV);
	for (unsigned d = 0; d < NDEV; d++)
		cr_assert_eq(iorec_attach(rec, d, c->devs[d]->bdev), 0);
	for (unsigned op = 1; op <= NOPS; op++) {
		struct bch_move_stats s = { 0 };
		bool parked;

		if (op == NOPS) {	/* data rebalance's end: the partly filled buckets too */
			int r;
			while ((r = bch_ec_step(c, UINT64_MAX >> 1, true, &s)) == 1)
				;
			cr_assert_eq(r, 0, "op %u: %s", op, c->err_msg);
		} else if (op % 2) {
			cr_assert_geq(bch_rebalance_step(c, 1024, &s, &parked), 0, "op %u: %s", op,
				      c->err_msg);
		} else {
			unsigned f = rng(&seed) % NFILES;
			size_t off = rng(&seed) % (FSIZE - 8192), len = 1 + rng(&seed) % 8192;
			fill(buf, len, &seed);
			cr_assert_eq(bch_fs_write(c, inum[f], off, buf, len), (ssize_t)len);
			memcpy(model[f] + off, buf, len);
		}
		written += s.sectors_written;
		moved += s.sectors_moved;
		snapshot(op);
		if (rng(&seed) % 2 == 0) {
			cr_assert_eq(bch_fs_fsync(c), 0);
			last_sync = op;
		}
		synced_op[op] = last_sync;
		op_event[op] = iorec_nr_events(rec);
	}
	for (unsigned d = 0; d < NDEV; d++)
		iorec_detach(rec, d);
	/* in place: parity (and tails) written, less than the data striped */
	cr_assert_gt(moved, 0, "nothing was striped");
	cr_assert_lt(written, moved, "wrote %llu sectors to stripe %llu: not in place",
		     (unsigned long long)written, (unsigned long long)moved);
	cr_assert_eq(bch_fs_close(c), 0);

	size_t nev = iorec_nr_events(rec);
	fprintf(stderr, "ec_inplace crash: %zu events, %llu sectors striped, %llu written\n", nev,
		(unsigned long long)moved, (unsigned long long)written);
	const struct crash_cuts cuts = { .rec = rec, .ndev = NDEV, .crash = crash, .nops = NOPS,
					 .op_event = op_event, .synced_op = synced_op, .seed = seed,
					 .seeds = 1, .check = check, .name = "ec_inplace" };
	crash_cuts_run(&cuts);
	iorec_free(rec);
	test_tmpdir_remove(tmpdir);
}
