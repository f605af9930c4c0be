// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_image_update.c - `bcachefs image update IMG DIR [PATH]` (alias
 * `image sync`): make the tree at PATH in the image (its root by default)
 * equal to the host directory DIR, changing only what differs.
 *
 * Both trees are walked together, a directory at a time, in name order;
 * only metadata is read for a file that compares equal, so the time
 * follows the size of the change, not of the tree.  Per name:
 *  (1) in the image only: removed (a whole tree for a directory); except
 *      lost+found at the image root, the filesystem's own;
 *  (2) in DIR only: copied in (copy.c, as format --source does);
 *  (3) in both with another type, another symlink target or device
 *      number, or sharing an inode the host no longer shares: replaced;
 *  (4) a regular file whose size or mtime (ns) differs, or with
 *      --checksum whose content differs: its data rewritten in place (the
 *      same inode, so its other hard links follow);
 *  (5) then mode, owner, mtime and xattrs set where they differ; an equal
 *      file is not written at all and keeps its extents.  atime is not
 *      compared (reading DIR changes it) but is set with the rest.
 * Hard links: names of one host inode end up on one image inode (the
 * first name found keeps or makes it, later ones are linked to it).
 * Per-file options (bcachefs.* xattrs) the image has and DIR does not are
 * left alone: they are the image's settings, not the tree's.
 *
 * States.  The image verbs open read-only first (cmd_image.c).  That
 * check pass does the whole walk writing nothing and notes each change (an
 * op: kind, host path, image path); a damaged image or an unreadable DIR
 * fails there, before the read-write open, so nothing is written.  The
 * read-write pass then makes only the noted changes, each found again by
 * its path: both trees are walked once.  --dry-run prints on the check
 * pass and ends there (EXIT_IMAGE_DONE); without a check pass (-o
 * read_only, shell) one walk finds and makes the changes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "bcachefs.h"
#include "cmds.h"
#include "copy.h"
#include "fs_ops.h"
#include "xattr_effective.h"

#define CMD		"image update"
#define CMP_BUF		(1U << 20)

/* A small map of two u64 keys to two u64 values (hard links). */
struct pair_ent {
	uint64_t	k1, k2, v1, v2;
	bool		used;
};

struct pair_map {
	struct pair_ent	*t;
	size_t		nr, cap;	/* cap: power of two */
};

/* A change found by the check pass, made by the read-write one. */
struct op {
	char		kind;		/* as printed: + - R W M; m: metadata to compare again */
	char		*hpath, *ipath;
};

struct upd {
	struct bch_fs		*c;
	bool			record;		/* check pass: note the changes in ops */
	bool			entries;	/* the directory being walked had entries changed */
	struct op		*ops;
	size_t			nr_ops, cap_ops;
	bool			write;		/* not the check pass, not --dry-run */
	bool			print;		/* lines on stdout: not check pass, not --json */
	bool			checksum;
	struct copy_ctx		x;
	char			*cmp_buf;	/* --checksum: image side */
	struct pair_map		host_links;	/* host dev, ino -> image inum */
	struct pair_map		img_claims;	/* image inum -> host dev, ino */
	struct {
		uint64_t	created, removed, written, replaced, metadata, unchanged;
		uint64_t	bytes_written, bytes_compared;
	} n;
};

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);
	return h ^ (h >> 31);
}

static struct pair_ent *pair_find(struct pair_map *m, uint64_t k1, uint64_t k2, bool add)
{
	if (add && (m->nr + 1) * 2 > m->cap) {
		struct pair_map n = { .cap = m->cap ? m->cap * 2 : 256 };
		if (!(n.t = calloc(n.cap, sizeof(*n.t))))
			abort();
		for (size_t i = 0; i < m->cap; i++)
			if (m->t[i].used)
				*pair_find(&n, m->t[i].k1, m->t[i].k2, true) = m->t[i];
		free(m->t);
		*m = n;
	}
	if (!m->cap)
		return NULL;
	for (size_t i = mix(k1, k2) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct pair_ent *e = &m->t[i];
		if (e->used && e->k1 == k1 && e->k2 == k2)
			return e;
		if (!e->used) {
			if (!add)
				return NULL;
			*e = (struct pair_ent) { .k1 = k1, .k2 = k2, .used = true };
			m->nr++;
			return e;
		}
	}
}

