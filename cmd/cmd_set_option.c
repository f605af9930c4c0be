// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_set_option.c - `bcachefs set-fs-option [--NAME=VALUE...] DEVICE...`:
 * change the filesystem options stored in the superblock of an unmounted
 * filesystem.
 *
 * Only options that may change after format (OPT_RUNTIME in opts.h) are
 * accepted; the others are refused by name with the reason.  The change is
 * written to the superblock of every member device (bch_write_super()).
 * background_target and background_compression say what rebalance must do
 * with data already written, so changing one schedules a rebalance scan of
 * every inode in the same open; the other options apply to what is written
 * from then on, and the command says so.
 *
 * Invariants
 *   (1) Nothing is written unless every option given is accepted: names and
 *       values are checked first, then everything that needs the filesystem
 *       (target labels, replicas against the devices) on a read-only open;
 *       only then is it opened read-write.
 *   (2) The scan is scheduled (and the journal flushed) before the
 *       superblock with the new options is written: a crash in between
 *       leaves a scan with the old options (harmless), never new options
 *       without their scan.
 *   (3) A filesystem mounted through fusemount (named by its mountpoint or
 *       its devices) is changed by its daemon: the front sends the options
 *       over the control channel (ctl.h) and the body checks and applies
 *       them on the live filesystem under the daemon's lock, so the running
 *       filesystem uses the new values at once.  Only root, or the user who
 *       mounted and owns every member device, may do it.
 *
 * Split per cmd_ctx.h: the front (cmd_set_fs_option) parses and, offline,
 * checks on a read-only open; the body (cmd_set_fs_option_body) re-parses
 * its argv ("set-fs-option" then --NAME=VALUE...), resolves and applies.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "cmd_ctx.h"
#include "cmds.h"
#include "ctl.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsname.h"
#include "opts.h"
#include "rebalance.h"
#include "super.h"

#define SET_MAX		BCH_OPT_NR

struct set_one {
	enum bch_opt_id	id;
	const char	*arg;		/* as given */
	uint64_t	v;		/* parsed (targets: once the labels are known) */
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs set-fs-option [--NAME=VALUE...] [-o degraded] FS\n"
"Change filesystem options stored in the superblock; every member device's\n"
"superblock is written.  FS: the member devices (DEVICE[:DEVICE...]...),\n"
"or the mountpoint of a fusemount (the daemon changes them, and the mounted\n"
"filesystem uses the new values at once: root, or the user who mounted and\n"
"owns every member device).\n"
"\n"
"Options that can change after format (\"runtime\" in bcachefs help-opts):\n");
	for (unsigned i = 0; i < BCH_OPT_NR; i++)
		if ((bch_opt_table[i].flags & (OPT_RUNTIME | OPT_FS)) == (OPT_RUNTIME | OPT_FS))
			fprintf(f, "      --%s=VALUE\n", bch_opt_table[i].name);
	fprintf(f,
"Names take dashes or underscores; --NAME VALUE works too (a yes/no option\n"
"alone means yes).  Targets take a label, a device index, or none.\n"
"\n"
"background_target and background_compression apply to data already written:\n"
"the change schedules a rebalance of every file, which `bcachefs data\n"
"rebalance FS` runs (or fusemount in the background).  The others\n"
"apply to what is written from now on (existing data keeps its checksums,\n"
"compression and copies until it is rewritten).\n"
"Options fixed at format (block_size, btree_node_size, encoded_extent_max,\n"
"str_hash, ...) are refused, as are open-time and per-device options.  When\n"
"anything is refused nothing is written; nor when every value given is the\n"
"stored one already (\"unchanged\").\n"
"\n"
"  -o degraded       change the members present when others are missing and\n"
"                    the present ones hold a copy of everything (each missing\n"
"                    one is named on stderr; it takes the options of the\n"
"                    others when it is given again)\n"
"      --help        this text\n"
"\n"
"Exit: 0 changed, 1 refused or failed (option that cannot change, unknown\n"
"label, bad replicas, no rights on a mount, another command running in the\n"
"daemon, I/O error), 16 usage error (unknown option, bad value).\n");
}

/* "bcachefs set-fs-option: ..." on err, after what was printed on out. */
__attribute__((format(printf, 3, 4)))
static void serr(FILE *out, FILE *err, const char *fmt, ...)
{
	va_list args;

	fflush(out);
	fprintf(err, "bcachefs set-fs-option: ");
	va_start(args, fmt);
	vfprintf(err, fmt, args);
	va_end(args);
	fputc('\n', err);
	fflush(err);
}

