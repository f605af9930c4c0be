// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_mutate_test.c - a fixed-seed corpus of damaged btree nodes: random
 * bytes of a random node of a filesystem holding 400 keys are changed, half
 * the time with the node's checksum recomputed so the damage reaches the key
 * checks behind it.  For each image: fsck's btree passes with -y, a clean
 * close, then -n must find nothing, and the tree must take new keys.  No
 * crash, no sanitizer report.  SOAK=1 runs 10x as many.  Seeds are printed.
 *
 * The second corpus damages the nodes of a filesystem holding files
 * (directories, data, hard links, symlinks, xattrs), so the damage reaches
 * the passes over files: every pass with -y, then -n must find nothing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bkey.h"
#include "btree.h"
#include "checksum.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define IMG_BYTES	(16 << 20)

static char tmpdir[64], paths[1][TESTFS_PATH_MAX];
static unsigned char *pristine;
/* the 4 KiB blocks of pristine that are not all zeroes (the rest stays a hole) */
static uint32_t *used_blocks, nr_used;
static uint64_t nodes[256];
static unsigned nr_nodes;

static struct bch_fs *open_fs(bool ro)
{
	char err[256];

	return testfs_open(paths, 1, TESTFS_FSCK | (ro ? TESTFS_RO : 0), 0, err, sizeof(err));
}

static int note_node(struct bch_fs *c, struct btree *b, void *priv)
{
	(void)c;
	(void)priv;
	if (nr_nodes < 256)
		nodes[nr_nodes++] = b->ptrs[0].offset;
	return 0;
}

/* Keep the image as formatted and filled, and which of its blocks hold anything. */
static void read_pristine(void)
{
	static const unsigned char zero[4096];

	pristine = malloc(IMG_BYTES);
	used_blocks = malloc(IMG_BYTES / 4096 * sizeof(*used_blocks));
	cr_assert(pristine && used_blocks);
	FILE *f = fopen(paths[0], "rb");
	cr_assert(f && fread(pristine, 1, IMG_BYTES, f) == IMG_BYTES);
	fclose(f);
	nr_used = 0;
	for (uint32_t b = 0; b < IMG_BYTES / 4096; b++)
		if (memcmp(pristine + (size_t)b * 4096, zero, 4096))
			used_blocks[nr_used++] = b;
}

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fsckmut");
	testfs_format(tmpdir, 1, IMG_BYTES >> 20, 4096, 1, paths);

	struct bch_fs *c = open_fs(false);
	cr_assert(c);
	struct btree_trans *t;
	bch_trans_init(c, &t);
	for (unsigned i = 0; i < 400; i++) {
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(2, i * 3, 0), sizeof(struct bch_raw) + 12);
		struct bch_raw *r = bkey_val(k);
		r->len = 12;
		memcpy(r->data, "mutate-value", 12);
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		free(k);
		cr_assert_eq(bch_trans_commit(t, 0), 0);
	}
	bch_trans_exit(t);
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_fs(true);
	nr_nodes = 0;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++)
		bch_btree_walk_nodes(c, id, note_node, NULL);
	bch_fs_close(c);
	cr_assert_gt(nr_nodes, 10);

	read_pristine();
}

static void teardown(void)
{
	free(pristine);
	free(used_blocks);
	test_tmpdir_remove(tmpdir);
}

/*
 * The pristine image with one node damaged.  Only the blocks that hold
 * anything are written, into a file cut to nothing first (the rest reads as
 * the zeroes it was): the same bytes as a full copy, without writing 16 MiB
 * per image 1000 times (most of what the corpus cost).
 */
