// SPDX-License-Identifier: GPL-2.0
/*
 * tar.c - tar archives into and out of a filesystem (see tar.h).
 *
 * Import never leaves the target directory: absolute names are taken as
 * relative to it, and names with a ".." component are refused (skipped
 * with a warning), like GNU tar.  Directory times are set after the whole
 * archive is in, since adding children changes them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_dl.h"
#include "bcachefs.h"
#include "cmds.h"
#include "fs_ops.h"
#include "spec.h"
#include "tar.h"
#include "xattr_effective.h"

#define BUF_SIZE	(1U << 20)

/* libarchive's functions, set by tar_load() (dlopen'd: see archive_dl.h) */
static const struct archive_dl *la;

int tar_load(const char *verb)
{
	return archive_dl_load("image", verb, &la);
}

static int terr(struct bch_fs *c, const char *what, const char *path, int r)
{
	if (r == -EIO && c->err_msg[0])
		cmd_err("image", "%s %s: %s (%s)", what, path, strerror(-r), c->err_msg);
	else
		cmd_err("image", "%s %s: %s", what, path, strerror(-r));
	return r;
}

/* ---------------------------------------------------------------- import */

struct dir_time {
	uint64_t	inum;
	int64_t		atime, mtime;
};

/* Find or create the directory path (components of p, relative to dir). */
static int mkdirs(struct bch_fs *c, uint64_t dir, char *p, uint64_t *ret)
{
	uint64_t cur = dir;

	while (*p) {
		char *slash = strchr(p, '/');
		if (slash)
			*slash = 0;
		if (*p && strcmp(p, ".")) {
			uint64_t next;
			struct stat st;
			int r = bch_fs_lookup(c, cur, p, &next);
			if (r == -ENOENT)
				r = bch_fs_create(c, cur, p, S_IFDIR | 0755, 0, getuid(), getgid(), &next);
			else if (!r && !(r = bch_fs_getattr(c, next, &st)) && !S_ISDIR(st.st_mode))
				r = -ENOTDIR;
			if (r) {
				if (slash)
					*slash = '/';
				return r;
			}
			cur = next;
		}
		if (!slash)
			break;
		*slash = '/';
		p = slash + 1;
	}
	*ret = cur;
	return 0;
}

/* Clean an archive name: relative, no "." parts; NULL if it climbs out with "..". */
static char *clean_name(const char *name)
{
	char *out = malloc(strlen(name) + 1), *o = out;
	const char *p = name;

	while (*p) {
		while (*p == '/')
			p++;
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			free(out);
			return NULL;
		}
		if (n && !(n == 1 && p[0] == '.')) {
			if (o != out)
				*o++ = '/';
			memcpy(o, p, n);
			o += n;
		}
		p += n;
	}
	*o = 0;
	return out;
}

/* tar_import_spec's maps, for the one import running (NULL: none) */
static const struct bch_spec *import_spec;

