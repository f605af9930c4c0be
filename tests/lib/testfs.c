// SPDX-License-Identifier: GPL-2.0
/* testfs.c - small filesystems for tests (see testfs.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bcachefs.h"
#include "bkey.h"
#include "blockdev.h"
#include "btree.h"
#include "format.h"
#include "journal.h"
#include "fsck.h"
#include "fs.h"
#include "fs_ops.h"
#include "super.h"
#include "testfs.h"
#include "tmpdir.h"

bool testfs_encrypted;

void testfs_format(const char *dir, unsigned nr, unsigned size_mb, unsigned node_bytes,
		   unsigned replicas, char paths[][TESTFS_PATH_MAX])
{
	struct bch_format_dev devs[4] = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256];

	cr_assert(nr <= 4);
	for (unsigned i = 0; i < nr; i++) {
		snprintf(paths[i], TESTFS_PATH_MAX, "%s/d%u.img", dir, i);
		devs[i].path = paths[i];
		devs[i].size = (uint64_t)size_mb << 20;
		devs[i].bucket_size = 64 << 10;
		devs[i].durability = 1;
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, node_bytes);
	bch_opt_set(&o, Opt_metadata_replicas, replicas);
	if (testfs_encrypted || (getenv("BCH_TEST_ENCRYPTED") && atoi(getenv("BCH_TEST_ENCRYPTED")))) {
		bch_opt_set(&o, Opt_encrypted, 1);
		args.passphrase = TESTFS_PASSPHRASE;
	}
	/* the same image every run: fixed UUID, so the derived name-hash key is fixed too */
	static const uint8_t uuid[16] = { 0x7e, 0x57, 0xf5, 0x00, 0x01, 0x02, 0x43, 0x04,
					  0x85, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c };
	args.have_uuid = true;
	memcpy(args.user_uuid, uuid, 16);
	char *sde = getenv("SOURCE_DATE_EPOCH") ? strdup(getenv("SOURCE_DATE_EPOCH")) : NULL;
	setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
	int r = bch_format(devs, nr, &o, NULL, &args, err, sizeof(err));
	if (sde)
		setenv("SOURCE_DATE_EPOCH", sde, 1);
	else
		unsetenv("SOURCE_DATE_EPOCH");
	free(sde);
	cr_assert_eq(r, 0, "format: %s", err);
}

struct bch_fs *testfs_ec_up(const char *dir, const struct testfs_ec *g, char paths[][TESTFS_PATH_MAX],
			    char crash[][TESTFS_PATH_MAX])
{
	struct bch_format_dev devs[TESTFS_DEVS_MAX] = { 0 };
	struct bch_format_args args = { .have_uuid = true };
	struct bch_opts o;
	char err[256];

	cr_assert(g->nr <= TESTFS_DEVS_MAX);
	memcpy(args.user_uuid, g->uuid, sizeof(g->uuid));
	for (unsigned d = 0; d < g->nr; d++) {
		snprintf(paths[d], TESTFS_PATH_MAX, "%s/d%u.img", dir, d);
		if (crash)
			snprintf(crash[d], TESTFS_PATH_MAX, "%s/crash%u.img", dir, d);
		devs[d] = (struct bch_format_dev) { .path = paths[d], .size = (uint64_t)g->size_mb << 20,
						    .bucket_size = g->bucket_bytes, .durability = 1 };
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 8192);
	bch_opt_set(&o, Opt_data_replicas, g->data_replicas);
	bch_opt_set(&o, Opt_metadata_replicas, 1);
	bch_opt_set(&o, Opt_erasure_code, 1);
	cr_assert_eq(bch_format(devs, g->nr, &o, NULL, &args, err, sizeof(err)), 0, "format: %s", err);
	struct bch_fs *c = testfs_open(paths, g->nr, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	return c;
}

struct bch_fs *testfs_open(char paths[][TESTFS_PATH_MAX], unsigned nr, unsigned flags,
			   uint64_t cache_bytes, char *err, unsigned errlen)
{
	char *p[TESTFS_DEVS_MAX];
	struct bch_opts o;
	struct bch_fs *c = NULL;

	cr_assert_leq(nr, TESTFS_DEVS_MAX);
	for (unsigned i = 0; i < nr; i++)
		p[i] = paths[i];
	memset(&o, 0, sizeof(o));
	if (flags & TESTFS_RO)
		bch_opt_set(&o, Opt_read_only, 1);
	if (flags & TESTFS_FSCK)
		bch_opt_set(&o, Opt_fsck, 1);
	if (cache_bytes)
		bch_opt_set(&o, Opt_btree_cache_size, cache_bytes);
	return bch_fs_open(p, nr, &o, &c, err, errlen) ? NULL : c;
}

void testfs_one_up(struct testfs_one *t, const char *name, unsigned size_mb)
{
	char err[256];

	test_tmpdir_make(t->dir, sizeof(t->dir), name);
	testfs_format(t->dir, 1, size_mb, 64 << 10, 1, t->paths);
	t->c = testfs_open(t->paths, 1, 0, 0, err, sizeof(err));
	cr_assert(t->c, "open: %s", err);
}

void testfs_one_down(struct testfs_one *t)
{
	if (t->c)
		cr_assert_eq(bch_fs_close(t->c), 0);
	t->c = NULL;
	test_tmpdir_remove(t->dir);
}

void testfs_assert_fsck_clean(struct bch_fs *c, bool data)
{
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	struct bch_fsck_file_stats st;
	uint64_t nodes;

	cr_assert(n);
	n->mode = BCH_FSCK_NO;
	cr_assert_eq(bch_fsck_btrees(n, c, &nodes), 0, "%s", n->err_msg);
	cr_assert_eq(bch_fsck_files(n, c, data, &st), 0, "%s", n->err_msg);
	for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
		cr_assert_eq(n->found[p], 0, "fsck -n finds %s", bch_fsck_problems[p].name);
	free(n);
}

const char *testfs_fsck_problem_fs(struct bch_fs *c, bool data, char *msg, size_t len)
{
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	struct bch_fsck_file_stats st;
	uint64_t nodes;
	const char *bad = NULL;

	cr_assert(n);
	n->mode = BCH_FSCK_NO;
	if (bch_fsck_btrees(n, c, &nodes) || bch_fsck_files(n, c, data, &st))
		bad = (snprintf(msg, len, "fsck: %.300s", n->err_msg), msg);
	for (unsigned q = 0; q < BCH_FSCK_PROBLEM_NR && !bad; q++)
		if (n->found[q])
			bad = (snprintf(msg, len, "fsck -n finds %s", bch_fsck_problems[q].name), msg);
	free(n);
	return bad;
}

const char *testfs_fsck_problem(char paths[][TESTFS_PATH_MAX], unsigned nr, bool data, char *msg,
				size_t len)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, nr, TESTFS_RO | TESTFS_FSCK, 0, err, sizeof(err));

	if (!c)
		return snprintf(msg, len, "fsck open: %s", err), msg;
	const char *bad = testfs_fsck_problem_fs(c, data, msg, len);
	bch_fs_close(c);
	return bad;
}

