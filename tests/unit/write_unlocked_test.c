// SPDX-License-Identifier: GPL-2.0
/*
 * write_unlocked_test.c - writes outside the engine lock (fs_ops.h
 * bch_fs_write_begin(), io.h "Writes outside the engine lock") as the FUSE
 * daemon does them (op_write): begin under a mutex standing for the engine
 * lock, run without it (a random pause widens the window), wait for the
 * file's turn, end under it.
 *
 * interleave: writer threads write ranges of a few files, overlapping
 * (a hot range every writer hits) and disjoint, block aligned and not
 * (8-byte aligned: partial blocks read their old bytes), while a reader
 * reads through the unlocked read path and a writer now and then fsyncs.
 * Every 8-byte word written says (file, write, word index), so a reader
 * can tell what it sees: zeros, or the word of a write issued that covers
 * that place -- never space reserved but not yet indexed, nor another
 * file's.  Each begin is logged in the order of issue; at the end the log
 * is replayed on a model, and every file must equal it (overlapping writes
 * land in their order of issue).  Then fsck, with the data, is clean.
 * The cases: crc32c, no checksum, encrypted.
 *
 * enospc: writers append to their own files on a small filesystem until
 * ENOSPC: what succeeded fits (each file reads back exactly the bytes its
 * writes said they stored), no space is left reserved (a block written
 * alone then fails with ENOSPC, and fsck's alloc check is clean), and no
 * user bucket holds dead space.  Plain and encrypted.
 *
 * rmw_then_truncate: a planned write's partial block changes (a truncate)
 * between its plan and its end: it is written again the old way.
 * enospc_after_planned_overwrite: a write that has no space beside a
 * planned overwrite waits for it, then stores all its bytes (written before
 * the overwrite ended, it failed: "0 free").
 *
 * The seed is fixed and printed.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "bcachefs.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "fs_read.h"
#include "io.h"
#include "opts.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NFILES		3
#define FILE_BYTES	(1 << 20)
#define HOT_BYTES	(16 << 10)	/* a range every writer writes in for a while */
#define WRITERS		4
#define WRITES_EACH	150
#define LOG_MAX		(WRITERS * WRITES_EACH + 16)
#define SEED		0x3277e5u

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];
static struct bch_fs *c;

/* the daemon's m->lock, write_cond and m->writes */
static pthread_mutex_t engine = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t write_cond = PTHREAD_COND_INITIALIZER;
static struct bch_fs_writes writes;

static uint64_t ino[WRITERS];	/* NFILES of them in interleave, a writer's each in enospc */
static atomic_bool stop;
static atomic_uint_fast64_t nr_planned, nr_redone, nr_reads, nr_bad;
static char bad_msg[256];

/* The order of issue: each write's file, range and result (set at its end). */
struct logged {
	unsigned	f;
	uint64_t	off, len;
	ssize_t		r;
};
static struct logged wlog[LOG_MAX];
static unsigned nr_log;		/* under engine */

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "wrunlock");
}

static void teardown(void)
{
	if (c)
		bch_fs_close(c);
	c = NULL;
	bch_fs_writes_exit(&writes);
	testfs_encrypted = false;
	test_tmpdir_remove(tmpdir);
}

TestSuite(write_unlocked, .init = setup, .fini = teardown, .timeout = 180);


/* The word at byte off (a multiple of 8) of file f written by write w (1-based: 0 is a hole). */
static uint64_t word(unsigned f, unsigned w, uint64_t off)
{
	return (uint64_t)(f + 1) << 56 | (uint64_t)w << 32 | off / 8;
}