static int64_t ts_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int upd_err(struct upd *u, int r, const char *what, const char *path)
{
	if (r == -EIO && u->c->err_msg[0])
		cmd_err(CMD, "%s %s: %s (%s)", what, path, strerror(-r), u->c->err_msg);
	else
		cmd_err(CMD, "%s %s: %s", what, path, strerror(-r));
	return r;
}

static void report(struct upd *u, char what, const char *hpath, const char *ipath)
{
	if (u->print && what != 'm')
		printf("%c %s\n", what, *ipath ? ipath : "/");
	if (what == '+' || what == '-' || what == 'R')
		u->entries = true;
	if (!u->record)
		return;
	if (u->nr_ops == u->cap_ops) {
		u->cap_ops = u->cap_ops ? u->cap_ops * 2 : 64;
		if (!(u->ops = realloc(u->ops, u->cap_ops * sizeof(*u->ops))))
			abort();
	}
	struct op *o = &u->ops[u->nr_ops++];
	o->kind = what;
	if (!(o->hpath = strdup(hpath)) || !(o->ipath = strdup(*ipath ? ipath : "/")))
		abort();
}

static char *join(const char *a, const char *b)
{
	char *p;
	if (asprintf(&p, "%s/%s", a, b) < 0)
		abort();
	return p;
}

/* ------------------------------------------------------------ listings */

struct names {
	char		**name;
	size_t		nr, cap;
};

static void names_add(struct names *l, const char *name, size_t len)
{
	if (l->nr == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 32;
		if (!(l->name = realloc(l->name, l->cap * sizeof(*l->name))))
			abort();
	}
	if (!(l->name[l->nr++] = strndup(name, len)))
		abort();
}

static void names_free(struct names *l)
{
	for (size_t i = 0; i < l->nr; i++)
		free(l->name[i]);
	free(l->name);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

static int img_collect(void *priv, const char *name, size_t len, uint64_t inum, unsigned t,
		       uint64_t next)
{
	(void)inum; (void)t; (void)next;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	names_add(priv, name, len);
	return 0;
}

static int host_list(const char *path, struct names *l)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		int e = -errno;
		if (fd >= 0)
			close(fd);
		return e;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			names_add(l, de->d_name, strlen(de->d_name));
	closedir(d);
	qsort(l->name, l->nr, sizeof(*l->name), name_cmp);
	return 0;
}

/* Files and bytes under host path (what copy_in would write), for --dry-run. */
static void host_count(struct upd *u, const char *path, const struct stat *st)
{
	u->n.created++;
	if (S_ISREG(st->st_mode))
		u->n.bytes_written += st->st_size;
	if (!S_ISDIR(st->st_mode))
		return;
	struct names l = { 0 };
	if (host_list(path, &l))
		return;
	for (size_t i = 0; i < l.nr; i++) {
		char *p = join(path, l.name[i]);
		struct stat cst;
		if (!lstat(p, &cst))
			host_count(u, p, &cst);
		free(p);
	}
	names_free(&l);
}

/* ------------------------------------------------------------- changes */

/* Remove name from dir, a tree for a directory: rule (1). */
static int remove_tree(struct upd *u, uint64_t dir, const char *name, const char *ipath)
{
	uint64_t inum;
	struct stat st;
	int r = bch_fs_lookup(u->c, dir, name, &inum);

	if (!r)
		r = bch_fs_getattr(u->c, inum, &st);
	if (r)
		return upd_err(u, r, "reading", ipath);
	u->n.removed++;
	if (S_ISDIR(st.st_mode)) {
		struct names l = { 0 };
		if ((r = bch_fs_readdir(u->c, inum, 0, img_collect, &l)))
			upd_err(u, r, "listing", ipath);
		for (size_t i = 0; !r && i < l.nr; i++) {
			char *p = join(ipath, l.name[i]);
			r = remove_tree(u, inum, l.name[i], p);
			free(p);
		}
		names_free(&l);
		if (!r && u->write && (r = bch_fs_rmdir(u->c, dir, name)))
			upd_err(u, r, "removing", ipath);
		return r;
	}
	if (u->write && (r = bch_fs_unlink(u->c, dir, name)))
		upd_err(u, r, "removing", ipath);
	return r;
}

