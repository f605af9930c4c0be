// SPDX-License-Identifier: GPL-2.0
/*
 * btree_iter.c - finding nodes and keys: descent from the root, lookups,
 * forward and backward iteration over ranges, and walks over every node.
 *
 * Each call descends from the root (O(depth) binary searches), or takes
 * the leaf the last descent in that btree found when it covers the
 * position and no node came or went since (leaf_hint(): an inode
 * read, a commit's leaves, an extent walk, each ~300 instructions of
 * descent less); no reference is held between calls, so an iteration sees
 * the tree as it is at each step and never a freed node.  Interior nodes cover their whole range: the key
 * for each child is the child's max_key, and the last key is the node's.
 *
 * Bounds (damage without checksums must not make a walk endless): a node
 * is handed out only for the range its pointer names (btree_cache.c), so a
 * leaf found for pos ends at or after pos and iterators only move forward;
 * walks check the order of an interior node's children and stop past the
 * node count the devices can hold (nodes_max()).
 */
#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"
#include "super.h"

/*
 * The hint's leaf for pos, or NULL: its generation first (a node forgotten
 * since may be freed: nothing of it is read before), then its range (most
 * misses: a lookup elsewhere), then the root.  Inline: a random lookup's
 * miss costs a few compares.
 */
static inline struct btree *leaf_hint(struct bch_fs *c, unsigned id, struct bch_bpos pos)
{
	const struct bch_leaf_hint *h = &c->roots->hint[id];
	const struct btree_root *r = &c->roots->r[id];
	struct btree *b = h->b;

	if (!b || h->gen != c->roots->node_gen ||
	    bpos_cmp(pos, b->min_key) < 0 || bpos_cmp(pos, b->max_key) > 0 ||
	    r->key != h->root_key || r->level != h->root_level ||
	    ((const struct bch_btree_ptr *)bkey_val(r->key))->seq != h->root_seq || c->panicked)
		return NULL;
	bch_btree_node_ref(c, b);
	return b;
}

struct btree *bch_btree_leaf_hint(struct bch_fs *c, unsigned id, struct bch_bpos pos)
{
	return id < BCH_BTREE_ID_NR ? leaf_hint(c, id, pos) : NULL;
}

static void leaf_hint_set(struct bch_fs *c, unsigned id, struct btree *b)
{
	const struct btree_root *r = &c->roots->r[id];

	c->roots->hint[id] = (struct bch_leaf_hint) {
		.b = b, .gen = c->roots->node_gen, .root_key = r->key, .root_level = r->level,
		.root_seq = ((const struct bch_btree_ptr *)bkey_val(r->key))->seq,
	};
}

int bch_btree_find_node(struct bch_fs *c, unsigned id, unsigned level, struct bch_bpos pos,
			struct btree **ret)
{
	struct btree_root *root = &c->roots->r[id];
	struct btree *b;
	int r;

	if (id >= BCH_BTREE_ID_NR || !root->key)
		return bch_fs_err(c, -BCH_ERR_btree_node_read, "%s btree has no root",
				  bch_btree_id_name(id));
	if (level > root->level)
		return bch_fs_err(c, -EINVAL, "btree level %u above the root", level);
	/* the leaf the last descent found, when it covers pos (btree_cache.c) */
	if (!level && (b = leaf_hint(c, id, pos))) {
		*ret = b;
		return 0;
	}
	if ((r = bch_btree_node_get(c, id, root->level, root->key, &b)))
		return r;
	while (b->level > level) {
		int i = bch_btree_node_find(b, pos);
		struct btree *child;

		if (i >= (int)b->nr) {
			char p[80];
			bch_bpos_to_text(pos, p, sizeof(p));
			bch_btree_node_put(c, b);
			return bch_fs_err(c, -BCH_ERR_btree_node_bad,
					  "%s btree level %u: no child covers %s",
					  bch_btree_id_name(id), b->level, p);
		}
		r = bch_btree_node_get(c, id, b->level - 1, bch_btree_interior_key(b, i), &child);
		bch_btree_node_put(c, b);
		if (r)
			return r;
		b = child;
	}
	if (!level)
		leaf_hint_set(c, id, b);
	*ret = b;
	return 0;
}

/*
 * The first key of btree id in [pos, end]: 1 with its leaf held in *bp (the
 * caller puts it) and its index in *ip, 0 when there is none, or the error.
 */
static int peek_first(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos end,
		      struct btree **bp, int *ip)
{
	for (;;) {
		struct btree *b;
		int r = bch_btree_find_node(c, id, 0, pos, &b);

		if (r)
			return r;
		int i = bch_btree_node_find(b, pos);
		if (i < (int)b->nr) {
			if (bpos_cmp(bch_btree_key_pos(b, i), end) > 0) {
				bch_btree_node_put(c, b);
				return 0;
			}
			*bp = b;
			*ip = i;
			return 1;
		}
		struct bch_bpos max = b->max_key;
		bch_btree_node_put(c, b);
		if (bpos_eq(max, POS_MAX) || bpos_cmp(max, end) >= 0)
			return 0;
		pos = bpos_successor(max);
	}
}