/* Why option id cannot be changed by set-fs-option (NULL: it can). */
static const char *refusal(enum bch_opt_id id)
{
	unsigned fl = bch_opt_table[id].flags;

	if ((fl & OPT_RUNTIME) && (fl & OPT_FS))
		return NULL;
	if (fl & OPT_DEVICE)
		return "a per-device option, fixed when the device is formatted";
	if ((fl & OPT_FS) && (fl & OPT_MOUNT))
		return "fixed at format; it can be given for one open with -o";
	if (fl & (OPT_FORMAT | OPT_FS))
		return "fixed at format: the on-disk layout depends on it";
	if (fl & OPT_MOUNT)
		return "an open option, not stored: give it with -o when opening";
	return "internal";
}

/* Options rebalance acts on: changing one schedules a scan of every inode. */
static bool rebalance_opt(enum bch_opt_id id)
{
	return id == Opt_background_target || id == Opt_background_compression;
}

/*
 * Parse the command line; returns the exit code on error, -1 to go on.
 * The body passes dev_args and open NULL: its argv holds no devices, and
 * -o (how the front opens the devices) is not passed on.
 */
static int parse_args(int argc, char *argv[], struct set_one *set, unsigned *nr_set,
		      char ***dev_args, unsigned *nr_dev_args, struct bch_opts *open,
		      FILE *out, FILE *err)
{
	unsigned nr_devs = 0;

	*nr_set = 0;
	if (dev_args) {
		*nr_dev_args = 0;
		*dev_args = calloc(argc, sizeof(char *));
		if (!*dev_args)
			abort();
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(out);
			return EXIT_OK;
		}
		if (!dev_args && (a[0] != '-' || !strcmp(a, "--"))) {
			serr(out, err, "unexpected argument '%s'", a);
			return EXIT_USAGE;
		}
		if (open && !strncmp(a, "-o", 2)) {
			const char *list = a[2] ? a + 2 : i + 1 < argc ? argv[++i] : NULL;
			if (!list) {
				serr(out, err, "-o needs degraded or very_degraded");
				return EXIT_USAGE;
			}
			if (cmd_open_opts_parse("set-fs-option", open, list))
				return EXIT_USAGE;
			continue;
		}
		if (!strcmp(a, "--")) {
			while (++i < argc)
				(*dev_args)[nr_devs++] = argv[i];
			break;
		}
		if (a[0] != '-') {
			(*dev_args)[nr_devs++] = argv[i];
			continue;
		}
		char name[64];
		const char *eq = strchr(a, '='), *val = eq ? eq + 1 : NULL;
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);
		int id;

		if (strncmp(a, "--", 2) || nl - 2 >= sizeof(name)) {
			serr(out, err, "unknown option '%s'", a);
			return EXIT_USAGE;
		}
		snprintf(name, sizeof(name), "%.*s", (int)(nl - 2), a + 2);
		if ((id = bch_opt_lookup(name)) < 0) {
			serr(out, err, "unknown option '%s' (bcachefs help-opts lists them)", name);
			return EXIT_USAGE;
		}
		const struct bch_option *o = &bch_opt_table[id];
		if (!val && o->type != BCH_OPT_BOOL) {
			if (i + 1 >= argc) {
				serr(out, err, "%s: needs a value", o->name);
				return EXIT_USAGE;
			}
			val = argv[++i];
		}
		const char *why = refusal(id);
		if (why) {
			serr(out, err, "%s cannot be changed: %s; nothing written", o->name, why);
			return EXIT_FAIL;
		}
		for (unsigned j = 0; j < *nr_set; j++)
			if (set[j].id == (enum bch_opt_id)id) {
				serr(out, err, "%s given twice", o->name);
				return EXIT_USAGE;
			}
		set[*nr_set] = (struct set_one) { .id = id, .arg = val ? val : "" };
		if (o->type != BCH_OPT_TARGET) {
			char msg[256];
			if (bch_opt_parse(id, set[*nr_set].arg, &set[*nr_set].v, msg, sizeof(msg))) {
				serr(out, err, "%s", msg);
				return EXIT_USAGE;
			}
		}
		(*nr_set)++;
	}
	if (dev_args)
		*nr_dev_args = nr_devs;
	if (!*nr_set || (dev_args && !nr_devs)) {
		serr(out, err, !*nr_set ? "no option given" : "no device given");
		usage(err);
		return EXIT_USAGE;
	}
	return -1;
}

