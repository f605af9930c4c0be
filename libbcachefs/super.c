// SPDX-License-Identifier: GPL-2.0
/*
 * super.c - superblock read, validation, copy selection, writing, fields.
 *
 * On disk (see bcachefs_format.h): struct bch_sb_layout at sector 7, then
 * copies of struct bch_sb + fields at the sectors the layout lists (8, the
 * first backup right after copy 0's area, and one at the end of the device).
 *
 * Invariants: see super.h.  Validation treats every byte as hostile: every
 * length is bounded by the buffer before it is followed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "checksum.h"
#include "crypt.h"
#include "errcode.h"
#include "opts.h"
#include "super.h"

#define SB_MAX_SIZE_BITS_LIMIT	12	/* 2 MiB per copy at most */


int bch_sb_set_csum(struct bch_sb *sb)
{
	return bch_checksum(sb->csum_type, (const char *)sb + sizeof(sb->csum),
			    bch_sb_bytes(sb) - sizeof(sb->csum), &sb->csum);
}

static struct bch_csum layout_csum(const struct bch_sb_layout *l)
{
	struct bch_csum cs;

	/* crc32c needs no library: cannot fail */
	(void)bch_checksum(BCH_CSUM_crc32c, (const char *)l + sizeof(l->csum),
			   sizeof(*l) - sizeof(l->csum), &cs);
	return cs;
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* ---------------------------------------------------------------- fields */

#define for_each_sb_field(f, sb, end)						\
	for (f = (struct bch_sb_field *)(sb)->_data,				\
	     end = (struct bch_sb_field *)((sb)->_data + (sb)->u64s);		\
	     f < end && f->u64s;							\
	     f = (struct bch_sb_field *)((uint64_t *)f + f->u64s))

struct bch_sb_field *bch_sb_field_get(const struct bch_sb *sb, unsigned type)
{
	struct bch_sb_field *f, *end;

	for_each_sb_field(f, sb, end)
		if (f->type == type)
			return f;
	return NULL;
}

struct bch_sb_field *bch_sb_field_resize(struct bch_sb **sbp, size_t *buf_bytes,
					 unsigned type, unsigned u64s, int *err)
{
	struct bch_sb *sb = *sbp;
	struct bch_sb_field *f = bch_sb_field_get(sb, type);
	unsigned old = f ? f->u64s : 0;
	size_t max_bytes = BCH_SB_BUF_BYTES(sb->layout.sb_max_size_bits);
	size_t need = bch_sb_bytes(sb) + ((size_t)u64s - old) * 8;

	*err = 0;
	if (u64s > old && need > max_bytes) {
		*err = -BCH_ERR_sb_too_big;
		return NULL;
	}
	if (need > *buf_bytes) {
		struct bch_sb *n = realloc(sb, max_bytes);
		if (!n) {
			*err = -ENOMEM;
			return NULL;
		}
		memset((char *)n + *buf_bytes, 0, max_bytes - *buf_bytes);
		*sbp = sb = n;
		*buf_bytes = max_bytes;
		f = bch_sb_field_get(sb, type);
	}

	if (!f) {
		if (!u64s)
			return NULL;
		f = (struct bch_sb_field *)(sb->_data + sb->u64s);
		memset(f, 0, (size_t)u64s * 8);
		f->u64s = u64s;
		f->type = type;
		sb->u64s += u64s;
		return f;
	}

	/* move the fields after f */
	__le64 *next = (__le64 *)f + old;
	__le64 *end = sb->_data + sb->u64s;
	memmove((__le64 *)f + u64s, next, (end - next) * 8);
	sb->u64s = sb->u64s - old + u64s;
	if (u64s > old)
		memset((uint64_t *)f + old, 0, ((size_t)u64s - old) * 8);
	else	/* zero the tail that was given up */
		memset(sb->_data + sb->u64s, 0, ((size_t)old - u64s) * 8);
	if (!u64s)
		return NULL;
	f->u64s = u64s;
	return f;
}

unsigned bch_sb_nr_members(const struct bch_sb *sb)
{
	struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_members);

	return f ? (f->u64s * 8 - sizeof(*f)) / sizeof(struct bch_member) : 0;
}

