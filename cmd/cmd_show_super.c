// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_show_super.c - `bcachefs show-super`: print a device's superblock.
 *
 * Reads every superblock copy of the device (read-only, nothing is written),
 * prints the newest valid one — filesystem identity, options, labels,
 * members, journal buckets, replicas, the clean record — and which copies
 * are damaged.  One printer drives both the human form and --json, so the
 * two cannot drift apart.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "blockdev.h"
#include "cmds.h"
#include "errcode.h"
#include "fsname.h"
#include "opts.h"
#include "super.h"

/* ------------------------------------------------ human / JSON printer */

struct out {
	bool	json;
	int	depth;
	bool	first[16];	/* JSON: nothing printed yet at this depth */
};

static void out_key(struct out *o, const char *key)
{
	if (o->json) {
		if (!o->first[o->depth])
			putchar(',');
		o->first[o->depth] = false;
		printf("\n%*s", 2 * o->depth, "");
		if (key) {
			json_str(stdout, key);
			printf(": ");
		}
	} else if (!key) {
		printf("%*s", 2 * (o->depth - 1), "");
	} else {
		printf("%*s%s:", 2 * (o->depth - 1), "", key);
		int pad = 32 - 2 * (o->depth - 1) - (int)strlen(key ? key : "") - 1;
		printf("%*s", pad > 1 ? pad : 1, "");
	}
}

static void out_str(struct out *o, const char *key, const char *val)
{
	out_key(o, key);
	if (o->json)
		json_str(stdout, val);
	else
		printf("%s\n", val);
}

static void out_u64(struct out *o, const char *key, uint64_t v)
{
	out_key(o, key);
	printf(o->json ? "%" PRIu64 : "%" PRIu64 "\n", v);
}

static void out_bool(struct out *o, const char *key, bool v)
{
	out_key(o, key);
	printf(o->json ? "%s" : "%s\n", o->json ? (v ? "true" : "false") : (v ? "yes" : "no"));
}

/* A size: human in text, bytes in JSON. */
static void out_size(struct out *o, const char *key, uint64_t bytes)
{
	char buf[32];

	if (o->json)
		return out_u64(o, key, bytes);
	bch_human_size(bytes, buf, sizeof(buf));
	out_str(o, key, buf);
}

static void out_open(struct out *o, const char *key, bool array)
{
	if (o->json) {
		out_key(o, key);
		putchar(array ? '[' : '{');
	} else if (key) {
		printf("%*s%s:\n", 2 * (o->depth - 1), "", key);
	}
	o->depth++;
	o->first[o->depth] = true;
}

static void out_close(struct out *o, bool array)
{
	o->depth--;
	if (o->json)
		printf("\n%*s%c", 2 * o->depth, "", array ? ']' : '}');
}

/* ------------------------------------------------------------ sections */

static void uuid_text(const __u8 *u, char *buf)
{
	uuid_unparse_lower(u, buf);
}

