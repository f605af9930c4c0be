// SPDX-License-Identifier: GPL-2.0
/*
 * fs_ops_xattr.c - extended attributes for the POSIX layer (fs_ops.h): the
 * xattr btree's keys (inline, or in pieces past XATTR_INLINE_MAX), ACLs,
 * file flags (chattr), per-file options (bcachefs.* xattrs), and the
 * hashes and key edits fsck uses on dirents and xattrs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "snapshot.h"
#include "copygc.h"
#include "errcode.h"
#include "extents.h"
#include "fs_ops.h"
#include "hash_table.h"
#include "inode.h"
#include "io.h"
#include "journal.h"
#include "rebalance.h"
#include "reflink.h"
#include "str_hash.h"
#include "super.h"
#include "xattr_effective.h"
#include "fs_ops_shared.h"

/* ------------------------------------------------------------ file flags */

static int v_get_flags(struct bch_fs *c, uint64_t inum, unsigned *fs_flags, uint32_t *project)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return fs_ret_errno(r);
	*fs_flags = bch_inode_flags_to_fs(i.flags);
	*project = i.project;
	return 0;
}

/* The superblock says inodes may hold file flags before the first one does. */
static int flags_feature_enable(struct bch_fs *c)
{
	if (c->sb->features & BCH_FEATURE_INODE_FLAGS)
		return 0;
	c->sb->features |= BCH_FEATURE_INODE_FLAGS;
	int r = bch_write_super(c);
	if (r)
		c->sb->features &= ~BCH_FEATURE_INODE_FLAGS;
	return r;
}

/* fileattr_set_prepare(): who may change what */
static int flags_may_set(const struct bch_inode *i, uint32_t flags, const struct bch_caller *cr)
{
	if (!cr)
		return 0;
	if (cr->uid != i->uid && !cr->cap_fowner)
		return -EPERM;
	if (((i->flags ^ flags) & FLAGS_FROZEN) && !cr->cap_linux_immutable)
		return -EPERM;
	return 0;
}

static int v_set_flags(struct bch_fs *c, uint64_t inum, unsigned fs_flags, uint32_t project,
		       const struct bch_caller *cr)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	uint32_t flags;
	int r;

	if ((r = fs_ino_get(c, &s, inum, &i)))
		return fs_ret_errno(r);
	if ((r = bch_inode_flags_from_fs(fs_flags, &flags)) || (r = flags_may_set(i, flags, cr)))
		return r;
	if ((i->flags & BCH_INODE_FILE_FLAGS) == flags && i->project == project)
		return 0;
	if (c->read_only)
		return -EROFS;
	if ((flags || project) && (r = flags_feature_enable(c)))
		return fs_ret_errno(r);
	i->flags = (i->flags & ~BCH_INODE_FILE_FLAGS) | flags;
	i->project = project;
	fs_touch(i, false);
	return fs_ret_errno(fs_commit_inodes(c, &s));
}

static int v_readdir(struct bch_fs *c, uint64_t dir, uint64_t pos, bch_readdir_fn fn, void *priv)
{
	struct bch_inode di;
	int r = bch_inode_get(c, dir, &di);

	if (r)
		return fs_ret_errno(r);
	if (!S_ISDIR(di.mode))
		return -ENOTDIR;
	if (pos == 0 && (r = fn(priv, ".", 1, bch_view_handle(c, dir), DT_DIR, 1)))
		return r;
	if (pos <= 1 && (r = fn(priv, "..", 2, fs_parent_handle(c, dir, &di), DT_DIR, BCH_HASH_MIN)))
		return r;
	if (pos < BCH_HASH_MIN)
		pos = BCH_HASH_MIN;

	/* in batches, so the callback may change the tree */
	enum { BATCH = 64 };
	struct dirent_copy *batch = malloc(BATCH * sizeof(*batch));
	if (!batch)
		return -ENOMEM;
	for (;;) {
		struct bch_viter it;
		const struct bch_bkey *k;
		unsigned n = 0;
		int err = 0;

		bch_viter_init(&it, c, BCH_BTREE_ID_dirents, POS(dir, pos, 0), POS(dir, BCH_HASH_MAX, 0));
		while (n < BATCH && (k = bch_viter_next(&it, &err))) {
			if (k->type != BCH_BKEY_dirent)
				continue;
			const struct bch_dirent *d = bkey_val(k);
			batch[n].pos = k->p.offset;
			batch[n].inum = fs_dirent_target(c, dir, k, &batch[n].d_type);
			if (!batch[n].inum)
				continue;	/* not shown: see fs_dirent_target() */
			batch[n].len = d->name_len;
			memcpy(batch[n].name, d->name, d->name_len);
			batch[n].name[d->name_len] = 0;
			n++;
		}
		bch_viter_exit(&it);
		if (err) {
			r = fs_ret_errno(err);
			break;
		}
		for (unsigned j = 0; j < n && !r; j++)
			r = fn(priv, batch[j].name, batch[j].len, batch[j].inum, batch[j].d_type,
			       batch[j].pos + 1);
		if (r || n < BATCH)
			break;
		pos = batch[n - 1].pos + 1;
	}
	free(batch);
	return r;
}