struct bch_member *bch_sb_member(const struct bch_sb *sb, unsigned idx)
{
	struct bch_sb_field_members *m = bch_sb_get_members(sb);

	return m && idx < bch_sb_nr_members(sb) ? &m->members[idx] : NULL;
}

static unsigned nr_labels(const struct bch_sb *sb)
{
	struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_labels);

	return f ? (f->u64s * 8 - sizeof(*f)) / sizeof(struct bch_label) : 0;
}

const char *bch_sb_label_name(const struct bch_sb *sb, unsigned idx, char *buf, size_t len)
{
	struct bch_sb_field_labels *l = bch_sb_get_labels(sb);

	if (!l || idx >= nr_labels(sb) || (l->entries[idx].flags & 1))
		return NULL;
	snprintf(buf, len, "%.*s", BCH_MEMBER_LABEL_SIZE, l->entries[idx].name);
	return buf;
}

const char *bch_sb_member_text(const struct bch_sb *sb, unsigned idx, char *buf, size_t len)
{
	const struct bch_member *m = bch_sb_member(sb, idx);
	char label[BCH_MEMBER_LABEL_SIZE + 1], uuid[37];

	if (!m) {
		snprintf(buf, len, "member %u", idx);
		return buf;
	}
	uuid_unparse_lower(m->uuid, uuid);
	const char *l = m->label ? bch_sb_label_name(sb, m->label - 1, label, sizeof(label)) : NULL;
	snprintf(buf, len, "member %u (%s%s%suuid %s)", idx, l ? "label " : "", l ? l : "",
		 l ? ", " : "", uuid);
	return buf;
}

int bch_target_parse(const struct bch_sb *sb, const char *s, uint64_t *target)
{
	char buf[BCH_MEMBER_LABEL_SIZE + 1];
	char *end;

	if (!*s || !strcmp(s, "none")) {
		*target = 0;
		return 0;
	}
	for (unsigned i = 0; i < nr_labels(sb); i++) {
		const char *name = bch_sb_label_name(sb, i, buf, sizeof(buf));
		if (name && !strcmp(name, s)) {
			*target = BCH_TARGET_LABEL_START + i;
			return 0;
		}
	}
	unsigned long idx = strtoul(s, &end, 10);
	if (!*end && idx < bch_sb_nr_members(sb) &&
	    bch_member_exists(bch_sb_member(sb, idx))) {
		*target = BCH_TARGET_DEV_START + idx;
		return 0;
	}
	return -BCH_ERR_opt_invalid;
}

bool bch_dev_in_target(const struct bch_sb *sb, unsigned dev, uint64_t target)
{
	const struct bch_member *m = bch_sb_member(sb, dev);
	char want[BCH_MEMBER_LABEL_SIZE + 1], have[BCH_MEMBER_LABEL_SIZE + 1];

	if (!target)
		return true;
	if (!m || !bch_member_exists(m))
		return false;
	if (target < BCH_TARGET_LABEL_START)
		return target - BCH_TARGET_DEV_START == dev;
	if (!m->label || !bch_sb_label_name(sb, target - BCH_TARGET_LABEL_START, want, sizeof(want)) ||
	    !bch_sb_label_name(sb, m->label - 1, have, sizeof(have)))
		return false;
	/* "ssd" selects "ssd" and "ssd.fast" */
	size_t n = strlen(want);
	return !strncmp(have, want, n) && (have[n] == 0 || have[n] == '.');
}

void bch_target_to_text(const struct bch_sb *sb, uint64_t target, char *buf, size_t len)
{
	char name[BCH_MEMBER_LABEL_SIZE + 1];

	if (!target)
		snprintf(buf, len, "none");
	else if (target < BCH_TARGET_LABEL_START)
		snprintf(buf, len, "dev %llu", (unsigned long long)(target - BCH_TARGET_DEV_START));
	else if (bch_sb_label_name(sb, target - BCH_TARGET_LABEL_START, name, sizeof(name)))
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "invalid(%llu)", (unsigned long long)target);
}

/* ------------------------------------------------------------ validation */

