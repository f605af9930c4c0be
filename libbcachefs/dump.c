// SPDX-License-Identifier: GPL-2.0
/*
 * dump.c - the metadata ranges of a filesystem, for `bcachefs dump`.
 * See dump.h for what counts as metadata and the invariants.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "alloc.h"
#include "alloc_btree.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "checksum.h"
#include "btree.h"
#include "crypt.h"
#include "fs_ops.h"
#include "str_hash.h"
#include "dump.h"
#include "snapshot.h"
#include "super.h"

static int add(struct bch_dump_ranges *d, unsigned dev, uint64_t off, uint64_t len,
	       uint64_t dev_size)
{
	if (off >= dev_size || !len)
		return 0;
	if (len > dev_size - off)
		len = dev_size - off;
	if (d->nr == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 256;
		struct bch_dump_range *n = realloc(d->r, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		d->r = n;
		d->cap = cap;
	}
	d->r[d->nr++] = (struct bch_dump_range) { dev, off, len };
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct bch_dump_range *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Sort, then merge overlapping and touching ranges. */
static void merge(struct bch_dump_ranges *d)
{
	size_t o = 0;

	qsort(d->r, d->nr, sizeof(*d->r), cmp_range);
	for (size_t i = 0; i < d->nr; i++) {
		struct bch_dump_range *p = o ? &d->r[o - 1] : NULL, *r = &d->r[i];

		if (p && p->dev == r->dev && r->offset <= p->offset + p->len) {
			uint64_t end = r->offset + r->len;
			if (end > p->offset + p->len)
				p->len = end - p->offset;
		} else {
			d->r[o++] = *r;
		}
	}
	d->nr = o;
}

static int sb_ranges(struct bch_fs *c, struct bch_dump_ranges *d, unsigned dev, uint64_t size)
{
	const struct bch_member *m = bch_sb_member(c->sb, dev);
	const struct bch_sb_layout *l = &c->devs[dev]->disk_sb->layout;
	uint64_t area = (uint64_t)m->first_bucket * m->bucket_size << BCH_SECTOR_SHIFT;
	uint64_t copy = (uint64_t)BCH_SECTOR_SIZE << l->sb_max_size_bits;
	int r;

	if ((r = add(d, dev, 0, area, size)))
		return r;
	d->sb_bytes += area;
	for (unsigned i = 0; i < l->nr_superblocks && i < BCH_SB_LAYOUT_MAX; i++) {
		if ((r = add(d, dev, l->sb_offset[i] << BCH_SECTOR_SHIFT, copy, size)))
			return r;
		d->sb_bytes += copy;
	}
	return 0;
}

static int journal_ranges(struct bch_fs *c, struct bch_dump_ranges *d, const uint64_t *sizes)
{
	struct bch_sb_field_journal *j = bch_sb_get_journal(c->sb);

	if (!j)
		return 0;
	size_t nr = (j->field.u64s * 8 - sizeof(j->field)) / sizeof(j->runs[0]);
	for (size_t i = 0; i < nr; i++) {
		unsigned dev = j->runs[i].dev;
		if (dev >= c->nr_devs || !sizes[dev])
			continue;
		uint64_t bb = (uint64_t)bch_sb_member(c->sb, dev)->bucket_size << BCH_SECTOR_SHIFT;
		int r = add(d, dev, j->runs[i].start * bb, j->runs[i].nr * bb, sizes[dev]);
		if (r)
			return r;
		d->journal_bytes += j->runs[i].nr * bb;
	}
	return 0;
}

/*
 * A node slot being measured: the slot's bytes read so far (buf[0..have)),
 * grown on demand in blocks.
 */
struct slot {
	struct bch_fs	*c;
	unsigned	dev;
	uint64_t	where;		/* byte offset of the slot on dev */
	char		*buf;		/* btree_node_size bytes */
	size_t		have, nb, bs;	/* read; node bytes; block bytes */
};

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* Make buf hold at least bytes of the slot (and the block after: cheap). */
static int slot_need(struct slot *s, size_t bytes)
{
	if (bytes <= s->have)
		return 0;
	size_t more = round_up(bytes, s->bs) + s->bs;
	if (more < 64 << 10 && s->have)
		more = 64 << 10;	/* a node past its first block: most are tens of KiB */
	if (more > s->nb)
		more = s->nb;
	int r = bch_dev_read(s->c->devs[s->dev]->bdev, s->buf + s->have, more - s->have,
			     s->where + s->have);
	if (!r)
		s->have = more;
	return r;
}