/* ------------------------------------------------------ per-file options */

/*
 * The options a file or directory carries in its inode (value + 1, 0:
 * inherit the filesystem's), seen as xattrs "bcachefs.<option>": they are
 * not kept in the xattrs btree.  Only regular files and directories take
 * them (a directory's are copied into the children made in it later:
 * bch_inode_init); removing one makes the inode inherit again.
 */
#define INODE_OPT_PREFIX	"bcachefs."

/* The option id of a per-file option's name ("background_target"), or -1. */
static int inode_opt_lookup(const char *name)
{
	for (unsigned i = 0; i < bch_inode_opts_nr; i++)
		if (!strcmp(name, bch_opt_table[bch_inode_opts[i]].name))
			return bch_inode_opts[i];
	return -1;
}

/*
 * Parse a value of option id: targets by label or device index (and "dev N",
 * as they are shown), the others with the option table.  -EINVAL with the
 * reason in c->err_msg.
 */
static int inode_opt_parse(struct bch_fs *c, enum bch_opt_id id, const char *val, uint64_t *v)
{
	const char *name = bch_opt_table[id].name;
	char err[128];

	if (bch_opt_table[id].type == BCH_OPT_TARGET) {
		const char *t = strncmp(val, "dev ", 4) ? val : val + 4;
		if (bch_target_parse(c->sb, t, v))
			return bch_fs_err(c, -EINVAL, INODE_OPT_PREFIX "%s: '%s' is neither a label "
					  "nor a device index of this filesystem", name, val);
		return 0;
	}
	if (bch_opt_parse(id, val, v, err, sizeof(err)))
		return bch_fs_err(c, -EINVAL, INODE_OPT_PREFIX "%s", err);
	return 0;
}

static void inode_opt_to_text(struct bch_fs *c, enum bch_opt_id id, uint64_t v, char *buf, size_t len)
{
	if (bch_opt_table[id].type == BCH_OPT_TARGET)
		bch_target_to_text(c->sb, v, buf, len);
	else
		bch_opt_to_text(id, v, buf, len);
}

/*
 * Rebalance looks at a file's extents again when the options it acts on
 * change (a work key from its first sector, rebalance.h).  A directory's
 * change reaches only the files made in it later, which get their work
 * recorded when they are written.
 */
static bool inode_opt_needs_rebalance(const struct bch_inode *i, enum bch_opt_id id)
{
	return S_ISREG(i->mode) &&
	       (id == Opt_background_target || id == Opt_background_compression);
}

/*
 * Set (value) or clear (NULL) option id of inum in one inode update, with
 * the XATTR_CREATE / XATTR_REPLACE rules of setxattr (clear: flags 0, and
 * -ENODATA when must_exist and the option is not set).
 */
static int inode_opt_set(struct bch_fs *c, uint64_t inum, enum bch_opt_id id, const char *value,
			 int flags, bool must_exist)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	uint64_t v = 0;
	int r;

	if (value && (r = inode_opt_parse(c, id, value, &v)))
		return r;
	if ((r = fs_ino_get(c, &s, inum, &i)))
		return fs_ret_errno(r);
	if (value && !S_ISREG(i->mode) && !S_ISDIR(i->mode))
		return bch_fs_err(c, -EINVAL, "inode %" PRIu64 ": " INODE_OPT_PREFIX "%s: only "
				  "regular files and directories take file options",
				  inum, bch_opt_table[id].name);
	unsigned old = bch_inode_opt_raw(i, id);
	if ((flags & XATTR_CREATE) && old)
		return -EEXIST;
	if (((flags & XATTR_REPLACE) || must_exist) && !old)
		return -ENODATA;
	/* last: a read-only open tells a caller that everything else passed */
	if (c->read_only)
		return -EROFS;
	if ((r = fs_metadata_room(c)))
		return fs_ret_errno(r);
	unsigned raw = value ? v + 1 : 0;
	if (raw && (r = bch_inode_feature_enable(c, bch_inode_opt_feature(id))))
		return fs_ret_errno(r);
	bch_inode_opt_raw_set(i, id, raw);
	fs_touch(i, false);
	struct btree_trans *t;
	if ((r = bch_trans_init(c, &t)))
		return fs_ret_errno(r);
	r = fs_ino_set_write(c, &s, t);
	/* the work key with the option: no crash leaves the file's data unscheduled */
	if (!r && raw != old && inode_opt_needs_rebalance(i, id))
		r = bch_rebalance_work_set(c, t, inum, 0);
	if (!r)
		r = fs_commit(c, t, NULL);
	bch_trans_exit(t);
	if (!r && raw != old && id == Opt_erasure_code)
		bch_rebalance_kick(c);	/* the stripe builder looks again (ec.h) */
	return fs_ret_errno(r);
}

bool bch_fs_is_inode_opt(const char *name)
{
	return inode_opt_lookup(name) >= 0;
}

static int v_set_inode_opt(struct bch_fs *c, uint64_t inum, const char *opt, const char *value)
{
	int id = inode_opt_lookup(opt);

	if (id < 0)
		return bch_fs_err(c, -EINVAL, "%s: not a per-file option", opt);
	int r = fs_flags_no_change_inum(c, inum);
	return r ? r : inode_opt_set(c, inum, id, value, 0, false);
}

