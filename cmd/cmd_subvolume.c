// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_subvolume.c - `bcachefs subvolume create|snapshot|delete|list|diff`, with
 * the spelling of bcachefs-tools.
 *
 * Two forms, told apart by the first path:
 *   - offline, DEVICE first (an image file or block device, or a list
 *     DEV:DEV): the image verb of the same name runs (subvolume-create,
 *     ...), so options, the check pass before writing and the messages are
 *     those of `bcachefs image`;
 *   - mounted, paths inside a fusemount (as btrfs takes them): the command
 *     goes over the mount's control channel (ctl.h) and its daemon runs the
 *     body below under its engine lock, with paths made relative to the
 *     filesystem's root.  A delete then frees the deleted snapshots' keys in
 *     steps, the lock released between them (cmd_ctx.h rules).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "cmd_ctx.h"
#include "cmds.h"
#include "ctl.h"
#include "fs_ops.h"
#include "opts.h"
#include "snapshot.h"
#include "subvolume_diff.h"

static const struct {
	const char *name, *verb, *args, *margs, *help;
} subvol_verbs[] = {
	{ "create",   "subvolume-create",   "DEVICE PATH", "PATH",
	  "make an empty subvolume at PATH" },
	{ "snapshot", "subvolume-snapshot", "[-r] DEVICE SOURCE DEST", "[-r] SOURCE DEST",
	  "snapshot subvolume SOURCE as DEST (-r: read-only)" },
	{ "delete",   "subvolume-delete",   "DEVICE PATH...", "PATH...",
	  "delete subvolumes and free what only they held" },
	{ "list",     "subvolume-list",	    "[--json] [-t] DEVICE", "[--json] [-t] PATH",
	  "list subvolumes: ID, snapshot, parent, read-only, creation time, space only it holds, path (-t: as a tree)" },
	{ "diff",     "subvolume-diff",     "[--json] DEVICE OLD NEW", "[--json] OLD NEW",
	  "what changed from OLD to NEW: added, deleted, renamed, modified (byte ranges), metadata only" },
};
#define NR_VERBS	(sizeof(subvol_verbs) / sizeof(subvol_verbs[0]))

static void usage(FILE *f)
{
	fprintf(f, "Usage: bcachefs subvolume VERB [-o OPTS] DEVICE[:DEVICE...] ARGS   (unmounted)\n"
		   "       bcachefs subvolume VERB ARGS                            (paths in a fusemount)\n"
		   "Subvolumes and snapshots (format version 3).\n\n");
	for (size_t i = 0; i < NR_VERBS; i++)
		fprintf(f, "  %-9s %-26s %s\n            mounted: %s\n", subvol_verbs[i].name,
			subvol_verbs[i].args, subvol_verbs[i].help,
			subvol_verbs[i].margs ? subvol_verbs[i].margs : "(unmounted only)");
	fprintf(f, "\nPaths start at the filesystem's root offline, and are ordinary paths on a\n"
		   "mount; a subvolume shows as a directory.  A snapshot costs the same for any\n"
		   "tree: nothing is copied until written.  SOURCE must be a subvolume's root\n"
		   "(\"/\" offline, or the mountpoint, is the filesystem's).  delete frees the keys\n"
		   "only the deleted subvolumes saw before it returns (progress on a terminal); a\n"
		   "delete cut short (Ctrl-C, a crash) is finished by the next delete or fsck -y.\n"
		   "diff reads only the snapshots between OLD and NEW (the snapshot_touch keys),\n"
		   "so its time follows the change; OLD and NEW must share a snapshot tree.\n"
		   "Offline these are also image verbs (bcachefs image subvolume-create ...).\n\n"
		   "Exit: 0 done, 1 failure (message on stderr), 16 usage error.\n");
}

/* ------------------------------------------------------------ the body */

static int body_err(struct cmd_ctx *x, struct bch_fs *c, const char *path, int r)
{
	const char *detail = c->err_msg[0] && r != -ENOENT && r != -EEXIST ? c->err_msg : NULL;

	fprintf(x->err, "bcachefs %s: %s: %s%s%s%s\n", x->cmd, path, strerror(-r),
		detail ? " (" : "", detail ? detail : "", detail ? ")" : "");
	return EXIT_FAIL;
}

