// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_data.c - `bcachefs data SUBCOMMAND`: jobs that move data over a whole
 * unmounted filesystem.  For now: `data rebalance [--wait] [--json]
 * DEVICE...`, which runs the pending rebalance work (rebalance.h) to the end.
 *
 * Opens the filesystem read-write (exclusive: a device held by fusemount
 * or another command is refused, "mounted at X" when a mount names it),
 * calls bch_rebalance_step() until it reports no more work, and prints a
 * summary from struct bch_move_stats and what bch_rebalance_pending() says
 * is left.  On a terminal (stderr) a progress line shows the bytes moved,
 * the rate and what is pending.
 *
 * Invariants
 *   (1) Work left undone stays recorded on disk (rebalance_work keys), so
 *       an interrupted run (SIGINT/SIGTERM: the current step finishes and
 *       the filesystem is closed cleanly; a crash: journal replay) is
 *       resumed by running the command again.
 *   (2) The exit code says whether everything was done: 0 nothing left,
 *       2 work left (no space on the target, or no readable copy), 1 error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "cmds.h"
#include "errcode.h"
#include "fs.h"
#include "move.h"
#include "opts.h"
#include "rebalance.h"

#define EXIT_WORK_LEFT	2

/* Sectors of work per step offline: large, nothing else waits for the engine. */
#define OFFLINE_BUDGET	(64ULL << 11)	/* 64 MiB */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void usage_rebalance(FILE *f)
{
	fprintf(f,
"Usage: bcachefs data rebalance [--wait] [--json] DEVICE[:DEVICE...]...\n"
"Run the pending rebalance work of an unmounted filesystem to the end: move\n"
"data that is not on its background_target there, recompress data that is\n"
"not in its background_compression (filesystem options, or a file's own).\n"
"Opens the filesystem read-write and exclusively (a mounted filesystem is\n"
"refused: fusemount does this work in the background itself).\n"
"On a terminal a progress line shows the bytes moved, the rate and what is\n"
"pending; at the end a summary: extents moved, raced, left for want of a\n"
"readable copy, left for want of space, and the last problem.\n"
"Interrupted (Ctrl-C), it stops after the current step and closes cleanly;\n"
"the work left stays recorded, and running the command again resumes it.\n"
"\n"
"      --wait        wait for the work to finish.  Offline the command always\n"
"                    runs to the end, with or without --wait (accepted for\n"
"                    scripts written for a mounted filesystem)\n"
"      --json        the summary as one JSON object on stdout (sizes in bytes)\n"
"      --help        this text\n"
"\n"
"Exit: 0 nothing left to do, 1 failure (or interrupted), 2 work left: some\n"
"data could not be moved (no space on the target, or no readable copy; the\n"
"summary says which), 16 usage error.\n");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *hsize(uint64_t bytes, char *buf, size_t len)
{
	bch_human_size(bytes, buf, len);
	return buf;
}

static uint64_t pending_sectors(const struct bch_rebalance_pending *p)
{
	return p->sectors_target + p->sectors_compression;
}

static void progress(const struct bch_move_stats *s, double start, uint64_t pending)
{
	char a[32], b[32], cc[32];
	double t = now_s() - start;
	uint64_t moved = s->sectors_moved << 9;

	fprintf(stderr, "\rbcachefs data rebalance: moved %s, %s/s, pending %s   ",
		hsize(moved, a, sizeof(a)), hsize(t > 0 ? (uint64_t)(moved / t) : 0, b, sizeof(b)),
		hsize(pending << 9, cc, sizeof(cc)));
}

static void summary_text(const char *devs, const struct bch_move_stats *s,
			 const struct bch_rebalance_pending *left, double secs)
{
	char a[32], b[32], cc[32];

	printf("Moved:            %" PRIu64 " extents, %s of file data (%s read, %s written) in %.1f s\n",
	       s->keys_moved, hsize(s->sectors_moved << 9, a, sizeof(a)),
	       hsize(s->sectors_read << 9, b, sizeof(b)),
	       hsize(s->sectors_written << 9, cc, sizeof(cc)), secs);
	printf("Raced:            %" PRIu64 " extents (changed while moved; redone later)\n",
	       s->keys_raced);
	printf("No good copy:     %" PRIu64 " extents (left as they are)\n", s->keys_no_good_copy);
	printf("No space:         %" PRIu64 " extents (waiting for space on the target)\n",
	       s->keys_no_space);
	if (s->bad_copies)
		printf("Bad copies:       %" PRIu64 " (skipped for a good one)\n", s->bad_copies);
	printf("Pending:          %s off target, %s not in background_compression, "
	       "%s waiting for space%s\n",
	       hsize(left->sectors_target << 9, a, sizeof(a)),
	       hsize(left->sectors_compression << 9, b, sizeof(b)),
	       hsize(left->sectors_waiting << 9, cc, sizeof(cc)),
	       left->scan ? ", a scan of every file" : "");
	if (s->last_problem[0] && (s->keys_no_good_copy || s->keys_no_space))
		fprintf(stderr, "bcachefs data rebalance: %s: %s\n", devs, s->last_problem);
}

static void summary_json(const struct bch_move_stats *s, const struct bch_rebalance_pending *left,
			 double secs, bool done)
{
	printf("{\"done\": %s, \"seconds\": %.3f, \"extents_seen\": %" PRIu64
	       ", \"extents_moved\": %" PRIu64 ", \"extents_raced\": %" PRIu64
	       ", \"extents_no_good_copy\": %" PRIu64 ", \"extents_no_space\": %" PRIu64
	       ", \"moved\": %" PRIu64 ", \"read\": %" PRIu64 ", \"written\": %" PRIu64
	       ", \"bad_copies\": %" PRIu64 ", \"pending\": {\"inodes\": %" PRIu64
	       ", \"scan\": %s, \"target\": %" PRIu64 ", \"compression\": %" PRIu64
	       ", \"waiting_for_space\": %" PRIu64 "}, \"last_problem\": ",
	       done ? "true" : "false", secs, s->keys_seen, s->keys_moved, s->keys_raced,
	       s->keys_no_good_copy, s->keys_no_space, s->sectors_moved << 9,
	       s->sectors_read << 9, s->sectors_written << 9, s->bad_copies, left->inodes,
	       left->scan ? "true" : "false", left->sectors_target << 9,
	       left->sectors_compression << 9, left->sectors_waiting << 9);
	json_str(stdout, s->last_problem);
	printf("}\n");
}

/*
 * Run the work to the end on an open filesystem; 0, or the step's error.
 * The progress line's pending figure is the last walk's less what was moved
 * since (the walk reads every work key's inode: not at every redraw).
 */
static int run_rebalance(struct bch_fs *c, struct bch_move_stats *s, bool *parked)
{
	bool tty = isatty(2);
	double start = now_s(), last = 0, last_walk = 0;
	struct bch_rebalance_pending p = { 0 };
	uint64_t moved_at_walk = 0;
	int r = 0;

	if (tty && !bch_rebalance_pending(c, &p))
		progress(s, start, pending_sectors(&p));
	last = last_walk = now_s();
	while (!interrupted && (r = bch_rebalance_step(c, OFFLINE_BUDGET, s, parked)) == 1) {
		double t = now_s();
		if (!tty || t - last < 0.25)
			continue;
		if (t - last_walk >= 2 && !bch_rebalance_pending(c, &p)) {
			last_walk = t;
			moved_at_walk = s->sectors_moved;
		}
		uint64_t since = s->sectors_moved - moved_at_walk, pend = pending_sectors(&p);
		progress(s, start, pend > since ? pend - since : 0);
		last = t;
	}
	if (tty)
		fprintf(stderr, "\n");
	return interrupted ? -EINTR : r < 0 ? r : 0;
}

static int cmd_data_rebalance(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "wait",	no_argument, NULL, 'w' },
		{ "json",	no_argument, NULL, 'j' },
		{ "help",	no_argument, NULL, 'H' },
		{ NULL }
	};
	bool json = false;
	int o;

	while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1)
		switch (o) {
		case 'w': break;	/* offline it always runs to the end */
		case 'j': json = true; break;
		case 'h':
		case 'H': usage_rebalance(stdout); return EXIT_OK;
		default: usage_rebalance(stderr); return EXIT_USAGE;
		}
	if (optind >= argc) {
		cmd_err("data rebalance", "no device given");
		usage_rebalance(stderr);
		return EXIT_USAGE;
	}

	unsigned nr;
	char **devs = split_devs(argv + optind, argc - optind, &nr), err[512], mnt[4096];
	char names[1024] = "";
	struct bch_fs *c;
	int ret = EXIT_FAIL;

	for (unsigned i = 0, n = 0; i < nr && n < sizeof(names); i++)
		n += snprintf(names + n, sizeof(names) - n, "%s%s", i ? ":" : "", devs[i]);
	if (cmd_mounted_at(devs, nr, mnt, sizeof(mnt))) {
		cmd_err("data rebalance", "%s: mounted at %s: the mount's daemon rebalances in the "
			"background (unmount to run it here)", names, mnt);
		goto out;
	}
	if (bch_fs_open(devs, nr, NULL, &c, err, sizeof(err))) {
		cmd_err("data rebalance", "%s", err);
		goto out;
	}
	cmd_note_degraded("data rebalance", c, devs, nr);

	struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	struct bch_move_stats s;
	struct bch_rebalance_pending left = { 0 };
	bool parked = false;
	double start = now_s();

	memset(&s, 0, sizeof(s));
	c->err_msg[0] = 0;
	int r = run_rebalance(c, &s, &parked);
	double secs = now_s() - start;
	if (r == -EINTR) {
		cmd_err("data rebalance", "%s: interrupted; the work left stays recorded (run "
			"again to resume)", names);
	} else if (r) {
		cmd_err("data rebalance", "%s: %s", names, c->err_msg[0] ? c->err_msg : bch_err_str(r));
	} else if ((r = bch_rebalance_pending(c, &left))) {
		cmd_err("data rebalance", "%s: reading the pending work: %s", names,
			c->err_msg[0] ? c->err_msg : bch_err_str(r));
	} else {
		bool done = !pending_sectors(&left) && !left.scan && !parked;
		if (json)
			summary_json(&s, &left, secs, done);
		else
			summary_text(names, &s, &left, secs);
		ret = done ? EXIT_OK : EXIT_WORK_LEFT;
	}
	if ((r = bch_fs_close(c))) {
		cmd_err("data rebalance", "%s: closing: %s", names, bch_err_str(r));
		ret = EXIT_FAIL;
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
out:
	free_devs(devs);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: bcachefs data rebalance [--wait] [--json] DEVICE[:DEVICE...]...\n"
		   "Jobs that move data over a whole unmounted filesystem:\n"
		   "  rebalance    move and recompress data per background_target and\n"
		   "               background_compression (see data rebalance --help)\n");
}

/* `bcachefs data SUBCOMMAND` */
int cmd_data(int argc, char *argv[])
{
	if (argc >= 2 && !strcmp(argv[1], "rebalance"))
		return cmd_data_rebalance(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "rereplicate"))
		return cmd_data_rereplicate(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "scrub"))
		return cmd_data_scrub(argc - 1, argv + 1);
	bool help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
	if (!help && argc >= 2)
		cmd_err("data", "unknown subcommand '%s'", argv[1]);
	usage(help ? stdout : stderr);
	return help ? EXIT_OK : EXIT_USAGE;
}