static void time_text(uint64_t secs, char *buf, size_t len)
{
	time_t t = secs;
	struct tm tm;

	if (!secs || !gmtime_r(&t, &tm))
		snprintf(buf, len, "never");
	else
		strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

static const char *csum_name(unsigned t)
{
	return t < BCH_CSUM_NR ? bch_csum_opt_names[t] : "unknown";
}

static const char *data_type_name(unsigned t)
{
	static const char * const names[] = {
#define x(n, id)	[id] = #n,
		BCH_DATA_TYPES()
#undef x
	};
	return t < BCH_DATA_NR ? names[t] : "unknown";
}

static const char *btree_name(unsigned id)
{
	static const char * const names[] = {
#define x(n, id)	[id] = #n,
		BCH_BTREE_IDS()
#undef x
	};
	return id < BCH_BTREE_ID_NR && names[id] ? names[id] : "unknown";
}

static const char *jset_entry_name(unsigned t)
{
	static const char * const names[] = {
#define x(n, id)	[id] = #n,
		BCH_JSET_ENTRY_TYPES()
#undef x
	};
	return t < BCH_JSET_ENTRY_NR && names[t] ? names[t] : "unknown";
}

static void show_options(struct out *o, const struct bch_sb *sb)
{
	struct bch_opts opts;
	char buf[64];

	bch_opts_from_sb(&opts, sb);
	out_open(o, "Options", false);
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *opt = &bch_opt_table[i];

		if (!(opt->flags & OPT_FS))
			continue;
		if (opt->type == BCH_OPT_TARGET)
			bch_target_to_text(sb, opts.v[i], buf, sizeof(buf));
		else
			bch_opt_to_text(i, opts.v[i], buf, sizeof(buf));
		if (o->json && (opt->type == BCH_OPT_UINT || opt->type == BCH_OPT_SIZE))
			out_u64(o, opt->name, opts.v[i]);
		else if (o->json && opt->type == BCH_OPT_BOOL)
			out_bool(o, opt->name, opts.v[i]);
		else
			out_str(o, opt->name, buf);
	}
	out_close(o, false);
}

/* Journal buckets of member dev, from the journal field's runs. */
static uint64_t journal_buckets(const struct bch_sb *sb, unsigned dev)
{
	struct bch_sb_field_journal *j = bch_sb_get_journal(sb);
	uint64_t nr = 0;

	if (!j)
		return 0;
	unsigned runs = (j->field.u64s * 8 - sizeof(j->field)) / sizeof(j->runs[0]);
	for (unsigned i = 0; i < runs; i++)
		if (j->runs[i].dev == dev)
			nr += j->runs[i].nr;
	return nr;
}

static void show_members(struct out *o, const struct bch_sb *sb)
{
	char buf[64];

	out_open(o, "Members", true);
	for (unsigned i = 0; i < bch_sb_nr_members(sb); i++) {
		const struct bch_member *m = bch_sb_member(sb, i);
		uint64_t bucket_bytes = (uint64_t)m->bucket_size << BCH_SECTOR_SHIFT;

		if (!bch_member_exists(m))
			continue;
		if (o->json) {
			out_open(o, NULL, false);
		} else {
			snprintf(buf, sizeof(buf), "Device %u", i);
			out_open(o, buf, false);
		}
		out_u64(o, "Index", i);
		uuid_text(m->uuid, buf);
		out_str(o, "UUID", buf);
		out_str(o, "Label", m->label && bch_sb_label_name(sb, m->label - 1, buf, sizeof(buf))
			? buf : "(none)");
		out_size(o, "Size", m->nbuckets * bucket_bytes);
		out_size(o, "Bucket size", bucket_bytes);
		out_u64(o, "Buckets", m->nbuckets);
		out_u64(o, "First bucket", m->first_bucket);
		out_u64(o, "Journal buckets", journal_buckets(sb, i));
		out_u64(o, "Durability", m->durability);
		out_str(o, "State", m->state < BCH_MEMBER_STATE_NR
			? bch_member_state_names[m->state] : "unknown");
		out_bool(o, "Discard", m->discard);
		buf[0] = 0;
		for (unsigned t = 0; t < BCH_DATA_NR; t++)
			if (m->data_allowed & (1U << t)) {
				if (buf[0])
					strcat(buf, ",");
				strcat(buf, data_type_name(t));
			}
		out_str(o, "Data allowed", buf);
		time_text(m->last_mount, buf, sizeof(buf));
		out_str(o, "Last mount", buf);
		out_close(o, false);
	}
	out_close(o, true);
}

