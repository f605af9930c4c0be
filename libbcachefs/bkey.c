// SPDX-License-Identifier: GPL-2.0
/*
 * bkey.c - key positions, validation and printing, per key type.
 *
 * Each key type has a validate() and a to_text(), picked by the type
 * table below; a type not allowed in a btree (or at a level) is invalid
 * there whatever its value holds.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bkey.h"
#include "ec.h"
#include "errcode.h"
#include "extent_encode.h"

static const char * const btree_names[] = {
#define x(n, id)	[id] = #n,
	BCH_BTREE_IDS()
#undef x
};

static const char * const type_names[] = {
#define x(n, id)	[id] = #n,
	BCH_BKEY_TYPES()
#undef x
};

const char *bch_btree_id_name(unsigned id)
{
	return id < BCH_BTREE_ID_NR ? btree_names[id] : "unknown";
}

int bch_btree_id_parse(const char *s)
{
	for (unsigned i = 0; i < BCH_BTREE_ID_NR; i++)
		if (!strcmp(s, btree_names[i]))
			return i;
	return -1;
}

const char *bch_bkey_type_name(unsigned type)
{
	return type < BCH_BKEY_TYPE_NR ? type_names[type] : "unknown";
}

struct bch_bpos bpos_successor(struct bch_bpos p)
{
	if (++p.snapshot)
		return p;
	if (++p.offset)
		return p;
	if (++p.inode)
		return p;
	return POS_MAX;
}

struct bch_bpos bpos_predecessor(struct bch_bpos p)
{
	if (p.snapshot--)
		return p;
	if (p.offset--)
		return p;
	if (p.inode--)
		return p;
	return POS_MIN;
}

struct bch_bkey *bch_bkey_alloc(unsigned type, struct bch_bpos pos, size_t val_bytes)
{
	size_t u64s = BCH_BKEY_U64s + (val_bytes + 7) / 8;
	struct bch_bkey *k = calloc(u64s, 8);

	if (!k)
		abort();
	k->u64s = u64s;
	k->type = type;
	k->p = pos;
	return k;
}

struct bch_bkey *bch_bkey_dup(const struct bch_bkey *k)
{
	struct bch_bkey *n = malloc(bkey_bytes(k));

	if (!n)
		abort();
	memcpy(n, k, bkey_bytes(k));
	return n;
}

unsigned bch_btree_ptr_nr(const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_btree_ptr || bkey_val_bytes(k) < sizeof(struct bch_btree_ptr))
		return 0;
	return (bkey_val_bytes(k) - sizeof(struct bch_btree_ptr)) / sizeof(struct bch_extent_ptr);
}


/* ------------------------------------------------------- per-type checks */

static int deleted_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	return bkey_val_bytes(k) ? bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "deleted key with a value") : 0;
}

static int btree_ptr_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	unsigned nr = bch_btree_ptr_nr(k);

	if (!nr || nr > BCH_REPLICAS_MAX ||
	    bkey_val_bytes(k) != sizeof(struct bch_btree_ptr) + nr * sizeof(struct bch_extent_ptr))
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "btree_ptr: bad size %zu", bkey_val_bytes(k));
	const struct bch_btree_ptr *bp = bkey_val(k);
	if (bpos_cmp(bp->min_key, k->p) > 0)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "btree_ptr: min_key after the key's position");
	for (unsigned i = 0; i < nr; i++) {
		if (bp->ptrs[i].dev >= BCH_SB_MEMBERS_MAX)
			return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "btree_ptr: bad device %u", bp->ptrs[i].dev);
		/* two copies on one device (version 2) are in different places */
		for (unsigned j = 0; j < i; j++)
			if (bp->ptrs[j].dev == bp->ptrs[i].dev && bp->ptrs[j].offset == bp->ptrs[i].offset)
				return bch_errf(err, errlen, -BCH_ERR_bkey_invalid,
						"btree_ptr: two replicas at device %u offset %llu",
						bp->ptrs[i].dev, (unsigned long long)bp->ptrs[i].offset);
	}
	return 0;
}

static int alloc_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) != sizeof(struct bch_alloc))
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "alloc: bad size %zu", bkey_val_bytes(k));
	const struct bch_alloc *a = bkey_val(k);
	if (a->data_type >= BCH_DATA_NR)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "alloc: bad data type %u", a->data_type);
	return 0;
}

static int raw_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) < sizeof(struct bch_raw))
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "raw: too small");
	const struct bch_raw *r = bkey_val(k);
	if (r->len > bkey_val_bytes(k) - sizeof(*r) || bkey_val_bytes(k) - sizeof(*r) - r->len >= 8)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "raw: length %u does not match the value", r->len);
	return 0;
}

#define INVALID(...)	bch_errf(err, errlen, -BCH_ERR_bkey_invalid, __VA_ARGS__)

/* A per-inode compression option (value + 1, 0: inherit): a known type, level 0..15. */
static bool inode_opt_compression_ok(unsigned v)
{
	if (!v--)
		return true;
	unsigned type = v & 0xff, level = v >> 8;
	return type < BCH_COMPRESSION_incompressible && level <= 15 &&
	       (type != BCH_COMPRESSION_none || !level);
}