static int validate_layout(const struct bch_sb_layout *l, char *err, size_t errlen)
{
	if (l->magic != BCH_LAYOUT_MAGIC)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "layout: bad magic");
	if (l->layout_type != 0)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "layout: unknown type %u", l->layout_type);
	if (l->sb_max_size_bits < 1 || l->sb_max_size_bits > SB_MAX_SIZE_BITS_LIMIT)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "layout: bad max size bits %u",
			    l->sb_max_size_bits);
	if (!l->nr_superblocks || l->nr_superblocks > BCH_SB_LAYOUT_MAX)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "layout: %u copies",
			    l->nr_superblocks);
	if (l->sb_offset[0] != BCH_SB_SECTOR)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "layout: first copy not at sector 8");

	uint64_t area = 1ULL << l->sb_max_size_bits;
	for (unsigned i = 1; i < l->nr_superblocks; i++)
		if (l->sb_offset[i] < l->sb_offset[i - 1] + area)
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "layout: copy %u at %" PRIu64 " overlaps copy %u", i,
				    (uint64_t)l->sb_offset[i], i - 1);
	return 0;
}

static int validate_members(const struct bch_sb *sb, char *err, size_t errlen)
{
	unsigned nr = bch_sb_nr_members(sb);

	if (!bch_sb_field_get(sb, BCH_SB_FIELD_members))
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "no members field");
	if (nr < sb->nr_devices || sb->dev_idx >= sb->nr_devices)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
			    "members: %u slots, nr_devices %u, dev_idx %u",
			    nr, sb->nr_devices, sb->dev_idx);

	for (unsigned i = 0; i < sb->nr_devices; i++) {
		const struct bch_member *m = bch_sb_member(sb, i);

		if (!bch_member_exists(m)) {
			if (i == sb->dev_idx)
				return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
					    "member %u: this device's slot is empty", i);
			continue;
		}
		if (!is_pow2(m->bucket_size) || m->bucket_size < sb->block_size ||
		    m->bucket_size < sb->btree_node_size)
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "member %u: bad bucket size %u", i, m->bucket_size);
		if (m->nbuckets <= m->first_bucket || m->nbuckets > (1ULL << 48) / m->bucket_size)
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "member %u: bad bucket count %" PRIu64 " (first %u)", i,
				    (uint64_t)m->nbuckets, m->first_bucket);
		if ((uint64_t)m->first_bucket * m->bucket_size <
		    sb->layout.sb_offset[0] + (1ULL << sb->layout.sb_max_size_bits))
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "member %u: first bucket %u overlaps the superblock", i,
				    m->first_bucket);
		if (m->state >= BCH_MEMBER_STATE_NR || m->durability > BCH_REPLICAS_MAX)
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "member %u: bad state %u or durability %u", i, m->state,
				    m->durability);
		if (m->label > nr_labels(sb))
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "member %u: label %u does not exist", i, m->label);
	}
	return 0;
}

static int validate_journal(const struct bch_sb *sb, char *err, size_t errlen)
{
	struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_journal);

	if (!f)
		return 0;
	struct bch_sb_field_journal *j = (void *)f;
	unsigned nr = (f->u64s * 8 - sizeof(*f)) / sizeof(struct bch_journal_run);

	for (unsigned i = 0; i < nr; i++) {
		const struct bch_journal_run *r = &j->runs[i];
		const struct bch_member *m = r->dev < sb->nr_devices
			? bch_sb_member(sb, r->dev) : NULL;

		if (!m || !bch_member_exists(m))
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "journal run %u: no device %u", i, r->dev);
		if (!r->nr || r->start < m->first_bucket || r->start + r->nr > m->nbuckets ||
		    r->start + r->nr < r->start)
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "journal run %u: buckets %" PRIu64 "+%u outside device %u",
				    i, (uint64_t)r->start, r->nr, r->dev);
	}
	return 0;
}

static int validate_replicas(const struct bch_sb *sb, char *err, size_t errlen)
{
	struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_replicas);

	if (!f)
		return 0;
	const uint8_t *p = (const uint8_t *)(f + 1);
	const uint8_t *end = (const uint8_t *)f + (size_t)f->u64s * 8;

	while (p + sizeof(struct bch_replicas_entry) <= end) {
		const struct bch_replicas_entry *e = (const void *)p;

		if (!e->nr_devs)
			break;
		if (p + sizeof(*e) + e->nr_devs > end)
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "replicas: entry overruns field");
		if (e->data_type >= BCH_DATA_NR || !e->nr_required || e->nr_required > e->nr_devs)
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "replicas: bad entry");
		for (unsigned i = 0; i < e->nr_devs; i++)
			if (e->devs[i] >= sb->nr_devices)
				return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
					    "replicas: no device %u", e->devs[i]);
		p += sizeof(*e) + e->nr_devs;
	}
	return 0;
}

