// SPDX-License-Identifier: GPL-2.0
/*
 * device.c - changing the members of a filesystem (see device.h).
 *
 * Add, drop and resize edit the superblocks with the filesystem closed
 * clean, then open it again.  The edits go through sb_edit(): read the
 * newest superblock of the members given, change a copy, and write it with
 * seq + 1 to each of them, each with its own layout and index.  Every copy
 * is then either the old or the new superblock, and the newest wins at
 * open, so a cut anywhere leaves a filesystem that opens.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uuid/uuid.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "device.h"
#include "reflink.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "journal.h"
#include "opts.h"
#include "alloc_btree.h"
#include "data_job.h"
#include "ec_move.h"
#include "super.h"

/* ------------------------------------------------------------ lookups */

static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	if (stat(a, &sa) || stat(b, &sb))
		return false;
	if (S_ISBLK(sa.st_mode) || S_ISBLK(sb.st_mode))
		return S_ISBLK(sa.st_mode) && S_ISBLK(sb.st_mode) && sa.st_rdev == sb.st_rdev;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int bch_dev_lookup(struct bch_fs *c, char * const *paths, unsigned nr, const char *s,
		   unsigned *dev, char *err, size_t errlen)
{
	char *end;
	unsigned long idx = strtoul(s, &end, 10);
	uuid_t u;

	(void)paths, (void)nr;
	if (*s && !*end) {
		/* strtoul saturates and bch_sb_member() takes an unsigned: range first */
		struct bch_member *m = idx < BCH_SB_MEMBERS_MAX ? bch_sb_member(c->sb, idx) : NULL;
		if (!m || !bch_member_exists(m))
			return bch_errf(err, errlen, -ENOENT, "there is no member %s", s);
		*dev = idx;
		return 0;
	}
	if (!uuid_parse(s, u)) {
		for (unsigned i = 0; i < c->nr_devs; i++) {
			struct bch_member *m = bch_sb_member(c->sb, i);
			if (m && bch_member_exists(m) && !memcmp(m->uuid, u, 16)) {
				*dev = i;
				return 0;
			}
		}
		return bch_errf(err, errlen, -ENOENT, "no member has UUID %s", s);
	}
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev *ca = c->devs[i];
		if (ca && ca->bdev && same_file(bch_dev_path(ca->bdev), s)) {
			*dev = i;
			return 0;
		}
	}
	struct stat st;
	if (stat(s, &st))
		return bch_errf(err, errlen, -ENOENT,
				"%s: %s (a missing member is named by its index or UUID: show-super lists them)",
				s, strerror(errno));
	return bch_errf(err, errlen, -ENOENT, "%s: not a member of this filesystem", s);
}

/* ---------------------------------------------------- superblock edits */

struct sb_dev {
	const char		*path;
	struct bch_blockdev	*bd;
	struct bch_sb		*sb;
};

typedef int (*sb_edit_fn)(struct bch_sb **sb, size_t *bytes, void *priv, char *err, size_t errlen);

static void sb_devs_close(struct sb_dev *d, unsigned nr)
{
	for (unsigned i = 0; i < nr; i++) {
		if (d[i].bd)
			bch_dev_close(d[i].bd);
		free(d[i].sb);
	}
	free(d);
}

/* Open paths read-write and read their superblocks; the newest is *newest. */
static int sb_devs_open(char * const *paths, unsigned nr, struct sb_dev **ret, unsigned *newest,
			char *err, size_t errlen)
{
	struct sb_dev *d = calloc(nr ? nr : 1, sizeof(*d));
	int r = 0;

	if (!d)
		return -ENOMEM;
	*newest = 0;
	for (unsigned i = 0; i < nr && !r; i++) {
		d[i].path = paths[i];
		if ((r = bch_dev_open(paths[i], 0, &d[i].bd)))
			bch_errf(err, errlen, r, "%s: %s", paths[i], bch_err_str(r));
		else if ((r = bch_sb_read(d[i].bd, &d[i].sb, NULL)))
			bch_errf(err, errlen, r, "%s: %s", paths[i], bch_err_str(r));
		else if (d[i].sb->seq > d[*newest].sb->seq)
			*newest = i;
	}
	if (r) {
		sb_devs_close(d, nr);
		return r;
	}
	*ret = d;
	return 0;
}

/*
 * Apply fn to the newest superblock of paths and write the result, seq + 1,
 * to each of them (with its own layout and index).  first, if not NULL, is
 * written before the others (the member being resized: its new end copy
 * must exist before anyone believes in it) with layout *first_layout.
 */
static int sb_edit(char * const *paths, unsigned nr, sb_edit_fn fn, void *priv,
		   int first, const struct bch_sb_layout *first_layout, char *err, size_t errlen)
{
	struct sb_dev *d;
	unsigned newest;
	int r = sb_devs_open(paths, nr, &d, &newest, err, errlen);

	if (r)
		return r;
	size_t bytes = BCH_SB_BUF_BYTES(d[newest].sb->layout.sb_max_size_bits);
	struct bch_sb *sb = malloc(bytes);
	if (!sb) {
		sb_devs_close(d, nr);
		return -ENOMEM;
	}
	memcpy(sb, d[newest].sb, bytes);
	if ((r = fn(&sb, &bytes, priv, err, errlen)))
		goto out;
	sb->seq++;
	sb->write_time = bch_now_secs();
	for (int pass = 0; pass < 2 && !r; pass++)
		for (unsigned i = 0; i < nr && !r; i++) {
			if ((pass == 0) != ((int)i == first))
				continue;
			struct bch_member *m = bch_sb_member(sb, d[i].sb->dev_idx);
			if (!m || !bch_member_exists(m))
				continue;	/* not a member any more: wiped by the caller */
			const struct bch_sb_layout *l = (int)i == first && first_layout
				? first_layout : &d[i].sb->layout;
			if ((r = bch_sb_write_dev(d[i].bd, sb, d[i].sb->dev_idx, l)))
				bch_errf(err, errlen, r, "%s: writing superblock: %s", d[i].path,
					 bch_err_str(r));
		}
out:
	free(sb);
	sb_devs_close(d, nr);
	return r;
}

/* Zero every superblock copy and the layout of a device leaving the filesystem. */
static int sb_wipe(const char *path, char *err, size_t errlen)
{
	struct bch_blockdev *bd;
	struct bch_sb *sb;
	int r = bch_dev_open(path, 0, &bd);

	if (r)
		return bch_errf(err, errlen, r, "%s: %s", path, bch_err_str(r));
	if (!(r = bch_sb_read(bd, &sb, NULL))) {
		size_t n = (size_t)BCH_SECTOR_SIZE << sb->layout.sb_max_size_bits;
		void *z = calloc(1, n);
		if (!z)
			r = -ENOMEM;
		for (unsigned i = 0; z && i < sb->layout.nr_superblocks && !r; i++)
			r = bch_dev_write(bd, z, n, sb->layout.sb_offset[i] << BCH_SECTOR_SHIFT);
		if (z && !r)
			r = bch_dev_write(bd, z, BCH_SECTOR_SIZE,
					  (uint64_t)BCH_SB_LAYOUT_SECTOR << BCH_SECTOR_SHIFT);
		if (!r)
			r = bch_dev_flush(bd);
		free(z);
		free(sb);
	} else if (r == -BCH_ERR_sb_not_found) {
		r = 0;		/* already wiped */
	}
	if (r)
		bch_errf(err, errlen, r, "%s: wiping superblock: %s", path, bch_err_str(r));
	bch_dev_close(bd);
	return r;
}