/* "bcachefs.<option>" (name past the prefix) as getxattr. */
static ssize_t inode_opt_xattr_get(struct bch_fs *c, uint64_t inum, const char *name, void *buf,
				   size_t size)
{
	struct bch_inode i;
	char text[128];
	int id = inode_opt_lookup(name), r;

	if (id < 0)
		return -ENODATA;
	if ((r = bch_inode_get(c, inum, &i)))
		return fs_ret_errno(r);
	unsigned raw = bch_inode_opt_raw(&i, id);
	if (!raw)
		return -ENODATA;
	inode_opt_to_text(c, id, raw - 1, text, sizeof(text));
	size_t len = strlen(text);
	if (size && len > size)
		return -ERANGE;
	if (size)
		memcpy(buf, text, len);
	return len;
}

/* "bcachefs.<option>" as setxattr: the value is text, as getxattr gives it. */
static int inode_opt_xattr_set(struct bch_fs *c, uint64_t inum, const char *name, const void *val,
			       size_t size, int flags)
{
	char text[128];
	int id = inode_opt_lookup(name);

	if (id < 0)
		return bch_fs_err(c, -EINVAL, INODE_OPT_PREFIX "%s: not a file option (they are "
				  "foreground_target, background_target, promote_target, compression, "
				  "background_compression, data_checksum, data_replicas, erasure_code)", name);
	if (size >= sizeof(text) || memchr(val, 0, size))
		return bch_fs_err(c, -EINVAL, INODE_OPT_PREFIX "%s: not a value of the option", name);
	memcpy(text, val, size);
	text[size] = 0;
	return inode_opt_set(c, inum, id, text, flags, false);
}

/* Append the names of inode's set options to a listxattr buffer at *total. */
static int inode_opt_xattr_list(const struct bch_inode *i, char *buf, size_t size, size_t *total)
{
	for (unsigned n = 0; n < bch_inode_opts_nr; n++) {
		if (!bch_inode_opt_raw(i, bch_inode_opts[n]))
			continue;
		const char *name = bch_opt_table[bch_inode_opts[n]].name;
		size_t pl = strlen(INODE_OPT_PREFIX), need = pl + strlen(name) + 1;
		if (size) {
			if (*total + need > size)
				return -ERANGE;
			memcpy(buf + *total, INODE_OPT_PREFIX, pl);
			memcpy(buf + *total + pl, name, need - pl);
		}
		*total += need;
	}
	return 0;
}

/* ---------------------------------------------------------------- xattrs */

struct xattr_key {
	unsigned	ns;
	const char	*name;
	size_t		len;
};

static const struct {
	const char	*prefix;
	unsigned	ns;
	bool		whole;	/* the prefix is the whole name */
} xattr_prefixes[] = {
#define x(n, id, prefix)	{ prefix, id, id >= BCH_XATTR_posix_acl_access },
	BCH_XATTR_NAMESPACES()
#undef x
};

static int xattr_parse(const char *name, struct xattr_key *k)
{
	for (unsigned i = 0; i < sizeof(xattr_prefixes) / sizeof(xattr_prefixes[0]); i++) {
		size_t pl = strlen(xattr_prefixes[i].prefix);
		if (xattr_prefixes[i].whole ? strcmp(name, xattr_prefixes[i].prefix)
					    : strncmp(name, xattr_prefixes[i].prefix, pl))
			continue;
		k->ns = xattr_prefixes[i].ns;
		k->name = name + pl;
		k->len = strlen(k->name);
		if (!xattr_prefixes[i].whole && !k->len)
			return -EINVAL;
		if (strlen(name) > 255)
			return -ERANGE;
		return 0;
	}
	return -EOPNOTSUPP;
}

static bool xattr_match(const struct bch_bkey *k, const void *key)
{
	const struct bch_xattr *x = bkey_val(k);
	const struct xattr_key *xk = key;

	return x->ns == xk->ns && x->name_len == xk->len && !memcmp(x->data, xk->name, xk->len);
}

static const struct bch_hash_desc xattr_desc = {
	.btree_id	= BCH_BTREE_ID_xattrs,
	.key_type	= BCH_BKEY_xattr,
	.match		= xattr_match,
};

static uint64_t xattr_hash(struct bch_fs *c, const struct bch_inode *i, const struct xattr_key *k)
{
	char buf[1 + 256];

	buf[0] = k->ns;
	memcpy(buf + 1, k->name, k->len);
	return bch_hash_slot(bch_str_hash(c->sb->str_hash_key, i->hash_seed, buf, 1 + k->len));
}

/*
 * Values (bcachefs_format.h): name and value together up to XATTR_INLINE_MAX
 * bytes stay in the xattr key; a longer value goes into xattr_piece keys
 * under an id of its own.  A change is written as: the new pieces, then the
 * xattr key with the inode, then the deletion of the old pieces.  These are
 * packed into as few transactions as the node and journal sizes allow: with
 * the default 256 KiB nodes a 64 KiB value is one transaction; with small
 * nodes a crash in between leaves pieces no xattr key names, which fsck
 * removes (xattr_piece_orphan), and never a value made of two versions.
 */
