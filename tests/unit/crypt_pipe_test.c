// SPDX-License-Identifier: GPL-2.0
/*
 * crypt_pipe_test.c - the planned encrypted write as a pipeline (io.c:
 * bch_data_write_plan_run(), pool_run_ordered()): each unit's cipher and
 * MAC on the pool, its device write on the calling thread as soon as that
 * unit is done.  Writes through the planned path (bch_fs_write_begin(),
 * run, end, as the FUSE daemon does them) of 1 MiB (a whole chunk: past the
 * pool's threshold, more units than a group), odd sizes and small ones,
 * with 0, 1 and 3 workers, the cipher by libcrypto and by libsodium: every
 * extent on disk is the ciphertext its MAC covers (the single AEAD call
 * verifies and opens it into the bytes written), and the file reads back.
 * A unit written before its cipher finished fails the first check.
 * Each unit's writeback start (an after job of the pipeline, on a worker
 * or the calling thread, which starts every unit written by then) covers
 * each copy once, after that copy's device write, and nothing else.  Seed
 * fixed and printed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "crypt.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "fs_read.h"
#include "io.h"
#include "snapshot.h"
#include "super.h"
#include "tests/lib/ioevents.h"
#include "tests/lib/testfs.h"

#define SEED		0x91be32u
#define FILE_BYTES	(3 << 20)
#define WRITES		24

static struct testfs_one fs1;
static struct bch_fs *c;
static struct bch_fs_writes writes;

static void setup(void)
{
	testfs_encrypted = true;
	testfs_one_up(&fs1, "cpipe", 64);
	c = fs1.c;
	cr_assert(bch_fs_encrypted(c));
}

static void teardown(void)
{
	bch_fs_writes_exit(&writes);
	memset(&writes, 0, sizeof(writes));
	bch_io_pool_threads(-1);
	bch_crypt_use_libcrypto = true;
	testfs_encrypted = false;
	testfs_one_down(&fs1);
	c = NULL;
}

TestSuite(crypt_pipe, .init = setup, .fini = teardown, .timeout = 120);

static uint64_t rng;

static uint64_t rnd(void)
{
	return testfs_xorshift(&rng);
}

/* One write as op_write() does it, single-threaded: planned (asserted), run, ended. */
static void write_planned(uint64_t inum, uint64_t off, const uint8_t *buf, size_t len)
{
	struct bch_fs_write_op op;

	cr_assert_eq(bch_fs_write_begin(c, &writes, &op, inum, off, buf, len, true), 0);
	cr_assert(op.planned, "%zu bytes at %llu: not planned", len, (unsigned long long)off);
	bch_fs_write_run(&op);
	cr_assert(bch_fs_write_turn(&writes, &op));
	ssize_t n = bch_fs_write_end(c, &writes, &op);
	cr_assert_eq(n, (ssize_t)len, "write of %zu at %llu: %zd %s", len, (unsigned long long)off, n,
		     c->err_msg);
	cr_assert(!op.redone, "write of %zu at %llu: redone the old way", len, (unsigned long long)off);
}

/*
 * Every extent of inum as it is on disk: verified and opened by the single
 * AEAD call into the bytes of data at its place.  How many there were.
 */
static unsigned extents_match(uint64_t inum, const uint8_t *data)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	unsigned nr = 0;
	int err = 0;

	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_viter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent)
			continue;
		struct bch_bkey *d = bch_bkey_dup(k);
		const struct bch_extent *e = bkey_val(d);
		size_t bytes = (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;
		uint64_t start = (d->p.offset - d->size) << BCH_SECTOR_SHIFT;
		uint8_t *enc = malloc(bytes), *dec = malloc(bytes);

		cr_assert(enc && dec);
		cr_assert_eq(e->crc.csum_type, BCH_CSUM_chacha20_poly1305);
		cr_assert_eq(bch_dev_read(c->devs[e->ptrs[0].dev]->bdev, enc, bytes,
					  (uint64_t)e->ptrs[0].offset << BCH_SECTOR_SHIFT), 0);
		cr_assert_eq(bch_crypt_extent_decrypt(c, d->version, &e->crc, enc, dec), 0,
			     "extent at %llu: on disk is not the ciphertext its MAC covers",
			     (unsigned long long)start);
		cr_assert_eq(memcmp(dec + (e->crc.offset << BCH_SECTOR_SHIFT), data + start,
				    (size_t)d->size << BCH_SECTOR_SHIFT), 0,
			     "extent at %llu: not the bytes written", (unsigned long long)start);
		free(enc);
		free(dec);
		free(d);
		nr++;
	}
	bch_viter_exit(&it);
	cr_assert_eq(err, 0);
	return nr;
}