/* ------------------------------------------------------------- reopen */

/* The options to open with again: the caller's, degraded if it was. */
static void reopen_opts(struct bch_fs *c, const struct bch_opts *open_opts, struct bch_opts *o)
{
	if (open_opts)
		*o = *open_opts;
	else
		memset(o, 0, sizeof(*o));
	if (c->devs_missing && !c->opts.v[Opt_very_degraded])
		bch_opt_set(o, Opt_degraded, 1);
	if (c->opts.v[Opt_very_degraded])
		bch_opt_set(o, Opt_very_degraded, 1);
}

static int reopen(struct bch_fs **cp, char **paths, unsigned nr, const struct bch_opts *o,
		  char *err, size_t errlen)
{
	int r = bch_fs_open(paths, nr, o, cp, err, errlen);

	if (r)
		*cp = NULL;
	return r;
}

/*
 * After the superblocks changed (or failed to): open again from paths; r is
 * the change's result, kept (with its message) over a reopen failure.
 */
static int reopen_after_change(struct bch_fs **cp, char **paths, unsigned nr,
			       const struct bch_opts *o, int r, char *err, size_t errlen)
{
	char e2[256];
	int r2 = reopen(cp, paths, nr, o, e2, sizeof(e2));

	if (r2 && !r) {
		r = r2;
		snprintf(err, errlen, "reopening: %s", e2);
	}
	return r;
}

static int close_clean(struct bch_fs **cp, char *err, size_t errlen)
{
	int r = bch_fs_close(*cp);

	*cp = NULL;
	if (r)
		bch_errf(err, errlen, r, "closing before the change: %s", bch_err_str(r));
	return r;
}

/* ------------------------------------------------- replicas field edits */

/*
 * The replicas field as a list of entries (bcachefs_format.h): walk it,
 * rebuild it.  These edit a superblock that is not open (device add and
 * drop); the open filesystem's table is replicas.c's.
 */
static unsigned replicas_entry_bytes(const struct bch_replicas_entry *e)
{
	return sizeof(*e) + e->nr_devs;
}

static int replicas_rebuild(struct bch_sb **sb, size_t *bytes, const uint8_t *buf, size_t len,
			    char *err, size_t errlen)
{
	int e = 0;
	struct bch_sb_field *f = bch_sb_field_resize(sb, bytes, BCH_SB_FIELD_replicas,
		(sizeof(*f) + len + 4 + 7) / 8, &e);

	if (!f)
		return bch_errf(err, errlen, e ? e : -BCH_ERR_sb_too_big, "superblock full: replicas");
	memset(f + 1, 0, f->u64s * 8 - sizeof(*f));
	memcpy(f + 1, buf, len);
	return 0;
}

/* Copy the entries for which keep() says so into buf (at most cap bytes); returns the length. */
static size_t replicas_filter(const struct bch_sb *sb, uint8_t *buf, size_t cap,
			      bool (*keep)(const struct bch_replicas_entry *e, unsigned arg), unsigned arg)
{
	struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_replicas);
	size_t n = 0;

	if (!f)
		return 0;
	const uint8_t *p = (const uint8_t *)(f + 1), *end = (const uint8_t *)f + f->u64s * 8;
	while (p + sizeof(struct bch_replicas_entry) <= end) {
		const struct bch_replicas_entry *e = (const void *)p;
		if (!e->nr_devs || p + replicas_entry_bytes(e) > end)
			break;
		if (keep(e, arg) && n + replicas_entry_bytes(e) <= cap) {
			memcpy(buf + n, e, replicas_entry_bytes(e));
			n += replicas_entry_bytes(e);
		}
		p += replicas_entry_bytes(e);
	}
	return n;
}

static bool entry_any(const struct bch_replicas_entry *e, unsigned arg)
{
	(void)e, (void)arg;
	return true;
}

static bool entry_without_dev(const struct bch_replicas_entry *e, unsigned dev)
{
	for (unsigned i = 0; i < e->nr_devs; i++)
		if (e->devs[i] == dev)
			return false;
	return true;
}

static int replicas_sb_add(struct bch_sb **sb, size_t *bytes, unsigned data_type,
			   const uint8_t *devs, unsigned nr, char *err, size_t errlen)
{
	uint8_t buf[4096];
	size_t n = replicas_filter(*sb, buf, sizeof(buf) - 64, entry_any, 0);
	struct bch_replicas_entry *e = (void *)(buf + n);

	e->data_type = data_type;
	e->nr_devs = nr;
	e->nr_required = 1;
	e->pad = 0;
	memcpy(e->devs, devs, nr);
	return replicas_rebuild(sb, bytes, buf, n + replicas_entry_bytes(e), err, errlen);
}

static int replicas_sb_drop_dev(struct bch_sb **sb, size_t *bytes, unsigned dev,
				char *err, size_t errlen)
{
	uint8_t buf[4096];
	size_t n = replicas_filter(*sb, buf, sizeof(buf), entry_without_dev, dev);

	return replicas_rebuild(sb, bytes, buf, n, err, errlen);
}

/* ---------------------------------------------------------------- labels */

static unsigned labels_nr(const struct bch_sb *sb)
{
	struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_labels);

	return f ? (f->u64s * 8 - sizeof(*f)) / sizeof(struct bch_label) : 0;
}

static int label_check(const char *name, char *err, size_t errlen)
{
	size_t len = strlen(name);

	if (!len || len >= BCH_MEMBER_LABEL_SIZE)
		return bch_errf(err, errlen, -EINVAL, "label '%s': 1 to %u characters", name,
				BCH_MEMBER_LABEL_SIZE - 1);
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '_' || *p == '-') ||
		    (*p == '.' && (p == name || !p[1] || p[1] == '.')))
			return bch_errf(err, errlen, -EINVAL,
					"label '%s': letters, digits, '_', '-', and '.' between parts only",
					name);
	return 0;
}

int bch_label_check(const char *name, char *err, size_t errlen)
{
	return label_check(name, err, errlen);
}