/* Does the bset at byte off (header e, keys after it) verify as one of node n's? */
static bool bset_ok(struct slot *s, const struct bch_btree_node *n, size_t off,
		    const struct bch_bset *i, struct bch_csum csum)
{
	size_t kb = (size_t)i->u64s * 8;

	if (n->csum_type == BCH_CSUM_chacha20_poly1305)
		return !bch_crypt_bset_verify(s->c, n->seq, off, i->journal_seq, i, sizeof(*i),
					      i->_data, kb, csum);
	return !bch_csum_verify(n->csum_type, i, sizeof(*i) + kb, csum);
}

/*
 * The header at off carries another seq than node n: is it a bset of n whose
 * seq alone was damaged (the node reader's fsck check, seq_damaged())?
 */
static int seq_damaged(struct slot *s, const struct bch_btree_node *n, size_t off, bool *yes)
{
	const struct bch_btree_node_entry *e = (const void *)(s->buf + off);
	size_t end = off + sizeof(*e) + (size_t)e->keys.u64s * 8;
	int r;

	*yes = false;
	if (e->keys.version < BCH_VERSION_MIN || e->keys.version > s->c->sb->version ||
	    end > s->nb || !e->keys.u64s || !e->keys.journal_seq)
		return 0;
	if ((r = slot_need(s, end)))
		return r;
	e = (const void *)(s->buf + off);
	n = (const void *)s->buf;
	size_t bytes = sizeof(e->keys) + (size_t)e->keys.u64s * 8;
	struct bch_bset *copy = malloc(bytes);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, &e->keys, bytes);
	copy->seq = n->seq;
	*yes = bset_ok(s, n, off, copy, e->csum);
	free(copy);
	return 0;
}

/*
 * How much of the node slot at s->where to keep (*keep) and whether it
 * starts with a node header of this filesystem (*node).
 *
 * A node whose every bset verifies is kept from its start through the
 * block after its last bset: the node reader (btree_io.c) and the node scan
 * stop at the first block whose header carries another seq and look no
 * further, so what lies past that block (space never written in this life
 * of the node, or an older life's bsets) reads the same as zeros.  Anything
 * else is kept whole, so that every reader meets the same bytes as on the
 * original: no node header (damage, or space never used: zeros, which cost
 * nothing), a bad checksum or size anywhere (the torn-append rule and fsck
 * look through the whole node), a stopping block that is a bset of the node
 * with a damaged seq, or an encrypted node without the key.
 */
static int node_keep(struct slot *s, size_t *keep, bool *node)
{
	const struct bch_btree_node *n;
	int r;

	*keep = s->nb;
	*node = false;
	s->have = 0;
	if ((r = slot_need(s, BCH_SECTOR_SIZE)))
		return r;
	n = (const void *)s->buf;
	if (n->magic != BCH_BTREE_NODE_MAGIC || memcmp(n->fs_uuid, s->c->sb->uuid, BCH_UUID_SIZE))
		return 0;
	*node = true;
	if (!bch_csum_type_valid(n->csum_type) || !n->seq || n->keys.seq != n->seq ||
	    (n->csum_type == BCH_CSUM_chacha20_poly1305 && !bch_fs_encrypted(s->c)))
		return 0;
	size_t end = sizeof(*n) + (size_t)n->keys.u64s * 8;
	if (end > s->nb)
		return 0;
	if ((r = slot_need(s, end)))
		return r;
	n = (const void *)s->buf;
	bool ok = n->csum_type == BCH_CSUM_chacha20_poly1305
		? !bch_crypt_bset_verify(s->c, n->seq, 0, n->keys.journal_seq, &n->magic,
					 sizeof(*n) - sizeof(n->csum), n->keys._data,
					 (size_t)n->keys.u64s * 8, n->csum)
		: !bch_csum_verify(n->csum_type, &n->magic, end - sizeof(n->csum), n->csum);
	if (!ok)
		return 0;

	size_t off = round_up(end, s->bs);
	while (off + sizeof(struct bch_btree_node_entry) <= s->nb) {
		if ((r = slot_need(s, off + sizeof(struct bch_btree_node_entry))))
			return r;
		n = (const void *)s->buf;
		const struct bch_btree_node_entry *e = (const void *)(s->buf + off);
		if (e->keys.seq != n->seq) {
			bool damaged;
			if ((r = seq_damaged(s, n, off, &damaged)) || damaged)
				return r;
			break;
		}
		end = off + sizeof(*e) + (size_t)e->keys.u64s * 8;
		if (end > s->nb)
			return 0;
		if ((r = slot_need(s, end)))
			return r;
		n = (const void *)s->buf;
		e = (const void *)(s->buf + off);
		if (!bset_ok(s, n, off, &e->keys, e->csum))
			return 0;
		off = round_up(end, s->bs);
	}
	*keep = off + s->bs < s->nb ? off + s->bs : s->nb;
	return 0;
}

