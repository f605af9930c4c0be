// SPDX-License-Identifier: GPL-2.0
/*
 * tar.c - tar archives into and out of a filesystem (see tar.h).
 *
 * Import never leaves the target directory.  An entry is refused (error
 * naming it, nothing of the archive imported when it is a file: see
 * tar_check()) when its name is absolute, has a ".." component, or is a
 * hard link whose target is; symlinks are data and are stored as written
 * (an absolute target means the image's root when the image is used),
 * and nothing is ever created through one: a later entry below a symlink
 * fails with ENOTDIR.  Directory times are set after the whole archive is
 * in, since adding children changes them.
 *
 * OCI layer whiteouts (image-spec layer.md, "Whiteouts"), unless turned
 * off (TAR_NO_WHITEOUTS):
 *  (1) a regular file ".wh.NAME" removes NAME (a whole tree for a
 *      directory) as the lower layers (what the target held before this
 *      archive) left it;
 *  (2) a regular file ".wh..wh..opq" makes its directory opaque: every
 *      child the lower layers put there goes;
 *  (3) whiteouts apply to lower layers only: what this archive itself
 *      adds stays, before or after the whiteout (the names it created are
 *      kept in a set, with their parents, and removal skips them);
 *  (4) the whiteout entries never appear in the image; ".wh.", ".wh.."
 *      and ".wh..." (naming the directory itself or its parent) are
 *      refused, and other ".wh..wh." names (aufs' .plnk and .aufs) are
 *      skipped with a warning.
 */
#include <errno.h>
#include <search.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_dl.h"
#include "bcachefs.h"
#include "cmds.h"
#include "copy.h"
#include "fs_ops.h"
#include "snapshot.h"
#include "snapshot_diff.h"
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

