// SPDX-License-Identifier: GPL-2.0
/*
 * bcachefs.c - the command table and dispatch.
 *
 * One binary: `bcachefs CMD ...`.  Invoked as mkfs.bcachefs, fsck.bcachefs or
 * mount.fuse.bcachefs (argv[0]) it runs format, fsck or fusemount directly, so
 * `mkfs -t bcachefs`, `fsck -t bcachefs` and `mount -t fuse.bcachefs` work.
 * Every command is one row of the table below; `bcachefs help` prints the
 * table.
 *
 * mount(8) reaches fusemount two ways, both translated by mount_helper():
 *   - /sbin/mount.fuse.bcachefs DEV MNT [-sfnv] [-o OPTS] [-t TYPE]: the
 *     helper convention of mount(8) (-f is "fake": do nothing);
 *   - `bcachefs DEV MNT -o OPTS`: what mount.fuse3 runs (found through its
 *     shell's default PATH, /usr/local/sbin included) when no helper of our
 *     own is installed where mount(8) looks.  argv[1] is then no command
 *     name and argv[2] an existing directory.
 * fstab's userspace options (nofail, noauto, _netdev, x-*, ...) are dropped
 * on the way: they are mount(8)'s, not the filesystem's.  Run by root, the
 * helper asks for suid,dev (mount(8) names only the nosuid/nodev it wants;
 * FUSE's default is both).  `mount -o remount,...` runs the helper too,
 * with the mount's source and its whole option list (the present flags and
 * superblock options merged with the new ones, "remount" among them):
 * fusemount then changes the running mount (cmd_fusemount.c, remount_front).
 */
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmds.h"
#include "cmd/passphrase.h"
#include "libbcachefs/bcachefs_format.h"
#include "libbcachefs/blockdev.h"
#include "libbcachefs/crypt.h"

struct command {
	const char	*name;
	int		(*fn)(int argc, char *argv[]);
	const char	*summary;
	const char	*group;
};

static int cmd_help(int argc, char *argv[]);

static const struct command commands[] = {
	{ "format",	 cmd_format,	 "Format one or more devices or image files", "Superblock" },
	{ "mkfs",	 cmd_format,	 "Alias of format",				"" },
	{ "show-super",	 cmd_show_super, "Print the superblock of a device (or of each member)", "Superblock" },
	{ "set-fs-option", cmd_set_fs_option, "Change filesystem options (mounted: through its daemon)", "Superblock" },
	{ "unlock",	 cmd_unlock,	 "Check an encrypted filesystem's passphrase; put its key in the keyring", "Encryption" },
	{ "set-passphrase", cmd_set_passphrase, "Change the passphrase of an encrypted filesystem", "Encryption" },
	{ "remove-passphrase", cmd_remove_passphrase, "Store an encrypted filesystem's key in the clear", "Encryption" },
	{ "list",	 cmd_list,	 "Print the keys or nodes of btrees (unmounted)",	"Engine" },
	{ "list-journal", cmd_list_journal, "Print the journal entries replay would use (unmounted)", "Engine" },
	{ "dump",	 cmd_dump,	 "Write the metadata of a filesystem to a file (bug reports)", "Repair" },
	{ "undump",	 cmd_undump,	 "Make sparse images from a dump file",		"Repair" },
	{ "kv",		 cmd_kv,	 "Put, get, delete raw keys (debugging, tests)", "Engine" },
	{ "image",	 cmd_image,	 "Read and change files inside an unmounted filesystem", "Files" },
	{ "subvolume",	 cmd_subvolume,	 "Subvolumes and snapshots: create, snapshot, delete, list (unmounted)", "Files" },
	{ "fs",		 cmd_fs,	 "fs usage: space used and free per device and data type", "Files" },
	{ "data",	 cmd_data,	 "data rebalance, rereplicate, scrub: move, copy and check data", "Files" },
	{ "device",	 cmd_device,	 "Add, remove, evacuate, resize, online/offline members; set state or label", "Devices" },
	{ "setattr",	 cmd_setattr,	 "Set per-file options (compression, targets, ...) of files", "Files" },
	{ "fusemount",	 cmd_fusemount,	 "Mount through FUSE (no kernel driver)", "Files" },
	{ "fsck",	 cmd_fsck,	 "Check and repair an unmounted filesystem (exit codes of fsck(8))", "Repair" },
	{ "help-opts",	 cmd_help_opts,	 "List every filesystem option (--man: roff, --json)", "Other" },
	{ "version",	 cmd_version,	 "Print the version of the tool and format",	"Other" },
	{ "help",	 cmd_help,	 "This list; help COMMAND: its --help",		"Other" },
};