/* Copy host path in as dir/name (rule (2)), and note its inode for hard links. */
static int create(struct upd *u, const char *hpath, const struct stat *hs, uint64_t dir,
		  const char *name, const char *ipath)
{
	struct pair_ent *l = !S_ISDIR(hs->st_mode) && hs->st_nlink > 1
		? pair_find(&u->host_links, hs->st_dev, hs->st_ino, false) : NULL;
	int r;

	if (!u->write) {
		if (l)
			u->n.created++;
		else
			host_count(u, hpath, hs);
		return 0;
	}
	if (l) {	/* another name of a host inode the image already has */
		u->n.created++;
		r = bch_fs_link(u->c, l->v1, dir, name);
		return r ? upd_err(u, r, "linking", ipath) : 0;
	}
	uint64_t files = u->x.files, bytes = u->x.bytes, inum;
	if ((r = copy_in(&u->x, hpath, dir, name)))
		return r;
	u->n.created += u->x.files - files;
	u->n.bytes_written += u->x.bytes - bytes;
	if (!S_ISDIR(hs->st_mode) && hs->st_nlink > 1 && !bch_fs_lookup(u->c, dir, name, &inum))
		pair_find(&u->host_links, hs->st_dev, hs->st_ino, true)->v1 = inum;
	return 0;
}

