// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_fs_timestats.c - `bcachefs fs timestats [--json] [--reset] MOUNTPOINT`:
 * what a fusemount daemon's requests cost, per request type (lookup,
 * create, write, ...): how often each held the engine lock, how long it
 * waited for the lock and held it, the mean, p50, p99 and the maximum.  The
 * counters live in the daemon (fusemount_req.c, req_stats), so this runs
 * there, over the control channel; there is nothing to show offline.
 *
 * Reading is open to whoever may use the control channel; --reset is a
 * change (body "fs timestats --reset": root, or the user who mounted it).
 * Exit: 0; 1 not a mounted filesystem, or the daemon refused; 16 usage.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "ctl.h"

static const char timestats_usage[] =
"Usage: bcachefs fs timestats [--json] [--reset] MOUNTPOINT\n"
"\n"
"What the requests of a fusemount cost, per request type, since it was\n"
"mounted or last reset: calls (each time the request held the engine lock),\n"
"the time spent waiting for the lock and holding it (total, mean, p50, p99 and\n"
"maximum, p50 and p99 as the upper bound of a power-of-two bucket), and the\n"
"share of it spent waiting.  \"command\" is the lock taken by commands on the\n"
"mountpoint.  MOUNTPOINT is the mountpoint or any path inside it.\n"
"\n"
"      --json     one JSON object (man bcachefs: JSON OUTPUT), times in ns\n"
"      --reset    print, then zero the counters (root or the user who mounted)\n"
"  -h, --help     this text\n"
"\n"
"Exit: 0 done; 1 not a mounted filesystem, or refused; 16 usage error.\n";

int cmd_fs_timestats(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json",	no_argument, NULL, 'j' },
		{ "reset",	no_argument, NULL, 'z' },
		{ "help",	no_argument, NULL, 'h' },
		{ NULL }
	};
	const char *cmd = "fs timestats";
	bool json = false, reset = false;
	int o;

	optind = 1;
	while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1)
		switch (o) {
		case 'j': json = true; break;
		case 'z': reset = true; break;
		case 'h': fputs(timestats_usage, stdout); return EXIT_OK;
		default: return cmd_opt_err(cmd, argv, "h");
		}
	if (optind + 1 != argc) {
		cmd_err(cmd, "give one mountpoint (see --help)");
		return EXIT_USAGE;
	}
	char mnt[PATH_MAX];
	if (!cmd_mount_holding(argv[optind], mnt, sizeof(mnt))) {
		cmd_err(cmd, "%s: not in a mounted bcachefs filesystem (the request statistics "
			"are a fusemount daemon's)", argv[optind]);
		return EXIT_FAIL;
	}
	/* the daemon runs the body named first: the reset under the name that needs the rights */
	char *bargv[4];
	int bargc = 0;
	bargv[bargc++] = reset ? "fs timestats --reset" : (char *)cmd;
	if (json)
		bargv[bargc++] = "--json";
	if (reset)
		bargv[bargc++] = "--reset";
	bargv[bargc] = NULL;
	return ctl_forward(cmd, mnt, bargc, bargv);
}