static void show_replicas(struct out *o, const struct bch_sb *sb)
{
	struct bch_sb_field_replicas *r = bch_sb_get_replicas(sb);
	char buf[300];

	out_open(o, "Replicas", true);
	if (r) {
		const __u8 *p = (const __u8 *)r->entries;
		const __u8 *end = (const __u8 *)&r->field + r->field.u64s * 8;

		while (p + sizeof(struct bch_replicas_entry) <= end) {
			const struct bch_replicas_entry *e = (const void *)p;

			if (!e->nr_devs || p + sizeof(*e) + e->nr_devs > end)
				break;
			int n = snprintf(buf, sizeof(buf), "%s: %u/%u [", data_type_name(e->data_type),
					 e->nr_required, e->nr_devs);
			for (unsigned i = 0; i < e->nr_devs; i++)
				n += snprintf(buf + n, sizeof(buf) - n, "%s%u", i ? " " : "", e->devs[i]);
			snprintf(buf + n, sizeof(buf) - n, "]");
			out_str(o, NULL, buf);
			p += sizeof(*e) + e->nr_devs;
		}
	}
	out_close(o, true);
}

static void show_clean(struct out *o, const struct bch_sb *sb)
{
	struct bch_sb_field_clean *cl = bch_sb_get_clean(sb);
	bool clean = (sb->flags & BCH_SB_FLAG_CLEAN) && cl;
	char buf[160];

	out_open(o, "Clean", false);
	out_bool(o, "Clean shutdown", clean);
	if (cl) {
		out_u64(o, "Journal seq", cl->journal_seq);
		out_bool(o, "Alloc info current", clean && (cl->flags & BCH_CLEAN_ALLOC_CURRENT));
		out_open(o, "Roots", true);
		const __le64 *p = cl->entries;
		const __le64 *end = (const __le64 *)&cl->field + cl->field.u64s;

		while (p + 1 <= end) {
			const struct bch_jset_entry *e = (const void *)p;

			if (p + 1 + e->u64s > end)
				break;
			int n = snprintf(buf, sizeof(buf), "%s %s level %u",
					 jset_entry_name(e->type), btree_name(e->btree_id), e->level);
			if (e->type == BCH_JSET_ENTRY_btree_root && e->u64s >= BCH_BKEY_U64s) {
				const struct bch_bkey *k = (const void *)e->_data;
				if (k->type == BCH_BKEY_btree_ptr && k->u64s <= e->u64s &&
				    k->u64s * 8 >= sizeof(*k) + sizeof(struct bch_btree_ptr)) {
					const struct bch_btree_ptr *bp = (const void *)k->_data;
					unsigned nr = (k->u64s * 8 - sizeof(*k) - sizeof(*bp)) /
						      sizeof(bp->ptrs[0]);
					for (unsigned i = 0; i < nr && i < BCH_REPLICAS_MAX; i++)
						n += snprintf(buf + n, sizeof(buf) - n,
							      " ptr %u:%llu gen %u", bp->ptrs[i].dev,
							      (unsigned long long)bp->ptrs[i].offset,
							      bp->ptrs[i].gen);
				}
			}
			out_str(o, NULL, buf);
			p += 1 + e->u64s;
		}
		out_close(o, true);
	}
	out_close(o, false);
}

static void show_copies(struct out *o, const struct bch_sb_read_report *r, bool layout)
{
	char buf[200];

	out_open(o, "Superblock copies", true);
	for (unsigned i = 0; i < r->nr; i++) {
		const struct bch_sb_copy_report *c = &r->copies[i];

		if (o->json) {
			out_open(o, NULL, false);
			out_u64(o, "sector", c->offset);
			out_bool(o, "valid", !c->err);
			if (!c->err)
				out_u64(o, "seq", c->seq);
			else
				out_str(o, "error", c->msg[0] ? c->msg : bch_err_str(c->err));
			out_bool(o, "chosen", i == r->chosen);
			out_close(o, false);
		} else if (!c->err) {
			snprintf(buf, sizeof(buf), "valid, seq %" PRIu64 "%s", c->seq,
				 i == r->chosen ? " (used)" : "");
			char key[32];
			snprintf(key, sizeof(key), "sector %" PRIu64, c->offset);
			out_str(o, key, buf);
		} else {
			char key[32];
			snprintf(key, sizeof(key), "sector %" PRIu64, c->offset);
			snprintf(buf, sizeof(buf), "BAD: %s", c->msg[0] ? c->msg : bch_err_str(c->err));
			out_str(o, key, buf);
		}
	}
	out_close(o, true);
	if (layout || r->layout_err)
		out_str(o, "Layout (sector 7)", r->layout_err ? "BAD: damaged, backups found by probing"
							      : "valid");
}