/* Copies of metadata or data need that many devices of durability 1 or more. */
static int check_replicas(struct bch_fs *c, const struct bch_opts *o, char *err, size_t len)
{
	unsigned durable = 0;

	for (unsigned i = 0; i < bch_sb_nr_members(c->sb); i++) {
		struct bch_member *m = bch_sb_member(c->sb, i);
		durable += bch_member_exists(m) && m->durability > 0 &&
			   m->state == BCH_MEMBER_STATE_rw;
	}
	static const struct { enum bch_opt_id id, req; } r[] = {
		{ Opt_metadata_replicas, Opt_metadata_replicas_required },
		{ Opt_data_replicas,	 Opt_data_replicas_required },
	};
	for (unsigned i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		const char *name = bch_opt_table[r[i].id].name;
		/* metadata copies on one device (format version 2): two per device */
		bool two_per_dev = r[i].id == Opt_metadata_replicas && bch_fs_has_v2(c);
		if (two_per_dev && o->v[r[i].id] > 2 * durable) {
			snprintf(err, len, "%s=%" PRIu64 " needs %" PRIu64 " read-write devices of "
				 "durability 1 or more, two copies per device at most (the filesystem "
				 "has %u)", name, o->v[r[i].id], (o->v[r[i].id] + 1) / 2, durable);
			return -1;
		}
		if (!two_per_dev && o->v[r[i].id] > durable) {
			snprintf(err, len, "%s=%" PRIu64 " needs %" PRIu64 " read-write devices of "
				 "durability 1 or more, one per copy (the filesystem has %u)",
				 name, o->v[r[i].id], o->v[r[i].id], durable);
			return -1;
		}
		if (o->v[r[i].id] < o->v[r[i].req]) {
			snprintf(err, len, "%s=%" PRIu64 " is below %s (%" PRIu64 "), fixed at format",
				 name, o->v[r[i].id], bch_opt_table[r[i].req].name, o->v[r[i].req]);
			return -1;
		}
	}
	return 0;
}

/*
 * Resolve targets against c's labels and check the result as a whole
 * (invariant 1).  On success *after holds the superblock options with the
 * changes applied.  Messages on x's streams.
 */
static int resolve(struct cmd_ctx *x, struct bch_fs *c, const char *devs, struct set_one *set,
		   unsigned nr_set, struct bch_opts *after)
{
	char msg[512];

	bch_opts_from_sb(after, c->sb);
	for (unsigned i = 0; i < nr_set; i++) {
		if (bch_opt_table[set[i].id].type == BCH_OPT_TARGET &&
		    bch_target_parse(c->sb, set[i].arg, &set[i].v)) {
			serr(x->out, x->err, "%s: %s: no label or device '%s' (nothing written)",
			     devs, bch_opt_table[set[i].id].name, set[i].arg);
			return EXIT_FAIL;
		}
		after->v[set[i].id] = set[i].v;
	}
	if (check_replicas(c, after, msg, sizeof(msg))) {
		serr(x->out, x->err, "%s: %s (nothing written)", devs, msg);
		return EXIT_FAIL;
	}
	return -1;
}

static void value_text(struct bch_fs *c, enum bch_opt_id id, uint64_t v, char *buf, size_t len)
{
	if (bch_opt_table[id].type == BCH_OPT_TARGET) {
		if (v)
			bch_target_to_text(c->sb, v, buf, len);
		else
			snprintf(buf, len, "none");
	} else {
		bch_opt_to_text(id, v, buf, len);
	}
}

/* Apply the checked changes to an open read-write filesystem (invariant 2). */
static int apply(struct cmd_ctx *x, struct bch_fs *c, const char *devs, const struct set_one *set,
		 unsigned nr_set, const struct bch_opts *after)
{
	bool scan = false;
	int r;

	for (unsigned i = 0; i < nr_set; i++) {
		char from[128], to[128];
		uint64_t old = c->opts.v[set[i].id];

		value_text(c, set[i].id, old, from, sizeof(from));
		value_text(c, set[i].id, set[i].v, to, sizeof(to));
		c->opts.v[set[i].id] = set[i].v;
		bool changed = old != set[i].v;
		scan |= changed && rebalance_opt(set[i].id);
		fprintf(x->out, "%s: %s -> %s%s\n", bch_opt_table[set[i].id].name, from, to,
			!changed ? " (unchanged)" :
			rebalance_opt(set[i].id) ? " (existing data: rebalance scheduled)" :
			" (applies to what is written from now on)");
	}
	if (scan) {
		c->err_msg[0] = 0;
		if ((r = bch_rebalance_schedule(c, 0)) || (r = bch_fs_fsync(c))) {
			serr(x->out, x->err, "%s: scheduling rebalance: %s", devs,
			     c->err_msg[0] ? c->err_msg : bch_err_str(r));
			return r;
		}
	}
	bch_opts_to_sb(after, c->sb);
	if ((r = bch_write_super(c)))
		serr(x->out, x->err, "%s: writing the superblock: %s", devs, bch_err_str(r));
	return r;
}