static void body_progress(void *priv, uint64_t seen)
{
	struct cmd_ctx *x = priv;

	if (x->tty)
		fprintf(x->out, "\rfreeing deleted snapshots' keys: %" PRIu64 " positions", seen);
}

/*
 * The mounted form, run by the daemon (cmd_ctl_cmds.c): argv[0] is the
 * command ("subvolume create", ...), paths are relative to the root.
 */
int cmd_subvolume_body(struct cmd_ctx *x, int argc, char **argv)
{
	const char *verb = x->cmd + strlen("subvolume ");
	bool ro = false, json = false, tree = false;
	int first = 1, ret = EXIT_OK;

	for (; first < argc && argv[first][0] == '-'; first++) {
		if (!strcmp(argv[first], "-r") && !strcmp(verb, "snapshot"))
			ro = true;
		else if (!strcmp(argv[first], "--json") && (!strcmp(verb, "list") || !strcmp(verb, "diff")))
			json = true;
		else if (!strcmp(argv[first], "-t") && !strcmp(verb, "list"))
			tree = true;
		else {
			fprintf(x->err, "bcachefs %s: unknown option '%s'\n", x->cmd, argv[first]);
			return EXIT_USAGE;
		}
	}
	int nargs = argc - first;
	if ((!strcmp(verb, "create") && nargs != 1) || (!strcmp(verb, "snapshot") && nargs != 2) ||
	    (!strcmp(verb, "delete") && nargs < 1) || (!strcmp(verb, "list") && nargs > 1) ||
	    (!strcmp(verb, "diff") && nargs != 2)) {
		fprintf(x->err, "bcachefs %s: wrong number of paths\n", x->cmd);
		return EXIT_USAGE;
	}
	x->lock(x);
	struct bch_fs *c = *x->cp;
	uint64_t dir, h;
	char buf[PATH_MAX], *name;
	int r = 0;
	bool deleted = false;
	/* the names made or removed: the kernel is told once the lock is released */
	struct { uint64_t dir; char *name; } *changed = calloc(argc + 1, sizeof(*changed));
	unsigned nr_changed = 0;
	if (!changed) {
		x->unlock(x);
		return EXIT_FAIL;
	}
#define CHANGED(d, n)	do { changed[nr_changed].dir = (d); changed[nr_changed++].name = strdup(n); } while (0)

	c->err_msg[0] = 0;
	if (!strcmp(verb, "create")) {
		if (!(r = bch_fs_lookup_parent(c, argv[first], &dir, buf, sizeof(buf), &name)))
			r = bch_fs_subvol_create(c, dir, name, 0755, getuid(), getgid(), &h);
		if (r)
			ret = body_err(x, c, argv[first], r);
		else
			CHANGED(dir, name);
	} else if (!strcmp(verb, "snapshot")) {
		uint64_t from;
		if ((r = bch_fs_lookup_path(c, argv[first], true, &from))) {
			ret = body_err(x, c, argv[first], r);
		} else if ((r = bch_fs_lookup_parent(c, argv[first + 1], &dir, buf, sizeof(buf), &name)) ||
			   (r = bch_fs_subvol_snapshot(c, from, dir, name, ro, &h))) {
			if (r == -EINVAL) {
				fprintf(x->err, "bcachefs %s: %s: not a subvolume\n", x->cmd, argv[first]);
				ret = EXIT_FAIL;
			} else {
				ret = body_err(x, c, argv[first + 1], r);
			}
		} else {
			CHANGED(dir, name);
		}
	} else if (!strcmp(verb, "delete")) {
		for (int i = first; i < argc && ret == EXIT_OK; i++) {
			uint64_t root;
			if (!(r = bch_fs_lookup_parent(c, argv[i], &dir, buf, sizeof(buf), &name)) &&
			    !bch_fs_lookup(c, dir, name, &root) && bch_fs_subvol_of(root) &&
			    bch_fs_subvol_of(root) != bch_fs_subvol_of(dir) && x->mounted &&
			    fusemount_subvol_busy(x->priv, bch_fs_subvol_of(root))) {
				fprintf(x->err, "bcachefs %s: %s: Device or resource busy (files in it are open)\n",
					x->cmd, argv[i]);
				ret = EXIT_FAIL;
				break;
			}
			if (!r)
				r = bch_fs_subvol_delete(c, dir, name);
			if (r) {
				ret = body_err(x, c, argv[i], r);
			} else {
				deleted = true;
				CHANGED(dir, name);
			}
		}
	} else if (!strcmp(verb, "diff")) {
		/* the offline verb's printer: the same output */
		ret = subvolume_diff_print(x->out, x->err, x->cmd, c, json, argv[first], argv[first + 1]);
	} else {
		r = cmd_subvolume_list_print(x->out, c, json, tree);
		if (r)
			ret = body_err(x, c, "/", r);
	}
	x->unlock(x);
#undef CHANGED
	for (unsigned i = 0; i < nr_changed; i++) {
		if (x->mounted && changed[i].name)
			fusemount_name_changed(x->priv, changed[i].dir, changed[i].name);
		free(changed[i].name);
	}
	free(changed);
	if (!deleted)
		return ret;
	/* free what the deleted snapshots alone held, in steps */
	struct bch_snapshot_gc_cursor cur = { 0 };
	bool done = false;
	while (!done && !r && !*x->cancel) {
		x->lock(x);
		r = bch_snapshot_gc_step(*x->cp, &cur, 4096, &done, body_progress, x);
		if (r)
			body_err(x, *x->cp, "freeing the deleted snapshots' keys", r);
		x->unlock(x);
	}
	if (x->tty && cur.seen)
		fputc('\n', x->out);
	return r ? EXIT_FAIL : ret;
}

