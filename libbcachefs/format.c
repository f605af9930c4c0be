// SPDX-License-Identifier: GPL-2.0
/*
 * format.c - create a filesystem: choose geometry, build the superblock,
 * wipe old signatures, write every superblock copy, then (unless asked not
 * to) open the new filesystem and create its empty btrees.
 *
 * Invariant: nothing is written until every argument and every device has
 * been checked (phase 1, check_devices/build_sb); then devices are opened
 * for writing (phase 2).
 *
 * Geometry per device (sectors):
 *   [0, first_bucket * bucket)   sector 7 layout, copy 0 at 8, copy 1 at 8 + max
 *   [first_bucket, nbuckets)     buckets; the journal takes the first few
 *   [nbuckets * bucket, end)     room for the last superblock copy
 */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>
#include <uuid/uuid.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "checksum.h"
#include "crypt.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "super.h"

#define BCH_JOURNAL_MAX_BYTES	(512ULL << 20)
/* a single device this large gets two metadata copies (metadata_copies_default) */
#define BCH_METADATA_COPIES_MIN_BYTES	(1ULL << 30)

struct dev_plan {
	struct stat	st;
	bool		exists;
	bool		is_blockdev;
	uint64_t	size;		/* bytes the filesystem will use */
	uint64_t	bucket;		/* bytes */
	uint64_t	nbuckets;
	unsigned	first_bucket;
	unsigned	journal_nr;
	unsigned	logical_block;
	unsigned	label_idx;	/* +1; 0 none */
	uint64_t	last_sb;	/* sector of the end copy */
};


static uint64_t rounddown_pow2(uint64_t v)
{
	return v ? 1ULL << (63 - __builtin_clzll(v)) : 0;
}

/*
 * Geometry that small nodes or buckets cannot work with, found before
 * anything is written.  The engine's largest transaction is one write of
 * WRITE_BYTES of file data (fs_ops_data.c writes in 1 MiB chunks): its extents
 * split at bucket boundaries and at encoded_extent_max (one more for a write
 * that starts inside a bucket), each a key of EXTENT_U64S(r) words with r
 * pointers, plus the inode.  That transaction must fit
 *   (a) half a btree node: bch_trans_commit() refuses bigger ones; and
 *   (b) one journal entry: at most half a bucket (1 MiB at most), of which a
 *       quarter is kept for the btree's internal updates and the btree roots
 *       ride along in every entry;
 * and (c) a journal bucket needs at least 4 blocks: an entry takes whole
 * blocks, and each bucket keeps blocks for the header-only entry that
 * advances last_seq when the ring is full (with 2 blocks the ring fills at
 * format: "journal full: nothing left to reclaim").
 * Measured (4 KiB blocks, 1 replica): 4k nodes need 64k buckets, 8k and 16k
 * nodes 32k buckets; more replicas need more.
 */
#define WRITE_BYTES		(1ULL << 20)
#define JOURNAL_ENTRY_BYTES_MAX	(1ULL << 20)
#define MIN_JOURNAL_BLOCKS	4
/* a transaction key: one word of header, the key, an extent's crc and r pointers */
#define EXTENT_U64S(r)		(1 + (sizeof(struct bch_bkey) + sizeof(struct bch_extent) + \
				      (r) * sizeof(struct bch_extent_ptr)) / 8)
#define INODE_U64S		(1 + (sizeof(struct bch_bkey) + sizeof(struct bch_inode)) / 8 + 11)
#define ROOT_U64S(r)		(1 + (sizeof(struct bch_bkey) + sizeof(struct bch_btree_ptr) + \
				      (r) * sizeof(struct bch_extent_ptr)) / 8)

/* The words of the biggest write transaction with these buckets. */
static uint64_t write_trans_u64s(uint64_t bucket, const struct bch_opts *opts)
{
	uint64_t ext = opts->v[Opt_encoded_extent_max];
	uint64_t r = opts->v[Opt_data_replicas] ? opts->v[Opt_data_replicas] : 1;

	if (!ext || ext > bucket)
		ext = bucket;
	return (WRITE_BYTES / ext + 1) * EXTENT_U64S(r) + INODE_U64S;
}

