// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_image.c - `bcachefs image VERB DEVICE[:DEVICE...] ARGS`: read and
 * change the files inside an unmounted filesystem, without root and
 * without a kernel driver (for building images in CI).
 *
 * Every verb opens the filesystem (read-only for verbs that only read),
 * runs through the fs_ops library, and closes it cleanly.  `shell` runs
 * many verbs from stdin in one open.  Paths inside the image are absolute
 * or relative to its root; symlinks are followed inside the image only.
 *
 * Verbs that can fail on what the image holds (struct verb's check) run
 * twice: a check pass on a read-only open, which writes nothing, then the
 * writing pass.  When the check pass found work and only read (update,
 * sync: struct verb's in_place), that same open becomes
 * read-write in place (bch_fs_read_write(), fs.h): the superblocks,
 * journal positions, roots, bucket state and cached nodes it read serve
 * the writing pass.  When it cannot (a replay, members missing, another
 * writer between, ...: fs.h says when) it is closed and the filesystem
 * opened again read-write, as it always was before.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "cmds.h"
#include "fsname.h"
#include "copy.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "image_shrink.h"
#include "inode.h"
#include "progress.h"
#include "snapshot.h"
#include "opts.h"
#include "spec.h"
#include "subvolume_diff.h"
#include "tar.h"

struct img {
	struct bch_fs	*c;
	const char	*dev;		/* the device list as given, for messages */
	bool		json;		/* --json (ls, stat, update, import-tar) */
	struct bch_json	*j;		/* ls --json: the document being written */
	bool		check_only;	/* c is a read-only open: check, change nothing */
	char		*script;	/* shell: stdin, read whole before the open */
	void		*verb_priv;	/* update: the check pass's findings, for the rw pass */
};

typedef int (*verb_fn)(struct img *im, int argc, char **argv);

/*
 * A verb's failure on path: printed, EXIT_FAIL.  On the check pass (a
 * read-only open) -EROFS means everything up to the write passed: EXIT_OK,
 * nothing printed.
 */
static int verb_err(struct img *im, const char *verb, const char *path, int r)
{
	/* a read-only subvolume refuses on the check pass too: that one counts */
	if (im->check_only && r == -EROFS && !bch_snapshot_ro_refused(im->c))
		return EXIT_OK;
	/* the detail: which copy failed, or which library is missing */
	if ((r == -EIO || r == -ELIBACC || r == -EOPNOTSUPP) && im->c->err_msg[0])
		cmd_err("image", "%s: %s: %s (%s)", verb, path, strerror(-r), im->c->err_msg);
	else
		cmd_err("image", "%s: %s: %s", verb, path, strerror(-r));
	return EXIT_FAIL;
}

/* Resolve path's parent directory and last name (name points into buf). */
static int split_path(struct img *im, const char *path, uint64_t *dir, char *buf, size_t len,
		      char **name)
{
	return bch_fs_lookup_parent(im->c, path, dir, buf, len, name);
}

/* ------------------------------------------------------------- listing */

static void mode_string(mode_t m, char *s)
{
	const char *types = "?pc?d?b?-?l?s???";
	s[0] = types[(m & S_IFMT) >> 12];
	const char *rwx = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		s[1 + i] = (m & (0400 >> i)) ? rwx[i] : '-';
	if (m & S_ISUID)
		s[3] = (m & S_IXUSR) ? 's' : 'S';
	if (m & S_ISGID)
		s[6] = (m & S_IXGRP) ? 's' : 'S';
	if (m & S_ISVTX)
		s[9] = (m & S_IXOTH) ? 't' : 'T';
	s[10] = 0;
}

static void time_string(struct timespec ts, char *buf, size_t len)
{
	struct tm tm;
	time_t t = ts.tv_sec;

	gmtime_r(&t, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%09ld +0000", ts.tv_nsec);
}

struct ls_ent {
	char		*name;
	uint64_t	inum;
};

struct ls_collect {
	struct ls_ent	*e;
	size_t		nr, cap;
	bool		all;
};

static int ls_collect_fn(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type,
			 uint64_t next)
{
	struct ls_collect *l = priv;
	(void)d_type; (void)next;

	if (!l->all && name[0] == '.')
		return 0;
	if (l->nr == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->e = realloc(l->e, l->cap * sizeof(*l->e));
		if (!l->e)
			abort();
	}
	l->e[l->nr].name = strndup(name, len);
	l->e[l->nr++].inum = inum;
	return 0;
}

static int ls_ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ls_ent *)a)->name, ((const struct ls_ent *)b)->name);
}

static const char *type_name(mode_t m);