static void show_layout(struct out *o, const struct bch_sb *sb)
{
	out_open(o, "Layout", false);
	out_size(o, "Room per copy", (uint64_t)BCH_SECTOR_SIZE << sb->layout.sb_max_size_bits);
	out_open(o, "Copies at sector", true);
	for (unsigned i = 0; i < sb->layout.nr_superblocks && i < BCH_SB_LAYOUT_MAX; i++)
		out_u64(o, NULL, sb->layout.sb_offset[i]);
	out_close(o, true);
	out_close(o, false);
}

static void show_sb(struct out *o, const char *path, const struct bch_sb *sb,
		    const struct bch_sb_read_report *r, bool layout)
{
	char buf[64];

	out_open(o, NULL, false);
	out_str(o, "Device", path);
	uuid_text(sb->user_uuid, buf);
	out_str(o, "External UUID", buf);
	uuid_text(sb->uuid, buf);
	out_str(o, "Internal UUID", buf);
	snprintf(buf, sizeof(buf), "%.*s", BCH_SB_LABEL_SIZE, (const char *)sb->label);
	out_str(o, "Label", buf);
	out_u64(o, "Version", sb->version);
	out_u64(o, "Oldest version", sb->version_min);
	out_u64(o, "Device index", sb->dev_idx);
	out_u64(o, "Devices", sb->nr_devices);
	out_u64(o, "Sequence number", sb->seq);
	out_str(o, "Superblock checksum", csum_name(sb->csum_type));
	time_text(sb->time_base / 1000000000ULL, buf, sizeof(buf));
	out_str(o, "Created", buf);
	time_text(sb->write_time, buf, sizeof(buf));
	out_str(o, "Last write", buf);
	out_size(o, "Block size", (uint64_t)sb->block_size << BCH_SECTOR_SHIFT);
	out_size(o, "Btree node size", (uint64_t)sb->btree_node_size << BCH_SECTOR_SHIFT);
	snprintf(buf, sizeof(buf), "%s", sb->features & BCH_FEATURE_ENCRYPTION ? "encryption" : "(none)");
	out_str(o, "Features", buf);
	show_options(o, sb);
	show_members(o, sb);
	show_replicas(o, sb);
	show_clean(o, sb);
	if (layout)
		show_layout(o, sb);
	show_copies(o, r, layout);
	out_close(o, false);
}

/*
 * The devices of the fuse.bcachefs mount on mnt: what its daemon holds now
 * (xattr bcachefs.devs of its root), else the mount's source, split at ':'.
 */
static char **mount_devs(const char *mnt, unsigned *nr)
{
	char held[8192];
	ssize_t n = getxattr(mnt, "bcachefs.devs", held, sizeof(held) - 1);
	if (n > 0) {
		char *p = held;
		held[n] = 0;
		return split_devs(&p, 1, nr);
	}

	FILE *mf = fopen("/proc/mounts", "re");
	char src[4096], dst[4096], type[64], *found = NULL;

	if (!mf)
		return NULL;
	while (fscanf(mf, "%4095s %4095s %63s %*[^\n]", src, dst, type) == 3) {
		bch_mountinfo_unescape(dst);
		if (!strcmp(type, "fuse.bcachefs") && !strcmp(dst, mnt)) {
			free(found);
			found = strdup(src);
		}
	}
	fclose(mf);
	if (!found)
		return NULL;
	bch_mountinfo_unescape(found);

	char **devs = split_devs(&found, 1, nr);
	free(found);
	return devs;
}

