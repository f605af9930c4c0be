// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_scrub.c - `bcachefs data scrub [--json] [--degraded] FS [MEMBER]`:
 * read every copy of data and metadata (or those on MEMBER), verify their
 * checksums and rewrite the bad copies from good ones (libbcachefs/scrub.h).
 *
 * The front parses the command line and names the filesystem; the body
 * (cmd_scrub_body, run offline or in the fusemount daemon: cmd_ctx.h) runs
 * bch_scrub_step() with the engine lock held for one step at a time,
 * stops between steps when asked (Ctrl-C), shows the bytes read of the
 * total on a terminal, and ends with a summary (text or --json) that names
 * what could not be repaired and why.
 *
 * Exit codes: 0 nothing is left bad; 1 something could not be repaired,
 * the scrub was interrupted (run it again: it starts over, and what was
 * repaired reads good), or an error; 16 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "cmd_ctx.h"
#include "cmds.h"
#include "device.h"
#include "errcode.h"
#include "fs.h"
#include "fsname.h"
#include "opts.h"
#include "progress.h"
#include "scrub.h"

#define CMD	"data scrub"

/* Bytes read per step: offline nothing else waits; mounted, the lock is shared. */
#define BUDGET_OFFLINE	(64ULL << 20)
#define BUDGET_MOUNTED	(4ULL << 20)

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs data scrub [--json] [--degraded | -o degraded] FS [MEMBER]\n"
"Read every copy of the filesystem's data and btree nodes (only the copies on\n"
"MEMBER when given: a member device path or index), verify their checksums and\n"
"rewrite each bad copy from a good one (on its own device; a bad btree node\n"
"replica: the node is rewritten).  A copy with no good one left is named (file,\n"
"sectors, bytes) and left alone.  Erasure-coded stripes are read whole first:\n"
"a bad block, data or parity, is rebuilt from the others and written back.\n"
"The journal is not scrubbed.\n"
"FS: member devices (a list joined by ':') or the mountpoint of a fusemount\n"
"(the daemon does the work; the mount stays usable meanwhile).\n"
"Progress on a terminal; Ctrl-C stops at the end of a step (run it again).\n"
"\n"
"  --json        the summary as JSON (sizes in bytes)\n"
"  --degraded, -o degraded\n"
"                scrub with member devices missing (offline): their copies\n"
"                are skipped and counted\n"
"  -h, --help    this help\n"
"\n"
"Exit: 0 nothing left bad; 1 something could not be repaired, interrupted,\n"
"or an error; 16 usage.\n");
}

/* ------------------------------------------------------------ the body */

/* The member named by s: a device path, an index or a member UUID (device.h). */
static int find_member(struct bch_fs *c, const char *s, int *dev, char *err, size_t len)
{
	unsigned d;

	if (bch_dev_lookup(c, NULL, 0, s, &d, err, len))
		return -1;
	*dev = (int)d;
	return 0;
}

