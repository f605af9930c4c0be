// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_run.c - the front's last step: run a command body on a mounted
 * filesystem (through its daemon) or on its devices (cmd_ctx.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcachefs.h"
#include "cmd_ctx.h"
#include "cmds.h"
#include "ctl.h"
#include "errcode.h"
#include "fs.h"
#include "fsname.h"
#include "opts.h"

static void offline_lock(struct cmd_ctx *x)
{
	(void)x;
}

static volatile int offline_cancel;

static void on_sigint(int sig)
{
	(void)sig;
	offline_cancel = 1;
}

int cmd_run(const char *cmd, const struct cmd_fs *fs, const struct bch_opts *opts,
	    int argc, char **argv)
{
	const struct cmd_ctl_cmd *body = cmd_ctl_find(cmd);
	char err[512];
	struct bch_fs *c = NULL;

	if (!body) {
		cmd_err(cmd, "no such command body (internal error)");
		return EXIT_FAIL;
	}
	if (fs->mounted)
		return ctl_forward(cmd, fs->mnt, argc, argv);

	/* a copy of the device list: add and drop change it */
	unsigned nr = fs->nr;
	char **devs = calloc(nr + 1, sizeof(*devs));
	if (!devs)
		abort();
	for (unsigned i = 0; i < nr; i++)
		devs[i] = strdup(fs->devs[i]);

	int ret;
	/*
	 * A refusal writes nothing: a read-write open already would (the clean
	 * record goes), so a body that can refuse checks on a read-only open first.
	 */
	if (body->checks) {
		struct bch_opts ro;
		if (opts)
			ro = *opts;
		else
			memset(&ro, 0, sizeof(ro));
		bch_opt_set(&ro, Opt_read_only, 1);
		if ((ret = bch_fs_open(devs, nr, &ro, &c, err, sizeof(err)))) {
			cmd_err(cmd, "%s", err);
			free_devs(devs);
			return EXIT_FAIL;
		}
		struct cmd_ctx cx = {
			.cmd = cmd, .out = stdout, .err = stderr, .tty = false,
			.cancel = &offline_cancel, .cp = &c, .devs = &devs, .nr_devs = &nr,
			.open_opts = opts, .lock = offline_lock, .unlock = offline_lock,
			.check_only = true,
		};
		int code = body->run(&cx, argc, argv);
		if (c)
			bch_fs_close(c);
		c = NULL;
		/* the real pass starts from the list as given */
		free_devs(devs);
		nr = fs->nr;
		devs = calloc(nr + 1, sizeof(*devs));
		if (!devs)
			abort();
		for (unsigned i = 0; i < nr; i++)
			devs[i] = strdup(fs->devs[i]);
		if (code) {
			free_devs(devs);
			return code == CMD_CHECK_DONE ? EXIT_OK : code;
		}
	}
	ret = bch_fs_open(devs, nr, opts, &c, err, sizeof(err));
	if (ret) {
		cmd_err(cmd, "%s", err);
		free_devs(devs);
		return EXIT_FAIL;
	}
	cmd_note_degraded(cmd, c, devs, nr);

	struct sigaction sa = { .sa_handler = on_sigint }, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	struct cmd_ctx x = {
		.cmd		= cmd,
		.out		= stdout,
		.err		= stderr,
		.tty		= isatty(STDOUT_FILENO),
		.cancel		= &offline_cancel,
		.cp		= &c,
		.devs		= &devs,
		.nr_devs	= &nr,
		.open_opts	= opts,
		.lock		= offline_lock,
		.unlock		= offline_lock,
	};
	int code = body->run(&x, argc, argv);

	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (c && (ret = bch_fs_close(c))) {
		cmd_err(cmd, "closing: %s", bch_err_str(ret));
		code = code ? code : EXIT_FAIL;
	}
	free_devs(devs);
	return code;
}