#define XATTR_INLINE_MAX	BCH_XATTR_PIECE_BYTES
#define XATTR_INODE_U64S	64	/* room for the inode key in a batch */

static uint64_t piece_pos_end(uint32_t id)
{
	return BCH_XATTR_PIECE_POS(id, 127);
}

/*
 * Keys committed in order in as few transactions as fit: a transaction's
 * keys must fit half a node (bch_trans_max_u64s()) and an open journal
 * entry, which is half a bucket less a quarter kept for internal use.
 */
struct xbatch {
	struct bch_fs		*c;
	struct btree_trans	*t;
	size_t			used, max;
};

static int xbatch_init(struct bch_fs *c, struct xbatch *b)
{
	b->c = c;
	b->used = 0;
	b->max = bch_trans_max_u64s(c) * 5 / 8;
	return bch_trans_init(c, &b->t);
}

/* Make room for u64s more words, committing what is queued if need be. */
static int xbatch_room(struct xbatch *b, size_t u64s)
{
	if (b->used && b->used + u64s > b->max) {
		int r = fs_commit(b->c, b->t, NULL);
		if (r)
			return r;
		b->used = 0;
	}
	b->used += u64s;
	return 0;
}

static int xbatch_add(struct xbatch *b, struct bch_bkey *k)
{
	int r = xbatch_room(b, 1 + k->u64s);

	if (!r)
		r = bch_trans_update(b->t, BCH_BTREE_ID_xattrs, k);
	free(k);
	return r;
}

/* Queue the deletion of the pieces of a value (last first). */
static int xattr_pieces_delete(struct xbatch *b, uint64_t inum, uint32_t pieces)
{
	int r = 0;

	for (unsigned n = BCH_XATTR_PIECES_NR(pieces); n-- && !r; )
		r = xbatch_add(b, bch_bkey_alloc(BCH_BKEY_deleted,
			POS(inum, BCH_XATTR_PIECE_POS(BCH_XATTR_PIECES_ID(pieces), n), 0), 0));
	return r;
}

/* An id no piece of inum uses: from one derived from the slot, upwards. */
static int xattr_id_alloc(struct bch_fs *c, uint64_t inum, uint64_t slot, uint32_t *id)
{
	for (uint32_t n = 0; n <= BCH_XATTR_ID_MAX; n++) {
		uint32_t cand = (uint32_t)(slot + n) & BCH_XATTR_ID_MAX;
		struct bch_bkey *k;
		int r = bch_vpeek(c, BCH_BTREE_ID_xattrs, POS(inum, BCH_XATTR_PIECE_POS(cand, 0), 0),
				       POS(inum, piece_pos_end(cand), 0), &k);
		if (r == -BCH_ERR_key_not_found) {
			*id = cand;
			return 0;
		}
		if (r)
			return r;
		free(k);
	}
	return -ENOSPC;
}

/*
 * Read the value kept in pieces into buf (when size is not 0): its length,
 * -ERANGE when it is longer than size, -EIO when a piece is missing or of
 * the wrong length (fsck: xattr_piece_missing).
 */
static ssize_t xattr_pieces_read(struct bch_fs *c, uint64_t inum, uint32_t pieces, void *buf,
				 size_t size)
{
	uint32_t id = BCH_XATTR_PIECES_ID(pieces);
	unsigned nr = BCH_XATTR_PIECES_NR(pieces), next = 0;
	struct bch_viter it;
	const struct bch_bkey *k;
	size_t total = 0;
	int err = 0;

	bch_viter_init(&it, c, BCH_BTREE_ID_xattrs, POS(inum, BCH_XATTR_PIECE_POS(id, 0), 0),
			    POS(inum, piece_pos_end(id), 0));
	while ((k = bch_viter_next(&it, &err))) {
		if (k->type != BCH_BKEY_xattr_piece)
			continue;
		const struct bch_xattr_piece *p = bkey_val(k);
		unsigned n = BCH_XATTR_PIECE_POS_N(k->p.offset);
		if (n != next++ || n >= nr ||
		    (n + 1 < nr ? p->len != BCH_XATTR_PIECE_BYTES : !p->len)) {
			err = -EIO;
			break;
		}
		if (size && total + p->len <= size)
			memcpy((char *)buf + total, p->data, p->len);
		total += p->len;
	}
	bch_viter_exit(&it);
	if (!err && next != nr)
		err = -EIO;
	if (err)
		return err == -EIO ? bch_fs_err(c, -EIO, "inode %" PRIu64 ": xattr value id %u: "
						"piece %u of %u missing or damaged", inum, id, next, nr)
				   : err;
	if (size && total > size)
		return -ERANGE;
	return (ssize_t)total;
}

static bool is_inode_opt_xattr(const char *name)
{
	return !strncmp(name, INODE_OPT_PREFIX, strlen(INODE_OPT_PREFIX));
}