/* Index+1 of label name in sb's labels, added if absent; 0 and err on failure. */
static unsigned label_get(struct bch_sb **sb, size_t *bytes, const char *name, char *err,
			  size_t errlen)
{
	size_t len = strlen(name);
	unsigned n = labels_nr(*sb);
	int e = 0;

	if (label_check(name, err, errlen))
		return 0;
	struct bch_sb_field_labels *l = bch_sb_get_labels(*sb);
	for (unsigned i = 0; l && i < n; i++)
		if (!(l->entries[i].flags & 1) &&
		    !strncmp(l->entries[i].name, name, BCH_MEMBER_LABEL_SIZE))
			return i + 1;
	/* "a.b" also records "a", as format does: a target can name the group */
	const char *dot = strrchr(name, '.');
	if (dot) {
		char parent[BCH_MEMBER_LABEL_SIZE];
		snprintf(parent, sizeof(parent), "%.*s", (int)(dot - name), name);
		if (!label_get(sb, bytes, parent, err, errlen))
			return 0;
		n = labels_nr(*sb);
	}
	struct bch_sb_field *f = bch_sb_field_resize(sb, bytes, BCH_SB_FIELD_labels,
		(sizeof(*f) + (n + 1) * sizeof(struct bch_label)) / 8, &e);
	if (!f) {
		bch_errf(err, errlen, e ? e : -BCH_ERR_sb_too_big, "superblock full: no room for a label");
		return 0;
	}
	l = (void *)f;
	memset(&l->entries[n], 0, sizeof(l->entries[n]));
	memcpy(l->entries[n].name, name, len);
	return n + 1;
}

/* ------------------------------------------------------------------ add */

struct add_edit {
	struct bch_member	m;
	struct bch_journal_run	jrun;
	const char		*label;
	unsigned		idx;
};

/* Add member idx with its journal run and journal replicas entry. */
static int add_member(struct bch_sb **sb, size_t *bytes, void *priv, char *err, size_t errlen)
{
	struct add_edit *a = priv;
	unsigned have = bch_sb_nr_members(*sb);
	int e = 0;

	if (a->label && !(a->m.label = label_get(sb, bytes, a->label, err, errlen)))
		return -EINVAL;
	if (a->idx >= have) {
		struct bch_sb_field *f = bch_sb_field_resize(sb, bytes, BCH_SB_FIELD_members,
			(sizeof(*f) + (a->idx + 1) * sizeof(struct bch_member)) / 8, &e);
		if (!f)
			return bch_errf(err, errlen, e ? e : -BCH_ERR_sb_too_big,
					"superblock full: no room for another member");
	}
	*bch_sb_member(*sb, a->idx) = a->m;
	if ((*sb)->nr_devices < a->idx + 1)
		(*sb)->nr_devices = a->idx + 1;

	struct bch_sb_field_journal *jf = bch_sb_get_journal(*sb);
	unsigned runs = jf ? (jf->field.u64s * 8 - sizeof(jf->field)) / sizeof(jf->runs[0]) : 0;
	for (unsigned r = 0; r < runs; r++)
		if (jf->runs[r].dev == a->idx)
			return bch_errf(err, errlen, -EINVAL, "journal already lists member %u", a->idx);
	jf = (void *)bch_sb_field_resize(sb, bytes, BCH_SB_FIELD_journal,
		(sizeof(jf->field) + (runs + 1) * sizeof(struct bch_journal_run)) / 8, &e);
	if (!jf)
		return bch_errf(err, errlen, e ? e : -BCH_ERR_sb_too_big, "superblock full: journal");
	jf->runs[runs] = a->jrun;
	jf->runs[runs].dev = a->idx;

	uint8_t devs[1] = { a->idx };
	return replicas_sb_add(sb, bytes, BCH_DATA_journal, devs, 1, err, errlen);
}

int bch_dev_add(struct bch_fs **cp, char ***paths, unsigned *nr, const struct bch_opts *open_opts,
		const struct bch_dev_add_args *a, unsigned *new_idx, char *err, size_t errlen)
{
	struct bch_fs *c = *cp;
	struct bch_format_dev fd = {
		.path = a->path, .size = a->size, .bucket_size = a->bucket_size,
		.durability = a->durability, .discard = a->discard,
	};
	struct add_edit ed = { .label = a->label };
	struct bch_member_plan *plan = NULL;
	struct bch_opts o;
	int r, resume = -1;

	if (c->read_only && !a->dry_run)
		return bch_errf(err, errlen, -BCH_ERR_fs_read_only, "%s: the filesystem is open read-only",
				a->path);
	/* a slot: the first never used or freed by a remove */
	ed.idx = BCH_SB_MEMBERS_MAX;
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX && ed.idx == BCH_SB_MEMBERS_MAX; i++) {
		struct bch_member *m = bch_sb_member(c->sb, i);
		if (!m || !bch_member_exists(m))
			ed.idx = i;
	}
	if (ed.idx == BCH_SB_MEMBERS_MAX)
		return bch_errf(err, errlen, -ENOSPC, "%s: the filesystem has %u members already",
				a->path, BCH_SB_MEMBERS_MAX);
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev *ca = c->devs[i];
		if (ca && ca->bdev && same_file(bch_dev_path(ca->bdev), a->path))
			return bch_errf(err, errlen, -EEXIST, "%s: is already member %u of this filesystem",
					a->path, i);
	}
	/* our superblock on it: another filesystem's (refused), or left by a cut add */
	struct bch_blockdev *bd;
	if (!bch_dev_open(a->path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &bd)) {
		struct bch_sb *old = NULL;
		r = 0;
		if (!bch_sb_read(bd, &old, NULL)) {
			bool ours = !memcmp(old->uuid, c->sb->uuid, BCH_UUID_SIZE);
			struct bch_member *m = bch_sb_member(c->sb, old->dev_idx);
			if (!ours && !a->force)
				r = bch_errf(err, errlen, -EEXIST,
					     "%s: holds another bcachefs filesystem; -f to overwrite it",
					     a->path);
			else if (ours && m && bch_member_exists(m) &&
				 !memcmp(m->uuid, bch_sb_member(old, old->dev_idx)->uuid, 16) &&
				 !bch_dev_missing(c, old->dev_idx))
				r = bch_errf(err, errlen, -EEXIST,
					     "%s: is already member %u of this filesystem",
					     a->path, old->dev_idx);
			else if (ours && m && bch_member_exists(m) &&
				 !memcmp(m->uuid, bch_sb_member(old, old->dev_idx)->uuid, 16))
				resume = old->dev_idx;	/* a rerun after a cut: the member is there */
			else
				r = 0;
			free(old);
			if (r) {
				bch_dev_close(bd);
				return r;
			}
		}
		bch_dev_close(bd);
	}
	if (resume >= 0 && a->dry_run)
		return 0;
	if (resume >= 0) {
		/* what is left of a cut add: open with it (the close writes every superblock) */
		char **np = realloc(*paths, (*nr + 2) * sizeof(char *));
		if (!np)
			return -ENOMEM;
		*paths = np;
		reopen_opts(c, open_opts, &o);
		if (!(r = close_clean(cp, err, errlen))) {
			np[*nr] = strdup(a->path);
			np[*nr + 1] = NULL;
			(*nr)++;
			*new_idx = resume;
			if (!(r = reopen(cp, *paths, *nr, &o, err, errlen)))
				return 0;
			free(np[--(*nr)]);
			np[*nr] = NULL;
		}
		char e2[256];
		if (reopen(cp, *paths, *nr, &o, e2, sizeof(e2)))
			snprintf(err + strlen(err), errlen - strlen(err), "; reopening: %s", e2);
		return r;
	}
	/* the filesystem's geometry (block and node size) from its superblock */
	struct bch_opts fo = c->opts;
	bch_opts_from_sb(&fo, c->sb);
	if ((r = bch_format_member_plan(&fd, &fo, &ed.m, &ed.jrun, &plan, err, errlen)))
		return r;
	if (!ed.m.durability && !a->durability_set)
		ed.m.durability = 1;
	if (a->label && label_check(a->label, err, errlen)) {
		bch_format_member_plan_free(plan);
		return -EINVAL;
	}
	if (a->dry_run) {
		bch_format_member_plan_free(plan);
		return 0;
	}

	/* the new member's superblock first, at a seq that does not win */
	size_t bytes = c->sb_bytes;
	struct bch_sb *nsb = malloc(bytes);
	if (!nsb) {
		bch_format_member_plan_free(plan);
		return -ENOMEM;
	}
	reopen_opts(c, open_opts, &o);
	if ((r = close_clean(cp, err, errlen)))
		goto reopen_old;	/* the old list: the daemon must keep a filesystem */
	/* the superblock as the close left it, with the member added */
	{
		struct sb_dev *d;
		unsigned newest;
		if ((r = sb_devs_open(*paths, *nr, &d, &newest, err, errlen)))
			goto reopen_old;
		size_t b2 = BCH_SB_BUF_BYTES(d[newest].sb->layout.sb_max_size_bits);
		if (b2 > bytes) {
			struct bch_sb *t = realloc(nsb, b2);
			if (!t) {
				sb_devs_close(d, *nr);
				r = -ENOMEM;
				goto reopen_old;
			}
			nsb = t;
			bytes = b2;
		}
		memcpy(nsb, d[newest].sb, b2);
		sb_devs_close(d, *nr);
	}
	if ((r = add_member(&nsb, &bytes, &ed, err, errlen)))
		goto reopen_old;
	nsb->seq = nsb->seq ? nsb->seq - 1 : 0;
	nsb->flags &= ~BCH_SB_FLAG_CLEAN;	/* its own copy is never the one trusted */
	if ((r = bch_format_member_write(&fd, plan, nsb, ed.idx, err, errlen)))
		goto reopen_old;
	if ((r = sb_edit(*paths, *nr, add_member, &ed, -1, NULL, err, errlen)))
		goto reopen_old;

	char **np = realloc(*paths, (*nr + 2) * sizeof(char *));
	if (!np) {
		r = -ENOMEM;
		goto out;
	}
	np[*nr] = strdup(a->path);
	np[*nr + 1] = NULL;
	*paths = np;
	(*nr)++;
	*new_idx = ed.idx;
	r = reopen(cp, *paths, *nr, &o, err, errlen);
	goto out;