/* One write as op_write() does it; returns its result, *w its place in the log. */
static ssize_t write_one(uint64_t handle, unsigned f, uint64_t off, uint64_t *buf, uint64_t len,
			 uint64_t *rng, bool log_it, unsigned *w)
{
	struct bch_fs_write_op op;
	ssize_t n;

	pthread_mutex_lock(&engine);
	if (log_it) {
		*w = nr_log++;
		cr_assert_lt(*w, LOG_MAX);
		wlog[*w] = (struct logged) { .f = f, .off = off, .len = len };
		for (uint64_t i = 0; i < len / 8; i++)
			buf[i] = word(f, *w + 1, off + 8 * i);
	}
	n = bch_fs_write_begin(c, &writes, &op, handle, off, buf, len, true);
	cr_assert_eq(n, 0, "begin: %zd", n);
	if (op.planned) {
		pthread_mutex_unlock(&engine);
		if (rng && testfs_xorshift(rng) % 2 == 0)
			usleep(testfs_xorshift(rng) % 1000);
		bch_fs_write_run(&op);
		pthread_mutex_lock(&engine);
	}
	while (!bch_fs_write_turn(&writes, &op))
		pthread_cond_wait(&write_cond, &engine);
	n = bch_fs_write_end(c, &writes, &op);
	pthread_cond_broadcast(&write_cond);
	if (log_it)
		wlog[*w].r = n;
	pthread_mutex_unlock(&engine);
	if (op.planned)
		atomic_fetch_add(op.redone ? &nr_redone : &nr_planned, 1);
	return n;
}

/* fsync as op_fsync(): the file's writes issued before it ended, then the journal flush. */
static void fsync_one(uint64_t handle)
{
	pthread_mutex_lock(&engine);
	uint64_t mark = bch_fs_writes_mark(&writes);
	while (bch_fs_writes_before(&writes, handle, mark))
		pthread_cond_wait(&write_cond, &engine);
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert(!bch_fs_writes_before(&writes, handle, mark));
	pthread_mutex_unlock(&engine);
}

static void *writer(void *arg)
{
	uint64_t rng = SEED + (uintptr_t)arg * 104729;
	uint64_t *buf = NULL;

	cr_assert_eq(posix_memalign((void **)&buf, 4096, 256 << 10), 0);
	for (unsigned i = 0; i < WRITES_EACH; i++) {
		unsigned f = testfs_xorshift(&rng) % NFILES, kind = testfs_xorshift(&rng) % 8, w;
		uint64_t off, len;

		/*
		 * The hot range moves on every few writes, so what a lost
		 * update would leave is seldom written over again
		 */
		uint64_t hot = (uint64_t)i / 3 * HOT_BYTES % FILE_BYTES;
		if (kind < 3) {		/* the hot range, aligned: overlaps the other writers' */
			off = (testfs_xorshift(&rng) % (HOT_BYTES / 4096)) * 4096;
			len = 4096 * (1 + testfs_xorshift(&rng) % 4);
		} else if (kind < 5) {	/* the hot range, not block aligned: old bytes read */
			off = (testfs_xorshift(&rng) % (HOT_BYTES / 8)) * 8;
			len = 8 * (1 + testfs_xorshift(&rng) % 512);
		} else {		/* anywhere, large: disjoint mostly */
			hot = 0;
			off = (testfs_xorshift(&rng) % (FILE_BYTES / 4096)) * 4096;
			len = 4096 * (1 + testfs_xorshift(&rng) % 64);
		}
		if (hot && off + len > HOT_BYTES)
			len = HOT_BYTES - off;
		off += hot;
		if (off + len > FILE_BYTES)
			len = FILE_BYTES - off;
		ssize_t n = write_one(ino[f], f, off, buf, len, &rng, true, &w);
		cr_assert_eq(n, (ssize_t)len, "write %u (file %u, %llu+%llu): %zd %s", w, f,
			     (unsigned long long)off, (unsigned long long)len, n, c->err_msg);
		if (testfs_xorshift(&rng) % 16 == 0)
			fsync_one(ino[f]);
	}
	free(buf);
	return NULL;
}