/* A per-inode target (value + 1, 0: inherit): none, a device index or a label index. */
static bool inode_opt_target_ok(unsigned v)
{
	if (!v--)
		return true;
	return v < BCH_TARGET_DEV_START + BCH_SB_MEMBERS_MAX || v >= BCH_TARGET_LABEL_START;
}

static int inode_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) != sizeof(struct bch_inode))
		return INVALID("inode: bad size %zu", bkey_val_bytes(k));
	const struct bch_inode *i = bkey_val(k);
	if (k->p.inode || k->p.offset < BCH_FIRST_INO)
		return INVALID("inode: bad inode number");
	unsigned fmt = i->mode & S_IFMT;
	if (fmt != S_IFREG && fmt != S_IFDIR && fmt != S_IFLNK && fmt != S_IFCHR &&
	    fmt != S_IFBLK && fmt != S_IFIFO && fmt != S_IFSOCK)
		return INVALID("inode: bad file type in mode %o", (unsigned)i->mode);
	/* flags and project: bch_inode_flags_check(), which needs the superblock */
	/* stored + 1; a MAC is never a per-file choice (encryption decides it) */
	if (i->opt_data_checksum > BCH_CSUM_chacha20_poly1305 || i->opt_data_replicas > BCH_REPLICAS_MAX + 1 ||
	    !inode_opt_compression_ok(i->opt_compression) ||
	    !inode_opt_compression_ok(i->opt_background_compression) ||
	    !inode_opt_target_ok(i->opt_foreground_target) ||
	    !inode_opt_target_ok(i->opt_background_target) ||
	    !inode_opt_target_ok(i->opt_promote_target))
		return INVALID("inode: bad options");
	if ((int64_t)i->size < 0)
		return INVALID("inode: negative size");
	return 0;
}

static int dirent_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) < sizeof(struct bch_dirent) + 1)
		return INVALID("dirent: too small");
	const struct bch_dirent *d = bkey_val(k);
	size_t room = bkey_val_bytes(k) - sizeof(*d);
	if (!d->name_len || d->name_len > room || room - d->name_len >= 8)
		return INVALID("dirent: name length %u does not match the value", d->name_len);
	if (memchr(d->name, '/', d->name_len) || memchr(d->name, 0, d->name_len) ||
	    (d->name_len == 1 && d->name[0] == '.') ||
	    (d->name_len == 2 && d->name[0] == '.' && d->name[1] == '.'))
		return INVALID("dirent: invalid name");
	for (size_t i = d->name_len; i < room; i++)
		if (d->name[i])
			return INVALID("dirent: nonzero padding");
	if (d->d_type == BCH_DT_SUBVOL) {
		if (!d->inum || d->inum > BCH_SUBVOL_MAX)
			return INVALID("dirent: subvolume %" PRIu64 " out of range", (uint64_t)d->inum);
	} else if (d->d_type > 14 || d->inum < BCH_FIRST_INO) {
		return INVALID("dirent: bad type or target");
	}
	if (k->p.offset < BCH_HASH_MIN || k->p.offset > BCH_HASH_MAX)
		return INVALID("dirent: offset outside the hash range");
	return 0;
}

static int hash_whiteout_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k))
		return INVALID("hash_whiteout with a value");
	return 0;
}

static int xattr_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) < sizeof(struct bch_xattr))
		return INVALID("xattr: too small");
	const struct bch_xattr *x = bkey_val(k);
	size_t room = bkey_val_bytes(k) - sizeof(*x), used = (size_t)x->name_len + x->val_len;
	if (!x->ns || x->ns >= BCH_XATTR_NS_NR)
		return INVALID("xattr: unknown namespace %u", x->ns);
	if (used > room || room - used >= 8)
		return INVALID("xattr: lengths do not match the value");
	if ((x->ns >= BCH_XATTR_posix_acl_access) != !x->name_len)
		return INVALID("xattr: bad name length");
	if (memchr(x->data, 0, x->name_len))
		return INVALID("xattr: NUL in name");
	if (k->p.offset < BCH_HASH_MIN || k->p.offset > BCH_HASH_MAX)
		return INVALID("xattr: offset outside the hash range");
	if (x->pieces) {
		unsigned nr = BCH_XATTR_PIECES_NR(x->pieces);
		if (x->val_len)
			return INVALID("xattr: value both in the key and in pieces");
		if (!nr || nr > BCH_XATTR_PIECES_MAX)
			return INVALID("xattr: %u pieces", nr);
	}
	return 0;
}

static int xattr_piece_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) < sizeof(struct bch_xattr_piece))
		return INVALID("xattr_piece: too small");
	const struct bch_xattr_piece *x = bkey_val(k);
	size_t room = bkey_val_bytes(k) - sizeof(*x);
	if (!x->len || x->len > BCH_XATTR_PIECE_BYTES || x->len > room || room - x->len >= 8)
		return INVALID("xattr_piece: length %u in a value of %zu bytes", (unsigned)x->len, room);
	for (unsigned i = 0; i < sizeof(x->pad); i++)
		if (x->pad[i])
			return INVALID("nonzero reserved fields");
	if (k->p.offset < BCH_XATTR_PIECE_MIN || k->p.offset >= 2 * BCH_XATTR_PIECE_MIN ||
	    BCH_XATTR_PIECE_POS_N(k->p.offset) >= BCH_XATTR_PIECES_MAX)
		return INVALID("xattr_piece: offset outside the pieces' range");
	return 0;
}