/* The members of a file's JSON object that ls and stat share (stat(2) fields, times both ways). */
static void json_stat(struct bch_json *j, const struct stat *st)
{
	json_string(j, "type", type_name(st->st_mode));
	json_u64(j, "mode", st->st_mode & 07777);
	json_u64(j, "nlink", st->st_nlink);
	json_u64(j, "uid", st->st_uid);
	json_u64(j, "gid", st->st_gid);
	json_u64(j, "size", st->st_size);
	json_u64(j, "allocated", (uint64_t)st->st_blocks << 9);
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
		json_u64(j, "rdev_major", major(st->st_rdev));
		json_u64(j, "rdev_minor", minor(st->st_rdev));
	}
	json_time(j, "atime", st->st_atim.tv_sec, st->st_atim.tv_nsec);
	json_time(j, "mtime", st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	json_time(j, "ctime", st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
	json_s64(j, "atime_ns", (int64_t)st->st_atim.tv_sec * 1000000000 + st->st_atim.tv_nsec);
	json_s64(j, "mtime_ns", (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
	json_s64(j, "ctime_ns", (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec);
}

/* ls --json: one element of "entries" (an entry that cannot be read: path, name and inode only). */
static void json_entry(struct img *im, const char *path, const char *name, uint64_t inum)
{
	char target[4096] = "";
	struct stat st;

	json_open(im->j, NULL, false);
	json_string(im->j, "path", path);
	json_string(im->j, "name", name);
	json_u64(im->j, "inode", inum);
	if (!bch_fs_getattr(im->c, inum, &st)) {
		json_stat(im->j, &st);
		if (S_ISLNK(st.st_mode) && bch_fs_readlink(im->c, inum, target, sizeof(target)) >= 0)
			json_string(im->j, "target", target);
	}
	json_close(im->j);
}

static void print_entry(struct img *im, const char *name, uint64_t inum, bool lng)
{
	struct stat st;

	if (!lng) {
		printf("%s\n", name);
		return;
	}
	if (bch_fs_getattr(im->c, inum, &st)) {
		printf("?????????? %s\n", name);
		return;
	}
	char mode[11], tbuf[64], target[4096] = "";
	mode_string(st.st_mode, mode);
	struct tm tm;
	time_t t = st.st_mtim.tv_sec;
	gmtime_r(&t, &tm);
	strftime(tbuf, sizeof(tbuf), "%Y-%m-%d %H:%M", &tm);
	if (S_ISLNK(st.st_mode))
		bch_fs_readlink(im->c, inum, target, sizeof(target));
	if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
		printf("%s %3lu %5u %5u %4u, %4u %s %s\n", mode, (unsigned long)st.st_nlink, st.st_uid,
		       st.st_gid, major(st.st_rdev), minor(st.st_rdev), tbuf, name);
	else
		printf("%s %3lu %5u %5u %10" PRIu64 " %s %s%s%s\n", mode, (unsigned long)st.st_nlink,
		       st.st_uid, st.st_gid, (uint64_t)st.st_size, tbuf, name,
		       target[0] ? " -> " : "", target);
}

/* dir + "/" + name, malloc'd */
static char *path_join(const char *dir, const char *name)
{
	size_t len = strlen(dir) + strlen(name) + 2;
	char *p = malloc(len);

	if (!p)
		abort();
	snprintf(p, len, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", name);
	return p;
}

static int ls_dir(struct img *im, const char *path, uint64_t inum, bool lng, bool rec, bool all,
		  bool header)
{
	struct ls_collect l = { .all = all };
	int r = bch_fs_readdir(im->c, inum, 0, ls_collect_fn, &l);

	if (r)
		return verb_err(im, "ls", path, r);
	if (l.nr)	/* qsort(NULL, 0) is undefined: an empty directory */
		qsort(l.e, l.nr, sizeof(*l.e), ls_ent_cmp);
	if (header && !im->j)
		printf("%s:\n", path);
	for (size_t i = 0; i < l.nr; i++) {
		if (im->j) {
			char *full = path_join(path, l.e[i].name);
			json_entry(im, full, l.e[i].name, l.e[i].inum);
			free(full);
		} else {
			print_entry(im, l.e[i].name, l.e[i].inum, lng);
		}
	}
	int ret = 0;
	for (size_t i = 0; i < l.nr; i++) {
		struct stat st;
		if (rec && strcmp(l.e[i].name, ".") && strcmp(l.e[i].name, "..") &&
		    !bch_fs_getattr(im->c, l.e[i].inum, &st) && S_ISDIR(st.st_mode)) {
			char *sub = path_join(path, l.e[i].name);
			if (!im->j)
				printf("\n");
			ret |= ls_dir(im, sub, l.e[i].inum, lng, rec, all, true);
			free(sub);
		}
		free(l.e[i].name);
	}
	free(l.e);
	return ret;
}

static int verb_ls(struct img *im, int argc, char **argv)
{
	bool lng = false, rec = false, all = false;
	int o, ret = 0;

	while ((o = getopt(argc, argv, "+lRa")) != -1)
		switch (o) {
		case 'l': lng = true; break;
		case 'R': rec = true; break;
		case 'a': all = true; break;
		default: return cmd_opt_err("image ls", argv, "+lRa");
		}
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	char *root[] = { "/" };
	char **paths = optind < argc ? argv + optind : root;
	int nr = optind < argc ? argc - optind : 1;
	struct bch_json j;

	/* --json: {"version", "entries": [...]}, every listed file an element, whatever -l */
	if (im->json) {
		im->j = &j;
		json_begin(&j, stdout, true);
		json_open(&j, "entries", true);
	}
	for (int i = 0; i < nr; i++) {
		uint64_t inum;
		struct stat st;
		int r = bch_fs_lookup_path(im->c, paths[i], false, &inum);
		if (!r)
			r = bch_fs_getattr(im->c, inum, &st);
		if (r) {
			ret = verb_err(im, "ls", paths[i], r);
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (im->j) {
				const char *slash = strrchr(paths[i], '/');
				json_entry(im, paths[i], slash && slash[1] ? slash + 1 : paths[i], inum);
			} else {
				print_entry(im, paths[i], inum, lng);
			}
			continue;
		}
		ret |= ls_dir(im, paths[i], inum, lng, rec, all, nr > 1 || rec);
	}
	if (im->j) {
		json_end(&j);
		im->j = NULL;
	}
	return ret;
}

static int verb_cat(struct img *im, int argc, char **argv)
{
	char *buf = malloc(1 << 20);
	int ret = 0;

	if (!buf)
		return EXIT_FAIL;
	if (argc < 2) {
		free(buf);
		return EXIT_USAGE;
	}
	if (!im->c) {
		free(buf);
		return EXIT_OK;
	}
	for (int i = 1; i < argc; i++) {
		uint64_t inum;
		int r = bch_fs_lookup_path(im->c, argv[i], true, &inum);
		for (uint64_t off = 0; !r;) {
			ssize_t n = bch_fs_read(im->c, inum, off, buf, 1 << 20);
			if (n < 0)
				r = (int)n;
			if (n <= 0)
				break;
			fwrite(buf, 1, n, stdout);
			off += n;
		}
		if (r)
			ret = verb_err(im, "cat", argv[i], r);
	}
	free(buf);
	fflush(stdout);
	return ret;
}

static const char *type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG: return "regular file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symbolic link";
	case S_IFCHR: return "character special file";
	case S_IFBLK: return "block special file";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	}
	return "unknown";
}

static int verb_stat(struct img *im, int argc, char **argv)
{
	int ret = 0;

	if (argc < 2)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	/* --json: {"version", "files": [...]} on one line; a path that fails is left out (stderr, exit 1) */
	struct bch_json j;
	if (im->json) {
		json_begin(&j, stdout, false);
		json_open(&j, "files", true);
	}
	for (int i = 1; i < argc; i++) {
		uint64_t inum;
		struct stat st;
		unsigned fl = 0;
		uint32_t project = 0;
		int r = bch_fs_lookup_path(im->c, argv[i], false, &inum);
		if (!r)
			r = bch_fs_getattr(im->c, inum, &st);
		if (!r)
			r = bch_fs_get_flags(im->c, inum, &fl, &project);
		if (r) {
			ret = verb_err(im, "stat", argv[i], r);
			continue;
		}
		uint32_t bfl;
		char names[96];
		bch_inode_flags_from_fs(fl, &bfl);
		bch_inode_flags_to_text(bfl, names, sizeof(names));
		char a[64], m[64], c[64], mode[11];
		time_string(st.st_atim, a, sizeof(a));
		time_string(st.st_mtim, m, sizeof(m));
		time_string(st.st_ctim, c, sizeof(c));
		mode_string(st.st_mode, mode);
		if (im->json) {
			json_open(&j, NULL, false);
			json_string(&j, "path", argv[i]);
			json_u64(&j, "inode", inum);
			json_stat(&j, &st);
			/* chattr's flags by name (lsattr -l), and the project ID */
			json_open(&j, "flags", true);
			for (char *p = names, *e; *p; p = *e ? e + 1 : e) {
				e = p + strcspn(p, ",");
				char one[32];
				snprintf(one, sizeof(one), "%.*s", (int)(e - p), p);
				json_string(&j, NULL, one);
			}
			json_close(&j);
			json_u64(&j, "project", project);
			json_close(&j);
			continue;
		}
		printf("  File: %s\n", argv[i]);
		printf("  Size: %-12" PRIu64 " Blocks: %-10" PRIu64 " %s\n", (uint64_t)st.st_size,
		       (uint64_t)st.st_blocks, type_name(st.st_mode));
		printf(" Inode: %-12" PRIu64 " Links: %lu", inum, (unsigned long)st.st_nlink);
		if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
			printf("  Device type: %u,%u", major(st.st_rdev), minor(st.st_rdev));
		printf("\nAccess: (%04o/%s)  Uid: %u  Gid: %u\n", st.st_mode & 07777, mode, st.st_uid, st.st_gid);
		printf("Access: %s\nModify: %s\nChange: %s\n", a, m, c);
		printf(" Flags: %s  Project: %u\n", names[0] ? names : "(none)", (unsigned)project);
	}
	if (im->json)
		json_end(&j);
	return ret;
}

/* -------------------------------------------------------------- copying */

static int verb_get(struct img *im, int argc, char **argv)
{
	int o;

	while ((o = getopt(argc, argv, "+r")) != -1)
		if (o != 'r')
			return cmd_opt_err("image get", argv, "+r");	/* -r accepted: directories are always copied whole */
	if (argc - optind != 2)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	const char *src = argv[optind], *dst = argv[optind + 1];
	uint64_t inum;
	int r = bch_fs_lookup_path(im->c, src, false, &inum);
	if (r)
		return verb_err(im, "get", src, r);

	/* into dst if it is a directory, else as dst */
	struct stat hs;
	char *dup = strdup(dst), *name, *dirpath;
	if (!stat(dst, &hs) && S_ISDIR(hs.st_mode)) {
		dirpath = dup;
		const char *b = strrchr(src, '/');
		name = (char *)(b && b[1] ? b + 1 : src);
		if (!strcmp(name, "/") || !*name)
			name = "root";
	} else {
		char *slash = strrchr(dup, '/');
		if (slash) {
			*slash = 0;
			dirpath = *dup ? dup : "/";
			name = slash + 1;
		} else {
			dirpath = ".";
			name = dup;
		}
	}
	int dfd = open(dirpath, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		cmd_err("image", "get: %s: %s", dirpath, strerror(errno));
		free(dup);
		return EXIT_FAIL;
	}
	struct copy_ctx x;
	copy_ctx_init(&x, im->c, "image get");
	x.dev = im->dev;
	copy_out_set_root(&x, src);
	r = copy_out(&x, inum, dfd, name);
	copy_progress_done(&x);
	copy_ctx_exit(&x);
	close(dfd);
	free(dup);
	return r ? EXIT_FAIL : EXIT_OK;
}

static int verb_put(struct img *im, int argc, char **argv)
{
	int o;

	while ((o = getopt(argc, argv, "+r")) != -1)
		if (o != 'r')
			return cmd_opt_err("image put", argv, "+r");
	if (argc - optind != 2)
		return EXIT_USAGE;
	const char *src = argv[optind], *dst = argv[optind + 1];
	uint64_t dir, inum;
	char buf[4096], *name;
	struct stat st;
	int r;

	if (!im->c) {
		/* dry run: the arguments, and a source to copy, before any open */
		if (lstat(src, &st)) {
			cmd_err("image", "put: %s: %s", src, strerror(errno));
			return EXIT_FAIL;
		}
		return EXIT_OK;
	}
	/* into dst if it is a directory in the image, else as dst */
	if (!bch_fs_lookup_path(im->c, dst, true, &inum) && !bch_fs_getattr(im->c, inum, &st) &&
	    S_ISDIR(st.st_mode)) {
		dir = inum;
		char *sd = strdup(src);
		size_t n = strlen(sd);
		while (n > 1 && sd[n - 1] == '/')
			sd[--n] = 0;
		const char *b = strrchr(sd, '/');
		snprintf(buf, sizeof(buf), "%s", b ? b + 1 : sd);
		free(sd);
		name = buf;
	} else if ((r = split_path(im, dst, &dir, buf, sizeof(buf), &name))) {
		return verb_err(im, "put", dst, r);
	}
	/* what is wrong with the destination is named as the destination */
	if ((r = bch_fs_getattr(im->c, dir, &st)))
		return verb_err(im, "put", dst, r);
	if (!S_ISDIR(st.st_mode))
		return verb_err(im, "put", dst, -ENOTDIR);
	if (!(r = bch_fs_lookup(im->c, dir, name, &inum)))
		r = -EEXIST;
	if (r != -ENOENT)
		return verb_err(im, "put", dst, r);
	if ((r = bch_subvol_writable(im->c, dir)))
		return verb_err(im, "put", dst, r);
	if (im->check_only)
		return EXIT_OK;
	struct copy_ctx x;
	copy_ctx_init(&x, im->c, "image put");
	r = copy_in(&x, src, dir, name);
	copy_progress_done(&x);
	copy_ctx_exit(&x);
	return r ? EXIT_FAIL : EXIT_OK;
}

static int verb_extract(struct img *im, int argc, char **argv)
{
	if (argc < 2 || argc > 3)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	const char *dst = argv[1], *from = argc == 3 ? argv[2] : "/";
	uint64_t inum;
	int r = bch_fs_lookup_path(im->c, from, true, &inum);
	if (r)
		return verb_err(im, "extract", from, r);
	if (mkdir(dst, 0755) && errno != EEXIST) {
		cmd_err("image", "extract: %s: %s", dst, strerror(errno));
		return EXIT_FAIL;
	}
	int dfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		cmd_err("image", "extract: %s: %s", dst, strerror(errno));
		return EXIT_FAIL;
	}
	struct copy_ctx x;
	copy_ctx_init(&x, im->c, "image extract");
	x.dev = im->dev;
	x.keep_going = true;
	copy_out_set_root(&x, from);
	r = copy_out_contents(&x, inum, dfd);
	if (!r) {
		/* the top directory's own attributes */
		struct stat st;
		if (!bch_fs_getattr(im->c, inum, &st)) {
			struct timespec ts[2] = { st.st_atim, st.st_mtim };
			if (x.owners)
				(void)!fchown(dfd, st.st_uid, st.st_gid);
			fchmod(dfd, st.st_mode & 07777);
			futimens(dfd, ts);
		}
	}
	copy_progress_done(&x);
	if (r)
		cmd_err("image", "extract: %s: stopped after %" PRIu64 " files", dst, x.files);
	else if (x.failed)
		cmd_err("image", "extract: %s: %" PRIu64 " files or directories could not be "
			"extracted (named above); %" PRIu64 " were", dst, x.failed, x.files);
	bool failed = r || x.failed;
	copy_ctx_exit(&x);
	close(dfd);
	return failed ? EXIT_FAIL : EXIT_OK;
}

/* ------------------------------------------------------------ changing */

static int parse_mode(const char *s, mode_t *m)
{
	char *end;
	unsigned long v = strtoul(s, &end, 8);

	if (!*s || *end || v > 07777)
		return -EINVAL;
	*m = v;
	return 0;
}

static int mkdir_p(struct img *im, const char *path, mode_t mode)
{
	char *work = strdup(path), *p = work;
	uint64_t cur = BCH_ROOT_INO;
	int r = 0;

	while (!r && *p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		char *slash = strchr(p, '/');
		if (slash)
			*slash = 0;
		uint64_t next;
		struct stat st;
		r = bch_fs_lookup(im->c, cur, p, &next);
		if (r == -ENOENT)
			r = bch_fs_create(im->c, cur, p, S_IFDIR | mode, 0, getuid(), getgid(), &next);
		else if (!r && !(r = bch_fs_getattr(im->c, next, &st)) && !S_ISDIR(st.st_mode))
			r = -ENOTDIR;
		cur = next;
		p = slash ? slash + 1 : p + strlen(p);
	}
	free(work);
	return r;
}

/* Check pass of mkdir: is parent (a path) one of argv[first..i) (trailing slashes aside)? */
static bool made_before(char **argv, int first, int i, const char *parent)
{
	size_t pl = strlen(parent);

	while (pl > 1 && parent[pl - 1] == '/')
		pl--;
	for (int k = first; k < i; k++) {
		size_t n = strlen(argv[k]);
		while (n > 1 && argv[k][n - 1] == '/')
			n--;
		if (n == pl && !strncmp(argv[k], parent, n))
			return true;
	}
	return false;
}

static int verb_mkdir(struct img *im, int argc, char **argv)
{
	bool parents = false;
	mode_t mode = 0755;
	int o, ret = 0;

	while ((o = getopt(argc, argv, "+pm:")) != -1)
		switch (o) {
		case 'p': parents = true; break;
		case 'm':
			if (parse_mode(optarg, &mode)) {
				cmd_err("image", "mkdir: bad mode '%s' (octal)", optarg);
				return EXIT_USAGE;
			}
			break;
		default: return cmd_opt_err("image mkdir", argv, "+pm:");
		}
	if (optind >= argc)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	for (int i = optind; i < argc; i++) {
		uint64_t dir;
		char buf[4096], *name;
		int r = parents ? mkdir_p(im, argv[i], mode) : split_path(im, argv[i], &dir, buf, sizeof(buf), &name);
		if (r == -ENOENT && im->check_only && made_before(argv, optind, i, buf))
			r = -EROFS;	/* its parent is one made by an earlier argument */
		if (!r && !parents)
			r = bch_fs_create(im->c, dir, name, S_IFDIR | mode, 0, getuid(), getgid(), NULL);
		if (r && verb_err(im, "mkdir", argv[i], r))
			ret = EXIT_FAIL;
	}
	return ret;
}

/* rm -f: the children of directory inum (not "." and "..", not subvolumes) */
struct kids {
	uint64_t	*v;
	size_t		nr, cap;
};

static int kids_fn(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type,
		   uint64_t next_pos)
{
	struct kids *k = priv;
	(void)next_pos;

	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.') ||
	    d_type == BCH_DT_SUBVOL)
		return 0;
	if (k->nr == k->cap) {
		uint64_t *n = realloc(k->v, (k->cap = k->cap ? 2 * k->cap : 16) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		k->v = n;
	}
	k->v[k->nr++] = inum;
	return 0;
}

/*
 * rm -f: clear the immutable and append-only flags (chattr -ia) of inum and,
 * with tree, of everything below it, so the removal may go on.  dry: clear
 * nothing, return 1 when something has them (the read-only check pass).
 */
static int unfreeze(struct bch_fs *c, uint64_t inum, bool tree, bool dry)
{
	const unsigned frozen = FS_IMMUTABLE_FL | FS_APPEND_FL;
	struct kids k = { 0 };
	struct stat st;
	unsigned fl;
	uint32_t project;
	int r = bch_fs_get_flags(c, inum, &fl, &project);

	if (!r && (fl & frozen))
		r = dry ? 1 : bch_fs_set_flags(c, inum, fl & ~frozen, project, NULL);
	if (r || !tree || (r = bch_fs_getattr(c, inum, &st)) || !S_ISDIR(st.st_mode))
		return r;
	r = bch_fs_readdir(c, inum, 0, kids_fn, &k);
	for (size_t i = 0; i < k.nr && !r; i++)
		r = unfreeze(c, k.v[i], true, dry);
	free(k.v);
	return r;
}

static int verb_rm(struct img *im, int argc, char **argv)
{
	bool recursive = false, force = false;
	int o, ret = 0;

	while ((o = getopt(argc, argv, "+rRf")) != -1)
		switch (o) {
		case 'r': case 'R': recursive = true; break;
		case 'f': force = true; break;
		default: return cmd_opt_err("image rm", argv, "+rRf");
		}
	if (optind >= argc)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	for (int i = optind; i < argc; i++) {
		uint64_t dir;
		char buf[4096], *name;
		uint64_t inum;
		int r = split_path(im, argv[i], &dir, buf, sizeof(buf), &name);
		/*
		 * -f: immutable and append-only files go too (their flags first;
		 * the check pass, read-only, cannot clear them: it lets them by)
		 */
		bool frozen = false;
		if (!r && force && !bch_fs_lookup(im->c, dir, name, &inum)) {
			r = unfreeze(im->c, inum, recursive, im->check_only);
			frozen = r == 1;
			r = r == 1 ? 0 : r;
		}
		if (!r)
			r = recursive ? copy_rm_tree(im->c, dir, name) : bch_fs_unlink(im->c, dir, name);
		if (r == -EPERM && im->check_only && frozen)
			r = 0;
		if (r == -EISDIR && !recursive)
			r = -EISDIR;
		if (r == -EPERM && !force) {
			cmd_err("image", "rm: %s: %s (immutable or append-only, or in such a directory: "
				"-f removes such files)", argv[i], strerror(EPERM));
			ret = EXIT_FAIL;
		} else if (r && !(force && r == -ENOENT) && verb_err(im, "rm", argv[i], r)) {
			ret = EXIT_FAIL;
		}
	}
	return ret;
}

static int verb_mv(struct img *im, int argc, char **argv)
{
	if (argc != 3)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	uint64_t sdir, ddir, inum;
	char sb[4096], db[4096], *sname, *dname;
	struct stat st;
	int r = split_path(im, argv[1], &sdir, sb, sizeof(sb), &sname);

	if (r)
		return verb_err(im, "mv", argv[1], r);
	/* into an existing directory, like mv(1) */
	if (!bch_fs_lookup_path(im->c, argv[2], true, &inum) && !bch_fs_getattr(im->c, inum, &st) &&
	    S_ISDIR(st.st_mode)) {
		ddir = inum;
		dname = sname;
	} else if ((r = split_path(im, argv[2], &ddir, db, sizeof(db), &dname))) {
		return verb_err(im, "mv", argv[2], r);
	}
	r = bch_fs_rename(im->c, sdir, sname, ddir, dname, 0);
	return r ? verb_err(im, "mv", argv[1], r) : EXIT_OK;
}

/*
 * cp [--reflink] SRC DST: copy a regular file inside the image; with
 * --reflink its data is shared (reflink.h), not copied: no new data is
 * written but the unaligned last block of a destination that ends
 * elsewhere.  DST an existing directory: into it, under SRC's name; an
 * existing file: replaced (truncated first).
 */
static int verb_cp(struct img *im, int argc, char **argv)
{
	static const struct option lo[] = { { "reflink", no_argument, NULL, 'R' }, { 0 } };
	bool reflink = false;
	int o;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (o != 'R')
			return cmd_opt_err("image cp", argv, "");
		reflink = true;
	}
	argc -= optind - 1;
	argv += optind - 1;
	if (argc != 3)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	uint64_t src, dir, dst;
	struct stat ss, ds;
	char buf[4096], *name;
	int r = bch_fs_lookup_path(im->c, argv[1], false, &src);

	if (!r && !(r = bch_fs_getattr(im->c, src, &ss)) && !S_ISREG(ss.st_mode))
		r = S_ISDIR(ss.st_mode) ? -EISDIR : -EINVAL;
	if (r)
		return verb_err(im, "cp", argv[1], r);
	/* into an existing directory, like cp(1) */
	if (!bch_fs_lookup_path(im->c, argv[2], false, &dir) && !bch_fs_getattr(im->c, dir, &ds) &&
	    S_ISDIR(ds.st_mode)) {
		const char *slash = strrchr(argv[1], '/');
		snprintf(buf, sizeof(buf), "%s", slash ? slash + 1 : argv[1]);
		name = buf;
	} else if ((r = split_path(im, argv[2], &dir, buf, sizeof(buf), &name))) {
		return verb_err(im, "cp", argv[2], r);
	}
	r = bch_fs_lookup(im->c, dir, name, &dst);
	if (!r && !(r = bch_fs_getattr(im->c, dst, &ds)) && !S_ISREG(ds.st_mode))
		r = S_ISDIR(ds.st_mode) ? -EISDIR : -EINVAL;
	if (!r && dst == src)
		r = -EINVAL;	/* a file onto itself */
	if (r && r != -ENOENT)
		return verb_err(im, "cp", argv[2], r);
	if (im->check_only)
		return EXIT_OK;
	if (r == -ENOENT)
		r = bch_fs_create(im->c, dir, name, S_IFREG | (ss.st_mode & 07777), 0, ss.st_uid,
				  ss.st_gid, &dst);
	else
		r = bch_fs_truncate(im->c, dst, 0);
	if (r)
		return verb_err(im, "cp", argv[2], r);
	uint64_t size = ss.st_size, done = 0;
	if (reflink) {
		ssize_t n = bch_fs_remap_range(im->c, src, 0, dst, 0, size);
		if (n < 0)
			return verb_err(im, "cp --reflink", argv[2], n);
		done = n;
	} else {
		char *data = malloc(1 << 20);
		if (!data)
			return verb_err(im, "cp", argv[2], -ENOMEM);
		while (done < size) {
			size_t want = size - done < (1 << 20) ? size - done : (1 << 20);
			ssize_t n = bch_fs_read(im->c, src, done, data, want);
			if (n > 0)
				n = bch_fs_write(im->c, dst, done, data, n);
			if (n <= 0) {
				free(data);
				return verb_err(im, "cp", n < 0 ? argv[2] : argv[1], n < 0 ? n : -EIO);
			}
			done += n;
		}
		free(data);
	}
	if (done < size)
		return verb_err(im, "cp", argv[2], -EIO);
	return EXIT_OK;
}

static int verb_ln(struct img *im, int argc, char **argv)
{
	bool sym = false;
	int o;

	while ((o = getopt(argc, argv, "+s")) != -1)
		if (o == 's')
			sym = true;
		else
			return cmd_opt_err("image ln", argv, "+s");
	if (argc - optind != 2)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	const char *target = argv[optind], *link = argv[optind + 1];
	uint64_t dir, inum;
	char buf[4096], *name;
	int r = split_path(im, link, &dir, buf, sizeof(buf), &name);

	if (!r && sym)
		r = bch_fs_symlink(im->c, dir, name, target, getuid(), getgid(), NULL);
	else if (!r && !(r = bch_fs_lookup_path(im->c, target, false, &inum)))
		r = bch_fs_link(im->c, inum, dir, name);
	return r ? verb_err(im, "ln", link, r) : EXIT_OK;
}

static int verb_chmod(struct img *im, int argc, char **argv)
{
	struct bch_setattr sa = { .valid = BCH_SETATTR_MODE };
	int ret = 0;

	if (argc < 3)
		return EXIT_USAGE;
	if (parse_mode(argv[1], &sa.mode)) {
		cmd_err("image", "chmod: bad mode '%s' (octal)", argv[1]);
		return EXIT_USAGE;
	}
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	for (int i = 2; i < argc; i++) {
		uint64_t inum;
		int r = bch_fs_lookup_path(im->c, argv[i], true, &inum);
		if (!r)
			r = bch_fs_setattr(im->c, inum, &sa);
		if (r && verb_err(im, "chmod", argv[i], r))
			ret = EXIT_FAIL;
	}
	return ret;
}

static int parse_id(const char *s, bool group, unsigned *id)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s && !*end && v < UINT32_MAX) {
		*id = v;
		return 0;
	}
	if (group) {
		struct group *g = getgrnam(s);
		if (g) {
			*id = g->gr_gid;
			return 0;
		}
	} else {
		struct passwd *p = getpwnam(s);
		if (p) {
			*id = p->pw_uid;
			return 0;
		}
	}
	return -EINVAL;
}