/* Is every word of buf (file f at off) a hole's zero or the word of a write covering it? */
static bool words_ok(const uint64_t *p, unsigned f, uint64_t off, size_t n)
{
	pthread_mutex_lock(&engine);	/* the log grows under it */
	unsigned logged = nr_log;
	pthread_mutex_unlock(&engine);
	for (size_t i = 0; i < n / 8; i++) {
		uint64_t x = p[i], at = off + 8 * i;
		if (!x)
			continue;
		unsigned w = (unsigned)(x >> 32 & 0xffffff);
		if (x >> 56 != f + 1 || (x & 0xffffffff) != at / 8 || !w || w > LOG_MAX) {
			snprintf(bad_msg, sizeof(bad_msg), "file %u at %llu: word %#llx is not this place's",
				 f, (unsigned long long)at, (unsigned long long)x);
			return false;
		}
		bool covers = w <= logged && wlog[w - 1].f == f && wlog[w - 1].off <= at &&
			      at < wlog[w - 1].off + wlog[w - 1].len;
		if (!covers) {
			snprintf(bad_msg, sizeof(bad_msg), "file %u at %llu: word of write %u, "
				 "which does not cover it", f, (unsigned long long)at, w);
			return false;
		}
	}
	return true;
}

static void *reader(void *arg)
{
	uint64_t rng = SEED ^ 0xabcdef;
	uint64_t *buf = NULL;
	(void)arg;

	cr_assert_eq(posix_memalign((void **)&buf, 4096, 128 << 10), 0);
	while (!atomic_load(&stop)) {
		unsigned f = testfs_xorshift(&rng) % NFILES;
		uint64_t off = (testfs_xorshift(&rng) % (FILE_BYTES / 4096)) * 4096, len = 128 << 10;
		struct bch_read_plan pl;
		ssize_t n;

		pthread_mutex_lock(&engine);
		bool planned = !bch_fs_read_plan(c, ino[f], off, len, &pl);
		if (!planned)
			n = bch_fs_read(c, ino[f], off, buf, len);
		pthread_mutex_unlock(&engine);
		if (planned) {
			n = bch_data_read_plan_run(&pl, buf);
			bch_data_read_plan_free(&pl);
			if (n == -EAGAIN) {
				pthread_mutex_lock(&engine);
				n = bch_fs_read(c, ino[f], off, buf, len);
				pthread_mutex_unlock(&engine);
			}
		}
		atomic_fetch_add(&nr_reads, 1);
		if (n < 0) {
			snprintf(bad_msg, sizeof(bad_msg), "read: %s", bch_err_str(n));
			atomic_fetch_add(&nr_bad, 1);
		} else if (!words_ok(buf, f, off, n)) {
			atomic_fetch_add(&nr_bad, 1);
		}
	}
	free(buf);
	return NULL;
}

static void open_fs(unsigned size_mb, unsigned csum, bool encrypted)
{
	char err[256];

	testfs_encrypted = encrypted;
	testfs_format(tmpdir, 1, size_mb, 16 << 10, 1, paths);
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	c->opts.v[Opt_data_checksum] = csum;
	writes = (struct bch_fs_writes) { 0 };
	nr_log = 0;
	nr_planned = nr_redone = nr_reads = nr_bad = 0;
	atomic_store(&stop, false);
}

static void reopen_fsck(void)
{
	char err[256];

	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open for fsck: %s", err);
	testfs_assert_fsck_clean(c, true);
}