Test(crypt_pipe, planned_writes_on_disk_as_the_aead)
{
	static const int workers[] = { 0, 1, 3 };
	uint8_t *data = NULL, *back = malloc(FILE_BYTES);

	printf("crypt_pipe: seed %#x\n", SEED);
	rng = SEED;
	cr_assert_eq(posix_memalign((void **)&data, 4096, FILE_BYTES), 0);
	cr_assert(back);
	for (unsigned round = 0; round < 6; round++) {
		char name[16];
		uint64_t inum;

		bch_io_pool_threads(workers[round % 3]);
		bch_crypt_use_libcrypto = round < 3;
		snprintf(name, sizeof(name), "f%u", round);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
		for (size_t i = 0; i < FILE_BYTES; i++)
			data[i] = rnd();
		/* whole chunks first (the FUSE daemon's 1 MiB writes), then rewrites inside */
		for (uint64_t off = 0; off < FILE_BYTES; off += 1 << 20)
			write_planned(inum, off, data + off, 1 << 20);
		for (unsigned w = 0; w < WRITES; w++) {
			size_t len = w % 3 == 0 ? (1 << 20) : w % 3 == 1 ? 4096 * (130 + rnd() % 120)
									: 4096 * (2 + rnd() % 16);
			uint64_t off = (rnd() % ((FILE_BYTES - len) / 4096 + 1)) * 4096;
			/* one chunk: the planned path writes no more at once */
			if (off / (1 << 20) != (off + len - 1) / (1 << 20))
				off = off / (1 << 20) * (1 << 20);
			for (size_t i = 0; i < len; i++)
				data[off + i] = rnd();
			write_planned(inum, off, data + off, len);
		}
		cr_assert_gt(extents_match(inum, data), 16, "round %u", round);
		memset(back, 0, FILE_BYTES);
		cr_assert_eq(bch_fs_read(c, inum, 0, back, FILE_BYTES), FILE_BYTES);
		cr_assert_eq(memcmp(back, data, FILE_BYTES), 0, "round %u: does not read back", round);
	}
	cr_assert_eq(c->nr_errors, 0, "errors counted: %s", c->err_msg);
	free(data);
	free(back);
}

/* ---------------------------------------- the units' writeback starts */

Test(crypt_pipe, each_unit_writeback_started_once_after_its_write)
{
	static const int workers[] = { 0, 1, 3 };
	uint8_t *data = malloc(1 << 20);
	uint64_t inum;

	printf("crypt_pipe: seed %#x\n", SEED + 1);
	rng = SEED + 1;
	cr_assert(data);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "wb", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	ioev_attach(c->devs[0]->bdev);
	for (unsigned n = 0; n < 12; n++) {
		struct bch_fs_write_op op;
		unsigned copies = 0;

		bch_io_pool_threads(workers[n % 3]);
		for (size_t i = 0; i < 1 << 20; i++)
			data[i] = rnd();
		cr_assert_eq(bch_fs_write_begin(c, &writes, &op, inum, (uint64_t)(n % 3) << 20, data, 1 << 20,
						true), 0);
		cr_assert(op.planned);
		cr_assert_gt(op.pl.nr, 2, "write %u: %u units", n, op.pl.nr);
		ioev_nr = 0;
		bch_fs_write_run(&op);
		cr_assert_eq(op.run_r, 0);
		cr_assert_leq(ioev_nr, IOEV_MAX);
		for (unsigned k = 0; k < op.pl.nr; k++) {
			const struct bch_write_plan_unit *w = &op.pl.w[k];
			uint64_t len = (uint64_t)w->sectors << BCH_SECTOR_SHIFT;

			for (unsigned p = 0; p < w->got; p++, copies++) {
				uint64_t off = (uint64_t)w->ptrs[p].offset << BCH_SECTOR_SHIFT;
				int written = -1, started = -1, starts = 0;

				for (unsigned e = 0; e < ioev_nr; e++) {
					if (!ioev[e].wb && ioev[e].offset == off && ioev[e].len == len && written < 0)
						written = e;
					/* a start covers it (one start may cover several units back to back) */
					if (ioev[e].wb && ioev[e].offset <= off && off + len <= ioev[e].offset + ioev[e].len) {
						started = e;
						starts++;
					}
				}
				cr_assert_geq(written, 0, "write %u unit %u: not written", n, k);
				cr_assert_eq(starts, 1, "write %u unit %u (%u workers): %d writeback starts", n, k,
					     workers[n % 3], starts);
				cr_assert_gt(started, written, "write %u unit %u: writeback started before its write",
					     n, k);
			}
		}
		/* and nothing else: the starts cover exactly the units' copies */
		uint64_t wb_bytes = 0, unit_bytes = 0;
		unsigned wbs = 0;
		for (unsigned e = 0; e < ioev_nr; e++)
			if (ioev[e].wb) {
				wb_bytes += ioev[e].len;
				wbs++;
			}
		for (unsigned k = 0; k < op.pl.nr; k++)
			unit_bytes += ((uint64_t)op.pl.w[k].sectors << BCH_SECTOR_SHIFT) * op.pl.w[k].got;
		cr_assert_eq(wb_bytes, unit_bytes, "write %u: starts over %llu bytes for %llu written", n,
			     (unsigned long long)wb_bytes, (unsigned long long)unit_bytes);
		cr_assert_leq(wbs, copies, "write %u: %u starts for %u copies", n, wbs, copies);
		cr_assert(bch_fs_write_turn(&writes, &op));
		cr_assert_eq(bch_fs_write_end(c, &writes, &op), 1 << 20, "%s", c->err_msg);
	}
	ioev_detach(c->devs[0]->bdev);
	cr_assert_eq(c->nr_errors, 0, "errors counted: %s", c->err_msg);
	free(data);
}
