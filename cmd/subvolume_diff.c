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

int subvol_of_path(struct bch_fs *c, const char *verb, const char *path, uint32_t *subvol)
{
	uint64_t h;
	int r = bch_fs_lookup_path(c, path, true, &h);

	if (r) {
		cmd_err("image", "%s: %s: %s", verb, path, strerror(-r));
		return EXIT_FAIL;
	}
	const struct bch_subvol_info *sv = bch_subvol_get(c, bch_fs_subvol_of(h));
	if (!sv || sv->v.root_inum != (h & BCH_HANDLE_INUM_MASK)) {
		cmd_err("image", "%s: %s: not a subvolume", verb, path);
		return EXIT_FAIL;
	}
	*subvol = sv->id;
	return EXIT_OK;
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
static void put_path(const char *p)
{
	for (; *p; p++) {
		unsigned char ch = *p;
		if (ch < 0x20 || ch == 0x7f || ch == '\\')
			printf("\\%03o", ch);
		else
			putchar(ch);
	}
}

static void print_text(const struct bch_sdiff *d)
{
	for (size_t i = 0; i < d->nr; i++) {
		const struct bch_sdiff_entry *e = &d->e[i];
		const char *sv = e->subvol ? " (subvolume)" : "";
		char fields[256];

		fields_text(e->meta, fields, sizeof(fields));
		if (e->flags & BCH_SDIFF_ADDED) {
			printf("added     ");
			put_path(e->new_path);
			printf("%s\n", sv);
		}
		if (e->flags & BCH_SDIFF_DELETED) {
			printf("deleted   ");
			put_path(e->old_path);
			printf("%s\n", sv);
		}
		if (e->flags & BCH_SDIFF_RENAMED) {
			printf("renamed   ");
			put_path(e->old_path);
			printf(" -> ");
			put_path(e->new_path);
			printf("%s\n", sv);
		}
		if (e->flags & BCH_SDIFF_DATA) {
			printf("modified  ");
			put_path(e->new_path);
			for (size_t k = 0; k < e->nr_ranges; k++)
				printf("%c%" PRIu64 "+%" PRIu64, k ? ',' : ' ', e->ranges[k].start,
				       e->ranges[k].end - e->ranges[k].start);
			if (e->old.size != e->new.size)
				printf(" size %" PRIu64 "->%" PRIu64, (uint64_t)e->old.size,
				       (uint64_t)e->new.size);
			if (e->meta)
				printf(" (%s)", fields);
			putchar('\n');
		} else if (e->flags & BCH_SDIFF_META) {
			printf("metadata  ");
			put_path(e->new_path);
			printf(" %s\n", fields);
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

static void print_json(const struct bch_sdiff *d, const char *old, const char *new)
{
	struct bch_json j;

	json_begin(&j, stdout, true);
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

int cmd_subvolume_diff_image(struct bch_fs *c, bool json, int argc, char **argv)
{
	const char *verb = "subvolume diff";
	uint32_t old, new;
	struct bch_sdiff d;

	if (argc != 3)
		return EXIT_USAGE;
	if (!c)
		return EXIT_OK;
	if (subvol_of_path(c, verb, argv[1], &old) || subvol_of_path(c, verb, argv[2], &new))
		return EXIT_FAIL;
	int r = bch_snapshot_diff(c, old, new, &d);
	if (r) {
		if (r == -EXDEV)
			cmd_err("image", "%s: %s and %s: %s", verb, argv[1], argv[2], c->err_msg);
		else
			cmd_err("image", "%s: %s: %s%s%s%s", verb, argv[2], strerror(-r),
				c->err_msg[0] ? " (" : "", c->err_msg, c->err_msg[0] ? ")" : "");
		bch_snapshot_diff_exit(&d);
		return EXIT_FAIL;
	}
	if (json)
		print_json(&d, argv[1], argv[2]);
	else
		print_text(&d);
	bch_snapshot_diff_exit(&d);
	return EXIT_OK;
}