static void fs_names(struct cmd_ctx *x, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (unsigned i = 0; x->devs && *x->devs && i < *x->nr_devs && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%s", i ? ":" : "", (*x->devs)[i]);
}

static void summary_text(struct cmd_ctx *x, const char *names, const struct bch_scrub *s,
			 double secs)
{
	char rd[32], rate[32], ub[32];

	bch_human_size(s->bytes_read, rd, sizeof(rd));
	bch_human_size(secs > 0.001 ? (uint64_t)(s->bytes_read / secs) : 0, rate, sizeof(rate));
	bch_human_size(s->unrepairable_bytes, ub, sizeof(ub));
	fprintf(x->out, "%s: %s: read %s in %.1f s (%s/s)\n", CMD, names, rd, secs, rate);
	fprintf(x->out, "  extents checked      %" PRIu64 "\n", s->extents_checked);
	fprintf(x->out, "  btree nodes checked  %" PRIu64 "\n", s->nodes_checked);
	if (s->stripes_checked)
		fprintf(x->out, "  stripes checked      %" PRIu64 "\n", s->stripes_checked);
	fprintf(x->out, "  copies checked       %" PRIu64 "\n", s->copies_checked);
	fprintf(x->out, "  bad copies           %" PRIu64 "\n", s->copies_bad);
	fprintf(x->out, "  repaired             %" PRIu64 "\n", s->copies_repaired);
	fprintf(x->out, "  unrepairable         %" PRIu64 " (%s of file data)\n", s->unrepairable, ub);
	fprintf(x->out, "  skipped              %" PRIu64 " (on missing members, or stale cached)\n",
		s->copies_skipped);
}

static void summary_json(struct cmd_ctx *x, const struct bch_scrub *s, double secs,
			 bool interrupted)
{
	FILE *f = x->out;

	fprintf(f, "{\"version\":%d,\"bytes_total\":%" PRIu64 ",\"bytes_read\":%" PRIu64 ",\"seconds\":%.3f,"
		"\"extents_checked\":%" PRIu64 ",\"nodes_checked\":%" PRIu64 ",\"stripes_checked\":%" PRIu64 ","
		"\"copies_checked\":%" PRIu64 ",\"copies_bad\":%" PRIu64 ","
		"\"copies_repaired\":%" PRIu64 ",\"copies_skipped\":%" PRIu64 ","
		"\"unrepairable\":%" PRIu64 ",\"unrepairable_bytes\":%" PRIu64 ","
		"\"interrupted\":%s,\"unrepairable_list\":[",
		BCH_JSON_VERSION, s->bytes_total, s->bytes_read, secs, s->extents_checked, s->nodes_checked,
		s->stripes_checked, s->copies_checked, s->copies_bad, s->copies_repaired, s->copies_skipped,
		s->unrepairable, s->unrepairable_bytes, interrupted ? "true" : "false");
	for (unsigned i = 0; i < s->nr_bad; i++) {
		const struct bch_scrub_bad *b = &s->bad[i];
		fprintf(f, "%s{\"kind\":\"%s\",", i ? "," : "",
			b->btree ? "btree_node" : b->stripe ? "stripe" : "data");
		if (b->stripe)
			fprintf(f, "\"stripe\":%" PRIu64 ",", b->inode);
		else if (!b->btree)
			fprintf(f, "\"inode\":%" PRIu64 ",\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64 ",",
				b->inode, b->start << 9, b->bytes);
		fprintf(f, "\"what\":");
		json_str(f, b->what);
		fprintf(f, ",\"why\":");
		json_str(f, b->why);
		fputc('}', f);
	}
	fprintf(f, "]}\n");
}

int cmd_scrub_body(struct cmd_ctx *x, int argc, char **argv)
{
	const char *member = NULL;
	bool json = false;
	char names[1024], err[512];
	struct bch_scrub *s = calloc(1, sizeof(*s));
	int dev = -1, r, code = EXIT_FAIL;

	if (!s)
		abort();
	/* the front checked the command line: no getopt (not thread-safe in the daemon) */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (argv[i][0] != '-')
			member = argv[i];
	fs_names(x, names, sizeof(names));

	x->lock(x);
	struct bch_fs *c = *x->cp;
	if (member && find_member(c, member, &dev, err, sizeof(err))) {
		x->unlock(x);
		fprintf(x->err, "bcachefs %s: %s: %s\n", CMD, names, err);
		free(s);
		return EXIT_FAIL;
	}
	c->err_msg[0] = 0;
	r = bch_scrub_init(c, s, dev, err, sizeof(err));
	x->unlock(x);
	if (r) {
		fprintf(x->err, "bcachefs %s: %s: %s\n", CMD, names, err);
		free(s);
		return EXIT_FAIL;
	}

	struct cmd_progress p;
	uint64_t budget = x->mounted ? BUDGET_MOUNTED : BUDGET_OFFLINE;
	double start = cmd_now();
	bool interrupted = false;

	cmd_progress_init(&p, x->out, x->tty && !json, CMD ": read");
	do {
		if (*x->cancel) {
			interrupted = true;
			break;
		}
		x->lock(x);
		c = *x->cp;
		r = bch_scrub_step(c, s, budget);
		if (r < 0)
			snprintf(err, sizeof(err), "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
		x->unlock(x);
		cmd_progress_update(&p, s->bytes_read, s->bytes_total, false);
	} while (r > 0);
	/* (the total was an estimate: a finished scrub shows nothing left) */
	cmd_progress_update(&p, s->bytes_read, r || interrupted ? s->bytes_total : s->bytes_read, true);
	cmd_progress_done(&p);
	double secs = cmd_now() - start;

	if (r < 0) {
		fprintf(x->err, "bcachefs %s: %s: %s\n", CMD, names, err);
		goto out;
	}
	if (json)
		summary_json(x, s, secs, interrupted);
	else
		summary_text(x, names, s, secs);
	for (unsigned i = 0; i < s->nr_bad; i++) {
		char bytes[40] = "";
		if (!s->bad[i].btree && !s->bad[i].stripe)
			snprintf(bytes, sizeof(bytes), " (%" PRIu64 " bytes)", s->bad[i].bytes);
		fprintf(x->err, "bcachefs %s: %s: %s%s: %s\n", CMD, names, s->bad[i].what, bytes,
			s->bad[i].why);
	}
	if (s->unrepairable > s->nr_bad)
		fprintf(x->err, "bcachefs %s: %s: and %" PRIu64 " more left bad\n", CMD, names,
			s->unrepairable - s->nr_bad);
	if (interrupted)
		fprintf(x->err, "bcachefs %s: %s: interrupted; run it again to scrub the rest\n",
			CMD, names);
	code = s->unrepairable || interrupted ? EXIT_FAIL : EXIT_OK;
out:
	fflush(x->out);
	free(s);
	return code;
}

/* ------------------------------------------------------------ the front */

/*
 * Offline, a MEMBER that names nothing is refused before the read-write
 * open (whose close would write the superblocks): a read-only look first.
 */
static int check_member(const struct cmd_fs *fs, const struct bch_opts *opts, const char *member)
{
	struct bch_opts ro = *opts;
	struct bch_fs *c;
	char err[512], names[1024];
	size_t n = 0;
	int dev;

	names[0] = 0;
	for (unsigned i = 0; i < fs->nr && n < sizeof(names); i++)
		n += snprintf(names + n, sizeof(names) - n, "%s%s", i ? ":" : "", fs->devs[i]);
	bch_opt_set(&ro, Opt_read_only, 1);
	if (bch_fs_open(fs->devs, fs->nr, &ro, &c, err, sizeof(err))) {
		cmd_err(CMD, "%s", err);
		return EXIT_FAIL;
	}
	int r = find_member(c, member, &dev, err, sizeof(err));
	bch_fs_close(c);
	if (r)
		cmd_err(CMD, "%s: %s", names, err);
	return r ? EXIT_FAIL : 0;
}

int cmd_data_scrub(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "json",	no_argument, NULL, 'j' },
		{ "degraded",	no_argument, NULL, 'D' },
		{ "help",	no_argument, NULL, 'h' },
		{ NULL }
	};
	struct bch_opts opts = { 0 };
	char oerr[256];
	bool json = false;
	int o;

	while ((o = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1)
		switch (o) {
		case 'j': json = true; break;
		case 'D': bch_opt_set(&opts, Opt_degraded, 1); break;
		case 'o':
			if (bch_opts_parse_list(&opts, optarg, OPT_MOUNT, oerr, sizeof(oerr)) ||
			    (opts.set & ~(1ULL << Opt_degraded))) {
				cmd_err(CMD, "-o %s: %s", optarg,
					opts.set ? "data scrub takes only degraded" : oerr);
				return EXIT_USAGE;
			}
			break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cmd_opt_err("data scrub", argv, "ho:");
		}
	if (argc - optind < 1 || argc - optind > 2) {
		cmd_err(CMD, argc - optind < 1 ? "no filesystem given" : "too many arguments");
		usage(stderr);
		return EXIT_USAGE;
	}

	struct cmd_fs fs = { 0 };
	int rr = cmd_fs_resolve(CMD, &argv[optind], 1, &fs);
	if (rr)
		return rr;

	/* the body's command line: options, then MEMBER made absolute (the daemon's cwd) */
	char member[PATH_MAX], *bargv[4];
	int bargc = 0;
	bargv[bargc++] = CMD;
	if (json)
		bargv[bargc++] = "--json";
	if (optind + 1 < argc) {
		const char *m = argv[optind + 1], *end = m;
		while (*end >= '0' && *end <= '9')
			end++;
		if ((*m && !*end) || !realpath(m, member))
			snprintf(member, sizeof(member), "%s", m);
		bargv[bargc++] = member;
	}
	bargv[bargc] = NULL;
	int code = !fs.mounted && optind + 1 < argc ? check_member(&fs, &opts, member) : 0;
	if (!code)
		code = cmd_run(CMD, &fs, &opts, bargc, bargv);
	cmd_fs_free(&fs);
	return code;
}