/*
 * Does inum have no xattr key, in any snapshot?  Then a get or a remove
 * answers -ENODATA without reading the inode or hashing the name: untar
 * asks for security.capability before a file's first write, removes it at
 * the write, and asks again at a chown (~2.3k instructions each, of which
 * this check is ~0.6k).  An inode that does not exist then has none too:
 * handles come from lookups, and the mount frees an inode only at its
 * forget.  An error here is the slow path's to report.
 */
static bool xattrs_none(struct bch_fs *c, uint64_t inum)
{
	int r = bch_btree_any(c, BCH_BTREE_ID_xattrs, POS(inum, 0, 0),
			      POS(inum, UINT64_MAX, UINT32_MAX));

	if (r < 0)
		c->err_msg[0] = 0;
	return !r;
}

static ssize_t v_getxattr(struct bch_fs *c, uint64_t inum, const char *name, void *buf, size_t size)
{
	struct bch_inode i;
	struct xattr_key xk;
	struct bch_bkey *k;

	if (is_inode_opt_xattr(name))
		return inode_opt_xattr_get(c, inum, name + strlen(INODE_OPT_PREFIX), buf, size);
	if (bch_xattr_is_effective(name))
		return bch_xattr_effective_get(c, inum, name, buf, size);
	int r = xattr_parse(name, &xk);
	if (r)
		return r == -EOPNOTSUPP ? -ENODATA : r;
	if (xattrs_none(c, inum))
		return -ENODATA;
	if ((r = bch_inode_get(c, inum, &i)))
		return fs_ret_errno(r);
	r = bch_hash_lookup(c, &xattr_desc, inum, xattr_hash(c, &i, &xk), &xk, &k);
	if (r)
		return r == -ENOENT ? -ENODATA : fs_ret_errno(r);
	const struct bch_xattr *x = bkey_val(k);
	ssize_t len = x->val_len;
	if (x->pieces)
		len = xattr_pieces_read(c, inum, x->pieces, buf, size);
	else if (size && (size_t)len > size)
		len = -ERANGE;
	else if (size)
		memcpy(buf, x->data + x->name_len, len);
	free(k);
	return len < 0 ? fs_ret_errno((int)len) : len;
}

/* The pieces field of the xattr at slot, 0 when there is none or it is inline. */
static int xattr_pieces_at(struct bch_fs *c, uint64_t inum, uint64_t slot, uint32_t *pieces)
{
	struct bch_bkey *k;
	int r = bch_vlookup(c, BCH_BTREE_ID_xattrs, POS(inum, slot, 0), &k);

	*pieces = 0;
	if (r == -BCH_ERR_key_not_found)
		return 0;
	if (r)
		return r;
	if (k->type == BCH_BKEY_xattr)
		*pieces = ((const struct bch_xattr *)bkey_val(k))->pieces;
	free(k);
	return 0;
}

/* mode (not NULL): the inode's permission bits change in the same transaction (ACLs) */
static int xattr_set(struct bch_fs *c, uint64_t inum, const char *name, const void *val,
		     size_t size, int flags, const mode_t *mode)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	struct xattr_key xk;
	struct xbatch b;
	uint64_t slot;
	uint32_t old = 0, pieces = 0;
	bool exists;

	if (is_inode_opt_xattr(name))
		return inode_opt_xattr_set(c, inum, name + strlen(INODE_OPT_PREFIX), val, size, flags);
	if (bch_xattr_is_effective(name))
		return bch_xattr_effective_set(c, name);
	int r = xattr_parse(name, &xk);
	if (r)
		return r;
	if (size > BCH_XATTR_SIZE_MAX)
		return -E2BIG;
	if (c->read_only)
		return -EROFS;
	if ((r = fs_metadata_room(c)))
		return fs_ret_errno(r);
	if ((r = fs_ino_get(c, &s, inum, &i)))
		return fs_ret_errno(r);
	if ((r = bch_hash_find_slot(c, &xattr_desc, inum, xattr_hash(c, i, &xk), &xk, &slot, &exists)))
		return fs_ret_errno(r);
	if ((flags & XATTR_CREATE) && exists)
		return -EEXIST;
	if ((flags & XATTR_REPLACE) && !exists)
		return -ENODATA;
	if (exists && (r = xattr_pieces_at(c, inum, slot, &old)))
		return fs_ret_errno(r);
	bool split = xk.len + size > XATTR_INLINE_MAX;
	if (split) {
		uint32_t id = 0;
		if ((r = xattr_id_alloc(c, inum, slot, &id)))
			return fs_ret_errno(r);
		pieces = BCH_XATTR_PIECES(id, (size + BCH_XATTR_PIECE_BYTES - 1) / BCH_XATTR_PIECE_BYTES);
	}
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_xattr, POS(inum, slot, 0),
					    sizeof(struct bch_xattr) + xk.len + (split ? 0 : size));
	struct bch_xattr *x = bkey_val(k);
	x->ns = xk.ns;
	x->name_len = xk.len;
	x->val_len = split ? 0 : size;
	x->pieces = pieces;
	memcpy(x->data, xk.name, xk.len);
	if (size && !split)
		memcpy(x->data + xk.len, val, size);
	fs_touch(i, false);
	if (mode)
		i->mode = (i->mode & S_IFMT) | (*mode & 07777);
	if ((r = xbatch_init(c, &b))) {
		free(k);
		return fs_ret_errno(r);
	}
	for (unsigned n = 0; n < BCH_XATTR_PIECES_NR(pieces) && !r; n++) {
		size_t off = (size_t)n * BCH_XATTR_PIECE_BYTES;
		size_t len = size - off < BCH_XATTR_PIECE_BYTES ? size - off : BCH_XATTR_PIECE_BYTES;
		struct bch_bkey *pk = bch_bkey_alloc(BCH_BKEY_xattr_piece,
			POS(inum, BCH_XATTR_PIECE_POS(BCH_XATTR_PIECES_ID(pieces), n), 0),
			sizeof(struct bch_xattr_piece) + len);
		struct bch_xattr_piece *p = bkey_val(pk);
		p->len = len;
		memcpy(p->data, (const char *)val + off, len);
		r = xbatch_add(&b, pk);
	}
	/* the xattr key and the inode in one transaction */
	if (!r)
		r = xbatch_room(&b, 1 + k->u64s + XATTR_INODE_U64S);
	if (!r)
		r = bch_trans_update(b.t, BCH_BTREE_ID_xattrs, k);
	if (!r)
		r = fs_ino_set_write(c, &s, b.t);
	if (!r)
		r = xattr_pieces_delete(&b, inum, old);
	if (!r)
		r = fs_commit(c, b.t, NULL);
	bch_trans_exit(b.t);
	free(k);
	return fs_ret_errno(r);
}