/* 0 if buckets of this size work with the options; else what does not fit, in why */
static int check_bucket(uint64_t bucket, const struct bch_opts *opts, char *why, size_t len)
{
	uint64_t block = opts->v[Opt_block_size], node = opts->v[Opt_btree_node_size];
	uint64_t mr = opts->v[Opt_metadata_replicas] ? opts->v[Opt_metadata_replicas] : 1;
	uint64_t t = write_trans_u64s(bucket, opts);
	uint64_t node_max = (node - sizeof(struct bch_btree_node)) / 8 / 2;
	uint64_t entry = bucket / 2 < JOURNAL_ENTRY_BYTES_MAX ? bucket / 2 : JOURNAL_ENTRY_BYTES_MAX;
	uint64_t jmax = (entry - sizeof(struct bch_jset)) / 8;
	uint64_t jfree = jmax - jmax / 4 - BCH_BTREE_ID_NR * ROOT_U64S(mr);

	if (bucket < MIN_JOURNAL_BLOCKS * block) {
		snprintf(why, len, "a journal bucket needs at least %u blocks", MIN_JOURNAL_BLOCKS);
		return -1;
	}
	if (t > node_max) {
		snprintf(why, len, "a 1 MiB write (%" PRIu64 " words of keys) must fit half a "
			 "btree node (%" PRIu64 " words)", t, node_max);
		return -1;
	}
	if (entry <= sizeof(struct bch_jset) + 8 * BCH_BTREE_ID_NR * ROOT_U64S(mr) ||
	    jmax < jmax / 4 + BCH_BTREE_ID_NR * ROOT_U64S(mr) || t > jfree) {
		snprintf(why, len, "a 1 MiB write (%" PRIu64 " words of keys) must fit one journal "
			 "entry (half a bucket)", t);
		return -1;
	}
	return 0;
}

/*
 * Every copy of a piece of data or metadata goes to a different device, and
 * a copy on a device of durability 0 (a cache) does not count: N replicas
 * need N devices of durability 1 or more.  Checked before anything is
 * written, since a filesystem formatted without them cannot be opened.
 */
static int check_replicas(const struct bch_format_dev *devs, unsigned nr,
			  const struct bch_opts *opts, char *err, size_t errlen)
{
	static const struct { unsigned opt; const char *name; } want[] = {
		{ Opt_metadata_replicas,	"metadata_replicas" },
		{ Opt_data_replicas,		"data_replicas" },
	};
	unsigned durable = 0;

	for (unsigned i = 0; i < nr; i++)
		durable += devs[i].durability > 0;
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint64_t r = opts->v[want[i].opt];
		/* metadata copies on one device: two per device at most (alloc.h) */
		if (want[i].opt == Opt_metadata_replicas) {
			if (r <= 2 * durable)
				continue;
			return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
				    "metadata_replicas=%" PRIu64 " needs %" PRIu64 " devices of durability 1 "
				    "or more, two copies per device at most (have %u%s)", r, (r + 1) / 2,
				    durable, durable < nr ? ", not counting durability 0" : "");
		}
		if (r > durable)
			return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
				    "%s=%" PRIu64 " needs %" PRIu64 " devices of durability 1 or "
				    "more, one per copy (have %u%s)", want[i].name, r, r, durable,
				    durable < nr ? ", not counting durability 0" : "");
	}
	return 0;
}

/* The smallest bucket size that works with the options; 0 if none up to 2 MiB does. */
static uint64_t min_bucket_size(const struct bch_opts *opts)
{
	char why[160];

	for (uint64_t b = opts->v[Opt_btree_node_size]; b && b <= 2 * MiB; b *= 2)
		if (!check_bucket(b, opts, why, sizeof(why)))
			return b;
	return 0;
}

uint64_t bch_pick_bucket_size(uint64_t dev_size, uint64_t btree_node_size)
{
	uint64_t b = rounddown_pow2(dev_size >> 15);	/* aim for ~32k buckets */

	if (b > 2 * MiB)
		b = 2 * MiB;
	if (b < btree_node_size)
		b = btree_node_size;
	return b;
}

/*
 * The smallest image.  Per inode: its key (~200 bytes with the times and
 * fields), a dirent (~40 bytes and the name) and an extent key per 128k of
 * data (~80 bytes); btree nodes are kept about half full after splits, so
 * metadata counts twice, and twice again with two metadata copies (the
 * estimate passes BCH_METADATA_COPIES_MIN_BYTES).  The journal is 1/32 of
 * the buckets (1/128 for the smallest image), the reserve for btree nodes 1/32.
 */
#define MIN_INODE_BYTES		240
#define MIN_EXTENT_BYTES	80
#define MIN_EXTENT_SPAN		(128ULL << 10)

uint64_t bch_format_min_estimate(uint64_t data_bytes, uint64_t nr_inodes, uint64_t name_bytes,
				 uint64_t headroom, const struct bch_opts *opts)
{
	uint64_t meta = nr_inodes * MIN_INODE_BYTES + name_bytes +
			(data_bytes / MIN_EXTENT_SPAN + nr_inodes) * MIN_EXTENT_BYTES;
	uint64_t node = opts->v[Opt_btree_node_size];

	meta = 2 * meta + BCH_BTREE_ID_NR * 2 * node;
	uint64_t est = data_bytes + meta + headroom;
	if (est + meta >= BCH_METADATA_COPIES_MIN_BYTES && !bch_opt_is_set(opts, Opt_metadata_replicas))
		est += meta;
	return est + est / 16 + (4ULL << 20);	/* journal, reserve, superblocks */
}

