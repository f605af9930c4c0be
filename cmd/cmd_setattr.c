// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_setattr.c - `bcachefs setattr [--OPTION=VALUE]... PATH...`: set the
 * per-file options (fs_ops.h: compression, background_compression,
 * data_checksum, data_replicas, foreground/background/promote target,
 * erasure_code) of
 * files and directories, as bcachefs-tools' setattr does.
 *
 * Two ways in, one walk:
 *   - PATH inside a `bcachefs fusemount`: through the mount, with the xattrs
 *     "bcachefs.<option>" (setxattr / removexattr), so the daemon's owner
 *     checks apply;
 *   - `bcachefs image setattr DEVICE [--OPTION=VALUE]... PATH...` (cmd_image.c
 *     calls cmd_setattr_image()): the same on an unmounted filesystem through
 *     fs_ops.
 *
 * --OPTION=- (bcachefs-tools' spelling) or --OPTION= (image setopt's) makes
 * the file inherit that option again; --remove-all drops every option first.
 *
 * Directories.  A directory's options are copied into what is created in
 * it later (inode.c).  bcachefs-tools then walks the existing tree and has
 * the kernel re-inherit (BCHFS_IOC_REINHERIT_ATTRS): every descendant that
 * did not have the option set on itself takes the new value, and the walk
 * goes into the subdirectories that changed.  Our inodes do not record
 * whether a value was set on them or copied from their directory, so the
 * walk here takes "holds the value the directory had before" as "inherited":
 * such a child takes the new value (or loses it, on removal) and its
 * subdirectories are walked; a child whose value differs keeps it, and its
 * subtree is left alone.  (A child set by hand to the very value its
 * directory had is taken for inherited: the one case that differs.)
 *
 * Invariants
 *   (1) Every name and every value that can be checked without the
 *       filesystem is checked before anything changes (exit 16); target
 *       labels are checked by the filesystem (image: on a read-only open
 *       first, so a refused change writes nothing).
 *   (2) Each PATH stands alone: a failure on one is reported and the others
 *       are still done (exit 1 at the end).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "cmds.h"
#include "fs_ops.h"
#include "opts.h"

#define OPT_PREFIX	"bcachefs."

/* What the command line asks. */
struct sa_args {
	bool		given[BCH_OPT_NR];
	const char	*val[BCH_OPT_NR];	/* NULL: inherit again */
	bool		remove_all;
	char		**paths;
	int		nr_paths;
};

/* Where the files are: a mount (c NULL, by path) or an open filesystem (by inode). */
struct sa_ctx {
	const char	*cmd;		/* for messages: "setattr", "image setattr" */
	struct bch_fs	*c;
	bool		check_only;	/* image: a read-only open, check the PATHs only */
	int		ret;
};

struct sa_node {
	char		path[PATH_MAX];
	uint64_t	inum;
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: bcachefs setattr [--OPTION=VALUE]... [--remove-all] PATH...\n"
		   "       bcachefs image setattr DEVICE[:DEVICE...] [--OPTION=VALUE]... PATH...\n"
		   "Set per-file options of files and directories: PATH inside a bcachefs\n"
		   "fusemount, or (image setattr) a path inside an unmounted filesystem.\n"
		   "A directory's descendants that inherited the old value take the new one,\n"
		   "and files created in it later inherit it.\n\nOptions:\n");
	for (unsigned id = 0; id < BCH_OPT_NR; id++) {
		char opt[64];
		if (!bch_fs_is_inode_opt(bch_opt_table[id].name))
			continue;
		snprintf(opt, sizeof(opt), "--%s=VALUE", bch_opt_table[id].name);
		fprintf(f, "  %-30s %s\n", opt, bch_opt_table[id].help);
	}
	fprintf(f, "  --OPTION=- (or --OPTION=)      inherit that option again (remove it)\n"
		   "  --remove-all                   remove every per-file option first\n"
		   "  -h, --help                     this text\n"
		   "The value a file uses (its own or inherited, else the filesystem's) is\n"
		   "the read-only xattr bcachefs_effective.OPTION\n"
		   "(getfattr -n bcachefs_effective.compression PATH).\n");
}