static void interleave(unsigned csum, bool encrypted)
{
	pthread_t th[WRITERS], rd;
	unsigned char *model = calloc(NFILES, FILE_BYTES), *got = malloc(FILE_BYTES);

	printf("write_unlocked: seed %#x, data_checksum %s%s\n", SEED, bch_csum_opt_names[csum],
	       encrypted ? ", encrypted" : "");
	cr_assert(model && got);
	open_fs(64, csum, encrypted);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &ino[f]), 0);
	}
	cr_assert_eq(pthread_create(&rd, NULL, reader, NULL), 0);
	for (uintptr_t i = 0; i < WRITERS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, writer, (void *)i), 0);
	for (unsigned i = 0; i < WRITERS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&stop, true);
	pthread_join(rd, NULL);
	printf("write_unlocked: %u writes (%llu planned, %llu redone), %llu reads\n", nr_log,
	       (unsigned long long)nr_planned, (unsigned long long)nr_redone,
	       (unsigned long long)nr_reads);
	cr_assert_eq(nr_bad, 0, "%llu bad reads; the last: %s", (unsigned long long)nr_bad, bad_msg);
	cr_assert_eq(writes.nr, 0, "writes left in flight");
	cr_assert_eq(writes.planned, 0);
	cr_assert_gt(nr_planned, nr_log / 3, "the unlocked path hardly ran");
	cr_assert_eq(nr_redone, 0, "a planned write was redone: %s", c->err_msg);

	/* the log replayed in the order of issue */
	uint64_t size[NFILES] = { 0 };
	for (unsigned w = 0; w < nr_log; w++) {
		const struct logged *l = &wlog[w];
		uint64_t *p = (uint64_t *)(model + (size_t)l->f * FILE_BYTES + l->off);
		for (uint64_t i = 0; i < l->len / 8; i++)
			p[i] = word(l->f, w + 1, l->off + 8 * i);
		if (l->off + l->len > size[l->f])
			size[l->f] = l->off + l->len;
	}
	for (unsigned f = 0; f < NFILES; f++) {
		struct stat st;
		cr_assert_eq(bch_fs_getattr(c, ino[f], &st), 0);
		cr_assert_eq((uint64_t)st.st_size, size[f], "file %u: size %llu, the log says %llu", f,
			     (unsigned long long)st.st_size, (unsigned long long)size[f]);
		cr_assert_eq(bch_fs_read(c, ino[f], 0, got, size[f]), (ssize_t)size[f]);
		for (uint64_t b = 0; b < size[f]; b += 8)
			cr_assert(!memcmp(got + b, model + (size_t)f * FILE_BYTES + b, 8),
				  "file %u at %llu: %#llx, in the order of issue %#llx", f,
				  (unsigned long long)b, *(unsigned long long *)(got + b),
				  *(unsigned long long *)(model + (size_t)f * FILE_BYTES + b));
	}
	cr_assert_eq(c->nr_errors, 0, "filesystem errors: %s", c->err_msg);
	free(model);
	free(got);
	reopen_fsck();
}

Test(write_unlocked, interleave_crc32c)
{
	interleave(1, false);
}

Test(write_unlocked, interleave_no_checksum)
{
	interleave(0, false);
}

Test(write_unlocked, interleave_encrypted)
{
	interleave(0, true);
}

/* ------------------------------------------------------------------ ENOSPC */

#define APPEND_MAX	(192 << 10)

static uint64_t stored[WRITERS];	/* bytes each writer's file says it holds */
static unsigned nr_enospc[WRITERS];

static uint8_t byte_at(unsigned f, uint64_t off)
{
	uint64_t x = (f + 1) * 0x9e3779b97f4a7c15ULL ^ (off / 8) * 0xbf58476d1ce4e5b9ULL;
	return (uint8_t)(x >> (8 * (off % 8)) ^ x >> 40);
}

static void *filler(void *arg)
{
	unsigned f = (uintptr_t)arg;
	uint64_t rng = SEED * (f + 3);
	uint8_t *buf = NULL;

	cr_assert_eq(posix_memalign((void **)&buf, 4096, APPEND_MAX), 0);
	/* until two ENOSPC in a row: a first one may be a write larger than what is left */
	while (nr_enospc[f] < 2) {
		uint64_t len = 4096 * (2 + testfs_xorshift(&rng) % (APPEND_MAX / 4096 - 1)), off = stored[f];
		for (uint64_t i = 0; i < len; i++)
			buf[i] = byte_at(f, off + i);
		ssize_t n = write_one(ino[f], f, off, (uint64_t *)buf, len, &rng, false, NULL);
		if (n == -ENOSPC) {
			nr_enospc[f]++;
			continue;
		}
		cr_assert_gt(n, 0, "file %u: write at %llu: %zd %s", f, (unsigned long long)off, n,
			     c->err_msg);
		cr_assert_leq((uint64_t)n, len);
		stored[f] += n;
		nr_enospc[f] = 0;
	}
	free(buf);
	return NULL;
}

/*
 * Bytes of user buckets neither live nor the rest of an open bucket (none
 * is cached here): space lost until copygc, which never packs encrypted
 * extents (move.c does not cut them).
 */
static uint64_t dead_bytes(void)
{
	struct bch_dev_usage u;
	struct bch_fs_space s;
	uint64_t bb = (uint64_t)bch_alloc_bucket_sectors(c, 0) << 9;

	bch_dev_usage_get(c, 0, &u);
	bch_fs_space(c, &s);
	cr_assert_eq(u.cached_sectors, 0);
	return u.buckets[BCH_DATA_user] * bb - (u.sectors[BCH_DATA_user] << 9) - s.reclaimable;
}

