// SPDX-License-Identifier: GPL-2.0
/*
 * copy.c - copying trees between the host and a filesystem (see copy.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "cmds.h"
#include "copy.h"
#include "fs_ops.h"
#include "inode.h"
#include "spec.h"
#include "xattr_effective.h"

#define BUF_SIZE	(1U << 20)

/* ------------------------------------------------------ hard-link map */

struct link_ent {
	uint64_t	a, b;		/* in: host dev, ino; out: inum, 0 */
	uint64_t	inum;		/* in: our inode */
	char		*path;		/* out: first copy, relative to the root fd */
};

struct copy_links {
	struct link_ent	*t;
	size_t		nr, cap;	/* cap: power of two */
	int		root_fd;	/* copy out: the destination root */
	char		path[8192];	/* copy out: current path relative to root_fd */
	size_t		path_len;
	char		ipath[8192];	/* copy out: current path in the image ("" = root) */
	size_t		ipath_len;
};

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);
	return h ^ (h >> 31);
}

static struct link_ent *links_find(struct copy_links *l, uint64_t a, uint64_t b, bool add)
{
	if (add && (l->nr + 1) * 2 > l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 1024;
		struct link_ent *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			abort();
		for (size_t i = 0; i < l->cap; i++)
			if (l->t[i].a || l->t[i].b) {
				size_t j = mix(l->t[i].a, l->t[i].b) & (ncap - 1);
				while (nt[j].a || nt[j].b)
					j = (j + 1) & (ncap - 1);
				nt[j] = l->t[i];
			}
		free(l->t);
		l->t = nt;
		l->cap = ncap;
	}
	if (!l->cap)
		return NULL;
	size_t j = mix(a, b) & (l->cap - 1);
	while (l->t[j].a || l->t[j].b) {
		if (l->t[j].a == a && l->t[j].b == b)
			return &l->t[j];
		j = (j + 1) & (l->cap - 1);
	}
	if (!add)
		return NULL;
	l->t[j].a = a;
	l->t[j].b = b;
	l->nr++;
	return &l->t[j];
}

void copy_link_note(struct copy_ctx *x, uint64_t dev, uint64_t ino, uint64_t inum)
{
	links_find(x->links, dev, ino, true)->inum = inum;
}

/* ------------------------------------------------------------ context */

int copy_ctx_init(struct copy_ctx *x, struct bch_fs *c, const char *cmd)
{
	memset(x, 0, sizeof(*x));
	x->c = c;
	x->cmd = cmd;
	x->progress = isatty(STDERR_FILENO);
	x->owners = geteuid() == 0;
	x->links = calloc(1, sizeof(*x->links));
	x->buf = malloc(BUF_SIZE);
	if (!x->links || !x->buf)
		return -ENOMEM;
	x->links->root_fd = -1;
	return 0;
}