int bch_btree_peek(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos end,
		   struct bch_bkey **ret)
{
	struct btree *b;
	int i, r = peek_first(c, id, pos, end, &b, &i);

	if (r <= 0)
		return r ?: -BCH_ERR_key_not_found;
	*ret = bch_btree_key_dup(b, i);
	bch_btree_node_put(c, b);
	return 0;
}

/* bch_btree_peek() without the key's copy */
int bch_btree_any(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos end)
{
	struct btree *b;
	int i, r = peek_first(c, id, pos, end, &b, &i);

	if (r > 0)
		bch_btree_node_put(c, b);
	return r;
}

int bch_btree_peek_next(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos end,
			struct bch_bkey **ret)
{
	int r = bch_btree_peek(c, id, pos, end, ret);

	if (r == -BCH_ERR_key_not_found) {
		c->err_msg[0] = 0;
		return 0;
	}
	return r ? r : 1;
}

int bch_btree_peek_prev(struct bch_fs *c, unsigned id, struct bch_bpos pos,
			struct bch_bpos start, struct bch_bkey **ret)
{
	for (;;) {
		struct btree *b;
		int r = bch_btree_find_node(c, id, 0, pos, &b);

		if (r)
			return r;
		int i = bch_btree_node_find(b, pos);
		if (i < (int)b->nr && bpos_eq(bch_btree_key_pos(b, i), pos))
			i++;
		if (i > 0) {
			r = bpos_cmp(bch_btree_key_pos(b, i - 1), start) >= 0 ? 0 : -BCH_ERR_key_not_found;
			if (!r)
				*ret = bch_btree_key_dup(b, i - 1);
			bch_btree_node_put(c, b);
			return r;
		}
		struct bch_bpos min = b->min_key;
		bch_btree_node_put(c, b);
		if (bpos_eq(min, POS_MIN) || bpos_cmp(min, start) <= 0)
			return -BCH_ERR_key_not_found;
		if (bpos_cmp(min, pos) > 0) {
			/* children tile their parent: a gap before pos is damage, and
			 * stepping back to min's predecessor would find this leaf again */
			char p[80];
			bch_bpos_to_text(pos, p, sizeof(p));
			return bch_fs_err(c, -BCH_ERR_btree_node_bad,
					  "%s btree: no leaf covers %s (a gap between nodes)",
					  bch_btree_id_name(id), p);
		}
		pos = bpos_predecessor(min);
	}
}

int bch_btree_last_offset(struct bch_fs *c, unsigned id, struct bch_bpos max, uint64_t *offset,
			  bool *found)
{
	struct bch_bkey *k;
	int r = bch_btree_peek_prev(c, id, max, POS_MIN, &k);

	*offset = 0;
	*found = false;
	if (r == -BCH_ERR_key_not_found) {
		c->err_msg[0] = 0;
		return 0;
	}
	if (r)
		return r;
	*offset = k->p.offset;
	*found = true;
	free(k);
	return 0;
}

int bch_btree_lookup(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bkey **ret)
{
	return bch_btree_peek(c, id, pos, pos, ret);
}

/*
 * The leaf found for pos covers it (btree_cache.c hands out a node only
 * for its range): the key is in it or nowhere.  An inode read's malloc and
 * free were a fifth of it (~190 of ~960 instructions, callgrind).
 */
int bch_btree_lookup_buf(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bkey_buf *buf,
			 const struct bch_bkey **ret)
{
	struct btree *b;
	int r = bch_btree_find_node(c, id, 0, pos, &b);

	if (r)
		return r;
	int i = bch_btree_node_find(b, pos);
	if (i < (int)b->nr && bpos_eq(bch_btree_key_pos(b, i), pos)) {
		const struct bch_bkey *k = bch_btree_key(b, i, buf);
		if ((const void *)k != (const void *)buf->w)
			memcpy(buf->w, k, bkey_bytes(k));
		*ret = (const struct bch_bkey *)buf->w;
	} else {
		r = -BCH_ERR_key_not_found;
	}
	bch_btree_node_put(c, b);
	return r;
}

/*
 * Field by field: a compound literal zeroed the 2 KiB key buffer too, which
 * next() writes before it hands the buffer out (a dirent or xattr lookup,
 * an extent walk: 280 instructions an iterator, callgrind).
 */
void bch_btree_iter_init(struct btree_iter *it, struct bch_fs *c, unsigned id,
			 struct bch_bpos start, struct bch_bpos end)
{
	it->c = c;
	it->id = id;
	it->pos = start;
	it->end = end;
	it->leaf = NULL;
	it->idx = 0;
	it->leaf_inside = false;
}