/* ------------------------------------------------------------ listing */

int cmd_subvolume_list_print(FILE *f, struct bch_fs *c, bool json, bool tree)
{
	unsigned n, ns;
	const struct bch_subvol_info *sv = bch_subvols(c, &n);
	const struct bch_snap_info *snaps = bch_snaps(c, &ns);
	uint64_t *usage = NULL;
	int r = bch_snapshot_usage(c, &usage);
	if (r)
		return r;
	struct bch_json j;
	if (json) {
		json_begin(&j, f, true);
		json_open(&j, "subvolumes", true);
	} else {
		fprintf(f, "%-5s %-8s %-6s %-3s %-20s %10s  %s\n", "ID", "SNAPSHOT", "PARENT", "RO", "CREATED",
			"EXCLUSIVE", "PATH");
	}
	/* -t: in path order, each name indented under the subvolume that holds it */
	unsigned *order = calloc(n + 1, sizeof(*order));
	char (*paths)[4096] = calloc(n + 1, sizeof(*paths));
	if (!order || !paths) {
		free(order);
		free(paths);
		free(usage);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		order[i] = i;
		if (bch_fs_subvol_path(c, sv[i].id, paths[i], sizeof(paths[i])))
			snprintf(paths[i], sizeof(paths[i]), "?");
	}
	if (tree)	/* insertion sort: few subvolumes */
		for (unsigned i = 1; i < n; i++)
			for (unsigned k = i; k && strcmp(paths[order[k - 1]], paths[order[k]]) > 0; k--) {
				unsigned t = order[k];
				order[k] = order[k - 1];
				order[k - 1] = t;
			}
	for (unsigned oi = 0; oi < n; oi++) {
		unsigned i = order[oi];
		char path[4096 + 64], when[32], size[32];
		uint64_t excl = !ns ? usage[0] << 9 : 0;
		unsigned depth = 0;
		for (uint32_t d = sv[i].v.dir_subvol; d != BCH_SUBVOL_NONE && depth < 64; depth++) {
			const struct bch_subvol_info *p = bch_subvol_get(c, d);
			d = p && p->id ? p->v.dir_subvol : BCH_SUBVOL_NONE;
		}
		if (tree && !json && sv[i].id) {
			const char *base = strrchr(paths[i], '/');
			snprintf(path, sizeof(path), "%*s%s", 2 * depth, "", base ? base + 1 : paths[i]);
		} else {
			snprintf(path, sizeof(path), "%s", paths[i]);
		}
		for (unsigned k = 0; k < ns; k++)
			if (snaps[k].id == sv[i].v.snapshot)
				excl = usage[k] << 9;
		time_t t = (time_t)((int64_t)sv[i].v.created / 1000000000LL);
		struct tm tm;
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
		bool ro = sv[i].v.flags & BCH_SUBVOL_RO;
		if (json) {
			json_open(&j, NULL, false);
			json_u64(&j, "id", sv[i].id);
			json_string(&j, "path", path);
			json_u64(&j, "snapshot", sv[i].v.snapshot);
			if (sv[i].v.parent == BCH_SUBVOL_NONE)
				json_null(&j, "parent");
			else
				json_u64(&j, "parent", sv[i].v.parent);
			json_bool(&j, "read_only", ro);
			json_bool(&j, "snapshot_of_parent", sv[i].v.flags & BCH_SUBVOL_SNAP);
			json_s64(&j, "created_ns", (int64_t)sv[i].v.created);
			json_u64(&j, "exclusive_bytes", excl);
			json_close(&j);
		} else {
			char parent[16] = "-";
			if (sv[i].v.parent != BCH_SUBVOL_NONE)
				snprintf(parent, sizeof(parent), "%u", (unsigned)sv[i].v.parent);
			bch_human_size(excl, size, sizeof(size));
			fprintf(f, "%-5u %-8u %-6s %-3s %-20s %10s  %s\n", sv[i].id, (unsigned)sv[i].v.snapshot,
				parent, ro ? "ro" : "rw", when, size, path);
		}
	}
	if (json) {
		json_close(&j);
		json_end(&j);
	}
	free(order);
	free(paths);
	free(usage);
	return 0;
}