bool testfs_damage_found(char paths[][TESTFS_PATH_MAX], unsigned nr)
{
	char msg[400];

	return testfs_fsck_problem(paths, nr, true, msg, sizeof(msg)) != NULL;
}

unsigned testfs_count_keys(struct bch_fs *c, unsigned id, unsigned type)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	unsigned n = 0;
	int err = 0;

	if (!c->roots->r[id].key)
		return 0;
	bch_btree_iter_init(&it, c, id, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err)))
		n += k->type == type;
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0, "%s", c->err_msg);
	return n;
}

void *testfs_slurp(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY);

	cr_assert(fd >= 0 && !fstat(fd, &st), "%s", path);
	char *b = malloc(st.st_size ? st.st_size : 1);
	cr_assert(b);
	cr_assert_eq(pread(fd, b, st.st_size, 0), st.st_size, "%s", path);
	close(fd);
	*len = st.st_size;
	return b;
}

/* FNV-1a: a file's digest in a crash test's model (not a checksum of the format). */
static uint64_t model_hash(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

void testfs_model_digest(const unsigned char *model, unsigned nfiles, size_t fsize,
			 uint64_t *states, unsigned op)
{
	for (unsigned f = 0; f < nfiles; f++)
		states[(size_t)op * nfiles + f] = model_hash(model + (size_t)f * fsize, fsize);
}

const char *testfs_model_check(struct bch_fs *c, unsigned nfiles, size_t fsize,
			       const uint64_t *states, unsigned from, unsigned to, char *msg,
			       size_t len)
{
	unsigned char *buf = malloc(fsize);
	uint64_t *found = calloc(nfiles, sizeof(*found));
	const char *bad = NULL;

	cr_assert(buf && found);
	for (unsigned f = 0; f < nfiles && !bad; f++) {
		char name[16];
		uint64_t inum;

		snprintf(name, sizeof(name), "f%u", f);
		if (bch_fs_lookup(c, BCH_ROOT_INO, name, &inum)) {
			bad = (snprintf(msg, len, "%s: missing (%.200s)", name, c->err_msg), msg);
			break;
		}
		ssize_t n = bch_fs_read(c, inum, 0, buf, fsize);
		if (n != (ssize_t)fsize)
			bad = (snprintf(msg, len, "%s: read %zd (%.200s)", name, n, c->err_msg), msg);
		else
			found[f] = model_hash(buf, fsize);
	}
	if (!bad) {
		bad = (snprintf(msg, len, "no state after ops %u..%u matches", from, to), msg);
		for (unsigned p = from; p <= to; p++)
			if (!memcmp(found, states + (size_t)p * nfiles, nfiles * sizeof(*found))) {
				bad = NULL;
				break;
			}
	}
	free(buf);
	free(found);
	return bad;
}

uint64_t testfs_journal_record(struct bch_fs *c, uint64_t tag, unsigned words)
{
	struct bch_journal_res res;

	cr_assert_eq(bch_journal_res_get(c, 1 + words, &res), 0, "res_get: %s", c->err_msg);
	uint64_t *d = bch_journal_res_add(c, &res, BCH_JSET_ENTRY_btree_keys, BCH_BTREE_ID_test,
					  0, words);
	for (unsigned i = 0; i < words; i++)
		d[i] = tag * 1000003 + i;
	bch_journal_res_put(c, &res);
	return res.seq;
}

struct bch_fs *testfs_journal_open(char paths[][TESTFS_PATH_MAX], unsigned nr, bool ro,
				   unsigned version, uint64_t missing)
{
	struct bch_fs *c = calloc(1, sizeof(*c));

	cr_assert(c);
	for (unsigned i = 0; i < nr; i++) {
		struct bch_dev *ca = calloc(1, sizeof(*ca));
		struct bch_sb *sb;

		cr_assert(ca);
		cr_assert_eq(bch_dev_open(paths[i], ro ? BCH_DEV_RDONLY : 0, &ca->bdev), 0);
		cr_assert_eq(bch_sb_read(ca->bdev, &sb, NULL), 0);
		ca->fs = c;
		ca->idx = sb->dev_idx;
		ca->disk_sb = sb;
		c->devs[sb->dev_idx] = ca;
		if (!c->sb) {
			c->sb = malloc(BCH_SB_BUF_BYTES(sb->layout.sb_max_size_bits));
			cr_assert(c->sb);
			memcpy(c->sb, sb, BCH_SB_BUF_BYTES(sb->layout.sb_max_size_bits));
		}
	}
	c->nr_devs = c->sb->nr_devices;
	c->read_only = ro;
	if (version)
		c->sb->version = version;
	c->devs_missing = missing;
	bch_opts_from_sb(&c->opts, c->sb);
	cr_assert_eq(bch_fs_journal_init(c), 0, "%s", c->err_msg);
	return c;
}

void testfs_journal_close(struct bch_fs *c)
{
	bch_fs_journal_exit(c);
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++)
		if (c->devs[i]) {
			bch_dev_close(c->devs[i]->bdev);
			free(c->devs[i]->disk_sb);
			free(c->devs[i]);
		}
	free(c->sb);
	free(c);
}