static void write_mutated(unsigned seed)
{
	unsigned char node_buf[4096];

	srandom(seed);
	uint64_t node = nodes[random() % nr_nodes] * 512;
	memcpy(node_buf, pristine + node, sizeof(node_buf));
	unsigned n = 1 + random() % 8;
	for (unsigned i = 0; i < n; i++) {
		/* mostly the header and first keys, where structure lives */
		size_t off = random() % 3 ? random() % 512 : random() % 4096;
		node_buf[off] ^= 1U << (random() % 8);
	}
	if (random() % 2) {
		/* checksum bypass: make the node's checksum match the damage */
		struct bch_btree_node *bn = (void *)node_buf;
		if (bch_csum_type_valid(bn->csum_type) &&
		    sizeof(*bn) + (size_t)bn->keys.u64s * 8 <= 4096)
			cr_assert_eq(bch_checksum(bn->csum_type, &bn->magic,
						  sizeof(*bn) - sizeof(bn->csum) + bn->keys.u64s * 8,
						  &bn->csum), 0);
	}
	int fd = open(paths[0], O_WRONLY | O_TRUNC);
	cr_assert(fd >= 0 && !ftruncate(fd, IMG_BYTES), "%s: %s", paths[0], strerror(errno));
	for (uint32_t i = 0; i < nr_used; i++) {
		off_t at = (off_t)used_blocks[i] * 4096;
		cr_assert_eq(pwrite(fd, pristine + at, 4096, at), 4096);
	}
	cr_assert_eq(pwrite(fd, node_buf, sizeof(node_buf), node), (ssize_t)sizeof(node_buf));
	close(fd);
}

Test(fsck_mutate, damaged_nodes_repaired, .init = setup, .fini = teardown, .timeout = 600)
{
	unsigned iters = getenv("SOAK") ? 10000 : 1000, repaired = 0, failed_open = 0;

	for (unsigned seed = 1; seed <= iters; seed++) {
		write_mutated(seed);
		struct bch_fs *c = open_fs(false);
		if (!c) {
			failed_open++;
			continue;
		}
		struct bch_fsck_ctx *y = calloc(1, sizeof(*y));
		uint64_t nodes_checked;
		y->mode = BCH_FSCK_YES;
		int r = bch_fsck_btrees(y, c, &nodes_checked);
		cr_assert_eq(r, 0, "seed %u: fsck -y: %s", seed, y->err_msg);
		repaired += bch_fsck_nr_fixed(y) > 0;
		cr_assert_eq(bch_fsck_nr_found(y), bch_fsck_nr_fixed(y), "seed %u: left unfixed", seed);
		free(y);
		cr_assert_eq(bch_fs_close(c), 0, "seed %u: close", seed);

		c = open_fs(true);
		cr_assert(c, "seed %u: open after repair", seed);
		struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
		n->mode = BCH_FSCK_NO;
		cr_assert_eq(bch_fsck_btrees(n, c, &nodes_checked), 0, "seed %u", seed);
		cr_assert_eq(bch_fsck_nr_found(n), 0, "seed %u: -n after -y finds %llu", seed,
			     (unsigned long long)bch_fsck_nr_found(n));
		free(n);
		bch_fs_close(c);
	}
	cr_log_info("fsck mutate: %u images, %u repaired, %u could not be opened", iters, repaired,
		    failed_open);
	cr_assert_gt(repaired, iters / 4, "only %u of %u images needed repair", repaired, iters);
	cr_assert_eq(failed_open, 0, "%u damaged images could not be opened for fsck", failed_open);
}

/* ------------------------------------------------------ files corpus */

