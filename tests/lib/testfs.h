/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_TEST_TESTFS_H
#define _BCH_TEST_TESTFS_H

/*
 * testfs.h - small filesystems for tests: formatted with a geometry that
 * makes trees deep and buckets turn over quickly (small nodes and buckets).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;

/*
 * The tests' deterministic generator (xorshift64): the next value of *s,
 * whose seed must be nonzero.  Print the seed, so a failure can be replayed.
 */
static inline uint64_t testfs_xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * A raw key at p with len value bytes, each (i * 31 + b + gen) & 0xff: the
 * models of btree_model_test.c and btree_update_test.c tell versions of a
 * position apart by gen.  The caller frees it.
 */
struct bch_bkey *testfs_raw_key(struct bch_bpos p, unsigned i, unsigned len, unsigned gen);

#define TESTFS_PATH_MAX	128
#define TESTFS_DEVS_MAX	16	/* members testfs_open() takes */

/*
 * Format nr image files dir/d0.img, dir/d1.img, ... of size_mb MiB each,
 * 64 KiB buckets, node_bytes btree nodes, metadata replicated `replicas`
 * times.  paths[i] receive the file names.  Fails the test on error.
 */
void testfs_format(const char *dir, unsigned nr, unsigned size_mb, unsigned node_bytes,
		   unsigned replicas, char paths[][TESTFS_PATH_MAX]);

/*
 * Format encrypted (passphrase TESTFS_PASSPHRASE; the key is remembered by
 * the process, so opens need no provider): a test parameter, set before
 * testfs_format(), or BCH_TEST_ENCRYPTED=1 in the environment.
 */
extern bool testfs_encrypted;
#define TESTFS_PASSPHRASE	"testfs passphrase"

#define TESTFS_RO	(1U << 0)	/* read-only */
#define TESTFS_FSCK	(1U << 1)	/* open for fsck */

/* Open; cache_bytes 0 = default.  NULL (and the message in err) on failure. */
struct bch_fs *testfs_open(char paths[][TESTFS_PATH_MAX], unsigned nr, unsigned flags,
			   uint64_t cache_bytes, char *err, unsigned errlen);
/* testfs_open() of nr devices with the default cache that fails the test on error. */
struct bch_fs *testfs_must_open(char paths[][TESTFS_PATH_MAX], unsigned nr, unsigned flags);

/*
 * A suite's one filesystem (its .init and .fini): one image of size_mb
 * MiB, 64 KiB nodes, one metadata copy, in a new temporary directory named
 * after the suite, open read-write in t->c.  testfs_one_down() closes t->c
 * if set (the close must succeed) and removes the directory.
 */
struct testfs_one {
	char		dir[64];
	char		paths[1][TESTFS_PATH_MAX];
	struct bch_fs	*c;
};
void testfs_one_up(struct testfs_one *t, const char *name, unsigned size_mb);
void testfs_one_down(struct testfs_one *t);

/*
 * The erasure-coded filesystems of the ec_* suites: g->nr images dir/dK.img
 * of g->size_mb MiB each (buckets of g->bucket_bytes, durability 1), 8 KiB
 * nodes, one metadata copy, g->data_replicas copies of data, erasure_code
 * on, and user uuid g->uuid (then zeros: each suite its own, fixed, so its
 * images are the same every run), opened read-write.  paths[] get the
 * image names and, when crash is not NULL, crash[] dir/crashK.img (where
 * a crash test writes the images of a cut).  Fails the test on error.
 */
struct testfs_ec {
	unsigned	nr, size_mb, bucket_bytes, data_replicas;
	uint8_t		uuid[3];
};
struct bch_fs *testfs_ec_up(const char *dir, const struct testfs_ec *g, char paths[][TESTFS_PATH_MAX],
			    char crash[][TESTFS_PATH_MAX]);

/*
 * fsck -n of c (opened with TESTFS_FSCK | TESTFS_RO): passes 3-10, and with
 * data pass 11 too, must find no problem.  Fails the test naming the first.
 */
void testfs_assert_fsck_clean(struct bch_fs *c, bool data);

/*
 * fsck -n (btrees, then files, with their data when data) of the
 * filesystem on paths, opened read-only for fsck: NULL when it is clean,
 * else msg saying what it found first (the open's or the pass's error, or
 * the first problem's name).  For tests that must fail with a message,
 * not at once (crash cuts print their seed and cut first).
 */
const char *testfs_fsck_problem(char paths[][TESTFS_PATH_MAX], unsigned nr, bool data, char *msg,
				size_t len);
/* The same on an open filesystem c (left open). */
const char *testfs_fsck_problem_fs(struct bch_fs *c, bool data, char *msg, size_t len);

/* Keys of type in btree id of c (0 when the btree does not exist yet). */
unsigned testfs_count_keys(struct bch_fs *c, unsigned id, unsigned type);

/*
 * fsck -n (btrees, then files with their data) of the filesystem on paths,
 * opened read-only for fsck: true when it reports any problem or the open
 * fails (damage tests: what was broken is found).
 */
bool testfs_damage_found(char paths[][TESTFS_PATH_MAX], unsigned nr);

/* The whole file at path, malloc'd (the caller frees); *len its size. */
void *testfs_slurp(const char *path, size_t *len);

/*
 * A crash test's model of nfiles files of fsize bytes each, named f0, f1,
 * ... in the root directory: model holds their bytes (file f at model +
 * f * fsize), states their digests after each op (row op of nfiles).
 * testfs_model_digest() fills states' row for op from model;
 * testfs_model_check() reads the files of c and returns NULL when they
 * match the row of some op in from..to, else msg saying what differs.
 */
void testfs_model_digest(const unsigned char *model, unsigned nfiles, size_t fsize,
			 uint64_t *states, unsigned op);
const char *testfs_model_check(struct bch_fs *c, unsigned nfiles, size_t fsize,
			       const uint64_t *states, unsigned from, unsigned to, char *msg,
			       size_t len);
/*
 * One journalled "transaction" in c's open entry: a btree_keys entry of the
 * test btree whose words are tag * 1000003 + i.  Returns its sequence.
 */
uint64_t testfs_journal_record(struct bch_fs *c, uint64_t tag, unsigned words);
/*
 * A bch_fs of the nr devices paths names with only the devices and the
 * journal set up (what fs.c does first), for the journal's own tests.
 * version: nonzero, take the filesystem for one of this format version;
 * missing: members left out (a degraded open), a bit per index.
 * testfs_journal_close() undoes it.
 */
struct bch_fs *testfs_journal_open(char paths[][TESTFS_PATH_MAX], unsigned nr, bool ro,
				   unsigned version, uint64_t missing);
void testfs_journal_close(struct bch_fs *c);

/*
 * What a replay of testfs_journal_record()'s entries saw: entries in order
 * (bad: a sequence gap or a record not whole), and which tags (< 4096).
 */
struct testfs_jseen {
	uint64_t	last, nr;
	bool		tag[4096];
	bool		bad;
};
/* Replay path read-only into *s (zeroed first).  0 or the read's error. */
int testfs_journal_replay(const char *path, struct testfs_jseen *s);
/* Copy the file from to to (an image kept aside, a crash's state); fails the test on error. */
void testfs_copy_file(const char *from, const char *to);
#endif