/* testfs_journal_replay()'s callback: entries in order, each record whole. */
static int jseen_collect(struct bch_fs *c, struct bch_jset *j, void *priv)
{
	struct testfs_jseen *s = priv;
	struct bch_jset_entry *e;

	(void)c;
	if (s->nr && j->seq != s->last + 1)
		s->bad = true;
	s->last = j->seq;
	s->nr++;
	for_each_jset_entry(e, j) {
		if (e->type != BCH_JSET_ENTRY_btree_keys || !e->u64s)
			continue;
		uint64_t tag = e->_data[0] / 1000003;
		for (unsigned i = 0; i < e->u64s; i++)
			if (e->_data[i] != tag * 1000003 + i)
				s->bad = true;
		if (tag < 4096)
			s->tag[tag] = true;
	}
	return 0;
}

int testfs_journal_replay(const char *path, struct testfs_jseen *s)
{
	char one[1][TESTFS_PATH_MAX];
	uint64_t newest;

	memset(s, 0, sizeof(*s));
	snprintf(one[0], sizeof(one[0]), "%s", path);
	struct bch_fs *r = testfs_journal_open(one, 1, true, 0, 0);
	int ret = bch_journal_read(r, jseen_collect, s, &newest);

	testfs_journal_close(r);
	return ret;
}

void testfs_copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	static char buf[1 << 16];
	ssize_t n;

	cr_assert(in >= 0 && out >= 0, "copy %s -> %s: %s", from, to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		cr_assert_eq(write(out, buf, n), n, "copy %s -> %s", from, to);
	cr_assert_eq(n, 0, "copy %s: %s", from, strerror(errno));
	close(in);
	cr_assert_eq(close(out), 0, "copy -> %s: %s", to, strerror(errno));
}

struct bch_fs *testfs_must_open(char paths[][TESTFS_PATH_MAX], unsigned nr, unsigned flags)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, nr, flags, 0, err, sizeof(err));

	cr_assert(c, "open: %s", err);
	return c;
}

struct bch_bkey *testfs_raw_key(struct bch_bpos p, unsigned i, unsigned len, unsigned gen)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, p, sizeof(struct bch_raw) + len);
	struct bch_raw *r = bkey_val(k);

	r->len = len;
	for (unsigned b = 0; b < len; b++)
		r->data[b] = (i * 31 + b + gen) & 0xff;
	return k;
}