/* ------------------------------------------------------------ the front */

/*
 * A path of the mounted form: an existing path inside a fusemount, or a new
 * name in a directory inside one.  Fills mnt and the path relative to the
 * filesystem's root ("/..."); false when it is in no mount.
 */
enum path_kind {
	PATH_ANY,	/* an existing path of any type */
	PATH_NEW,	/* a new name in an existing directory */
};

static bool mounted_path(const char *path, enum path_kind kind, char *mnt, size_t mlen, char *rel, size_t rlen)
{
	bool new_name = kind == PATH_NEW;
	char real[PATH_MAX], dirbuf[PATH_MAX];
	const char *base = NULL;

	/*
	 * A new name is not looked up: through the mount that would leave a
	 * negative entry the kernel keeps while the daemon makes the name.
	 */
	if (new_name || !realpath(path, real)) {
		/* a new name: its directory must exist */
		snprintf(dirbuf, sizeof(dirbuf), "%s", path);
		size_t n = strlen(dirbuf);
		while (n > 1 && dirbuf[n - 1] == '/')
			dirbuf[--n] = 0;
		char *slash = strrchr(dirbuf, '/');
		const char *dir = ".";
		if (slash) {
			*slash = 0;
			base = slash + 1;
			dir = dirbuf[0] ? dirbuf : "/";
		} else {
			base = dirbuf;
		}
		if (!*base || !realpath(dir, real))
			return false;
	}
	if (!cmd_mount_holding(real, mnt, mlen))
		return false;
	const char *inside = strcmp(mnt, "/") ? real + strlen(mnt) : real;
	int w = snprintf(rel, rlen, "%s%s%s", *inside ? inside : "/",
			 base && *inside ? "/" : "", base ? base : "");
	return w > 0 && (size_t)w < rlen;
}

