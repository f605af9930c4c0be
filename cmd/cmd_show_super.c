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
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "blockdev.h"
#include "cmds.h"
#include "crypt.h"
#include "errcode.h"
#include "fsname.h"
#include "opts.h"
#include "super.h"

/* ------------------------------------------------ human / JSON printer */

/*
 * Every value has a display label (text) and a snake_case key (JSON, through
 * the shared writer in cmd_util.c): the two forms print the same fields, but
 * a new label in the text never renames a JSON key.
 */
struct out {
	bool		json;
	int		depth;		/* text: nesting, for indentation */
	struct bch_json	j;
};

static void out_label(struct out *o, const char *label)
{
	if (!label) {
		printf("%*s", 2 * (o->depth - 1), "");
		return;
	}
	printf("%*s%s:", 2 * (o->depth - 1), "", label);
	int pad = 32 - 2 * (o->depth - 1) - (int)strlen(label) - 1;
	printf("%*s", pad > 1 ? pad : 1, "");
}

static void out_str(struct out *o, const char *label, const char *key, const char *val)
{
	if (o->json)
		return json_string(&o->j, key, val);
	out_label(o, label);
	printf("%s\n", val);
}

static void out_u64(struct out *o, const char *label, const char *key, uint64_t v)
{
	if (o->json)
		return json_u64(&o->j, key, v);
	out_label(o, label);
	printf("%" PRIu64 "\n", v);
}

static void out_bool(struct out *o, const char *label, const char *key, bool v)
{
	if (o->json)
		return json_bool(&o->j, key, v);
	out_label(o, label);
	printf("%s\n", v ? "yes" : "no");
}

/* A size: human in text, bytes in JSON. */
static void out_size(struct out *o, const char *label, const char *key, uint64_t bytes)
{
	char buf[32];

	if (o->json)
		return json_u64(&o->j, key, bytes);
	bch_human_size(bytes, buf, sizeof(buf));
	out_str(o, label, key, buf);
}

/* A time in seconds since the epoch (0: never): text "YYYY-MM-DD HH:MM:SS UTC", JSON RFC 3339 or null. */
static void out_time(struct out *o, const char *label, const char *key, uint64_t secs)
{
	char buf[64];
	time_t t = secs;
	struct tm tm;

	if (o->json)
		return secs ? json_time(&o->j, key, secs, 0) : json_null(&o->j, key);
	if (!secs || !gmtime_r(&t, &tm))
		snprintf(buf, sizeof(buf), "never");
	else
		strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
	out_str(o, label, key, buf);
}

static void out_open(struct out *o, const char *label, const char *key, bool array)
{
	if (o->json)
		json_open(&o->j, key, array);
	else if (label)
		printf("%*s%s:\n", 2 * (o->depth - 1), "", label);
	o->depth++;
}

static void out_close(struct out *o)
{
	o->depth--;
	if (o->json)
		json_close(&o->j);
}

/* ------------------------------------------------------------ sections */

static void uuid_text(const __u8 *u, char *buf)
{
	uuid_unparse_lower(u, buf);
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
	out_open(o, "Options", "options", false);
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *opt = &bch_opt_table[i];

		if (!(opt->flags & OPT_FS))
			continue;
		if (opt->type == BCH_OPT_TARGET)
			bch_target_to_text(sb, opts.v[i], buf, sizeof(buf));
		else
			bch_opt_to_text(i, opts.v[i], buf, sizeof(buf));
		/* option names are snake_case already: label and key alike */
		if (o->json && (opt->type == BCH_OPT_UINT || opt->type == BCH_OPT_SIZE))
			out_u64(o, opt->name, opt->name, opts.v[i]);
		else if (o->json && opt->type == BCH_OPT_BOOL)
			out_bool(o, opt->name, opt->name, opts.v[i]);
		else
			out_str(o, opt->name, opt->name, buf);
	}
	out_close(o);
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

