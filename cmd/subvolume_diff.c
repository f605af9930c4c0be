// SPDX-License-Identifier: GPL-2.0
/*
 * subvolume_diff.c - `bcachefs subvolume diff [--json] DEVICE OLD NEW`
 * (image verb subvolume-diff): what changed from subvolume or snapshot OLD
 * to NEW, found by libbcachefs/snapshot_diff.c from the snapshots between
 * them.  Text: one line per change,
 *   added     PATH
 *   deleted   PATH
 *   renamed   OLDPATH -> NEWPATH
 *   modified  PATH OFFSET+LENGTH,... [size OLD->NEW] [(FIELD,...)]
 *   metadata  PATH FIELD,...
 * sorted by path (a renamed file that also changed has both lines; control
 * bytes and backslashes in paths as \ooo, so a line is one change); a
 * subvolume named inside OLD or NEW is one entry, "PATH (subvolume)".
 * JSON: docs/json/subvolume-diff.schema.json.
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "cmds.h"
#include "fs_ops.h"
#include "snapshot.h"
#include "snapshot_diff.h"
#include "subvolume_diff.h"

/* Where the messages go: err, each line starting with "bcachefs " and prefix. */
struct msgs {
	FILE		*err;
	const char	*prefix;	/* "image: subvolume diff" offline, "subvolume diff" mounted */
};

static void msg(const struct msgs *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msg(const struct msgs *m, const char *fmt, ...)
{
	va_list ap;

	fprintf(m->err, "bcachefs %s: ", m->prefix);
	va_start(ap, fmt);
	vfprintf(m->err, fmt, ap);
	va_end(ap);
	fputc('\n', m->err);
}

static int subvol_of(struct bch_fs *c, const struct msgs *m, const char *path, uint32_t *subvol)
{
	uint64_t h;
	int r = bch_fs_lookup_path(c, path, true, &h);

	if (r) {
		msg(m, "%s: %s", path, strerror(-r));
		return EXIT_FAIL;
	}
	const struct bch_subvol_info *sv = bch_subvol_get(c, bch_fs_subvol_of(h));
	if (!sv || sv->v.root_inum != (h & BCH_HANDLE_INUM_MASK)) {
		msg(m, "%s: not a subvolume", path);
		return EXIT_FAIL;
	}
	*subvol = sv->id;
	return EXIT_OK;
}

int subvol_of_path(struct bch_fs *c, const char *verb, const char *path, uint32_t *subvol)
{
	char prefix[128];

	snprintf(prefix, sizeof(prefix), "image: %s", verb);
	return subvol_of(c, &(struct msgs) { stderr, prefix }, path, subvol);
}

static const char *type_name(const struct bch_sdiff_entry *e)
{
	if (e->subvol)
		return "subvolume";
	mode_t m = (e->new_path ? e->new : e->old).mode;
	switch (m & S_IFMT) {
	case S_IFREG:	return "file";
	case S_IFDIR:	return "directory";
	case S_IFLNK:	return "symlink";
	case S_IFCHR:	return "char_device";
	case S_IFBLK:	return "block_device";
	case S_IFIFO:	return "fifo";
	case S_IFSOCK:	return "socket";
	}
	return "unknown";
}

static void fields_text(unsigned meta, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (unsigned f = 0; f < BCH_SDIFF_F_NR; f++)
		if (meta & (1U << f))
			n += snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? "," : "",
				      bch_sdiff_field_name(f));
}

/* A path on one line: control bytes and backslashes as \ooo (ls -b). */
static void put_path(FILE *f, const char *p)
{
	for (; *p; p++) {
		unsigned char ch = *p;
		if (ch < 0x20 || ch == 0x7f || ch == '\\')
			fprintf(f, "\\%03o", ch);
		else
			putc(ch, f);
	}
}

static void print_text(FILE *f, const struct bch_sdiff *d)
{
	for (size_t i = 0; i < d->nr; i++) {
		const struct bch_sdiff_entry *e = &d->e[i];
		const char *sv = e->subvol ? " (subvolume)" : "";
		char fields[256];

		fields_text(e->meta, fields, sizeof(fields));
		if (e->flags & BCH_SDIFF_ADDED) {
			fprintf(f, "added     ");
			put_path(f, e->new_path);
			fprintf(f, "%s\n", sv);
		}
		if (e->flags & BCH_SDIFF_DELETED) {
			fprintf(f, "deleted   ");
			put_path(f, e->old_path);
			fprintf(f, "%s\n", sv);
		}
		if (e->flags & BCH_SDIFF_RENAMED) {
			fprintf(f, "renamed   ");
			put_path(f, e->old_path);
			fprintf(f, " -> ");
			put_path(f, e->new_path);
			fprintf(f, "%s\n", sv);
		}
		if (e->flags & BCH_SDIFF_DATA) {
			fprintf(f, "modified  ");
			put_path(f, e->new_path);
			for (size_t k = 0; k < e->nr_ranges; k++)
				fprintf(f, "%c%" PRIu64 "+%" PRIu64, k ? ',' : ' ', e->ranges[k].start,
				       e->ranges[k].end - e->ranges[k].start);
			if (e->old.size != e->new.size)
				fprintf(f, " size %" PRIu64 "->%" PRIu64, (uint64_t)e->old.size,
				       (uint64_t)e->new.size);
			if (e->meta)
				fprintf(f, " (%s)", fields);
			putc('\n', f);
		} else if (e->flags & BCH_SDIFF_META) {
			fprintf(f, "metadata  ");
			put_path(f, e->new_path);
			fprintf(f, " %s\n", fields);
		}
	}
}