/* The member devices joined by ':', for messages. */
static void dev_names(char * const *devs, unsigned nr, char *buf, size_t len)
{
	buf[0] = 0;
	for (unsigned i = 0, n = 0; i < nr && n < len; i++)
		n += snprintf(buf + n, len - n, "%s%s", i ? ":" : "", devs[i]);
}

/* The body (cmd_ctx.h): argv is "set-fs-option" then --NAME=VALUE... */
int cmd_set_fs_option_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct set_one set[SET_MAX];
	struct bch_opts after;
	char names[1024];
	unsigned nr_set;
	int ret = parse_args(argc, argv, set, &nr_set, NULL, NULL, NULL, x->out, x->err);

	if (ret >= 0)
		return ret;
	x->lock(x);
	struct bch_fs *c = *x->cp;
	dev_names(*x->devs, *x->nr_devs, names, sizeof(names));
	if (c->read_only) {
		x->unlock(x);
		serr(x->out, x->err, "%s: open read-only (mounted with -o ro?): nothing written", names);
		return EXIT_FAIL;
	}
	ret = resolve(x, c, names, set, nr_set, &after);
	if (ret < 0)
		ret = apply(x, c, names, set, nr_set, &after) ? EXIT_FAIL : EXIT_OK;
	x->unlock(x);
	return ret;
}

/*
 * Offline, invariant (1): check everything that needs the filesystem on a
 * read-only open, so that a refusal writes nothing.  -1 to go on.
 */
static int check_offline(const struct cmd_fs *fs, const struct bch_opts *open,
			 struct set_one *set, unsigned nr_set)
{
	struct cmd_ctx x = { .cmd = "set-fs-option", .out = stdout, .err = stderr };
	struct bch_opts ro_opts = *open, before, after;
	char names[1024], err[512];
	struct bch_fs *c;
	int ret;

	dev_names(fs->devs, fs->nr, names, sizeof(names));
	bch_opt_set(&ro_opts, Opt_read_only, 1);
	if (bch_fs_open(fs->devs, fs->nr, &ro_opts, &c, err, sizeof(err))) {
		cmd_err("set-fs-option", "%s", err);
		return EXIT_FAIL;
	}
	ret = resolve(&x, c, names, set, nr_set, &after);
	/* every value is the stored one already: nothing to write (not even the open's) */
	bch_opts_from_sb(&before, c->sb);
	bool same = ret < 0;
	for (unsigned i = 0; same && i < nr_set; i++)
		same = before.v[set[i].id] == set[i].v;
	for (unsigned i = 0; same && i < nr_set; i++) {
		char v[128];
		value_text(c, set[i].id, set[i].v, v, sizeof(v));
		printf("%s: %s -> %s (unchanged)\n", bch_opt_table[set[i].id].name, v, v);
	}
	bch_fs_close(c);
	return same ? EXIT_OK : ret;
}

int cmd_set_fs_option(int argc, char *argv[])
{
	struct set_one set[SET_MAX];
	struct cmd_fs fs = { 0 };
	char **dev_args, **bargv = NULL;
	unsigned nr_set, nr_dev_args;
	struct bch_opts open;
	memset(&open, 0, sizeof(open));
	int ret = parse_args(argc, argv, set, &nr_set, &dev_args, &nr_dev_args, &open, stdout, stderr);

	if (ret >= 0)
		goto out;
	if ((ret = cmd_fs_resolve("set-fs-option", dev_args, nr_dev_args, &fs)))
		goto out;
	if (!fs.mounted && (ret = check_offline(&fs, &open, set, nr_set)) >= 0)
		goto out;

	/* the body's argv: the options, spelled one way, without the devices */
	bargv = calloc(nr_set + 2, sizeof(char *));
	if (!bargv)
		abort();
	bargv[0] = strdup("set-fs-option");
	for (unsigned i = 0; i < nr_set; i++)
		if (asprintf(&bargv[i + 1], "--%s=%s", bch_opt_table[set[i].id].name, set[i].arg) < 0)
			abort();
	ret = cmd_run("set-fs-option", &fs, &open, nr_set + 1, bargv);
out:
	free_devs(bargv);
	cmd_fs_free(&fs);
	free(dev_args);
	return ret;
}