/*
 * Btree nodes: in every bucket the alloc info calls btree, each node slot
 * as node_keep() measures it; in the other buckets that hold no user data
 * (free, or with generations not trusted never allocated either), each node
 * slot that starts with a node header of this filesystem (nodes no longer
 * reachable, which fsck's node scan would find), measured the same way.
 * Slots are at multiples of btree_node_size from the bucket's start (where
 * the allocator carves nodes and the node scan looks); a bucket's tail
 * shorter than a node is kept whole.
 */
static int btree_ranges(struct bch_fs *c, struct bch_dump_ranges *d, const uint64_t *sizes)
{
	bool trust_gens = bch_alloc_btree_was_current(c) && !c->journal_replayed &&
			  !c->alloc_recount_partial;
	struct slot s = {
		.c = c,
		.nb = (size_t)c->sb->btree_node_size << BCH_SECTOR_SHIFT,
		.bs = (size_t)c->sb->block_size << BCH_SECTOR_SHIFT,
	};
	struct bch_bucket_state st;
	size_t keep;
	bool node;
	int r = 0;

	if (!(s.buf = malloc(s.nb)))
		return -ENOMEM;
	for (unsigned dev = 0; dev < c->nr_devs; dev++) {
		if (!sizes[dev])
			continue;
		uint64_t bb = (uint64_t)bch_alloc_bucket_sectors(c, dev) << BCH_SECTOR_SHIFT;
		uint64_t nb = bch_alloc_nbuckets(c, dev);
		s.dev = dev;
		for (uint64_t b = bch_sb_member(c->sb, dev)->first_bucket; b < nb; b++) {
			if (!bch_alloc_bucket_get(c, dev, b, &st))
				continue;
			bool btree = st.data_type == BCH_DATA_btree;
			if (!btree && (st.data_type != BCH_DATA_free || (trust_gens && !st.gen)))
				continue;
			uint64_t o = 0;
			for (; o + s.nb <= bb; o += s.nb) {
				s.where = b * bb + o;
				if ((r = node_keep(&s, &keep, &node)))
					goto out;
				if (!btree && !node)
					continue;
				if ((r = add(d, dev, s.where, keep, sizes[dev])))
					goto out;
				d->btree_bytes += keep;
				d->nodes += !btree;
			}
			if (btree && o < bb) {
				if ((r = add(d, dev, b * bb + o, bb - o, sizes[dev])))
					goto out;
				d->btree_bytes += bb - o;
			}
		}
	}
out:
	free(s.buf);
	return r;
}

/* BCH_DUMP_REACHABLE: each copy of every node the btrees reach, measured by node_keep(). */
struct reach {
	struct bch_dump_ranges	*d;
	const uint64_t		*sizes;
	struct slot		s;
};

static int reach_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct reach *rc = priv;
	size_t keep;
	bool node;
	int r;

	(void)c;
	for (unsigned i = 0; i < b->nr_ptrs; i++) {
		unsigned dev = b->ptrs[i].dev;
		if (dev >= rc->s.c->nr_devs || !rc->sizes[dev])
			continue;
		rc->s.dev = dev;
		rc->s.where = (uint64_t)b->ptrs[i].offset << BCH_SECTOR_SHIFT;
		if ((r = node_keep(&rc->s, &keep, &node)) ||
		    (r = add(rc->d, dev, rc->s.where, keep, rc->sizes[dev])))
			return r;
		rc->d->btree_bytes += keep;
	}
	return 0;
}

static int reachable_ranges(struct bch_fs *c, struct bch_dump_ranges *d, const uint64_t *sizes)
{
	struct reach rc = {
		.d = d, .sizes = sizes,
		.s = {
			.c = c,
			.nb = (size_t)c->sb->btree_node_size << BCH_SECTOR_SHIFT,
			.bs = (size_t)c->sb->block_size << BCH_SECTOR_SHIFT,
		},
	};
	int r = 0;

	if (!(rc.s.buf = malloc(rc.s.nb)))
		return -ENOMEM;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r; id++)
		r = bch_btree_walk_nodes(c, id, reach_node, &rc);
	free(rc.s.buf);
	return r;
}