struct import {
	struct bch_fs		*c;
	struct archive		*a;
	const char		*path;		/* the archive, for messages */
	uint64_t		top;
	unsigned		flags;		/* TAR_* */
	void			*made;		/* tsearch set: names this archive wrote, and parents */
	struct dir_time		*dts;
	size_t			nr_dts, cap_dts;
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

/*
 * Clean an archive name: relative, no "." parts.  NULL (with *why set)
 * when it is absolute or has a ".." component: refused.
 */
static char *clean_name(const char *name, const char **why)
{
	char *out = malloc(strlen(name) + 1), *o = out;
	const char *p = name;

	if (*p == '/') {
		*why = "absolute name";
		free(out);
		return NULL;
	}
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			*why = "name with a \"..\" component leaves the target";
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

enum wh { WH_NONE, WH_FILE, WH_OPAQUE, WH_RESERVED, WH_BAD };

/* What base, the last name of a regular file entry, is as a whiteout. */
static enum wh whiteout_kind(const char *base)
{
	if (strncmp(base, ".wh.", 4))
		return WH_NONE;
	if (!strcmp(base, ".wh..wh..opq"))
		return WH_OPAQUE;
	if (!strncmp(base, ".wh..wh.", 8))
		return WH_RESERVED;
	if (!base[4] || !strcmp(base + 4, ".") || !strcmp(base + 4, ".."))
		return WH_BAD;
	return WH_FILE;
}

static const char *base_of(const char *name)
{
	const char *s = strrchr(name, '/');
	return s ? s + 1 : name;
}

/*
 * Check one entry's names as import would: 0, or -EINVAL with the message
 * printed naming the entry.
 */
static int check_entry(const char *path, struct archive_entry *e, unsigned flags)
{
	const char *raw = la->entry_pathname(e), *why = "no name";
	const char *hl = la->entry_hardlink(e);
	char *name = raw ? clean_name(raw, &why) : NULL;
	int r = 0;

	if (!name) {
		cmd_err("image", "import-tar: %s: %s: %s", path, raw ? raw : "(no name)", why);
		return -EINVAL;
	}
	if (hl) {
		char *t = clean_name(hl, &why);
		if (!t || !*t) {
			cmd_err("image", "import-tar: %s: %s: hard link to %s: %s", path, raw, hl,
				t ? "the target itself" : why);
			r = -EINVAL;
		}
		free(t);
	}
	if (!r && !(flags & TAR_NO_WHITEOUTS) && la->entry_filetype(e) == AE_IFREG && !hl &&
	    whiteout_kind(base_of(name)) == WH_BAD) {
		cmd_err("image", "import-tar: %s: %s: whiteout of the directory itself or its parent",
			path, raw);
		r = -EINVAL;
	}
	free(name);
	return r;
}

int tar_check(const char *path, unsigned flags)
{
	struct archive *a;
	struct archive_entry *e;
	int r = 0, ar;

	if ((r = tar_load("import-tar")))
		return r;
	a = la->read_new();
	la->read_support_filter_all(a);
	la->read_support_format_all(a);
	if (la->read_open_filename(a, path, 65536) != ARCHIVE_OK) {
		cmd_err("image", "import-tar: %s: %s", path, la->error_string(a));
		la->read_free(a);
		return -EINVAL;
	}
	while (!r && (ar = la->read_next_header(a, &e)) != ARCHIVE_EOF) {
		if (ar < ARCHIVE_WARN) {
			cmd_err("image", "import-tar: %s: %s", path, la->error_string(a));
			r = -EIO;
			break;
		}
		r = check_entry(path, e, flags);
	}
	la->read_free(a);
	return r;
}

static int made_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* Remember that this archive wrote name (and so its parents). */
static void mark_made(struct import *im, const char *name)
{
	char *p = strdup(name);

	while (*p) {
		char **found = tsearch(p, &im->made, made_cmp);
		if (!found)
			abort();
		if (*found != p) {	/* there already, and so are its parents */
			free(p);
			return;
		}
		char *slash = strrchr(p, '/');
		if (!slash)
			return;
		p = strndup(p, slash - p);
	}
}

static bool was_made(struct import *im, const char *name)
{
	return tfind(name, &im->made, made_cmp) != NULL;
}

static int whiteout(struct import *im, uint64_t dir, const char *dpath, const char *name);

/* Remove what the lower layers put in directory inum (path dpath): rules (2), (3). */
static int whiteout_children(struct import *im, uint64_t inum, const char *dpath)
{
	struct copy_names l;
	int r = copy_names_read(im->c, inum, &l);

	for (size_t i = 0; i < l.nr && !r; i++)
		r = whiteout(im, inum, dpath, l.name[i]);
	copy_names_free(&l);
	return r;
}

/*
 * Remove name in dir (dpath/name) as the lower layers left it: all of it,
 * or when this archive wrote into it, the parts it did not write.
 */
static int whiteout(struct import *im, uint64_t dir, const char *dpath, const char *name)
{
	char *path;
	uint64_t inum;
	struct stat st;
	int r;

	if (asprintf(&path, "%s%s%s", dpath, *dpath ? "/" : "", name) < 0)
		abort();
	r = bch_fs_lookup(im->c, dir, name, &inum);
	if (r == -ENOENT) {
		r = 0;
		goto out;
	}
	if (!r)
		r = bch_fs_getattr(im->c, inum, &st);
	if (r)
		goto out;
	if (!was_made(im, path)) {
		/* nothing below a path this archive did not write was written by it */
		r = copy_rm_tree(im->c, dir, name);
	} else if (S_ISDIR(st.st_mode)) {
		r = whiteout_children(im, inum, path);
	}
	if (r)
		terr(im->c, "whiting out", path, r);
out:
	free(path);
	return r;
}

/* tar_import_spec's maps, for the one import running (NULL: none) */
static const struct bch_spec *import_spec;

static int import_entry(struct import *im, struct archive_entry *e)
{
	struct bch_fs *c = im->c;
	struct archive *a = im->a;
	uint64_t top = im->top;
	const char *raw = la->entry_pathname(e), *why;
	char *name = NULL;
	uint64_t dir, inum = 0;
	uint32_t uid = la->entry_uid(e), gid = la->entry_gid(e);	/* the tar's, not ours */
	int r;

	if ((r = check_entry(im->path, e, im->flags)))
		return r;
	if ((r = spec_map_owner(import_spec, &uid, &gid)))
		return terr(c, "mapping the owner of", raw, r);
	name = clean_name(raw, &why);
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
	enum wh wh = type == AE_IFREG && !hl && !(im->flags & TAR_NO_WHITEOUTS)
		? whiteout_kind(base) : WH_NONE;
	if (wh != WH_NONE) {
		const char *dpath = slash ? name : "";
		if (slash)
			mark_made(im, name);	/* the whiteout's directory is this layer's */
		if (wh == WH_OPAQUE)
			r = whiteout_children(im, dir, dpath);
		else if (wh == WH_FILE)
			r = whiteout(im, dir, dpath, base + 4);
		else
			fprintf(stderr, "bcachefs image: warning: skipping %s: reserved whiteout name\n",
				raw);
		goto out;
	}
	if (slash)
		*slash = '/';
	mark_made(im, name);
	if (slash)
		*slash = 0;
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
		char *target = clean_name(hl, &why);	/* checked: not NULL */
		uint64_t tinum;
		r = bch_fs_lookup_path_at(c, top, target, false, &tinum);
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
			if (im->nr_dts == im->cap_dts) {
				im->cap_dts = im->cap_dts ? im->cap_dts * 2 : 64;
				im->dts = realloc(im->dts, im->cap_dts * sizeof(*im->dts));
				if (!im->dts)
					abort();
			}
			im->dts[im->nr_dts++] = (struct dir_time) { inum, sa.atime, sa.mtime };
		}
	}
out:
	free(name);
	return r;
}

