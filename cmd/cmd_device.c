// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_device.c - bcachefs device {add,remove,evacuate,set-state,set-label,
 * online,offline,resize} and bcachefs data rereplicate.
 *
 * Each command has a front (cmd_device(), cmd_data_rereplicate()) and a
 * body (dev_*_body) as cmd_ctx.h describes: the same body runs here on
 * the devices, or in the fusemount daemon on a mounted filesystem.  Bodies
 * take the engine lock for one step at a time; long work (evacuate,
 * rereplicate, a shrink) goes in steps of STEP_BYTES, checks the cancel
 * flag between steps, and shows progress.  Interrupted, a rerun resumes:
 * the jobs keep no state on disk (data_job.h).
 *
 * Exit codes: 0 done; 1 refused, failed, or work left that could not be
 * done (the summary says what and why); 16 usage.
 */
#include <getopt.h>
#include <stdarg.h>
#include <uuid/uuid.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "cmd_ctx.h"
#include "cmds.h"
#include "data_job.h"
#include "device.h"
#include "errcode.h"
#include "fs.h"
#include "fsname.h"
#include "opts.h"
#include "progress.h"
#include "super.h"

#define STEP_BYTES	(4ULL << 20)

/* getopt is not reentrant: bodies in the daemon parse one at a time */
static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------ options */

struct dev_opts {
	const char	*label;
	unsigned	durability;
	bool		durability_set;
	uint64_t	fs_size, bucket_size;
	bool		force, force_metadata, discard, json, help;
	struct bch_opts	open;		/* -o: how to open the devices (degraded, ...) */
	int		nr_ops;		/* operands */
	char		**ops;
};

enum { O_LABEL = 256, O_DURABILITY, O_FS_SIZE, O_BUCKET, O_FORCE_META, O_JSON, O_DISCARD };

static const struct option long_opts[] = {
	{ "label",		required_argument, NULL, O_LABEL },
	{ "durability",		required_argument, NULL, O_DURABILITY },
	{ "fs-size",		required_argument, NULL, O_FS_SIZE },
	{ "bucket-size",	required_argument, NULL, O_BUCKET },
	{ "bucket",		required_argument, NULL, O_BUCKET },
	{ "discard",		no_argument,	   NULL, O_DISCARD },
	{ "force",		no_argument,	   NULL, 'f' },
	{ "force-metadata",	no_argument,	   NULL, O_FORCE_META },
	{ "json",		no_argument,	   NULL, O_JSON },
	{ "help",		no_argument,	   NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

/* Which options each command takes (a bit per option above). */
static int parse(const char *cmd, int argc, char **argv, const char *allowed, struct dev_opts *o)
{
	int c, ret = 0;

	memset(o, 0, sizeof(*o));
	/*
	 * "-5G" would be taken for the options -5 and -G: no option of ours is
	 * a digit, so a negative number is an operand given wrong.  Named as
	 * given, with what the command wants there.
	 */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (argv[i][0] == '-' && argv[i][1] >= '0' && argv[i][1] <= '9') {
			if (strstr(cmd, "resize"))
				cmd_err(cmd, "'%s': not a size: give the member's new size, smaller than "
					"now to shrink it (fs usage shows its size now)",
					argv[i]);
			else
				cmd_err(cmd, "'%s': a negative number is neither an option nor a member "
					"(a member is its device path, index or UUID; see --help)", argv[i]);
			return EXIT_USAGE;
		}
	pthread_mutex_lock(&parse_lock);
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "fho:", long_opts, NULL)) != -1) {
		const char *name = NULL;
		for (const struct option *lo = long_opts; lo->name; lo++)
			if (lo->val == c)
				name = lo->name;
		if (c != '?' && c != 'h' && name && !strstr(allowed, name)) {
			cmd_err(cmd, "option --%s does not apply here (see --help)", name);
			ret = EXIT_USAGE;
			break;
		}
		switch (c) {
		case O_LABEL:
			o->label = optarg;
			break;
		case O_DURABILITY: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || !*optarg || v > BCH_REPLICAS_MAX) {
				cmd_err(cmd, "--durability %s: a number 0..%u", optarg, BCH_REPLICAS_MAX);
				ret = EXIT_USAGE;
			}
			o->durability = v;
			o->durability_set = true;
			break;
		}
		case O_FS_SIZE:
		case O_BUCKET: {
			uint64_t v;
			if (bch_parse_size(optarg, &v) || !v) {
				cmd_err(cmd, "--%s %s: not a size", name, optarg);
				ret = EXIT_USAGE;
			}
			if (c == O_FS_SIZE)
				o->fs_size = v;
			else
				o->bucket_size = v;
			break;
		}
		case O_DISCARD:
			o->discard = true;
			break;
		case 'f':
			o->force = true;
			break;
		case O_FORCE_META:
			o->force_metadata = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case 'h':
			o->help = true;
			break;
		case 'o': {
			char oerr[256];
			if (bch_opts_parse_list(&o->open, optarg, OPT_MOUNT, oerr, sizeof(oerr))) {
				cmd_err(cmd, "-o %s: %s", optarg, oerr);
				ret = EXIT_USAGE;
			}
			break;
		}
		default:
			ret = cmd_opt_err(cmd, argv, "fho:");
		}
		if (ret)
			break;
	}
	o->nr_ops = argc - optind;
	o->ops = argv + optind;
	pthread_mutex_unlock(&parse_lock);
	return ret;
}