static int import_entry(struct bch_fs *c, struct archive *a, struct archive_entry *e, uint64_t top,
			char *buf, struct dir_time **dts, size_t *nr_dts, size_t *cap_dts)
{
	const char *raw = la->entry_pathname(e);
	char *name = raw ? clean_name(raw) : NULL;
	uint64_t dir, inum = 0;
	uint32_t uid = la->entry_uid(e), gid = la->entry_gid(e);	/* the tar's, not ours */
	int r = spec_map_owner(import_spec, &uid, &gid);

	if (r) {
		free(name);
		return terr(c, "mapping the owner of", raw, r);
	}

	if (!name) {
		fprintf(stderr, "bcachefs image: warning: skipping %s: name leaves the target\n",
			raw ? raw : "(no name)");
		return 0;
	}
	if (!*name) {	/* "./": the target directory itself */
		inum = top;
		goto attrs;
	}
	char *slash = strrchr(name, '/'), *base = name;
	if (slash) {
		*slash = 0;
		base = slash + 1;
		r = mkdirs(c, top, name, &dir);
	} else {
		dir = top;
	}
	if (r) {
		*slash = '/';
		r = terr(c, "creating parents of", raw, r);
		goto out;
	}

	mode_t type = la->entry_filetype(e);
	const char *hl = la->entry_hardlink(e);
	uint64_t existing;
	struct stat est;
	if (!bch_fs_lookup(c, dir, base, &existing) && !bch_fs_getattr(c, existing, &est)) {
		if (S_ISDIR(est.st_mode) && type == AE_IFDIR && !hl) {
			inum = existing;	/* a directory again: just its attributes */
			goto attrs;
		}
		/* replace what was there, as tar does */
		r = S_ISDIR(est.st_mode) ? bch_fs_rmdir(c, dir, base) : bch_fs_unlink(c, dir, base);
		if (r) {
			r = terr(c, "replacing", raw, r);
			goto out;
		}
	}
	if (hl) {
		char *target = clean_name(hl);
		uint64_t tinum;
		r = target ? bch_fs_lookup_path_at(c, top, target, false, &tinum) : -EINVAL;
		if (!r)
			r = bch_fs_link(c, tinum, dir, base);
		free(target);
		if (r)
			r = terr(c, "linking", raw, r);
		goto out;
	}
	switch (type) {
	case AE_IFLNK:
		r = bch_fs_symlink(c, dir, base, la->entry_symlink(e) ? la->entry_symlink(e) : "",
				   uid, gid, &inum);
		break;
	case AE_IFREG: case AE_IFDIR: case AE_IFCHR: case AE_IFBLK: case AE_IFIFO: case AE_IFSOCK:
		r = bch_fs_create(c, dir, base, type | (la->entry_perm(e) & 07777),
				  la->entry_rdev(e), uid, gid, &inum);
		break;
	default:
		fprintf(stderr, "bcachefs image: warning: skipping %s: unknown type\n", raw);
		goto out;
	}
	if (r) {
		r = terr(c, "creating", raw, r);
		goto out;
	}
	if (type == AE_IFREG) {
		const void *blk;
		size_t len;
		la_int64_t off;
		int ar;
		while ((ar = la->read_data_block(a, &blk, &len, &off)) == ARCHIVE_OK) {
			ssize_t w = len ? bch_fs_write(c, inum, off, blk, len) : 0;
			if (w < 0) {
				r = terr(c, "writing", raw, (int)w);
				goto out;
			}
		}
		if (ar != ARCHIVE_EOF) {
			cmd_err("image", "reading %s from the archive: %s", raw, la->error_string(a));
			r = -EIO;
			goto out;
		}
		struct bch_setattr sa = { .valid = BCH_SETATTR_SIZE, .size = la->entry_size(e) };
		if ((r = bch_fs_setattr(c, inum, &sa))) {
			r = terr(c, "sizing", raw, r);
			goto out;
		}
	}
attrs:
	{
		const char *xn;
		const void *xv;
		size_t xl;
		la->entry_xattr_reset(e);
		while (la->entry_xattr_next(e, &xn, &xv, &xl) == ARCHIVE_OK) {
			c->err_msg[0] = 0;
			int x = bch_fs_setxattr(c, inum, xn, xv, xl, 0);
			if (x == -EOPNOTSUPP)
				fprintf(stderr, "bcachefs image: warning: %s: xattr %s not supported\n", raw, xn);
			/* a per-file option this filesystem cannot take (a label it lacks) */
			else if (x == -EINVAL && !strncmp(xn, "bcachefs.", strlen("bcachefs.")))
				fprintf(stderr, "bcachefs image: warning: %s: %s; not set\n", raw,
					c->err_msg[0] ? c->err_msg : xn);
			else if (x) {
				r = terr(c, "setting xattrs of", raw, x);
				goto out;
			}
		}
		struct stat st;
		bch_fs_getattr(c, inum, &st);
		struct bch_setattr sa = { 0 };
		if (!S_ISLNK(st.st_mode)) {
			sa.valid |= BCH_SETATTR_MODE;
			sa.mode = la->entry_perm(e) & 07777;
		}
		sa.valid |= BCH_SETATTR_UID | BCH_SETATTR_GID;
		sa.uid = uid;
		sa.gid = gid;
		int64_t mt = la->entry_mtime_is_set(e)
			? (int64_t)la->entry_mtime(e) * 1000000000LL + la->entry_mtime_nsec(e) : BCH_TIME_NOW;
		int64_t at = la->entry_atime_is_set(e)
			? (int64_t)la->entry_atime(e) * 1000000000LL + la->entry_atime_nsec(e) : mt;
		spec_map_time(import_spec, &at, &mt);
		sa.valid |= BCH_SETATTR_MTIME | BCH_SETATTR_ATIME;
		sa.mtime = mt;
		sa.atime = at;
		if ((r = bch_fs_setattr(c, inum, &sa))) {
			r = terr(c, "setting attributes of", raw, r);
			goto out;
		}
		if (S_ISDIR(st.st_mode)) {
			if (*nr_dts == *cap_dts) {
				*cap_dts = *cap_dts ? *cap_dts * 2 : 64;
				*dts = realloc(*dts, *cap_dts * sizeof(**dts));
				if (!*dts)
					abort();
			}
			(*dts)[(*nr_dts)++] = (struct dir_time) { inum, sa.atime, sa.mtime };
		}
	}
out:
	(void)buf;
	free(name);
	return r;
}