int tar_import_spec(struct bch_fs *c, const char *path, uint64_t top, const struct bch_spec *spec,
		    unsigned flags)
{
	import_spec = spec;
	int r = tar_import(c, path, top, flags);
	import_spec = NULL;
	return r;
}

int tar_import(struct bch_fs *c, const char *path, uint64_t top, unsigned flags)
{
	struct import im = { .c = c, .path = path, .top = top, .flags = flags };
	struct archive_entry *e;
	int r, ar;

	if ((r = tar_load("import-tar")))
		return r;
	im.a = la->read_new();
	la->read_support_filter_all(im.a);
	la->read_support_format_all(im.a);
	if (la->read_open_filename(im.a, strcmp(path, "-") ? path : NULL, 65536) != ARCHIVE_OK) {
		cmd_err("image", "import-tar: %s: %s", path, la->error_string(im.a));
		la->read_free(im.a);
		return -EINVAL;
	}
	while (!r && (ar = la->read_next_header(im.a, &e)) != ARCHIVE_EOF) {
		if (ar < ARCHIVE_WARN) {
			cmd_err("image", "import-tar: %s: %s", path, la->error_string(im.a));
			r = -EIO;
			break;
		}
		r = import_entry(&im, e);
	}
	for (size_t i = im.nr_dts; !r && i-- > 0;) {
		struct bch_setattr sa = { .valid = BCH_SETATTR_ATIME | BCH_SETATTR_MTIME,
					  .atime = im.dts[i].atime, .mtime = im.dts[i].mtime };
		r = bch_fs_setattr(c, im.dts[i].inum, &sa);
	}
	tdestroy(im.made, free);
	free(im.dts);
	la->read_free(im.a);
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
	bool			no_recurse;	/* --since: a changed directory's own entry */
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
	if (r || !S_ISDIR(st.st_mode) || x->no_recurse)
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

static int export_open(struct export *x, const char *path)
{
	int r;

	if ((r = tar_load("export-tar")))
		return r;
	x->a = la->write_new();
	x->buf = malloc(BUF_SIZE);
	la->write_set_format_pax(x->a);
	/* SCHILY.xattr: the xattr records both GNU tar and libarchive read */
	la->write_set_format_option(x->a, "pax", "xattrheader", "SCHILY");
	if (la->write_open_filename(x->a, strcmp(path, "-") ? path : NULL) != ARCHIVE_OK) {
		cmd_err("image", "export-tar: %s: %s", path, la->error_string(x->a));
		la->write_free(x->a);
		free(x->buf);
		return -EINVAL;
	}
	return 0;
}

static int export_close(struct export *x, const char *path, int r)
{
	if (la->write_close(x->a) != ARCHIVE_OK && !r) {
		cmd_err("image", "export-tar: %s: %s", path, la->error_string(x->a));
		r = -EIO;
	}
	la->write_free(x->a);
	for (size_t i = 0; i < x->nr_links; i++)
		free(x->link_path[i]);
	free(x->link_path);
	free(x->link_inum);
	free(x->buf);
	return r;
}

int tar_export(struct bch_fs *c, const char *path, uint64_t dir)
{
	struct export x = { .c = c };
	int r;

	if ((r = export_open(&x, path)))
		return r;
	return export_close(&x, path, export_one(&x, dir, "."));
}

/* ---------------------------------------------------------------- export --since */

/*
 * The layer from OLD to NEW (tar.h).  From the diff (snapshot_diff.h):
 *  (1) whiteouts: the OLD path of every file deleted or renamed, but none
 *      below another (the upper one removes the whole tree); they come
 *      first, so a new file may take the place of a removed one;
 *  (2) whole trees: every file added or renamed, at its NEW path (a
 *      directory with everything in it, as export-tar of it would);
 *  (3) single entries: every file changed in place (data or metadata; a
 *      directory without its children), and every directory above an
 *      entry of (1)-(3) (so that the import leaves their times as NEW has
 *      them), unless inside a tree of (2).
 * Entries are written in path order with "/" sorting first, so a directory
 * comes before what is in it.
 */
struct layer_ent {
	char		*path;		/* in NEW (OLD for a whiteout), from the root: "/a/b" */
	bool		whole;		/* (2) */
};

struct layer {
	struct layer_ent *e;
	size_t		nr, cap;
};

/* Compare paths component by component: "a" < "a/b" < "a-c". */
static int path_cmp(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char x = *a == '/' ? 1 : *a, y = *b == '/' ? 1 : *b;
		if (x != y || !x)
			return x - y;
	}
}