static int extent_ptrs_validate(const struct bch_extent_ptr *p, unsigned nr, char *err, size_t errlen)
{
	for (unsigned i = 0; i < nr; i++) {
		if (p[i].dev >= BCH_SB_MEMBERS_MAX)
			return INVALID("bad pointer");
		/*
		 * a cached copy beside another copy on its device is worth nothing
		 * but harms nothing: fsck drops it (cached_ptr_bad) and keeps the
		 * extent, which rejecting the key here would lose
		 */
		for (unsigned j = 0; j < i; j++)
			if (p[j].dev == p[i].dev &&
			    !((p[i].flags | p[j].flags) & BCH_EXTENT_PTR_CACHED))
				return INVALID("two replicas on device %u", p[i].dev);
	}
	return bch_ec_ptrs_validate(p, nr, err, errlen);	/* flags, striped pointers */
}

static int extent_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	size_t vb = bkey_val_bytes(k);
	if (vb < sizeof(struct bch_extent) + sizeof(struct bch_extent_ptr) ||
	    (vb - sizeof(struct bch_extent)) % sizeof(struct bch_extent_ptr) ||
	    (vb - sizeof(struct bch_extent)) / sizeof(struct bch_extent_ptr) > BCH_REPLICAS_MAX)
		return INVALID("extent: bad size %zu", vb);
	const struct bch_extent *e = bkey_val(k);
	int r = bch_extent_crc_validate(&e->crc, k->size, err, errlen);
	if (r)
		return r;
	return extent_ptrs_validate(e->ptrs, bch_extent_nr_ptrs(k), err, errlen);
}

static int reflink_v_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	size_t vb = bkey_val_bytes(k);
	if (vb < sizeof(struct bch_reflink_v) + sizeof(struct bch_extent_ptr) ||
	    (vb - sizeof(struct bch_reflink_v)) % sizeof(struct bch_extent_ptr) ||
	    (vb - sizeof(struct bch_reflink_v)) / sizeof(struct bch_extent_ptr) > BCH_REPLICAS_MAX)
		return INVALID("reflink_v: bad size %zu", vb);
	if (k->p.inode)
		return INVALID("reflink_v: bad position");
	const struct bch_reflink_v *v = bkey_val(k);
	int r = bch_extent_crc_validate(&v->crc, k->size, err, errlen);
	if (r)
		return r;
	return extent_ptrs_validate(v->ptrs, (vb - sizeof(*v)) / sizeof(v->ptrs[0]), err, errlen);
}

static int reflink_p_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) != sizeof(struct bch_reflink_p))
		return INVALID("reflink_p: bad size %zu", bkey_val_bytes(k));
	const struct bch_reflink_p *rp = bkey_val(k);
	if (rp->idx > BCH_FILE_SECTORS_MAX - k->size)
		return INVALID("reflink_p: index %" PRIu64 " past the reflink btree's range",
			       (uint64_t)rp->idx);
	return 0;
}

static int reservation_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) != sizeof(struct bch_reservation))
		return INVALID("reservation: bad size");
	const struct bch_reservation *rv = bkey_val(k);
	if (rv->pad || rv->nr_replicas > BCH_REPLICAS_MAX)
		return INVALID("reservation: bad value");
	return 0;
}

static int rebalance_work_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) != sizeof(struct bch_rebalance_work))
		return INVALID("rebalance_work: bad size %zu", bkey_val_bytes(k));
	const struct bch_rebalance_work *w = bkey_val(k);
	if (k->p.offset || (w->flags & ~BCH_REBALANCE_FLAGS_KNOWN) || w->pad)
		return INVALID("rebalance_work: bad position or value");
	return 0;
}

static int whiteout_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k))
		return INVALID("whiteout with a value");
	if (!k->p.snapshot)
		return INVALID("whiteout in snapshot 0 (a root: nothing below to hide)");
	return 0;
}

static int snapshot_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) != sizeof(struct bch_snapshot))
		return INVALID("snapshot: bad size %zu", bkey_val_bytes(k));
	const struct bch_snapshot *s = bkey_val(k);
	if (k->p.inode != BCH_SNAPSHOT_INO || k->p.offset >= BCH_SNAPSHOT_NONE || k->p.snapshot)
		return INVALID("snapshot key at a bad position");
	if (s->flags & ~BCH_SNAPSHOT_FLAGS_KNOWN)
		return INVALID("snapshot: unknown flags %#x", (unsigned)s->flags);
	if (s->parent != BCH_SNAPSHOT_NONE && s->parent >= k->p.offset)
		return INVALID("snapshot %u: parent %u not older", (unsigned)k->p.offset, (unsigned)s->parent);
	if ((s->parent == BCH_SNAPSHOT_NONE) != !s->depth || s->depth > BCH_SNAPSHOT_DEPTH_MAX)
		return INVALID("snapshot %u: depth %u does not fit its parent", (unsigned)k->p.offset,
			       (unsigned)s->depth);
	for (unsigned i = 0; i < 2; i++)
		if (s->children[i] != BCH_SNAPSHOT_NONE && s->children[i] <= k->p.offset)
			return INVALID("snapshot %u: child %u not newer", (unsigned)k->p.offset,
				       (unsigned)s->children[i]);
	return 0;
}