static void enospc(bool encrypted)
{
	pthread_t th[WRITERS];

	printf("write_unlocked: seed %#x, enospc%s\n", SEED, encrypted ? ", encrypted" : "");
	open_fs(12, 1, encrypted);
	for (unsigned f = 0; f < WRITERS; f++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &ino[f]), 0);
		stored[f] = 0;
		nr_enospc[f] = 0;
	}
	struct bch_fs_space sp;
	bch_fs_space(c, &sp);
	for (uintptr_t i = 0; i < WRITERS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, filler, (void *)i), 0);
	for (unsigned i = 0; i < WRITERS; i++)
		pthread_join(th[i], NULL);
	uint64_t total = 0;
	for (unsigned f = 0; f < WRITERS; f++)
		total += stored[f];
	printf("write_unlocked: %llu bytes stored of %llu available (%llu planned, %llu redone)\n",
	       (unsigned long long)total, (unsigned long long)sp.available,
	       (unsigned long long)nr_planned, (unsigned long long)nr_redone);
	cr_assert_eq(writes.nr, 0);
	cr_assert_eq(writes.planned, 0, "space left reserved");
	/* what succeeded fits, and nearly all of the space was taken */
	cr_assert_leq(total, sp.available);
	cr_assert_geq(total, sp.available / 10 * 9, "%llu of %llu: space lost", (unsigned long long)total,
		      (unsigned long long)sp.available);
	cr_assert_gt(nr_planned, 0);
	/* no piece was left dead behind an open bucket's end (io.c unit_alloc()) */
	cr_assert_eq(dead_bytes(), 0, "%llu bytes dead", (unsigned long long)dead_bytes());
	/* nothing is left: the same answer alone */
	uint8_t blk[4096] = { 0 };
	pthread_mutex_lock(&engine);
	cr_assert_eq(bch_fs_write(c, ino[0], stored[0], blk, sizeof(blk)), -ENOSPC);
	pthread_mutex_unlock(&engine);
	/* every file holds exactly what its writes said */
	uint8_t *got = malloc(APPEND_MAX);
	for (unsigned f = 0; f < WRITERS; f++) {
		struct stat st;
		cr_assert_eq(bch_fs_getattr(c, ino[f], &st), 0);
		cr_assert_eq((uint64_t)st.st_size, stored[f], "file %u", f);
		for (uint64_t off = 0; off < stored[f]; off += APPEND_MAX) {
			uint64_t n = stored[f] - off < APPEND_MAX ? stored[f] - off : APPEND_MAX;
			cr_assert_eq(bch_fs_read(c, ino[f], off, got, n), (ssize_t)n);
			for (uint64_t i = 0; i < n; i++)
				cr_assert_eq(got[i], byte_at(f, off + i), "file %u at %llu", f,
					     (unsigned long long)(off + i));
		}
	}
	free(got);
	reopen_fsck();
}

Test(write_unlocked, enospc)
{
	enospc(false);
}

Test(write_unlocked, enospc_encrypted)
{
	enospc(true);
}

/*
 * A planned write that read the old bytes of its partial block, and a
 * truncate between its run and its end: the write must not put back what
 * the truncate cut (bytes past the new size read as zeros after the file
 * grows again): it is done again the old way, after the truncate.
 */