int tar_import_spec(struct bch_fs *c, const char *path, uint64_t top, const struct bch_spec *spec)
{
	import_spec = spec;
	int r = tar_import(c, path, top);
	import_spec = NULL;
	return r;
}

int tar_import(struct bch_fs *c, const char *path, uint64_t top)
{
	struct archive *a;
	struct archive_entry *e;
	struct dir_time *dts = NULL;
	size_t nr_dts = 0, cap_dts = 0;
	char *buf;
	int r, ar;

	if ((r = tar_load("import-tar")))
		return r;
	a = la->read_new();
	buf = malloc(BUF_SIZE);
	la->read_support_filter_all(a);
	la->read_support_format_all(a);
	if (la->read_open_filename(a, strcmp(path, "-") ? path : NULL, 65536) != ARCHIVE_OK) {
		cmd_err("image", "import-tar: %s: %s", path, la->error_string(a));
		la->read_free(a);
		free(buf);
		return -EINVAL;
	}
	while (!r && (ar = la->read_next_header(a, &e)) != ARCHIVE_EOF) {
		if (ar < ARCHIVE_WARN) {
			cmd_err("image", "import-tar: %s: %s", path, la->error_string(a));
			r = -EIO;
			break;
		}
		r = import_entry(c, a, e, top, buf, &dts, &nr_dts, &cap_dts);
	}
	for (size_t i = nr_dts; !r && i-- > 0;) {
		struct bch_setattr sa = { .valid = BCH_SETATTR_ATIME | BCH_SETATTR_MTIME,
					  .atime = dts[i].atime, .mtime = dts[i].mtime };
		r = bch_fs_setattr(c, dts[i].inum, &sa);
	}
	free(dts);
	free(buf);
	la->read_free(a);
	return r;
}

/* ---------------------------------------------------------------- export */

struct export {
	struct bch_fs		*c;
	struct archive		*a;
	char			*buf;
	/* hard links: inode -> first name */
	uint64_t		*link_inum;
	char			**link_path;
	size_t			nr_links, cap_links;
};

struct names {
	char		**name;
	uint64_t	*inum;
	size_t		nr, cap;
};