static int verb_chown(struct img *im, int argc, char **argv)
{
	struct bch_setattr sa = { 0 };
	int ret = 0;

	if (argc < 3)
		return EXIT_USAGE;
	char *spec = strdup(argv[1]), *colon = strchr(spec, ':');
	if (colon)
		*colon = 0;
	if (*spec) {
		if (parse_id(spec, false, &sa.uid)) {
			cmd_err("image", "chown: unknown user '%s'", spec);
			free(spec);
			return EXIT_USAGE;
		}
		sa.valid |= BCH_SETATTR_UID;
	}
	if (colon && colon[1]) {
		if (parse_id(colon + 1, true, &sa.gid)) {
			cmd_err("image", "chown: unknown group '%s'", colon + 1);
			free(spec);
			return EXIT_USAGE;
		}
		sa.valid |= BCH_SETATTR_GID;
	}
	free(spec);
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	for (int i = 2; i < argc; i++) {
		uint64_t inum;
		int r = bch_fs_lookup_path(im->c, argv[i], false, &inum);
		if (!r)
			r = bch_fs_setattr(im->c, inum, &sa);
		if (r && verb_err(im, "chown", argv[i], r))
			ret = EXIT_FAIL;
	}
	return ret;
}

static int verb_touch(struct img *im, int argc, char **argv)
{
	struct bch_setattr sa = { .valid = BCH_SETATTR_ATIME | BCH_SETATTR_MTIME,
				  .atime = BCH_TIME_NOW, .mtime = BCH_TIME_NOW };
	int o, ret = 0;

	while ((o = getopt(argc, argv, "+d:")) != -1) {
		if (o != 'd')
			return cmd_opt_err("image touch", argv, "+d:");
		/* @SECONDS[.FRACTION] */
		char *end;
		if (optarg[0] != '@') {
			cmd_err("image", "touch: -d takes @SECONDS[.NANOSECONDS]");
			return EXIT_USAGE;
		}
		long long sec = strtoll(optarg + 1, &end, 10);
		long long ns = 0;
		if (*end == '.') {
			char frac[10] = "000000000";
			size_t n = strspn(end + 1, "0123456789");
			memcpy(frac, end + 1, n > 9 ? 9 : n);
			ns = atoll(frac);
			end += 1 + n;
		}
		if (*end || end == optarg + 1) {
			cmd_err("image", "touch: bad time '%s'", optarg);
			return EXIT_USAGE;
		}
		sa.atime = sa.mtime = sec * 1000000000LL + (sec < 0 ? -ns : ns);
	}
	if (optind >= argc)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	for (int i = optind; i < argc; i++) {
		uint64_t inum, dir;
		char buf[4096], *name;
		int r = bch_fs_lookup_path(im->c, argv[i], true, &inum);
		if (r == -ENOENT && !(r = split_path(im, argv[i], &dir, buf, sizeof(buf), &name)))
			r = bch_fs_create(im->c, dir, name, S_IFREG | 0644, 0, getuid(), getgid(), &inum);
		if (!r)
			r = bch_fs_setattr(im->c, inum, &sa);
		if (r && verb_err(im, "touch", argv[i], r))
			ret = EXIT_FAIL;
	}
	return ret;
}