static int validate_dev_errors(const struct bch_sb *sb, char *err, size_t errlen)
{
	struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_dev_errors);

	if (f && (f->u64s * 8 - sizeof(*f)) % sizeof(struct bch_dev_errors))
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
			    "dev_errors: %u u64s is not a whole number of entries", f->u64s);
	return 0;
}

static int validate_opts(const struct bch_sb *sb, char *err, size_t errlen)
{
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *opt = &bch_opt_table[i];
		char msg[128];

		if (opt->sb_slot < 0 || opt->type == BCH_OPT_TARGET)
			continue;
		if (bch_opt_validate(i, sb->opts[opt->sb_slot], msg, sizeof(msg)))
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "option %s", msg);
	}
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *opt = &bch_opt_table[i];
		uint64_t t = opt->sb_slot >= 0 ? sb->opts[opt->sb_slot] : 0;

		if (opt->type != BCH_OPT_TARGET || !t)
			continue;
		if (t < BCH_TARGET_LABEL_START ? t - BCH_TARGET_DEV_START >= sb->nr_devices
					       : t - BCH_TARGET_LABEL_START >= nr_labels(sb))
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "option %s: target %" PRIu64 " does not exist", opt->name, t);
	}
	return 0;
}

int bch_sb_validate(const struct bch_sb *sb, size_t buf_bytes, char *err, size_t errlen)
{
	struct bch_sb_field *f;
	int ret;

	if (buf_bytes < sizeof(*sb))
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "buffer too small");
	if (sb->magic != BCH_SB_MAGIC)
		return bch_errf(err, errlen, -BCH_ERR_sb_bad_magic, "not a bcachefs superblock (bad magic)");
	if (sb->version_min < BCH_VERSION_MIN || sb->version_min > BCH_VERSION_CURRENT ||
	    sb->version < sb->version_min)
		return bch_errf(err, errlen, -BCH_ERR_sb_bad_version,
			    "format version %u (min %u); this tool reads %u..%u",
			    sb->version, sb->version_min, BCH_VERSION_MIN, BCH_VERSION_CURRENT);
	if (!bch_csum_type_valid(sb->csum_type) || sb->csum_type == BCH_CSUM_none ||
	    sb->csum_type == BCH_CSUM_chacha20_poly1305)	/* the superblock is never encrypted */
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "bad checksum type %u", sb->csum_type);
	if (sizeof(*sb) + (size_t)sb->u64s * 8 > buf_bytes)
		return bch_errf(err, errlen, -BCH_ERR_sb_too_big,
			    "fields (%u u64s) overrun the superblock area", sb->u64s);

	ret = bch_csum_verify(sb->csum_type, (const char *)sb + sizeof(sb->csum),
			      bch_sb_bytes(sb) - sizeof(sb->csum), sb->csum);
	if (ret == -BCH_ERR_csum_mismatch)
		return bch_errf(err, errlen, -BCH_ERR_sb_bad_csum, "bad checksum");
	if (ret)
		return bch_errf(err, errlen, ret, "%s", bch_err_str(ret));

	/* From here the bytes are what a writer wrote: check its logic too. */
	if ((ret = validate_layout(&sb->layout, err, errlen)))
		return ret;
	if (sizeof(*sb) + (size_t)sb->u64s * 8 > BCH_SB_BUF_BYTES(sb->layout.sb_max_size_bits))
		return bch_errf(err, errlen, -BCH_ERR_sb_too_big, "superblock larger than its area");
	if (sb->features & ~BCH_FEATURES_KNOWN)
		return bch_errf(err, errlen, -BCH_ERR_sb_features, "unknown feature bits %#" PRIx64,
			    (uint64_t)(sb->features & ~BCH_FEATURES_KNOWN));
	if (!is_pow2(sb->block_size) || sb->block_size > 128)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "bad block size %u sectors", sb->block_size);
	if (!is_pow2(sb->btree_node_size) || sb->btree_node_size < sb->block_size ||
	    sb->btree_node_size > 2048)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "bad btree node size %u sectors",
			    sb->btree_node_size);
	if (!sb->nr_devices || sb->nr_devices > BCH_SB_MEMBERS_MAX)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "bad device count %u", sb->nr_devices);
	/* fields: walk with bounds */
	const __le64 *p = sb->_data, *e = p + sb->u64s;
	while (p < e) {
		f = (struct bch_sb_field *)p;
		/*
		 * Fields cover the area exactly (writers append at _data +
		 * u64s): an empty one would hide what lies after it, such as
		 * a clean record added at close.
		 */
		if (!f->u64s)
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "empty field at u64 %zu of %u", (size_t)(p - sb->_data), sb->u64s);
		if (f->u64s > e - p || f->u64s * 8 < sizeof(*f))
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "field type %u: bad size %u", f->type, f->u64s);
		p += f->u64s;
	}

	if ((ret = validate_members(sb, err, errlen)) ||
	    (ret = validate_journal(sb, err, errlen)) ||
	    (ret = validate_replicas(sb, err, errlen)) ||
	    (ret = validate_dev_errors(sb, err, errlen)) ||
	    (ret = validate_opts(sb, err, errlen)) ||
	    (ret = bch_sb_crypt_validate(sb, err, errlen)))
		return ret;

	/* this device's copies lie outside its buckets: writing one never hits data */
	const struct bch_member *me = bch_sb_member(sb, sb->dev_idx);
	if (!me || !bch_member_exists(me))
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "device index %u is not a member",
			    sb->dev_idx);
	uint64_t data_start = (uint64_t)me->first_bucket * me->bucket_size;
	uint64_t data_end = me->nbuckets * me->bucket_size;
	uint64_t area = 1ULL << sb->layout.sb_max_size_bits;
	for (unsigned i = 0; i < sb->layout.nr_superblocks; i++) {
		uint64_t o = sb->layout.sb_offset[i];
		if (o + area > data_start && o < data_end)
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				    "layout: copy at sector %" PRIu64 " lies inside the buckets", o);
	}

	struct bch_sb_field *clean = bch_sb_field_get(sb, BCH_SB_FIELD_clean);
	if ((sb->flags & BCH_SB_FLAG_CLEAN) && !clean)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "marked clean without a clean record");
	if (clean && clean->u64s * 8 < sizeof(struct bch_sb_field_clean))
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "clean record too small");
	return 0;
}