static int subvolume_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k) != sizeof(struct bch_subvolume))
		return INVALID("subvolume: bad size %zu", bkey_val_bytes(k));
	const struct bch_subvolume *v = bkey_val(k);
	if (k->p.inode != BCH_SUBVOL_INO || k->p.offset > BCH_SUBVOL_MAX || k->p.snapshot)
		return INVALID("subvolume key at a bad position");
	if (v->flags & ~BCH_SUBVOL_FLAGS_KNOWN)
		return INVALID("subvolume: unknown flags %#x", (unsigned)v->flags);
	if (v->snapshot == BCH_SNAPSHOT_NONE || v->root_inum < BCH_FIRST_INO)
		return INVALID("subvolume %u: bad snapshot or root", (unsigned)k->p.offset);
	return 0;
}

static int snapshot_touch_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	if (bkey_val_bytes(k))
		return INVALID("snapshot_touch with a value");
	if (k->p.inode < BCH_SNAP_TOUCH_INO(0) || k->p.inode >= BCH_SNAP_TOUCH_INO(BCH_SNAPSHOT_NONE) ||
	    k->p.snapshot)
		return INVALID("snapshot_touch at a bad position");
	return 0;
}

unsigned bch_extent_nr_ptrs(const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_extent || bkey_val_bytes(k) < sizeof(struct bch_extent))
		return 0;
	return (bkey_val_bytes(k) - sizeof(struct bch_extent)) / sizeof(struct bch_extent_ptr);
}

/* Which key types may live in which btree's leaves. */
static bool type_allowed(unsigned btree_id, unsigned type)
{
	switch (type) {
	case BCH_BKEY_deleted:	return true;
	case BCH_BKEY_alloc:	return btree_id == BCH_BTREE_ID_alloc;
	case BCH_BKEY_raw:	return btree_id == BCH_BTREE_ID_test;
	case BCH_BKEY_inode:	return btree_id == BCH_BTREE_ID_inodes;
	case BCH_BKEY_dirent:	return btree_id == BCH_BTREE_ID_dirents;
	case BCH_BKEY_xattr:
	case BCH_BKEY_xattr_piece:
		return btree_id == BCH_BTREE_ID_xattrs;
	case BCH_BKEY_hash_whiteout:
		return btree_id == BCH_BTREE_ID_dirents || btree_id == BCH_BTREE_ID_xattrs;
	case BCH_BKEY_extent:
	case BCH_BKEY_reservation:
	case BCH_BKEY_reflink_p:
		return btree_id == BCH_BTREE_ID_extents;
	case BCH_BKEY_reflink_v:
		return btree_id == BCH_BTREE_ID_reflink;
	case BCH_BKEY_rebalance_work:
		return btree_id == BCH_BTREE_ID_rebalance_work;
	case BCH_BKEY_whiteout:
		return bch_btree_id_is_file(btree_id);
	case BCH_BKEY_snapshot:
	case BCH_BKEY_subvolume:
	case BCH_BKEY_snapshot_touch:
		return btree_id == BCH_BTREE_ID_snapshots;
	case BCH_BKEY_stripe:
		return btree_id == BCH_BTREE_ID_stripes;
	default:		return false;
	}
}