static void print_value(const char *v, ssize_t n)
{
	bool text = true;
	for (ssize_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] >= 0x7f || v[i] == '"' || v[i] == '\\')
			if (!(i == n - 1 && !v[i]))
				text = false;
	if (text) {
		printf("\"%.*s\"", (int)(n && !v[n - 1] ? n - 1 : n), v);
		return;
	}
	printf("0x");
	for (ssize_t i = 0; i < n; i++)
		printf("%02x", (unsigned char)v[i]);
}

static int verb_getfattr(struct img *im, int argc, char **argv)
{
	const char *only = NULL;
	int o, ret = 0;

	while ((o = getopt(argc, argv, "+n:d")) != -1)
		switch (o) {
		case 'n': only = optarg; break;
		case 'd': break;
		default: return cmd_opt_err("image getfattr", argv, "+n:d");
		}
	if (optind >= argc)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;	/* dry run: arguments are fine */
	char *names = malloc(65536), *val = malloc(65536);
	for (int i = optind; i < argc; i++) {
		uint64_t inum;
		int r = bch_fs_lookup_path(im->c, argv[i], false, &inum);
		ssize_t len = r ? r : bch_fs_listxattr(im->c, inum, names, 65536);
		if (len < 0) {
			ret = verb_err(im, "getfattr", argv[i], (int)len);
			continue;
		}
		printf("# file: %s\n", argv[i]);
		for (ssize_t off = 0; !only && off < len; off += strlen(names + off) + 1) {
			ssize_t n = bch_fs_getxattr(im->c, inum, names + off, val, 65536);
			if (n < 0)
				continue;
			printf("%s=", names + off);
			print_value(val, n);
			printf("\n");
		}
		/* -n asks by name, as getfattr(1) does: also names listxattr leaves out
		 * (bcachefs_effective.* of options the file takes from the filesystem) */
		if (only) {
			ssize_t n = bch_fs_getxattr(im->c, inum, only, val, 65536);
			if (n < 0) {
				ret = verb_err(im, "getfattr", only, (int)n);
			} else {
				printf("%s=", only);
				print_value(val, n);
				printf("\n");
			}
		}
		printf("\n");
	}
	free(names);
	free(val);
	return ret;
}