static int layer_ent_cmp(const void *a, const void *b)
{
	const struct layer_ent *x = a, *y = b;
	int c = path_cmp(x->path, y->path);

	return c ? c : (int)y->whole - (int)x->whole;	/* whole first */
}

static void layer_add(struct layer *l, const char *path, bool whole)
{
	if (l->nr == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		if (!(l->e = realloc(l->e, l->cap * sizeof(*l->e))))
			abort();
	}
	l->e[l->nr++] = (struct layer_ent) { strdup(path), whole };
}

/* Add path's parent directories (not the root's own entry when path is "/"). */
static void layer_add_parents(struct layer *l, const char *path)
{
	char *p = strdup(path), *s;

	while ((s = strrchr(p, '/'))) {
		if (s == p) {
			if (p[1])
				layer_add(l, "/", false);
			break;
		}
		*s = 0;
		layer_add(l, p, false);
	}
	free(p);
}

static bool is_under(const char *path, const char *top)
{
	size_t n = strlen(top);

	if (!strcmp(top, "/"))
		return strcmp(path, "/") != 0;
	return !strncmp(path, top, n) && path[n] == '/';
}

/* Sort, drop duplicates and what lies inside a whole tree (or a whiteout above). */
static void layer_prune(struct layer *l)
{
	size_t o = 0;
	const char *top = NULL;

	qsort(l->e, l->nr, sizeof(*l->e), layer_ent_cmp);
	for (size_t i = 0; i < l->nr; i++) {
		if ((o && !strcmp(l->e[o - 1].path, l->e[i].path)) || (top && is_under(l->e[i].path, top))) {
			free(l->e[i].path);
			continue;
		}
		l->e[o] = l->e[i];
		if (l->e[o].whole)
			top = l->e[o].path;
		o++;
	}
	l->nr = o;
}