/*
 * Every btree has a node however little it holds, and a member needs 64
 * buckets past its journal, whose size follows the node's: below 64 MiB a
 * node of 1/256 of the image (32k at 12 MiB, measured smallest for a 6 MiB
 * tree of 800 headers: 9.8 MB against 10.7 MB with 128k nodes), 16k at least.
 */
uint64_t bch_format_min_node_size(uint64_t estimate, uint64_t dflt, uint64_t block)
{
	uint64_t n = rounddown_pow2(estimate / 256);

	if (n < 16384)
		n = 16384;
	if (n < block)
		n = block;
	return n < dflt ? n : dflt;
}

uint64_t bch_format_min_room(uint64_t estimate)
{
	return 2 * estimate + (64ULL << 20);
}

/*
 * Deterministic UUIDs for reproducible images: hash of the user UUID and a
 * tag.  Cannot fail: bch_format() loaded libxxhash before building the sb.
 */
static void derive_uuid(uint8_t out[16], const uint8_t seed[16], uint64_t tag)
{
	uint8_t buf[24];
	uint64_t a, b;

	memcpy(buf, seed, 16);
	memcpy(buf + 16, &tag, 8);
	(void)bch_xxhash64(buf, sizeof(buf), 1, &a);
	(void)bch_xxhash64(buf, sizeof(buf), 2, &b);
	memcpy(out, &a, 8);
	memcpy(out + 8, &b, 8);
	out[6] = (out[6] & 0x0f) | 0x40;	/* look like a v4 UUID */
	out[8] = (out[8] & 0x3f) | 0x80;
}

static bool same_device(const struct dev_plan *a, const char *pa,
			const struct dev_plan *b, const char *pb)
{
	if (a->exists && b->exists) {
		if (a->is_blockdev || b->is_blockdev)
			return a->is_blockdev && b->is_blockdev && a->st.st_rdev == b->st.st_rdev;
		return a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino;
	}
	if (a->exists != b->exists)
		return false;
	/* neither exists yet: compare absolute paths of their parents + names */
	char da[PATH_MAX], db[PATH_MAX], ca[PATH_MAX], cb[PATH_MAX];
	snprintf(ca, sizeof(ca), "%s", pa);
	snprintf(cb, sizeof(cb), "%s", pb);
	if (!realpath(dirname(ca), da) || !realpath(dirname(cb), db))
		return !strcmp(pa, pb);
	snprintf(ca, sizeof(ca), "%s", pa);
	snprintf(cb, sizeof(cb), "%s", pb);
	return !strcmp(da, db) && !strcmp(basename(ca), basename(cb));
}

static int check_label(const char *l, char *err, size_t errlen)
{
	size_t n = strlen(l);

	if (!n || n >= BCH_MEMBER_LABEL_SIZE)
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "label '%s': must be 1..%u characters", l, BCH_MEMBER_LABEL_SIZE - 1);
	if (l[0] == '.' || l[n - 1] == '.' || strstr(l, ".."))
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "label '%s': empty component between dots", l);
	for (size_t i = 0; i < n; i++)
		if (!(l[i] == '.' || l[i] == '_' || l[i] == '-' ||
		      (l[i] >= 'a' && l[i] <= 'z') || (l[i] >= 'A' && l[i] <= 'Z') ||
		      (l[i] >= '0' && l[i] <= '9')))
			return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
				    "label '%s': only letters, digits, '.', '_' and '-'", l);
	return 0;
}

/* Label list: "a.b" also creates "a", so a target can name a whole group. */
struct label_set {
	char		names[BCH_SB_MEMBERS_MAX * 4][BCH_MEMBER_LABEL_SIZE];
	unsigned	nr;
};

static unsigned label_add(struct label_set *s, const char *name)
{
	for (const char *dot = strchr(name, '.'); dot; dot = strchr(dot + 1, '.')) {
		char parent[BCH_MEMBER_LABEL_SIZE];
		snprintf(parent, sizeof(parent), "%.*s", (int)(dot - name), name);
		label_add(s, parent);
	}
	for (unsigned i = 0; i < s->nr; i++)
		if (!strcmp(s->names[i], name))
			return i + 1;
	snprintf(s->names[s->nr], BCH_MEMBER_LABEL_SIZE, "%s", name);
	return ++s->nr;
}