Test(write_unlocked, rmw_then_truncate)
{
	uint8_t old[3 * 4096], mine[50], got[3 * 4096];
	struct bch_fs_write_op op;

	open_fs(16, 1, false);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &ino[0]), 0);
	memset(old, 0xaa, sizeof(old));
	memset(mine, 0x55, sizeof(mine));
	cr_assert_eq(bch_fs_write(c, ino[0], 0, old, sizeof(old)), (ssize_t)sizeof(old));
	cr_assert_eq(bch_fs_write_begin(c, &writes, &op, ino[0], 4096 + 100, mine, sizeof(mine), true), 0);
	cr_assert(op.planned, "an unaligned write with none in flight is planned");
	bch_fs_write_run(&op);
	cr_assert_eq(bch_fs_truncate(c, ino[0], 4096 + 2000), 0);
	cr_assert(bch_fs_write_turn(&writes, &op));
	cr_assert_eq(bch_fs_write_end(c, &writes, &op), (ssize_t)sizeof(mine));
	cr_assert(op.redone, "the partial block changed: written again the old way");
	cr_assert_eq(bch_fs_truncate(c, ino[0], sizeof(got)), 0);
	cr_assert_eq(bch_fs_read(c, ino[0], 0, got, sizeof(got)), (ssize_t)sizeof(got));
	for (unsigned i = 0; i < sizeof(got); i++) {
		uint8_t want = i < 4096 + 100 ? 0xaa : i < 4096 + 150 ? 0x55 : i < 4096 + 2000 ? 0xaa : 0;
		cr_assert_eq(got[i], want, "byte %u: %#x, want %#x", i, got[i], want);
	}
	cr_assert_eq(writes.nr, 0);
	reopen_fsck();
}

/*
 * A planned write whose partial block is a hole (no extent key under it at
 * its plan), and that block written by another between its run and its
 * end, the size unchanged: no keys then and keys now differ, so it is done
 * again the old way over the new bytes.  Left alone, it is not redone.
 */
Test(write_unlocked, rmw_hole_then_filled)
{
	uint8_t blk[4096], mine[50], got[3 * 4096];
	struct bch_fs_write_op op;

	open_fs(16, 1, false);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &ino[0]), 0);
	memset(blk, 0xaa, sizeof(blk));
	memset(mine, 0x55, sizeof(mine));
	cr_assert_eq(bch_fs_write(c, ino[0], 2 * 4096, blk, sizeof(blk)), (ssize_t)sizeof(blk));
	/* left alone: the hole's keys (none) are the same at the end */
	cr_assert_eq(bch_fs_write_begin(c, &writes, &op, ino[0], 100, mine, sizeof(mine), true), 0);
	cr_assert(op.planned);
	bch_fs_write_run(&op);
	cr_assert_eq(bch_fs_write_end(c, &writes, &op), (ssize_t)sizeof(mine));
	cr_assert(!op.redone, "nothing changed under the hole: kept as planned");
	/* block 1 filled meanwhile */
	cr_assert_eq(bch_fs_write_begin(c, &writes, &op, ino[0], 4096 + 100, mine, sizeof(mine), true), 0);
	cr_assert(op.planned);
	bch_fs_write_run(&op);
	memset(blk, 0xbb, sizeof(blk));
	cr_assert_eq(bch_fs_write(c, ino[0], 4096, blk, sizeof(blk)), (ssize_t)sizeof(blk));
	cr_assert_eq(bch_fs_write_end(c, &writes, &op), (ssize_t)sizeof(mine));
	cr_assert(op.redone, "the hole was filled: written again the old way");
	cr_assert_eq(bch_fs_read(c, ino[0], 0, got, sizeof(got)), (ssize_t)sizeof(got));
	for (unsigned i = 0; i < sizeof(got); i++) {
		uint8_t want = i < 100 ? 0 : i < 150 ? 0x55 : i < 4096 ? 0 :
			       i < 4096 + 100 ? 0xbb : i < 4096 + 150 ? 0x55 : i < 2 * 4096 ? 0xbb : 0xaa;
		cr_assert_eq(got[i], want, "byte %u: %#x, want %#x", i, got[i], want);
	}
	cr_assert_eq(writes.nr, 0);
	reopen_fsck();
}

/*
 * Near full, a write that cannot be planned (no space for it until an
 * overwrite in flight frees what it replaces) waits for that planned write
 * and then gets what it would get after it in turn: all of its bytes.
 */