/* Parse argv[first..argc) into a; 0 or EXIT_USAGE after a message (EXIT_OK: help shown). */
static int parse_args(const char *cmd, int argc, char **argv, int first, struct sa_args *a)
{
	bool opts_done = false, any = false;

	memset(a, 0, sizeof(*a));
	a->paths = calloc(argc + 1, sizeof(*a->paths));
	for (int i = first; i < argc; i++) {
		char *arg = argv[i];
		if (opts_done || arg[0] != '-' || !arg[1]) {
			a->paths[a->nr_paths++] = arg;
			continue;
		}
		if (!strcmp(arg, "--")) {
			opts_done = true;
		} else if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			usage(stdout);
			return -1;
		} else if (!strcmp(arg, "--remove-all")) {
			a->remove_all = any = true;
		} else if (arg[1] != '-') {
			cmd_err(cmd, "unknown option '%s' (options are --OPTION=VALUE; see --help)", arg);
			return EXIT_USAGE;
		} else {
			char name[64], perr[256];
			const char *eq = strchr(arg + 2, '=');
			size_t nl = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
			snprintf(name, sizeof(name), "%.*s", (int)nl, arg + 2);
			int id = bch_opt_lookup(name);
			if (id < 0 || !bch_fs_is_inode_opt(bch_opt_table[id].name)) {
				cmd_err(cmd, "%s '--%s' (per-file options: compression, "
					"background_compression, data_checksum, data_replicas, "
					"erasure_code, foreground_target, background_target, "
					"promote_target)",
					id >= 0 ? "not a per-file option:" : "unknown option", name);
				return EXIT_USAGE;
			}
			if (!eq) {
				cmd_err(cmd, "--%s needs a value (--%s=VALUE, or --%s=- to remove it)",
					name, name, name);
				return EXIT_USAGE;
			}
			const char *v = eq + 1;
			uint64_t parsed;
			if (!strcmp(v, "-") || !*v)
				v = NULL;
			/* targets name labels: the filesystem checks them */
			else if (bch_opt_table[id].type != BCH_OPT_TARGET &&
				 bch_opt_parse(id, v, &parsed, perr, sizeof(perr))) {
				cmd_err(cmd, "--%s=%s: %s", bch_opt_table[id].name, v, perr);
				return EXIT_USAGE;
			}
			a->given[id] = any = true;
			a->val[id] = v;
		}
	}
	if (!any) {
		cmd_err(cmd, "no option given (--OPTION=VALUE, --OPTION=- or --remove-all)");
		return EXIT_USAGE;
	}
	if (!a->nr_paths) {
		cmd_err(cmd, "no PATH given");
		return EXIT_USAGE;
	}
	return 0;
}

/* ----------------------------------------------- the files: mount or image */

/* The option's value on n as text, 0 when the file inherits it (no value); -errno. */
static int opt_get(struct sa_ctx *x, const struct sa_node *n, const char *xname, char *buf,
		   size_t len)
{
	ssize_t r;

	if (x->c)
		r = bch_fs_getxattr(x->c, n->inum, xname, buf, len - 1);
	else if ((r = lgetxattr(n->path, xname, buf, len - 1)) < 0)
		r = -errno;
	if (r == -ENODATA) {
		buf[0] = 0;
		return 0;
	}
	if (r < 0)
		return (int)r;
	buf[r] = 0;
	return 1;
}

/* Set (val) or remove (NULL) one option of n; removing one not set is fine. */
static int opt_put(struct sa_ctx *x, const struct sa_node *n, const char *xname, const char *val)
{
	int r;

	if (x->c) {
		x->c->err_msg[0] = 0;
		r = val ? bch_fs_setxattr(x->c, n->inum, xname, val, strlen(val), 0)
			: bch_fs_removexattr(x->c, n->inum, xname);
	} else {
		r = val ? lsetxattr(n->path, xname, val, strlen(val), 0) : lremovexattr(n->path, xname);
		r = r ? -errno : 0;
	}
	return r == -ENODATA && !val ? 0 : r;
}

static int node_mode(struct sa_ctx *x, const struct sa_node *n, mode_t *mode)
{
	struct stat st;
	int r = x->c ? bch_fs_getattr(x->c, n->inum, &st) : lstat(n->path, &st) ? -errno : 0;

	if (!r)
		*mode = st.st_mode;
	return r;
}

