/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CTL_H
#define _BCACHEFS_CTL_H

/*
 * ctl.h - the control channel between commands and a fusemount daemon.
 * (Design and wire format: ctl.c's header comment and bcachefs(8).)
 */

/*
 * Client: send the command line argv (a body's argv, cmd_ctx.h) of command
 * cmd to the daemon serving mountpoint mnt, relay its output to our
 * stdout/stderr until it ends, and return its exit code.  Ctrl-C asks the
 * daemon to stop the job at a safe point; losing the connection otherwise
 * leaves the job running.
 */
int ctl_forward(const char *cmd, const char *mnt, int argc, char **argv);

#endif /* _BCACHEFS_CTL_H */