static int parse_value(const char *s, char *out, size_t cap, size_t *len)
{
	if (!strncmp(s, "0x", 2)) {
		size_t n = strlen(s + 2);
		if (n % 2 || n / 2 > cap)
			return -EINVAL;
		for (size_t i = 0; i < n / 2; i++) {
			unsigned v;
			if (sscanf(s + 2 + 2 * i, "%2x", &v) != 1)
				return -EINVAL;
			out[i] = v;
		}
		*len = n / 2;
		return 0;
	}
	size_t n = strlen(s);
	if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
		s++;
		n -= 2;
	}
	if (n > cap)
		return -EINVAL;
	memcpy(out, s, n);
	*len = n;
	return 0;
}

static int verb_setfattr(struct img *im, int argc, char **argv)
{
	const char *name = NULL, *value = NULL, *remove = NULL;
	int o, ret = 0;

	while ((o = getopt(argc, argv, "+n:v:x:")) != -1)
		switch (o) {
		case 'n': name = optarg; break;
		case 'v': value = optarg; break;
		case 'x': remove = optarg; break;
		default: return cmd_opt_err("image setfattr", argv, "+n:v:x:");
		}
	if (optind >= argc || (!name && !remove) || (name && remove))
		return EXIT_USAGE;
	/* as long as the argument: a value over 64 KiB gets the library's E2BIG */
	char *val = malloc(value ? strlen(value) + 1 : 1);
	size_t vlen = 0;
	if (!val)
		return EXIT_FAIL;
	if (value && parse_value(value, val, strlen(value), &vlen)) {
		cmd_err("image", "setfattr: bad value '%s'", value);
		free(val);
		return EXIT_USAGE;
	}
	if (!im->c) {
		free(val);
		return EXIT_OK;	/* dry run: arguments are fine */
	}
	for (int i = optind; i < argc; i++) {
		uint64_t inum;
		int r = bch_fs_lookup_path(im->c, argv[i], false, &inum);
		im->c->err_msg[0] = 0;
		if (!r)
			r = remove ? bch_fs_removexattr(im->c, inum, remove)
				   : bch_fs_setxattr(im->c, inum, name, val, vlen, 0);
		if (im->check_only && r == -EROFS)
			r = 0;	/* all that can be checked without writing passed */
		/* bcachefs.<option>: which value or file the option refused */
		if (r == -EINVAL && im->c->err_msg[0]) {
			cmd_err("image", "setfattr: %s: %s", argv[i], im->c->err_msg);
			ret = EXIT_FAIL;
		} else if (r) {
			ret = verb_err(im, "setfattr", argv[i], r);
		}
	}
	free(val);
	return ret;
}

static const char setopt_usage[] = "options are foreground_target, background_target, "
	"promote_target, compression, background_compression, data_checksum, data_replicas, "
	"erasure_code "
	"(NAME=VALUE, or NAME= to inherit)";

static int verb_setopt(struct img *im, int argc, char **argv)
{
	char *opt, *eq, perr[128];
	uint64_t v;
	int ret = 0;

	if (argc < 3)
		return EXIT_USAGE;
	opt = strdup(argv[1]);
	if (!opt)
		return EXIT_FAIL;
	eq = strchr(opt, '=');
	if (eq)
		*eq++ = 0;
	int id = bch_opt_lookup(opt);
	const char *name = id >= 0 ? bch_opt_table[id].name : opt;
	if (!eq || !bch_fs_is_inode_opt(name)) {
		cmd_err("image", "setopt: '%s': %s", argv[1], setopt_usage);
		free(opt);
		return EXIT_USAGE;
	}
	/* targets name labels: they are checked once the filesystem is open */
	if (*eq && bch_opt_table[id].type != BCH_OPT_TARGET &&
	    bch_opt_parse(id, eq, &v, perr, sizeof(perr))) {
		cmd_err("image", "setopt: %s", perr);
		free(opt);
		return EXIT_USAGE;
	}
	for (int i = 2; im->c && i < argc; i++) {
		uint64_t inum;
		int r = bch_fs_lookup_path(im->c, argv[i], true, &inum);
		im->c->err_msg[0] = 0;
		if (!r)
			r = bch_fs_set_inode_opt(im->c, inum, name, *eq ? eq : NULL);
		if (im->check_only && r == -EROFS)
			r = 0;	/* all that can be checked without writing passed */
		if (r == -EINVAL && im->c->err_msg[0]) {
			cmd_err("image", "setopt: %s: %s", argv[i], im->c->err_msg);
			ret = EXIT_FAIL;
		} else if (r) {
			ret = verb_err(im, "setopt", argv[i], r);
		}
	}
	free(opt);
	return ret;	/* dry run (no filesystem): arguments are fine */
}

/* setattr: bcachefs setattr's options and walk (cmd_setattr.c) on the image */
static int verb_setattr(struct img *im, int argc, char **argv)
{
	return cmd_setattr_image(im->c, im->check_only, argc, argv);
}