/* --------------------------------------------------------------- reading */

int bch_sb_read_copy(struct bch_blockdev *dev, uint64_t sector, struct bch_sb **ret,
		     struct bch_sb_copy_report *r)
{
	struct bch_sb *sb = NULL;
	uint64_t size = bch_dev_size(dev);
	size_t bytes;
	int err;

	r->offset = sector;
	r->seq = 0;
	r->msg[0] = '\0';

	if ((sector << BCH_SECTOR_SHIFT) + sizeof(*sb) > size) {
		snprintf(r->msg, sizeof(r->msg), "beyond the end of the device");
		return r->err = -BCH_ERR_device_short_io;
	}
	sb = malloc(sizeof(*sb));
	if (!sb)
		return r->err = -ENOMEM;
	if ((err = bch_dev_read(dev, sb, sizeof(*sb), sector << BCH_SECTOR_SHIFT)))
		goto fail;
	if (sb->magic != BCH_SB_MAGIC) {
		err = -BCH_ERR_sb_bad_magic;
		snprintf(r->msg, sizeof(r->msg), "no superblock (bad magic)");
		goto fail;
	}
	unsigned bits = sb->layout.sb_max_size_bits;
	if (bits < 1 || bits > SB_MAX_SIZE_BITS_LIMIT)
		bits = BCH_SB_MAX_SIZE_BITS;
	bytes = BCH_SB_BUF_BYTES(bits);
	if ((sector << BCH_SECTOR_SHIFT) + bytes > size)
		bytes = size - (sector << BCH_SECTOR_SHIFT);
	bytes &= ~(size_t)(BCH_SECTOR_SIZE - 1);