void copy_ctx_exit(struct copy_ctx *x)
{
	if (x->links) {
		for (size_t i = 0; i < x->links->cap; i++)
			free(x->links->t[i].path);
		free(x->links->t);
		free(x->links);
	}
	free(x->buf);
	memset(x, 0, sizeof(*x));
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void progress(struct copy_ctx *x)
{
	if (!x->progress)
		return;
	double t = now_s();
	if (t - x->last_progress < 0.2)
		return;
	x->last_progress = t;
	fprintf(stderr, "\r%" PRIu64 " files, %.1f MiB", x->files, x->bytes / 1048576.0);
	fflush(stderr);
}

void copy_progress_done(struct copy_ctx *x)
{
	if (x->progress && x->last_progress)
		fprintf(stderr, "\r%" PRIu64 " files, %.1f MiB\n", x->files, x->bytes / 1048576.0);
}

static int fail(struct copy_ctx *x, int r, const char *what, const char *path)
{
	if (r < 0 && x->c->err_msg[0] &&
	    (r == -EIO || r == -ENOSPC || r == -EROFS || r == -ELIBACC))
		cmd_err(x->cmd, "%s %s: %s (%s)", what, path, strerror(-r), x->c->err_msg);
	else
		cmd_err(x->cmd, "%s %s: %s", what, path, strerror(-r));
	return r;
}

static void warn(struct copy_ctx *x, const char *fmt, const char *path, int e)
{
	x->warnings++;
	fprintf(stderr, "bcachefs %s: warning: ", x->cmd);
	fprintf(stderr, fmt, path);
	fprintf(stderr, ": %s\n", strerror(e));
}

/*
 * Copy out: name what could not be copied, by its path in the image.
 * Returns what the caller returns: r when the copy stops, 0 when it goes
 * on (keep_going and an error that need not repeat for every file).
 */
static int out_fail(struct copy_ctx *x, int r, const char *what, const char *fate)
{
	const char *ipath = x->links->ipath[0] ? x->links->ipath : "/";
	bool detail = x->c->err_msg[0] && (r == -EIO || r == -ELIBACC);
	bool stop = !x->keep_going || r == -ENOSPC || r == -EDQUOT || r == -EROFS ||
		    r == -ENOMEM || r == -EMFILE || r == -ENFILE || r == -ELIBACC;

	if (x->progress && x->last_progress)
		fputc('\n', stderr);	/* not onto the progress line */
	cmd_err(x->cmd, "%s: %s: %s: %s%s%s%s%s", x->dev ? x->dev : "image", ipath, what,
		strerror(-r), detail ? " (" : "", detail ? x->c->err_msg : "", detail ? ")" : "",
		fate ? fate : "");
	x->failed++;
	return stop ? r : 0;
}

/* -------------------------------------------------------------- copy in */

static int64_t ts_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * A source's atime changes as it is read (readlink, readdir, read), so
 * for reproducible images (SOURCE_DATE_EPOCH set) atime is taken from mtime.
 */
int64_t copy_host_atime(const struct stat *st)
{
	return bch_time_fixed() ? ts_ns(st->st_mtim) : ts_ns(st->st_atim);
}

int copy_in_data(struct copy_ctx *x, const char *src, uint64_t inum, const struct stat *st)
{
	/* O_NOATIME: reading the source must not change it (reproducible images) */
	int fd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME), r = 0;
	off_t pos = 0;

	if (fd < 0 && errno == EPERM)
		fd = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return fail(x, -errno, "opening", src);
	while (pos < st->st_size && !r) {
		/* skip holes: the image keeps the file sparse */
		off_t data = lseek(fd, pos, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO)
				break;		/* only a hole is left */
			data = pos;		/* no SEEK_DATA here: copy everything */
		}
		off_t hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || hole > st->st_size)
			hole = st->st_size;
		for (pos = data; pos < hole && !r;) {
			size_t want = hole - pos < BUF_SIZE ? hole - pos : BUF_SIZE;
			ssize_t n = pread(fd, x->buf, want, pos);
			if (n < 0) {
				r = fail(x, -errno, "reading", src);
				break;
			}
			if (!n)
				break;	/* the file shrank while we copied it */
			ssize_t w = bch_fs_write(x->c, inum, pos, x->buf, n);
			if (w < 0) {
				r = fail(x, (int)w, "writing", src);
				break;
			}
			pos += n;
			x->bytes += n;
			progress(x);
		}
		if (hole >= st->st_size)
			break;
		pos = hole;
	}
	close(fd);
	if (r)
		return r;
	/* a trailing hole: the size says where the file ends */
	struct bch_setattr sa = { .valid = BCH_SETATTR_SIZE, .size = st->st_size };
	struct stat cur;
	if (!(r = bch_fs_getattr(x->c, inum, &cur)) && (uint64_t)cur.st_size != (uint64_t)st->st_size)
		r = bch_fs_setattr(x->c, inum, &sa);
	return r ? fail(x, r, "setting the size of", src) : 0;
}