struct child_list {
	struct sa_node	*v;
	size_t		nr, size;
	const char	*parent;
};

static int child_add(struct child_list *l, const char *name, size_t len, uint64_t inum)
{
	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)))
		return 0;
	if (l->nr == l->size) {
		size_t size = l->size ? 2 * l->size : 16;
		struct sa_node *v = realloc(l->v, size * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->size = size;
	}
	struct sa_node *n = &l->v[l->nr++];
	snprintf(n->path, sizeof(n->path), "%s/%.*s", l->parent, (int)len, name);
	n->inum = inum;
	return 0;
}

static int readdir_cb(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type,
		      uint64_t next_pos)
{
	(void)d_type;
	(void)next_pos;
	return child_add(priv, name, len, inum);
}

/* The entries of directory n (all read before any is changed). */
static int children(struct sa_ctx *x, const struct sa_node *n, struct child_list *l)
{
	memset(l, 0, sizeof(*l));
	l->parent = n->path;
	if (x->c)
		return bch_fs_readdir(x->c, n->inum, 0, readdir_cb, l);
	DIR *d = opendir(n->path);
	struct dirent *e;
	int r = 0;
	if (!d)
		return -errno;
	while (!r && (errno = 0, e = readdir(d)))
		r = child_add(l, e->d_name, strlen(e->d_name), 0);
	if (!r && errno)
		r = -errno;
	closedir(d);
	return r;
}

/* ------------------------------------------------------------------ the walk */

static void path_err(struct sa_ctx *x, const char *path, const char *what, int r)
{
	if (x->check_only && r == -EROFS)
		return;		/* everything before the write passed */
	if (x->c && x->c->err_msg[0]) {
		cmd_err(x->cmd, "%s: %s: %s", path, what, x->c->err_msg);
		x->c->err_msg[0] = 0;	/* said: not the reason of a later failure */
	} else if (r == -EINVAL) {
		cmd_err(x->cmd, "%s: %s: %s (a label or device the filesystem does not have?)",
			path, what, strerror(-r));
	} else if (r == -EPERM) {
		cmd_err(x->cmd, "%s: %s: %s (only the file's owner or root may change its options)",
			path, what, strerror(-r));
	} else {
		cmd_err(x->cmd, "%s: %s: %s", path, what, strerror(-r));
	}
	x->ret = EXIT_FAIL;
}

/*
 * Re-inherit below directory dir: its option xname went from old to new
 * ("" when it had none, new NULL when removed).  Children holding old take
 * new; directories among them are walked in turn.
 */
static void reinherit(struct sa_ctx *x, const struct sa_node *dir, const char *xname,
		      const char *old, const char *new)
{
	struct child_list l;
	char cur[256];
	int r = children(x, dir, &l);

	if (r) {
		path_err(x, dir->path, "reading the directory", r);
		free(l.v);
		return;
	}
	for (size_t i = 0; i < l.nr; i++) {
		struct sa_node *n = &l.v[i];
		mode_t mode;
		if ((r = node_mode(x, n, &mode))) {
			path_err(x, n->path, "stat", r);
			continue;
		}
		if (!S_ISREG(mode) && !S_ISDIR(mode))
			continue;	/* symlinks and special files take no options */
		if ((r = opt_get(x, n, xname, cur, sizeof(cur))) < 0) {
			path_err(x, n->path, xname, r);
			continue;
		}
		if (strcmp(cur, old))
			continue;	/* its own value: it and its subtree keep theirs */
		if ((r = opt_put(x, n, xname, new))) {
			path_err(x, n->path, xname, r);
			continue;
		}
		if (S_ISDIR(mode))
			reinherit(x, n, xname, old, new);
	}
	free(l.v);
}