/* import-tar's options (spec.h): taken out of argv; the spec file read and checked. */
static int import_tar_opts(struct bch_spec *spec, unsigned *flags, int *argc, char ***argv)
{
	struct option lo[SPEC_NR_OPTS + 2] = { { 0 } };
	int o, r = 0;

	for (int i = 0; i < SPEC_NR_OPTS; i++)
		lo[i] = (struct option) { spec_longopts[i].name, spec_longopts[i].has_arg, NULL, 256 + i };
	lo[SPEC_NR_OPTS] = (struct option) { "no-whiteouts", no_argument, NULL, 'W' };
	while (!r && (o = getopt_long(*argc, *argv, "W", lo, NULL)) != -1)
		r = o >= 256 ? spec_opt(spec, o - 256, optarg, "image import-tar")
		  : o == 'W' ? (*flags |= TAR_NO_WHITEOUTS, 0)
			     : cmd_opt_err("image import-tar", *argv, "W");
	if (!r)
		r = spec_load(spec, "image import-tar");
	/* the verb sees its name and the operands (argv is read again on the next pass) */
	char **v = calloc(*argc - optind + 2, sizeof(*v));
	if (!v)
		abort();
	v[0] = (*argv)[0];
	memcpy(v + 1, *argv + optind, (*argc - optind) * sizeof(*v));
	*argc -= optind - 1;
	*argv = v;
	return r;
}

static int __verb_import_tar(struct img *im, struct bch_spec *spec, unsigned flags,
			     int argc, char **argv);

static int verb_import_tar(struct img *im, int argc, char **argv)
{
	struct bch_spec spec = { 0 };
	unsigned flags = 0;
	int ret = import_tar_opts(&spec, &flags, &argc, &argv);

	if (!ret)
		ret = __verb_import_tar(im, &spec, flags, argc, argv);
	free(argv);
	spec_exit(&spec);
	return ret;
}

static int __verb_import_tar(struct img *im, struct bch_spec *spec, unsigned flags,
			     int argc, char **argv)
{
	if (argc < 2 || argc > 3)
		return EXIT_USAGE;
	if (!im->c) {	/* dry run: arguments are fine; is libarchive there? the archive? */
		if (strcmp(argv[1], "-") && access(argv[1], R_OK)) {
			cmd_err("image", "import-tar: %s: %s", argv[1], strerror(errno));
			return EXIT_FAIL;
		}
		if (tar_load("import-tar"))
			return EXIT_FAIL;
		/* a file is read twice: a bad entry refused before anything is written */
		return strcmp(argv[1], "-") && tar_check(argv[1], flags) ? EXIT_FAIL : EXIT_OK;
	}
	uint64_t dir = BCH_ROOT_INO;
	struct stat st;
	int r = argc == 3 ? bch_fs_lookup_path(im->c, argv[2], true, &dir) : 0;
	if (!r && !(r = bch_fs_getattr(im->c, dir, &st)) && !S_ISDIR(st.st_mode))
		r = -ENOTDIR;
	if (r)
		return verb_err(im, "import-tar", argv[2], r);
	if (im->check_only)
		return EXIT_OK;
	if (tar_import_spec(im->c, argv[1], dir, spec, flags) ||
	    spec_apply(spec, im->c, dir, "image import-tar"))
		return EXIT_FAIL;
	if (im->json) {		/* {"version", "tar", "path", "spec"} */
		struct bch_json j;
		json_begin(&j, stdout, false);
		json_string(&j, "tar", argv[1]);
		json_string(&j, "path", argc == 3 ? argv[2] : "/");
		spec_json(spec, &j);
		json_end(&j);
	}
	return EXIT_OK;
}

static int verb_export_tar(struct img *im, int argc, char **argv)
{
	static const struct option lo[] = { { "since", required_argument, NULL, 's' }, { 0 } };
	const char *since = NULL;
	int o;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (o != 's')
			return cmd_opt_err("image export-tar", argv, "");
		since = optarg;
	}
	argc -= optind - 1;
	argv += optind - 1;
	if (argc < 2 || argc > 3)
		return EXIT_USAGE;
	if (!im->c)	/* dry run: arguments are fine; is libarchive there? */
		return tar_load("export-tar") ? EXIT_FAIL : EXIT_OK;
	if (since) {	/* the change from subvolume OLD to NEW (PATH, "/" by default) as a layer */
		uint32_t old, new;
		if (subvol_of_path(im->c, "export-tar --since", since, &old) ||
		    subvol_of_path(im->c, "export-tar --since", argc == 3 ? argv[2] : "/", &new))
			return EXIT_FAIL;
		return tar_export_since(im->c, argv[1], old, new) ? EXIT_FAIL : EXIT_OK;
	}
	uint64_t dir = BCH_ROOT_INO;
	int r = argc == 3 ? bch_fs_lookup_path(im->c, argv[2], true, &dir) : 0;
	if (r)
		return verb_err(im, "export-tar", argv[2], r);
	return tar_export(im->c, argv[1], dir) ? EXIT_FAIL : EXIT_OK;
}

static int verb_update(struct img *im, int argc, char **argv)
{
	return cmd_image_update(im->c, im->check_only, im->json, &im->verb_priv, argc, argv);
}

/* ------------------------------------------------------------ subvolumes */

static int verb_subvol_create(struct img *im, int argc, char **argv)
{
	if (argc != 2)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;
	uint64_t dir, h;
	char buf[4096], *name;
	int r = split_path(im, argv[1], &dir, buf, sizeof(buf), &name);
	if (!r)
		r = bch_fs_subvol_create(im->c, dir, name, 0755, getuid(), getgid(), &h);
	return r ? verb_err(im, "subvolume create", argv[1], r) : EXIT_OK;
}

static int verb_subvol_snapshot(struct img *im, int argc, char **argv)
{
	bool ro = false;
	int o;

	while ((o = getopt(argc, argv, "+r")) != -1) {
		switch (o) {
		case 'r': ro = true; break;
		default: return cmd_opt_err("image subvolume-snapshot", argv, "+r");
		}
	}
	if (argc - optind != 2)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;
	const char *src = argv[optind], *dst = argv[optind + 1];
	uint64_t from, dir, h;
	char buf[4096], *name;
	int r = bch_fs_lookup_path(im->c, src, true, &from);
	if (r)
		return verb_err(im, "subvolume snapshot", src, r);
	if ((r = split_path(im, dst, &dir, buf, sizeof(buf), &name)) ||
	    (r = bch_fs_subvol_snapshot(im->c, from, dir, name, ro, &h))) {
		if (r == -EINVAL) {
			cmd_err("image", "subvolume snapshot: %s: not a subvolume", src);
			return EXIT_FAIL;
		}
		return verb_err(im, "subvolume snapshot", r == -EINVAL ? src : dst, r);
	}
	return EXIT_OK;
}

static void gc_progress(void *priv, uint64_t seen)
{
	cmd_progress_update(priv, seen, 0, false);
}