int bch_dump_ranges(struct bch_fs *c, unsigned flags, struct bch_dump_ranges *d)
{
	uint64_t sizes[BCH_SB_MEMBERS_MAX] = { 0 };
	int r;

	memset(d, 0, sizeof(*d));
	for (unsigned dev = 0; dev < c->nr_devs; dev++)
		if (c->devs[dev] && c->devs[dev]->bdev)
			sizes[dev] = bch_dev_size(c->devs[dev]->bdev);

	for (unsigned dev = 0; dev < c->nr_devs; dev++)
		if (sizes[dev] && (r = sb_ranges(c, d, dev, sizes[dev])))
			return r;
	if (!(flags & BCH_DUMP_NO_JOURNAL) && (r = journal_ranges(c, d, sizes)))
		return r;
	if ((r = flags & BCH_DUMP_REACHABLE ? reachable_ranges(c, d, sizes)
					    : btree_ranges(c, d, sizes)))
		return r;
	merge(d);
	return 0;
}

void bch_dump_ranges_exit(struct bch_dump_ranges *d)
{
	free(d->r);
	memset(d, 0, sizeof(*d));
}

/* ------------------------------------------------------------ scrambling */

struct entry {
	char		*name;
	uint64_t	inum;
	unsigned	d_type;
};

struct entries {
	struct entry	*v;
	size_t		nr, cap;
};

