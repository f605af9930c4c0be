// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_ctl_cmds.c - the command bodies a fusemount daemon runs for clients
 * of its control channel (cmd_ctx.h).  One line per command.
 */
#include <string.h>

#include "cmd_ctx.h"
#include "cmds.h"

const struct cmd_ctl_cmd cmd_ctl_cmds[] = {
	{ "data rebalance",	cmd_data_rebalance_body,	true },
	{ "set-fs-option",	cmd_set_fs_option_body,		true },
	{ NULL, NULL, false }
};

const struct cmd_ctl_cmd *cmd_ctl_find(const char *name)
{
	for (const struct cmd_ctl_cmd *c = cmd_ctl_cmds; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}