/* ------------------------------------------------------------- helpers */

static void xerr(struct cmd_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void xerr(struct cmd_ctx *x, const char *fmt, ...)
{
	va_list ap;

	fflush(x->out);
	fprintf(x->err, "bcachefs %s: ", x->cmd);
	va_start(ap, fmt);
	vfprintf(x->err, fmt, ap);
	va_end(ap);
	fputc('\n', x->err);
	fflush(x->err);
}

static const char *state_names[] = {
#define x(n, id) [id] = #n,
	BCH_MEMBER_STATES()
#undef x
};

static int state_parse(const char *s)
{
	for (unsigned i = 0; i < BCH_MEMBER_STATE_NR; i++)
		if (!strcmp(s, state_names[i]))
			return i;
	return -1;
}

/* Look the member up under the lock; prints the error. */
static int member(struct cmd_ctx *x, const char *name, unsigned *dev)
{
	char err[512];
	int r;

	x->lock(x);
	r = bch_dev_lookup(*x->cp, *x->devs, *x->nr_devs, name, dev, err, sizeof(err));
	x->unlock(x);
	if (r)
		xerr(x, "%s", err);
	return r ? EXIT_FAIL : 0;
}

static const char *hs(uint64_t bytes, char *buf, size_t len)
{
	bch_human_size(bytes, buf, len);
	return buf;
}

/*
 * Run a data job to its end (or a cancel): steps under the lock, progress
 * between them.  Returns 0, 1 when cancelled, or an exit code after a
 * printed error.
 */
static int run_job(struct cmd_ctx *x, struct bch_data_job *j, const char *what, double *secs)
{
	struct cmd_progress p;
	char err[512];
	int r;

	x->lock(x);
	r = bch_data_job_init(*x->cp, j, err, sizeof(err));
	x->unlock(x);
	if (r) {
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	cmd_progress_init(&p, x->out, x->tty, what);
	do {
		if (*x->cancel) {
			cmd_progress_done(&p);
			*secs = cmd_now() - p.start;
			bch_data_job_exit(j);
			return 1;
		}
		x->lock(x);
		struct bch_fs *c = *x->cp;
		r = c ? bch_data_job_step(c, j, STEP_BYTES) : -ENODEV;
		if (r < 0)
			snprintf(err, sizeof(err), "%s", c && c->err_msg[0] ? c->err_msg : bch_err_str(r));
		x->unlock(x);
		cmd_progress_update(&p, j->bytes_done, j->bytes_total, false);
	} while (r > 0);
	bch_data_job_exit(j);
	cmd_progress_update(&p, j->bytes_done, j->bytes_total, true);
	cmd_progress_done(&p);
	*secs = cmd_now() - p.start;
	if (r < 0) {
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	return 0;
}

static void job_summary(struct cmd_ctx *x, const struct bch_data_job *j, bool json,
			const char *verb, double secs, bool cancelled)
{
	char a[32], b[32];

	if (json) {
		fprintf(x->out, "{\"version\":%d,\"completed\":%s,\"cancelled\":%s,"
			"\"bytes_total\":%" PRIu64 ",\"bytes_moved\":%" PRIu64 ",\"extents_moved\":%" PRIu64
			",\"nodes_moved\":%" PRIu64 ",\"stripes_dissolved\":%" PRIu64 ",\"seconds\":%.3f,"
			"\"stuck\":{\"total\":%" PRIu64 ",\"no_space\":%" PRIu64 ",\"too_few_devices\":%" PRIu64
			",\"unreadable\":%" PRIu64 ",\"raced\":%" PRIu64 "},\"lost_bytes\":%" PRIu64 ",\"problem\":",
			BCH_JSON_VERSION, !j->stuck && !cancelled ? "true" : "false", cancelled ? "true" : "false",
			j->bytes_total, j->bytes_done, j->keys_done, j->nodes_done, j->stripes_done, secs,
			j->stuck, j->stuck_no_space, j->stuck_too_few_devs, j->stuck_unreadable,
			j->stuck_raced, j->lost_sectors << 9);
		if (j->stuck)
			json_str(x->out, j->problem);
		else
			fputs("null", x->out);
		fputs("}\n", x->out);
		return;
	}
	fprintf(x->out, "%s %s (%" PRIu64 " extents, %" PRIu64 " btree nodes) in %.1f s, %s/s\n",
		verb, hs(j->bytes_done, a, sizeof(a)), j->keys_done, j->nodes_done, secs,
		hs(secs > 0 ? (uint64_t)(j->bytes_done / secs) : 0, b, sizeof(b)));
	if (j->stripes_done)
		fprintf(x->out, "Stripes dissolved: %" PRIu64 " (their data is replicated until rebalance "
			"stripes it again)\n", j->stripes_done);
	if (cancelled)
		fprintf(x->out, "Interrupted: run the same command again to go on.\n");
	if (j->stuck) {
		fprintf(x->out, "Left as they are: %" PRIu64 " (no space: %" PRIu64 ", too few devices: %"
			PRIu64 ", unreadable: %" PRIu64 ", changing while moved: %" PRIu64 ")\n",
			j->stuck, j->stuck_no_space, j->stuck_too_few_devs, j->stuck_unreadable,
			j->stuck_raced);
		fprintf(x->out, "Last one: %s\n", j->problem);
	}
}

/* -------------------------------------------------------------- bodies */

int cmd_dev_add_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct dev_opts o;
	char err[512];
	int r;

	if ((r = parse(x->cmd, argc, argv, "label durability fs-size bucket-size bucket discard force json",
		       &o)))
		return r;
	if (o.nr_ops != 1) {
		xerr(x, "give the new device");
		return EXIT_USAGE;
	}
	if (!o.force) {
		char what[256];
		int found = cmd_probe_existing(o.ops[0], true, what, sizeof(what));
		if (found < 0)
			return EXIT_FAIL;
		if (found) {
			xerr(x, "%s: holds %s; -f to overwrite it", o.ops[0], what);
			return EXIT_FAIL;
		}
	}
	struct bch_dev_add_args a = {
		.path = o.ops[0], .label = o.label, .durability = o.durability_set ? o.durability : 1,
		.durability_set = true, .size = o.fs_size, .bucket_size = o.bucket_size,
		.discard = o.discard, .force = o.force,
	};
	unsigned idx = 0;
	double t0 = cmd_now();
	a.dry_run = x->check_only;
	x->lock(x);
	r = bch_dev_add(x->cp, x->devs, x->nr_devs, x->open_opts, &a, &idx, err, sizeof(err));
	if (x->check_only) {
		x->unlock(x);
		if (r)
			xerr(x, "%s", err);
		return r ? EXIT_FAIL : 0;
	}
	x->unlock(x);
	double secs = cmd_now() - t0;
	if (r) {
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	char sz[32], uuid[37] = "";
	x->lock(x);
	struct bch_member *m = *x->cp ? bch_sb_member((*x->cp)->sb, idx) : NULL;
	uint64_t bytes = m ? (uint64_t)m->nbuckets * m->bucket_size << 9 : 0;
	if (m)
		uuid_unparse(m->uuid, uuid);
	x->unlock(x);
	if (o.json) {
		fprintf(x->out, "{\"version\":%d,\"device\":", BCH_JSON_VERSION);
		json_str(x->out, o.ops[0]);
		fprintf(x->out, ",\"member\":%u,\"uuid\":\"%s\",\"size\":%" PRIu64 ",\"seconds\":%.3f}\n",
			idx, uuid, bytes, secs);
	} else
		fprintf(x->out, "Added %s as member %u (%s, uuid %s) in %.3f s\n", o.ops[0], idx,
			hs(bytes, sz, sizeof(sz)), uuid, secs);
	return 0;
}

/* Evacuate dev (first_bucket 0: all of it); ro first. Returns an exit code. */
static int evacuate(struct cmd_ctx *x, unsigned dev, uint64_t first_bucket, bool force,
		    bool force_metadata, bool json, bool remove)
{
	struct bch_data_job j = { .kind = BCH_DATA_JOB_evacuate, .dev = dev,
				  .first_bucket = first_bucket };
	struct bch_dev_holdings h;
	char err[512];
	double secs;
	int r = 0;

	x->lock(x);
	struct bch_fs *c = *x->cp;
	if (!first_bucket) {
		r = bch_dev_remove_check(c, dev, force, force_metadata, &h, err, sizeof(err));
		if (!r && bch_sb_member(c->sb, dev)->state == BCH_MEMBER_STATE_rw)
			r = bch_dev_set_state(c, dev, BCH_MEMBER_STATE_ro, true, err, sizeof(err));
	}
	x->unlock(x);
	if (r) {
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	r = run_job(x, &j, remove ? "device remove: moved" : first_bucket ? "device resize: moved"
				      : "device evacuate: moved", &secs);
	if (r > 1)
		return r;
	bool cancelled = r == 1;
	/* remove --json: the move's summary only when the remove stops here (one object) */
	if (!json || !remove || cancelled || (j.stuck && !force))
		job_summary(x, &j, json, "Moved", secs, cancelled);
	if (cancelled)
		return EXIT_FAIL;
	if (j.stuck && !force) {
		xerr(x, "member %u still holds data: %" PRIu64 " extents or nodes could not be moved "
		     "(last: %s)", dev, j.stuck, j.problem);
		return EXIT_FAIL;
	}
	return 0;
}

static int remove_check(struct cmd_ctx *x, unsigned dev, bool force, bool force_metadata)
{
	struct bch_dev_holdings h;
	char err[512];

	x->lock(x);
	int r = bch_dev_remove_check(*x->cp, dev, force, force_metadata, &h, err, sizeof(err));
	x->unlock(x);
	if (r)
		xerr(x, "%s", err);
	return r ? EXIT_FAIL : 0;
}

int cmd_dev_remove_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct dev_opts o;
	char err[512], a[32];
	unsigned dev;
	int r;

	if ((r = parse(x->cmd, argc, argv, "force force-metadata json", &o)))
		return r;
	if (o.nr_ops != 1) {
		xerr(x, "give the member to remove");
		return EXIT_USAGE;
	}
	x->lock(x);
	r = bch_dev_lookup(*x->cp, *x->devs, *x->nr_devs, o.ops[0], &dev, err, sizeof(err));
	if (r && x->check_only && o.ops[0][0] == '/' && !access(o.ops[0], F_OK)) {
		x->unlock(x);
		return 0;	/* maybe a stale member's device: the real pass sees */
	}
	if (r && o.ops[0][0] == '/' && !access(o.ops[0], F_OK)) {
		/* a remove cut after the others dropped it: its own superblocks are left */
		char e2[512];
		int r2 = bch_dev_wipe_stale(*x->cp, o.ops[0], e2, sizeof(e2));
		x->unlock(x);
		if (!r2) {
			fprintf(x->out, "%s was removed already; its superblocks are wiped now\n", o.ops[0]);
			return 0;
		}
		xerr(x, "%s", r2 == -ENOENT ? err : e2);
		return EXIT_FAIL;
	}
	x->unlock(x);
	if (r) {
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	if (x->check_only)
		return remove_check(x, dev, o.force, o.force_metadata);
	x->lock(x);
	bool missing = bch_dev_missing(*x->cp, dev);
	x->unlock(x);
	/* a missing member's copies are re-made elsewhere as far as they can be */
	if ((r = evacuate(x, dev, 0, o.force, o.force_metadata, o.json, true)))
		return r;
	uint64_t lost = 0;
	x->lock(x);
	r = bch_dev_drop(x->cp, x->devs, x->nr_devs, x->open_opts, dev, o.force, &lost, err, sizeof(err));
	x->unlock(x);
	if (r) {
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	if (o.json)
		fprintf(x->out, "{\"version\":%d,\"removed\":%u,\"was_missing\":%s,\"lost_bytes\":%" PRIu64 "}\n",
			BCH_JSON_VERSION, dev, missing ? "true" : "false", lost << 9);
	else
		fprintf(x->out, "Removed member %u%s\n", dev, missing ? " (it was missing)" : "");
	if (lost)
		xerr(x, "--force: %s of file data had no other copy and is gone (the ranges read as holes)",
		     hs(lost << 9, a, sizeof(a)));
	return 0;
}

int cmd_dev_evacuate_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct dev_opts o;
	unsigned dev;
	int r;

	if ((r = parse(x->cmd, argc, argv, "force force-metadata json", &o)))
		return r;
	if (o.nr_ops != 1) {
		xerr(x, "give the member to evacuate");
		return EXIT_USAGE;
	}
	if ((r = member(x, o.ops[0], &dev)))
		return r;
	if (x->check_only)
		return remove_check(x, dev, o.force, o.force_metadata);
	r = evacuate(x, dev, 0, o.force, o.force_metadata, o.json, false);
	if (!r && !o.json)
		fprintf(x->out, "Member %u holds nothing now and is read-only (`device remove` drops it, "
			"`device set-state rw` takes it back)\n", dev);
	return r;
}

int cmd_dev_set_state_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct dev_opts o;
	char err[512];
	unsigned dev;
	int r, state;

	if ((r = parse(x->cmd, argc, argv, "force", &o)))
		return r;
	if (o.nr_ops != 2 || (state = state_parse(o.ops[0])) < 0) {
		xerr(x, "give a state (rw, ro, failed, spare) and a member");
		return EXIT_USAGE;
	}
	if ((r = member(x, o.ops[1], &dev)))
		return r;
	x->lock(x);
	if (bch_sb_member((*x->cp)->sb, dev)->state == state) {
		x->unlock(x);
		fprintf(x->out, "Member %u is %s already (nothing written)\n", dev, state_names[state]);
		return x->check_only ? CMD_CHECK_DONE : 0;
	}
	r = x->check_only ? bch_dev_set_state_check(*x->cp, dev, state, o.force, err, sizeof(err))
			  : bch_dev_set_state(*x->cp, dev, state, o.force, err, sizeof(err));
	if (x->check_only) {
		x->unlock(x);
		if (r)
			xerr(x, "%s", err);
		return r ? EXIT_FAIL : 0;
	}
	x->unlock(x);
	if (r) {
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	fprintf(x->out, "Member %u is %s\n", dev, state_names[state]);
	return 0;
}

int cmd_dev_set_label_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct dev_opts o;
	char err[512];
	unsigned dev;
	int r;

	if ((r = parse(x->cmd, argc, argv, "", &o)))
		return r;
	if (o.nr_ops != 2) {
		xerr(x, "give a member and a label (\"\" for none)");
		return EXIT_USAGE;
	}
	if ((r = member(x, o.ops[0], &dev)))
		return r;
	if (x->check_only) {
		if (*o.ops[1] && bch_label_check(o.ops[1], err, sizeof(err))) {
			xerr(x, "%s", err);
			return EXIT_FAIL;
		}
		return 0;
	}
	x->lock(x);
	r = bch_dev_set_label(*x->cp, dev, o.ops[1], err, sizeof(err));
	x->unlock(x);
	if (r) {
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	fprintf(x->out, "Member %u has label %s\n", dev, *o.ops[1] ? o.ops[1] : "(none)");
	return 0;
}

/* A shrink that did not happen: the buckets past the new end are the allocator's again. */
static void unlimit(struct cmd_ctx *x, unsigned dev)
{
	x->lock(x);
	struct bch_fs *c = *x->cp;
	struct bch_member *m = c ? bch_sb_member(c->sb, dev) : NULL;
	if (m && bch_member_exists(m) && m->state == BCH_MEMBER_STATE_rw)
		bch_alloc_dev_set_limit(c, dev, UINT64_MAX);
	x->unlock(x);
}

int cmd_dev_resize_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct dev_opts o;
	char err[512], a[32];
	unsigned dev;
	uint64_t size;
	int r;

	if ((r = parse(x->cmd, argc, argv, "json", &o)))
		return r;
	if (o.nr_ops != 2 || bch_parse_size(o.ops[1], &size) || !size) {
		xerr(x, "give a member and its new size (bytes, or with k, M, G, T)");
		return EXIT_USAGE;
	}
	if ((r = member(x, o.ops[0], &dev)))
		return r;
	uint64_t nbuckets;
	x->lock(x);
	struct bch_fs *c = *x->cp;
	/* every refusal before anything moves */
	if ((r = bch_dev_resize_check(c, dev, size, &nbuckets, err, sizeof(err))) ||
	    (x->check_only && nbuckets != bch_sb_member(c->sb, dev)->nbuckets)) {
		x->unlock(x);
		if (r)
			xerr(x, "%s", err);
		return r ? EXIT_FAIL : 0;
	}
	struct bch_member *m = bch_sb_member(c->sb, dev);
	if (nbuckets == m->nbuckets) {
		x->unlock(x);
		fprintf(x->out, "Member %u has that size already (nothing written)\n", dev);
		return x->check_only ? CMD_CHECK_DONE : 0;
	}
	bool shrink = nbuckets < m->nbuckets && nbuckets;
	uint64_t old_bytes = (uint64_t)m->nbuckets * m->bucket_size << 9;
	if (shrink)
		bch_alloc_dev_set_limit(c, dev, nbuckets);
	x->unlock(x);
	if (r) {
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	if (shrink && (r = evacuate(x, dev, nbuckets, false, false, o.json, false))) {
		unlimit(x, dev);
		return r;
	}
	x->lock(x);
	r = bch_dev_resize(x->cp, x->devs, x->nr_devs, x->open_opts, dev, size, err, sizeof(err));
	x->unlock(x);
	if (r) {
		if (shrink)
			unlimit(x, dev);
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	x->lock(x);
	m = bch_sb_member((*x->cp)->sb, dev);
	uint64_t new_bytes = (uint64_t)m->nbuckets * m->bucket_size << 9;
	x->unlock(x);
	if (o.json)
		fprintf(x->out, "{\"version\":%d,\"member\":%u,\"old_size\":%" PRIu64 ",\"size\":%" PRIu64 "}\n",
			BCH_JSON_VERSION, dev, old_bytes, new_bytes);
	else
		fprintf(x->out, "Member %u now has %s of buckets\n", dev, hs(new_bytes, a, sizeof(a)));
	return 0;
}

/*
 * device online: is path a member this filesystem lacks?  Decided from its
 * superblock, before the filesystem is closed to be opened again with it (a
 * close writes the superblocks).  0 to go on, else the exit code (printed).
 */
static int online_check(struct cmd_ctx *x, const char *path)
{
	struct bch_blockdev *bd;
	struct bch_sb *sb = NULL;
	struct bch_sb_read_report rep;
	char real[PATH_MAX], ri[PATH_MAX];
	int r, ret = 0;

	x->lock(x);
	struct bch_fs *c = *x->cp;
	if (!realpath(path, real))
		snprintf(real, sizeof(real), "%s", path);
	for (unsigned i = 0; c && i < c->nr_devs && !ret; i++) {
		const char *p = c->devs[i] && c->devs[i]->bdev ? bch_dev_path(c->devs[i]->bdev) : NULL;
		if (p && realpath(p, ri) && !strcmp(ri, real)) {
			xerr(x, "%s: member %u is online already (nothing to do)", path, i);
			ret = EXIT_FAIL;
		}
	}
	x->unlock(x);
	if (ret)
		return ret;
	memset(&rep, 0, sizeof(rep));
	if ((r = bch_dev_open(path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &bd))) {
		xerr(x, "%s: %s", path, bch_err_str(r));
		return EXIT_FAIL;
	}
	r = bch_sb_read(bd, &sb, &rep);
	bch_dev_close(bd);
	if (r) {
		xerr(x, "%s: not a member of this filesystem: %s", path, bch_err_str(r));
		return EXIT_FAIL;
	}
	x->lock(x);
	c = *x->cp;
	if (!c)
		ret = EXIT_FAIL;
	else if (memcmp(sb->uuid, c->sb->uuid, sizeof(sb->uuid))) {
		xerr(x, "%s: a device of another filesystem", path);
		ret = EXIT_FAIL;
	} else if (sb->dev_idx >= c->nr_devs || !bch_dev_missing(c, sb->dev_idx)) {
		xerr(x, "%s: member %u, which is not missing here (removed, or another copy of a "
		     "member that is online)", path, sb->dev_idx);
		ret = EXIT_FAIL;
	}
	x->unlock(x);
	free(sb);
	return ret;
}

static int dev_online_body(struct cmd_ctx *x, int argc, char **argv, bool online)
{
	struct dev_opts o;
	char err[512];
	unsigned dev = 0;
	int r;

	if ((r = parse(x->cmd, argc, argv, "", &o)))
		return r;
	if (o.nr_ops != 1) {
		xerr(x, online ? "give the device to bring online" : "give the member to take offline");
		return EXIT_USAGE;
	}
	if (!x->mounted) {
		xerr(x, "the filesystem is not mounted: nothing holds its devices (name them when you "
		     "open it, or leave one out with -o degraded)");
		return EXIT_FAIL;
	}
	if (!online && (r = member(x, o.ops[0], &dev)))
		return r;
	if (online && (r = online_check(x, o.ops[0])))
		return r;
	x->lock(x);
	struct bch_fs *c = *x->cp;
	char **devs = *x->devs;
	unsigned nr = *x->nr_devs;
	struct bch_opts opts;
	if (x->open_opts)
		opts = *x->open_opts;
	else
		memset(&opts, 0, sizeof(opts));
	char **nd = calloc(nr + 2, sizeof(*nd));
	unsigned n = 0;
	if (!nd)
		abort();
	if (online) {
		for (unsigned i = 0; i < nr; i++)
			nd[n++] = devs[i];
		nd[n++] = o.ops[0];
		if (!(c->devs_missing & (c->devs_missing - 1)))
			opts.v[Opt_degraded] = 0;	/* the last missing one comes back */
	} else {
		const char *path = c->devs[dev] && c->devs[dev]->bdev ? bch_dev_path(c->devs[dev]->bdev) : NULL;
		if (!path) {
			x->unlock(x);
			free(nd);
			xerr(x, "member %u is offline already", dev);
			return EXIT_FAIL;
		}
		char real[PATH_MAX], ri[PATH_MAX];
		if (!realpath(path, real))
			snprintf(real, sizeof(real), "%s", path);
		for (unsigned i = 0; i < nr; i++)
			if (!realpath(devs[i], ri) || strcmp(ri, real))
				nd[n++] = devs[i];
		bch_opt_set(&opts, Opt_degraded, 1);
	}
	/* close, open again with the new list; on failure the old list */
	r = bch_fs_close(c);
	*x->cp = NULL;
	if (!r)
		r = bch_fs_open(nd, n, &opts, x->cp, err, sizeof(err));
	if (r) {
		char e2[256];
		struct bch_opts back = opts;
		bch_opt_set(&back, Opt_degraded, 1);
		if (bch_fs_open(devs, nr, &back, x->cp, e2, sizeof(e2)))
			*x->cp = NULL;
		x->unlock(x);
		free(nd);
		xerr(x, "%s", err);
		return EXIT_FAIL;
	}
	/* the daemon's list becomes the new one */
	char **keep = calloc(n + 1, sizeof(*keep));
	for (unsigned i = 0; keep && i < n; i++)
		keep[i] = strdup(nd[i]);
	for (unsigned i = 0; i < nr; i++)
		free(devs[i]);
	free(devs);
	*x->devs = keep;
	*x->nr_devs = n;
	x->unlock(x);
	free(nd);
	fprintf(x->out, online ? "%s is online (`data rereplicate` gives what was written meanwhile its copies)\n"
			       : "Member %s is offline (the filesystem runs degraded)\n",
		o.ops[0]);
	return 0;
}

int cmd_dev_online_body(struct cmd_ctx *x, int argc, char **argv)
{
	return dev_online_body(x, argc, argv, true);
}

int cmd_dev_offline_body(struct cmd_ctx *x, int argc, char **argv)
{
	return dev_online_body(x, argc, argv, false);
}

int cmd_data_rereplicate_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct dev_opts o;
	struct bch_data_job j = { .kind = BCH_DATA_JOB_rereplicate };
	double secs;
	int r;

	if ((r = parse(x->cmd, argc, argv, "json", &o)))
		return r;
	if (o.nr_ops) {
		xerr(x, "unexpected argument '%s'", o.ops[0]);
		return EXIT_USAGE;
	}
	r = run_job(x, &j, "data rereplicate: copied", &secs);
	if (r > 1)
		return r;
	job_summary(x, &j, o.json, "Copied", secs, r == 1);
	if (r == 1)
		return EXIT_FAIL;
	if (j.stuck) {
		xerr(x, "%" PRIu64 " extents or nodes still lack copies (last: %s)", j.stuck, j.problem);
		return EXIT_FAIL;
	}
	return 0;
}

/* --------------------------------------------------------------- fronts */

static const char device_usage[] =
"Usage: bcachefs device COMMAND [OPTION]... [FS] ARGS\n"
"\n"
"Change the members of a filesystem.  FS is the mountpoint of a fusemount,\n"
"its member devices (several arguments or joined by ':'), or UUID=<uuid>.\n"
"Without FS (one operand fewer: device remove /dev/sdX), MEMBER is a\n"
"member's device path and its superblock names the filesystem: mounted,\n"
"the fusemount holding it; else the members it lists, looked for among the\n"
"block devices (a block device member) or the files beside it (an image).\n"
"On a mounted filesystem the daemon does the work (the control channel);\n"
"killing the command leaves it running, Ctrl-C stops it where a rerun\n"
"goes on.\n"
"\n"
"Commands:\n"
"  add [--label L] [--durability N] [--fs-size S] [--bucket-size B] [--discard] [-f] FS NEWDEV\n"
"        format NEWDEV as a new member and use it at once; refused when NEWDEV\n"
"        holds a filesystem or partition table, unless -f\n"
"  remove [--force] [--force-metadata] [FS] MEMBER\n"
"        move everything off MEMBER, then drop it and wipe its superblocks;\n"
"        refused up front when the others cannot hold its data or keep the\n"
"        copies asked for.  --force accepts fewer copies of file data (and\n"
"        drops the data only a lost member held), --force-metadata of metadata.\n"
"        Erasure-coded stripes with a block on MEMBER are dissolved: their data\n"
"        is written replicated elsewhere and striped again by rebalance\n"
"  evacuate [--force] [--force-metadata] [FS] MEMBER\n"
"        the same move, keeping MEMBER (read-only, empty)\n"
"  set-state [--force] {rw|ro|failed|spare} [FS] MEMBER\n"
"  set-label [FS] MEMBER LABEL        (\"\" removes the label)\n"
"  resize [FS] MEMBER SIZE            grow (an image file grows with it) or shrink\n"
"                                     (the buckets past the new end are emptied first)\n"
"  online [MNT] DEVICE                a mounted filesystem opens a member it lacks\n"
"  offline [MNT] MEMBER               ... or lets one go (it runs degraded)\n"
"  stats [-z|--reset] [-c|--check] [--json] FS   each member's error counters\n"
"\n"
"MEMBER is a member's device path, index (show-super), or UUID.\n"
"Options:  --json  a summary for scripts (add, remove, evacuate, resize)\n"
"          -o degraded  open with members missing (offline; a mounted filesystem\n"
"                       was mounted so); -o very_degraded even if data has no copy\n"
"\n"
"Exit status: 0 done; 1 refused, failed, or work left (the reason is printed);\n"
"16 usage error.\n";

/*
 * path: a device path, made absolute when it exists (a member may be named by
 * index or UUID too); create: one that need not exist yet (device add).
 */
static char *absolute(const char *p, bool path, bool create)
{
	char buf[PATH_MAX], cwd[PATH_MAX];

	if (!path || p[0] == '/')
		return strdup(p);
	if (!access(p, F_OK) && realpath(p, buf))
		return strdup(buf);
	/* a member index or UUID (how a missing member is named), not a file here */
	uuid_t u;
	if (!uuid_parse(p, u) || (*p && strspn(p, "0123456789") == strlen(p)))
		return strdup(p);
	/* not there yet (an image file device add creates): relative to our cwd */
	if (create && getcwd(cwd, sizeof(cwd)) && (size_t)snprintf(buf, sizeof(buf), "%s/%s", cwd, p) < sizeof(buf))
		return strdup(buf);
	return strdup(p);
}

/* A member index or UUID (not a file here): a word only a MEMBER can be. */
static bool member_word(const char *w)
{
	uuid_t u;

	return access(w, F_OK) && ((*w && strspn(w, "0123456789") == strlen(w)) || !uuid_parse(w, u));
}

/*
 * Split argv into FS operands (all but the last n_after operands) and the
 * body's argv (options + the last n_after operands, made absolute when
 * they name existing files).  Then resolve FS and run.
 *
 * FS or a lone member: the operands after FS are counted (n_after), so
 * exactly n_after operands means no FS was given.  Then the one at index
 * lone among them (-1: the command has no such form) names a member by its
 * device path, and its superblock names the filesystem
 * (cmd_fs_resolve_member).  More than n_after: the first ones are FS; one
 * of them after the first that only a member can be (an index or UUID
 * that is no file: "p.img:q.img 0 1") makes it too many arguments, not a
 * missing file.  form is the command's operands for the messages:
 * "[FS] MEMBER".
 */
static int front(const char *cmd, int argc, char **argv, const char *allowed, int n_after,
		 int lone, const char *form, unsigned path_mask)
{
	struct dev_opts o;
	int r;

	if ((r = parse(cmd, argc, argv, allowed, &o)))
		return r;
	if (o.help) {
		fputs(device_usage, stdout);
		return 0;
	}
	if (o.nr_ops < n_after + (lone < 0)) {
		cmd_err(cmd, "too few arguments: bcachefs %s %s (see --help)", cmd, form);
		return EXIT_USAGE;
	}
	int nfs = o.nr_ops - n_after;
	for (int i = 1; i < nfs; i++)
		if (member_word(o.ops[i])) {
			cmd_err(cmd, "too many arguments: '%s' is a member, not a device of FS, and "
				"one is taken: bcachefs %s %s (see --help)", o.ops[i], cmd, form);
			return EXIT_USAGE;
		}
	char **bargv = calloc(argc + 1, sizeof(*bargv));
	int bargc = 0;
	if (!bargv)
		abort();
	bargv[bargc++] = strdup(cmd);
	for (int i = 1; i < argc - o.nr_ops; i++)
		if (strcmp(argv[i], "-o") && strncmp(argv[i], "-o", 2) && (i == 1 || strcmp(argv[i - 1], "-o")))
			bargv[bargc++] = strdup(argv[i]);	/* -o is the front's: how to open */
	for (int i = 0; i < n_after; i++)
		bargv[bargc++] = absolute(o.ops[nfs + i], path_mask >> i & 1,
					  !strcmp(cmd, "device add"));

	struct cmd_fs fs;
	bool mnt_only = !strcmp(cmd, "device online") || !strcmp(cmd, "device offline");
	if (nfs) {
		r = cmd_fs_resolve(cmd, o.ops, nfs, &fs);
	} else {
		const char *m = o.ops[lone];
		struct stat st;
		/* a list, UUID= or a mountpoint: FS with its member left out */
		if (!strncmp(m, "UUID=", 5) || (!stat(m, &st) && S_ISDIR(st.st_mode)) ||
		    (strchr(m, ':') && access(m, F_OK))) {
			cmd_err(cmd, "too few arguments: %s names a filesystem; give the member too: "
				"bcachefs %s %s", m, cmd, form);
			r = EXIT_USAGE;
			goto out;
		}
		if (member_word(m)) {
			cmd_err(cmd, "'%s': a member index or UUID needs the filesystem before it; "
				"alone, a member is named by its device: bcachefs %s %s", m, cmd, form);
			r = EXIT_USAGE;
			goto out;
		}
		if (access(m, F_OK)) {
			cmd_err(cmd, "%s: %s", m, strerror(errno));
			r = EXIT_FAIL;
			goto out;
		}
		r = cmd_fs_resolve_member(cmd, m, (mnt_only ? CMD_FS_MOUNTED_ONLY : 0) |
					  (o.open.v[Opt_degraded] || o.open.v[Opt_very_degraded]
					   ? CMD_FS_DEGRADED : 0), &fs);
	}
	if (r)
		goto out;
	/* online/offline change what a daemon holds: unmounted, there is nothing to change */
	if (!fs.mounted && mnt_only) {
		cmd_err(cmd, "the filesystem is not mounted: nothing holds its devices (name the "
			"devices when you open it, or leave one out with -o degraded); nothing written");
		cmd_fs_free(&fs);
		r = EXIT_FAIL;
		goto out;
	}
	r = cmd_run(cmd, &fs, &o.open, bargc, bargv);
	cmd_fs_free(&fs);
out:
	for (int i = 0; i < bargc; i++)
		free(bargv[i]);
	free(bargv);
	return r;
}

int cmd_device(int argc, char *argv[])
{
	/* after: operands after FS; paths: which of them are paths (made absolute) */
	/* lone: which of them is a lone member when no FS is given (-1: none) */
	static const struct {
		const char *name, *allowed;
		int after, lone;
		unsigned paths;
		const char *form;
	} subs[] = {
		{ "add",	"label durability fs-size bucket-size bucket discard force json", 1, -1, 1, "FS NEWDEV" },
		{ "remove",	"force force-metadata json", 1, 0, 1, "[FS] MEMBER" },
		{ "evacuate",	"force force-metadata json", 1, 0, 1, "[FS] MEMBER" },
		{ "set-state",	"force", 2, 1, 2, "STATE [FS] MEMBER" },
		{ "set-label",	"", 2, 0, 1, "[FS] MEMBER LABEL" },
		{ "resize",	"json", 2, 0, 1, "[FS] MEMBER SIZE" },
		{ "online",	"", 1, 0, 1, "[MNT] DEVICE" },
		{ "offline",	"", 1, 0, 1, "[MNT] MEMBER" },
	};
	char cmd[64];

	if (argc < 2)
		cmd_err("device", "no subcommand given");
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		fputs(device_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "stats")) return cmd_device_stats(argc - 1, argv + 1);	/* cmd_device_stats.c */
	for (unsigned i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		if (strcmp(argv[1], subs[i].name))
			continue;
		snprintf(cmd, sizeof(cmd), "device %s", subs[i].name);
		/* set-state: the state comes first, before FS */
		if (!strcmp(subs[i].name, "set-state")) {
			struct dev_opts o;
			int r = parse(cmd, argc - 1, argv + 1, subs[i].allowed, &o);
			if (r)
				return r;
			if (o.help) {
				fputs(device_usage, stdout);
				return 0;
			}
			if (o.nr_ops < 2 || state_parse(o.ops[0]) < 0) {
				if (o.nr_ops && state_parse(o.ops[0]) < 0)
					cmd_err(cmd, "'%s' is not a state: rw, ro, failed or spare", o.ops[0]);
				else
					cmd_err(cmd, "too few arguments: bcachefs %s %s (see --help)", cmd,
						subs[i].form);
				return EXIT_USAGE;
			}
			/* move the state after FS so the front's split works: FS... STATE MEMBER */
			char *state = o.ops[0];
			memmove(o.ops, o.ops + 1, (o.nr_ops - 1) * sizeof(char *));
			char *mem = o.ops[o.nr_ops - 2];
			o.ops[o.nr_ops - 2] = state;
			o.ops[o.nr_ops - 1] = mem;
			return front(cmd, argc - 1, argv + 1, subs[i].allowed, 2, 1, subs[i].form,
				     subs[i].paths);
		}
		return front(cmd, argc - 1, argv + 1, subs[i].allowed, subs[i].after, subs[i].lone,
			     subs[i].form, subs[i].paths);
	}
	cmd_err("device", "unknown %s '%s' (see bcachefs device --help)",
		argv[1][0] == '-' ? "option" : "subcommand", argv[1]);
	return EXIT_USAGE;
}

static const char rereplicate_usage[] =
"Usage: bcachefs data rereplicate [--json] [-o degraded] FS\n"
"\n"
"Give every extent and btree node the copies its options ask for (after a\n"
"member was lost, or replicas was raised): copies on missing or failed\n"
"members do not count.  An erasure-coded stripe with a block on a missing\n"
"or failed member is dissolved: its data is written replicated (read\n"
"through the stripe) and striped again later by rebalance on the members\n"
"present.  Progress on a terminal; Ctrl-C stops, a rerun goes\n"
"on.  Exit status: 0 every key has its copies; 1 some could not get them\n"
"(the reason is printed: too few devices, no space, no readable copy);\n"
"16 usage error.\n";

int cmd_data_rereplicate(int argc, char *argv[])
{
	struct dev_opts o;
	int r = parse("data rereplicate", argc, argv, "json", &o);

	if (r)
		return r;
	if (o.help) {
		fputs(rereplicate_usage, stdout);
		return 0;
	}
	return front("data rereplicate", argc, argv, "json", 0, -1, "FS", 0);
}