int bch_bkey_validate(const struct bch_bkey *k, unsigned btree_id, unsigned level,
		      char *err, size_t errlen)
{
	if (k->u64s < BCH_BKEY_U64s)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "key smaller than its header (%u u64s)", k->u64s);
	if (k->type >= BCH_BKEY_TYPE_NR)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "unknown key type %u", k->type);
	if (k->flags || k->p.pad)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "nonzero reserved fields");
	if (btree_id >= BCH_BTREE_ID_NR)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "unknown btree %u", btree_id);
	/* interior nodes: pointers, and whiteouts of pointers (merges) */
	if (level ? k->type != BCH_BKEY_btree_ptr && k->type != BCH_BKEY_deleted
		  : !type_allowed(btree_id, k->type))
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "%s key in %s btree at level %u",
			    bch_bkey_type_name(k->type), bch_btree_id_name(btree_id), level);
	/* only the file btrees have snapshots (snapshot.h) */
	if (!level && k->p.snapshot && !bch_btree_id_is_file(btree_id) &&
	    btree_id != BCH_BTREE_ID_test && btree_id != BCH_BTREE_ID_alloc)
		return INVALID("key in snapshot %u of a btree without snapshots", (unsigned)k->p.snapshot);
	if (!level && k->p.snapshot == BCH_SNAPSHOT_NONE && bch_btree_id_is_file(btree_id))
		return INVALID("key in snapshot %u (no snapshot has that ID)", (unsigned)k->p.snapshot);
	if (k->type == BCH_BKEY_extent || k->type == BCH_BKEY_reservation ||
	    k->type == BCH_BKEY_reflink_v || k->type == BCH_BKEY_reflink_p) {
		if (!k->size || k->size > k->p.offset)
			return INVALID("extent of bad size %u ending at %" PRIu64, k->size, (uint64_t)k->p.offset);
		if (k->p.offset > BCH_FILE_SECTORS_MAX)
			return INVALID("extent ending at sector %" PRIu64 ", past the largest file",
				       (uint64_t)k->p.offset);
	} else if (k->size) {
		return INVALID("size %u on a non-extent key", k->size);
	}
	switch (k->type) {
	case BCH_BKEY_deleted:		return deleted_validate(k, err, errlen);
	case BCH_BKEY_btree_ptr:	return btree_ptr_validate(k, err, errlen);
	case BCH_BKEY_alloc:		return alloc_validate(k, err, errlen);
	case BCH_BKEY_raw:		return raw_validate(k, err, errlen);
	case BCH_BKEY_inode:		return inode_validate(k, err, errlen);
	case BCH_BKEY_dirent:		return dirent_validate(k, err, errlen);
	case BCH_BKEY_hash_whiteout:	return hash_whiteout_validate(k, err, errlen);
	case BCH_BKEY_xattr:		return xattr_validate(k, err, errlen);
	case BCH_BKEY_xattr_piece:	return xattr_piece_validate(k, err, errlen);
	case BCH_BKEY_extent:		return extent_validate(k, err, errlen);
	case BCH_BKEY_reservation:	return reservation_validate(k, err, errlen);
	case BCH_BKEY_reflink_v:	return reflink_v_validate(k, err, errlen);
	case BCH_BKEY_reflink_p:	return reflink_p_validate(k, err, errlen);
	case BCH_BKEY_rebalance_work:	return rebalance_work_validate(k, err, errlen);
	case BCH_BKEY_whiteout:		return whiteout_validate(k, err, errlen);
	case BCH_BKEY_snapshot:		return snapshot_validate(k, err, errlen);
	case BCH_BKEY_subvolume:	return subvolume_validate(k, err, errlen);
	case BCH_BKEY_snapshot_touch:	return snapshot_touch_validate(k, err, errlen);
	case BCH_BKEY_stripe:		return bch_stripe_validate(k, err, errlen);
	}
	return 0;
}

/* --------------------------------------------------------------- text */

void bch_bpos_to_text(struct bch_bpos p, char *buf, size_t len)
{
	if (bpos_eq(p, POS_MAX)) {
		snprintf(buf, len, "max");
		return;
	}
	snprintf(buf, len, "%" PRIu64 ":%" PRIu64 ":%" PRIu32,
		 (uint64_t)p.inode, (uint64_t)p.offset, (uint32_t)p.snapshot);
}