/* One option on one PATH (and, for a directory, below it). */
static void set_one(struct sa_ctx *x, const struct sa_node *n, bool dir, enum bch_opt_id id,
		    const char *val)
{
	char xname[64], old[256], what[320];
	int r;

	snprintf(xname, sizeof(xname), OPT_PREFIX "%s", bch_opt_table[id].name);
	snprintf(what, sizeof(what), "%s=%s", xname, val ? val : "- (remove)");
	if ((r = opt_get(x, n, xname, old, sizeof(old))) < 0) {
		path_err(x, n->path, xname, r);
		return;
	}
	if ((r = opt_put(x, n, xname, val))) {
		path_err(x, n->path, what, r);
		return;
	}
	if (x->check_only || !dir)
		return;
	/* the value as the filesystem shows it ("zstd" may read back as given, "dev 1" for 1) */
	char now[256];
	if ((r = opt_get(x, n, xname, now, sizeof(now))) < 0) {
		path_err(x, n->path, xname, r);
		return;
	}
	if (strcmp(now, old))
		reinherit(x, n, xname, old, r ? now : NULL);
}

static void setattr_path(struct sa_ctx *x, const struct sa_args *a, struct sa_node *n)
{
	mode_t mode;
	int r = node_mode(x, n, &mode);

	if (r) {
		path_err(x, n->path, "stat", r);
		return;
	}
	if (!S_ISREG(mode) && !S_ISDIR(mode)) {
		cmd_err(x->cmd, "%s: only regular files and directories take file options", n->path);
		x->ret = EXIT_FAIL;
		return;
	}
	for (unsigned id = 0; a->remove_all && id < BCH_OPT_NR; id++)
		if (bch_fs_is_inode_opt(bch_opt_table[id].name) && !a->given[id])
			set_one(x, n, S_ISDIR(mode), id, NULL);
	for (unsigned id = 0; id < BCH_OPT_NR; id++)
		if (a->given[id])
			set_one(x, n, S_ISDIR(mode), id, a->val[id]);
}

/* --------------------------------------------------------------- entry points */

static bool mount_dev_is(const char *point, char *src, dev_t dev, void *st)
{
	(void)point;
	(void)src;
	return dev == ((const struct stat *)st)->st_dev;
}

/* Is path (already stat'ed) on a fuse.bcachefs mount? The device number says. */
static bool on_our_mount(const struct stat *st)
{
	return cmd_each_mount(mount_dev_is, (void *)st);
}

int cmd_setattr(int argc, char *argv[])
{
	struct sa_args a;
	struct sa_ctx x = { .cmd = "setattr" };
	int r = parse_args("setattr", argc, argv, 1, &a);

	if (r) {
		if (r == EXIT_USAGE)
			fprintf(stderr, "Try 'bcachefs setattr --help'.\n");
		free(a.paths);
		return r < 0 ? EXIT_OK : r;
	}
	for (int i = 0; i < a.nr_paths; i++) {
		struct sa_node n = { 0 };
		struct stat st;
		const char *p = a.paths[i];
		if (stat(p, &st)) {
			cmd_err("setattr", "%s: %s", p, strerror(errno));
			x.ret = EXIT_FAIL;
			continue;
		}
		if (!on_our_mount(&st)) {
			cmd_err("setattr", "%s: not in a bcachefs mount (for an unmounted filesystem: "
				"bcachefs image setattr DEVICE [--OPTION=VALUE]... PATH)", p);
			x.ret = EXIT_FAIL;
			continue;
		}
		/* the named file itself, even when p is a symlink to it */
		if (!realpath(p, n.path)) {
			cmd_err("setattr", "%s: %s", p, strerror(errno));
			x.ret = EXIT_FAIL;
			continue;
		}
		setattr_path(&x, &a, &n);
	}
	free(a.paths);
	return x.ret;
}

int cmd_setattr_image(struct bch_fs *c, bool check_only, int argc, char **argv)
{
	struct sa_args a;
	struct sa_ctx x = { .cmd = "image setattr", .c = c, .check_only = check_only };
	int r = parse_args("image setattr", argc, argv, 1, &a);

	if (r || !c) {		/* no filesystem: a dry run of the arguments */
		free(a.paths);
		return r < 0 ? EXIT_OK : r;
	}
	for (int i = 0; i < a.nr_paths; i++) {
		struct sa_node n = { 0 };
		snprintf(n.path, sizeof(n.path), "%s", a.paths[i]);
		if ((r = bch_fs_lookup_path(c, a.paths[i], true, &n.inum))) {
			cmd_err(x.cmd, "%s: %s", a.paths[i], strerror(-r));
			x.ret = EXIT_FAIL;
			continue;
		}
		setattr_path(&x, &a, &n);
	}
	free(a.paths);
	return x.ret;
}