static int copy_in_xattrs(struct copy_ctx *x, const char *src, uint64_t inum)
{
	ssize_t len = llistxattr(src, NULL, 0);
	char *names, *val = x->buf;

	if (len <= 0)
		return 0;
	if (!(names = malloc(len)))
		return -ENOMEM;
	len = llistxattr(src, names, len);
	for (ssize_t off = 0; len > 0 && off < len; off += strlen(names + off) + 1) {
		const char *n = names + off;
		if (bch_xattr_is_effective(n))
			continue;	/* a view of the options, not kept: nothing to copy */
		ssize_t vl = lgetxattr(src, n, val, BUF_SIZE);
		if (vl < 0) {
			warn(x, "reading xattrs of %s", src, errno);
			continue;
		}
		x->c->err_msg[0] = 0;
		int r = bch_fs_setxattr(x->c, inum, n, val, vl, 0);
		if (r == -EOPNOTSUPP) {
			warn(x, "xattr namespace not supported, skipped on %s", src, EOPNOTSUPP);
			continue;
		}
		/* a per-file option this filesystem cannot take (a label it lacks) */
		if (r == -EINVAL && !strncmp(n, "bcachefs.", strlen("bcachefs."))) {
			x->warnings++;
			fprintf(stderr, "bcachefs %s: warning: %s: %s; not set\n", x->cmd, src,
				x->c->err_msg[0] ? x->c->err_msg : n);
			continue;
		}
		if (r) {
			free(names);
			return fail(x, r, "setting xattr on", src);
		}
	}
	free(names);
	return 0;
}

/*
 * The host file's ctime, into sa (set it last: any later change of the
 * inode makes its ctime now again).  Not with SOURCE_DATE_EPOCH: then the
 * image's ctimes are that time, for reproducible images.  What it is for:
 * image update takes a ctime equal to the nanosecond on both sides to say
 * that neither the host file nor the image inode changed since (so their
 * xattrs need not be read); mke2fs -d copies the ctime too.
 */
void copy_host_ctime(struct bch_setattr *sa, const struct stat *st)
{
	if (bch_time_fixed())
		return;
	sa->valid |= BCH_SETATTR_CTIME;
	sa->ctime = ts_ns(st->st_ctim);
}

static int copy_in_attrs(struct copy_ctx *x, const char *src, uint64_t inum, const struct stat *st)
{
	struct bch_setattr sa = {
		.valid	= BCH_SETATTR_MODE | BCH_SETATTR_UID | BCH_SETATTR_GID |
			  BCH_SETATTR_ATIME | BCH_SETATTR_MTIME,
		.mode	= st->st_mode,
		.uid	= st->st_uid,
		.gid	= st->st_gid,
		.atime	= copy_host_atime(st),
		.mtime	= ts_ns(st->st_mtim),
	};
	copy_host_ctime(&sa, st);
	int r = bch_fs_setattr(x->c, inum, &sa);

	return r ? fail(x, r, "setting attributes of", src) : 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

static int copy_in_dir_contents(struct copy_ctx *x, const char *src, uint64_t dir)
{
	/* O_NOATIME: listing must not change the source directory's atime either */
	int dfd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (dfd < 0 && errno == EPERM)
		dfd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	char **names = NULL;
	size_t nr = 0, cap = 0;
	int r = 0;

	if (!d) {
		int e = errno;
		if (dfd >= 0)
			close(dfd);
		return fail(x, -e, "opening directory", src);
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (nr == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				abort();
		}
		names[nr++] = strdup(de->d_name);
	}
	closedir(d);
	if (nr)		/* an empty directory: names is NULL, which qsort may not take */
		qsort(names, nr, sizeof(*names), name_cmp);	/* reproducible order */
	for (size_t i = 0; i < nr; i++) {
		if (!r) {
			size_t len = strlen(src) + 1 + strlen(names[i]) + 1;
			char *child = malloc(len);
			if (!child)
				abort();
			snprintf(child, len, "%s/%s", src, names[i]);
			r = copy_in(x, child, dir, names[i]);
			free(child);
		}
		free(names[i]);
	}
	free(names);
	return r;
}

int copy_in(struct copy_ctx *x, const char *src, uint64_t dir, const char *name)
{
	struct stat st;
	uint64_t inum;
	int r;

	if (lstat(src, &st))
		return fail(x, -errno, "reading", src);
	if ((r = spec_map_stat(x->spec, &st)))
		return fail(x, r, "mapping the owner of", src);
	if (!name) {
		if (!S_ISDIR(st.st_mode)) {
			cmd_err(x->cmd, "%s: not a directory", src);
			return -ENOTDIR;
		}
		if ((r = copy_in_dir_contents(x, src, dir)) || (r = copy_in_xattrs(x, src, dir)))
			return r;
		return copy_in_attrs(x, src, dir, &st);
	}

	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		struct link_ent *e = links_find(x->links, st.st_dev, st.st_ino, false);
		if (e) {
			r = bch_fs_link(x->c, e->inum, dir, name);
			x->files++;
			return r ? fail(x, r, "linking", src) : 0;
		}
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFLNK: {
		char target[4096];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return fail(x, -errno, "reading link", src);
		target[n] = 0;
		r = bch_fs_symlink(x->c, dir, name, target, st.st_uid, st.st_gid, &inum);
		break;
	}
	case S_IFREG: case S_IFDIR: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		r = bch_fs_create(x->c, dir, name, st.st_mode & (S_IFMT | 07777), st.st_rdev,
				  st.st_uid, st.st_gid, &inum);
		break;
	default:
		warn(x, "unknown file type, skipped: %s", src, EINVAL);
		return 0;
	}
	if (r)
		return fail(x, r, "creating", src);
	x->files++;
	progress(x);
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1)
		links_find(x->links, st.st_dev, st.st_ino, true)->inum = inum;

	if (S_ISREG(st.st_mode) && (r = copy_in_data(x, src, inum, &st)))
		return r;
	if (S_ISDIR(st.st_mode) && (r = copy_in_dir_contents(x, src, inum)))
		return r;
	if ((r = copy_in_xattrs(x, src, inum)))
		return r;
	if (S_ISLNK(st.st_mode)) {
		/* a symlink's mode is fixed; owner and times still count */
		struct bch_setattr sa = {
			.valid = BCH_SETATTR_ATIME | BCH_SETATTR_MTIME,
			.atime = copy_host_atime(&st), .mtime = ts_ns(st.st_mtim),
		};
		copy_host_ctime(&sa, &st);
		r = bch_fs_setattr(x->c, inum, &sa);
		return r ? fail(x, r, "setting times of", src) : 0;
	}
	return copy_in_attrs(x, src, inum, &st);
}

