// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_ctl_cmds.c - the command bodies a fusemount daemon runs for clients
 * of its control channel (cmd_ctx.h).  One line per command.
 */
#include <string.h>

#include "cmd_ctx.h"
#include "cmds.h"

/* cmd_device.c */
int cmd_dev_add_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_dev_remove_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_dev_evacuate_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_dev_set_state_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_dev_set_label_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_dev_resize_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_dev_online_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_dev_offline_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_data_rereplicate_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_dev_stats_body(struct cmd_ctx *x, int argc, char **argv);	/* cmd_device_stats.c */
int cmd_fusemount_remount_body(struct cmd_ctx *x, int argc, char **argv);	/* cmd_fusemount.c */
int cmd_fusemount_mount_body(struct cmd_ctx *x, int argc, char **argv);	/* cmd_fusemount.c */
int cmd_fusemount_timestats_body(struct cmd_ctx *x, int argc, char **argv);	/* fusemount_req.c */
int cmd_subvolume_body(struct cmd_ctx *x, int argc, char **argv);	/* cmd_subvolume.c */

const struct cmd_ctl_cmd cmd_ctl_cmds[] = {
	{ "device add",		cmd_dev_add_body,		true, true },
	{ "device remove",	cmd_dev_remove_body,		true, true },
	{ "device evacuate",	cmd_dev_evacuate_body,		true, true },
	{ "device set-state",	cmd_dev_set_state_body,		true, true },
	{ "device set-label",	cmd_dev_set_label_body,		true, true },
	{ "device resize",	cmd_dev_resize_body,		true, true },
	{ "device online",	cmd_dev_online_body,		true },
	{ "device offline",	cmd_dev_offline_body,		true },
	{ "device stats",	cmd_dev_stats_body,		false, true },
	{ "device stats --reset", cmd_dev_stats_body,		true, true },	/* writes: the rights */
	{ "data rereplicate",	cmd_data_rereplicate_body,	true },
	{ "data scrub",	cmd_scrub_body,	true },
	{ "data rebalance",	cmd_data_rebalance_body,	true },
	{ "set-fs-option",	cmd_set_fs_option_body,		true },
	{ "remount",		cmd_fusemount_remount_body,	true },	/* mount -o remount */
	{ "mount",		cmd_fusemount_mount_body,	true },	/* a second mountpoint */
	{ "fs timestats",	cmd_fusemount_timestats_body,	false },
	{ "fs timestats --reset", cmd_fusemount_timestats_body,	true },	/* zeroes: the rights */
	{ "subvolume create",	cmd_subvolume_body,		true },
	{ "subvolume snapshot",	cmd_subvolume_body,		true },
	{ "subvolume delete",	cmd_subvolume_body,		true },
	{ "subvolume list",	cmd_subvolume_body,		false },
	{ "subvolume diff",	cmd_subvolume_body,		false },
	{ NULL, NULL, false }
};

const struct cmd_ctl_cmd *cmd_ctl_find(const char *name)
{
	for (const struct cmd_ctl_cmd *c = cmd_ctl_cmds; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}