static void usage(FILE *f)
{
	const char *groups[] = { "Superblock", "Encryption", "Engine", "Files", "Devices", "Repair", "Other" };

	fprintf(f, "bcachefs - tools for a copy-on-write filesystem (this project's own format)\n"
		   "usage: bcachefs <command> [options]   (bcachefs <command> --help for more)\n");
	for (unsigned g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
		bool any = false;
		for (unsigned i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
			if (strcmp(commands[i].group, groups[g]))
				continue;
			if (!any)
				fprintf(f, "\n%s:\n", groups[g]);
			any = true;
			fprintf(f, "  %-18s %s\n", commands[i].name, commands[i].summary);
		}
	}
	fprintf(f, "\nExit codes: 0 success, 1 failure, 2 work left (data rebalance), 16 usage error\n"
		   "(fsck: see fsck --help).\n");
}

static const struct command *find_command(const char *name)
{
	for (unsigned i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

/* `help` alone: the table; `help CMD`: CMD --help (as git help CMD) */
static int cmd_help(int argc, char *argv[])
{
	const struct command *cmd;

	if (argc > 1 && strcmp(argv[1], "-h") && strcmp(argv[1], "--help")) {
		cmd = argv[1][0] != '-' ? find_command(argv[1]) : NULL;
		if (!cmd || cmd->fn == cmd_help || argc > 2) {
			const char *w = cmd && cmd->fn != cmd_help ? argv[2] : argv[1];
			cmd_err("help", "unknown %s '%s' (bcachefs help lists the commands)",
				w[0] == '-' ? "option" : cmd ? "argument" : "command", w);
			return EXIT_USAGE;
		}
		char *av[] = { argv[1], "--help", NULL };
		return cmd->fn(2, av);
	}
	usage(stdout);
	return EXIT_OK;
}

/*
 * Options of fstab and mount(8) that mean nothing to the filesystem or FUSE
 * (libfuse refuses them).
 */
static bool userspace_opt(const char *o)
{
	static const char * const drop[] = {
		"defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group",
		"nofail", "_netdev", "loud", "silent",
	};

	for (unsigned i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (!strcmp(o, drop[i]))
			return true;
	return !strncmp(o, "x-", 2) || !strncmp(o, "comment=", 8);
}

/*
 * mount(8)'s calling convention (helper: as mount.fuse.bcachefs; else
 * mount.fuse3's `bcachefs DEV MNT -o OPTS`, which has no flags of its own) ->
 * `fusemount [-o OPTS] DEV MNT`.  Returns fusemount's exit code (0 without
 * mounting for mount -f).
 */
static int mount_helper(int argc, char *argv[], bool helper)
{
	char **av = calloc(argc + 3, sizeof(*av)), *opts = NULL, *kept = NULL;
	const char *dev = NULL, *mnt = NULL;
	int ac = 0, ret = EXIT_USAGE;
	bool fake = false;

	if (!av)
		return EXIT_FAIL;
	av[ac++] = "fusemount";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-o") || (helper && (!strcmp(a, "-t") || !strcmp(a, "-N")))) {
			if (i + 1 == argc) {
				cmd_err("fusemount", "option '%s' needs a value", a);
				goto out;
			}
			if (!strcmp(a, "-N")) {
				cmd_err("fusemount", "-N (another mount namespace) is not supported");
				goto out;
			}
			if (!strcmp(a, "-o")) {
				/* each -o adds to the list, as mount(8) reads them */
				size_t l = opts ? strlen(opts) : 0;
				char *n = realloc(opts, l + strlen(argv[i + 1]) + 2);
				if (!n) {
					ret = EXIT_FAIL;
					goto out;
				}
				opts = n;
				sprintf(opts + l, "%s%s", l ? "," : "", argv[i + 1]);
			}
			i++;
		} else if (helper && a[0] == '-' && a[1] && strspn(a + 1, "sfnv") == strlen(a + 1)) {
			fake |= strchr(a, 'f') != NULL;		/* -s -n -v: nothing to do */
		} else if (a[0] == '-') {
			av[ac++] = (char *)a;	/* fusemount's own (-h, -d; -f without mount(8)) */
		} else if (!dev) {
			dev = a;
		} else if (!mnt) {
			mnt = a;
		} else {
			cmd_err("fusemount", "too many arguments");
			goto out;
		}
	}
	if ((!opts && !getuid() && !(opts = strdup(""))) ||
	    (opts && !(kept = calloc(strlen(opts) + 16, 1)))) {
		ret = EXIT_FAIL;
		goto out;
	}
	if (opts) {
		char *save = NULL;
		size_t l = 0;
		/*
		 * mount(8) says nothing of suid and dev when they are wanted (the
		 * kernel's default), where FUSE's default is nosuid,nodev: root gets
		 * what mount(8) means, the nosuid or nodev it names still win.  Not
		 * for a user mount (mount(8) names nosuid,nodev then; fusermount3
		 * would refuse), nor a remount (its list is complete).
		 */
		if (!getuid() && !strstr(opts, "remount"))
			l += sprintf(kept, "suid,dev");
		for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
			if (!userspace_opt(o))
				l += sprintf(kept + l, "%s%s", l ? "," : "", o);
		if (l) {
			av[ac++] = "-o";
			av[ac++] = kept;
		}
	}
	if (dev)
		av[ac++] = (char *)dev;
	if (mnt)
		av[ac++] = (char *)mnt;
	ret = fake ? EXIT_OK : cmd_fusemount(ac, av);
out:
	free(kept);
	free(opts);
	free(av);
	return ret;
}

/*
 * `bcachefs DEV MNT ...` from mount.fuse3: no command but an existing
 * device (the first of a DEV:DEV list) or UUID=, then a directory.
 */
static bool mount_fuse3_call(int argc, char *argv[])
{
	char first[4096];
	struct stat st;

	if (argc < 3 || argv[1][0] == '-' || find_command(argv[1]) || argv[2][0] == '-' ||
	    stat(argv[2], &st) || !S_ISDIR(st.st_mode))
		return false;
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(argv[1], ":"), argv[1]);
	return !strncmp(argv[1], "UUID=", 5) || !stat(first, &st);
}

