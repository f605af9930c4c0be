// SPDX-License-Identifier: GPL-2.0
/*
 * read_unlocked_test.c - reads outside the engine lock (io.h, fs_read.h)
 * as the FUSE daemon does them: reader threads plan under a mutex standing
 * for the engine lock, then read and verify without it (a random pause
 * between the two widens the window), and redo a refused read the old way
 * under the mutex; meanwhile a writer thread rewrites whole files, truncates
 * them, unlinks and recreates them and flushes the journal, on a small
 * filesystem, so the buckets the readers planned are freed and reused under
 * them.  Every read must return one whole version of its file, never a mix
 * of two or garbage.  With no data checksum only the reuse sequence can
 * catch a reused bucket; with checksums, compression and encryption the
 * checks run on the unlocked side too.  The seed is fixed and printed.
 * (With the sequence check taken out of bch_data_read_plan_run(),
 * no_checksum returned 34 mixed reads of 870; the checksummed cases were
 * saved by their checks, each run then redone.)
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

#define NFILES		4
#define FILE_BYTES	(64 << 10)	/* one write: one transaction (fs_ops WRITE_CHUNK) */
#define BLOCK		4096
#define READERS		3
#define RUN_MS		1500
#define RUN_MAX_MS	30000	/* on until the readers did enough: see the run */
#define SEED		0x5eed32u

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];
static struct bch_fs *c;

static pthread_mutex_t engine = PTHREAD_MUTEX_INITIALIZER;	/* the daemon's m->lock */
static uint64_t ino[NFILES];
static atomic_bool stop;
static atomic_uint_fast64_t nr_unlocked, nr_redone, nr_bad, nr_reads, nr_writes;
static char bad_msg[256];

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "rdunlock");
}

static void teardown(void)
{
	if (c)
		bch_fs_close(c);
	c = NULL;
	testfs_encrypted = false;
	test_tmpdir_remove(tmpdir);
}

TestSuite(read_unlocked, .init = setup, .fini = teardown, .timeout = 120);


/*
 * Version v of file f: each 8-byte word holds (f, v, word index) mixed, so
 * a block from another file, version or place (a reused bucket) shows.
 */
static uint64_t word(unsigned f, uint64_t v, uint64_t i)
{
	uint64_t x = ((uint64_t)f << 56) ^ (v << 24) ^ i ^ 0x9e3779b97f4a7c15ULL;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

static void fill(uint64_t *p, unsigned f, uint64_t v, int compressible)
{
	for (uint64_t i = 0; i < FILE_BYTES / 8; i++)
		p[i] = compressible && (i & 7) ? 0 : word(f, v, i);
	p[0] = v;	/* the version, readable first */
}

static int compressible;

/* Is buf (n bytes of file f) one whole version? */
static bool check(const uint64_t *p, size_t n, unsigned f)
{
	if (!n)
		return true;		/* truncated, not yet rewritten */
	if (n != FILE_BYTES)
		return false;
	uint64_t v = p[0];
	for (uint64_t i = 1; i < FILE_BYTES / 8; i++)
		if (p[i] != (compressible && (i & 7) ? 0 : word(f, v, i)))
			return false;
	return true;
}

/* One read as op_read() does it: plan locked, run unlocked, redo locked. */
static ssize_t read_file(unsigned f, void *buf, uint64_t *rng)
{
	struct bch_read_plan pl;
	ssize_t n;

	pthread_mutex_lock(&engine);
	uint64_t inum = ino[f];
	bool planned = !bch_fs_read_plan(c, inum, 0, FILE_BYTES, &pl);
	if (!planned)
		n = bch_fs_read(c, inum, 0, buf, FILE_BYTES);
	pthread_mutex_unlock(&engine);
	if (!planned)
		return n;
	/*
	 * The writer gets in between: now and then for long enough that the
	 * allocator comes round to the buckets just freed (about 100 writes)
	 */
	if (testfs_xorshift(rng) % 8 == 0)
		usleep(testfs_xorshift(rng) % 60000);
	else if (testfs_xorshift(rng) & 1)
		usleep(testfs_xorshift(rng) % 300);
	n = bch_data_read_plan_run(&pl, buf);
	bch_data_read_plan_free(&pl);
	if (n != -EAGAIN) {
		atomic_fetch_add(&nr_unlocked, 1);
		return n;
	}
	atomic_fetch_add(&nr_redone, 1);
	pthread_mutex_lock(&engine);
	n = bch_fs_read(c, ino[f], 0, buf, FILE_BYTES);
	pthread_mutex_unlock(&engine);
	return n;
}

static void *reader(void *arg)
{
	uint64_t rng = SEED + (uintptr_t)arg * 7919;
	uint64_t *buf;

	if (posix_memalign((void **)&buf, 4096, FILE_BYTES))
		return NULL;
	while (!atomic_load(&stop)) {
		unsigned f = testfs_xorshift(&rng) % NFILES;
		ssize_t n = read_file(f, buf, &rng);
		atomic_fetch_add(&nr_reads, 1);
		if (n == -ENOENT || n == -ESTALE)
			continue;	/* unlinked between two of the writer's steps */
		if (n < 0 || !check(buf, n, f)) {
			if (atomic_fetch_add(&nr_bad, 1) == 0)
				snprintf(bad_msg, sizeof(bad_msg), "file %u: read %zd bytes, version %llu: %s",
					 f, n, n > 0 ? (unsigned long long)buf[0] : 0ULL,
					 n < 0 ? bch_err_str(n) : "not one whole version");
		}
	}
	free(buf);
	return NULL;
}

static void writer_step(uint64_t *rng, uint64_t *buf, uint64_t *ver)
{
	unsigned f = testfs_xorshift(rng) % NFILES, op = testfs_xorshift(rng) % 8;
	char name[16];

	snprintf(name, sizeof(name), "f%u", f);
	pthread_mutex_lock(&engine);
	if (op == 0) {
		/* unlink and create: a new inode (readers see ENOENT or a version) */
		cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0, "unlink: %s", c->err_msg);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &ino[f]), 0);
	} else if (op == 1) {
		cr_assert_eq(bch_fs_truncate(c, ino[f], 0), 0, "truncate: %s", c->err_msg);
		pthread_mutex_unlock(&engine);
		sched_yield();
		pthread_mutex_lock(&engine);
	}
	fill(buf, f, ++*ver, compressible);
	cr_assert_eq(bch_fs_write(c, ino[f], 0, buf, FILE_BYTES), FILE_BYTES, "write: %s", c->err_msg);
	if (testfs_xorshift(rng) % 4 == 0)
		cr_assert_eq(bch_fs_fsync(c), 0);	/* freed space becomes reusable */
	pthread_mutex_unlock(&engine);
	atomic_fetch_add(&nr_writes, 1);
}