static void layer_exit(struct layer *l)
{
	for (size_t i = 0; i < l->nr; i++)
		free(l->e[i].path);
	free(l->e);
}

static int export_whiteout(struct export *x, const char *path)
{
	const char *base = strrchr(path, '/') + 1;
	size_t dl = base - path;
	char *name;

	if (asprintf(&name, ".%.*s.wh.%s", (int)dl, path, base) < 0)
		abort();
	struct archive_entry *e = la->entry_new();
	struct stat st = { .st_mode = S_IFREG | 0644, .st_nlink = 1 };
	la->entry_set_pathname(e, name);
	la->entry_copy_stat(e, &st);
	la->entry_unset_ctime(e);
	int r = 0;
	if (la->write_header(x->a, e) < ARCHIVE_WARN) {
		cmd_err("image", "export-tar: %s: %s", name, la->error_string(x->a));
		r = -EIO;
	}
	la->entry_free(e);
	free(name);
	return r;
}

static int export_layer_ent(struct export *x, uint64_t root, const struct layer_ent *le)
{
	uint64_t h = root;
	char *name;
	int r = 0;

	if (strcmp(le->path, "/"))
		r = bch_fs_lookup_path_at(x->c, root, le->path + 1, false, &h);
	if (r)
		return terr(x->c, "finding", le->path, r);
	if (asprintf(&name, ".%s", strcmp(le->path, "/") ? le->path : "") < 0)
		abort();
	x->no_recurse = !le->whole;
	r = export_one(x, h, name);
	free(name);
	return r;
}

int tar_export_since(struct bch_fs *c, const char *path, uint32_t old_subvol, uint32_t new_subvol)
{
	struct bch_sdiff d;
	struct layer wh = { 0 }, add = { 0 };
	struct export x = { .c = c };
	int r = bch_snapshot_diff(c, old_subvol, new_subvol, &d);

	if (r) {
		cmd_err("image", "export-tar --since: %s", c->err_msg[0] ? c->err_msg : strerror(-r));
		goto out;
	}
	for (size_t i = 0; i < d.nr; i++) {
		const struct bch_sdiff_entry *e = &d.e[i];
		const char *np = e->new_path, *op = e->old_path;
		if ((np && np[0] != '/') || (op && op[0] != '/')) {
			fprintf(stderr, "bcachefs image: warning: export-tar --since: inode %llu has no "
				"name to write (its first link went); skipped\n", (unsigned long long)e->inum);
			continue;
		}
		if (!e->subvol && ((np && !S_ISDIR(e->new.mode) && e->new.nlink > 1) ||
				   (op && !S_ISDIR(e->old.mode) && e->old.nlink > 1)))
			fprintf(stderr, "bcachefs image: warning: export-tar --since: %s has several hard "
				"links; the layer holds it under this name only\n", np ? np : op);
		if (e->flags & (BCH_SDIFF_DELETED | BCH_SDIFF_RENAMED))
			layer_add(&wh, op, true);
		if (e->flags & (BCH_SDIFF_ADDED | BCH_SDIFF_RENAMED))
			layer_add(&add, np, true);
		else if (e->flags & (BCH_SDIFF_DATA | BCH_SDIFF_META))
			layer_add(&add, np, false);
	}
	layer_prune(&wh);
	for (size_t i = 0; i < wh.nr; i++)
		layer_add_parents(&add, wh.e[i].path);
	for (size_t i = 0, n = add.nr; i < n; i++)
		layer_add_parents(&add, add.e[i].path);
	layer_prune(&add);
	if ((r = export_open(&x, path)))
		goto out;
	for (size_t i = 0; i < wh.nr && !r; i++)
		r = export_whiteout(&x, wh.e[i].path);
	uint64_t root = bch_handle(new_subvol, d.new_root);
	for (size_t i = 0; i < add.nr && !r; i++)
		r = export_layer_ent(&x, root, &add.e[i]);
	r = export_close(&x, path, r);
out:
	layer_exit(&wh);
	layer_exit(&add);
	bch_snapshot_diff_exit(&d);
	return r;
}
