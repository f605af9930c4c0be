// SPDX-License-Identifier: GPL-2.0
/*
 * rebalance_run.c - run a filesystem's pending rebalance work to the end
 * through the library (bch_rebalance_step), for the tiering benchmarks
 * while `bcachefs data rebalance --wait` is not there yet; built by
 * `make bench`, not by `make`.  Not a user command: no progress, no resume.
 *
 *   rebalance-run DEVICE[:DEVICE...]
 *
 * Prints one line: sectors moved, keys moved/raced/left, device sectors
 * read and written, whether the rest is parked (waiting for space), and the
 * time.  Exit 0 when all work is done, 1 on an error or parked work.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bcachefs.h"
#include "errcode.h"
#include "fs.h"
#include "move.h"
#include "opts.h"
#include "rebalance.h"

#define BUDGET	(64 << 11)	/* sectors per step: 64 MiB */

int main(int argc, char **argv)
{
	struct bch_move_stats s;
	struct bch_opts opts;
	struct bch_fs *c;
	struct timespec t0, t1;
	char *paths[64], *dup, *save = NULL, err[512];
	unsigned nr = 0;
	bool parked = false;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: rebalance-run DEVICE[:DEVICE...]\n");
		return 16;
	}
	dup = strdup(argv[1]);
	for (char *p = strtok_r(dup, ":", &save); p && nr < 64; p = strtok_r(NULL, ":", &save))
		paths[nr++] = p;
	memset(&opts, 0, sizeof(opts));
	if ((r = bch_fs_open(paths, nr, &opts, &c, err, sizeof(err)))) {
		fprintf(stderr, "rebalance-run: %s\n", err);
		return 1;
	}
	memset(&s, 0, sizeof(s));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((r = bch_rebalance_step(c, BUDGET, &s, &parked)) == 1)
		;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r < 0)
		fprintf(stderr, "rebalance-run: %s: %s\n", argv[1], bch_err_str(r));
	int cr = bch_fs_close(c);
	if (cr)
		fprintf(stderr, "rebalance-run: %s: closing: %s\n", argv[1], bch_err_str(cr));
	printf("rebalance-run: moved %" PRIu64 " sectors in %" PRIu64 " keys (raced %" PRIu64
	       ", no space %" PRIu64 ", no good copy %" PRIu64 "), read %" PRIu64 " written %"
	       PRIu64 " device sectors%s, %.3f s\n",
	       s.sectors_moved, s.keys_moved, s.keys_raced, s.keys_no_space, s.keys_no_good_copy,
	       s.sectors_read, s.sectors_written, parked ? ", rest parked" : "",
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	free(dup);
	return r < 0 || cr || parked ? 1 : 0;
}
