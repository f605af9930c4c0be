// SPDX-License-Identifier: GPL-2.0
/*
 * ctl.c - the control channel (ctl.h).  Being written (issue 20): until it
 * lands, a command on a mounted filesystem is refused with this message.
 */
#include <stdio.h>

#include "cmds.h"
#include "ctl.h"

int ctl_forward(const char *cmd, const char *mnt, int argc, char **argv)
{
	(void)argc;
	(void)argv;
	cmd_err(cmd, "%s: is mounted; the control channel to the daemon is not built yet", mnt);
	return EXIT_FAIL;
}