static char wait_cmd[64] = "bcachefs";

/* blockdev.c waits for an unmounted fusemount daemon to close a device: say so */
static void print_wait(const char *path, unsigned timeout_s)
{
	fprintf(stderr, "%s: %s: waiting for the unmounted filesystem's daemon to close it "
		"(up to %u s)\n", wait_cmd, path, timeout_s);
}

int main(int argc, char *argv[])
{
	const char *prog = basename(argv[0]);
	const struct command *cmd;

	/* getopt's own messages ("fsck: invalid option -- 'Z'") differ from ours: cmd_opt_err says it */
	opterr = 0;
	bch_dev_on_wait(print_wait);
	/* an encrypted filesystem's key: keyring, passphrase file, terminal, stdin */
	bch_crypt_set_key_provider(bch_cmd_key_provider);
	if (strcmp(prog, "bcachefs"))
		snprintf(wait_cmd, sizeof(wait_cmd), "%s", prog);
	else if (argc > 1 && argv[1][0] != '-')
		snprintf(wait_cmd, sizeof(wait_cmd), "bcachefs %s", argv[1]);
	if (!strcmp(prog, "mkfs.bcachefs"))
		return cmd_format(argc, argv);
	if (!strcmp(prog, "fsck.bcachefs") && (cmd = find_command("fsck")))
		return cmd->fn(argc, argv);
	/* mount -t fuse.bcachefs: mount(8)'s helper, or mount.fuse3's call */
	if (!strcmp(prog, "mount.fuse.bcachefs") || !strcmp(prog, "mount.bcachefs"))
		return mount_helper(argc, argv, true);
	if (mount_fuse3_call(argc, argv))
		return mount_helper(argc, argv, false);

	if (argc < 2) {
		fprintf(stderr, "bcachefs: no command given\n\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return cmd_help(argc, argv);
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))
		return cmd_version(argc - 1, argv + 1);

	cmd = find_command(argv[1]);
	if (!cmd) {
		fprintf(stderr, "bcachefs: unknown command '%s'\n\n", argv[1]);
		usage(stderr);
		return EXIT_USAGE;
	}
	return cmd->fn(argc - 1, argv + 1);
}

int cmd_version(int argc, char *argv[])
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("Usage: bcachefs version\nPrint the version of the tool and of the on-disk format.\n");
		return EXIT_OK;
	}
	if (argc > 1) {
		cmd_err("version", "unknown %s '%s' (version takes none)",
			argv[1][0] == '-' ? "option" : "argument", argv[1]);
		return EXIT_USAGE;
	}
	printf("bcachefs-tools %s (on-disk format version %u, this project's own format)\n",
	       BCH_VERSION_STRING, BCH_VERSION_CURRENT);
	return EXIT_OK;
}