/* Read and print the superblock of one device; the exit code. */
static int show_dev(const char *path, bool json, bool layout)
{
	struct out o = { .json = json, .depth = 0 };
	struct bch_blockdev *dev;
	struct bch_sb_read_report report;
	struct bch_sb *sb = NULL;

	o.first[0] = true;
	int ret = bch_dev_open(path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &dev);
	if (ret) {
		cmd_err("show-super", "%s: %s", path, bch_err_str(ret));
		return EXIT_FAIL;
	}
	ret = bch_sb_read(dev, &sb, &report);
	bch_dev_close(dev);
	if (ret) {
		cmd_err("show-super", "%s: %s", path, bch_err_str(ret));
		for (unsigned i = 0; i < report.nr; i++)
			fprintf(stderr, "  copy at sector %" PRIu64 ": %s\n", report.copies[i].offset,
				report.copies[i].msg[0] ? report.copies[i].msg
							: bch_err_str(report.copies[i].err));
		return EXIT_FAIL;
	}
	/* o.depth starts at 0; the top-level object opens depth 1. */
	show_sb(&o, path, sb, &report, layout);
	if (o.json)
		putchar('\n');
	free(sb);
	return EXIT_OK;
}

/* ------------------------------------------------------------- command */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs show-super [OPTION]... DEVICE[:DEVICE...] | UUID=<uuid> | MOUNTPOINT\n"
"Print the superblock of a bcachefs device or image file (read-only).  Several\n"
"devices, UUID=<uuid> (block devices are scanned for its members) or the\n"
"mountpoint of a fusemount (its devices): each device's in turn (--json: an\n"
"array).\n"
"\n"
"  -l, --layout   also print where the superblock copies live\n"
"      --json     machine-readable output (sizes in bytes)\n"
"  -h, --help     this text\n"
"\n"
"The newest valid copy is shown; damaged copies are listed as BAD.\n"
"Exit: 0 shown, 1 no valid superblock or I/O error, 16 usage error.\n");
}

int cmd_show_super(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "layout",	no_argument,	NULL, 'l' },
		{ "json",	no_argument,	NULL, 'j' },
		{ "help",	no_argument,	NULL, 'h' },
		{ NULL }
	};
	struct out o = { .depth = 0 };
	bool layout = false;
	int opt;

	o.first[0] = true;
	while ((opt = getopt_long(argc, argv, "lh", longopts, NULL)) != -1)
		switch (opt) {
		case 'l':
			layout = true;
			break;
		case 'j':
			o.json = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	if (argc == optind) {
		cmd_err("show-super", "no device given");
		usage(stderr);
		return EXIT_USAGE;
	}

	struct cmd_fs fs;
	int ret = cmd_fs_resolve("show-super", argv + optind, argc - optind, &fs);
	if (ret)
		return ret;
	/*
	 * a fusemount's mountpoint: the devices it holds; devices named by the
	 * user are shown as named (read-only, so a mounted one reads too)
	 */
	bool named_devs = true;
	for (int i = optind; i < argc; i++) {
		struct stat st;
		if (!strncmp(argv[i], "UUID=", 5) || (!stat(argv[i], &st) && S_ISDIR(st.st_mode)))
			named_devs = false;
	}
	if (fs.mounted && named_devs) {
		free_devs(fs.devs);
		fs.devs = split_devs(argv + optind, argc - optind, &fs.nr);
	} else if (fs.mounted && (free_devs(fs.devs), !(fs.devs = mount_devs(fs.mnt, &fs.nr)))) {
		cmd_err("show-super", "%s: cannot find the devices of this mount in /proc/mounts",
			fs.mnt);
		return EXIT_FAIL;
	}
	if (o.json && fs.nr > 1)
		putchar('[');
	for (unsigned i = 0; i < fs.nr && !ret; i++) {
		if (i)
			putchar(o.json ? ',' : '\n');
		ret = show_dev(fs.devs[i], o.json, layout);
	}
	if (o.json && fs.nr > 1 && !ret)
		printf("]\n");
	cmd_fs_free(&fs);
	return ret;
}