static void setup_files(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fsckmutf");
	testfs_format(tmpdir, 1, IMG_BYTES >> 20, 4096, 1, paths);

	struct bch_fs *c = open_fs(false);
	cr_assert(c);
	char name[32], data[3000];
	uint64_t dirs[8] = { BCH_ROOT_INO }, inum;
	unsigned nr_dirs = 1;
	srandom(99);
	for (unsigned i = 0; i < 250; i++) {
		uint64_t dir = dirs[random() % nr_dirs];
		snprintf(name, sizeof(name), "entry-%u", i);
		unsigned k = random() % 10;
		if (k == 0 && nr_dirs < 8) {
			cr_assert_eq(bch_fs_create(c, dir, name, S_IFDIR | 0755, 0, 0, 0, &dirs[nr_dirs]), 0);
			nr_dirs++;
		} else if (k == 1) {
			cr_assert_eq(bch_fs_symlink(c, dir, name, "some/target", 0, 0, NULL), 0);
		} else {
			cr_assert_eq(bch_fs_create(c, dir, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
			memset(data, 'a' + i % 26, sizeof(data));
			cr_assert_eq(bch_fs_write(c, inum, (random() % 4) * 4096, data, 1 + random() % sizeof(data)) > 0, 1);
			if (k == 2)
				cr_assert_eq(bch_fs_setxattr(c, inum, "user.k", "value", 5, 0), 0);
			if (k == 3) {
				snprintf(name, sizeof(name), "link-%u", i);
				cr_assert_eq(bch_fs_link(c, inum, BCH_ROOT_INO, name), 0);
			}
		}
	}
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_fs(true);
	nr_nodes = 0;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++)
		bch_btree_walk_nodes(c, id, note_node, NULL);
	bch_fs_close(c);
	cr_assert_gt(nr_nodes, 8);

	read_pristine();
}

static enum bch_fsck_answer debug_report(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
					 const char *where, const char *detail, int fix)
{
	(void)ctx;
	fprintf(stderr, "  %s: %s%s%s (%d)\n", bch_fsck_problems[p].name, where, detail ? ": " : "",
		detail ? detail : "", fix);
	return BCH_FSCK_ANSWER_NO;
}

static int all_passes(struct bch_fsck_ctx *ctx, struct bch_fs *c)
{
	if (getenv("MUTATE_DEBUG"))
		ctx->report = debug_report;
	struct bch_fsck_file_stats st;
	uint64_t nodes_checked;
	int r = bch_fsck_btrees(ctx, c, &nodes_checked);

	if (!r && bch_fsck_nr_found(ctx) == bch_fsck_nr_fixed(ctx))
		r = bch_fsck_files(ctx, c, false, &st);
	return r;
}

Test(fsck_mutate, damaged_files_repaired, .init = setup_files, .fini = teardown, .timeout = 900)
{
	unsigned iters = getenv("SOAK") ? 10000 : 1000, repaired = 0;

	for (unsigned seed = 1; seed <= iters; seed++) {
		if (getenv("MUTATE_SEED") && (unsigned)atoi(getenv("MUTATE_SEED")) != seed)
			continue;
		write_mutated(seed);
		if (getenv("MUTATE_SEED")) {
			char cmd[256];
			snprintf(cmd, sizeof(cmd), "cp %s /tmp/mutated.img", paths[0]);
			if (system(cmd))
				fprintf(stderr, "could not keep the image\n");
		}
		struct bch_fs *c = open_fs(false);
		cr_assert(c, "seed %u: open for fsck", seed);
		struct bch_fsck_ctx *y = calloc(1, sizeof(*y));
		y->mode = BCH_FSCK_YES;
		int r = all_passes(y, c);
		cr_assert_eq(r, 0, "seed %u: fsck -y: %s", seed, y->err_msg);
		repaired += bch_fsck_nr_fixed(y) > 0;
		cr_assert_eq(bch_fsck_nr_found(y), bch_fsck_nr_fixed(y), "seed %u: left unfixed", seed);
		free(y);
		cr_assert_eq(bch_fs_close(c), 0, "seed %u: close", seed);

		c = open_fs(true);
		cr_assert(c, "seed %u: open after repair", seed);
		struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
		n->mode = BCH_FSCK_NO;
		cr_assert_eq(all_passes(n, c), 0, "seed %u: %s", seed, n->err_msg);
		for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
			cr_assert_eq(n->found[p], 0, "seed %u: -n after -y finds %s", seed,
				     bch_fsck_problems[p].name);
		free(n);
		bch_fs_close(c);
	}
	cr_log_info("fsck mutate (files): %u images, %u repaired", iters, repaired);
	if (!getenv("MUTATE_SEED"))
		cr_assert_gt(repaired, iters / 4, "only %u of %u images needed repair", repaired, iters);
}

/* ------------------------------------ -n on two threads (fsck_files_run.c) */

/* The reports of one run, in order, a line each. */
struct report_log {
	char	*buf;
	size_t	len, cap;
};

static enum bch_fsck_answer log_report(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
				       const char *where, const char *detail, int fix)
{
	struct report_log *l = ctx->priv;
	char line[2048];
	int n = snprintf(line, sizeof(line), "%s|%s|%s|%d\n", bch_fsck_problems[p].name,
			 where ? where : "", detail ? detail : "", fix);

	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (l->len + n + 1 > l->cap) {
		l->cap = (l->len + n + 1) * 2;
		l->buf = realloc(l->buf, l->cap);
		cr_assert(l->buf);
	}
	memcpy(l->buf + l->len, line, n);
	l->len += n;
	l->buf[l->len] = 0;
	return BCH_FSCK_ANSWER_NO;
}

/*
 * fsck -n of the damaged image as the command runs it (the files passes
 * when the btrees are sound), one thread or two: its reports into l, and
 * whether the files passes ran.
 */
static bool check_n(unsigned seed, bool one_thread, struct report_log *l, int *ret,
		    unsigned found[BCH_FSCK_PROBLEM_NR])
{
	if (one_thread)
		setenv("BCACHEFS_FSCK_ONE_THREAD", "1", 1);
	else
		unsetenv("BCACHEFS_FSCK_ONE_THREAD");
	struct bch_fs *c = open_fs(true);
	bool files = false;

	*ret = -1;
	if (!c)
		return false;	/* both runs fail to open alike (compared by the caller) */
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	cr_assert(n);
	n->mode = BCH_FSCK_NO;
	n->report = log_report;
	n->priv = l;
	uint64_t nodes_checked;
	struct bch_fsck_file_stats st;
	int r = bch_fsck_btrees(n, c, &nodes_checked);
	if (!r && bch_fsck_nr_found(n) == 0)
		r = bch_fsck_snapshots(n, c);
	if (!r && bch_fsck_nr_found(n) == 0) {
		files = true;
		r = bch_fsck_files(n, c, false, &st);
	}
	*ret = r;
	for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
		found[p] = n->found[p];
	free(n);
	bch_fs_close(c);
	(void)seed;
	unsetenv("BCACHEFS_FSCK_ONE_THREAD");
	return files;
}

/*
 * Passes 5-7 and 8 of fsck -n run side by side (the inode keys into the
 * table and pass 8 on a second thread): whatever the damage, the reports,
 * their text and their order, the counts and the result are the one
 * thread's.  The second thread's reports wait until the first has printed
 * its own: without that wait, a run where both report differs.
 */
Test(fsck_mutate, two_threads_report_as_one, .init = setup_files, .fini = teardown, .timeout = 900)
{
	unsigned iters = getenv("SOAK") ? 6000 : 600, files_reported = 0;

	for (unsigned seed = 1; seed <= iters; seed++) {
		if (getenv("MUTATE_SEED") && (unsigned)atoi(getenv("MUTATE_SEED")) != seed)
			continue;
		write_mutated(seed);
		struct report_log one = { 0 }, two = { 0 };
		unsigned found1[BCH_FSCK_PROBLEM_NR], found2[BCH_FSCK_PROBLEM_NR];
		int r1, r2;
		bool files1 = check_n(seed, true, &one, &r1, found1);
		bool files2 = check_n(seed, false, &two, &r2, found2);
		cr_assert_eq(files1, files2, "seed %u", seed);
		cr_assert_eq(r1, r2, "seed %u: one thread %d, two %d", seed, r1, r2);
		cr_assert_str_eq(two.buf ? two.buf : "", one.buf ? one.buf : "",
				 "seed %u: the reports differ", seed);
		for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
			cr_assert_eq(found2[p], found1[p], "seed %u: %s", seed, bch_fsck_problems[p].name);
		files_reported += files1 && one.len;
		free(one.buf);
		free(two.buf);
	}
	cr_log_info("fsck -n two threads: %u images, %u with reports from the files passes",
		    iters, files_reported);
	if (!getenv("MUTATE_SEED"))
		cr_assert_gt(files_reported, iters / 60, "only %u of %u images reached the files passes",
			     files_reported, iters);
}