static void json_fields(struct bch_json *j, unsigned meta)
{
	json_open(j, "fields", true);
	for (unsigned f = 0; f < BCH_SDIFF_F_NR; f++)
		if (meta & (1U << f))
			json_string(j, NULL, bch_sdiff_field_name(f));
	json_close(j);
}

static void json_side(struct bch_json *j, const char *key, const char *path, uint32_t subvol,
		      uint32_t snap)
{
	json_open(j, key, false);
	json_string(j, "path", path);
	json_u64(j, "subvolume", subvol);
	json_u64(j, "snapshot", snap);
	json_close(j);
}

/* One array of the document: the entries with flag, written by kind. */
static void json_list(struct bch_json *j, const struct bch_sdiff *d, const char *key, unsigned flag,
		      bool meta_only)
{
	json_open(j, key, true);
	for (size_t i = 0; i < d->nr; i++) {
		const struct bch_sdiff_entry *e = &d->e[i];
		if (!(e->flags & flag) || (meta_only && (e->flags & BCH_SDIFF_DATA)))
			continue;
		json_open(j, NULL, false);
		json_u64(j, "inum", e->inum);
		json_string(j, "type", type_name(e));
		switch (flag) {
		case BCH_SDIFF_ADDED:
			json_string(j, "path", e->new_path);
			json_u64(j, "size", e->subvol ? 0 : e->new.size);
			break;
		case BCH_SDIFF_DELETED:
			json_string(j, "path", e->old_path);
			json_u64(j, "size", e->subvol ? 0 : e->old.size);
			break;
		case BCH_SDIFF_RENAMED:
			json_string(j, "old_path", e->old_path);
			json_string(j, "new_path", e->new_path);
			break;
		case BCH_SDIFF_DATA:
			json_string(j, "path", e->new_path);
			json_u64(j, "old_size", e->old.size);
			json_u64(j, "new_size", e->new.size);
			json_open(j, "ranges", true);
			for (size_t k = 0; k < e->nr_ranges; k++) {
				json_open(j, NULL, false);
				json_u64(j, "offset", e->ranges[k].start);
				json_u64(j, "length", e->ranges[k].end - e->ranges[k].start);
				json_close(j);
			}
			json_close(j);
			json_fields(j, e->meta);
			break;
		default:
			json_string(j, "path", e->new_path);
			json_fields(j, e->meta);
		}
		json_close(j);
	}
	json_close(j);
}

static void print_json(FILE *f, const struct bch_sdiff *d, const char *old, const char *new)
{
	struct bch_json j;

	json_begin(&j, f, true);
	json_side(&j, "old", old, d->old_subvol, d->old_snap);
	json_side(&j, "new", new, d->new_subvol, d->new_snap);
	json_u64(&j, "common_ancestor", d->ancestor);
	json_u64(&j, "snapshots_read", d->nr_snaps);
	json_u64(&j, "inodes_compared", d->nr_touched);
	json_list(&j, d, "added", BCH_SDIFF_ADDED, false);
	json_list(&j, d, "deleted", BCH_SDIFF_DELETED, false);
	json_list(&j, d, "renamed", BCH_SDIFF_RENAMED, false);
	json_list(&j, d, "modified", BCH_SDIFF_DATA, false);
	json_list(&j, d, "metadata_only", BCH_SDIFF_META, true);
	json_end(&j);
}

int subvolume_diff_print(FILE *out, FILE *err, const char *prefix, struct bch_fs *c, bool json,
			 const char *old_path, const char *new_path)
{
	const struct msgs m = { err, prefix };
	uint32_t old, new;
	struct bch_sdiff d;

	if (subvol_of(c, &m, old_path, &old) || subvol_of(c, &m, new_path, &new))
		return EXIT_FAIL;
	c->err_msg[0] = 0;
	int r = bch_snapshot_diff(c, old, new, &d);
	if (r) {
		if (r == -EXDEV)
			msg(&m, "%s and %s: %s", old_path, new_path, c->err_msg);
		else
			msg(&m, "%s: %s%s%s%s", new_path, strerror(-r), c->err_msg[0] ? " (" : "",
			    c->err_msg, c->err_msg[0] ? ")" : "");
		bch_snapshot_diff_exit(&d);
		return EXIT_FAIL;
	}
	if (json)
		print_json(out, &d, old_path, new_path);
	else
		print_text(out, &d);
	bch_snapshot_diff_exit(&d);
	return EXIT_OK;
}

int cmd_subvolume_diff_image(struct bch_fs *c, bool json, int argc, char **argv)
{
	if (argc != 3)
		return EXIT_USAGE;
	if (!c)
		return EXIT_OK;
	return subvolume_diff_print(stdout, stderr, "image: subvolume diff", c, json, argv[1], argv[2]);
}