static void show_member(struct out *o, const struct bch_sb *sb, unsigned i)
{
	const struct bch_member *m = bch_sb_member(sb, i);
	uint64_t bucket_bytes = (uint64_t)m->bucket_size << BCH_SECTOR_SHIFT;
	char buf[64];

	snprintf(buf, sizeof(buf), "Device %u", i);
	out_open(o, buf, NULL, false);
	out_u64(o, "Index", "index", i);
	uuid_text(m->uuid, buf);
	out_str(o, "UUID", "uuid", buf);
	if (m->label && bch_sb_label_name(sb, m->label - 1, buf, sizeof(buf)))
		out_str(o, "Label", "label", buf);
	else if (o->json)
		json_null(&o->j, "label");
	else
		out_str(o, "Label", "label", "(none)");
	out_size(o, "Size", "size", m->nbuckets * bucket_bytes);
	out_size(o, "Bucket size", "bucket_size", bucket_bytes);
	out_u64(o, "Buckets", "buckets", m->nbuckets);
	out_u64(o, "First bucket", "first_bucket", m->first_bucket);
	out_u64(o, "Journal buckets", "journal_buckets", journal_buckets(sb, i));
	out_u64(o, "Durability", "durability", m->durability);
	out_str(o, "State", "state", m->state < BCH_MEMBER_STATE_NR
		? bch_member_state_names[m->state] : "unknown");
	out_bool(o, "Discard", "discard", m->discard);
	if (o->json) {
		json_open(&o->j, "data_allowed", true);
		for (unsigned t = 0; t < BCH_DATA_NR; t++)
			if (m->data_allowed & (1U << t))
				json_string(&o->j, NULL, data_type_name(t));
		json_close(&o->j);
	} else {
		buf[0] = 0;
		for (unsigned t = 0; t < BCH_DATA_NR; t++)
			if (m->data_allowed & (1U << t)) {
				if (buf[0])
					strcat(buf, ",");
				strcat(buf, data_type_name(t));
			}
		out_str(o, "Data allowed", "data_allowed", buf);
	}
	out_time(o, "Last mount", "last_mount", m->last_mount);
	out_close(o);
}

static void show_members(struct out *o, const struct bch_sb *sb)
{
	out_open(o, "Members", "members", true);
	for (unsigned i = 0; i < bch_sb_nr_members(sb); i++)
		if (bch_member_exists(bch_sb_member(sb, i)))
			show_member(o, sb, i);
	out_close(o);
}

static void show_replicas(struct out *o, const struct bch_sb *sb)
{
	struct bch_sb_field_replicas *r = bch_sb_get_replicas(sb);
	char buf[300];

	out_open(o, "Replicas", "replicas", true);
	if (r) {
		const __u8 *p = (const __u8 *)r->entries;
		const __u8 *end = (const __u8 *)&r->field + r->field.u64s * 8;

		while (p + sizeof(struct bch_replicas_entry) <= end) {
			const struct bch_replicas_entry *e = (const void *)p;

			if (!e->nr_devs || p + sizeof(*e) + e->nr_devs > end)
				break;
			if (o->json) {
				json_open(&o->j, NULL, false);
				json_string(&o->j, "data_type", data_type_name(e->data_type));
				json_u64(&o->j, "nr_required", e->nr_required);
				json_open(&o->j, "devices", true);
				for (unsigned i = 0; i < e->nr_devs; i++)
					json_u64(&o->j, NULL, e->devs[i]);
				json_close(&o->j);
				json_close(&o->j);
			} else {
				int n = snprintf(buf, sizeof(buf), "%s: %u/%u [",
						 data_type_name(e->data_type), e->nr_required, e->nr_devs);
				for (unsigned i = 0; i < e->nr_devs; i++)
					n += snprintf(buf + n, sizeof(buf) - n, "%s%u", i ? " " : "",
						      e->devs[i]);
				snprintf(buf + n, sizeof(buf) - n, "]");
				out_str(o, NULL, NULL, buf);
			}
			p += sizeof(*e) + e->nr_devs;
		}
	}
	out_close(o);
}