	struct bch_sb *n = realloc(sb, BCH_SB_BUF_BYTES(bits));
	if (!n) {
		err = -ENOMEM;
		goto fail;
	}
	sb = n;
	memset(sb, 0, BCH_SB_BUF_BYTES(bits));
	if ((err = bch_dev_read(dev, sb, bytes, sector << BCH_SECTOR_SHIFT)))
		goto fail;

	if ((err = bch_sb_validate(sb, bytes, r->msg, sizeof(r->msg))))
		goto fail;
	if (sb->offset != sector) {
		err = -BCH_ERR_sb_invalid;
		snprintf(r->msg, sizeof(r->msg), "copy claims to live at sector %" PRIu64,
			 (uint64_t)sb->offset);
		goto fail;
	}
	/* the layout must fit this device (bch_sb_validate cannot know its size) */
	for (unsigned i = 0; i < sb->layout.nr_superblocks; i++)
		if (sb->layout.sb_offset[i] + (1ULL << sb->layout.sb_max_size_bits) >
		    (size >> BCH_SECTOR_SHIFT)) {
			err = -BCH_ERR_sb_invalid;
			snprintf(r->msg, sizeof(r->msg),
				 "layout: copy at sector %" PRIu64 " is beyond the end of the device",
				 (uint64_t)sb->layout.sb_offset[i]);
			goto fail;
		}
	r->seq = sb->seq;
	r->err = 0;
	*ret = sb;
	return 0;
fail:
	if (!r->msg[0])
		snprintf(r->msg, sizeof(r->msg), "%s", bch_err_str(err));
	free(sb);
	return r->err = err;
}

static void add_candidate(uint64_t *offs, unsigned *nr, uint64_t off)
{
	for (unsigned i = 0; i < *nr; i++)
		if (offs[i] == off)
			return;
	if (*nr < BCH_SB_LAYOUT_MAX + 1)
		offs[(*nr)++] = off;
}

int bch_sb_read(struct bch_blockdev *dev, struct bch_sb **ret,
		struct bch_sb_read_report *report)
{
	struct bch_sb_read_report local;
	struct bch_sb_layout layout;
	struct bch_sb *best = NULL;
	uint64_t offs[BCH_SB_LAYOUT_MAX + 1];
	unsigned nr = 0, from_layout = 0;
	uint64_t dev_sectors = bch_dev_size(dev) >> BCH_SECTOR_SHIFT;
	int err;

	if (!report)
		report = &local;
	memset(report, 0, sizeof(*report));

	err = bch_dev_read(dev, &layout, sizeof(layout),
			   (uint64_t)BCH_SB_LAYOUT_SECTOR << BCH_SECTOR_SHIFT);
	if (!err && (!bch_csum_eq(layout.csum, layout_csum(&layout)) ||
		     validate_layout(&layout, NULL, 0)))
		err = -BCH_ERR_sb_invalid;
	report->layout_err = err;
	if (!err) {
		for (unsigned i = 0; i < layout.nr_superblocks; i++)
			add_candidate(offs, &nr, layout.sb_offset[i]);
		from_layout = nr;
	}
	/* Where format puts copies by default: found even without the layout. */
	add_candidate(offs, &nr, BCH_SB_SECTOR);
	add_candidate(offs, &nr, BCH_SB_SECTOR + (1U << BCH_SB_MAX_SIZE_BITS));
	if (dev_sectors > (2U << BCH_SB_MAX_SIZE_BITS))
		add_candidate(offs, &nr, (dev_sectors - (1U << BCH_SB_MAX_SIZE_BITS)) & ~7ULL);

	for (unsigned i = 0; i < nr; i++) {
		struct bch_sb *sb = NULL;

		report->copies[i].offset = offs[i];
		if (bch_sb_read_copy(dev, offs[i], &sb, &report->copies[i]))
			continue;
		/*
		 * Copies the layout lists come first: a probe at the end of
		 * the device may find a stale superblock of an earlier, larger
		 * filesystem, which must not win over the current one.
		 */
		bool listed = i < from_layout;
		bool best_listed = best && report->chosen < from_layout;
		if (!best || (listed && !best_listed) ||
		    (listed == best_listed && sb->seq > best->seq)) {
			free(best);
			best = sb;
			report->chosen = i;
		} else {
			free(sb);
		}
	}
	report->nr = nr;