/* ------------------------------------------------------------- copy out */

/* Negative errno with *what set (the message is the caller's). */
static int copy_out_data(struct copy_ctx *x, uint64_t inum, int fd, const struct stat *st,
			 const char **what)
{
	uint64_t pos = 0, size = st->st_size;

	*what = "reading";
	while (pos < size) {
		int64_t data = bch_fs_seek(x->c, inum, pos, SEEK_DATA);
		if (data == -ENXIO)
			break;
		if (data < 0)
			return (int)data;
		int64_t hole = bch_fs_seek(x->c, inum, data, SEEK_HOLE);
		if (hole < 0)
			return (int)hole;
		for (pos = data; pos < (uint64_t)hole;) {
			size_t want = (uint64_t)hole - pos < BUF_SIZE ? (uint64_t)hole - pos : BUF_SIZE;
			ssize_t n = bch_fs_read(x->c, inum, pos, x->buf, want);
			if (n < 0)
				return (int)n;
			if (!n)
				break;
			if (pwrite(fd, x->buf, n, pos) != n) {
				*what = "writing";
				return errno ? -errno : -EIO;
			}
			pos += n;
			x->bytes += n;
			progress(x);
		}
		pos = hole;
	}
	if (ftruncate(fd, size)) {
		*what = "setting the size";
		return -errno;
	}
	return 0;
}

static void copy_out_xattrs(struct copy_ctx *x, uint64_t inum, int fd, const char *path_for_l,
			    int dirfd, const char *name)
{
	ssize_t len = bch_fs_listxattr(x->c, inum, NULL, 0);
	char *names;

	if (len <= 0 || !(names = malloc(len)))
		return;
	len = bch_fs_listxattr(x->c, inum, names, len);
	for (ssize_t off = 0; len > 0 && off < len; off += strlen(names + off) + 1) {
		const char *n = names + off;
		ssize_t vl = bch_xattr_is_effective(n) ? -1 : bch_fs_getxattr(x->c, inum, n, x->buf, BUF_SIZE);
		if (vl < 0)
			continue;
		int r;
		if (fd >= 0) {
			r = fsetxattr(fd, n, x->buf, vl, 0);
		} else {
			/* symlinks and special files: through /proc/self/fd of an O_PATH fd */
			int pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			char p[64];
			r = -1;
			if (pfd >= 0) {
				snprintf(p, sizeof(p), "/proc/self/fd/%d", pfd);
				r = lsetxattr(p, n, x->buf, vl, 0);
				close(pfd);
			}
		}
		if (r && errno != EPERM && errno != ENOTSUP)
			warn(x, "setting xattrs on %s", path_for_l, errno);
	}
	free(names);
}