Test(write_unlocked, enospc_after_planned_overwrite)
{
	static uint8_t buf[1 << 20];
	struct bch_fs_write_op w1, w2;
	uint64_t a, b, size = 0;

	open_fs(8, 1, false);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &a), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, &b), 0);
	memset(buf, 0x11, sizeof(buf));
	while ((bch_alloc_user_free(c) << 9) > (384 << 10)) {
		cr_assert_eq(bch_fs_write(c, a, size, buf, 64 << 10), 64 << 10, "%s", c->err_msg);
		size += 64 << 10;
	}
	cr_assert_eq(bch_fs_fsync(c), 0);
	uint64_t free = bch_alloc_user_free(c) << 9;
	/* w1 overwrites a's first 128 KiB, w2 needs more than is left beside w1 */
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w1, a, 0, buf, 128 << 10, true), 0);
	cr_assert(w1.planned, "%llu bytes free", (unsigned long long)free);
	uint64_t m = free - (64 << 10);
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w2, b, 0, buf, m, true), 0);
	cr_assert(!w2.planned, "%llu of %llu bytes planned beside 128 KiB", (unsigned long long)m,
		  (unsigned long long)free);
	cr_assert(!bch_fs_write_turn(&writes, &w2), "w2 must wait for w1");
	bch_fs_write_run(&w1);
	cr_assert(bch_fs_write_turn(&writes, &w1));
	cr_assert_eq(bch_fs_write_end(c, &writes, &w1), 128 << 10, "%s", c->err_msg);
	cr_assert(bch_fs_write_turn(&writes, &w2));
	cr_assert_eq(bch_fs_write_end(c, &writes, &w2), (ssize_t)m, "%s", c->err_msg);
	cr_assert_eq(writes.nr, 0);
	reopen_fsck();
}

/*
 * A planned write's index update takes the inode its plan read when no
 * inode changed since (bch_btree_inode_commits()); a change between the
 * plan and the end (a chmod, a chown, another file's write, a truncate) is
 * read again, not overwritten by the plan's copy.  Untouched, the copy is
 * taken and the write's size and times are right.
 */
Test(write_unlocked, inode_changed_between_plan_and_end)
{
	uint8_t blk[4096];
	struct bch_fs_write_op op;
	struct stat st;
	uint64_t other;

	open_fs(16, 1, false);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &ino[0]), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "g", S_IFREG | 0644, 0, 0, 0, &other), 0);
	memset(blk, 0x5a, sizeof(blk));
	for (unsigned round = 0; round < 4; round++) {
		cr_assert_eq(bch_fs_write_begin(c, &writes, &op, ino[0], (uint64_t)round * 4096, blk,
						sizeof(blk), true), 0);
		cr_assert(op.planned, "round %u: an aligned write with none in flight is planned", round);
		bch_fs_write_run(&op);
		struct bch_setattr sa = { 0 };
		switch (round) {
		case 0:		/* nothing in between */
			break;
		case 1:
			sa.valid = BCH_SETATTR_MODE;
			sa.mode = 0600;
			cr_assert_eq(bch_fs_setattr(c, ino[0], &sa), 0);
			break;
		case 2:
			sa.valid = BCH_SETATTR_UID | BCH_SETATTR_GID;
			sa.uid = 1234;
			sa.gid = 5678;
			cr_assert_eq(bch_fs_setattr(c, ino[0], &sa), 0);
			break;
		case 3:		/* another file's inode: the copy is not trusted either */
			cr_assert_eq(bch_fs_write(c, other, 0, blk, 100), 100);
			break;
		}
		cr_assert(bch_fs_write_turn(&writes, &op));
		cr_assert_eq(bch_fs_write_end(c, &writes, &op), (ssize_t)sizeof(blk));
		cr_assert_eq(bch_fs_getattr(c, ino[0], &st), 0);
		cr_assert_eq((uint64_t)st.st_size, (round + 1) * 4096ull, "round %u: size %ld", round,
			     (long)st.st_size);
		cr_assert_eq((uint64_t)st.st_blocks, (round + 1) * 8ull, "round %u: sectors %ld", round,
			     (long)st.st_blocks);
		cr_assert_eq(st.st_mode & 07777, round >= 1 ? 0600u : 0644u, "round %u: mode %o", round,
			     st.st_mode & 07777);
		cr_assert_eq(st.st_uid, round >= 2 ? 1234u : 0u, "round %u: uid %u", round, st.st_uid);
	}
	cr_assert_eq(writes.nr, 0);
	reopen_fsck();
}