	if (!best) {
		for (unsigned i = 0; i < nr; i++)	/* a missing library is no damage */
			if (bch_err_is_dl(report->copies[i].err))
				return report->copies[i].err;
		for (unsigned i = 0; i < nr; i++)
			if (report->copies[i].err == -EIO)
				return -EIO;
		return -BCH_ERR_sb_not_found;
	}
	*ret = best;
	return 0;
}

/* --------------------------------------------------------------- writing */

int bch_sb_write_copy(struct bch_blockdev *dev, struct bch_sb *sb, unsigned dev_idx,
		      uint64_t sector)
{
	size_t bytes = (bch_sb_bytes(sb) + BCH_SECTOR_SIZE - 1) & ~(size_t)(BCH_SECTOR_SIZE - 1);

	if (bch_sb_bytes(sb) > BCH_SB_BUF_BYTES(sb->layout.sb_max_size_bits))
		return -BCH_ERR_sb_too_big;
	sb->dev_idx = dev_idx;
	sb->offset = sector;
	int ret = bch_sb_set_csum(sb);
	return ret ? ret : bch_dev_write(dev, sb, bytes, sector << BCH_SECTOR_SHIFT);
}

int bch_sb_write_layout(struct bch_blockdev *dev, const struct bch_sb *sb)
{
	struct bch_sb_layout layout = sb->layout;

	layout.csum = (struct bch_csum) { 0 };
	layout.csum = layout_csum(&layout);
	return bch_dev_write(dev, &layout, sizeof(layout),
			     (uint64_t)BCH_SB_LAYOUT_SECTOR << BCH_SECTOR_SHIFT);
}

int bch_sb_write_dev(struct bch_blockdev *dev, struct bch_sb *sb, unsigned dev_idx,
		     const struct bch_sb_layout *layout)
{
	int ret;

	sb->layout = *layout;

	/* backups first, copy 0 last: a crash leaves an older or newer valid copy */
	for (int i = sb->layout.nr_superblocks - 1; i >= 0; i--)
		if ((ret = bch_sb_write_copy(dev, sb, dev_idx, sb->layout.sb_offset[i])))
			return ret;
	if ((ret = bch_sb_write_layout(dev, sb)))
		return ret;
	return bch_dev_flush(dev);
}

uint64_t bch_now_secs(void)
{
	const char *e = getenv("SOURCE_DATE_EPOCH");
	char *end;

	if (e && *e) {
		unsigned long long v = strtoull(e, &end, 10);
		if (!*end)
			return v;
	}
	return time(NULL);
}

/* ------------------------------------------------ device error counters */

static unsigned dev_errors_nr(const struct bch_sb *sb)
{
	struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_dev_errors);

	return f ? (f->u64s * 8 - sizeof(*f)) / sizeof(struct bch_dev_errors) : 0;
}

static void dev_errors_load(struct bch_fs *c)
{
	struct bch_sb_field_dev_errors *f =
		(void *)bch_sb_field_get(c->sb, BCH_SB_FIELD_dev_errors);
	unsigned nr = dev_errors_nr(c->sb);

	if (c->dev_errors_loaded)
		return;
	c->dev_errors_loaded = true;
	for (unsigned i = 0; i < nr && i < BCH_SB_MEMBERS_MAX; i++) {
		for (unsigned t = 0; t < BCH_DEV_ERROR_NR; t++)
			c->dev_errors[i][t] = f->d[i].count[t];
		c->dev_errors_reset[i] = f->d[i].reset_time;
	}
}

/* Fold what each blockdev counted since the last look into the counters. */
static void dev_errors_fold(struct bch_fs *c)
{
	dev_errors_load(c);
	for (unsigned i = 0; i < c->nr_devs && i < BCH_SB_MEMBERS_MAX; i++) {
		struct bch_dev *ca = c->devs[i];
		struct bch_dev_io_stats io;

		if (!ca || !ca->bdev)
			continue;
		bch_dev_io_stats(ca->bdev, &io);
		c->dev_errors[i][BCH_DEV_ERROR_read] += io.read_errors - c->dev_io_err_seen[i][0];
		c->dev_errors[i][BCH_DEV_ERROR_write] += io.write_errors - c->dev_io_err_seen[i][1];
		c->dev_io_err_seen[i][0] = io.read_errors;
		c->dev_io_err_seen[i][1] = io.write_errors;
	}
}