static int collect(void *priv, const char *name, size_t len, uint64_t inum, unsigned t, uint64_t n)
{
	struct names *l = priv;
	(void)t; (void)n;

	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (l->nr == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->name = realloc(l->name, l->cap * sizeof(*l->name));
		l->inum = realloc(l->inum, l->cap * sizeof(*l->inum));
		if (!l->name || !l->inum)
			abort();
	}
	l->name[l->nr] = strndup(name, len);
	l->inum[l->nr++] = inum;
	return 0;
}

static int name_order(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

static int export_data(struct export *x, struct archive_entry *e, uint64_t inum, uint64_t size,
		       const char *path, bool header)
{
	uint64_t pos = 0;
	unsigned ranges = 0;

	while (pos < size) {
		int64_t data = bch_fs_seek(x->c, inum, pos, SEEK_DATA);
		if (data == -ENXIO)
			data = size;
		else if (data < 0)
			return terr(x->c, "reading", path, (int)data);
		int64_t hole = data < (int64_t)size ? bch_fs_seek(x->c, inum, data, SEEK_HOLE) : (int64_t)size;
		if (hole < 0)
			return terr(x->c, "reading", path, (int)hole);
		if (header) {
			if (hole > data) {
				la->entry_sparse_add_entry(e, data, hole - data);
				ranges++;
			}
		} else {
			/* the pax writer drops the bytes of holes: give it zeros for them */
			memset(x->buf, 0, BUF_SIZE);
			while (pos < (uint64_t)data) {
				size_t n = data - pos < BUF_SIZE ? data - pos : BUF_SIZE;
				if (la->write_data(x->a, x->buf, n) < 0)
					goto werr;
				pos += n;
			}
			while (pos < (uint64_t)hole) {
				size_t want = hole - pos < BUF_SIZE ? hole - pos : BUF_SIZE;
				ssize_t n = bch_fs_read(x->c, inum, pos, x->buf, want);
				if (n <= 0)
					return terr(x->c, "reading", path, n ? (int)n : -EIO);
				if (la->write_data(x->a, x->buf, n) < 0)
					goto werr;
				pos += n;
			}
		}
		pos = hole;
	}
	if (header && !ranges)
		la->entry_sparse_add_entry(e, 0, 0);	/* all hole: still a sparse file */
	return 0;
werr:
	cmd_err("image", "export-tar: writing %s: %s", path, la->error_string(x->a));
	return -EIO;
}

static int export_one(struct export *x, uint64_t inum, const char *path)
{
	struct stat st;
	int r = bch_fs_getattr(x->c, inum, &st);

	if (r)
		return terr(x->c, "reading", path, r);
	struct archive_entry *e = la->entry_new();
	la->entry_set_pathname(e, path);
	la->entry_copy_stat(e, &st);
	la->entry_unset_ctime(e);	/* not settable on extraction; keeps archives stable */

	bool linked = false;
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		for (size_t i = 0; i < x->nr_links; i++)
			if (x->link_inum[i] == inum) {
				la->entry_set_hardlink(e, x->link_path[i]);
				la->entry_set_size(e, 0);
				linked = true;
				break;
			}
		if (!linked) {
			if (x->nr_links == x->cap_links) {
				x->cap_links = x->cap_links ? x->cap_links * 2 : 64;
				x->link_inum = realloc(x->link_inum, x->cap_links * sizeof(*x->link_inum));
				x->link_path = realloc(x->link_path, x->cap_links * sizeof(*x->link_path));
				if (!x->link_inum || !x->link_path)
					abort();
			}
			x->link_inum[x->nr_links] = inum;
			x->link_path[x->nr_links++] = strdup(path);
		}
	}
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = bch_fs_readlink(x->c, inum, target, sizeof(target));
		if (n < 0) {
			la->entry_free(e);
			return terr(x->c, "reading link", path, (int)n);
		}
		la->entry_set_symlink(e, target);
		la->entry_set_size(e, 0);
	}
	if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		la->entry_set_size(e, 0);

	ssize_t len = bch_fs_listxattr(x->c, inum, NULL, 0);
	if (len > 0) {
		char *names = malloc(len);
		len = bch_fs_listxattr(x->c, inum, names, len);
		for (ssize_t off = 0; len > 0 && off < len; off += strlen(names + off) + 1) {
			if (bch_xattr_is_effective(names + off))
				continue;	/* a view of the options, not kept */
			ssize_t vl = bch_fs_getxattr(x->c, inum, names + off, x->buf, BUF_SIZE);
			if (vl >= 0)
				la->entry_xattr_add_entry(e, names + off, x->buf, vl);
		}
		free(names);
	}
	if (S_ISREG(st.st_mode) && !linked && st.st_size &&
	    (uint64_t)st.st_blocks << 9 < (uint64_t)st.st_size &&
	    (r = export_data(x, e, inum, st.st_size, path, true))) {
		la->entry_free(e);
		return r;
	}
	if (la->write_header(x->a, e) < ARCHIVE_WARN) {
		cmd_err("image", "export-tar: %s: %s", path, la->error_string(x->a));
		la->entry_free(e);
		return -EIO;
	}
	if (S_ISREG(st.st_mode) && !linked)
		r = export_data(x, e, inum, st.st_size, path, false);
	la->entry_free(e);
	if (r || !S_ISDIR(st.st_mode))
		return r;

	struct names l = { 0 };
	if ((r = bch_fs_readdir(x->c, inum, 0, collect, &l)))
		return terr(x->c, "listing", path, r);
	/* sort names, keeping inums paired */
	size_t *idx = malloc((l.nr ? l.nr : 1) * sizeof(*idx));
	char **sorted = malloc((l.nr ? l.nr : 1) * sizeof(*sorted));
	if (l.nr)	/* an empty directory: l.name is NULL, which memcpy may not take */
		memcpy(sorted, l.name, l.nr * sizeof(*sorted));
	qsort(sorted, l.nr, sizeof(*sorted), name_order);
	for (size_t i = 0; i < l.nr; i++)
		for (size_t j = 0; j < l.nr; j++)
			if (sorted[i] == l.name[j]) {
				idx[i] = j;
				break;
			}
	for (size_t i = 0; i < l.nr && !r; i++) {
		size_t n = strlen(path) + strlen(sorted[i]) + 2;
		char *child = malloc(n);
		snprintf(child, n, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/", sorted[i]);
		r = export_one(x, l.inum[idx[i]], child);
		free(child);
	}
	for (size_t i = 0; i < l.nr; i++)
		free(l.name[i]);
	free(l.name);
	free(l.inum);
	free(idx);
	free(sorted);
	return r;
}

int tar_export(struct bch_fs *c, const char *path, uint64_t dir)
{
	struct export x = { .c = c };
	int r;

	if ((r = tar_load("export-tar")))
		return r;
	x.a = la->write_new();
	x.buf = malloc(BUF_SIZE);
	la->write_set_format_pax(x.a);
	/* SCHILY.xattr: the xattr records both GNU tar and libarchive read */
	la->write_set_format_option(x.a, "pax", "xattrheader", "SCHILY");
	if (la->write_open_filename(x.a, strcmp(path, "-") ? path : NULL) != ARCHIVE_OK) {
		cmd_err("image", "export-tar: %s: %s", path, la->error_string(x.a));
		la->write_free(x.a);
		free(x.buf);
		return -EINVAL;
	}
	r = export_one(&x, dir, ".");
	if (la->write_close(x.a) != ARCHIVE_OK && !r) {
		cmd_err("image", "export-tar: %s: %s", path, la->error_string(x.a));
		r = -EIO;
	}
	la->write_free(x.a);
	for (size_t i = 0; i < x.nr_links; i++)
		free(x.link_path[i]);
	free(x.link_path);
	free(x.link_inum);
	free(x.buf);
	return r;
}