static int parse_u64(const char *s, const char *end, uint64_t *v, uint64_t max)
{
	char *e;

	if (end - s == 3 && !strncmp(s, "max", 3)) {
		*v = max;
		return 0;
	}
	if (s == end || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	unsigned long long x = strtoull(s, &e, 10);
	if (errno || e != end || x > max)
		return -EINVAL;
	*v = x;
	return 0;
}

int bch_bpos_parse(const char *s, struct bch_bpos *p)
{
	const char *c1 = strchr(s, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	uint64_t i, o, snap = 0;

	if (!strcmp(s, "max")) {
		*p = POS_MAX;
		return 0;
	}
	if (!c1)
		return -EINVAL;
	if (parse_u64(s, c1, &i, UINT64_MAX) ||
	    parse_u64(c1 + 1, c2 ? c2 : c1 + 1 + strlen(c1 + 1), &o, UINT64_MAX) ||
	    (c2 && parse_u64(c2 + 1, c2 + 1 + strlen(c2 + 1), &snap, UINT32_MAX)))
		return -EINVAL;
	*p = POS(i, o, snap);
	return 0;
}

/* Append up to max bytes of data, escaped, and a closing quote, at buf + n. */
static void text_bytes(char *buf, size_t len, int n, const uint8_t *data, unsigned dlen, unsigned max)
{
	unsigned shown = dlen < max ? dlen : max;

	for (unsigned i = 0; i < shown && n >= 0 && (size_t)n + 5 < len; i++) {
		unsigned char ch = data[i];
		n += ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\'
			? snprintf(buf + n, len - n, "%c", ch)
			: snprintf(buf + n, len - n, "\\x%02x", ch);
	}
	if (n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - n, "%s\"", shown < dlen ? "..." : "");
}

/* An extent's or reflink_v's pointer: " ptr dev:offset gen g[ cached][ stripe s/b]" */
static int ptr_to_text(char *buf, size_t len, const struct bch_extent_ptr *p)
{
	if (p->flags & BCH_EXTENT_PTR_STRIPED)
		return snprintf(buf, len, " ptr %u:%" PRIu64 " gen %u stripe %u/%u", p->dev,
				(uint64_t)p->offset, p->gen, (unsigned)p->stripe, p->stripe_block);
	return snprintf(buf, len, " ptr %u:%" PRIu64 " gen %u%s", p->dev, (uint64_t)p->offset,
			p->gen, p->flags & BCH_EXTENT_PTR_CACHED ? " cached" : "");
}

void bch_bkey_to_text(const struct bch_bkey *k, char *buf, size_t len)
{
	char pos[80];
	int n;

	bch_bpos_to_text(k->p, pos, sizeof(pos));
	n = snprintf(buf, len, "%s %s", pos, bch_bkey_type_name(k->type));
	if (n < 0 || (size_t)n >= len)
		return;
	buf += n;
	len -= n;

	switch (k->type) {
	case BCH_BKEY_btree_ptr: {
		const struct bch_btree_ptr *bp = bkey_val(k);
		unsigned nr = bch_btree_ptr_nr(k);
		bch_bpos_to_text(bp->min_key, pos, sizeof(pos));
		n = snprintf(buf, len, " min %s seq %016" PRIx64, pos, (uint64_t)bp->seq);
		for (unsigned i = 0; i < nr && n >= 0 && (size_t)n < len; i++)
			n += snprintf(buf + n, len - n, " ptr %u:%" PRIu64 " gen %u", bp->ptrs[i].dev,
				      (uint64_t)bp->ptrs[i].offset, bp->ptrs[i].gen);
		break;
	}
	case BCH_BKEY_alloc: {
		const struct bch_alloc *a = bkey_val(k);
		snprintf(buf, len, " gen %u type %u dirty %u cached %u", a->gen, a->data_type,
			 a->dirty_sectors, a->cached_sectors);
		break;
	}
	case BCH_BKEY_inode: {
		const struct bch_inode *i = bkey_val(k);
		snprintf(buf, len, " mode %o size %" PRIu64 " sectors %" PRIu64 " nlink %u uid %u gid %u"
			 " flags %x dir %" PRIu64, (unsigned)i->mode, (uint64_t)i->size,
			 (uint64_t)i->sectors, (unsigned)i->nlink, (unsigned)i->uid, (unsigned)i->gid,
			 (unsigned)i->flags, (uint64_t)i->dir);
		break;
	}
	case BCH_BKEY_dirent: {
		const struct bch_dirent *d = bkey_val(k);
		n = snprintf(buf, len, " -> %" PRIu64 " type %u \"", (uint64_t)d->inum, d->d_type);
		text_bytes(buf, len, n, d->name, d->name_len, 64);
		break;
	}
	case BCH_BKEY_xattr: {
		const struct bch_xattr *x = bkey_val(k);
		n = x->pieces
			? snprintf(buf, len, " ns %u pieces %u id %u \"", x->ns,
				   BCH_XATTR_PIECES_NR(x->pieces), BCH_XATTR_PIECES_ID(x->pieces))
			: snprintf(buf, len, " ns %u len %u \"", x->ns, (unsigned)x->val_len);
		text_bytes(buf, len, n, x->data, x->name_len, 64);
		break;
	}
	case BCH_BKEY_xattr_piece: {
		const struct bch_xattr_piece *x = bkey_val(k);
		snprintf(buf, len, " id %u piece %u len %u",
			 (unsigned)BCH_XATTR_PIECE_POS_ID(k->p.offset),
			 BCH_XATTR_PIECE_POS_N(k->p.offset), (unsigned)x->len);
		break;
	}
	case BCH_BKEY_extent: {
		const struct bch_extent *e = bkey_val(k);
		n = snprintf(buf, len, " size %u crc %u/%u off %u csum %u comp %u", k->size,
			     e->crc.compressed_sectors, e->crc.uncompressed_sectors, e->crc.offset,
			     e->crc.csum_type, e->crc.compression_type);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k) && n >= 0 && (size_t)n < len; i++)
			n += ptr_to_text(buf + n, len - n, &e->ptrs[i]);
		break;
	}
	case BCH_BKEY_reservation:
		snprintf(buf, len, " size %u", k->size);
		break;
	case BCH_BKEY_reflink_v: {
		const struct bch_reflink_v *v = bkey_val(k);
		unsigned nr = (bkey_val_bytes(k) - sizeof(*v)) / sizeof(v->ptrs[0]);
		n = snprintf(buf, len, " size %u refcount %" PRIu64 " crc %u/%u off %u csum %u comp %u",
			     k->size, (uint64_t)v->refcount, v->crc.compressed_sectors,
			     v->crc.uncompressed_sectors, v->crc.offset, v->crc.csum_type,
			     v->crc.compression_type);
		for (unsigned i = 0; i < nr && n >= 0 && (size_t)n < len; i++)
			n += ptr_to_text(buf + n, len - n, &v->ptrs[i]);
		break;
	}
	case BCH_BKEY_reflink_p: {
		const struct bch_reflink_p *rp = bkey_val(k);
		snprintf(buf, len, " size %u idx %" PRIu64, k->size, (uint64_t)rp->idx);
		break;
	}
	case BCH_BKEY_snapshot: {
		const struct bch_snapshot *s = bkey_val(k);
		snprintf(buf, len, " parent %d subvol %d depth %u children %d %d flags %x",
			 (int)s->parent, (int)s->subvol, (unsigned)s->depth, (int)s->children[0],
			 (int)s->children[1], (unsigned)s->flags);
		break;
	}
	case BCH_BKEY_subvolume: {
		const struct bch_subvolume *v = bkey_val(k);
		snprintf(buf, len, " snapshot %u root %" PRIu64 " parent %d dir %u:%" PRIu64 " flags %x",
			 (unsigned)v->snapshot, (uint64_t)v->root_inum, (int)v->parent,
			 (unsigned)v->dir_subvol, (uint64_t)v->dir, (unsigned)v->flags);
		break;
	}
	case BCH_BKEY_rebalance_work: {
		const struct bch_rebalance_work *w = bkey_val(k);
		snprintf(buf, len, " cursor %" PRIu64 "%s", (uint64_t)w->cursor,
			 w->flags & BCH_REBALANCE_WAITING ? " waiting" : "");
		break;
	}
	case BCH_BKEY_stripe:
		bch_stripe_to_text(k, buf, len);
		break;
	case BCH_BKEY_raw: {
		const struct bch_raw *r = bkey_val(k);
		unsigned shown = r->len < 32 ? r->len : 32;
		n = snprintf(buf, len, " len %u \"", r->len);
		for (unsigned i = 0; i < shown && n >= 0 && (size_t)n + 5 < len; i++) {
			unsigned char ch = r->data[i];
			n += ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\'
				? snprintf(buf + n, len - n, "%c", ch)
				: snprintf(buf + n, len - n, "\\x%02x", ch);
		}
		if (n >= 0 && (size_t)n < len)
			snprintf(buf + n, len - n, "%s\"", shown < r->len ? "..." : "");
		break;
	}
	}
}