reopen_old:
	{
		char e2[256];
		if (reopen(cp, *paths, *nr, &o, e2, sizeof(e2)))
			snprintf(err + strlen(err), errlen - strlen(err), "; reopening: %s", e2);
	}
out:
	free(nsb);
	bch_format_member_plan_free(plan);
	return r;
}

/* ------------------------------------------------------- state, label */

/* Read-write members allowing data_type, other than dev, with a durability. */
static unsigned rw_holders(struct bch_fs *c, unsigned data_type, int except)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_member *m = bch_sb_member(c->sb, i);
		n += (int)i != except && m && bch_member_exists(m) && !bch_dev_missing(c, i) &&
		     m->state == BCH_MEMBER_STATE_rw && m->durability &&
		     (m->data_allowed & (1U << data_type));
	}
	return n;
}

/*
 * How many copies of a node btree read-write members can hold: two a
 * member on a version-2 filesystem (metadata copies on one device), unless
 * a member is missing (a degraded session writes fewer copies: alloc.h).
 */
static unsigned metadata_room(struct bch_fs *c, unsigned btree)
{
	return bch_fs_has_v2(c) && !c->devs_missing ? 2 * btree : btree;
}

int bch_dev_set_state_check(struct bch_fs *c, unsigned dev, unsigned state, bool force,
			    char *err, size_t errlen)
{
	struct bch_member *m = bch_sb_member(c->sb, dev);

	if (!m || !bch_member_exists(m))
		return bch_errf(err, errlen, -ENOENT, "there is no member %u", dev);
	if (state >= BCH_MEMBER_STATE_NR)
		return bch_errf(err, errlen, -EINVAL, "no member state %u", state);
	if (m->state == state)
		return 0;
	if (state != BCH_MEMBER_STATE_rw && !force) {
		unsigned btree = rw_holders(c, BCH_DATA_btree, dev);
		unsigned user = rw_holders(c, BCH_DATA_user, dev);
		if (!btree || !user)
			return bch_errf(err, errlen, -EBUSY,
					"member %u is the last read-write member for %s: nothing could "
					"be written; --force to do it anyway", dev,
					!btree ? "metadata" : "file data");
		if (metadata_room(c, btree) < c->opts.v[Opt_metadata_replicas] ||
		    user < c->opts.v[Opt_data_replicas])
			return bch_errf(err, errlen, -EBUSY,
					"without member %u, %u read-write member%s could hold %s, which "
					"asks for %" PRIu64 " copies; --force to accept fewer",
					dev, metadata_room(c, btree) < c->opts.v[Opt_metadata_replicas] ? btree : user,
					(metadata_room(c, btree) < c->opts.v[Opt_metadata_replicas] ? btree : user) == 1
					? "" : "s",
					metadata_room(c, btree) < c->opts.v[Opt_metadata_replicas] ? "metadata" : "file data",
					metadata_room(c, btree) < c->opts.v[Opt_metadata_replicas]
					? c->opts.v[Opt_metadata_replicas] : c->opts.v[Opt_data_replicas]);
	}
	return 0;
}