/* Delete what no subvolume sees any more, to the end (offline: the daemon does it in the background). */
static int subvol_gc(struct img *im)
{
	struct cmd_progress p;
	uint64_t freed;

	cmd_progress_init(&p, stderr, isatty(2), "freeing deleted snapshots' keys");
	int r = bch_snapshot_gc(im->c, gc_progress, &p, &freed);
	cmd_progress_done(&p);
	if (r) {
		cmd_err("image", "subvolume delete: freeing the snapshot's keys: %s (%s); "
			"the next delete or fsck goes on", strerror(-r), im->c->err_msg);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

static int verb_subvol_delete(struct img *im, int argc, char **argv)
{
	if (argc < 2)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;
	for (int i = 1; i < argc; i++) {
		uint64_t dir;
		char buf[4096], *name;
		int r = split_path(im, argv[i], &dir, buf, sizeof(buf), &name);
		if (!r)
			r = bch_fs_subvol_delete(im->c, dir, name);
		if (r) {
			if ((r == -EINVAL || r == -ENOTEMPTY || r == -EIO) && im->c->err_msg[0]) {
				cmd_err("image", "subvolume delete: %s: %s", argv[i], im->c->err_msg);
				return EXIT_FAIL;
			}
			return verb_err(im, "subvolume delete", argv[i], r);
		}
	}
	return im->check_only ? EXIT_OK : subvol_gc(im);
}

static int verb_subvol_list(struct img *im, int argc, char **argv)
{
	bool tree = false;
	int o;

	while ((o = getopt(argc, argv, "+t")) != -1) {
		switch (o) {
		case 't': tree = true; break;
		default: return cmd_opt_err("image subvolume-list", argv, "+t");
		}
	}
	if (argc != optind)
		return EXIT_USAGE;
	if (!im->c)
		return EXIT_OK;
	int r = cmd_subvolume_list_print(stdout, im->c, im->json, tree);
	return r ? verb_err(im, "subvolume list", im->dev, r) : EXIT_OK;
}

/* subvolume diff (cmd/subvolume_diff.c): what changed from OLD to NEW */
static int verb_subvol_diff(struct img *im, int argc, char **argv)
{
	return cmd_subvolume_diff_image(im->c, im->json, argc, argv);
}

static int verb_shell(struct img *im, int argc, char **argv);

static const struct verb {
	const char	*name;
	verb_fn		fn;
	const char	*optstr;	/* the verb's getopt options */
	bool		rw;
	const char	*args;
	const char	*help;
	bool		check;		/* checked on a read-only open before the read-write one */
	bool		longopts;	/* takes --NAME=VALUE options before the device too */
	/*
	 * Its check pass only reads (calls nothing that writes: update records
	 * its changes): that open may become read-write in place.  Other
	 * verbs' check passes run the change until the engine refuses it
	 * (EROFS), which may leave state in memory (inode numbers handed out,
	 * buckets taken for nodes or data) that a read-write session must not
	 * inherit: they close and open again.
	 */
	bool		in_place;
} verbs[] = {
	{ "ls",		verb_ls, "lRa",	false, "[-lRa] [--json] [PATH...]", "list directories" },
	{ "cat",	verb_cat, "",	false, "PATH...",		"print files" },
	{ "stat",	verb_stat, "",	false, "[--json] PATH...",	"show inodes" },
	{ "get",	verb_get, "r",	false, "[-r] PATH HOSTDEST",	"copy out (directories whole)" },
	{ "extract",	verb_extract, "",	false, "HOSTDIR [PATH]",	"copy the whole tree out, preserving everything" },
	{ "getfattr",	verb_getfattr, "n:d",	false, "[-n NAME] PATH...",	"show xattrs" },
	{ "export-tar",	verb_export_tar, "", false, "[--since=OLD] TARFILE|- [PATH]", "write a pax tar archive (--since: the change from subvolume OLD to PATH, an OCI layer)", false, true },
	{ "put",	verb_put, "r",	true,  "[-r] HOSTSRC PATH",	"copy in (directories whole)", true },
	{ "mkdir",	verb_mkdir, "pm:",	true,  "[-p] [-m MODE] PATH...", "make directories", true },
	{ "rm",		verb_rm, "rRf",	true,  "[-rf] PATH...",		"remove files (-r: trees; -f: immutable and append-only ones too)", true },
	{ "mv",		verb_mv, "",	true,  "SRC DST",		"rename or move", true },
	{ "cp",		verb_cp, "",	true,  "[--reflink] SRC DST",	"copy a file (--reflink: share its data, no copy)", true, true },
	{ "ln",		verb_ln, "s",	true,  "[-s] TARGET LINK",	"hard or symbolic link", true },
	{ "chmod",	verb_chmod, "",	true,  "MODE PATH...",		"change mode (octal)", true },
	{ "chown",	verb_chown, "",	true,  "USER[:GROUP] PATH...",	"change owner", true },
	{ "touch",	verb_touch, "d:",	true,  "[-d @SECONDS] PATH...",	"create or set times", true },
	{ "setfattr",	verb_setfattr, "n:v:x:",	true,  "-n NAME -v VALUE | -x NAME PATH...", "set or remove xattrs", true },
	{ "setopt",	verb_setopt, "",	true,  "OPT=VALUE PATH...",	"per-file options (compression, targets, ...)", true },
	{ "setattr",	verb_setattr, "",	true,  "[--OPT=VALUE]... PATH...", "per-file options as bcachefs setattr", true, true },
	{ "import-tar",	verb_import_tar, "W", true, "[--spec=FILE...] [--no-whiteouts] [--json] TARFILE|- [PATH]", "unpack a tar (an OCI layer: whiteouts applied)", true, true },
	{ "update",	verb_update, "cn",	true,  "[--checksum] [--dry-run] [--json] [--subvolume=NAME] HOSTDIR [PATH]", "make the tree (of subvolume NAME) equal to HOSTDIR, writing only what differs", true, true, true },
	{ "sync",	verb_update, "cn",	true,  "...",			"the same as update", true, true, true },
	{ "subvolume-create", verb_subvol_create, "", true, "PATH",	"make an empty subvolume", true },
	{ "subvolume-snapshot", verb_subvol_snapshot, "r", true, "[-r] SOURCE DEST", "snapshot subvolume SOURCE (-r: read-only)", true },
	{ "subvolume-delete", verb_subvol_delete, "", true, "PATH...",	"delete subvolumes, free their space", true },
	{ "subvolume-list", verb_subvol_list, "t", false, "[--json] [-t]",	"list subvolumes and snapshots (-t: as a tree)" },
	{ "subvolume-diff", verb_subvol_diff, "", false, "[--json] OLD NEW", "what changed from subvolume OLD to NEW" },
	{ "shell",	verb_shell, "",	true,  "",			"run verbs read from stdin, one per line" },
};

static const struct verb *find_verb(const char *name)
{
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(verbs[i].name, name))
			return &verbs[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: bcachefs image VERB [-o OPTS] DEVICE[:DEVICE...] ARGS\n"
		   "Read and change files inside an unmounted filesystem (no root needed).\n\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-10s %-36s %s\n", verbs[i].name, verbs[i].args, verbs[i].help);
	fprintf(f, "  %-10s %-36s %s\n", "shrink", "[--headroom=PCT%|SIZE] [-n] IMAGE", "cut the image file to what it holds");
	fprintf(f, "\nPaths in the image start at its root; symlinks are followed only inside it.\n"
		   "-o takes open options (read_only, degraded, very_degraded,\n"
		   "btree_cache_size=SIZE).  degraded: open with member devices missing when\n"
		   "the others hold a copy of everything (says which is missing on stderr);\n"
		   "very_degraded: even if some data has no copy left (its reads fail).\n"
		   "shell reads lines \"VERB ARGS\" (words split on blanks, \"quotes\" group) and\n"
		   "stops at the first failing line.\n"
		   "import-tar applies OCI layer whiteouts (.wh.NAME, .wh..wh..opq) unless\n"
		   "told not to, and refuses absolute names, \"..\" and hard links out.\n"
		   "update prints a line per change (+ created, - removed, R replaced,\n"
		   "W data written, M metadata); equal files are not read or written;\n"
		   "update of subvolume NAME (or of a PATH through a subvolume) changes that\n"
		   "subvolume's tree only (a read-only snapshot refuses: exit 1, nothing written).\n"
		   "extract goes on past files it cannot read: it names each on stderr, removes\n"
		   "any it could read only in part, extracts the rest and then exits 1.\n\n"
		   "Exit: 0 done, 1 failure (message on stderr; extract: some files were not\n"
		   "extracted), 16 usage error.\n");
}

static void verb_usage(const struct verb *v)
{
	fprintf(stderr, "Usage: bcachefs image %s DEVICE[:DEVICE...] %s\n", v->name, v->args);
	if (v->fn == verb_import_tar)	/* owners, times and the spec file (spec.h) */
		fputs(spec_help, stderr);
}

static int run_verb(struct img *im, const struct verb *v, int argc, char **argv)
{
	optind = 0;	/* getopt from scratch for every verb (shell runs many) */
	opterr = 0;	/* cmd_opt_err reports: bcachefs image VERB: ... */
	int r = v->fn(im, argc, argv);
	if (r == EXIT_USAGE)
		verb_usage(v);
	return r;
}

/* Split a line into words: blanks separate, "double quotes" group, \ escapes. */
static int split_line(char *line, char **argv, int max)
{
	int argc = 0;
	char *in = line, *out = line;

	while (*in) {
		while (*in == ' ' || *in == '\t' || *in == '\n')
			in++;
		if (!*in || *in == '#')
			break;
		if (argc == max)
			return -1;
		argv[argc++] = out;
		bool quoted = false;
		while (*in && (quoted || (*in != ' ' && *in != '\t' && *in != '\n'))) {
			if (*in == '"') {
				quoted = !quoted;
				in++;
			} else if (*in == '\\' && in[1]) {
				*out++ = in[1];
				in += 2;
			} else {
				*out++ = *in++;
			}
		}
		if (*in)
			in++;
		*out++ = 0;
		if (quoted)
			return -1;
	}
	return argc;
}

/*
 * Dry run of shell (no filesystem yet): read stdin whole, and check every
 * line's words, verb and arguments as that verb's dry run does, so that a
 * script with a bad line is refused before the open writes anything.  What
 * a line finds in the image (a path missing) is known only when it runs.
 */
static int shell_check(struct img *im)
{
	size_t cap = 0, len = 0;
	char buf[65536];
	size_t n;

	while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0) {
		if (len + n + 1 > cap) {
			cap = 2 * (len + n + 1);
			if (!(im->script = realloc(im->script, cap)))
				abort();
		}
		memcpy(im->script + len, buf, n);
		len += n;
	}
	if (!im->script && !(im->script = calloc(1, 1)))
		abort();
	im->script[len] = 0;

	char *copy = strdup(im->script), *next = copy;
	unsigned lineno = 0;
	int r = EXIT_OK;
	while (!r && next && *next) {
		char *words[256], *line = next, *nl = strchr(next, '\n');
		if (nl)
			*nl = 0;
		next = nl ? nl + 1 : NULL;
		lineno++;
		int nw = split_line(line, words, 255);
		const struct verb *v = nw > 0 ? find_verb(words[0]) : NULL;
		if (nw < 0) {
			cmd_err("image", "shell: line %u: unbalanced quotes or too many words (nothing done)", lineno);
			r = EXIT_USAGE;
		} else if (nw && (!v || v->fn == verb_shell)) {
			cmd_err("image", "shell: line %u: unknown verb '%s' (nothing done)", lineno, words[0]);
			r = EXIT_USAGE;
		} else if (nw) {
			words[nw] = NULL;
			if ((r = run_verb(im, v, nw, words)))
				cmd_err("image", "shell: line %u (%s): nothing done", lineno, v->name);
		}
	}
	free(copy);
	return r;
}

