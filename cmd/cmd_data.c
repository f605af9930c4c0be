// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_data.c - `bcachefs data SUBCOMMAND`: jobs that move data over a whole
 * filesystem.  For now: `data rebalance [--wait] [--json] FS`, which runs
 * the pending rebalance work (rebalance.h) to the end.
 *
 * Split per cmd_ctx.h: the front parses and names FS; the body
 * (cmd_data_rebalance_body) calls bch_rebalance_step() until it reports no
 * more work, and prints a summary from struct bch_move_stats and what
 * bch_rebalance_pending() says is left.  Offline the filesystem is opened
 * read-write (exclusive) and the steps are large; on a mounted filesystem
 * the daemon runs the body (control channel, ctl.h) in steps of 1 MiB with
 * its lock released between them, beside its own background rebalance.
 * When the client's stdout is a terminal, a progress line on its stderr
 * shows the bytes moved, the rate and what is pending.
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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "cmd_ctx.h"
#include "cmds.h"
#include "ctl.h"
#include "errcode.h"
#include "fs.h"
#include "fsname.h"
#include "move.h"
#include "opts.h"
#include "ec.h"
#include "ec_move.h"
#include "rebalance.h"

#define EXIT_WORK_LEFT	2

/* Sectors of work per step offline: large, nothing else waits for the engine. */
#define OFFLINE_BUDGET	(64ULL << 11)	/* 64 MiB */
/* Mounted: the lock is held this long at most, requests wait in between. */
#define MOUNTED_BUDGET	2048		/* 1 MiB */