static void run(unsigned csum, const char *compression, bool encrypted)
{
	char err[256];
	uint64_t rng = SEED, ver = 0, *buf = NULL;
	pthread_t th[READERS];

	printf("read_unlocked: seed %#x, data_checksum %s, compression %s%s\n", SEED,
	       bch_csum_opt_names[csum], compression ? compression : "none", encrypted ? ", encrypted" : "");
	testfs_encrypted = encrypted;
	testfs_format(tmpdir, 1, 8, 16 << 10, 1, paths);	/* 128 buckets of 64 KiB */
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	c->opts.v[Opt_data_checksum] = csum;
	if (compression) {
		uint64_t v;
		cr_assert_eq(bch_opt_parse(Opt_compression, compression, &v, err, sizeof(err)), 0, "%s", err);
		c->opts.v[Opt_compression] = v;
	}
	compressible = compression != NULL;
	cr_assert_eq(posix_memalign((void **)&buf, 4096, FILE_BYTES), 0);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &ino[f]), 0);
		fill(buf, f, ++ver, compressible);
		cr_assert_eq(bch_fs_write(c, ino[f], 0, buf, FILE_BYTES), FILE_BYTES);
	}
	atomic_store(&stop, false);
	nr_unlocked = nr_redone = nr_bad = nr_reads = nr_writes = 0;
	uint64_t seq0 = c->data_reuse_seq;
	for (uintptr_t i = 0; i < READERS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, reader, (void *)i), 0);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/*
	 * RUN_MS at least, then on until the readers have done enough (a
	 * loaded machine lets the writer take the lock again and again: it
	 * then pauses between steps), at most RUN_MAX_MS: the asserts below
	 * say what was too little.
	 */
	long ms;
	do {
		writer_step(&rng, buf, &ver);
		clock_gettime(CLOCK_MONOTONIC, &t);
		ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= RUN_MS)
			usleep(500);
	} while (ms < RUN_MS || (ms < RUN_MAX_MS && (atomic_load(&nr_unlocked) <= 100 ||
						    !atomic_load(&nr_redone))));
	atomic_store(&stop, true);
	for (unsigned i = 0; i < READERS; i++)
		pthread_join(th[i], NULL);
	free(buf);
	printf("read_unlocked: %llu reads (%llu unlocked, %llu redone), %llu writes, reuse seq +%llu\n",
	       (unsigned long long)nr_reads, (unsigned long long)nr_unlocked,
	       (unsigned long long)nr_redone, (unsigned long long)nr_writes,
	       (unsigned long long)(c->data_reuse_seq - seq0));
	cr_assert_eq(nr_bad, 0, "%llu bad reads; the first: %s", (unsigned long long)nr_bad, bad_msg);
	cr_assert_gt(nr_unlocked, 100, "the unlocked path hardly ran");
	cr_assert_gt(nr_redone, 0, "no read was redone: buckets were not reused under the readers");
	cr_assert_gt(c->data_reuse_seq - seq0, 100, "buckets were hardly reused");
	cr_assert_eq(c->data_bad_copies, 0, "the unlocked path must count nothing");
	/* a reused bucket fails the fast path's checksum: redone, never counted */
	cr_assert_eq(c->nr_errors, 0, "filesystem errors counted: %s", c->err_msg);
	for (unsigned d = 0; d < c->nr_devs; d++) {
		uint64_t counts[BCH_DEV_ERROR_NR], since;
		bch_dev_errors_get(c, d, counts, &since);
		for (unsigned ty = 0; ty < BCH_DEV_ERROR_NR; ty++)
			cr_assert_eq(counts[ty], 0, "member %u: error counter %u is %llu", d, ty,
				     (unsigned long long)counts[ty]);
	}
}

Test(read_unlocked, no_checksum)
{
	run(0, NULL, false);
}

Test(read_unlocked, crc32c)
{
	run(1, NULL, false);
}

Test(read_unlocked, lz4)
{
	run(1, "lz4", false);
}

Test(read_unlocked, encrypted)
{
	run(0, NULL, true);
}