/* ------------------------------------------------------- packed keys */

/*
 * Each field's width, and where it lies in a header read as five
 * little-endian words (struct bch_bkey's layout), in enum order.
 */
static const uint8_t field_width[BKF_NR] = {
	[BKF_INODE] = 64, [BKF_OFFSET] = 64, [BKF_SNAPSHOT] = 32, [BKF_PAD] = 32,
	[BKF_U64S] = 16, [BKF_TYPE] = 8, [BKF_SIZE] = 32, [BKF_VERSION] = 64, [BKF_FLAGS] = 8,
};
static const uint8_t field_byte[BKF_NR] = {
	[BKF_INODE] = 16, [BKF_OFFSET] = 24, [BKF_SNAPSHOT] = 32, [BKF_PAD] = 36,
	[BKF_U64S] = 0, [BKF_TYPE] = 2, [BKF_SIZE] = 4, [BKF_VERSION] = 8, [BKF_FLAGS] = 3,
};
_Static_assert(64 + 64 + 32 + 16 + 8 + 32 + 64 + 8 + 32 == sizeof(struct bch_bkey) * 8,
	       "the widest packed header is an unpacked one");
_Static_assert(offsetof(struct bch_bkey, p) == 16 && offsetof(struct bch_bkey, size) == 4 &&
	       offsetof(struct bch_bkey, version) == 8 && offsetof(struct bch_bkey, flags) == 3,
	       "field_byte[] follows struct bch_bkey");

static uint64_t width_mask(unsigned w)
{
	return w >= 64 ? UINT64_MAX : (1ULL << w) - 1;
}

/*
 * Every field of k's header, in enum order: read from the struct's own
 * fields (not through the tables), so a caller's loop over them unrolls.
 */
static inline void fields_of(const struct bch_bkey *k, uint64_t v[BKF_NR])
{
	v[BKF_INODE]	= k->p.inode;
	v[BKF_OFFSET]	= k->p.offset;
	v[BKF_SNAPSHOT]	= k->p.snapshot;
	v[BKF_PAD]	= k->p.pad;
	v[BKF_U64S]	= k->u64s;
	v[BKF_TYPE]	= k->type;
	v[BKF_SIZE]	= k->size;
	v[BKF_VERSION]	= k->version;
	v[BKF_FLAGS]	= k->flags;
}

/* v (below 2^w) into zeroed bits at bit off of dst. */
static inline void bits_write(uint64_t *dst, unsigned off, unsigned w, uint64_t v)
{
	if (!w)
		return;
	unsigned word = off / 64, sh = off % 64;

	dst[word] |= v << sh;
	if (sh + w > 64)
		dst[word + 1] |= v >> (64 - sh);
}

/* The offsets, header words and what unpacking reads, from the bases and widths. */
static void format_layout(struct bch_bkey_format *f)
{
	unsigned off = 0;

	memset(f->tmpl, 0, sizeof(f->tmpl));
	f->nr_live = f->nr_live_pos = 0;
	for (unsigned i = 0; i < BKF_NR; i++) {
		unsigned word = field_byte[i] / 8, shift = field_byte[i] % 8 * 8;

		f->off[i] = off;
		f->lim[i] = width_mask(f->bits[i]);
		off += f->bits[i];
		f->tmpl[word] |= f->base[i] << shift;
		if (!f->bits[i])
			continue;
		f->live[f->nr_live++] = (struct bch_bkey_field_at) {
			.off = f->off[i], .bits = f->bits[i], .word = word, .shift = shift, .field = i,
		};
		if (i < BKF_POS_NR)
			f->nr_live_pos = f->nr_live;
	}
	f->key_u64s = off ? (off + 63) / 64 : 1;	/* (never an empty key in an arena) */

	f->pos_fast = !f->bits[BKF_PAD];
	f->pos_only = f->pos_fast && f->nr_live == f->nr_live_pos;
	for (unsigned i = 0; i < 3; i++) {
		unsigned fo = f->off[BKF_INODE + i], w = f->bits[BKF_INODE + i];
		struct bch_bkey_pos_at *a = &f->pos_at[i];

		a->mask = width_mask(w) & (w ? UINT64_MAX : 0);
		a->word = w ? fo / 64 : 0;
		a->shift = w ? fo % 64 : 0;
		a->word2 = w && fo % 64 + w > 64 ? a->word + 1 : a->word;
	}
}