/* One entry of the clean record: a btree root (with its pointers) or another entry. */
static void show_clean_entry(struct out *o, const struct bch_jset_entry *e)
{
	const struct bch_btree_ptr *bp = NULL;
	unsigned nr = 0;
	char buf[160];

	if (e->type == BCH_JSET_ENTRY_btree_root && e->u64s >= BCH_BKEY_U64s) {
		const struct bch_bkey *k = (const void *)e->_data;
		if (k->type == BCH_BKEY_btree_ptr && k->u64s <= e->u64s &&
		    k->u64s * 8 >= sizeof(*k) + sizeof(struct bch_btree_ptr)) {
			bp = (const void *)k->_data;
			nr = (k->u64s * 8 - sizeof(*k) - sizeof(*bp)) / sizeof(bp->ptrs[0]);
			nr = nr < BCH_REPLICAS_MAX ? nr : BCH_REPLICAS_MAX;
		}
	}
	if (o->json) {
		json_open(&o->j, NULL, false);
		json_string(&o->j, "type", jset_entry_name(e->type));
		json_string(&o->j, "btree", btree_name(e->btree_id));
		json_u64(&o->j, "level", e->level);
		json_open(&o->j, "ptrs", true);
		for (unsigned i = 0; i < nr; i++) {
			json_open(&o->j, NULL, false);
			json_u64(&o->j, "dev", bp->ptrs[i].dev);
			json_u64(&o->j, "sector", bp->ptrs[i].offset);
			json_u64(&o->j, "gen", bp->ptrs[i].gen);
			json_close(&o->j);
		}
		json_close(&o->j);
		json_close(&o->j);
		return;
	}
	int n = snprintf(buf, sizeof(buf), "%s %s level %u",
			 jset_entry_name(e->type), btree_name(e->btree_id), e->level);
	for (unsigned i = 0; i < nr; i++)
		n += snprintf(buf + n, sizeof(buf) - n, " ptr %u:%llu gen %u", bp->ptrs[i].dev,
			      (unsigned long long)bp->ptrs[i].offset, bp->ptrs[i].gen);
	out_str(o, NULL, NULL, buf);
}

static void show_clean(struct out *o, const struct bch_sb *sb)
{
	struct bch_sb_field_clean *cl = bch_sb_get_clean(sb);
	bool clean = (sb->flags & BCH_SB_FLAG_CLEAN) && cl;

	out_open(o, "Clean", "clean", false);
	out_bool(o, "Clean shutdown", "clean_shutdown", clean);
	if (cl) {
		out_u64(o, "Journal seq", "journal_seq", cl->journal_seq);
		out_bool(o, "Alloc info current", "alloc_info_current",
			 clean && (cl->flags & BCH_CLEAN_ALLOC_CURRENT));
		out_open(o, "Roots", "roots", true);
		const __le64 *p = cl->entries;
		const __le64 *end = (const __le64 *)&cl->field + cl->field.u64s;

		while (p + 1 <= end) {
			const struct bch_jset_entry *e = (const void *)p;

			if (p + 1 + e->u64s > end)
				break;
			show_clean_entry(o, e);
			p += 1 + e->u64s;
		}
		out_close(o);
	}
	out_close(o);
}

static void show_copies(struct out *o, const struct bch_sb_read_report *r, bool layout)
{
	char buf[200], key[32];

	out_open(o, "Superblock copies", "superblock_copies", true);
	for (unsigned i = 0; i < r->nr; i++) {
		const struct bch_sb_copy_report *c = &r->copies[i];
		const char *why = c->msg[0] ? c->msg : bch_err_str(c->err);

		if (o->json) {
			json_open(&o->j, NULL, false);
			json_u64(&o->j, "sector", c->offset);
			json_bool(&o->j, "valid", !c->err);
			if (!c->err)
				json_u64(&o->j, "seq", c->seq);
			else
				json_string(&o->j, "error", why);
			json_bool(&o->j, "chosen", i == r->chosen);
			json_close(&o->j);
			continue;
		}
		snprintf(key, sizeof(key), "sector %" PRIu64, c->offset);
		if (!c->err)
			snprintf(buf, sizeof(buf), "valid, seq %" PRIu64 "%s", c->seq,
				 i == r->chosen ? " (used)" : "");
		else
			snprintf(buf, sizeof(buf), "BAD: %s", why);
		out_str(o, key, NULL, buf);
	}
	out_close(o);
	if (o->json)
		json_bool(&o->j, "layout_valid", !r->layout_err);
	else if (layout || r->layout_err)
		out_str(o, "Layout (sector 7)", NULL, r->layout_err
			? "BAD: damaged, backups found by probing" : "valid");
}