static int plan_device(struct bch_format_dev *d, struct dev_plan *p,
		       const struct bch_opts *opts, char *err, size_t errlen)
{
	uint64_t block = opts->v[Opt_block_size];
	uint64_t node = opts->v[Opt_btree_node_size];
	char a[32], b[32];

	memset(p, 0, sizeof(*p));
	p->logical_block = 512;
	if (!stat(d->path, &p->st)) {
		p->exists = true;
		p->is_blockdev = S_ISBLK(p->st.st_mode);
		if (!p->is_blockdev && !S_ISREG(p->st.st_mode))
			return bch_errf(err, errlen, -EINVAL,
				    "%s: not a block device or regular file", d->path);
	} else if (errno != ENOENT || !d->size) {
		int e = errno;
		return bch_errf(err, errlen, -e, "%s: %s%s", d->path, strerror(e),
			    e == ENOENT ? " (give --fs-size to create an image file)" : "");
	}

	if (p->is_blockdev) {
		struct bch_blockdev *bd;
		int ret = bch_dev_open(d->path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &bd);
		if (ret)
			return bch_errf(err, errlen, ret, "%s: %s", d->path, bch_err_str(ret));
		p->size = bch_dev_size(bd);
		p->logical_block = bch_dev_logical_block_size(bd);
		bch_dev_close(bd);
		if (d->size > p->size) {
			bch_human_size(d->size, a, sizeof(a));
			bch_human_size(p->size, b, sizeof(b));
			return bch_errf(err, errlen, -BCH_ERR_device_too_small,
				    "%s: --fs-size %s is larger than the device (%s)", d->path, a, b);
		}
	} else {
		p->size = p->exists ? (uint64_t)p->st.st_size : 0;
	}
	if (d->size)
		p->size = d->size;

	if (block < p->logical_block)
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "%s: block size %" PRIu64 " is below the device's logical block size %u",
			    d->path, block, p->logical_block);

	uint64_t plan = d->plan_size ? d->plan_size : p->size;

	p->bucket = d->bucket_size ? d->bucket_size : bch_pick_bucket_size(plan, node);
	if (p->bucket < node || p->bucket < block)
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "%s: bucket size %" PRIu64 " is smaller than the btree node size %" PRIu64,
			    d->path, p->bucket, node);
	uint64_t min_bucket = min_bucket_size(opts);
	if (!min_bucket) {
		bch_human_size(node, a, sizeof(a));
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "btree node size %s is too small for these options (no bucket size up to "
			    "2M gives a 1 MiB write room in half a node); use a larger --btree-node-size",
			    a);
	}
	if (!d->bucket_size && p->bucket < min_bucket)
		p->bucket = min_bucket;		/* small nodes: bigger buckets */
	char why[160];
	if (check_bucket(p->bucket, opts, why, sizeof(why))) {
		bch_human_size(p->bucket, a, sizeof(a));
		bch_human_size(min_bucket, b, sizeof(b));
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "%s: bucket size %s is too small for these options: %s; use "
			    "--bucket-size=%s or more", d->path, a, why, b);
	}

	uint64_t sectors = p->size >> BCH_SECTOR_SHIFT;
	uint64_t bucket_sectors = p->bucket >> BCH_SECTOR_SHIFT;
	uint64_t sb_area = 1ULL << BCH_SB_MAX_SIZE_BITS;
	uint64_t front = BCH_SB_SECTOR + 2 * sb_area;

	p->first_bucket = (front + bucket_sectors - 1) / bucket_sectors;
	if (sectors > front + sb_area) {
		p->last_sb = (sectors - sb_area) & ~7ULL;
		p->nbuckets = p->last_sb / bucket_sectors;
	}
	if (p->nbuckets < p->first_bucket + BCH_MIN_NR_BUCKETS) {
		bch_human_size(p->size, a, sizeof(a));
		bch_human_size((p->first_bucket + BCH_MIN_NR_BUCKETS) * p->bucket +
			       (sb_area << BCH_SECTOR_SHIFT), b, sizeof(b));
		return bch_errf(err, errlen, -BCH_ERR_device_too_small,
			    "%s: device too small (%s); with %" PRIu64 "k buckets it needs at least %s",
			    d->path, a, p->bucket >> 10, b);
	}
	if (p->nbuckets > UINT32_MAX)
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "%s: too many buckets; use a larger --bucket-size", d->path);

	uint64_t usable = p->nbuckets - p->first_bucket;
	if (d->plan_size && plan / p->bucket < p->nbuckets)	/* the journal of the shrunk image */
		usable = plan / p->bucket > p->first_bucket ? plan / p->bucket - p->first_bucket : 0;
	/* the smallest image: 1/128 (an image is built once and read mostly) */
	uint64_t j = d->plan_size ? usable >> 7 : usable >> 5;
	if (j > BCH_JOURNAL_MAX_BYTES / p->bucket)
		j = BCH_JOURNAL_MAX_BYTES / p->bucket;
	if (j < 4)
		j = 4;
	p->journal_nr = j;
	if (d->durability > BCH_REPLICAS_MAX)
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "%s: durability %u out of range (0..%u)", d->path, d->durability,
			    BCH_REPLICAS_MAX);
	return 0;
}