int bch_dev_set_state(struct bch_fs *c, unsigned dev, unsigned state, bool force,
		      char *err, size_t errlen)
{
	struct bch_member *m = bch_sb_member(c->sb, dev);
	int r;

	if ((r = bch_dev_set_state_check(c, dev, state, force, err, errlen)))
		return r;
	if (c->read_only)
		return bch_errf(err, errlen, -BCH_ERR_fs_read_only, "the filesystem is open read-only");
	if (m->state == state)
		return 0;
	unsigned old = m->state;
	m->state = state;
	if ((r = bch_write_super(c))) {
		m->state = old;
		return bch_errf(err, errlen, r, "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
	}
	if (c->devs[dev])
		c->devs[dev]->mi = *m;
	bch_journal_devs_update(c);	/* new journal entries: on read-write members only */
	if (state != BCH_MEMBER_STATE_rw)
		bch_alloc_dev_set_limit(c, dev, 0);	/* close its open buckets */
	else
		bch_alloc_dev_set_limit(c, dev, UINT64_MAX);
	return 0;
}

int bch_dev_set_label(struct bch_fs *c, unsigned dev, const char *label, char *err, size_t errlen)
{
	struct bch_member *m = bch_sb_member(c->sb, dev);
	int r;

	if (!m || !bch_member_exists(m))
		return bch_errf(err, errlen, -ENOENT, "there is no member %u", dev);
	if (c->read_only)
		return bch_errf(err, errlen, -BCH_ERR_fs_read_only, "the filesystem is open read-only");
	unsigned idx = 0;
	if (label && *label && !(idx = label_get(&c->sb, &c->sb_bytes, label, err, errlen)))
		return -EINVAL;
	m = bch_sb_member(c->sb, dev);		/* the superblock may have moved */
	m->label = idx;
	if ((r = bch_write_super(c)))
		return bch_errf(err, errlen, r, "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
	if (c->devs[dev])
		c->devs[dev]->mi = *m;
	return 0;
}

/* ------------------------------------------------------------ holdings */

struct holdings_walk {
	unsigned		dev;
	uint64_t		from_sector;
	struct bch_dev_holdings	*h;
};

static int node_holdings(struct bch_fs *c, struct btree *b, void *priv)
{
	struct holdings_walk *w = priv;

	for (unsigned i = 0; i < b->nr_ptrs; i++)
		if (b->ptrs[i].dev == w->dev && b->ptrs[i].offset >= w->from_sector)
			w->h->btree_sectors += c->sb->btree_node_size;
	return 0;
}

void bch_dev_holdings(struct bch_fs *c, unsigned dev, uint64_t first_bucket,
		      struct bch_dev_holdings *h)
{
	struct bch_member *m = bch_sb_member(c->sb, dev);
	struct holdings_walk w = { .dev = dev, .h = h };
	struct bch_data_iter di;
	const struct bch_bkey *k;
	int r = 0;

	memset(h, 0, sizeof(*h));
	if (!m)
		return;
	w.from_sector = first_bucket * m->bucket_size;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++)
		bch_btree_walk_nodes(c, id, node_holdings, &w);
	/* the extents, and the indirect extents shared files point at (reflink.h) */
	bch_data_iter_init(&di, c);
	while ((k = bch_data_iter_next(&di, &r))) {
		const struct bch_extent *e = bkey_val(k);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
			if (e->ptrs[i].dev != dev || e->ptrs[i].offset < w.from_sector)
				continue;
			if (e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED)
				h->cached_sectors += e->crc.compressed_sectors;
			else
				h->user_sectors += e->crc.compressed_sectors;
		}
	}
	bch_data_iter_exit(&di);
	c->err_msg[0] = 0;
	struct bch_ec_dissolve d = { .kind = BCH_EC_SELECT_dev, .dev = dev, .from_sector = w.from_sector };
	if (bch_ec_dissolve_count(c, &d, &h->stripes, &h->stripe_sectors))
		c->err_msg[0] = 0;
	struct bch_dev_usage u;
	if (!bch_dev_missing(c, dev)) {
		bch_dev_usage_get(c, dev, &u);
		h->buckets_used = u.nbuckets - u.free_buckets;
	}
}

/* ------------------------------------------------------- sole copies */

/* A copy that can be read: dirty, on a present member that has not failed. */
static bool ptr_readable(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	struct bch_member *m = bch_sb_member(c->sb, p->dev);

	return !(p->flags & BCH_EXTENT_PTR_CACHED) && m && bch_member_exists(m) &&
	       !bch_dev_missing(c, p->dev) && m->state != BCH_MEMBER_STATE_failed;
}

struct sole_walk {
	unsigned	dev;
	uint64_t	nodes;
};

static int node_sole(struct bch_fs *c, struct btree *b, void *priv)
{
	struct sole_walk *w = priv;
	bool on = false, other = false;

	for (unsigned i = 0; i < b->nr_ptrs; i++)
		if (b->ptrs[i].dev == w->dev)
			on = true;
		else
			other |= ptr_readable(c, &b->ptrs[i]);
	w->nodes += on && !other;
	return 0;
}

/*
 * What only dev holds a readable copy of (dev present): the sectors of file
 * data and the btree nodes that dropping its pointers would lose although
 * they can be read now.  where: the last such extent.
 */
static void sole_copies(struct bch_fs *c, unsigned dev, uint64_t *sectors, uint64_t *nodes,
			char *where, size_t wlen)
{
	struct sole_walk w = { .dev = dev };
	struct bch_data_iter di;
	const struct bch_bkey *k;
	int r = 0;

	*sectors = 0;
	*where = 0;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++)
		bch_btree_walk_nodes(c, id, node_sole, &w);
	*nodes = w.nodes;
	/* an indirect extent (reflink.h) counts once, whatever its sharers */
	bch_data_iter_init(&di, c);
	while ((k = bch_data_iter_next(&di, &r))) {
		const struct bch_extent *e = bkey_val(k);
		bool on = false, other = false;
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
			if (e->ptrs[i].dev == dev)
				on |= !(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED);
			else
				other |= ptr_readable(c, &e->ptrs[i]);
		if (on && !other) {
			*sectors += k->size;
			snprintf(where, wlen, "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64,
				 (uint64_t)k->p.inode, (uint64_t)(k->p.offset - k->size),
				 (uint64_t)k->p.offset);
		}
	}
	bch_data_iter_exit(&di);
	c->err_msg[0] = 0;
}

/* ----------------------------------------------------------------- drop */

/* Delete the alloc keys of dev from bucket `from` on. */
static int alloc_keys_delete(struct bch_fs *c, unsigned dev, uint64_t from)
{
	struct bch_bpos pos = POS(dev, from, 0);
	int r = 0;

	for (;;) {
		struct bch_bkey *k = NULL;
		if ((r = bch_btree_peek_next(c, BCH_BTREE_ID_alloc, pos, POS(dev, UINT64_MAX, UINT32_MAX),
					     &k)) <= 0)
			return r;
		pos = k->p;
		free(k);
		if ((r = bch_alloc_btree_delete(c, pos)))
			return r;
		pos.offset++;
	}
}

struct drop_edit {
	unsigned	dev;
};

