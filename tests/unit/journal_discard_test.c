// SPDX-License-Identifier: GPL-2.0
/*
 * journal_discard_test.c - the member's discard option and the journal:
 * once last_seq on disk has moved past every entry of a journal bucket, the
 * bucket is discarded (a hole in an image file), so a session's journal
 * traffic does not stay allocated in the image.  Without discard the ring
 * keeps what was written.  After discards the filesystem opens, after a
 * clean close and after a session that ended without one (replay from
 * last_seq), with every committed key, and fsck finds it clean.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcachefs.h"
#include "bkey.h"
#include "btree.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "journal.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NKEYS	6000
#define TXN	50

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];

static void make_fs(bool discard)
{
	struct bch_format_dev d = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "jdiscard");
	snprintf(paths[0], sizeof(paths[0]), "%s/d0.img", tmpdir);
	d.path = paths[0];
	d.size = 64 << 20;
	d.bucket_size = 64 << 10;
	d.durability = 1;
	d.discard = discard;
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 64 << 10);
	bch_opt_set(&o, Opt_metadata_replicas, 1);
	cr_assert_eq(bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);
}

static struct bch_bpos pos_of(unsigned i)
{
	return POS(1000 + i * 7919ULL % NKEYS, i, 0);
}

static void insert_all(struct bch_fs *c)
{
	struct btree_trans *t;
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS_MIN, sizeof(struct bch_raw) + 32);
	struct bch_raw *v = bkey_val(k);

	v->len = 32;
	bch_trans_init(c, &t);
	for (unsigned i = 0; i < NKEYS; i++) {
		k->p = pos_of(i);
		memset(v->data, (int)i, 32);
		cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_test, k), 0);
		if ((i + 1) % TXN == 0)
			cr_assert_eq(bch_trans_commit(t, BCH_TRANS_SYNC), 0, "commit: %s", c->err_msg);
	}
	bch_trans_exit(t);
	free(k);
}

static void check_all(struct bch_fs *c)
{
	for (unsigned i = 0; i < NKEYS; i++) {
		struct bch_bkey *k;
		cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_test, pos_of(i), &k), 0,
			     "key %u missing: %s", i, c->err_msg);
		const struct bch_raw *v = bkey_val(k);
		cr_assert(v->len == 32 && v->data[0] == (uint8_t)i && v->data[31] == (uint8_t)i,
			  "key %u: wrong value", i);
		free(k);
	}
}

/* Bytes allocated in the image inside the journal's buckets. */
static uint64_t journal_allocated(struct bch_fs *c)
{
	struct bch_sb_field_journal *f = (void *)bch_sb_field_get(c->sb, BCH_SB_FIELD_journal);
	uint64_t bucket = (uint64_t)bch_sb_member(c->sb, 0)->bucket_size << 9, total = 0;
	unsigned nr = (f->field.u64s * 8 - sizeof(*f)) / sizeof(f->runs[0]);
	int fd = open(paths[0], O_RDONLY);

	cr_assert(fd >= 0);
	for (unsigned r = 0; r < nr; r++) {
		off_t start = f->runs[r].start * bucket, end = start + (off_t)f->runs[r].nr * bucket;
		for (off_t off = start; off < end; ) {
			off_t data = lseek(fd, off, SEEK_DATA);
			if (data < 0 || data >= end)
				break;
			off_t hole = lseek(fd, data, SEEK_HOLE);
			if (hole > end)
				hole = end;
			total += hole - data;
			off = hole;
		}
	}
	close(fd);
	return total;
}

/* The workload, then every node written and a journal entry recording it. */
static uint64_t run(struct bch_fs *c)
{
	insert_all(c);
	cr_assert_eq(bch_btree_flush_all(c), 0, "%s", c->err_msg);
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	return journal_allocated(c);
}

Test(journal_discard, reclaimed_buckets_punched)
{
	make_fs(false);
	struct bch_fs *c = testfs_must_open(paths, 1, 0);
	uint64_t plain = run(c), bucket = (uint64_t)bch_sb_member(c->sb, 0)->bucket_size << 9;
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);

	make_fs(true);
	c = testfs_must_open(paths, 1, 0);
	uint64_t discarded = run(c);
	check_all(c);
	cr_assert_eq(bch_fs_close(c), 0);
	/* the workload wrote many buckets of journal; only the current one stays */
	cr_assert_gt(plain, 8 * bucket, "without discard the journal holds only %lu bytes",
		     (unsigned long)plain);
	cr_assert_leq(discarded, 2 * bucket, "with discard the journal holds %lu bytes (%lu without)",
		      (unsigned long)discarded, (unsigned long)plain);

	c = testfs_must_open(paths, 1, 0);
	check_all(c);
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_must_open(paths, 1, TESTFS_FSCK | TESTFS_RO);
	testfs_assert_fsck_clean(c, false);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

/* A session that ends without a close after discards: replay from last_seq. */
Test(journal_discard, unclean_end_replays)
{
	make_fs(true);
	pid_t pid = fork();
	if (!pid) {
		struct bch_fs *c = testfs_must_open(paths, 1, 0);
		run(c);
		/* more commits after the discards, left for replay */
		struct btree_trans *t;
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(7, 7, 0), sizeof(struct bch_raw) + 8);
		((struct bch_raw *)bkey_val(k))->len = 8;
		bch_trans_init(c, &t);
		if (bch_trans_update(t, BCH_BTREE_ID_test, k) || bch_trans_commit(t, BCH_TRANS_SYNC))
			_exit(1);
		_exit(0);	/* no close: nodes and the open entry as a power cut leaves them */
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && !WEXITSTATUS(st), "the session failed");

	struct bch_fs *c = testfs_must_open(paths, 1, 0);
	check_all(c);
	struct bch_bkey *k;
	cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_test, POS(7, 7, 0), &k), 0,
		     "the key committed after the discards is lost: %s", c->err_msg);
	free(k);
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_must_open(paths, 1, TESTFS_FSCK | TESTFS_RO);
	testfs_assert_fsck_clean(c, false);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}