static int build_sb(struct bch_format_dev *devs, unsigned nr, struct dev_plan *plans,
		    const struct bch_opts *opts, const char * const *target_names,
		    const struct bch_format_args *args, struct bch_sb **ret, size_t *bytes,
		    char *err, size_t errlen)
{
	static struct label_set labels;	/* large; format is not reentrant-critical */
	size_t buf_bytes = BCH_SB_BUF_BYTES(BCH_SB_MAX_SIZE_BITS);
	struct bch_sb *sb = calloc(1, buf_bytes);
	struct bch_sb_field *f;
	int ret2 = 0;

	if (!sb)
		return -ENOMEM;
	memset(&labels, 0, sizeof(labels));

	sb->magic = BCH_SB_MAGIC;
	sb->version = BCH_VERSION_CURRENT;
	sb->version_min = BCH_VERSION_CURRENT;	/* v1 readers misread journal stubs */
	sb->csum_type = opts->v[Opt_metadata_checksum] ? opts->v[Opt_metadata_checksum]
						       : BCH_CSUM_crc32c;
	sb->nr_devices = nr;
	sb->seq = 1;
	sb->time_base = args->time_ns;
	sb->write_time = args->time_ns / 1000000000ULL;
	if (args->fs_label)
		memcpy(sb->label, args->fs_label,
		       strnlen(args->fs_label, sizeof(sb->label)));

	if (args->have_uuid)
		memcpy(sb->user_uuid, args->user_uuid, 16);
	else
		uuid_generate(sb->user_uuid);
	if (args->have_uuid && getenv("SOURCE_DATE_EPOCH"))
		derive_uuid(sb->uuid, sb->user_uuid, 0);
	else
		uuid_generate(sb->uuid);
	/* the name hash key: secret unless the image is to be reproducible */
	if (args->have_uuid && getenv("SOURCE_DATE_EPOCH"))
		derive_uuid(sb->str_hash_key, sb->user_uuid, 0x100);
	else
		uuid_generate_random(sb->str_hash_key);

	sb->layout.magic = BCH_LAYOUT_MAGIC;
	sb->layout.sb_max_size_bits = BCH_SB_MAX_SIZE_BITS;
	/* offsets differ per device (end copy); set per device when writing */

	bch_opts_to_sb(opts, sb);

	/* members + labels */
	for (unsigned i = 0; i < nr; i++) {
		if (devs[i].label) {
			int r = check_label(devs[i].label, err, errlen);
			if (r) {
				free(sb);
				return r;
			}
			plans[i].label_idx = label_add(&labels, devs[i].label);
		}
	}
	if (labels.nr) {
		f = bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_labels,
			(sizeof(*f) + labels.nr * sizeof(struct bch_label)) / 8, &ret2);
		if (!f)
			goto too_big;
		struct bch_sb_field_labels *l = (void *)f;
		for (unsigned i = 0; i < labels.nr; i++)
			memcpy(l->entries[i].name, labels.names[i], BCH_MEMBER_LABEL_SIZE);
	}

	f = bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_members,
				(sizeof(*f) + nr * sizeof(struct bch_member)) / 8, &ret2);
	if (!f)
		goto too_big;
	for (unsigned i = 0; i < nr; i++) {
		struct bch_member *m = &((struct bch_sb_field_members *)f)->members[i];

		if (args->have_uuid && getenv("SOURCE_DATE_EPOCH"))
			derive_uuid(m->uuid, sb->user_uuid, i + 1);
		else
			uuid_generate(m->uuid);
		m->nbuckets = plans[i].nbuckets;
		m->bucket_size = plans[i].bucket >> BCH_SECTOR_SHIFT;
		m->first_bucket = plans[i].first_bucket;
		m->state = BCH_MEMBER_STATE_rw;
		m->durability = devs[i].durability;
		m->data_allowed = (1U << BCH_DATA_journal) | (1U << BCH_DATA_btree) |
				  (1U << BCH_DATA_user) | (1U << BCH_DATA_cached);
		m->label = plans[i].label_idx;
		m->discard = devs[i].discard;
	}

	f = bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_journal,
				(sizeof(*f) + nr * sizeof(struct bch_journal_run)) / 8, &ret2);
	if (!f)
		goto too_big;
	for (unsigned i = 0; i < nr; i++) {
		struct bch_journal_run *r = &((struct bch_sb_field_journal *)f)->runs[i];
		r->dev = i;
		r->nr = plans[i].journal_nr;
		r->start = plans[i].first_bucket;
	}

	/* replicas: the journal lives on every device, one copy each */
	f = bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_replicas,
				(sizeof(*f) + nr * 5 + 4 + 7) / 8, &ret2);
	if (!f)
		goto too_big;
	uint8_t *p = (uint8_t *)(f + 1);
	for (unsigned i = 0; i < nr; i++) {
		struct bch_replicas_entry *e = (void *)p;
		e->data_type = BCH_DATA_journal;
		e->nr_devs = 1;
		e->nr_required = 1;
		e->devs[0] = i;
		p += sizeof(*e) + 1;
	}

	/* encryption: a random key, wrapped by the passphrase (crypt.h) */
	if (opts->v[Opt_encrypted]) {
		uint8_t key[BCH_KEY_BYTES];
		struct bch_sb_field_crypt *cf = (void *)bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_crypt,
						sizeof(struct bch_sb_field_crypt) / 8, &ret2);
		if (!cf)
			goto too_big;
		if (sodium_init() < 0) {
			free(sb);
			return bch_errf(err, errlen, -ENOMEM, "libsodium failed to initialise");
		}
		randombytes_buf(key, sizeof(key));
		int r = 0;
		if (args->passphrase && args->wrap_later)
			bch_crypt_wrap_prepare(sb, cf, key);	/* its scrypt the caller's */
		else
			r = bch_crypt_wrap(sb, cf, key, args->passphrase,
					   args->passphrase ? strlen(args->passphrase) : 0);
		cf->nonce_reserved = 1;
		sb->features |= BCH_FEATURE_ENCRYPTION;
		sb->flags |= BCH_SB_FLAG_ENCRYPTED;
		/* the btrees format creates next are encrypted with it */
		if (!r)
			r = bch_crypt_key_remember(sb->uuid, key);
		sodium_memzero(key, sizeof(key));
		if (r) {
			free(sb);
			return bch_errf(err, errlen, r, "setting up the encryption key: %s", bch_err_str(r));
		}
	}

	/* targets, now that labels exist */
	for (unsigned id = 0; target_names && id < BCH_OPT_NR; id++) {
		const struct bch_option *o = &bch_opt_table[id];
		uint64_t t = 0;

		if (!target_names[id] || o->type != BCH_OPT_TARGET)
			continue;
		for (unsigned i = 0; i < nr; i++)
			if (!strcmp(target_names[id], devs[i].path))
				t = BCH_TARGET_DEV_START + i;
		if (!t && bch_target_parse(sb, target_names[id], &t)) {
			free(sb);
			return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
				    "%s: '%s' is neither a label nor a device being formatted",
				    o->name, target_names[id]);
		}
		sb->opts[o->sb_slot] = t;
	}

	*ret = sb;
	*bytes = buf_bytes;
	return 0;
