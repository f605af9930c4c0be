// SPDX-License-Identifier: GPL-2.0
/*
 * free_bench.c - what fusemount's FORGET of an unlinked file costs the
 * engine (issue 32, rm -rf through the mount), without FUSE around it:
 * N files of one 4 KiB block in directories of 100 (as an untar leaves
 * them), unlinked with the free deferred (c->defer_unlinked_free, as
 * fusemount opens), each followed by its free as an rm -rf's forget:
 * at once, one commit each (bch_fs_inode_free(), what a forget did), or
 * queued and freed FREE_PENDING at a time (bch_fs_inodes_free(), what
 * frees_run() does).  Prints the CPU time (the process's: no fsync is
 * waited for) per file of the unlinks and of the frees, for each way, on
 * fresh images, ROUNDS times alternated.
 *
 *   build/free-bench DIR [N [ROUNDS]]      (N 10000, ROUNDS 3)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "opts.h"

#define FREE_PENDING	64	/* cmd_fusemount.c's */
#define PER_DIR		100

static void die(const char *what, const char *err)
{
	fprintf(stderr, "free-bench: %s: %s\n", what, err);
	exit(1);
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One image, n files unlinked then freed; us per file of each phase. */
static void run(const char *dir, unsigned n, bool batch, double *unlink_us, double *free_us)
{
	char path[512], err[512], name[32];
	struct bch_format_dev d = { .size = 4ULL << 30, .durability = 1 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	struct bch_fs *c;
	uint64_t *inums = malloc(n * sizeof(*inums)), dinum = 0;
	static char block[4096];

	snprintf(path, sizeof(path), "%s/free-bench.img", dir);
	unlink(path);
	d.path = path;
	bch_opts_default(&o);
	if (bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)))
		die("format", err);
	char *paths[] = { path };
	if (bch_fs_open(paths, 1, NULL, &c, err, sizeof(err)))
		die("open", err);
	c->defer_unlinked_free = true;
	memset(block, 0x5a, sizeof(block));
	for (unsigned i = 0; i < n; i++) {
		if (!(i % PER_DIR)) {
			snprintf(name, sizeof(name), "d%u", i / PER_DIR);
			if (bch_fs_create(c, BCH_ROOT_INO, name, S_IFDIR | 0755, 0, 0, 0, &dinum))
				die("mkdir", c->err_msg);
		}
		snprintf(name, sizeof(name), "f%u", i);
		if (bch_fs_create(c, dinum, name, S_IFREG | 0644, 0, 0, 0, &inums[i]) ||
		    bch_fs_write(c, inums[i], 0, block, sizeof(block)) != sizeof(block))
			die("create", c->err_msg);
	}
	bch_fs_fsync(c);
	/* as an rm -rf: each unlink followed by its forget (freed now, or queued) */
	double t_unlink = 0, t_free = 0, t0, t1;
	for (unsigned i = 0; i < n; i++) {
		t0 = cpu_s();
		snprintf(name, sizeof(name), "d%u", i / PER_DIR);
		uint64_t di;
		if (bch_fs_lookup(c, BCH_ROOT_INO, name, &di))
			die("lookup", c->err_msg);
		snprintf(name, sizeof(name), "f%u", i);
		if (bch_fs_unlink(c, di, name))
			die("unlink", c->err_msg);
		t1 = cpu_s();
		t_unlink += t1 - t0;
		int r = 0;
		if (!batch)
			r = bch_fs_inode_free(c, inums[i]);
		else if ((i + 1) % FREE_PENDING == 0 || i + 1 == n)
			r = bch_fs_inodes_free(c, inums + i / FREE_PENDING * FREE_PENDING,
					       i % FREE_PENDING + 1);
		if (r)
			die("free", c->err_msg);
		t_free += cpu_s() - t1;
	}
	*unlink_us = t_unlink * 1e6 / n;
	*free_us = t_free * 1e6 / n;
	if (bch_fs_close(c))
		die("close", "");
	unlink(path);
	free(inums);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: free-bench DIR [N [ROUNDS]]\n");
		return 2;
	}
	unsigned n = argc > 2 ? atoi(argv[2]) : 10000, rounds = argc > 3 ? atoi(argv[3]) : 3;

	printf("free-bench: %u files of 4 KiB, %u per directory; CPU us per file\n", n, PER_DIR);
	for (unsigned r = 0; r < rounds; r++)
		for (int b = 0; b < 2; b++) {
			double u, f;
			run(argv[1], n, b, &u, &f);
			printf("round %u  %-22s unlink %6.2f  free %6.2f\n", r + 1,
			       b ? "batched (64 a batch)" : "one commit each", u, f);
		}
	return 0;
}