/* --checksum: does the image file's content equal the host file's? */
static int same_content(struct upd *u, const char *hpath, uint64_t inum, uint64_t size,
			bool *same)
{
	int fd = open(hpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME), r = 0;
	if (fd < 0 && errno == EPERM)
		fd = open(hpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*same = true;
	for (uint64_t pos = 0; pos < size && *same;) {
		size_t want = size - pos < CMP_BUF ? size - pos : CMP_BUF;
		ssize_t a = pread(fd, u->x.buf, want, pos);
		ssize_t b = bch_fs_read(u->c, inum, pos, u->cmp_buf, want);
		if (a < 0 || b < 0) {
			r = a < 0 ? -errno : (int)b;
			break;
		}
		*same = a == b && a && !memcmp(u->x.buf, u->cmp_buf, a);
		pos += a;
		u->n.bytes_compared += a;
	}
	close(fd);
	return r;
}

static bool skip_xattr(const char *n)
{
	return bch_xattr_is_effective(n) || !strncmp(n, "bcachefs.", strlen("bcachefs."));
}

/* Make the image's xattrs of inum those of host path: *changed when any differed. */
static int sync_xattrs(struct upd *u, const char *hpath, uint64_t inum, const char *ipath,
		       bool *changed)
{
	char *hn = NULL, *in = NULL, *hv = u->x.buf, *iv = u->cmp_buf;
	ssize_t hl = llistxattr(hpath, NULL, 0), il = bch_fs_listxattr(u->c, inum, NULL, 0);
	int r = 0;

	if (hl < 0)
		hl = 0;
	if (il < 0)
		return upd_err(u, (int)il, "listing xattrs of", ipath);
	if (hl && (!(hn = malloc(hl)) || (hl = llistxattr(hpath, hn, hl)) < 0))
		hl = 0;
	if (il && (!(in = malloc(il)) || (il = bch_fs_listxattr(u->c, inum, in, il)) < 0)) {
		r = upd_err(u, (int)il, "listing xattrs of", ipath);
		goto out;
	}
	/* the image's that the host lacks go */
	for (ssize_t o = 0; o < il; o += strlen(in + o) + 1) {
		const char *n = in + o;
		if (skip_xattr(n) || (hl && lgetxattr(hpath, n, NULL, 0) >= 0))
			continue;
		*changed = true;
		if (u->write && (r = bch_fs_removexattr(u->c, inum, n))) {
			upd_err(u, r, "removing an xattr of", ipath);
			goto out;
		}
	}
	/* the host's that differ are set */
	for (ssize_t o = 0; o < hl; o += strlen(hn + o) + 1) {
		const char *n = hn + o;
		if (bch_xattr_is_effective(n))
			continue;
		ssize_t a = lgetxattr(hpath, n, hv, CMP_BUF);
		if (a < 0)
			continue;
		ssize_t b = bch_fs_getxattr(u->c, inum, n, iv, CMP_BUF);
		if (b == a && !memcmp(hv, iv, a))
			continue;
		*changed = true;
		if (u->write && (r = bch_fs_setxattr(u->c, inum, n, hv, a, 0))) {
			upd_err(u, r, "setting an xattr of", ipath);
			goto out;
		}
	}
out:
	free(hn);
	free(in);
	return r;
}

/* Rule (5): mode, owner, times and xattrs; *changed when any differed. */
static int sync_meta(struct upd *u, const char *hpath, const struct stat *hs, uint64_t inum,
		     const char *ipath, bool *changed)
{
	struct stat is;
	int r = bch_fs_getattr(u->c, inum, &is);

	if (r)
		return upd_err(u, r, "reading", ipath);
	if ((r = sync_xattrs(u, hpath, inum, ipath, changed)))
		return r;
	bool lnk = S_ISLNK(hs->st_mode);
	if ((!lnk && (is.st_mode & 07777) != (hs->st_mode & 07777)) ||
	    is.st_uid != hs->st_uid || is.st_gid != hs->st_gid ||
	    ts_ns(is.st_mtim) != ts_ns(hs->st_mtim))
		*changed = true;
	if (!*changed || !u->write)
		return 0;
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	struct bch_setattr sa = {
		.valid	= BCH_SETATTR_UID | BCH_SETATTR_GID | BCH_SETATTR_ATIME | BCH_SETATTR_MTIME |
			  (lnk ? 0 : BCH_SETATTR_MODE),
		.mode	= hs->st_mode & 07777,
		.uid	= hs->st_uid,
		.gid	= hs->st_gid,
		.atime	= sde && *sde ? ts_ns(hs->st_mtim) : ts_ns(hs->st_atim),
		.mtime	= ts_ns(hs->st_mtim),
	};
	if ((r = bch_fs_setattr(u->c, inum, &sa)))
		upd_err(u, r, "setting attributes of", ipath);
	return r;
}

/* Rule (3): must dir/name (inode is, of host file hs) be made anew? */
static bool must_replace(struct upd *u, const char *hpath, const struct stat *hs, uint64_t inum,
			 const struct stat *is)
{
	if ((is->st_mode & S_IFMT) != (hs->st_mode & S_IFMT))
		return true;
	if ((S_ISCHR(hs->st_mode) || S_ISBLK(hs->st_mode)) && is->st_rdev != hs->st_rdev)
		return true;
	if (S_ISLNK(hs->st_mode)) {
		char a[4096], b[4096];
		ssize_t na = readlink(hpath, a, sizeof(a));
		ssize_t nb = bch_fs_readlink(u->c, inum, b, sizeof(b));
		if (na != nb || (na > 0 && memcmp(a, b, na)))
			return true;
	}
	if (!S_ISDIR(hs->st_mode) && is->st_nlink > 1) {
		/* an image inode with other names: is it this host file's? */
		struct pair_ent *e = pair_find(&u->img_claims, inum, 0, false);
		if (e && (e->v1 != hs->st_dev || e->v2 != hs->st_ino))
			return true;
		if (!e) {
			e = pair_find(&u->img_claims, inum, 0, true);
			e->v1 = hs->st_dev;
			e->v2 = hs->st_ino;
		}
	}
	return false;
}

static int sync_dir(struct upd *u, const char *hpath, uint64_t dir, const char *ipath,
		    bool *entries);

/* One name present on the host side (rules (2) to (5)). */
static int sync_one(struct upd *u, const char *hpath, uint64_t dir, const char *name,
		    const char *ipath)
{
	struct stat hs, is;
	uint64_t inum;
	int r;

	if (lstat(hpath, &hs)) {
		r = -errno;
		cmd_err(CMD, "reading %s: %s", hpath, strerror(-r));
		return r;
	}
	r = bch_fs_lookup(u->c, dir, name, &inum);
	if (r == -ENOENT) {
		report(u, '+', hpath, ipath);
		return create(u, hpath, &hs, dir, name, ipath);
	}
	if (!r)
		r = bch_fs_getattr(u->c, inum, &is);
	if (r)
		return upd_err(u, r, "reading", ipath);

	struct pair_ent *l = !S_ISDIR(hs.st_mode) && hs.st_nlink > 1
		? pair_find(&u->host_links, hs.st_dev, hs.st_ino, false) : NULL;
	if (l && l->v1 == inum) {	/* a second name of a file already done */
		u->n.unchanged++;
		return 0;
	}
	if (l || must_replace(u, hpath, &hs, inum, &is)) {
		report(u, 'R', hpath, ipath);
		u->n.replaced++;
		u->n.created--;		/* create() counts it again */
		uint64_t removed = u->n.removed;
		if ((r = remove_tree(u, dir, name, ipath)))
			return r;
		u->n.removed = removed;
		return create(u, hpath, &hs, dir, name, ipath);
	}

	bool data = false, meta = false, entries = false;
	if (S_ISDIR(hs.st_mode) && (r = sync_dir(u, hpath, inum, ipath, &entries)))
		return r;
	if (S_ISREG(hs.st_mode)) {
		data = is.st_size != hs.st_size || ts_ns(is.st_mtim) != ts_ns(hs.st_mtim);
		if (!data && u->checksum) {
			bool same;
			if ((r = same_content(u, hpath, inum, hs.st_size, &same)))
				return upd_err(u, r, "comparing", ipath);
			data = !same;
		}
		if (data) {
			u->n.written++;
			u->n.bytes_written += hs.st_size;
			if (u->write && (r = bch_fs_truncate(u->c, inum, 0)))
				return upd_err(u, r, "truncating", ipath);
			if (u->write && (r = copy_in_data(&u->x, hpath, inum, &hs)))
				return r;
		}
	}
	if ((r = sync_meta(u, hpath, &hs, inum, ipath, &meta)))
		return r;
	if (data)
		report(u, 'W', hpath, ipath);
	else if (meta) {
		report(u, 'M', hpath, ipath);
		u->n.metadata++;
	} else {
		u->n.unchanged++;
		if (entries)	/* changing them changes its times in the image */
			report(u, 'm', hpath, ipath);
	}
	if (!S_ISDIR(hs.st_mode) && hs.st_nlink > 1)
		pair_find(&u->host_links, hs.st_dev, hs.st_ino, true)->v1 = inum;
	return 0;
}

/* Make the entries of image directory dir those of host directory hpath. */
static int sync_dir(struct upd *u, const char *hpath, uint64_t dir, const char *ipath,
		    bool *entries)
{
	struct names h = { 0 }, i = { 0 };
	bool saved = u->entries;
	int r;

	u->entries = false;
	if ((r = host_list(hpath, &h))) {
		cmd_err(CMD, "listing %s: %s", hpath, strerror(-r));
		return r;
	}
	if ((r = bch_fs_readdir(u->c, dir, 0, img_collect, &i))) {
		upd_err(u, r, "listing", *ipath ? ipath : "/");
		goto out;
	}
	qsort(i.name, i.nr, sizeof(*i.name), name_cmp);
	/* both sorted: one merge pass; removals first, so a name is free again */
	for (size_t a = 0, b = 0; !r && b < i.nr; b++) {
		while (a < h.nr && strcmp(h.name[a], i.name[b]) < 0)
			a++;
		if (a < h.nr && !strcmp(h.name[a], i.name[b]))
			continue;
		if (dir == BCH_ROOT_INO && !strcmp(i.name[b], "lost+found"))
			continue;
		char *ip = join(ipath, i.name[b]);
		report(u, '-', "", ip);
		r = remove_tree(u, dir, i.name[b], ip);
		free(ip);
	}
	for (size_t a = 0; !r && a < h.nr; a++) {
		char *hp = join(hpath, h.name[a]), *ip = join(ipath, h.name[a]);
		r = sync_one(u, hp, dir, h.name[a], ip);
		free(hp);
		free(ip);
	}
out:
	*entries = u->entries;
	u->entries = saved;
	names_free(&h);
	names_free(&i);
	return r;
}

/* ------------------------------------------------------------- the verb */

static void json_summary(struct upd *u, bool dry_run)
{
	struct bch_json j;

	json_begin(&j, stdout, false);
	json_bool(&j, "dry_run", dry_run);
	json_u64(&j, "created", u->n.created);
	json_u64(&j, "removed", u->n.removed);
	json_u64(&j, "replaced", u->n.replaced);
	json_u64(&j, "written", u->n.written);
	json_u64(&j, "metadata_only", u->n.metadata);
	json_u64(&j, "unchanged", u->n.unchanged);
	json_u64(&j, "bytes_written", u->n.bytes_written);
	json_u64(&j, "bytes_compared", u->n.bytes_compared);
	json_end(&j);
}

/* Resolve ipath's parent directory into *dir and its last name into *name (in buf). */
static int parent_of(struct upd *u, const char *ipath, char *buf, size_t len, uint64_t *dir,
		     char **name)
{
	snprintf(buf, len, "%s", ipath);
	char *slash = strrchr(buf, '/');
	*name = slash + 1;
	*slash = 0;
	return bch_fs_lookup_path(u->c, buf[0] ? buf : "/", true, dir);
}

/* The read-write pass: make one change the check pass found. */
static int apply_op(struct upd *u, struct op *o)
{
	char buf[8192], *name;
	uint64_t dir, inum;
	struct stat hs;
	bool changed = false;
	int r = 0;

	if (o->kind != '-' && lstat(o->hpath, &hs)) {
		r = -errno;
		cmd_err(CMD, "reading %s: %s", o->hpath, strerror(-r));
		return r;
	}
	switch (o->kind) {
	case '-': case '+': case 'R':
		if ((r = parent_of(u, o->ipath, buf, sizeof(buf), &dir, &name)))
			return upd_err(u, r, "finding the directory of", o->ipath);
		report(u, o->kind, o->hpath, o->ipath);
		if (o->kind == '-')
			return remove_tree(u, dir, name, o->ipath);
		if (o->kind == 'R') {
			uint64_t removed = u->n.removed;
			u->n.replaced++;
			u->n.created--;
			if ((r = remove_tree(u, dir, name, o->ipath)))
				return r;
			u->n.removed = removed;
		}
		return create(u, o->hpath, &hs, dir, name, o->ipath);
	}
	if ((r = bch_fs_lookup_path(u->c, o->ipath, false, &inum)))
		return upd_err(u, r, "finding", o->ipath);
	if (o->kind == 'W') {
		u->n.written++;
		u->n.bytes_written += hs.st_size;
		if ((r = bch_fs_truncate(u->c, inum, 0)))
			return upd_err(u, r, "truncating", o->ipath);
		if ((r = copy_in_data(&u->x, o->hpath, inum, &hs)))
			return r;
	}
	if ((r = sync_meta(u, o->hpath, &hs, inum, o->ipath, &changed)))
		return r;
	if (o->kind == 'W')
		report(u, 'W', o->hpath, o->ipath);
	else if (changed || o->kind == 'M') {
		report(u, 'M', o->hpath, o->ipath);
		u->n.metadata++;
	}
	return 0;
}

static void upd_free(struct upd *u)
{
	for (size_t i = 0; i < u->nr_ops; i++) {
		free(u->ops[i].hpath);
		free(u->ops[i].ipath);
	}
	free(u->ops);
	copy_ctx_exit(&u->x);
	free(u->cmp_buf);
	free(u->host_links.t);
	free(u->img_claims.t);
	free(u);
}

/* The read-write pass after a check pass: only the changes it found. */
static int apply_ops(struct upd *u, struct bch_fs *c, bool json)
{
	uint64_t unchanged = u->n.unchanged, compared = u->n.bytes_compared;
	int r = 0;

	u->c = c;
	u->write = true;
	u->record = false;
	u->print = !json;
	copy_ctx_exit(&u->x);
	if (copy_ctx_init(&u->x, c, CMD))
		abort();
	memset(&u->n, 0, sizeof(u->n));
	u->n.unchanged = unchanged;
	u->n.bytes_compared = compared;
	for (size_t i = 0; !r && i < u->nr_ops; i++)
		r = apply_op(u, &u->ops[i]);
	return r;
}

int cmd_image_update(struct bch_fs *c, bool check_only, bool json, void **priv, int argc,
		     char **argv)
{
	static const struct option lo[] = {
		{ "checksum",	no_argument, NULL, 'c' },
		{ "dry-run",	no_argument, NULL, 'n' },
		{ NULL }
	};
	bool checksum = false, dry_run = false;
	int o;

	while ((o = getopt_long(argc, argv, "+cn", lo, NULL)) != -1)
		switch (o) {
		case 'c': checksum = true; break;
		case 'n': dry_run = true; break;
		default: return cmd_opt_err(CMD, argv, "+cn");
		}
	argc -= optind - 1;
	argv += optind - 1;
	if (argc < 2 || argc > 3)
		return EXIT_USAGE;
	const char *src = argv[1], *dst = argc == 3 ? argv[2] : "/";
	if (!c) {	/* before the open: DIR must be a directory */
		struct stat st;
		if (stat(src, &st)) {
			cmd_err(CMD, "%s: %s", src, strerror(errno));
			return EXIT_FAIL;
		}
		if (!S_ISDIR(st.st_mode)) {
			cmd_err(CMD, "%s: not a directory", src);
			return EXIT_FAIL;
		}
		return EXIT_OK;
	}
	/*
	 * The check pass walks writing nothing and notes the changes; the
	 * read-write pass makes only those (*priv carries them across).  With
	 * --dry-run the check pass prints and is the only one; with -o
	 * read_only there is no check pass and the one walk does everything.
	 */
	struct upd *u = priv ? *priv : NULL;
	int r;
	if (u && !check_only) {
		*priv = NULL;
		r = apply_ops(u, c, json);
		goto done;
	}
	if (!(u = calloc(1, sizeof(*u))) || !(u->cmp_buf = malloc(CMP_BUF)))
		abort();
	u->c = c;
	u->checksum = checksum;
	u->write = !check_only && !dry_run;
	u->print = (!check_only || dry_run) && !json;
	u->record = check_only && !dry_run && priv;
	if (copy_ctx_init(&u->x, c, CMD))
		abort();
	uint64_t dir;
	struct stat st;
	r = bch_fs_lookup_path(c, dst, true, &dir);
	if (!r && !(r = bch_fs_getattr(c, dir, &st)) && !S_ISDIR(st.st_mode))
		r = -ENOTDIR;
	if (r) {
		upd_err(u, r, "finding", dst);
		goto done;
	}
	bool entries = false, meta = false;
	r = sync_dir(u, src, dir, strcmp(dst, "/") ? dst : "", &entries);
	if (!r && (r = lstat(src, &st) ? -errno : 0))
		cmd_err(CMD, "reading %s: %s", src, strerror(-r));
	if (!r && !(r = sync_meta(u, src, &st, dir, dst, &meta)) && (meta || entries)) {
		report(u, meta ? 'M' : 'm', src, strcmp(dst, "/") ? dst : "");
		u->n.metadata += meta;
	}
	if (!r && u->record) {
		*priv = u;		/* for the read-write pass */
		return EXIT_OK;
	}
done:
	if (!r && json && (!check_only || dry_run))
		json_summary(u, dry_run);
	upd_free(u);
	if (r)
		return EXIT_FAIL;
	/* --dry-run: done on the read-only pass, which EXIT_IMAGE_DONE makes the last */
	return check_only && dry_run ? EXIT_IMAGE_DONE : EXIT_OK;
}