static int v_setxattr(struct bch_fs *c, uint64_t inum, const char *name, const void *val,
		      size_t size, int flags)
{
	int r = fs_flags_no_change_inum(c, inum);

	return r ? r : xattr_set(c, inum, name, val, size, flags, NULL);
}

static ssize_t v_listxattr(struct bch_fs *c, uint64_t inum, char *buf, size_t size)
{
	struct bch_inode i;
	struct bch_viter it;
	const struct bch_bkey *k;
	size_t total = 0;
	int err = 0, r = bch_inode_get(c, inum, &i);

	if (r)
		return fs_ret_errno(r);
	/* names only: the pieces, above the hash range, are not visited */
	bch_viter_init(&it, c, BCH_BTREE_ID_xattrs, POS(inum, 0, 0), POS(inum, BCH_HASH_MAX, 0));
	while ((k = bch_viter_next(&it, &err))) {
		if (k->type != BCH_BKEY_xattr)
			continue;
		const struct bch_xattr *x = bkey_val(k);
		const char *prefix = xattr_prefixes[x->ns - 1].prefix;
		size_t pl = strlen(prefix), need = pl + x->name_len + 1;
		if (size) {
			if (total + need > size) {
				total = (size_t)-ERANGE;
				break;
			}
			memcpy(buf + total, prefix, pl);
			memcpy(buf + total + pl, x->data, x->name_len);
			buf[total + need - 1] = 0;
		}
		total += need;
	}
	bch_viter_exit(&it);
	if (err)
		return fs_ret_errno(err);
	if (total == (size_t)-ERANGE || (err = inode_opt_xattr_list(&i, buf, size, &total)) ||
	    (err = bch_xattr_effective_list(&i, buf, size, &total)))
		return -ERANGE;
	return (ssize_t)total;
}

static int xattr_remove(struct bch_fs *c, uint64_t inum, const char *name, const mode_t *mode)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	struct xattr_key xk;
	struct bch_bkey *k;
	struct xbatch b;

	if (is_inode_opt_xattr(name)) {
		int id = inode_opt_lookup(name + strlen(INODE_OPT_PREFIX));
		return id < 0 ? -ENODATA : inode_opt_set(c, inum, id, NULL, 0, true);
	}
	if (bch_xattr_is_effective(name))
		return bch_xattr_effective_set(c, name);
	int r = xattr_parse(name, &xk);
	if (r)
		return r == -EOPNOTSUPP ? -ENODATA : r;
	if (c->read_only)
		return -EROFS;
	if (xattrs_none(c, inum))
		return -ENODATA;
	if ((r = fs_ino_get(c, &s, inum, &i)))
		return fs_ret_errno(r);
	r = bch_hash_lookup(c, &xattr_desc, inum, xattr_hash(c, i, &xk), &xk, &k);
	if (r)
		return r == -ENOENT ? -ENODATA : fs_ret_errno(r);
	uint64_t slot = k->p.offset;
	uint32_t pieces = ((const struct bch_xattr *)bkey_val(k))->pieces;
	free(k);
	fs_touch(i, false);
	if (mode)
		i->mode = (i->mode & S_IFMT) | (*mode & 07777);
	if ((r = xbatch_init(c, &b)))
		return fs_ret_errno(r);
	/* the name first: a crash after it leaves pieces fsck removes */
	r = xbatch_room(&b, 2 * (1 + BCH_BKEY_U64s) + XATTR_INODE_U64S);
	if (!r)
		r = bch_hash_delete_at(c, b.t, &xattr_desc, inum, slot, 0);
	if (!r)
		r = fs_ino_set_write(c, &s, b.t);
	if (!r)
		r = xattr_pieces_delete(&b, inum, pieces);
	if (!r)
		r = fs_commit(c, b.t, NULL);
	bch_trans_exit(b.t);
	return fs_ret_errno(r);
}