static void path_push(struct copy_links *l, const char *name, size_t *saved)
{
	*saved = l->path_len;
	size_t n = strlen(name);
	if (l->path_len + n + 2 < sizeof(l->path)) {
		if (l->path_len)
			l->path[l->path_len++] = '/';
		memcpy(l->path + l->path_len, name, n + 1);
		l->path_len += n;
	}
}

static void path_pop(struct copy_links *l, size_t saved)
{
	l->path_len = saved;
	l->path[saved] = 0;
}

struct out_dir_priv {
	struct copy_ctx	*x;
	int		dirfd;
	int		r;
	char		**names;
	uint64_t	*inums;
	size_t		nr, cap;
};

static int collect_entry(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type,
			 uint64_t next)
{
	struct out_dir_priv *p = priv;
	(void)d_type; (void)next;

	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (p->nr == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 64;
		p->names = realloc(p->names, p->cap * sizeof(*p->names));
		p->inums = realloc(p->inums, p->cap * sizeof(*p->inums));
		if (!p->names || !p->inums)
			abort();
	}
	p->names[p->nr] = strndup(name, len);
	p->inums[p->nr++] = inum;
	return 0;
}

static void ipath_push(struct copy_links *l, const char *name, size_t *saved)
{
	*saved = l->ipath_len;
	size_t n = strlen(name);
	if (l->ipath_len + n + 2 < sizeof(l->ipath)) {
		l->ipath[l->ipath_len++] = '/';
		memcpy(l->ipath + l->ipath_len, name, n + 1);
		l->ipath_len += n;
	}
}

void copy_out_set_root(struct copy_ctx *x, const char *image_path)
{
	struct copy_links *l = x->links;
	size_t n = strlen(image_path);

	while (n && image_path[n - 1] == '/')
		n--;
	if (n && image_path[0] != '/')
		l->ipath[l->ipath_len++] = '/';		/* relative to the root */
	if (n >= sizeof(l->ipath) - 2)
		n = sizeof(l->ipath) - 2;
	memcpy(l->ipath + l->ipath_len, image_path, n);
	l->ipath_len += n;
	l->ipath[l->ipath_len] = 0;
}

int copy_out_contents(struct copy_ctx *x, uint64_t inum, int dirfd)
{
	struct out_dir_priv p = { .x = x, .dirfd = dirfd };
	int r = bch_fs_readdir(x->c, inum, 0, collect_entry, &p);

	if (x->links->root_fd < 0)
		x->links->root_fd = dirfd;
	/* with keep_going, what was listed before the error is still copied */
	if (r)
		r = out_fail(x, r, "listing directory", x->keep_going && p.nr ? "; copying the entries read before it" : NULL);
	for (size_t i = 0; i < p.nr; i++) {
		if (!r) {
			size_t saved;
			ipath_push(x->links, p.names[i], &saved);
			r = copy_out(x, p.inums[i], dirfd, p.names[i]);
			x->links->ipath_len = saved;
			x->links->ipath[saved] = 0;
		}
		free(p.names[i]);
	}
	free(p.names);
	free(p.inums);
	return r;
}

static void set_times(int dirfd, const char *name, const struct stat *st)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW);
}