too_big:
	free(sb);
	return bch_errf(err, errlen, ret2 ? ret2 : -BCH_ERR_sb_too_big,
		    "superblock too big for %u devices", nr);
}

static int write_zeroes(struct bch_blockdev *bd, uint64_t off, uint64_t len)
{
	static const size_t chunk = 1 << 20;
	void *z = calloc(1, chunk);
	int ret = 0;

	if (!z)
		return -ENOMEM;
	while (len && !ret) {
		size_t n = len < chunk ? len : chunk;
		ret = bch_dev_write(bd, z, n, off);
		off += n;
		len -= n;
	}
	free(z);
	return ret;
}

/*
 * Empty journal buckets: whatever was on the device before must not be read
 * as entries (journal.h: a bucket with an empty head is not read).  The head
 * block of each bucket is what the journal reads first (journal.c).
 */
static int wipe_journal_heads(struct bch_blockdev *bd, const struct dev_plan *p, const struct bch_sb *sb)
{
	size_t head = (size_t)sb->block_size << BCH_SECTOR_SHIFT;
	void *z = bch_dev_alloc_buf(head);
	struct bch_io_vec *v = calloc(p->journal_nr ? p->journal_nr : 1, sizeof(*v));
	int r = 0;

	if (!z || !v)
		r = -ENOMEM;
	for (unsigned i = 0; !r && i < p->journal_nr; i++)
		v[i] = (struct bch_io_vec) {
			.buf = z, .len = head, .offset = (p->first_bucket + i) * p->bucket,
		};
	if (!r)
		r = bch_dev_write_batch(bd, v, p->journal_nr);
	free(v);
	free(z);
	return r;
}

/*
 * Write one device's superblock areas.  wipe_journal: also empty its journal
 * buckets' heads (a member added to a filesystem), and with reproducible
 * the whole journal (a reproducible format, whose internal UUID an earlier
 * filesystem on the device may have had: its entries would be taken for the
 * new one's).
 */