static int v_removexattr(struct bch_fs *c, uint64_t inum, const char *name)
{
	int r = fs_flags_no_change_inum(c, inum);

	return r ? r : xattr_remove(c, inum, name, NULL);
}

static int v_set_acl(struct bch_fs *c, uint64_t inum, const void *acl, size_t size, mode_t mode)
{
	const char *name = "system.posix_acl_access";
	int r = fs_flags_no_change_inum(c, inum);

	if (r)
		return r;
	if (acl)
		return xattr_set(c, inum, name, acl, size, 0, &mode);
	r = xattr_remove(c, inum, name, &mode);
	if (r != -ENODATA)
		return r;
	struct bch_setattr sa = { .valid = BCH_SETATTR_MODE, .mode = mode };
	return bch_fs_setattr(c, inum, &sa);
}

/* ------------------------------------------------------- fsck support */

uint64_t bch_fs_dirent_hash(struct bch_fs *c, const struct bch_inode *dir, const char *name)
{
	return fs_dirent_hash(c, dir, name);
}

static int v_dirent_first(struct bch_fs *c, uint64_t dir, const struct bch_inode *di, const char *name,
			uint64_t *slot)
{
	struct bch_bkey *k;
	int r = fs_dirent_lookup(c, dir, di, name, &k);

	if (!r) {
		*slot = k->p.offset;
		free(k);
	}
	return r;
}

static int v_dirent_add(struct bch_fs *c, uint64_t dir, const char *name, uint64_t inum, unsigned d_type)
{
	struct bch_inode di;
	struct btree_trans *t;
	uint64_t slot;
	int r = bch_inode_get(c, dir, &di);

	if (!r)
		r = fs_dirent_new_slot(c, dir, &di, name, &slot);
	if (!r && !(r = bch_trans_init(c, &t))) {
		r = fs_dirent_put(t, dir, slot, name, inum, d_type);
		if (!r)
			r = fs_commit(c, t, NULL);
		bch_trans_exit(t);
	}
	return r;
}

static int v_dirent_delete(struct bch_fs *c, uint64_t dir, uint64_t slot)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (!r) {
		r = bch_hash_delete_at(c, t, &fs_dirent_desc, dir, slot, 0);
		if (!r)
			r = fs_commit(c, t, NULL);
		bch_trans_exit(t);
	}
	return r;
}

uint64_t bch_fs_xattr_hash(struct bch_fs *c, const struct bch_inode *i, const struct bch_bkey *k)
{
	const struct bch_xattr *x = bkey_val(k);
	struct xattr_key xk = { x->ns, (const char *)x->data, x->name_len };

	return xattr_hash(c, i, &xk);
}

static int v_xattr_first(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
		       const struct bch_bkey *k, uint64_t *slot)
{
	const struct bch_xattr *x = bkey_val(k);
	struct xattr_key xk = { x->ns, (const char *)x->data, x->name_len };
	struct bch_bkey *found;
	int r = bch_hash_lookup(c, &xattr_desc, inum, xattr_hash(c, i, &xk), &xk, &found);

	if (!r) {
		*slot = found->p.offset;
		free(found);
	}
	return r;
}

static int v_xattr_reinsert(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
			  const struct bch_bkey *k)
{
	const struct bch_xattr *x = bkey_val(k);
	struct xattr_key xk = { x->ns, (const char *)x->data, x->name_len };
	struct btree_trans *t;
	uint64_t slot;
	bool exists;
	int r = bch_trans_init(c, &t);

	if (r)
		return r;
	/* out of its chain: remove it, then insert it where lookups will look */
	r = bch_hash_delete_at(c, t, &xattr_desc, inum, k->p.offset, 0);
	if (!r)
		r = fs_commit(c, t, NULL);
	if (!r)
		r = bch_hash_find_slot(c, &xattr_desc, inum, xattr_hash(c, i, &xk), &xk, &slot, &exists);
	if (!r) {
		struct bch_bkey *n = bch_bkey_dup(k);
		n->p.offset = slot;
		r = bch_trans_update(t, BCH_BTREE_ID_xattrs, n);
		free(n);
		if (!r)
			r = fs_commit(c, t, NULL);
	}
	bch_trans_exit(t);
	return r;
}

static int v_xattr_pieces_check(struct bch_fs *c, uint64_t inum, uint32_t pieces)
{
	ssize_t r = xattr_pieces_read(c, inum, pieces, NULL, 0);

	return r < 0 ? (int)r : 0;
}

