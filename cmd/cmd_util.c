// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_util.c - small helpers shared by the commands: messages, device lists,
 * JSON strings, finding the fusemount that holds a device.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "cmds.h"
#include "super.h"

void cmd_err(const char *cmd, const char *fmt, ...)
{
	va_list args;

	fflush(stdout);		/* keep the order of what was printed before */
	fprintf(stderr, "bcachefs %s: ", cmd);
	va_start(args, fmt);
	vfprintf(stderr, fmt, args);
	va_end(args);
	fputc('\n', stderr);
}

void cmd_note_degraded(const char *cmd, struct bch_fs *c, char * const *devs, unsigned nr)
{
	char names[512], who[160];
	int n = 0;

	if (!c->devs_missing)
		return;
	names[0] = 0;
	for (unsigned i = 0; i < nr && n < (int)sizeof(names); i++)
		n += snprintf(names + n, sizeof(names) - n, "%s%s", i ? ":" : "", devs[i]);
	for (unsigned i = 0; i < c->nr_devs; i++)
		if (bch_dev_missing(c, i))
			cmd_err(cmd, "%s: %s missing: opened %s%s", names,
				bch_sb_member_text(c->sb, i, who, sizeof(who)),
				c->opts.v[Opt_very_degraded] ? "very_degraded" : "degraded",
				c->read_only ? " (read-only)" : "");
}

char **split_devs(char * const *args, unsigned nr_args, unsigned *nr)
{
	unsigned cap = 8, n = 0;
	char **devs = malloc(cap * sizeof(*devs));

	if (!devs)
		abort();
	for (unsigned i = 0; i < nr_args; i++) {
		char *copy = strdup(args[i]), *save = NULL, *tok;

		for (tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
			if (n + 2 > cap) {
				cap *= 2;
				devs = realloc(devs, cap * sizeof(*devs));
				if (!devs)
					abort();
			}
			devs[n++] = strdup(tok);
		}
		free(copy);
	}
	devs[n] = NULL;
	*nr = n;
	return devs;
}

void free_devs(char **devs)
{
	for (char **d = devs; d && *d; d++)
		free(*d);
	free(devs);
}

void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = *s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

int cmd_mounted_at(char * const *devs, unsigned nr, char *mnt, size_t len)
{
	char line[16384], src[8192], point[8192], want[PATH_MAX];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		if (!sep || strncmp(sep + 3, "fuse.bcachefs ", 14) ||
		    sscanf(line, "%*u %*u %*u:%*u %*s %8191s", point) != 1 ||
		    sscanf(sep + 17, "%8191s", src) != 1)
			continue;
		bch_mountinfo_unescape(point);
		bch_mountinfo_unescape(src);
		/* the source is the daemon's fsname: absolute device paths joined by ':' */
		char *save = NULL;
		for (char *p = strtok_r(src, ":", &save); p && !found; p = strtok_r(NULL, ":", &save))
			for (unsigned i = 0; i < nr && !found; i++)
				if (realpath(devs[i], want) && !strcmp(p, want)) {
					snprintf(mnt, len, "%s", point);
					found = 1;
				}
	}
	fclose(f);
	return found;
}