static int write_device(struct bch_format_dev *d, struct dev_plan *p,
			struct bch_sb *sb, unsigned idx, bool wipe_journal, bool reproducible,
			char *err, size_t errlen)
{
	struct bch_blockdev *bd;
	uint64_t sb_area = 1ULL << BCH_SB_MAX_SIZE_BITS;
	int ret;

	ret = bch_dev_open(d->path, BCH_DEV_CREATE, &bd);
	if (ret)
		return bch_errf(err, errlen, ret, "%s: %s", d->path, bch_err_str(ret));

	if (!p->is_blockdev && bch_dev_size(bd) < p->size &&
	    (ret = bch_dev_set_size(bd, p->size)))
		goto out;

	/* Wipe the superblock areas: no stale signature of another filesystem survives. */
	uint64_t front = (uint64_t)p->first_bucket * (p->bucket >> BCH_SECTOR_SHIFT);
	if ((ret = write_zeroes(bd, 0, front << BCH_SECTOR_SHIFT)) ||
	    (ret = write_zeroes(bd, p->last_sb << BCH_SECTOR_SHIFT, sb_area << BCH_SECTOR_SHIFT)))
		goto out;
	if (d->discard)
		bch_dev_discard(bd, front << BCH_SECTOR_SHIFT,
				(p->nbuckets * p->bucket) - (front << BCH_SECTOR_SHIFT));

	sb->layout.nr_superblocks = 3;
	sb->layout.sb_offset[0] = BCH_SB_SECTOR;
	sb->layout.sb_offset[1] = BCH_SB_SECTOR + sb_area;
	sb->layout.sb_offset[2] = p->last_sb;
	sb->layout.sb_offset[3] = 0;
	/*
	 * The emptied journal durable before the superblock that names it.  A
	 * reproducible format empties it whole: entries of an earlier
	 * filesystem with the same UUID may follow the new ones in a bucket.
	 */
	uint64_t jstart = (uint64_t)p->first_bucket * p->bucket, jlen = (uint64_t)p->journal_nr * p->bucket;
	/*
	 * In an image file the whole bucket area goes (a hole): the earlier
	 * filesystem's nodes share the new one's derived node seqs at the same
	 * places, and its appends would be read as the new nodes' bsets.
	 */
	if (reproducible && (p->is_blockdev || bch_dev_punch(bd, jstart, p->nbuckets * p->bucket - jstart)) &&
	    bch_dev_punch(bd, jstart, jlen) && (ret = write_zeroes(bd, jstart, jlen)))
		goto out;
	if (wipe_journal && ((ret = wipe_journal_heads(bd, p, sb)) || (ret = bch_dev_flush(bd))))
		goto out;
	ret = bch_sb_write_dev(bd, sb, idx, &sb->layout);
out:
	if (ret)
		bch_errf(err, errlen, ret, "%s: writing: %s", d->path, bch_err_str(ret));
	bch_dev_close(bd);
	return ret;
}

/*
 * The default for metadata_replicas when it is not given: two copies (in
 * different places of the device, as btrfs's DUP) on a filesystem of one
 * device of BCH_METADATA_COPIES_MIN_BYTES or more, where a damaged block
 * would otherwise cost every file under it; one on smaller images (built to
 * be small: the copies double the space of the btree nodes) and with more
 * devices (replication is chosen with --replicas there).
 */
static bool metadata_copies_default(const struct bch_format_dev *devs, const struct dev_plan *plans,
				    unsigned nr, const struct bch_opts *opts)
{
	uint64_t size = devs[0].plan_size ? devs[0].plan_size : plans[0].size;

	return nr == 1 && !bch_opt_is_set(opts, Opt_metadata_replicas) && devs[0].durability > 0 &&
	       size >= BCH_METADATA_COPIES_MIN_BYTES;
}

