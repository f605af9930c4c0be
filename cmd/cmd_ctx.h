/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMD_CTX_H
#define _BCACHEFS_CMD_CTX_H

/*
 * cmd_ctx.h - how an administration command runs, offline or inside the
 * fusemount daemon that holds the filesystem.
 *
 * A command that can act on a mounted filesystem (device *, data
 * rereplicate/scrub/rebalance) is split in two:
 *   - the front (in the user's process): parses argv (usage errors and
 *     --help are answered there), names the filesystem (cmd_fs_resolve);
 *     when it is mounted, sends the command line to the daemon over the
 *     control channel (ctl.h) and relays what comes back; otherwise opens it
 *     and calls the body with an offline context;
 *   - the body (struct cmd_ctl_cmd.run): the work, given a context.  In the
 *     daemon, the body runs in a thread of the daemon with a context whose
 *     out/err stream to the client, whose lock() is the daemon's engine lock,
 *     and whose cancel is set when the client asks (Ctrl-C).
 *
 * Rules for bodies: call the engine only between lock() and unlock(), and
 * re-read *x->cp after each lock() (a membership change replaces it); do
 * long work in steps of bounded size with the lock released between them;
 * check *x->cancel between steps (stop at a point a rerun resumes from);
 * print progress with cmd_progress() (ctl.h/cmd_util) and never assume a
 * terminal: x->tty says whether the client's stdout is one.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct bch_fs;
struct bch_opts;

struct cmd_ctx {
	const char	*cmd;		/* "device evacuate": for messages */
	FILE		*out, *err;	/* stdout/stderr of the user's command */
	bool		tty;		/* out is a terminal (progress with \r) */
	bool		mounted;	/* running in the fusemount daemon */
	volatile int	*cancel;	/* nonzero: asked to stop */
	struct bch_fs	**cp;		/* the open filesystem; replaced by add/drop/resize */
	char		***devs;	/* its member device paths (NULL-terminated), */
	unsigned	*nr_devs;	/* updated by add/drop */
	const struct bch_opts *open_opts; /* options to reopen it with */
	void		(*lock)(struct cmd_ctx *x);
	void		(*unlock)(struct cmd_ctx *x);
	void		*priv;		/* the daemon's state */
	bool		check_only;	/* offline first pass (cmd_ctl_cmd.checks): the
					 * filesystem is open read-only; check everything
					 * that can be refused, write nothing, return 0
					 * to go on, the exit code of the refusal, or
					 * CMD_CHECK_DONE when there is nothing to do (the
					 * answer is printed: exit 0, no read-write open) */
};

#define CMD_CHECK_DONE	0x100	/* check_only: nothing to do, answered (exit 0) */

/*
 * A body.  argv is the command line as the front parsed it (so it is well
 * formed) WITHOUT the FS operand(s): argv[0] is the command name ("device
 * evacuate"), then the options, then the operands after FS.  Paths in it
 * are absolute (the front made them so: the daemon has another cwd).
 * Returns the exit code (cmds.h).
 */
typedef int (*cmd_body_fn)(struct cmd_ctx *x, int argc, char **argv);

/*
 * In the daemon (x->priv): a name a body made or removed in directory dir
 * (a file handle); the kernel drops what it cached of it (a negative entry
 * would hide a new name until it times out).  Call with the lock released:
 * the kernel may need the daemon to finish (cmd_fusemount.c).
 */
void fusemount_name_changed(void *priv, uint64_t dir, const char *name);
/* In the daemon (x->priv, lock held): are files or directories of subvolume open? */
bool fusemount_subvol_busy(void *priv, uint32_t subvol);

struct cmd_ctl_cmd {
	const char	*name;		/* "device add", "data scrub", ... */
	cmd_body_fn	run;
	bool		changes;	/* modifies the filesystem: needs the rights (ctl.h) */
	bool		checks;		/* has a check_only pass: offline, a refusal writes
					 * nothing (a read-write open would) */
};

/* The commands the daemon runs for a client (cmd_ctl_cmds.c). */
extern const struct cmd_ctl_cmd cmd_ctl_cmds[];
const struct cmd_ctl_cmd *cmd_ctl_find(const char *name);

/*
 * The front's last step (cmd_run.c): run body on fs.  Mounted: the command
 * line goes to the daemon (ctl_forward), which runs the body named cmd from
 * cmd_ctl_cmds[]; its output and exit code come back.  Otherwise the
 * devices are opened read-write with opts (degraded members are noted on
 * stderr), the body runs with an offline context, and the filesystem is
 * closed.  Returns the exit code.
 */
struct cmd_fs;
int cmd_run(const char *cmd, const struct cmd_fs *fs, const struct bch_opts *opts,
	    int argc, char **argv);

#endif /* _BCACHEFS_CMD_CTX_H */