static int verb_shell(struct img *im, int argc, char **argv)
{
	char *line, *next;
	unsigned lineno = 0;
	(void)argc; (void)argv;

	if (!im->c)
		return shell_check(im);

	for (next = im->script; next && *next; ) {
		char *words[256];
		char *nl = strchr(next, '\n');
		line = next;
		if (nl)
			*nl = 0;
		next = nl ? nl + 1 : NULL;
		lineno++;
		int n = split_line(line, words, 255);
		if (n < 0) {
			cmd_err("image", "shell: line %u: unbalanced quotes or too many words", lineno);
			return EXIT_USAGE;
		}
		if (!n)
			continue;
		words[n] = NULL;
		const struct verb *v = find_verb(words[0]);
		if (!v || v->fn == verb_shell) {
			cmd_err("image", "shell: line %u: unknown verb '%s'", lineno, words[0]);
			return EXIT_USAGE;
		}
		if (v->rw && im->c->read_only) {
			cmd_err("image", "shell: line %u: %s needs a writable filesystem", lineno, v->name);
			return EXIT_FAIL;
		}
		int r = run_verb(im, v, n, words);
		if (r) {
			cmd_err("image", "shell: line %u (%s) failed", lineno, v->name);
			return r;
		}
		fflush(stdout);
	}
	return EXIT_OK;
}

int cmd_image(int argc, char *argv[])
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	if (!strcmp(argv[1], "shrink"))	return cmd_image_shrink(argc - 1, argv + 1);
	const struct verb *v = find_verb(argv[1]);
	if (!v) {
		cmd_err("image", "unknown verb '%s' (see bcachefs image --help)", argv[1]);
		return EXIT_USAGE;
	}
	struct bch_opts opts;
	struct img im = { 0 };
	char err[256];
	int i = 2;

	bch_opts_default(&opts);
	/*
	 * Options may come before or after the device: ours (-o, --json)
	 * are taken out; the verb's own stay, in order, for its getopt.
	 */
	char **vargv = calloc(argc + 1, sizeof(*vargv));
	int vargc = 0, dev_idx = -1;
	vargv[vargc++] = argv[1];
	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			verb_usage(v);
			free(vargv);
			return EXIT_OK;
		} else if (!strcmp(a, "--json")) {
			im.json = true;
		} else if (!strcmp(a, "-o") && i + 1 < argc) {
			if (bch_opts_parse_list(&opts, argv[++i], OPT_MOUNT | OPT_RUNTIME, err, sizeof(err))) {
				cmd_err("image", "%s", err);
				free(vargv);
				return EXIT_USAGE;
			}
		} else if (dev_idx < 0 && v->longopts && a[0] == '-' && a[1] == '-' && a[2]) {
			vargv[vargc++] = argv[i];	/* the verb parses them */
			if (!strcmp(a, "--subvolume") && i + 1 < argc)	/* its value apart */
				vargv[vargc++] = argv[++i];
		} else if (dev_idx < 0 && a[0] == '-' && a[1] && a[1] != '-') {
			/* a verb option before the device (with its argument, if it takes one) */
			const char *o = strchr(v->optstr, a[1]);
			if (!o) {
				char vc[64];
				snprintf(vc, sizeof(vc), "image %s", v->name);
				cmd_err(vc, "unknown option '%s' (see bcachefs %s --help)", a, vc);
				verb_usage(v);
				free(vargv);
				return EXIT_USAGE;
			}
			vargv[vargc++] = argv[i];
			if (o[1] == ':' && !a[2] && i + 1 < argc)
				vargv[vargc++] = argv[++i];
		} else if (dev_idx < 0) {
			dev_idx = i;
		} else {
			vargv[vargc++] = argv[i];
		}
	}
	if (dev_idx < 0) {
		verb_usage(v);
		free(vargv);
		return EXIT_USAGE;
	}
	i = dev_idx;
	im.dev = argv[i];
	/* DEV1:DEV2 or UUID=; a mounted filesystem's files are reached through its mount */
	struct cmd_fs fsn;
	char cmdname[64];
	snprintf(cmdname, sizeof(cmdname), "image %s", v->name);
	int rr = cmd_fs_resolve(cmdname, &argv[i], 1, &fsn);
	if (rr) {
		free(vargv);
		return rr;
	}
	if (fsn.mounted) {
		cmd_err(cmdname, "%s: mounted (fusemount) at %s: use the files there, or unmount first",
			argv[i], fsn.mnt);
		cmd_fs_free(&fsn);
		free(vargv);
		return EXIT_FAIL;
	}
	unsigned nr = fsn.nr;
	char **devs = fsn.devs;
	/* check the verb's arguments before opening: a usage error writes nothing */
	int dry = run_verb(&im, v, vargc, vargv);
	if (dry) {
		free_devs(devs);
		free(vargv);
		free(im.script);	/* shell's dry run read the script */
		return dry;
	}
	/*
	 * A verb that can fail on what the image holds (put: the destination;
	 * setfattr, setopt: the paths, a label the filesystem does not have)
	 * is first checked on a read-only open, so that failing writes nothing:
	 * a read-write open and close write journal entries and superblocks.
	 */
	if (v->rw && v->check && !opts.v[Opt_read_only]) {
		struct bch_opts ro = opts;
		bch_opt_set(&ro, Opt_read_only, 1);
		int r = bch_fs_open(devs, nr, &ro, &im.c, err, sizeof(err));
		if (r) {
			cmd_err("image", "%s", err);
			free_devs(devs);
			free(vargv);
			free(im.script);
			return EXIT_FAIL;
		}
		im.check_only = true;
		int ret = run_verb(&im, v, vargc, vargv);
		im.check_only = false;
		/*
		 * Something to write: the read-only open becomes read-write in
		 * place (bch_fs_read_write(): what it read stays, the node cache
		 * too), unless it cannot (fs.h), when it is closed and the
		 * filesystem opened again read-write below.
		 */
		int up = ret || !v->in_place ? 1 : bch_fs_read_write(im.c);
		if (up < 0) {
			cmd_err("image", "%s: opening read-write: %s", im.dev,
				im.c->err_msg[0] ? im.c->err_msg : bch_err_str(up));
			bch_fs_close(im.c);
			free_devs(devs);
			free(vargv);
			free(im.script);
			cmd_image_update_priv_free(im.verb_priv);
			return EXIT_FAIL;
		}
		if (up) {
			bch_fs_close(im.c);
			im.c = NULL;
		}
		if (ret) {
			free_devs(devs);
			free(vargv);
			free(im.script);
			return ret == EXIT_IMAGE_DONE ? EXIT_OK : ret;
		}
	}
	if (!v->rw)
		bch_opt_set(&opts, Opt_read_only, 1);
	int r = im.c ? 0 : bch_fs_open(devs, nr, &opts, &im.c, err, sizeof(err));
	if (r) {
		cmd_err("image", "%s", err);
		free_devs(devs);
		free(vargv);
		free(im.script);
		cmd_image_update_priv_free(im.verb_priv);	/* the check pass's, unused */
		return EXIT_FAIL;
	}
	char what[32];
	snprintf(what, sizeof(what), "image %s", v->name);
	cmd_note_degraded(what, im.c, devs, nr);
	free_devs(devs);
	int ret = run_verb(&im, v, vargc, vargv);
	free(vargv);
	free(im.script);
	if (im.c->data_bad_copies)
		fprintf(stderr, "bcachefs image: warning: %" PRIu64 " damaged copies of file data "
			"found (read from another copy where there was one; run bcachefs fsck)\n",
			im.c->data_bad_copies);
	r = bch_fs_close(im.c);
	if (r) {
		cmd_err("image", "closing: %s", bch_err_str(r));
		return EXIT_FAIL;
	}
	return ret;
}