static int collect_entry(void *priv, const char *name, size_t len, uint64_t inum,
			 unsigned d_type, uint64_t next_pos)
{
	struct entries *e = priv;

	(void)next_pos;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (e->nr == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 64;
		struct entry *n = realloc(e->v, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		e->v = n;
		e->cap = cap;
	}
	if (!(e->v[e->nr].name = strndup(name, len)))
		return -ENOMEM;
	e->v[e->nr].inum = inum;
	e->v[e->nr].d_type = d_type;
	e->nr++;
	return 0;
}

static void entries_free(struct entries *e)
{
	for (size_t i = 0; i < e->nr; i++)
		free(e->v[i].name);
	free(e->v);
	memset(e, 0, sizeof(*e));
}

static uint64_t mix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/*
 * The scrambled form of name (len bytes) in dir, try attempt, into out
 * (len bytes and a NUL): keyed, so it says nothing of the name without the
 * key.  The first tries draw from 64 plain characters; later ones from
 * every byte a name may hold, for directories with more names of a length
 * than 64 characters give.
 */
static void scramble_name(const uint8_t key[BCH_DUMP_KEY_BYTES], uint64_t dir, const char *name,
			  size_t len, unsigned attempt, char *out)
{
	static const char plain[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
	uint64_t x = bch_siphash24(key, name, len) ^ (dir * 0x9e3779b97f4a7c15ULL) ^
		     ((uint64_t)attempt << 48);

	for (size_t i = 0; i < len; i++) {
		uint64_t v = mix(&x);
		if (attempt < 32) {
			out[i] = plain[v & 63];
		} else {
			do
				out[i] = (char)(1 + v % 255);
			while (out[i] == '/' && (v = mix(&x)));
		}
	}
	out[len] = 0;
	if ((len == 1 && out[0] == '.') || (len == 2 && out[0] == '.' && out[1] == '.'))
		out[0] = '_';
}

static int scramble_xattrs(struct bch_fs *c, const uint8_t key[BCH_DUMP_KEY_BYTES], uint64_t inum,
			   uint64_t *xattrs)
{
	ssize_t n = bch_fs_listxattr(c, inum, NULL, 0);
	char *list = NULL, *val = NULL, *nn = NULL;
	int r = 0;

	if (n <= 0)
		return n == -EOPNOTSUPP || n == -ENODATA ? 0 : (int)n;
	if (!(list = malloc(n)) || !(val = malloc(65536)) || !(nn = malloc(256))) {
		r = -ENOMEM;
		goto out;
	}
	if ((n = bch_fs_listxattr(c, inum, list, n)) < 0) {
		r = n;
		goto out;
	}
	for (char *name = list; name < list + n && !r; name += strlen(name) + 1) {
		size_t pre = !strncmp(name, "user.", 5) ? 5 : !strncmp(name, "trusted.", 8) ? 8 : 0;
		size_t len = strlen(name);
		if (!pre || len > 255)
			continue;
		ssize_t vl = bch_fs_getxattr(c, inum, name, val, 65536);
		if (vl < 0) {
			r = vl;
			break;
		}
		unsigned attempt = 0;
		memcpy(nn, name, pre);
		do {
			scramble_name(key, inum, name + pre, len - pre, attempt++, nn + pre);
		} while (bch_fs_getxattr(c, inum, nn, NULL, 0) != -ENODATA && attempt < 256);
		if (attempt == 256) {
			r = -EEXIST;
			break;
		}
		uint64_t x = bch_siphash24(key, val, vl) ^ inum;
		for (ssize_t i = 0; i < vl; i++)
			val[i] = (char)mix(&x);
		if ((r = bch_fs_setxattr(c, inum, nn, val, vl, XATTR_CREATE)) ||
		    (r = bch_fs_removexattr(c, inum, name)))
			break;
		(*xattrs)++;
	}
out:
	free(list);
	free(val);
	free(nn);
	return r;
}

/* Rename the entries of directory dir (listed first: renames move them); push subdirectories. */
static int scramble_dir(struct bch_fs *c, const uint8_t key[BCH_DUMP_KEY_BYTES], uint64_t dir,
			struct entries *todo, uint64_t *names, uint64_t *xattrs)
{
	struct entries e = { 0 };
	char nn[256];
	uint64_t ino;
	int r;

	if ((r = bch_fs_readdir(c, dir, 0, collect_entry, &e)))
		goto out;
	for (size_t i = 0; i < e.nr; i++) {
		const char *name = e.v[i].name;
		size_t len = strlen(name);

		/* a directory's xattrs when it is taken from todo; a file's here
		 * (a hard link's again: scrambled twice, no harm) */
		if ((r = e.v[i].d_type == DT_DIR
			 ? collect_entry(todo, "", 0, e.v[i].inum, DT_DIR, 0)
			 : scramble_xattrs(c, key, e.v[i].inum, xattrs)))
			goto out;
		if ((dir == BCH_ROOT_INO && !strcmp(name, "lost+found")) || len > 255)
			continue;
		unsigned attempt = 0;
		do {
			scramble_name(key, dir, name, len, attempt++, nn);
			r = bch_fs_lookup(c, dir, nn, &ino);
		} while (!r && attempt < 256);
		if (r != -ENOENT) {
			r = r ? r : -EEXIST;
			goto out;
		}
		if ((r = bch_fs_rename(c, dir, name, dir, nn, BCH_RENAME_NOREPLACE)))
			goto out;
		(*names)++;
	}
out:
	entries_free(&e);
	return r;
}

struct node_ref {
	unsigned	id, level;
	struct bch_bpos	max_key;
};

struct node_refs {
	struct node_ref	*v;
	size_t		nr, cap;
};

static int collect_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct node_refs *l = priv;

	(void)c;
	if (l->nr == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct node_ref *n = realloc(l->v, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		l->v = n;
		l->cap = cap;
	}
	l->v[l->nr++] = (struct node_ref) { b->id, b->level, b->max_key };
	return 0;
}

/* Rewrite every node of btree id whole: no older bset of it stays in use. */
static int rewrite_btree(struct bch_fs *c, unsigned id)
{
	struct node_refs l = { 0 };
	int r = bch_btree_walk_nodes(c, id, collect_node, &l);

	/* children first: a rewritten child changes its parent, rewritten after */
	for (size_t i = l.nr; i-- > 0 && !r;) {
		struct btree *b;
		if ((r = bch_btree_find_node(c, l.v[i].id, l.v[i].level, l.v[i].max_key, &b)))
			break;
		if (b->level == l.v[i].level && bpos_eq(b->max_key, l.v[i].max_key))
			r = bch_btree_node_rewrite(c, b);
		bch_btree_node_put(c, b);
	}
	free(l.v);
	return r;
}

int bch_dump_scramble(struct bch_fs *c, const uint8_t key[BCH_DUMP_KEY_BYTES],
		      uint64_t *names, uint64_t *xattrs)
{
	struct entries todo = { 0 };
	int r;

	*names = *xattrs = 0;
	/*
	 * With snapshots a rename writes the new name in a leaf and leaves the
	 * old one in the snapshots below it: names would survive in the dump.
	 */
	if (bch_fs_has_snapshots(c))
		return bch_fs_err(c, -EOPNOTSUPP, "--scramble-names of a filesystem with subvolumes or "
				  "snapshots is not supported (their older snapshots keep the names)");
	if ((r = collect_entry(&todo, "", 0, BCH_ROOT_INO, DT_DIR, 0)))
		goto out;
	while (todo.nr) {
		uint64_t dir = todo.v[--todo.nr].inum;
		free(todo.v[todo.nr].name);
		if ((r = scramble_xattrs(c, key, dir, xattrs)) ||
		    (r = scramble_dir(c, key, dir, &todo, names, xattrs)))
			goto out;
	}
	if ((r = bch_fs_fsync(c)))
		goto out;
	if ((r = rewrite_btree(c, BCH_BTREE_ID_dirents)) ||
	    (r = rewrite_btree(c, BCH_BTREE_ID_xattrs)))
		goto out;
	r = bch_journal_flush(c);
out:
	entries_free(&todo);
	return r;
}