int bch_format(struct bch_format_dev *devs, unsigned nr,
	       const struct bch_opts *opts, const char * const *target_names,
	       const struct bch_format_args *in_args, char *err, size_t errlen)
{
	struct bch_format_args args = *in_args;
	struct bch_opts defaulted = *opts;	/* with the metadata copies default */
	struct dev_plan *plans;
	struct bch_sb *sb = NULL;
	size_t sb_bytes;
	int ret = 0;

	if (!nr || nr > BCH_SB_MEMBERS_MAX)
		return bch_errf(err, errlen, -EINVAL, "need 1..%u devices, got %u",
			    BCH_SB_MEMBERS_MAX, nr);
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		if (bch_opt_table[i].flags & OPT_DEVICE)
			continue;
		if ((ret = bch_opt_validate(i, opts->v[i], err, errlen)))
			return ret;
	}
	if (opts->v[Opt_btree_node_size] < opts->v[Opt_block_size])
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "btree_node_size must be at least block_size");
	if (opts->v[Opt_metadata_replicas_required] > opts->v[Opt_metadata_replicas] ||
	    opts->v[Opt_data_replicas_required] > opts->v[Opt_data_replicas])
		return bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			    "replicas_required cannot exceed replicas");
	if (opts->v[Opt_encrypted] && args.passphrase && strlen(args.passphrase) > BCH_PASSPHRASE_MAX)
		return bch_errf(err, errlen, -EINVAL, "passphrase longer than %u bytes", BCH_PASSPHRASE_MAX);
	if (opts->v[Opt_encrypted] && args.passphrase && !*args.passphrase)
		return bch_errf(err, errlen, -EINVAL, "empty passphrase");

	if (!args.time_ns) {
		const char *sde = getenv("SOURCE_DATE_EPOCH");
		if (sde && *sde)
			args.time_ns = strtoull(sde, NULL, 10) * 1000000000ULL;
		else {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			args.time_ns = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
		}
	}

	plans = calloc(nr, sizeof(*plans));
	if (!plans)
		return -ENOMEM;

	/* Phase 1: check everything, write nothing. */
	for (unsigned i = 0; i < nr && !ret; i++)
		ret = plan_device(&devs[i], &plans[i], opts, err, errlen);
	if (!ret && metadata_copies_default(devs, plans, nr, opts)) {
		bch_opt_set(&defaulted, Opt_metadata_replicas, 2);
		opts = &defaulted;
		ret = plan_device(&devs[0], &plans[0], opts, err, errlen);
	}
	for (unsigned i = 0; i < nr && !ret; i++)
		for (unsigned j = 0; j < i && !ret; j++)
			if (same_device(&plans[i], devs[i].path, &plans[j], devs[j].path))
				ret = bch_errf(err, errlen, -EINVAL, "%s and %s are the same device",
					   devs[j].path, devs[i].path);
	if (!ret)
		ret = check_replicas(devs, nr, opts, err, errlen);
	if (!ret && opts->v[Opt_metadata_replicas_required] > nr)
		ret = bch_errf(err, errlen, -BCH_ERR_opt_invalid,
			   "metadata_replicas_required=%llu needs that many devices (have %u)",
			   (unsigned long long)opts->v[Opt_metadata_replicas_required], nr);
	/* node seqs and reproducible UUIDs are xxhash64s: no writing without it */
	if (!ret && (ret = bch_csum_type_load(BCH_CSUM_xxhash64)))
		bch_errf(err, errlen, ret, "%s", bch_err_str(ret));
	if (!ret)
		ret = build_sb(devs, nr, plans, opts, target_names, &args, &sb, &sb_bytes,
			       err, errlen);

	/* Phase 2: write. */
	bool reproducible = args.have_uuid && getenv("SOURCE_DATE_EPOCH");
	for (unsigned i = 0; i < nr && !ret; i++)
		ret = write_device(&devs[i], &plans[i], sb, i, reproducible, reproducible, err, errlen);

	/* Phase 3: an empty root node for every btree, closed clean. */
	if (!ret && !args.no_btrees) {
		char **paths = calloc(nr, sizeof(*paths));
		if (!paths) {
			ret = -ENOMEM;
		} else {
			for (unsigned i = 0; i < nr; i++)
				paths[i] = (char *)devs[i].path;
			ret = bch_fs_init_empty(paths, nr, err, errlen);
			free(paths);
		}
	}

	free(sb);
	free(plans);
	return ret;
}

/* ------------------------------------------------------- device add */

struct bch_member_plan {
	struct dev_plan	p;
};

int bch_format_member_plan(struct bch_format_dev *d, const struct bch_opts *opts,
			   struct bch_member *m, struct bch_journal_run *jrun,
			   struct bch_member_plan **ret, char *err, size_t errlen)
{
	struct bch_member_plan *mp = calloc(1, sizeof(*mp));
	int r;

	if (!mp)
		return -ENOMEM;
	if ((r = plan_device(d, &mp->p, opts, err, errlen))) {
		free(mp);
		return r;
	}
	memset(m, 0, sizeof(*m));
	uuid_generate(m->uuid);
	m->nbuckets = mp->p.nbuckets;
	m->bucket_size = mp->p.bucket >> BCH_SECTOR_SHIFT;
	m->first_bucket = mp->p.first_bucket;
	m->state = BCH_MEMBER_STATE_rw;
	m->durability = d->durability;
	m->data_allowed = (1U << BCH_DATA_journal) | (1U << BCH_DATA_btree) |
			  (1U << BCH_DATA_user) | (1U << BCH_DATA_cached);
	m->discard = d->discard;
	memset(jrun, 0, sizeof(*jrun));
	jrun->nr = mp->p.journal_nr;
	jrun->start = mp->p.first_bucket;
	*ret = mp;
	return 0;
}

bool bch_format_member_same(const struct bch_member_plan *mp, const char *path, const char *other)
{
	struct dev_plan o = { 0 };

	if (!stat(other, &o.st)) {
		o.exists = true;
		o.is_blockdev = S_ISBLK(o.st.st_mode);
	}
	return same_device(&mp->p, path, &o, other);
}

uint64_t bch_format_member_size(const struct bch_member_plan *mp)
{
	return mp->p.size;
}

int bch_format_member_write(struct bch_format_dev *d, struct bch_member_plan *mp,
			    struct bch_sb *sb, unsigned idx, char *err, size_t errlen)
{
	/* the new member's journal buckets empty: nothing before is read as entries */
	return write_device(d, &mp->p, sb, idx, true, false, err, errlen);
}

void bch_format_member_plan_free(struct bch_member_plan *mp)
{
	free(mp);
}