static int drop_member(struct bch_sb **sb, size_t *bytes, void *priv, char *err, size_t errlen)
{
	struct drop_edit *d = priv;
	struct bch_member *m = bch_sb_member(*sb, d->dev);

	(void)bytes;
	if (!m || !bch_member_exists(m))
		return 0;	/* already gone: a rerun */
	memset(m, 0, sizeof(*m));
	unsigned top = 0;
	for (unsigned i = 0; i < bch_sb_nr_members(*sb); i++)
		if (bch_member_exists(bch_sb_member(*sb, i)))
			top = i + 1;
	(*sb)->nr_devices = top;

	struct bch_sb_field_journal *jf = bch_sb_get_journal(*sb);
	unsigned runs = jf ? (jf->field.u64s * 8 - sizeof(jf->field)) / sizeof(jf->runs[0]) : 0, n = 0;
	for (unsigned r = 0; r < runs; r++)
		if (jf->runs[r].dev != d->dev)
			jf->runs[n++] = jf->runs[r];
	for (unsigned r = n; r < runs; r++)
		memset(&jf->runs[r], 0, sizeof(jf->runs[r]));
	if (!n)
		return bch_errf(err, errlen, -EINVAL, "no journal would be left");
	int e = 0;
	if (n < runs && !bch_sb_field_resize(sb, bytes, BCH_SB_FIELD_journal,
				(sizeof(jf->field) + n * sizeof(struct bch_journal_run)) / 8, &e))
		return e ? e : -EINVAL;
	return replicas_sb_drop_dev(sb, bytes, d->dev, err, errlen);
}

int bch_dev_drop(struct bch_fs **cp, char ***paths, unsigned *nr, const struct bch_opts *open_opts,
		 unsigned dev, bool force, uint64_t *lost_sectors, char *err, size_t errlen)
{
	struct bch_fs *c = *cp;
	struct bch_member *m = bch_sb_member(c->sb, dev);
	struct bch_dev_holdings h;
	struct bch_opts o;
	int r;

	*lost_sectors = 0;
	if (!m || !bch_member_exists(m))
		return bch_errf(err, errlen, -ENOENT, "there is no member %u", dev);
	if (c->read_only)
		return bch_errf(err, errlen, -BCH_ERR_fs_read_only, "the filesystem is open read-only");
	unsigned members = 0;
	for (unsigned i = 0; i < c->nr_devs; i++)
		members += bch_member_exists(bch_sb_member(c->sb, i));
	if (members < 2)
		return bch_errf(err, errlen, -EBUSY, "member %u is the last member: nothing would be left "
				"(reformat instead)", dev);
	bch_dev_holdings(c, dev, 0, &h);
	if (h.stripes)
		return bch_errf(err, errlen, -EBUSY,
				"member %u still holds blocks of %" PRIu64 " stripes: evacuate it first "
				"(their data is written replicated elsewhere)", dev, h.stripes);
	if ((h.btree_sectors || h.user_sectors) && !force)
		return bch_errf(err, errlen, -EBUSY,
				"member %u still holds %" PRIu64 " sectors of metadata and %" PRIu64
				" of file data: evacuate it first", dev, h.btree_sectors, h.user_sectors);
	if ((h.btree_sectors || h.user_sectors) && !bch_dev_missing(c, dev)) {
		/* force drops copies, never the only readable one: that member is here */
		uint64_t sole, nodes;
		char where[96], a[32];
		sole_copies(c, dev, &sole, &nodes, where, sizeof(where));
		if (sole || nodes) {
			bch_human_size(sole << BCH_SECTOR_SHIFT, a, sizeof(a));
			return bch_errf(err, errlen, -EBUSY,
					"member %u is present and holds the only readable copy of %s of "
					"file data and %" PRIu64 " btree nodes%s%s, which could not be "
					"moved: make room on the others (or add a device) and run it "
					"again; --force drops only what a lost member held", dev, a, nodes,
					*where ? " (last: " : "", *where ? where : "");
		}
	}
	if (h.btree_sectors || h.user_sectors || h.cached_sectors) {
		/* force: whatever still points there goes (a lost member) */
		if ((r = bch_data_drop_dev_ptrs(c, dev, lost_sectors)))
			return bch_errf(err, errlen, r, "dropping the pointers to member %u: %s", dev,
					c->err_msg[0] ? c->err_msg : bch_err_str(r));
	}
	if (!bch_dev_missing(c, dev) && (r = bch_alloc_dev_forget(c, dev, 0)))
		return bch_errf(err, errlen, r, "%s", c->err_msg);
	if ((r = alloc_keys_delete(c, dev, 0)))
		return bch_errf(err, errlen, r, "deleting member %u's bucket keys: %s", dev,
				c->err_msg[0] ? c->err_msg : bch_err_str(r));

	/* the member's path, to wipe it and drop it from the list */
	char *path = NULL;
	if (c->devs[dev] && c->devs[dev]->bdev)
		path = strdup(bch_dev_path(c->devs[dev]->bdev));
	reopen_opts(c, open_opts, &o);
	if ((r = close_clean(cp, err, errlen)))
		goto reopen_after;	/* nothing changed yet: the old list again */
	/* the others learn first; then its own copies go */
	unsigned n = 0;
	for (unsigned i = 0; i < *nr; i++) {
		if (path && same_file((*paths)[i], path)) {
			free((*paths)[i]);
			continue;
		}
		(*paths)[n++] = (*paths)[i];
	}
	(*paths)[n] = NULL;
	*nr = n;
	struct drop_edit d = { dev };
	if ((r = sb_edit(*paths, *nr, drop_member, &d, -1, NULL, err, errlen)))
		goto reopen_after;
	if (path && (r = sb_wipe(path, err, errlen)))
		goto reopen_after;
reopen_after:
	r = reopen_after_change(cp, *paths, *nr, &o, r, err, errlen);
	free(path);
	return r;
}

/* --------------------------------------------------------------- resize */

struct resize_edit {
	unsigned	dev;
	uint64_t	nbuckets;
};

static int resize_member(struct bch_sb **sb, size_t *bytes, void *priv, char *err, size_t errlen)
{
	struct resize_edit *re = priv;
	struct bch_member *m = bch_sb_member(*sb, re->dev);

	(void)bytes;
	if (!m || !bch_member_exists(m))
		return bch_errf(err, errlen, -ENOENT, "there is no member %u", re->dev);
	m->nbuckets = re->nbuckets;
	return 0;
}

