// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_device_stats.c - `bcachefs device stats [--reset] [--json] [-c] FS`:
 * each member's error counters (read, write and checksum errors), as btrfs
 * `device stats` shows them.
 *
 * The counters live in the superblock (field dev_errors, format version 2:
 * bcachefs_format.h) and in the open filesystem (super.h,
 * bch_dev_errors_get()).  Mounted, the daemon answers (the control
 * channel), so the counts are the live ones.  Offline the filesystem opens
 * read-only (nothing written) unless --reset asks to write: then the check
 * pass reads, and a read-write open zeroes them and writes the superblock.
 * --reset prints the counts as they were, then zeroes them (as btrfs).
 *
 * Mounted, reading is open to anyone who may use the control channel; a
 * reset is a change (body "device stats --reset": root, or the user who
 * mounted it and owns every member).
 *
 * Exit (btrfs device stats): 0; with -c/--check, 64 (bit 6) when any
 * counter shown is nonzero; 1 failure; 16 usage error.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "cmd_ctx.h"
#include "cmds.h"
#include "errcode.h"
#include "fsname.h"
#include "opts.h"
#include "super.h"

#define EXIT_STATS_NONZERO	64	/* btrfs device stats -c: bit 6 */

static const char stats_usage[] =
"Usage: bcachefs device stats [--reset] [--json] [-c] [-o degraded] FS\n"
"\n"
"Show each member's error counters: read and write requests its device\n"
"failed, and extents or btree nodes read from it that failed their checksum\n"
"(damage the device returned as data).  The counts persist in the superblock\n"
"(format version 2), saved with the superblock writes that happen anyway\n"
"(mount and unmount, device commands); see man bcachefs, device stats.\n"
"FS is a mountpoint (or any path inside one), the member devices, or\n"
"UUID=<uuid>.\n"
"\n"
"  -z, --reset    print the counters, then zero them\n"
"  -c, --check    exit 64 when any counter is nonzero\n"
"      --json     one JSON object (man bcachefs: JSON OUTPUT)\n"
"  -o degraded    members may be missing (offline)\n"
"      --help     this text\n"
"\n"
"Exit: 0 done (with -c: every counter zero); 64 with -c when a counter is\n"
"nonzero; 1 failure; 16 usage error.\n";

static const char *err_names[] = {
#define x(n, id) [id] = #n,
	BCH_DEV_ERROR_TYPES()
#undef x
};

struct stats_opts {
	bool	reset, json, check, help;
	struct bch_opts open;
};

static int parse(const char *cmd, int argc, char **argv, struct stats_opts *o)
{
	static const struct option longopts[] = {
		{ "reset",	no_argument, NULL, 'z' },
		{ "check",	no_argument, NULL, 'c' },
		{ "json",	no_argument, NULL, 'j' },
		{ "help",	no_argument, NULL, 'H' },
		{ NULL }
	};
	int c;

	memset(o, 0, sizeof(*o));
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "zco:h", longopts, NULL)) != -1)
		switch (c) {
		case 'z': o->reset = true; break;
		case 'c': o->check = true; break;
		case 'j': o->json = true; break;
		case 'o':
			if (cmd_open_opts_parse(cmd, &o->open, optarg))
				return EXIT_USAGE;
			break;
		case 'h':
		case 'H': o->help = true; break;
		default:
			return cmd_opt_err(cmd, argv, "zco:h");
		}
	return 0;
}