static int v_xattr_pieces_drop(struct bch_fs *c, uint64_t inum, uint32_t id, unsigned from)
{
	struct xbatch b;
	struct bch_bkey *k;
	uint64_t pos = BCH_XATTR_PIECE_POS(id, from);
	int r = xbatch_init(c, &b);

	if (r)
		return r;
	while (!(r = bch_vpeek(c, BCH_BTREE_ID_xattrs, POS(inum, pos, 0),
				    POS(inum, piece_pos_end(id), 0), &k))) {
		pos = k->p.offset + 1;
		free(k);
		r = xbatch_add(&b, bch_bkey_alloc(BCH_BKEY_deleted, POS(inum, pos - 1, 0), 0));
		if (r)
			break;
	}
	if (r == -BCH_ERR_key_not_found)
		r = fs_commit(c, b.t, NULL);
	bch_trans_exit(b.t);
	return r;
}

static int v_xattr_delete_at(struct bch_fs *c, uint64_t inum, uint64_t slot)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (r)
		return r;
	r = bch_hash_delete_at(c, t, &xattr_desc, inum, slot, 0);
	if (!r)
		r = fs_commit(c, t, NULL);
	bch_trans_exit(t);
	return r;
}

static int v_inode_free(struct bch_fs *c, uint64_t inum)
{
	return fs_inode_free(c, inum);
}

/* ------------------------------------------- entry points: views of handles */

int bch_fs_get_flags(struct bch_fs *c, uint64_t inum, unsigned *fs_flags, uint32_t *project)
{
	return VIEW_CALL(c, inum, v_get_flags(c, inum, fs_flags, project));
}

int bch_fs_set_flags(struct bch_fs *c, uint64_t inum, unsigned fs_flags, uint32_t project,
		     const struct bch_caller *cr)
{
	return VIEW_CALL(c, inum, v_set_flags(c, inum, fs_flags, project, cr));
}

int bch_fs_readdir(struct bch_fs *c, uint64_t dir, uint64_t pos, bch_readdir_fn fn, void *priv)
{
	return VIEW_CALL(c, dir, v_readdir(c, dir, pos, fn, priv));
}

int bch_fs_set_inode_opt(struct bch_fs *c, uint64_t inum, const char *opt, const char *value)
{
	return VIEW_CALL(c, inum, v_set_inode_opt(c, inum, opt, value));
}

ssize_t bch_fs_getxattr(struct bch_fs *c, uint64_t inum, const char *name, void *buf, size_t size)
{
	return VIEW_CALL(c, inum, v_getxattr(c, inum, name, buf, size));
}

int bch_fs_setxattr(struct bch_fs *c, uint64_t inum, const char *name, const void *val,
		    size_t size, int flags)
{
	return VIEW_CALL(c, inum, v_setxattr(c, inum, name, val, size, flags));
}

ssize_t bch_fs_listxattr(struct bch_fs *c, uint64_t inum, char *buf, size_t size)
{
	return VIEW_CALL(c, inum, v_listxattr(c, inum, buf, size));
}

int bch_fs_removexattr(struct bch_fs *c, uint64_t inum, const char *name)
{
	return VIEW_CALL(c, inum, v_removexattr(c, inum, name));
}

int bch_fs_kill_caps(struct bch_fs *c, uint64_t inum)
{
	return VIEW_CALL(c, inum, xattr_remove(c, inum, "security.capability", NULL));
}

int bch_fs_dirent_first(struct bch_fs *c, uint64_t dir, const struct bch_inode *di, const char *name,
			uint64_t *slot)
{
	return VIEW_CALL(c, dir, v_dirent_first(c, dir, di, name, slot));
}

int bch_fs_dirent_add(struct bch_fs *c, uint64_t dir, const char *name, uint64_t inum, unsigned d_type)
{
	return VIEW_CALL(c, dir, v_dirent_add(c, dir, name, inum, d_type));
}

int bch_fs_dirent_delete(struct bch_fs *c, uint64_t dir, uint64_t slot)
{
	return VIEW_CALL(c, dir, v_dirent_delete(c, dir, slot));
}

int bch_fs_xattr_first(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
		       const struct bch_bkey *k, uint64_t *slot)
{
	return VIEW_CALL(c, inum, v_xattr_first(c, inum, i, k, slot));
}

int bch_fs_xattr_reinsert(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
			  const struct bch_bkey *k)
{
	return VIEW_CALL(c, inum, v_xattr_reinsert(c, inum, i, k));
}

int bch_fs_xattr_pieces_check(struct bch_fs *c, uint64_t inum, uint32_t pieces)
{
	return VIEW_CALL(c, inum, v_xattr_pieces_check(c, inum, pieces));
}

int bch_fs_xattr_pieces_drop(struct bch_fs *c, uint64_t inum, uint32_t id, unsigned from)
{
	return VIEW_CALL(c, inum, v_xattr_pieces_drop(c, inum, id, from));
}

int bch_fs_xattr_delete_at(struct bch_fs *c, uint64_t inum, uint64_t slot)
{
	return VIEW_CALL(c, inum, v_xattr_delete_at(c, inum, slot));
}

int bch_fs_inode_free(struct bch_fs *c, uint64_t inum)
{
	return VIEW_CALL(c, inum, v_inode_free(c, inum));
}

int bch_fs_set_acl(struct bch_fs *c, uint64_t inum, const void *acl, size_t size, mode_t mode)
{
	return VIEW_CALL(c, inum, v_set_acl(c, inum, acl, size, mode));
}