void bch_bkey_format_widest(struct bch_bkey_format *f)
{
	for (unsigned i = 0; i < BKF_NR; i++) {
		f->base[i] = 0;
		f->bits[i] = field_width[i];
	}
	format_layout(f);
}

void bch_bkey_format_state_init(struct bch_bkey_format_state *s)
{
	for (unsigned i = 0; i < BKF_NR; i++) {
		s->lo[i] = UINT64_MAX;
		s->hi[i] = 0;
	}
	s->any = false;
}

static void state_take(struct bch_bkey_format_state *s, unsigned i, uint64_t v)
{
	if (v < s->lo[i])
		s->lo[i] = v;
	if (v > s->hi[i])
		s->hi[i] = v;
}

/* (a pack that chooses a format adds each of a leaf's keys: kept short) */
void bch_bkey_format_add(struct bch_bkey_format_state *s, const struct bch_bkey *k)
{
	uint64_t v[BKF_NR];

	fields_of(k, v);
#pragma GCC unroll 16
	for (unsigned i = 0; i < BKF_NR; i++)
		state_take(s, i, v[i]);
	s->any = true;
}

void bch_bkey_format_add_pos(struct bch_bkey_format_state *s, struct bch_bpos p)
{
	state_take(s, BKF_INODE, p.inode);
	state_take(s, BKF_OFFSET, p.offset);
	state_take(s, BKF_SNAPSHOT, p.snapshot);
	state_take(s, BKF_PAD, p.pad);
}

void bch_bkey_format_done(const struct bch_bkey_format_state *s, struct bch_bkey_format *f)
{
	if (!s->any) {
		bch_bkey_format_widest(f);
		return;
	}
	for (unsigned i = 0; i < BKF_NR; i++) {
		/* a position alone (add_pos) leaves the other fields' lo > hi */
		uint64_t lo = s->lo[i] <= s->hi[i] ? s->lo[i] : 0;
		uint64_t d = s->hi[i] - lo;

		f->base[i] = lo;
		f->bits[i] = d ? 64 - __builtin_clzll(d) : 0;
	}
	format_layout(f);
}

/*
 * The fields v fit f: each from its base to base + 2^bits - 1 (a field of
 * 0 bits: its base).  Without a branch a field: a pack checks every key.
 */
static bool fields_fit(const struct bch_bkey_format *f, const uint64_t v[BKF_NR])
{
	bool ok = true;

#pragma GCC unroll 16
	for (unsigned i = 0; i < BKF_NR; i++)
		ok &= (v[i] >= f->base[i]) & (v[i] - f->base[i] <= f->lim[i]);
	return ok;
}

bool bch_bkey_format_fits(const struct bch_bkey_format *f, const struct bch_bkey *k)
{
	uint64_t v[BKF_NR];

	fields_of(k, v);
	return fields_fit(f, v);
}

size_t bch_bkey_pack(const struct bch_bkey_format *f, const struct bch_bkey *k, uint64_t *dst)
{
	uint64_t v[BKF_NR];

	fields_of(k, v);
	if (k->u64s < BCH_BKEY_U64s || !fields_fit(f, v))
		return 0;
	/* the header's words built here, then stored: (no memset() call a key) */
	uint64_t h[BCH_BKEY_U64s + 1] = { 0 };	/* (+1: bits_write() past a last field) */

	for (unsigned i = 0; i < f->nr_live; i++) {
		const struct bch_bkey_field_at *a = &f->live[i];

		bits_write(h, a->off, a->bits, v[a->field] - f->base[a->field]);
	}
	for (unsigned i = 0; i < f->key_u64s; i++)
		dst[i] = h[i];
	bch_bkey_copy_words(dst + f->key_u64s, (const uint64_t *)k->_data, k->u64s - BCH_BKEY_U64s);
	return bch_bkey_packed_u64s_of(f, k);
}

uint64_t bch_bkey_packed_field(const struct bch_bkey_format *f, const uint64_t *src,
			       enum bch_bkey_field field)
{
	return f->base[field] + (f->bits[field] ? bch_bkey_bits_read(src, f->off[field], f->bits[field]) : 0);
}

size_t bch_bkey_packed_u64s(const struct bch_bkey_format *f, const uint64_t *src)
{
	return f->key_u64s + bch_bkey_packed_field(f, src, BKF_U64S) - BCH_BKEY_U64s;
}