static void usage_rebalance(FILE *f)
{
	fprintf(f,
"Usage: bcachefs data rebalance [--wait] [--json] [-o degraded] FS\n"
"Run the pending rebalance work of a filesystem to the end: move data that\n"
"is not on its background_target there, recompress data that is not in its\n"
"background_compression (filesystem options, or a file's own), and with\n"
"erasure_code, compact stripes whose blocks hold mostly deleted data (their\n"
"live data is rewritten and striped anew, the stripe's space freed: a stripe\n"
"with a data block emptied, or live data under 50%% of its data blocks)\n"
"and stripe what is left replicated.  FS: the\n"
"member devices (DEVICE[:DEVICE...]...: opened read-write and exclusively),\n"
"or the mountpoint of a fusemount (or its devices): the daemon runs it\n"
"beside its background work (root, or the user who mounted and owns every\n"
"member device); killing the command leaves it running, Ctrl-C stops it.\n"
"On a terminal a progress line shows the bytes moved, the rate and what is\n"
"pending; at the end a summary: extents moved, raced, left for want of a\n"
"readable copy, left for want of space, stripes compacted, and the last\n"
"problem.\n"
"Interrupted (Ctrl-C), it stops after the current step and closes cleanly;\n"
"the work left stays recorded, and running the command again resumes it.\n"
"With nothing recorded to do, the devices are only read (nothing written).\n"
"\n"
"      --wait        wait for the work to finish.  The command always runs to\n"
"                    the end, with or without --wait (accepted for scripts)\n"
"      --json        the summary as one JSON object on stdout (sizes in bytes)\n"
"  -o degraded       members may be missing when the others hold a copy of\n"
"                    everything (each missing one is named on stderr)\n"
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

/* What is left: rebalance's figures, and the stripes compaction would dissolve (ec_move.h). */
struct pending {
	struct bch_rebalance_pending	r;
	uint64_t			compact_stripes;
	uint64_t			compact_sectors;	/* live data in them */
};

static int pending_get(struct bch_fs *c, struct pending *p)
{
	struct bch_ec_dissolve d = { .kind = BCH_EC_SELECT_sparse };
	int r = bch_rebalance_pending(c, &p->r);

	return r ? r : bch_ec_dissolve_count(c, &d, &p->compact_stripes, &p->compact_sectors);
}

static uint64_t pending_sectors(const struct pending *p)
{
	return p->r.sectors_target + p->r.sectors_compression + p->r.sectors_stripe +
	       p->compact_sectors;
}

static void progress(FILE *f, const struct bch_move_stats *s, double start, uint64_t pending)
{
	char a[32], b[32], cc[32];
	double t = now_s() - start;
	uint64_t moved = s->sectors_moved << 9;

	fprintf(f, "\rbcachefs data rebalance: moved %s, %s/s, pending %s   ",
		hsize(moved, a, sizeof(a)), hsize(t > 0 ? (uint64_t)(moved / t) : 0, b, sizeof(b)),
		hsize(pending << 9, cc, sizeof(cc)));
	fflush(f);
}

static void summary_text(FILE *out, FILE *err, const char *devs, const struct bch_move_stats *s,
			 const struct pending *pl, double secs, bool done)
{
	const struct bch_rebalance_pending *left = &pl->r;
	char a[32], b[32], cc[32];

	fprintf(out, "Moved:            %" PRIu64 " extents, %s of file data (%s read, %s written) in %.1f s\n",
	       s->keys_moved, hsize(s->sectors_moved << 9, a, sizeof(a)),
	       hsize(s->sectors_read << 9, b, sizeof(b)),
	       hsize(s->sectors_written << 9, cc, sizeof(cc)), secs);
	fprintf(out, "Raced:            %" PRIu64 " extents (changed while moved; redone later)\n",
	       s->keys_raced);
	fprintf(out, "No good copy:     %" PRIu64 " extents (left as they are)\n", s->keys_no_good_copy);
	fprintf(out, "No space:         %" PRIu64 " extents (waiting for space on the target)\n",
	       s->keys_no_space);
	if (s->bad_copies)
		fprintf(out, "Bad copies:       %" PRIu64 " (skipped for a good one)\n", s->bad_copies);
	if (s->stripes_dissolved || pl->compact_stripes)
		fprintf(out, "Stripes:          %" PRIu64 " compacted, %s of their blocks freed\n",
			s->stripes_dissolved, hsize(s->stripe_sectors_freed << 9, a, sizeof(a)));
	fprintf(out, "Pending:          %s off target, %s not in background_compression, "
	       "%s waiting for space%s",
	       hsize(left->sectors_target << 9, a, sizeof(a)),
	       hsize(left->sectors_compression << 9, b, sizeof(b)),
	       hsize(left->sectors_waiting << 9, cc, sizeof(cc)),
	       left->scan ? ", a scan of every file" : "");
	if (left->sectors_stripe)	/* erasure_code: left replicated (too few members) */
		fprintf(out, ", %s to stripe", hsize(left->sectors_stripe << 9, a, sizeof(a)));
	if (pl->compact_stripes)	/* compaction parked: no space for their data */
		fprintf(out, ", %" PRIu64 " stripes to compact (%s of data)", pl->compact_stripes,
			hsize(pl->compact_sectors << 9, a, sizeof(a)));
	fprintf(out, "\n");
	if (s->last_problem[0] && !done) {	/* exit 2: what is left, and why */
		fflush(out);
		fprintf(err, "bcachefs data rebalance: %s: %s\n", devs, s->last_problem);
	}
}

static void summary_json(FILE *out, const struct bch_move_stats *s, const struct pending *pl,
			 double secs, bool done)
{
	const struct bch_rebalance_pending *left = &pl->r;

	fprintf(out, "{\"version\": %d, \"done\": %s, \"seconds\": %.3f, \"extents_seen\": %" PRIu64
	       ", \"extents_moved\": %" PRIu64 ", \"extents_raced\": %" PRIu64
	       ", \"extents_no_good_copy\": %" PRIu64 ", \"extents_no_space\": %" PRIu64
	       ", \"moved\": %" PRIu64 ", \"read\": %" PRIu64 ", \"written\": %" PRIu64
	       ", \"bad_copies\": %" PRIu64 ", \"stripes_compacted\": %" PRIu64
	       ", \"stripe_space_freed\": %" PRIu64 ", \"pending\": {\"inodes\": %" PRIu64
	       ", \"scan\": %s, \"target\": %" PRIu64 ", \"compression\": %" PRIu64
	       ", \"waiting_for_space\": %" PRIu64 ", \"stripe\": %" PRIu64
	       ", \"stripes_to_compact\": %" PRIu64 ", \"compact\": %" PRIu64 "}, \"last_problem\": ",
	       BCH_JSON_VERSION, done ? "true" : "false", secs, s->keys_seen, s->keys_moved, s->keys_raced,
	       s->keys_no_good_copy, s->keys_no_space, s->sectors_moved << 9,
	       s->sectors_read << 9, s->sectors_written << 9, s->bad_copies, s->stripes_dissolved,
	       s->stripe_sectors_freed << 9, left->inodes,
	       left->scan ? "true" : "false", left->sectors_target << 9,
	       left->sectors_compression << 9, left->sectors_waiting << 9, left->sectors_stripe << 9,
	       pl->compact_stripes, pl->compact_sectors << 9);
	json_str(out, s->last_problem);
	fprintf(out, "}\n");
}

/*
 * The summary's last_problem names what the exit status says: empty when
 * everything was done (exit 0: an extent that waited for space and then
 * moved is no problem left), else why work is left (exit 2): the last
 * extent left as it was, or, when this run met none (the work waited
 * before it started), what the pending figures say.
 */
static void why_left(struct bch_move_stats *s, const struct pending *pl, bool parked, bool done)
{
	const struct bch_rebalance_pending *left = &pl->r;
	char a[32], b[32];

	if (done) {
		s->last_problem[0] = 0;
		return;
	}
	if (s->last_problem[0])
		return;
	if (left->sectors_waiting || parked)
		snprintf(s->last_problem, sizeof(s->last_problem),
			 "%s of data waits for space on its target (no space was freed there "
			 "since it waited: free some or add a device, then run again)",
			 hsize(left->sectors_waiting << 9, a, sizeof(a)));
	else if (left->scan)
		snprintf(s->last_problem, sizeof(s->last_problem),
			 "a scan of every file is still pending");
	else if (pl->compact_stripes)
		snprintf(s->last_problem, sizeof(s->last_problem),
			 "%" PRIu64 " stripes wait for compaction (their data needs space on "
			 "data_replicas read-write members)", pl->compact_stripes);
	else
		snprintf(s->last_problem, sizeof(s->last_problem),
			 "%s off target and %s to recompress were left (written while the run went on)",
			 hsize(left->sectors_target << 9, a, sizeof(a)),
			 hsize(left->sectors_compression << 9, b, sizeof(b)));
}

/* "bcachefs data rebalance: ..." on x->err, after what was printed on x->out. */
__attribute__((format(printf, 2, 3)))
static void xerr(struct cmd_ctx *x, const char *fmt, ...)
{
	va_list args;

	fflush(x->out);
	fprintf(x->err, "bcachefs %s: ", x->cmd);
	va_start(args, fmt);
	vfprintf(x->err, fmt, args);
	va_end(args);
	fputc('\n', x->err);
	fflush(x->err);
}

/*
 * Run the work to the end, step by step with the lock taken for each
 * (cmd_ctx.h); 0, -EINTR when asked to stop, or the step's error (its
 * message in *msg, read under the lock).  The progress line's pending
 * figure is the last walk's less what was moved since (the walk reads every
 * work key's inode: not at every redraw).
 */
static int run_rebalance(struct cmd_ctx *x, struct bch_move_stats *s, bool *parked,
			 char *msg, size_t len)
{
	uint64_t budget = x->mounted ? MOUNTED_BUDGET : OFFLINE_BUDGET;
	double start = now_s(), last = 0, last_walk = 0;
	struct pending p = { 0 };
	uint64_t moved_at_walk = 0;
	int r;

	msg[0] = 0;
	x->lock(x);
	bch_ec_compact_unpark(*x->cp);	/* this run looks at every stripe once at least */
	x->unlock(x);
	if (x->tty) {
		x->lock(x);
		if (!pending_get(*x->cp, &p))
			progress(x->err, s, start, pending_sectors(&p));
		x->unlock(x);
	}
	last = last_walk = now_s();
	for (;;) {
		if (__atomic_load_n(x->cancel, __ATOMIC_RELAXED)) {	/* set by another thread */
			r = -EINTR;
			break;
		}
		x->lock(x);
		struct bch_fs *c = *x->cp;
		c->err_msg[0] = 0;
		r = bch_rebalance_step(c, budget, s, parked);
		if (!r)		/* then the stripes the background leaves (not yet full) */
			r = bch_ec_step(c, budget, true, s);
		if (r < 0)
			snprintf(msg, len, "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
		double t = now_s();
		bool show = r == 1 && x->tty && t - last >= 0.25;
		if (show && t - last_walk >= 2 && !pending_get(c, &p)) {
			last_walk = t;
			moved_at_walk = s->sectors_moved;
		}
		x->unlock(x);
		if (r != 1)
			break;
		if (show) {
			uint64_t since = s->sectors_moved - moved_at_walk, pend = pending_sectors(&p);
			progress(x->err, s, start, pend > since ? pend - since : 0);
			last = t;
		}
	}
	if (x->tty)
		fprintf(x->err, "\n");
	return r < 0 ? r : 0;
}

/* The body (cmd_ctx.h): argv is "data rebalance" then --wait / --json. */
int cmd_data_rebalance_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct bch_move_stats s;
	struct pending left = { 0 };
	char names[1024] = "", msg[512];
	bool json = false, parked = false;
	int ret = EXIT_FAIL;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (strcmp(argv[i], "--wait")) {
			xerr(x, "unexpected argument '%s'", argv[i]);
			return EXIT_USAGE;
		}
	x->lock(x);
	for (unsigned i = 0, n = 0; i < *x->nr_devs && n < sizeof(names); i++)
		n += snprintf(names + n, sizeof(names) - n, "%s%s", i ? ":" : "", (*x->devs)[i]);
	x->unlock(x);

	memset(&s, 0, sizeof(s));
	double start = now_s();
	int r = run_rebalance(x, &s, &parked, msg, sizeof(msg));
	double secs = now_s() - start;
	if (r == -EINTR) {
		xerr(x, "%s: interrupted; the work left stays recorded (run again to resume)", names);
		return EXIT_FAIL;
	}
	if (r) {
		xerr(x, "%s: %s", names, msg);
		return EXIT_FAIL;
	}
	x->lock(x);
	struct bch_fs *c = *x->cp;
	c->err_msg[0] = 0;
	if ((r = pending_get(c, &left)))
		snprintf(msg, sizeof(msg), "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
	x->unlock(x);
	if (r) {
		xerr(x, "%s: reading the pending work: %s", names, msg);
		return EXIT_FAIL;
	}
	bool done = !pending_sectors(&left) && !left.compact_stripes && !left.r.scan && !parked;
	why_left(&s, &left, parked, done);
	if (json)
		summary_json(x->out, &s, &left, secs, done);
	else
		summary_text(x->out, x->err, names, &s, &left, secs, done);
	ret = done ? EXIT_OK : EXIT_WORK_LEFT;
	return ret;
}

/*
 * Offline, before the read-write open (which writes superblocks and the
 * journal): on a read-only open, is any work recorded?  None: the summary
 * (all zeros) and EXIT_OK, the devices untouched.  -1 to go on (work
 * pending), EXIT_FAIL when the filesystem does not open (message printed).
 */
static int nothing_to_do(const struct cmd_fs *fs, const struct bch_opts *open, bool json)
{
	struct bch_opts ro = *open;
	struct pending left = { 0 };
	struct bch_move_stats s;
	char names[1024] = "", err[512];
	struct bch_fs *c;
	int r;

	for (unsigned i = 0, n = 0; i < fs->nr && n < sizeof(names); i++)
		n += snprintf(names + n, sizeof(names) - n, "%s%s", i ? ":" : "", fs->devs[i]);
	bch_opt_set(&ro, Opt_read_only, 1);
	if (bch_fs_open(fs->devs, fs->nr, &ro, &c, err, sizeof(err))) {
		cmd_err("data rebalance", "%s", err);
		return EXIT_FAIL;
	}
	c->err_msg[0] = 0;
	r = pending_get(c, &left);
	if (r || pending_sectors(&left) || left.compact_stripes || left.r.scan ||
	    left.r.sectors_waiting || left.r.inodes) {
		bch_fs_close(c);
		return -1;	/* the read-write pass reads it again, and says what fails */
	}
	cmd_note_degraded("data rebalance", c, fs->devs, fs->nr);
	memset(&s, 0, sizeof(s));
	if (json)
		summary_json(stdout, &s, &left, 0, true);
	else
		summary_text(stdout, stderr, names, &s, &left, 0, true);
	bch_fs_close(c);
	return EXIT_OK;
}

static int cmd_data_rebalance(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "wait",	no_argument, NULL, 'w' },
		{ "json",	no_argument, NULL, 'j' },
		{ "help",	no_argument, NULL, 'H' },
		{ NULL }
	};
	char *bargv[4] = { "data rebalance" };
	struct bch_opts open;
	bool json = false;
	int bargc = 1, o;

	memset(&open, 0, sizeof(open));
	while ((o = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1)
		switch (o) {
		case 'w': bargv[bargc++] = "--wait"; break;
		case 'j': bargv[bargc++] = "--json"; json = true; break;
		case 'o':
			if (cmd_open_opts_parse("data rebalance", &open, optarg))
				return EXIT_USAGE;
			break;
		case 'h':
		case 'H': usage_rebalance(stdout); return EXIT_OK;
		default: return cmd_opt_err("data rebalance", argv, "ho:");
		}
	if (optind >= argc) {
		cmd_err("data rebalance", "no device given");
		usage_rebalance(stderr);
		return EXIT_USAGE;
	}
	if (bargc > 3) {
		cmd_err("data rebalance", "an option given twice");
		usage_rebalance(stderr);
		return EXIT_USAGE;
	}

	struct cmd_fs fs;
	int ret = cmd_fs_resolve("data rebalance", argv + optind, argc - optind, &fs);
	/* a mounted filesystem's daemon decides; offline, nothing to do writes nothing */
	if (!ret)
		ret = fs.mounted ? -1 : nothing_to_do(&fs, &open, json);
	if (ret == -1)
		ret = cmd_run("data rebalance", &fs, &open, bargc, bargv);
	cmd_fs_free(&fs);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: bcachefs data COMMAND [OPTION]... FS\n"
		   "Jobs over a whole filesystem (FS: member devices, UUID=, or a mountpoint:\n"
		   "then its daemon runs the job):\n"
		   "  rebalance    move and recompress data per background_target and\n"
		   "               background_compression (data rebalance --help)\n"
		   "  rereplicate  give every extent and btree node the copies its options ask\n"
		   "               for, after a member was lost (data rereplicate --help)\n"
		   "  scrub        read every copy, verify checksums, rewrite bad copies from\n"
		   "               good ones (data scrub --help)\n");
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
		cmd_err("data", "unknown %s '%s' (see bcachefs data --help)", argv[1][0] == '-' ? "option" : "subcommand", argv[1]);
	usage(help ? stdout : stderr);
	return help ? EXIT_OK : EXIT_USAGE;
}