int bch_dev_resize_check(struct bch_fs *c, unsigned dev, uint64_t new_bytes, uint64_t *nbuckets_ret,
			 char *err, size_t errlen)
{
	struct bch_member *m = bch_sb_member(c->sb, dev);
	struct bch_dev *ca = dev < BCH_SB_MEMBERS_MAX ? c->devs[dev] : NULL;
	uint64_t sb_area = 1ULL << BCH_SB_MAX_SIZE_BITS;
	char a[32], b[32], d[32];

	if (!m || !bch_member_exists(m))
		return bch_errf(err, errlen, -ENOENT, "there is no member %u", dev);
	if (!ca || !ca->bdev)
		return bch_errf(err, errlen, -ENODEV, "member %u is missing: it cannot be resized", dev);
	uint64_t sectors = new_bytes >> BCH_SECTOR_SHIFT;
	uint64_t last_sb = sectors > sb_area ? (sectors - sb_area) & ~7ULL : 0;
	uint64_t nbuckets = last_sb / m->bucket_size;
	uint64_t min = m->first_bucket + BCH_MIN_NR_BUCKETS;
	struct bch_sb_field_journal *jf = bch_sb_get_journal(c->sb);
	unsigned runs = jf ? (jf->field.u64s * 8 - sizeof(jf->field)) / sizeof(jf->runs[0]) : 0;
	for (unsigned i = 0; i < runs; i++)
		if (jf->runs[i].dev == dev && jf->runs[i].start + jf->runs[i].nr + BCH_MIN_NR_BUCKETS > min)
			min = jf->runs[i].start + jf->runs[i].nr + BCH_MIN_NR_BUCKETS;
	if (nbuckets < min) {
		bch_human_size((min * m->bucket_size + sb_area) << BCH_SECTOR_SHIFT, a, sizeof(a));
		return bch_errf(err, errlen, -BCH_ERR_device_too_small,
				"member %u cannot be smaller than %s (its superblocks, journal and %u buckets)",
				dev, a, BCH_MIN_NR_BUCKETS);
	}
	if (nbuckets > UINT32_MAX)
		return bch_errf(err, errlen, -EINVAL, "too many buckets for member %u", dev);
	if (bch_dev_is_blockdev(ca->bdev) && new_bytes > bch_dev_size(ca->bdev)) {
		bch_human_size(new_bytes, a, sizeof(a));
		bch_human_size(bch_dev_size(ca->bdev), b, sizeof(b));
		return bch_errf(err, errlen, -BCH_ERR_device_too_small,
				"%s: %s is larger than the device (%s)", bch_dev_path(ca->bdev), a, b);
	}
	if (nbuckets < m->nbuckets) {
		/*
		 * The member keeps its reserve of empty buckets for metadata (alloc.c),
		 * counting everything it holds now as staying: else every later
		 * update could fail for want of a node on it.
		 */
		struct bch_alloc_space sp;
		bch_alloc_dev_space(c, dev, &sp);
		uint64_t used = sp.nbuckets - sp.nr_empty;
		uint64_t need_nb = used + 5, b2 = ((used + 1) * 32 + 30) / 31;
		if (b2 > need_nb)
			need_nb = b2;
		if (nbuckets < need_nb) {
			bch_human_size((need_nb * m->bucket_size + sb_area) << BCH_SECTOR_SHIFT, a, sizeof(a));
			return bch_errf(err, errlen, -ENOSPC,
					"member %u holds %" PRIu64 " buckets and keeps 1/32 of its buckets "
					"empty for metadata: it cannot be smaller than %s now", dev, used, a);
		}
		/* what lies past the new end must fit below it, or on the others */
		struct bch_dev_holdings h;
		struct bch_dev_usage u;
		bch_dev_holdings(c, dev, nbuckets, &h);
		bch_dev_usage_get(c, dev, &u);
		uint64_t need = h.user_sectors + h.btree_sectors +
				h.stripe_sectors * c->opts.v[Opt_data_replicas];
		uint64_t lost_free = 0;	/* free buckets past the end go with it */
		uint64_t past = m->nbuckets - nbuckets;
		lost_free = (past > h.buckets_used ? past - h.buckets_used : 0) * m->bucket_size;
		uint64_t have = bch_alloc_target_free(c, 0, 0);
		have = have > lost_free ? have - lost_free : 0;
		if (need > have) {
			bch_human_size(need << BCH_SECTOR_SHIFT, a, sizeof(a));
			bch_human_size(have << BCH_SECTOR_SHIFT, b, sizeof(b));
			bch_human_size((need - have) << BCH_SECTOR_SHIFT, d, sizeof(d));
			return bch_errf(err, errlen, -ENOSPC,
					"member %u holds %s past the new end; the space left below it and on "
					"the other members is %s: %s more is needed", dev, a, b, d);
		}
		(void)u;
	}
	*nbuckets_ret = nbuckets;
	return 0;
}

int bch_dev_resize(struct bch_fs **cp, char ***paths, unsigned *nr, const struct bch_opts *open_opts,
		   unsigned dev, uint64_t new_bytes, char *err, size_t errlen)
{
	struct bch_fs *c = *cp;
	struct bch_member *m = bch_sb_member(c->sb, dev);
	struct bch_dev *ca = dev < BCH_SB_MEMBERS_MAX ? c->devs[dev] : NULL;
	uint64_t sb_area = 1ULL << BCH_SB_MAX_SIZE_BITS;
	struct bch_opts o;
	uint64_t nbuckets;
	int r;

	if (c->read_only)
		return bch_errf(err, errlen, -BCH_ERR_fs_read_only, "the filesystem is open read-only");
	if ((r = bch_dev_resize_check(c, dev, new_bytes, &nbuckets, err, errlen)))
		return r;
	uint64_t sectors = new_bytes >> BCH_SECTOR_SHIFT;
	uint64_t last_sb = (sectors - sb_area) & ~7ULL;
	if (nbuckets == m->nbuckets)
		return 0;
	bool is_blk = bch_dev_is_blockdev(ca->bdev);
	bool shrink = nbuckets < m->nbuckets;
	if (shrink) {
		struct bch_dev_holdings h;
		bch_dev_holdings(c, dev, nbuckets, &h);
		if (h.btree_sectors || h.user_sectors || h.cached_sectors || h.stripes)
			return bch_errf(err, errlen, -EBUSY,
					"member %u still holds data past the new end: evacuate those "
					"buckets first", dev);
		if ((r = bch_alloc_dev_forget(c, dev, nbuckets)))
			return bch_errf(err, errlen, r, "%s", c->err_msg);
		if ((r = alloc_keys_delete(c, dev, nbuckets)))
			return bch_errf(err, errlen, r, "deleting bucket keys past the new end: %s",
					c->err_msg[0] ? c->err_msg : bch_err_str(r));
	}

	char *path = strdup(bch_dev_path(ca->bdev));
	int first = -1;
	struct bch_sb_layout layout = ca->disk_sb->layout;
	uint64_t old_end = (uint64_t)m->nbuckets * m->bucket_size;	/* c goes at the close */
	if (!path)
		return -ENOMEM;
	reopen_opts(c, open_opts, &o);
	if ((r = close_clean(cp, err, errlen)))
		goto reopen_after;	/* nothing changed yet: the old list again */
	for (unsigned i = 0; i < *nr; i++)
		if (same_file((*paths)[i], path))
			first = i;
	/* the end copy moves: past the new last bucket */
	for (unsigned i = 0; i < layout.nr_superblocks; i++)
		if (layout.sb_offset[i] >= old_end || layout.sb_offset[i] >= last_sb)
			layout.sb_offset[i] = last_sb;
	if (!is_blk && !shrink) {
		struct bch_blockdev *bd;
		if ((r = bch_dev_open(path, 0, &bd))) {
			bch_errf(err, errlen, r, "%s: %s", path, bch_err_str(r));
			goto reopen_after;
		}
		if (bch_dev_size(bd) < new_bytes && (r = bch_dev_set_size(bd, new_bytes)))
			bch_errf(err, errlen, r, "%s: growing the file: %s", path, bch_err_str(r));
		bch_dev_close(bd);
		if (r)
			goto reopen_after;
	}
	struct resize_edit re = { dev, nbuckets };
	if ((r = sb_edit(*paths, *nr, resize_member, &re, first, &layout, err, errlen)))
		goto reopen_after;
	if (!is_blk && shrink) {
		struct bch_blockdev *bd;
		if (!(r = bch_dev_open(path, 0, &bd))) {
			r = bch_dev_set_size(bd, new_bytes);
			bch_dev_close(bd);
		}
		if (r)
			bch_errf(err, errlen, r, "%s: truncating the file: %s", path, bch_err_str(r));
	}
reopen_after:
	r = reopen_after_change(cp, *paths, *nr, &o, r, err, errlen);
	free(path);
	return r;
}