/* Print every member's counters; returns whether any is nonzero. */
static bool print_stats(struct cmd_ctx *x, struct bch_fs *c, bool json)
{
	struct bch_json j;
	bool any = false;

	if (json) {
		json_begin(&j, x->out, false);
		json_uuid(&j, "uuid", c->sb->user_uuid);
		json_open(&j, "devices", true);
	}
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_member *m = bch_sb_member(c->sb, d);
		uint64_t n[BCH_DEV_ERROR_NR], reset;
		bool online = c->devs[d] && c->devs[d]->bdev;
		const char *path = online ? bch_dev_path(c->devs[d]->bdev) : NULL;

		if (!m || !bch_member_exists(m))
			continue;
		bch_dev_errors_get(c, d, n, &reset);
		for (unsigned t = 0; t < BCH_DEV_ERROR_NR; t++)
			any |= n[t] != 0;
		if (json) {
			json_open(&j, NULL, false);
			json_u64(&j, "index", d);
			if (path)
				json_string(&j, "path", path);
			else
				json_null(&j, "path");
			json_bool(&j, "online", online);
			for (unsigned t = 0; t < BCH_DEV_ERROR_NR; t++) {
				char key[32];
				snprintf(key, sizeof(key), "%s_errors", err_names[t]);
				json_u64(&j, key, n[t]);
			}
			if (reset)
				json_time(&j, "reset_time", reset, 0);
			else
				json_null(&j, "reset_time");
			json_close(&j);
			continue;
		}
		/* btrfs's shape: [DEVICE].counter VALUE */
		char name[PATH_MAX + 16];
		if (path)
			snprintf(name, sizeof(name), "%s", path);
		else
			snprintf(name, sizeof(name), "member %u (offline)", d);
		for (unsigned t = 0; t < BCH_DEV_ERROR_NR; t++)
			fprintf(x->out, "[%s].%s_errors %" PRIu64 "\n", name, err_names[t], n[t]);
	}
	if (json)
		json_end(&j);
	return any;
}

int cmd_dev_stats_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct stats_opts o;
	int r;

	if ((r = parse(x->cmd, argc, argv, &o)))
		return r;
	/*
	 * A reset is a change: only under the name whose rights the daemon
	 * checked (a client naming "device stats" with --reset is refused).
	 */
	if (o.reset && x->mounted && strcmp(x->cmd, "device stats --reset")) {
		fprintf(x->err, "bcachefs %s: --reset sent as a read-only request\n", x->cmd);
		return EXIT_USAGE;
	}
	/* the read-only check pass: the answer, unless a reset must write */
	if (x->check_only && o.reset)
		return 0;
	x->lock(x);
	struct bch_fs *c = *x->cp;
	if (!c) {
		x->unlock(x);
		return EXIT_FAIL;
	}
	bool any = print_stats(x, c, o.json);
	if (o.reset && (r = bch_dev_errors_reset(c))) {
		x->unlock(x);
		fprintf(x->err, "bcachefs %s: writing the superblock: %s\n", x->cmd,
			c->err_msg[0] ? c->err_msg : bch_err_str(r));
		return EXIT_FAIL;
	}
	x->unlock(x);
	if (o.check && any)
		return EXIT_STATS_NONZERO;
	return x->check_only ? CMD_CHECK_DONE : 0;
}

int cmd_device_stats(int argc, char **argv)
{
	const char *cmd = "device stats";
	struct stats_opts o;
	int r;

	if ((r = parse(cmd, argc, argv, &o)))
		return r;
	if (o.help) {
		fputs(stats_usage, stdout);
		return EXIT_OK;
	}
	if (optind >= argc) {
		cmd_err(cmd, "give the filesystem (see --help)");
		return EXIT_USAGE;
	}
	char **ops = argv + optind, mnt[PATH_MAX];
	int nops = argc - optind;
	struct stat st;
	if (nops == 1 && !stat(ops[0], &st) && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) &&
	    cmd_mount_holding(ops[0], mnt, sizeof(mnt)))
		ops[0] = mnt;

	/* the body's argv: the command name and the options, without FS */
	char *bargv[8];
	int bargc = 0;
	/* the daemon runs the body named first: the reset under the name that needs the rights */
	bargv[bargc++] = o.reset ? "device stats --reset" : (char *)cmd;
	if (o.reset)
		bargv[bargc++] = "--reset";
	if (o.check)
		bargv[bargc++] = "--check";
	if (o.json)
		bargv[bargc++] = "--json";
	bargv[bargc] = NULL;

	struct cmd_fs fs;
	if ((r = cmd_fs_resolve(cmd, ops, nops, &fs)))
		return r;
	/* a reset writes: on a mount it needs the rights a change needs (ctl.h) */
	r = cmd_run(o.reset ? "device stats --reset" : cmd, &fs, &o.open, bargc, bargv);
	cmd_fs_free(&fs);
	return r;
}
