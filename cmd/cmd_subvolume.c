// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_subvolume.c - `bcachefs subvolume create|snapshot|delete|list`: the
 * spelling of bcachefs-tools for subvolumes and snapshots of an unmounted
 * filesystem.  Each verb is the image verb of the same name
 * (subvolume-create, ...), so options, the check pass before writing and
 * the messages are those of `bcachefs image`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"

static const struct {
	const char *name, *verb, *args, *help;
} subvol_verbs[] = {
	{ "create",   "subvolume-create",   "DEVICE PATH",		"make an empty subvolume at PATH" },
	{ "snapshot", "subvolume-snapshot", "[-r] DEVICE SOURCE DEST",	"snapshot subvolume SOURCE as DEST (-r: read-only)" },
	{ "delete",   "subvolume-delete",   "DEVICE PATH...",		"delete subvolumes and free what only they held" },
	{ "list",     "subvolume-list",	    "[--json] DEVICE",		"list subvolumes: ID, snapshot, parent, read-only, "
									"creation time, space only it holds, path" },
	{ "diff",     "subvolume-diff",     "[--json] DEVICE OLD NEW",	"what changed from OLD to NEW: added, deleted, renamed, "
									"modified (byte ranges), metadata only" },
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: bcachefs subvolume VERB [-o OPTS] DEVICE[:DEVICE...] ARGS\n"
		   "Subvolumes and snapshots of an unmounted filesystem (format version 3).\n\n");
	for (size_t i = 0; i < sizeof(subvol_verbs) / sizeof(subvol_verbs[0]); i++)
		fprintf(f, "  %-9s %-26s %s\n", subvol_verbs[i].name, subvol_verbs[i].args, subvol_verbs[i].help);
	fprintf(f, "\nPaths start at the filesystem's root; a subvolume shows as a directory.\n"
		   "A snapshot costs the same for any tree: nothing is copied until written.\n"
		   "SOURCE must be a subvolume's root (\"/\" is the filesystem's).  delete frees\n"
		   "the keys only the deleted subvolumes saw before it returns (progress on a\n"
		   "terminal); a delete cut short is finished by the next delete or fsck -y.\n"
		   "diff reads only the snapshots between OLD and NEW (the snapshot_touch keys),\n"
		   "so its time follows the change; OLD and NEW must share a snapshot tree.\n"
		   "These verbs are also image verbs (bcachefs image subvolume-create ...), so\n"
		   "image shell scripts can use them.\n\n"
		   "Exit: 0 done, 1 failure (message on stderr), 16 usage error.\n");
}

int cmd_subvolume(int argc, char *argv[])
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(subvol_verbs) / sizeof(subvol_verbs[0]); i++) {
		if (strcmp(argv[1], subvol_verbs[i].name))
			continue;
		char **v = calloc(argc + 1, sizeof(*v));
		if (!v)
			return EXIT_FAIL;
		v[0] = "image";
		v[1] = (char *)subvol_verbs[i].verb;
		for (int j = 2; j < argc; j++)
			v[j] = argv[j];
		int r = cmd_image(argc, v);
		free(v);
		return r;
	}
	cmd_err("subvolume", "unknown verb '%s' (see bcachefs subvolume --help)", argv[1]);
	return EXIT_USAGE;
}