const struct bch_bkey *bch_btree_iter_next_slow(struct btree_iter *it, int *err)
{
	*err = 0;
	for (;;) {
		if (!it->leaf) {
			int r = bch_btree_find_node(it->c, it->id, 0, it->pos, &it->leaf);
			if (r) {
				*err = r;
				return NULL;
			}
			it->idx = bch_btree_node_find(it->leaf, it->pos);
			it->leaf_inside = bpos_cmp(it->leaf->max_key, it->end) <= 0;
		}
		if (it->idx < it->leaf->nr) {
			unsigned i = it->idx++;
			if (!it->leaf_inside && bpos_cmp(bch_btree_key_pos(it->leaf, i), it->end) > 0)
				return NULL;
			/* (as bch_btree_iter_next()'s inline step) */
			if (i + BCH_BTREE_ITER_PREFETCH < it->leaf->nr)
				__builtin_prefetch((const uint64_t *)it->leaf->arena +
						   bch_btree_key_off(it->leaf, i + BCH_BTREE_ITER_PREFETCH));
			return bch_btree_key(it->leaf, i, &it->buf);
		}
		struct bch_bpos max = it->leaf->max_key;
		bch_btree_node_put(it->c, it->leaf);
		it->leaf = NULL;
		if (bpos_eq(max, POS_MAX) || bpos_cmp(max, it->end) >= 0)
			return NULL;
		it->pos = bpos_successor(max);
	}
}

void bch_btree_iter_exit(struct btree_iter *it)
{
	if (it->leaf)
		bch_btree_node_put(it->c, it->leaf);
	it->leaf = NULL;
}

/*
 * The most nodes the devices could hold: a walk that meets more is going
 * round a loop that damage made (or would take longer than the image can
 * justify), and stops.
 */
static uint64_t nodes_max(struct bch_fs *c)
{
	uint64_t sectors = 0;

	for (unsigned i = 0; i < bch_sb_nr_members(c->sb); i++) {
		const struct bch_member *m = bch_sb_member(c->sb, i);
		sectors += (uint64_t)m->nbuckets * m->bucket_size;
	}
	return sectors / (c->sb->btree_node_size ? c->sb->btree_node_size : 1) + 1;
}

struct walk {
	unsigned	min_level;
	uint64_t	nodes, max;
	int		(*fn)(struct bch_fs *c, struct btree *b, void *priv);
	void		*priv;
};

/*
 * Is child i of b where the tree says: inside b's range, after child i - 1?
 * Node reads check that a node is the range its pointer names; this checks
 * the pointers among themselves, so no node is reached twice, and damage
 * without checksums cannot make a walk visit a range again.
 */
static int child_range_ok(struct bch_fs *c, const struct btree *b, unsigned i)
{
	const struct bch_btree_ptr *bp = bkey_val(bch_btree_interior_key(b, i));
	bool ok = i ? bpos_cmp(bp->min_key, bch_btree_key_pos(b, i - 1)) > 0
		    : bpos_cmp(bp->min_key, b->min_key) >= 0;
	char p[80];

	if (ok)
		return 0;
	bch_bpos_to_text(bp->min_key, p, sizeof(p));
	return bch_fs_err(c, -BCH_ERR_btree_node_bad,
			  "%s btree level %u node at %u:%" PRIu64 ": child %u starts at %s, "
			  "inside the range of the one before", bch_btree_id_name(b->id), b->level,
			  b->nr_ptrs ? b->ptrs[0].dev : 0, b->nr_ptrs ? (uint64_t)b->ptrs[0].offset : 0,
			  i, p);
}

static int walk(struct bch_fs *c, struct btree *b, struct walk *w)
{
	if (++w->nodes > w->max)
		return bch_fs_err(c, -BCH_ERR_btree_node_bad,
				  "%s btree: more than %" PRIu64 " nodes, more than the devices hold",
				  bch_btree_id_name(b->id), w->max);

	int r = w->fn(c, b, w->priv);

	if (r || b->level <= w->min_level)
		return r;
	/* children by position: b may be changed by nothing here (read-only walk) */
	for (unsigned i = 0; i < b->nr && !r; i++) {
		struct btree *child;
		if (bch_btree_key_header(b, i).type != BCH_BKEY_btree_ptr)
			continue;	/* a whiteout (merge) */
		if ((r = child_range_ok(c, b, i)) ||
		    (r = bch_btree_node_get(c, b->id, b->level - 1, bch_btree_interior_key(b, i), &child)))
			break;
		r = walk(c, child, w);
		bch_btree_node_put(c, child);
	}
	return r;
}

int bch_btree_walk_nodes(struct bch_fs *c, unsigned id,
			 int (*fn)(struct bch_fs *c, struct btree *b, void *priv), void *priv)
{
	return bch_btree_walk_levels(c, id, 0, fn, priv);
}

int bch_btree_walk_levels(struct bch_fs *c, unsigned id, unsigned min_level,
			  int (*fn)(struct bch_fs *c, struct btree *b, void *priv), void *priv)
{
	struct btree_root *root = &c->roots->r[id];
	struct btree *b;
	int r;

	if (!root->key)
		return 0;
	if (root->level < min_level)
		return 0;
	/* no writes during a walk: they could split the nodes being walked */
	c->roots->no_shrink++;
	if (!(r = bch_btree_node_get(c, id, root->level, root->key, &b))) {
		struct walk w = { .min_level = min_level, .max = nodes_max(c), .fn = fn, .priv = priv };
		r = walk(c, b, &w);
		bch_btree_node_put(c, b);
	}
	c->roots->no_shrink--;
	return r;
}