int copy_out(struct copy_ctx *x, uint64_t inum, int dirfd, const char *name)
{
	struct copy_links *l = x->links;
	struct stat st;
	size_t saved;
	const char *what = "reading the inode";
	bool created = false;		/* a regular file of ours, to remove if it fails */
	int r, fd = -1;

	x->c->err_msg[0] = 0;	/* the detail of an error is this file's, not an earlier one's */
	r = bch_fs_getattr(x->c, inum, &st);
	if (l->root_fd < 0)
		l->root_fd = dirfd;
	path_push(l, name, &saved);
	const char *path = l->path;
	if (r)
		goto err;
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		struct link_ent *e = links_find(l, inum, 0, false);
		if (e && e->path) {
			if (linkat(l->root_fd, e->path, dirfd, name, 0)) {
				r = -errno;
				what = "linking";
				goto err;
			}
			x->files++;
			goto out;
		}
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			r = -errno;
			what = "creating";
			goto err;
		}
		created = true;
		if ((r = copy_out_data(x, inum, fd, &st, &what)))
			goto err;
		break;
	case S_IFDIR:
		if (mkdirat(dirfd, name, 0700)) {
			r = -errno;
			what = "creating directory";
			goto err;
		}
		fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			what = "opening directory";
			goto err;
		}
		/* its own failures are named and counted inside; its attributes still follow */
		if ((r = copy_out_contents(x, inum, fd)))
			goto out;
		break;
	case S_IFLNK: {
		char target[4096];
		ssize_t n = bch_fs_readlink(x->c, inum, target, sizeof(target));
		if (n < 0) {
			r = (int)n;
			what = "reading link";
			goto err;
		}
		if (symlinkat(target, dirfd, name)) {
			r = -errno;
			what = "creating symlink";
			goto err;
		}
		break;
	}
	default:
		if (mknodat(dirfd, name, st.st_mode & (S_IFMT | 07777), st.st_rdev)) {
			if (errno == EPERM) {
				warn(x, "cannot create device node %s (not root)", path, errno);
				goto out;
			}
			r = -errno;
			what = "creating";
			goto err;
		}
		break;
	}
	x->files++;
	progress(x);
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		struct link_ent *e = links_find(l, inum, 0, true);
		e->path = strdup(l->path);
	}
	copy_out_xattrs(x, inum, fd, path, dirfd, name);
	if (x->owners && fchownat(dirfd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW))
		warn(x, "setting the owner of %s", path, errno);
	if (!S_ISLNK(st.st_mode)) {
		/* after chown, which clears set-id bits */
		if (fd >= 0 ? fchmod(fd, st.st_mode & 07777) : fchmodat(dirfd, name, st.st_mode & 07777, 0))
			warn(x, "setting the mode of %s", path, errno);
	}
	set_times(dirfd, name, &st);
	goto out;
err:
	/* never leave a file that looks complete but is not */
	if (created && !unlinkat(dirfd, name, 0))
		r = out_fail(x, r, what, "; removed");
	else
		r = out_fail(x, r, what, created ? "; left incomplete (could not remove it)" : NULL);
out:
	if (fd >= 0)
		close(fd);
	path_pop(l, saved);
	return r;
}

/* ------------------------------------------------------------ removing */

static int names_collect(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type,
			 uint64_t next)
{
	struct copy_names *l = priv;

	(void)inum; (void)d_type; (void)next;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (l->nr == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		if (!(l->name = realloc(l->name, l->cap * sizeof(*l->name))))
			abort();
	}
	if (!(l->name[l->nr++] = strndup(name, len)))
		abort();
	return 0;
}

int copy_names_read(struct bch_fs *c, uint64_t dir, struct copy_names *l)
{
	memset(l, 0, sizeof(*l));
	return bch_fs_readdir(c, dir, 0, names_collect, l);
}

void copy_names_free(struct copy_names *l)
{
	for (size_t i = 0; i < l->nr; i++)
		free(l->name[i]);
	free(l->name);
	memset(l, 0, sizeof(*l));
}

int copy_rm_tree(struct bch_fs *c, uint64_t dir, const char *name)
{
	uint64_t inum;
	struct stat st;
	int r = bch_fs_lookup(c, dir, name, &inum);

	if (!r)
		r = bch_fs_getattr(c, inum, &st);
	if (r)
		return r;
	if (!S_ISDIR(st.st_mode))
		return bch_fs_unlink(c, dir, name);
	struct copy_names l;
	r = copy_names_read(c, inum, &l);
	for (size_t i = 0; i < l.nr && !r; i++)
		r = copy_rm_tree(c, inum, l.name[i]);
	copy_names_free(&l);
	return r ? r : bch_fs_rmdir(c, dir, name);
}