static void show_layout(struct out *o, const struct bch_sb *sb)
{
	out_open(o, "Layout", "layout", false);
	out_size(o, "Room per copy", "room_per_copy", (uint64_t)BCH_SECTOR_SIZE << sb->layout.sb_max_size_bits);
	out_open(o, "Copies at sector", "copies_at_sector", true);
	for (unsigned i = 0; i < sb->layout.nr_superblocks && i < BCH_SB_LAYOUT_MAX; i++)
		out_u64(o, NULL, NULL, sb->layout.sb_offset[i]);
	out_close(o);
	out_close(o);
}

/*
 * One device's superblock: in JSON the members of the object already open
 * (the top level for one device, an element of "superblocks" for several).
 */
static void show_sb(struct out *o, const char *path, const struct bch_sb *sb,
		    const struct bch_sb_read_report *r, bool layout)
{
	bool encrypted = sb->features & BCH_FEATURE_ENCRYPTION;
	char buf[64];

	out_str(o, "Device", "device", path);
	uuid_text(sb->user_uuid, buf);
	out_str(o, "External UUID", "uuid", buf);
	uuid_text(sb->uuid, buf);
	out_str(o, "Internal UUID", "internal_uuid", buf);
	snprintf(buf, sizeof(buf), "%.*s", BCH_SB_LABEL_SIZE, (const char *)sb->label);
	if (o->json && !buf[0])
		json_null(&o->j, "label");
	else
		out_str(o, "Label", "label", buf);
	out_u64(o, "Version", "format_version", sb->version);
	out_u64(o, "Oldest version", "format_version_min", sb->version_min);
	out_u64(o, "Device index", "device_index", sb->dev_idx);
	out_u64(o, "Devices", "nr_devices", sb->nr_devices);
	out_u64(o, "Sequence number", "seq", sb->seq);
	out_str(o, "Superblock checksum", "superblock_checksum", csum_name(sb->csum_type));
	out_time(o, "Created", "created", sb->time_base / 1000000000ULL);
	out_time(o, "Last write", "last_write", sb->write_time);
	out_size(o, "Block size", "block_size", (uint64_t)sb->block_size << BCH_SECTOR_SHIFT);
	out_size(o, "Btree node size", "btree_node_size", (uint64_t)sb->btree_node_size << BCH_SECTOR_SHIFT);
	/* only whether the crypt field is in use: its bytes are never printed */
	out_bool(o, "Encrypted", "encrypted", encrypted);
	const struct bch_sb_field_crypt *cf = encrypted ? bch_sb_crypt(sb) : NULL;
	if (cf) {
		if (bch_crypt_has_passphrase(cf))
			snprintf(buf, sizeof(buf), "scrypt n=2^%u r=%u p=%u", cf->kdf_n_log2, cf->kdf_r,
				 cf->kdf_p);
		else
			snprintf(buf, sizeof(buf), "none");
		out_str(o, "Key derivation", "key_derivation", buf);
	}
	/* the feature bits by name (bcachefs_format.h), in bit order */
	static const struct { uint64_t bit; const char *name; } feat[] = {
		{ BCH_FEATURE_ENCRYPTION, "encryption" }, { BCH_FEATURE_SNAPSHOTS, "snapshots" },
		{ BCH_FEATURE_INODE_FLAGS, "inode_flags" }, { BCH_FEATURE_REFLINK, "reflink" },
		{ BCH_FEATURE_INODE_EC, "inode_ec" }, { BCH_FEATURE_ERASURE_CODE, "erasure_code" },
	};
	char fbuf[128] = "";
	size_t fl = 0;
	if (o->json)
		json_open(&o->j, "features", true);
	for (size_t n = 0; n < sizeof(feat) / sizeof(feat[0]); n++) {
		if (!(sb->features & feat[n].bit))
			continue;
		if (o->json)
			json_string(&o->j, NULL, feat[n].name);
		fl += snprintf(fbuf + fl, sizeof(fbuf) - fl, "%s%s", fl ? "," : "", feat[n].name);
	}
	if (o->json)
		json_close(&o->j);
	else
		out_str(o, "Features", NULL, fl ? fbuf : "(none)");
	show_options(o, sb);
	show_members(o, sb);
	show_replicas(o, sb);
	show_clean(o, sb);
	if (layout)
		show_layout(o, sb);
	show_copies(o, r, layout);
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

/* Read the superblock of one device into *sb (malloc'd); 0 or the exit code (message printed). */
static int read_dev(const char *path, struct bch_sb **sb, struct bch_sb_read_report *report,
		    bool several)
{
	struct bch_blockdev *dev;

	*sb = NULL;
	int ret = bch_dev_open(path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &dev);
	if (ret) {
		cmd_err("show-super", "%s: %s", path, bch_err_str(ret));
		return EXIT_FAIL;
	}
	ret = bch_sb_read(dev, sb, report);
	bch_dev_close(dev);
	if (ret) {
		cmd_err("show-super", "%s: %s", path, bch_err_str(ret));
		for (unsigned i = 0; i < report->nr; i++)
			fprintf(stderr, "  copy at sector %" PRIu64 ": %s\n", report->copies[i].offset,
				report->copies[i].msg[0] ? report->copies[i].msg
							 : bch_err_str(report->copies[i].err));
		if (several && ret == -BCH_ERR_sb_not_found)
			fprintf(stderr, "  if it is a member, `bcachefs fsck -y` rewrites its copies "
				"from another member's\n");
		free(*sb);
		*sb = NULL;
		return EXIT_FAIL;
	}
	return 0;
}

/*
 * Every device is read before anything is printed, so that a device without
 * a valid superblock leaves stdout empty (--json: no half document).
 */
static int show_devs(char * const *devs, unsigned nr, bool json, bool layout)
{
	struct bch_sb **sbs = calloc(nr, sizeof(*sbs));
	struct bch_sb_read_report *reports = calloc(nr, sizeof(*reports));
	struct out o = { .json = json };
	int ret = 0;

	if (!sbs || !reports)
		abort();
	for (unsigned i = 0; i < nr && !ret; i++)
		ret = read_dev(devs[i], &sbs[i], &reports[i], nr > 1);
	if (ret)
		goto out;
	if (json) {
		/* one device: its superblock is the document; several: an array of them */
		json_begin(&o.j, stdout, true);
		if (nr > 1)
			json_open(&o.j, "superblocks", true);
	}
	for (unsigned i = 0; i < nr; i++) {
		if (!json && i)
			putchar('\n');
		if (!json || nr > 1)
			out_open(&o, NULL, NULL, false);
		show_sb(&o, devs[i], sbs[i], &reports[i], layout);
		if (!json || nr > 1)
			out_close(&o);
	}
	if (json)
		json_end(&o.j);
out:
	for (unsigned i = 0; i < nr; i++)
		free(sbs[i]);
	free(sbs);
	free(reports);
	return ret;
}

/* ------------------------------------------------------------- command */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs show-super [OPTION]... [-o degraded] DEVICE[:DEVICE...] | UUID=<uuid> | MOUNTPOINT\n"
"Print the superblock of a bcachefs device or image file (read-only).  Several\n"
"devices, UUID=<uuid> (block devices are scanned for its members) or the\n"
"mountpoint of a fusemount (its devices): each device's in turn.\n"
"\n"
"  -l, --layout   also print where the superblock copies live\n"
"  -o degraded    accepted as by the other commands: show-super reads each\n"
"                 device given on its own, so members missing never stop it\n"
"      --json     one JSON document (man bcachefs, JSON OUTPUT; several\n"
"                 devices: under \"superblocks\")\n"
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
	bool layout = false, json = false;
	struct bch_opts oo;
	int opt;

	memset(&oo, 0, sizeof(oo));
	while ((opt = getopt_long(argc, argv, "lo:h", longopts, NULL)) != -1)
		switch (opt) {
		case 'o':
			if (cmd_open_opts_parse("show-super", &oo, optarg))
				return EXIT_USAGE;
			break;
		case 'l':
			layout = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			return cmd_opt_err("show-super", argv, "lo:h");
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
	ret = show_devs(fs.devs, fs.nr, json, layout);
	cmd_fs_free(&fs);
	return ret;
}