/*
 * Into the superblock image about to be written (version 2 only: the field
 * is part of version 2).  Slots of members that no longer exist are zeroed,
 * so a device added into one starts from nothing.  A superblock with no room
 * left keeps the field as it was: the counts are advisory.
 */
static void dev_errors_store(struct bch_fs *c)
{
	unsigned nr = c->sb->nr_devices;
	int err;

	if (!bch_fs_has_v2(c))
		return;
	dev_errors_fold(c);
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++) {
		const struct bch_member *m = i < nr ? bch_sb_member(c->sb, i) : NULL;

		if (!m || !bch_member_exists(m)) {
			memset(c->dev_errors[i], 0, sizeof(c->dev_errors[i]));
			c->dev_errors_reset[i] = 0;
		}
	}
	/*
	 * It only grows (a device add past the last slot), so the fields after
	 * it move only then; slots past nr_devices stay, zeroed.
	 */
	struct bch_sb_field_dev_errors *f = (void *)bch_sb_field_get(c->sb, BCH_SB_FIELD_dev_errors);
	if (dev_errors_nr(c->sb) < nr)
		f = (void *)bch_sb_field_resize(&c->sb, &c->sb_bytes, BCH_SB_FIELD_dev_errors,
						(sizeof(*f) + nr * sizeof(struct bch_dev_errors)) / 8, &err);
	if (!f)
		return;
	nr = dev_errors_nr(c->sb);
	for (unsigned i = 0; i < nr && i < BCH_SB_MEMBERS_MAX; i++) {
		for (unsigned t = 0; t < BCH_DEV_ERROR_NR; t++)
			f->d[i].count[t] = c->dev_errors[i][t];
		f->d[i].reset_time = c->dev_errors_reset[i];
	}
}

void bch_dev_error_inc(struct bch_fs *c, unsigned dev, enum bch_dev_error_type type)
{
	if (!c || dev >= BCH_SB_MEMBERS_MAX || type >= BCH_DEV_ERROR_NR)
		return;
	dev_errors_load(c);
	c->dev_errors[dev][type]++;
}

void bch_dev_errors_get(struct bch_fs *c, unsigned dev, uint64_t counts[BCH_DEV_ERROR_NR],
			uint64_t *reset_time)
{
	dev_errors_fold(c);
	for (unsigned t = 0; t < BCH_DEV_ERROR_NR; t++)
		counts[t] = dev < BCH_SB_MEMBERS_MAX ? c->dev_errors[dev][t] : 0;
	if (reset_time)
		*reset_time = dev < BCH_SB_MEMBERS_MAX ? c->dev_errors_reset[dev] : 0;
}

int bch_dev_errors_reset(struct bch_fs *c)
{
	uint64_t now = bch_now_secs();

	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	dev_errors_fold(c);
	for (unsigned i = 0; i < c->nr_devs && i < BCH_SB_MEMBERS_MAX; i++) {
		const struct bch_member *m = bch_sb_member(c->sb, i);

		if (!m || !bch_member_exists(m))
			continue;
		memset(c->dev_errors[i], 0, sizeof(c->dev_errors[i]));
		c->dev_errors_reset[i] = now;
	}
	return bch_write_super(c);
}

int bch_write_super(struct bch_fs *c)
{
	int ret = 0;

	if (c->read_only)
		return -BCH_ERR_fs_read_only;

	dev_errors_store(c);
	c->sb->seq++;
	c->sb->write_time = bch_now_secs();
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev *ca = c->devs[i];

		if (!ca || !ca->bdev)
			continue;
		/* each device keeps its own layout: the end copy depends on its size */
		ret = bch_sb_write_dev(ca->bdev, c->sb, i, &ca->disk_sb->layout);
		if (ret)
			return bch_fs_err(c, ret, "%s: writing superblock: %s",
					  bch_dev_path(ca->bdev), bch_err_str(ret));
	}
	return ret;
}