/* ------------------------------------------------------ remove: may it? */

int bch_dev_remove_check(struct bch_fs *c, unsigned dev, bool force, bool force_metadata,
			 struct bch_dev_holdings *h, char *err, size_t errlen)
{
	struct bch_member *m = bch_sb_member(c->sb, dev);
	char a[32], b[32], d[32];

	if (!m || !bch_member_exists(m))
		return bch_errf(err, errlen, -ENOENT, "there is no member %u", dev);
	unsigned members = 0;
	for (unsigned i = 0; i < c->nr_devs; i++)
		members += bch_member_exists(bch_sb_member(c->sb, i));
	if (members < 2)
		return bch_errf(err, errlen, -EBUSY,
				"member %u is the last member: nothing would be left (reformat instead)", dev);
	bch_dev_holdings(c, dev, 0, h);
	unsigned btree = rw_holders(c, BCH_DATA_btree, dev), user = rw_holders(c, BCH_DATA_user, dev);
	if (!btree && h->btree_sectors)
		return bch_errf(err, errlen, -EBUSY, "no other read-write member may hold metadata: "
				"member %u's cannot go anywhere", dev);
	if (!user && h->user_sectors && !force)
		return bch_errf(err, errlen, -EBUSY, "no other read-write member may hold file data: "
				"member %u's cannot go anywhere (--force drops it)", dev);
	if (metadata_room(c, btree) < c->opts.v[Opt_metadata_replicas] && h->btree_sectors && !force_metadata)
		return bch_errf(err, errlen, -EBUSY,
				"metadata_replicas=%" PRIu64 " needs %" PRIu64 " read-write members besides "
				"member %u; there %s %u: --force-metadata to keep fewer copies of metadata",
				c->opts.v[Opt_metadata_replicas], c->opts.v[Opt_metadata_replicas], dev,
				btree == 1 ? "is" : "are", btree);
	if (user < c->opts.v[Opt_data_replicas] && (h->user_sectors || h->stripes) && !force) {
		bch_human_size(h->user_sectors << BCH_SECTOR_SHIFT, a, sizeof(a));
		return bch_errf(err, errlen, -EBUSY,
				"data_replicas=%" PRIu64 " needs %" PRIu64 " read-write members besides "
				"member %u; there %s %u: --force to keep fewer copies (of up to %s)",
				c->opts.v[Opt_data_replicas], c->opts.v[Opt_data_replicas], dev,
				user == 1 ? "is" : "are", user, a);
	}
	if (bch_dev_missing(c, dev))
		return 0;	/* its copies are re-made from the others: counted as they go */
	/* a stripe's data is written replicated before its blocks are freed */
	uint64_t need = h->user_sectors + h->btree_sectors +
			h->stripe_sectors * c->opts.v[Opt_data_replicas];
	uint64_t have = bch_alloc_target_free(c, 0, 1ULL << dev);
	if (need > have && !force) {
		bch_human_size(need << BCH_SECTOR_SHIFT, a, sizeof(a));
		bch_human_size(have << BCH_SECTOR_SHIFT, b, sizeof(b));
		bch_human_size((need - have) << BCH_SECTOR_SHIFT, d, sizeof(d));
		return bch_errf(err, errlen, -ENOSPC,
				"member %u holds %s; the other read-write members have %s free: %s more "
				"is needed (add a device or delete files first)", dev, a, b, d);
	}
	if (need > have) {
		/* --force keeps fewer copies; what only this member holds must still move */
		uint64_t sole, nodes;
		char where[96];
		sole_copies(c, dev, &sole, &nodes, where, sizeof(where));
		sole += nodes * c->sb->btree_node_size;
		if (sole > have) {
			bch_human_size(sole << BCH_SECTOR_SHIFT, a, sizeof(a));
			bch_human_size(have << BCH_SECTOR_SHIFT, b, sizeof(b));
			bch_human_size((sole - have) << BCH_SECTOR_SHIFT, d, sizeof(d));
			return bch_errf(err, errlen, -ENOSPC,
					"member %u is present and holds the only readable copy of %s; the "
					"other read-write members have %s free: %s more is needed (--force "
					"drops only what a lost member held)", dev, a, b, d);
		}
	}
	return 0;
}

/* ------------------------------------------------- a stale member's device */

int bch_dev_wipe_stale(struct bch_fs *c, const char *path, char *err, size_t errlen)
{
	struct bch_blockdev *bd;
	struct bch_sb *sb = NULL;
	int r;

	if (c->read_only)
		return bch_errf(err, errlen, -BCH_ERR_fs_read_only, "the filesystem is open read-only");
	for (unsigned i = 0; i < c->nr_devs; i++)
		if (c->devs[i] && c->devs[i]->bdev && same_file(bch_dev_path(c->devs[i]->bdev), path))
			return bch_errf(err, errlen, -EBUSY, "%s: is member %u", path, i);
	if ((r = bch_dev_open(path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &bd)))
		return bch_errf(err, errlen, r, "%s: %s", path, bch_err_str(r));
	r = bch_sb_read(bd, &sb, NULL);
	bch_dev_close(bd);
	if (r)
		return bch_errf(err, errlen, -ENOENT, "%s: not a member of this filesystem", path);
	bool ours = !memcmp(sb->uuid, c->sb->uuid, BCH_UUID_SIZE);
	struct bch_member *m = bch_sb_member(c->sb, sb->dev_idx);
	struct bch_member *own = bch_sb_member(sb, sb->dev_idx);
	bool member = m && own && bch_member_exists(m) && !memcmp(m->uuid, own->uuid, 16);
	free(sb);
	if (!ours)
		return bch_errf(err, errlen, -ENOENT, "%s: not a member of this filesystem", path);
	if (member)
		return bch_errf(err, errlen, -EBUSY, "%s: is a member of this filesystem (not given?)",
				path);
	return sb_wipe(path, err, errlen);
}