static int run_mounted(size_t v, int argc, char **argv)
{
	char cmd[64], mnt[PATH_MAX], mnt2[PATH_MAX];
	char **bargv = calloc(argc + 1, sizeof(*bargv));
	int bargc = 0, r;

	if (!bargv)
		return EXIT_FAIL;
	snprintf(cmd, sizeof(cmd), "subvolume %s", subvol_verbs[v].name);
	bargv[bargc++] = cmd;
	mnt[0] = 0;
	for (int i = 2; i < argc; i++) {
		if (argv[i][0] == '-') {
			bargv[bargc++] = argv[i];
			continue;
		}
		char rel[PATH_MAX];
		/* create's path and snapshot's DEST are new names */
		bool new_name = !strcmp(subvol_verbs[v].name, "create") ||
				(!strcmp(subvol_verbs[v].name, "snapshot") && i == argc - 1);
		if (!mounted_path(argv[i], new_name ? PATH_NEW : PATH_ANY, mnt2, sizeof(mnt2), rel, sizeof(rel))) {
			cmd_err(cmd, "%s: not inside a mounted bcachefs (offline: give the device first)", argv[i]);
			r = EXIT_USAGE;
			goto out;
		}
		if (mnt[0] && strcmp(mnt, mnt2)) {
			cmd_err(cmd, "%s: on another filesystem than %s", argv[i], mnt);
			r = EXIT_USAGE;
			goto out;
		}
		snprintf(mnt, sizeof(mnt), "%s", mnt2);
		bargv[bargc++] = strdup(rel);
	}
	if (!mnt[0]) {
		cmd_err(cmd, "no path given");
		usage(stderr);
		r = EXIT_USAGE;
		goto out;
	}
	if (!strcmp(subvol_verbs[v].name, "diff")) {
		/*
		 * What the kernel still caches (written pages, times) goes to the
		 * daemon first, so the diff sees what the files show.
		 */
		int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			syncfs(fd);
			close(fd);
		}
	}
	r = ctl_forward(cmd, mnt, bargc, bargv);
out:
	for (int i = 1; i < bargc; i++)
		if (bargv[i][0] == '/')
			free(bargv[i]);
	free(bargv);
	return r;
}

int cmd_subvolume(int argc, char *argv[])
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	for (size_t i = 0; i < NR_VERBS; i++) {
		if (strcmp(argv[1], subvol_verbs[i].name))
			continue;
		/* the options, checked before anything is opened (the same style as every command) */
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "subvolume %s", subvol_verbs[i].name);
		for (int q = 2; q < argc; q++) {
			const char *a = argv[q];
			if (a[0] != '-' || !a[1])
				continue;
			if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
				usage(stdout);
				return EXIT_OK;
			}
			if (!strcmp(a, "-o")) {
				if (++q == argc) {
					cmd_err(cmd, "option '-o' needs a value (see bcachefs subvolume --help)");
					return EXIT_USAGE;
				}
				continue;
			}
			if ((!strcmp(a, "-r") && !strcmp(subvol_verbs[i].name, "snapshot")) ||
			    ((!strcmp(a, "--json") || !strcmp(a, "-t")) && !strcmp(subvol_verbs[i].name, "list")) ||
			    (!strcmp(a, "--json") && !strcmp(subvol_verbs[i].name, "diff")))
				continue;
			cmd_err(cmd, "unknown option '%.*s' (see bcachefs subvolume --help)",
				(int)strcspn(a, "="), a);
			return EXIT_USAGE;
		}
		/* the first argument that is not an option: a device (offline) or a path in a mount */
		int p = 2;
		while (p < argc && argv[p][0] == '-')
			p += !strcmp(argv[p], "-o") ? 2 : 1;
		char mnt[PATH_MAX], rel[PATH_MAX];
		/*
		 * create and snapshot: the mounted form has one path fewer (no
		 * device), and its new name is not looked up (see mounted_path);
		 * delete and list: the first path is inside a mount, or a device.
		 */
		int npos = 0;
		for (int q = p; q < argc; q++)
			npos += argv[q][0] != '-' && !(q > 2 && !strcmp(argv[q - 1], "-o"));
		bool mounted;
		if (!strcmp(subvol_verbs[i].name, "create"))
			mounted = npos == 1;
		else if (!strcmp(subvol_verbs[i].name, "snapshot") || !strcmp(subvol_verbs[i].name, "diff"))
			mounted = npos == 2;
		else
			mounted = p < argc && !strchr(argv[p], ':') &&
				  mounted_path(argv[p], PATH_ANY, mnt, sizeof(mnt), rel, sizeof(rel));
		if (mounted)
			return run_mounted(i, argc, argv);
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
	cmd_err("subvolume", "unknown %s '%s' (see bcachefs subvolume --help)",
		argv[1][0] == '-' ? "option" : "subcommand", argv[1]);
	return EXIT_USAGE;
}
