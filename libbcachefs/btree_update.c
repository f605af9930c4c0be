// SPDX-License-Identifier: GPL-2.0
/*
 * btree_update.c - transactions, inserts, splits, node writes and moves,
 * and the btree roots (see btree.h for the invariants).
 *
 * A commit: validate the keys; order them by position, keeping of several
 * updates of one position only the last; make sure every target leaf has
 * room (splitting full ones: new halves written first, then the parent
 * update journalled); reserve journal space (looking at the leaves again
 * only if that wrote or reclaimed); append each key to the journal entry
 * and to its leaf, which becomes dirty and pins the entry.  The keys are
 * durable when the entry is (BCH_TRANS_SYNC waits for that).
 *
 * A dirty node is written by appending its pending keys as a bset when its
 * space has room; when the space is full the node is rewritten compacted to
 * a new place (a move), or split when it would not fit in one node.
 * Opened degraded, new nodes get the copies the present devices can take,
 * and a node with a copy on a missing member is moved, not appended to.
 *
 * Which writes wait for the journal (btree.h invariants (1), (6), (7)):
 *
 *   WRITE                         WAITS FOR                      LINK
 *   append, whole write in place  journal up to b->journal_seq,  (parent's pointer
 *                                 hints' device flush            already durable)
 *   split halves, merged node,    hints' device flush only       parent update at S,
 *   moved copy                    (new_node_deps_durable())      S >= every key held
 *   new root                      nothing (halves, as above)     roots of entries >= open
 *
 * A new node can hold keys of entries not yet durable: it is reached only
 * once S is on disk, and every entry before S is then.  Until the link is
 * pinned the replaced node keeps its pin (clear_pending_keep_pin()), and the
 * link runs under no_shrink (the journal's reserve, no reclaim), so the
 * journal's last_seq never passes keys only an unlinked node holds; a split
 * or merge from the top gives the reserve back first
 * (bch_journal_restore_reserve()).  The parent's own write waits for S
 * (its journal_seq) like any append.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "btree.h"
#include "snapshot.h"
#include "crypt.h"
#include "checksum.h"
#include "errcode.h"
#include "replicas.h"
#include "super.h"

#define TRANS_INLINE	8
#define TRANS_ARENA_U64S	128

struct btree_trans {
	struct bch_fs		*c;
	struct bch_bkey		**keys;		/* copies (key_dup()) */
	uint8_t			*ids;
	unsigned		nr, cap;
	/* commit: the keys in (btree, position) order (commit_order()), each key's leaf */
	unsigned		*order;
	unsigned		nr_order;
	struct btree		**leaf;
	/* the arrays of a transaction of a few keys (most: a write's 3-4), no malloc */
	struct bch_bkey		*keys_in[TRANS_INLINE];
	uint8_t			ids_in[TRANS_INLINE];
	unsigned		order_in[TRANS_INLINE];
	struct btree		*leaf_in[TRANS_INLINE];
	struct bch_bpos		last_touch;	/* snapshot_touch key added last */
	bool			last_touch_valid;
	/* the keys' copies while they fit (a write's 3-4 take 40 words), else malloc'd */
	unsigned		arena_used;
	uint64_t		arena[TRANS_ARENA_U64S];
};

static size_t node_u64s_max(struct bch_fs *c)
{
	return (((size_t)c->sb->btree_node_size << BCH_SECTOR_SHIFT) -
		sizeof(struct bch_btree_node)) / 8;
}

/* A node is split when its keys pass 3/4 of a node: the rest is append room. */
static size_t split_threshold(struct bch_fs *c)
{
	return node_u64s_max(c) * 3 / 4;
}

static unsigned replicas(struct bch_fs *c)
{
	unsigned n = c->opts.v[Opt_metadata_replicas] ? c->opts.v[Opt_metadata_replicas] : 1;

	/*
	 * degraded, or members made read-only (device remove --force-metadata:
	 * the user accepted it; set-state refuses it otherwise): as many copies
	 * as the read-write members can take
	 */
	unsigned avail = bch_alloc_nr_devs_for(c, BCH_DATA_btree);
	/* metadata copies on one device: up to two copies a member (alloc.h) */
	if (avail && bch_alloc_btree_dup(c))
		avail *= 2;
	if (avail && avail < n)
		n = avail;
	return n;
}

/* Has b a copy on a member that is missing (opened degraded)? */
static bool node_on_missing(struct bch_fs *c, const struct btree *b)
{
	for (unsigned i = 0; i < b->nr_ptrs; i++)
		if (bch_dev_missing(c, b->ptrs[i].dev))
			return true;
	return false;
}

/* Node seqs identify a node's life; derived, so the same operations give the same image. */
static uint64_t new_node_seq(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	struct {
		uint8_t		uuid[16];
		uint64_t	offset, counter, jseq;
		uint32_t	dev;
	} in;

	memset(&in, 0, sizeof(in));
	memcpy(in.uuid, c->sb->uuid, 16);
	in.offset = p->offset;
	in.dev = p->dev;
	in.counter = ++c->roots->seq_counter;
	in.jseq = c->journal ? bch_journal_cur_seq(c) : 0;
	uint64_t h;
	(void)bch_xxhash64(&in, sizeof(in), 0, &h);	/* cannot fail: node_alloc() loaded it */
	return h | 1;
}

/* A new node with fresh space and identity. */
static int node_alloc(struct bch_fs *c, unsigned id, unsigned level, struct btree **ret)
{
	struct btree *b;
	int r;

	/* the node's seq is an xxhash64: have the library before taking space */
	if ((r = bch_csum_type_load(BCH_CSUM_xxhash64)))
		return bch_fs_err(c, r, "allocating a btree node: %s", bch_err_str(r));
	b = bch_btree_node_new(c, id, level);
	b->nr_ptrs = replicas(c);
	unsigned required = c->opts.v[Opt_metadata_replicas_required];
	if (required > bch_alloc_nr_devs_for(c, BCH_DATA_btree)) {
		/* copies on that many devices, or none (a second copy on one device does not count) */
		b->nr_ptrs = 0;
		bch_btree_node_forget(c, b);
		return bch_fs_err(c, -BCH_ERR_no_space, "only %u device%s can take btree node copies, "
				  "metadata_replicas_required=%u", bch_alloc_nr_devs_for(c, BCH_DATA_btree),
				  bch_alloc_nr_devs_for(c, BCH_DATA_btree) == 1 ? "" : "s", required);
	}
	r = bch_alloc_btree_node(c, b->nr_ptrs, b->ptrs);
	/* the table names the node's members before any pointer to it is written */
	if (!r && (r = bch_replicas_mark_ptrs(c, BCH_DATA_btree, b->ptrs, b->nr_ptrs)))
		bch_free_btree_node(c, b->ptrs, b->nr_ptrs);
	if (r) {
		b->nr_ptrs = 0;
		bch_btree_node_forget(c, b);
		return r;
	}
	/* encrypted: a counter value, so the node's bset nonces are new (crypt.h) */
	if (c->crypt && (r = bch_crypt_nonce_take(c, &b->seq))) {
		bch_free_btree_node(c, b->ptrs, b->nr_ptrs);
		b->nr_ptrs = 0;
		bch_btree_node_forget(c, b);
		return r;
	}
	if (!c->crypt)
		b->seq = new_node_seq(c, &b->ptrs[0]);
	*ret = b;
	return 0;
}

/*
 * What must be durable before the keys of b are written to a new place (a
 * split half, a merged node, a moved copy, a new root: invariant (6)): the
 * children's appends its hints cover (a flush of the devices, not a journal
 * entry: update_hint()).  Not the journal: the new node is reached only
 * through the entry that links it, which comes after every key it holds.
 */
static int new_node_deps_durable(struct bch_fs *c, struct btree *b)
{
	if (b->hint_flush > bch_journal_flush_gen(c))
		return bch_journal_flush_devs(c);
	return 0;
}

/*
 * What must be durable before b is written where its parent points (an
 * append, or a whole write in place): the journal up to its newest key
 * (write-ahead, invariant (1)), and the hints' appends as above.
 */
static int node_deps_durable(struct bch_fs *c, struct btree *b)
{
	int r;

	if ((r = bch_journal_flush_seq(c, b->journal_seq)))
		return r;
	return new_node_deps_durable(c, b);
}

static int node_pin_flush(struct bch_fs *c, struct bch_journal_pin *pin, uint64_t seq)
{
	struct btree *b = (struct btree *)((char *)pin - offsetof(struct btree, pin));
	int r;

	(void)seq;
	b->refs++;
	r = bch_btree_node_write(c, b);
	if (r == 1)
		return 0;	/* split: b and its pin are gone */
	bch_btree_node_put(c, b);
	return r;
}

/* Put k in b (in memory), mark b dirty and pin journal seq. */
static void apply_key(struct bch_fs *c, struct btree *b, const struct bch_bkey *k, uint64_t seq)
{
	long before = bch_btree_node_bytes(b), pbefore = bch_btree_node_pending_bytes(b);

	bch_btree_node_insert_key(b, k);
	bch_btree_node_pending_add(b, k);
	bch_btree_cache_account(c, (long)bch_btree_node_bytes(b) - before);
	bch_btree_cache_account_pending(c, (long)bch_btree_node_pending_bytes(b) - pbefore);
	b->dirty = true;
	if (seq > b->journal_seq)
		b->journal_seq = seq;
	if (seq)
		bch_journal_pin_add(c, &b->pin, seq, node_pin_flush);
}

/*
 * b's keys are on disk in new nodes: nothing pending, nothing for a reclaim
 * to write; its journal pin stays until the entry that links the new nodes
 * is pinned in their parent, or the roots name them (invariant (7)).
 */
static void clear_pending_keep_pin(struct bch_fs *c, struct btree *b)
{
	long before = bch_btree_node_bytes(b), pbefore = bch_btree_node_pending_bytes(b);

	bch_btree_node_pending_clear(b);
	bch_btree_cache_account(c, (long)bch_btree_node_bytes(b) - before);
	bch_btree_cache_account_pending(c, (long)bch_btree_node_pending_bytes(b) - pbefore);
	b->dirty = false;
}

static void clear_pending(struct bch_fs *c, struct btree *b)
{
	clear_pending_keep_pin(c, b);
	bch_journal_pin_drop(c, &b->pin);
}

/* Journal keys at level in btree id, and apply them to their nodes. */
static int journal_and_apply(struct bch_fs *c, unsigned id, unsigned level,
			     struct bch_bkey **keys, unsigned nr)
{
	struct bch_journal_res res;
	unsigned u64s = 0;
	int r;

	for (unsigned i = 0; i < nr; i++)
		u64s += 1 + keys[i]->u64s;
	/*
	 * Inside a node write (no_shrink): an internal reservation, which may use
	 * the journal's reserve and never reclaims, so node writes never nest.
	 * At the top of a commit (splits, merges): an ordinary one.
	 */
	r = c->roots->no_shrink ? bch_journal_res_get_internal(c, u64s, &res)
				: bch_journal_res_get(c, u64s, &res);
	if (r)
		return r;
	c->roots->no_shrink++;
	for (unsigned i = 0; i < nr && !r; i++) {
		struct btree *b;
		void *d = bch_journal_res_add(c, &res, BCH_JSET_ENTRY_btree_keys, id, level,
					      keys[i]->u64s);
		memcpy(d, keys[i], bkey_bytes(keys[i]));
		r = bch_btree_find_node(c, id, level, keys[i]->p, &b);
		if (!r) {
			apply_key(c, b, keys[i], res.seq);
			bch_btree_node_put(c, b);
		}
	}
	c->roots->no_shrink--;
	bch_journal_res_put(c, &res);
	return r;
}

static bool is_root(struct bch_fs *c, const struct btree *b)
{
	struct btree_root *r = &c->roots->r[b->id];
	const struct bch_btree_ptr *bp = r->key ? bkey_val(r->key) : NULL;

	return bp && r->level == b->level && bp->ptrs[0].dev == b->ptrs[0].dev &&
	       bp->ptrs[0].offset == b->ptrs[0].offset;
}

static void set_root(struct bch_fs *c, struct btree *b)
{
	struct btree_root *r = &c->roots->r[b->id];

	free(r->key);
	r->key = bch_btree_ptr_key(b);
	r->level = b->level;
}

static int split(struct bch_fs *c, struct btree *b);

/* Make sure the parent of b (found by b's range) can take one more key. */
static int parent_room(struct bch_fs *c, struct btree *b)
{
	struct btree *p;
	int r;

	for (unsigned tries = 0; tries < 64; tries++) {
		r = bch_btree_find_node(c, b->id, b->level + 1, b->max_key, &p);
		if (r)
			return r;
		if (p->u64s + 2 * (BCH_BKEY_U64s + 8) < split_threshold(c)) {
			bch_btree_node_put(c, p);
			return 0;
		}
		r = split(c, p);	/* consumes p */
		if (r)
			return r;
	}
	return bch_fs_err(c, -EIO, "btree: parent keeps overflowing");
}

/*
 * Appends (keys added in order at a node's end: new inodes, a file written
 * sequentially, a bulk load): when the keys changed since b was last written
 * are exactly its last keys, after older ones, b is split near its end, as
 * LMDB and bcachefs split at the insert point: the left node keeps 15/16 of
 * the split threshold, where appends will not touch it again, and the right
 * one takes the rest and the appends to come, instead of two half nodes of
 * which the left one would stay half empty.  0: not an append (halves).
 */
static unsigned append_split(struct bch_fs *c, struct btree *b)
{
	unsigned live = b->nr_dirty;

	bch_btree_node_pending_sort(b);
	if (!live || b->nr_pending || b->nr < 4)
		return 0;
	/* the changed keys are the last ones: their bits are the top nr_dirty */
	unsigned at = b->nr - live;
	if (!at || !(b->kdirty[at / 64] >> (at % 64) & 1) ||
	    (at % 64 && b->kdirty[at / 64] << (64 - at % 64)))
		return 0;
	for (unsigned w = 0; w < at / 64; w++)
		if (b->kdirty[w])
			return 0;
	size_t target = split_threshold(c) * 15 / 16, acc = 0;
	if (target > b->u64s * 15 / 16)
		target = b->u64s * 15 / 16;
	unsigned mid = 0;
	while (mid < b->nr - 1 && acc < target)
		acc += bch_btree_key_u64s(b, mid++);
	return mid;
}

/*
 * Split b (the caller's reference is consumed: b is gone afterwards): two
 * new nodes written whole, then the parent (or a new root) points at them.
 */
static int split(struct bch_fs *c, struct btree *b)
{
	unsigned id = b->id, level = b->level;
	struct btree *n[2] = { NULL, NULL };
	bool root = is_root(c, b), linking = false;
	int r;

	if (b->nr < 2)
		return bch_fs_err(c, -EIO, "btree: cannot split a node of %u keys", b->nr);
	if (!root && (r = parent_room(c, b)))
		goto err;
	/* not the journal: the halves are linked after every key they hold (invariant (6)) */
	if ((r = new_node_deps_durable(c, b)))
		goto err;
	for (unsigned i = 0; i < 2; i++)
		if ((r = node_alloc(c, id, level, &n[i])))
			goto err;

	unsigned mid = append_split(c, b);
	if (!mid) {
		/* halves by size */
		size_t acc = 0;
		while (mid < b->nr - 1 && acc < b->u64s / 2)
			acc += bch_btree_key_u64s(b, mid++);
		if (!mid)
			mid = 1;
	}
	n[0]->min_key = b->min_key;
	n[0]->max_key = bch_btree_key_pos(b, mid - 1);
	n[1]->min_key = bpos_successor(n[0]->max_key);
	n[1]->max_key = b->max_key;
	const struct bch_bkey **all = malloc(b->nr * sizeof(*all));
	if (!all)
		abort();
	uint64_t *unpacked = bch_btree_keys_unpacked(b, 0, b->nr, all);
	for (unsigned i = 0; i < 2; i++) {
		long before = bch_btree_node_bytes(n[i]);
		bch_btree_node_set_keys(n[i], all + (i ? mid : 0), i ? b->nr - mid : mid);
		bch_btree_cache_account(c, (long)bch_btree_node_bytes(n[i]) - before);
	}
	free(all);
	free(unpacked);
	c->roots->ahead_splits += b->journal_seq > bch_journal_seq_durable(c);
	for (unsigned i = 0; i < 2; i++) {
		n[i]->journal_seq = b->journal_seq;
		if ((r = bch_btree_node_write_io(c, n[i], true)))
			goto err;
		bch_btree_node_hash(c, n[i]);
	}
	/*
	 * b's keys are on disk in the halves: b must not be written (or split
	 * again) by a reclaim.  Its pin stays until the halves are linked
	 * (invariant (7)), and nothing reclaims until then (no_shrink: the
	 * parent update takes the journal's reserve, the allocator's flushes
	 * do not reclaim), so no entry written meanwhile records a last_seq
	 * past keys that only the unlinked halves hold.
	 */
	clear_pending_keep_pin(c, b);
	c->roots->no_shrink++;
	linking = true;

	if (root) {
		struct btree *nr_;
		/*
		 * Every key of this level journalled before the open entry
		 * belongs to an earlier shape of the tree (a root that was
		 * replaced by its only child): replay must not apply them to
		 * the new root, whose bset says which entries it follows.  One
		 * such key in the open entry itself (a merge just before, in
		 * the same entry): that entry is written first.
		 */
		if (bch_journal_open_has_keys(c, id, level + 1) && (r = bch_journal_flush(c)))
			goto err;
		if ((r = node_alloc(c, id, level + 1, &nr_)))
			goto err;
		nr_->min_key = POS_MIN;
		nr_->max_key = POS_MAX;
		uint64_t open_seq = bch_journal_seq_open(c);
		nr_->journal_seq = b->journal_seq > open_seq ? b->journal_seq : open_seq;
		for (unsigned i = 0; i < 2; i++) {
			struct bch_bkey *k = bch_btree_ptr_key(n[i]);
			long before = bch_btree_node_bytes(nr_);
			bch_btree_node_insert_key(nr_, k);
			bch_btree_cache_account(c, (long)bch_btree_node_bytes(nr_) - before);
			free(k);
		}
		if ((r = bch_btree_node_write_io(c, nr_, true))) {
			bch_btree_node_put(c, nr_);
			goto err;
		}
		bch_btree_node_hash(c, nr_);
		set_root(c, nr_);
		bch_btree_node_put(c, nr_);
	} else {
		struct bch_bkey *keys[2] = { bch_btree_ptr_key(n[0]), bch_btree_ptr_key(n[1]) };
		r = journal_and_apply(c, id, level + 1, keys, 2);
		free(keys[0]);
		free(keys[1]);
		if (r)
			goto err;
	}
	/* linked: b's space goes at the open entry, its pin with it (forget) */
	bch_free_btree_node(c, b->ptrs, b->nr_ptrs);
	bch_btree_node_forget(c, b);
	c->roots->no_shrink--;
	bch_btree_node_put(c, n[0]);
	bch_btree_node_put(c, n[1]);
	return 0;
err:
	if (linking)
		c->roots->no_shrink--;
	bch_fs_error(c, r, false);	/* a split half done */
	bch_btree_node_put(c, b);
	for (unsigned i = 0; i < 2; i++)
		if (n[i])
			bch_btree_node_put(c, n[i]);
	return r;
}

/*
 * Merge an underfull node at level (the one covering pos) with a sibling under the
 * same parent: one new node with both key sets, written first; then one
 * journal entry removes the left pointer and points the right one at the new
 * node; then the parent is looked at the same way.  A root left with a
 * single child is replaced by that child.
 */
static int maybe_merge(struct bch_fs *c, unsigned id, unsigned level, struct bch_bpos pos)
{
	struct btree *b, *p, *s;
	int r;

	if (level >= c->roots->r[id].level)
		return 0;	/* the root has no sibling */
	if ((r = bch_btree_find_node(c, id, level, pos, &b)))
		return r;
	if (b->u64s > split_threshold(c) / 4) {
		bch_btree_node_put(c, b);
		return 0;
	}
	if ((r = bch_btree_find_node(c, id, level + 1, b->max_key, &p))) {
		bch_btree_node_put(c, b);
		return r;
	}
	int i = bch_btree_node_find(p, b->max_key);
	if (p->nr < 2 || i >= (int)p->nr) {
		bch_btree_node_put(c, b);
		bch_btree_node_put(c, p);
		return 0;
	}
	int j = i + 1 < (int)p->nr ? i + 1 : i - 1;
	if ((r = bch_btree_node_get(c, id, level, bch_btree_interior_key(p, j), &s))) {
		bch_btree_node_put(c, b);
		bch_btree_node_put(c, p);
		return r;
	}
	struct btree *left = j > i ? b : s, *right = j > i ? s : b;
	struct btree *n = NULL;
	if (b->u64s + s->u64s > split_threshold(c) * 2 / 3)
		goto out;
	uint64_t seq = left->journal_seq > right->journal_seq ? left->journal_seq : right->journal_seq;
	/* not the journal: n is linked after every key it holds (invariant (6)) */
	if ((r = new_node_deps_durable(c, left)) || (r = new_node_deps_durable(c, right)) ||
	    (r = node_alloc(c, id, level, &n)))
		goto out;
	n->min_key = left->min_key;
	n->max_key = right->max_key;
	n->journal_seq = seq;
	c->roots->ahead_merges += seq > bch_journal_seq_durable(c);
	{
		const struct bch_bkey **both = malloc((left->nr + right->nr + 1) * sizeof(*both));
		if (!both)
			abort();
		uint64_t *ul = bch_btree_keys_unpacked(left, 0, left->nr, both);
		uint64_t *ur = bch_btree_keys_unpacked(right, 0, right->nr, both + left->nr);
		long before = bch_btree_node_bytes(n);
		bch_btree_node_set_keys(n, both, left->nr + right->nr);
		bch_btree_cache_account(c, (long)bch_btree_node_bytes(n) - before);
		free(both);
		free(ul);
		free(ur);
	}
	if ((r = bch_btree_node_write_io(c, n, true)))
		goto out;
	bch_btree_node_hash(c, n);
	/*
	 * both are on disk in n: nothing for a reclaim to write; their pins stay
	 * until the parent update pins its entry (invariant (7)), and nothing
	 * reclaims meanwhile (no_shrink: the update takes the journal's reserve)
	 */
	clear_pending_keep_pin(c, left);
	clear_pending_keep_pin(c, right);

	struct bch_bkey *keys[2] = { bch_bkey_alloc(BCH_BKEY_deleted, left->max_key, 0),
				     bch_btree_ptr_key(n) };
	bch_btree_node_put(c, p);
	p = NULL;
	c->roots->no_shrink++;
	r = journal_and_apply(c, id, level + 1, keys, 2);
	c->roots->no_shrink--;
	free(keys[0]);
	free(keys[1]);
	if (r)
		goto out;
	/* linked: the old nodes' space goes at the open entry, their pins with them */
	bch_free_btree_node(c, left->ptrs, left->nr_ptrs);
	bch_free_btree_node(c, right->ptrs, right->nr_ptrs);
	bch_btree_node_forget(c, left);
	bch_btree_node_forget(c, right);
	b = s = NULL;
	bch_btree_node_put(c, n);
	n = NULL;

	/* the parent may be underfull now too */
	if ((r = maybe_merge(c, id, level + 1, pos)))
		goto out;

	/* a root with one child left: the child becomes the root */
	struct btree_root *rt = &c->roots->r[id];
	struct btree *root;
	if (!(r = bch_btree_node_get(c, id, rt->level, rt->key, &root))) {
		if (root->level && root->nr == 1) {
			struct bch_bkey *child = bch_btree_key_dup(root, 0);
			free(rt->key);
			rt->key = child;
			rt->level = root->level - 1;
			bch_free_btree_node(c, root->ptrs, root->nr_ptrs);
			bch_btree_node_forget(c, root);
		} else {
			bch_btree_node_put(c, root);
		}
	}
out:
	if (n)
		bch_btree_node_put(c, n);
	if (b)
		bch_btree_node_put(c, b);
	if (s)
		bch_btree_node_put(c, s);
	if (p)
		bch_btree_node_put(c, p);
	return r;
}

/* b's space is full: rewrite it compacted at a new place, then relink it. */
static int move_node(struct bch_fs *c, struct btree *b)
{
	struct bch_extent_ptr old[BCH_REPLICAS_MAX];
	unsigned old_nr = b->nr_ptrs;
	struct btree *tmp;
	int r;

	uint64_t old_seq = b->seq;
	unsigned old_written = b->sectors_written;

	memcpy(old, b->ptrs, sizeof(old));
	if ((r = node_alloc(c, b->id, b->level, &tmp)))
		return r;
	/* take tmp's space and identity; tmp itself is dropped */
	b->nr_ptrs = tmp->nr_ptrs;
	memcpy(b->ptrs, tmp->ptrs, sizeof(b->ptrs));
	b->seq = tmp->seq;
	tmp->nr_ptrs = 0;
	bch_btree_node_forget(c, tmp);

	bool root = false;
	{
		/* is_root compares addresses: check against the old ones */
		struct btree_root *rt = &c->roots->r[b->id];
		const struct bch_btree_ptr *bp = rt->key ? bkey_val(rt->key) : NULL;
		root = bp && rt->level == b->level && bp->ptrs[0].dev == old[0].dev &&
		       bp->ptrs[0].offset == old[0].offset;
	}
	struct bch_extent_ptr new_ptrs[BCH_REPLICAS_MAX];
	unsigned new_nr = b->nr_ptrs;
	memcpy(new_ptrs, b->ptrs, sizeof(new_ptrs));

	c->roots->ahead_moves += b->journal_seq > bch_journal_seq_durable(c);
	r = bch_btree_node_write_io(c, b, true);
	/* rehash under the new address */
	b->nr_ptrs = old_nr;
	memcpy(b->ptrs, old, sizeof(old));
	bch_btree_node_unhash(c, b);
	b->nr_ptrs = new_nr;
	memcpy(b->ptrs, new_ptrs, sizeof(new_ptrs));
	bch_btree_node_hash(c, b);

	if (!r && root) {
		set_root(c, b);
	} else if (!r) {
		struct bch_bkey *k = bch_btree_ptr_key(b);
		r = parent_room(c, b);
		if (!r)
			r = journal_and_apply(c, b->id, b->level + 1, &k, 1);
		free(k);
	}
	if (r) {
		/* not relinked: the node stays where its parent points, still dirty */
		bch_btree_node_unhash(c, b);
		b->nr_ptrs = old_nr;
		memcpy(b->ptrs, old, sizeof(old));
		b->seq = old_seq;
		b->sectors_written = old_written;
		bch_btree_node_hash(c, b);
		bch_free_btree_node(c, new_ptrs, new_nr);
		return r;
	}
	bch_free_btree_node(c, old, old_nr);
	return 0;
}

static int node_write(struct bch_fs *c, struct btree *b);

/*
 * Writing a node can move or split it, which reads and changes other nodes:
 * no nested evictions (which would write yet other nodes) meanwhile.
 */
int bch_btree_node_rewrite(struct bch_fs *c, struct btree *b)
{
	int r;

	c->roots->no_shrink++;
	r = new_node_deps_durable(c, b);	/* a new place (invariant (6)) */
	if (!r && bch_btree_node_fits(c, b))
		r = move_node(c, b);
	if (!r) {
		clear_pending(c, b);
		b->bad_replicas = 0;
	}
	c->roots->no_shrink--;
	return r;
}

/* ------------------------------------------------------------ copygc */

struct gc_target {
	unsigned		id, level;
	struct bch_bpos		max_key;
};

struct gc_list {
	struct gc_target	*t;
	size_t			nr, cap;
};

static int gc_collect(struct bch_fs *c, struct btree *b, void *priv)
{
	struct gc_list *l = priv;

	if (!bch_alloc_copygc_bucket(c, &b->ptrs[0]) || is_root(c, b))
		return 0;
	if (l->nr == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->t = realloc(l->t, l->cap * sizeof(*l->t));
		if (!l->t)
			abort();
	}
	l->t[l->nr++] = (struct gc_target) { b->id, b->level, b->max_key };
	return 0;
}

int bch_btree_copygc(struct bch_fs *c)
{
	struct gc_list l = { 0 };
	int r = 0;

	if (c->roots->no_shrink)
		return 0;	/* not from inside another btree operation */
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r; id++)
		r = bch_btree_walk_nodes(c, id, gc_collect, &l);
	c->roots->no_shrink++;
	for (size_t i = 0; i < l.nr && !r; i++) {
		struct btree *b;
		if ((r = bch_btree_find_node(c, l.t[i].id, l.t[i].level, l.t[i].max_key, &b)))
			break;
		/* the tree may have changed since the walk: check it is still the one */
		if (bpos_eq(b->max_key, l.t[i].max_key) && bch_alloc_copygc_bucket(c, &b->ptrs[0]) &&
		    !is_root(c, b) && bch_btree_node_fits(c, b) &&
		    !(r = new_node_deps_durable(c, b)) && !(r = move_node(c, b))) {
			clear_pending(c, b);
			c->roots->copygc_moves++;
		}
		bch_btree_node_put(c, b);
	}
	c->roots->no_shrink--;
	free(l.t);
	/* the emptied buckets are free once the relinking entries are durable */
	return r ? r : bch_journal_flush(c);
}

int bch_btree_node_write(struct bch_fs *c, struct btree *b)
{
	int r;

	c->roots->no_shrink++;
	r = node_write(c, b);
	c->roots->no_shrink--;
	return r;
}

/*
 * After an append: the pointer to b (in its parent, or the root's) learns
 * how much of b is written, so that a reader knows that much must read
 * whole (damage there is never taken for a torn write).  The parent's copy
 * is changed in memory only, without a journal entry: a pointer's
 * sectors_written only has to be a lower bound, and the parent's next write
 * (at the latest at close) carries it, after the journal entry that makes
 * the append durable.  Its bset says it holds hints only when nothing else
 * is pending (BCH_BSET_HINTS).
 */
static void update_hint(struct bch_fs *c, struct btree *b)
{
	struct btree *p;

	if (is_root(c, b)) {
		set_root(c, b);
		return;
	}
	if (bch_btree_find_node(c, b->id, b->level + 1, b->max_key, &p)) {
		c->err_msg[0] = 0;	/* only a hint is not recorded */
		return;
	}
	int i = bch_btree_node_find(p, b->max_key);
	if (i >= 0 && (unsigned)i < p->nr && bpos_eq(bch_btree_key_pos(p, i), b->max_key) &&
	    bch_btree_key_header(p, i).type == BCH_BKEY_btree_ptr &&
	    ((const struct bch_btree_ptr *)bkey_val(bch_btree_interior_key(p, i)))->seq == b->seq) {
		struct bch_bkey *k = bch_btree_ptr_key(b);
		apply_key(c, p, k, 0);
		free(k);
		/*
		 * The parent is written only after a flush of every device that
		 * comes after this append (node_deps_durable()), so the hint never
		 * covers an append a power cut could still take away.  A flush,
		 * not a journal entry: the hint is in no entry, and one flush
		 * serves every node of a level written at close.  Its bset's
		 * journal_seq: the durable entry, whose keys p all holds.
		 */
		p->hint_flush = bch_journal_flush_gen(c) + 1;
		uint64_t seq = bch_journal_seq_durable(c);
		if (seq > p->journal_seq)
			p->journal_seq = seq;
	}
	bch_btree_node_put(c, p);
}

/* Is b's write a split (a node too big to write whole or past the threshold)? */
static bool write_splits(struct bch_fs *c, const struct btree *b)
{
	return !bch_btree_node_fits(c, b) || b->u64s > split_threshold(c);
}

/*
 * Does b's write append to its space (or write it whole where its parent
 * points, never written yet)?  Else it is a move or a split, which relinks
 * b in its parent: a journal update through the reserve, and maybe a split
 * of the parent.
 */
static bool write_in_place(struct bch_fs *c, struct btree *b)
{
	if (write_splits(c, b))
		return false;
	return !b->sectors_written ||
	       (!b->torn_tail && !b->no_append &&
		b->sectors_written + bch_btree_node_append_sectors(c, b) <= c->sb->btree_node_size &&
		!node_on_missing(c, b));
}

bool bch_btree_node_write_relinks(struct bch_fs *c, struct btree *b)
{
	return b->dirty && !write_in_place(c, b);
}

static int node_write(struct bch_fs *c, struct btree *b)
{
	int r;

	if (!b->dirty)
		return 0;
	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (c->emergency_ro)
		return -BCH_ERR_fs_emergency_ro;
	if (write_splits(c, b)) {
		/* split consumes a reference and frees b */
		b->refs++;
		r = split(c, b);
		return r ? r : 1;
	}
	/*
	 * Where b goes: where its parent points (never written yet, or an
	 * append), which takes write-ahead, or a new place (a move), which is
	 * linked after its keys (invariant (6)).  A node with a copy on a
	 * missing member is not appended to (that copy would be left behind,
	 * short of the bset): it is rewritten, with copies on present devices
	 * only.
	 */
	bool append = b->sectors_written && write_in_place(c, b);
	if (!b->sectors_written || append) {
		if ((r = node_deps_durable(c, b)))
			return r;
		if (!(r = bch_btree_node_write_io(c, b, !b->sectors_written)) && append)
			update_hint(c, b);
	} else if ((r = new_node_deps_durable(c, b))) {
		return r;
	} else if (!(r = move_node(c, b))) {
		b->torn_tail = b->no_append = false;	/* the torn bytes are in space now freed */
	}
	if (!r)
		clear_pending(c, b);
	return r;
}

int bch_btree_flush_all(struct bch_fs *c)
{
	for (unsigned pass = 0; pass < 1000000; pass++) {
		/*
		 * Moves and splits relink through the journal's reserve, which
		 * only a reservation from the top gives back: many node writes in
		 * a row (appends that no longer fit) would use it up.
		 */
		int r = bch_journal_restore_reserve(c);
		if (r < 0)
			return r;
		struct btree *dirty = bch_btree_cache_first_dirty(c);
		if (!dirty)
			return 0;
		dirty->refs++;
		r = bch_btree_node_write(c, dirty);
		if (r < 0)
			return r;
		if (r == 0)
			bch_btree_node_put(c, dirty);
	}
	return bch_fs_err(c, -EIO, "btree: nodes keep getting dirtied while flushing");
}

/* ------------------------------------------------------------ transactions */

/*
 * One ended transaction kept per thread for the next: at 1.3 KiB it misses
 * glibc's per-thread cache, and its malloc and free cost ~500 instructions
 * (callgrind), every namespace request and write taking one or more.  Freed
 * when the thread ends.
 */
static pthread_key_t trans_spare_key;
static pthread_once_t trans_spare_once = PTHREAD_ONCE_INIT;
static _Thread_local struct btree_trans *trans_spare;
static _Thread_local bool trans_spare_keyed;

static void trans_spare_key_make(void)
{
	if (pthread_key_create(&trans_spare_key, free))
		abort();
}

int bch_trans_init(struct bch_fs *c, struct btree_trans **trans)
{
	struct btree_trans *t = trans_spare;

	if (t) {
		/* it may end on another thread: this one's end frees it no more */
		trans_spare = NULL;
		pthread_setspecific(trans_spare_key, NULL);
	} else if (!(t = malloc(sizeof(*t))))
		return -ENOMEM;
	/* zeroed but for the arena (a kilobyte memset a transaction, for nothing) */
	memset(t, 0, offsetof(struct btree_trans, arena));
	t->c = c;
	t->keys = t->keys_in;
	t->ids = t->ids_in;
	t->order = t->order_in;
	t->leaf = t->leaf_in;
	t->cap = TRANS_INLINE;
	*trans = t;
	return 0;
}

/* A copy of k owned by t: in its arena while there is room. */
static struct bch_bkey *key_dup(struct btree_trans *t, const struct bch_bkey *k)
{
	if (t->arena_used + k->u64s > TRANS_ARENA_U64S)
		return bch_bkey_dup(k);
	struct bch_bkey *n = (struct bch_bkey *)(t->arena + t->arena_used);
	memcpy(n, k, bkey_bytes(k));
	t->arena_used += k->u64s;
	return n;
}

static void key_free(struct btree_trans *t, struct bch_bkey *k)
{
	if ((uint64_t *)k < t->arena || (uint64_t *)k >= t->arena + TRANS_ARENA_U64S)
		free(k);
}

static void trans_clear(struct btree_trans *t)
{
	for (unsigned i = 0; i < t->nr; i++)
		key_free(t, t->keys[i]);
	t->nr = 0;
	t->arena_used = 0;
}

void bch_trans_exit(struct btree_trans *t)
{
	if (!t)
		return;
	trans_clear(t);
	if (t->keys != t->keys_in) {
		free(t->keys);
		free(t->ids);
		free(t->order);
		free(t->leaf);
	}
	if (trans_spare) {
		free(t);
		return;
	}
	if (!trans_spare_keyed) {
		pthread_once(&trans_spare_once, trans_spare_key_make);
		trans_spare_keyed = true;
	}
	/* the key's value frees it at the thread's end; kept only when set */
	if (pthread_setspecific(trans_spare_key, t)) {
		free(t);
		return;
	}
	trans_spare = t;
}

bool bch_trans_unchecked;

/* (btree.h) bumped by every commit and replayed key of the inodes btree */
static _Atomic uint64_t inode_commits;

uint64_t bch_btree_inode_commits(void)
{
	return inode_commits;
}

/* Twice the room: off the inline arrays at the first growth. */
static void trans_grow(struct btree_trans *t)
{
	unsigned cap = t->cap * 2;

	if (t->keys == t->keys_in) {
		t->keys = malloc(cap * sizeof(*t->keys));
		t->ids = malloc(cap);
		t->order = malloc(cap * sizeof(*t->order));
		t->leaf = malloc(cap * sizeof(*t->leaf));
		if (!t->keys || !t->ids || !t->order || !t->leaf)
			abort();
		memcpy(t->keys, t->keys_in, sizeof(t->keys_in));
		memcpy(t->ids, t->ids_in, sizeof(t->ids_in));
	} else {
		t->keys = realloc(t->keys, cap * sizeof(*t->keys));
		t->ids = realloc(t->ids, cap);
		t->order = realloc(t->order, cap * sizeof(*t->order));
		t->leaf = realloc(t->leaf, cap * sizeof(*t->leaf));
		if (!t->keys || !t->ids || !t->order || !t->leaf)
			abort();
	}
	t->cap = cap;
}

struct bch_fs *bch_trans_fs(struct btree_trans *t)
{
	return t->c;
}

int bch_trans_update(struct btree_trans *t, unsigned id, const struct bch_bkey *k)
{
	if (id >= BCH_BTREE_ID_NR)
		return -EINVAL;
	if (t->nr == t->cap)
		trans_grow(t);
	t->keys[t->nr] = key_dup(t, k);
	int r = bch_snap_trans_fixup(t->c, id, t->keys[t->nr]);
	if (r) {
		key_free(t, t->keys[t->nr]);
		return r;
	}
	t->ids[t->nr++] = id;
	/* the snapshot's record of the inodes it touched (snapshot.h), once per inode and transaction */
	struct bch_bpos touch;
	if (bch_snap_touch_pos(t->c, id, t->keys[t->nr - 1], &touch) &&
	    !(t->last_touch_valid && bpos_eq(t->last_touch, touch))) {
		t->last_touch = touch;
		t->last_touch_valid = true;
		struct bch_bkey tk = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_snapshot_touch, .p = touch };
		return bch_trans_update(t, BCH_BTREE_ID_snapshots, &tk);
	}
	return 0;
}

/* (btree, position, index): a later update of a position after an earlier one */
static int update_cmp(const struct btree_trans *t, unsigned x, unsigned y)
{
	if (t->ids[x] != t->ids[y])
		return t->ids[x] < t->ids[y] ? -1 : 1;
	int c = bpos_cmp(t->keys[x]->p, t->keys[y]->p);
	return c ? c : x < y ? -1 : x > y;
}

static struct btree_trans *sort_trans;

static int cmp_update(const void *a, const void *b)
{
	return update_cmp(sort_trans, *(const unsigned *)a, *(const unsigned *)b);
}

/*
 * o: t's n keys by btree (a counting sort, stable), then each btree's run
 * by position where it is not in order already: a batch of freed inodes
 * (hundreds of keys, each btree's in position order, the btrees
 * interleaved) spent a fifth of its instructions in qsort() (callgrind).
 */
static void sort_by_btree(struct btree_trans *t, unsigned *o, unsigned n)
{
	unsigned start[BCH_BTREE_ID_NR + 1] = { 0 }, at[BCH_BTREE_ID_NR];

	for (unsigned i = 0; i < n; i++)
		start[t->ids[i] + 1]++;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++)
		start[id + 1] += start[id];
	memcpy(at, start, sizeof(at));
	for (unsigned i = 0; i < n; i++)
		o[at[t->ids[i]]++] = i;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++) {
		unsigned a = start[id], b = start[id + 1], j = a + 1;

		while (j < b && update_cmp(t, o[j - 1], o[j]) < 0)
			j++;
		if (j < b) {
			sort_trans = t;
			qsort(o + a, b - a, sizeof(*o), cmp_update);
		}
	}
}

/*
 * t->order: the keys in (btree, position) order, so each leaf's share is
 * one run.  Of several updates of one position only the last is kept (the
 * others freed, t->keys[i] NULL): it replaces them in the leaf, and replay
 * applies it last, so journalling them too was work for nothing (a 4 KiB
 * overwrite of a 4 KiB extent: the punch's delete, then the new extent at
 * its position).  Returns the words the live keys take in the journal.
 */
static size_t commit_order(struct btree_trans *t)
{
	unsigned *o = t->order, n = t->nr;
	size_t total = 0;

	if (n > 16) {
		sort_by_btree(t, o, n);
	} else {
		for (unsigned i = 0; i < n; i++)
			o[i] = i;	/* a commit's few keys (a write's 3-4): no qsort setup */
		for (unsigned i = 1; i < n; i++) {
			unsigned x = o[i], j = i;
			for (; j && update_cmp(t, o[j - 1], x) > 0; j--)
				o[j] = o[j - 1];
			o[j] = x;
		}
	}
	/*
	 * Superseded: freed, the rest moved down in their order (so a commit
	 * that fails leaves a transaction to commit again), t->order renumbered.
	 * newidx (old index -> new, UINT_MAX: dropped) borrows t->leaf, which
	 * ensure_room() fills later.
	 */
	unsigned live = 0, *newidx = (unsigned *)t->leaf;
	bool dropped = false;
	for (unsigned i = 0; i < n; i++)
		newidx[i] = 0;
	for (unsigned i = 0; i + 1 < n; i++)
		if (t->ids[o[i + 1]] == t->ids[o[i]] && bpos_eq(t->keys[o[i + 1]]->p, t->keys[o[i]]->p)) {
			key_free(t, t->keys[o[i]]);
			newidx[o[i]] = UINT_MAX;
			dropped = true;
		}
	if (dropped) {
		for (unsigned i = 0; i < n; i++)
			if (newidx[i] != UINT_MAX) {
				newidx[i] = live;
				t->keys[live] = t->keys[i];
				t->ids[live++] = t->ids[i];
			}
		unsigned m = 0;
		for (unsigned i = 0; i < n; i++)
			if (newidx[o[i]] != UINT_MAX)
				o[m++] = newidx[o[i]];
		t->nr = live;
	} else {
		live = n;
	}
	for (unsigned i = 0; i < live; i++)
		total += 1 + t->keys[i]->u64s;
	t->nr_order = live;
	return total;
}

/* The refs ensure_room() holds: one per run of t->order's first n keys. */
static void runs_put(struct btree_trans *t, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (!i || t->leaf[t->order[i]] != t->leaf[t->order[i - 1]])
			bch_btree_node_put(t->c, t->leaf[t->order[i]]);
}

/*
 * Every leaf this transaction touches has room for its share of it (one
 * run of t->order each); a leaf that does not is split (when may_split)
 * and *ok is false (look again).  *ok: t->leaf[] holds each key's leaf,
 * good until a node is read, written, moved, split or evicted (the refs
 * are held for the pass only, so that finding one leaf does not evict
 * another).  Leaves may end up above the split threshold; they are split
 * when written.
 */
static int ensure_room(struct btree_trans *t, bool may_split, bool *ok)
{
	struct bch_fs *c = t->c;
	int r = 0;

	/*
	 * A split relinks through the journal's reserve: give it back first
	 * (once: the first leaf short of room ends the pass, and nothing
	 * before it writes)
	 */
	if (may_split && (r = bch_journal_restore_reserve(c)) < 0)
		return r;
	*ok = true;
	for (unsigned i = 0; i < t->nr_order; ) {
		unsigned first = t->order[i], run = i, id = t->ids[first];
		struct btree *b;
		size_t share = 0;

		if ((r = bch_btree_find_node(c, id, 0, t->keys[first]->p, &b))) {
			runs_put(t, run);
			return r;
		}
		while (i < t->nr_order && t->ids[t->order[i]] == id &&
		       bpos_cmp(t->keys[t->order[i]]->p, b->max_key) <= 0) {
			share += t->keys[t->order[i]]->u64s;
			t->leaf[t->order[i++]] = b;
		}
		if (b->u64s <= split_threshold(c) && b->u64s + share <= node_u64s_max(c) - 16)
			continue;
		runs_put(t, run);
		*ok = false;
		if (!may_split) {
			bch_btree_node_put(c, b);
		} else if (b->nr < 2) {
			bch_btree_node_put(c, b);
			r = bch_fs_err(c, -EINVAL, "transaction too big for a btree node");
		} else {
			r = split(c, b);
		}
		return r;
	}
	runs_put(t, t->nr_order);
	return 0;
}

size_t bch_trans_max_u64s(struct bch_fs *c)
{
	return node_u64s_max(c) / 2;
}

int bch_trans_commit(struct btree_trans *t, unsigned flags)
{
	struct bch_fs *c = t->c;
	struct bch_journal_res res;
	size_t total;
	char err[160];
	int r = 0;

	if (!t->nr)
		return 0;
	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (c->emergency_ro)
		return -BCH_ERR_fs_emergency_ro;
	for (unsigned i = 0; i < t->nr; i++)
		if (!bch_trans_unchecked && bch_bkey_validate_fs(c, t->keys[i], t->ids[i], 0, err, sizeof(err)))
			return bch_fs_err(c, -EINVAL, "invalid key: %s", err);
	/* the replicas table names every member set before a key using it is journalled */
	for (unsigned i = 0; i < t->nr; i++)
		if ((r = bch_replicas_mark_key(c, t->ids[i], t->keys[i])))
			return r;
	total = commit_order(t);
	if (total > node_u64s_max(c) / 2)
		return bch_fs_err(c, -EINVAL, "transaction too big (%zu words; at most %zu)", total,
				  node_u64s_max(c) / 2);
	/* free space low: make pending frees durable, then empty sparse buckets */
	if (bch_alloc_low(c) && !(r = bch_journal_flush(c)) && bch_alloc_low(c))
		r = bch_btree_copygc(c);
	if (r)
		return r;

	for (unsigned tries = 0;; tries++) {
		bool ok;
		if (tries > 1000)
			return bch_fs_err(c, -EIO, "btree: commit cannot make room");
		if ((r = ensure_room(t, true, &ok)))
			return r;
		if (!ok)
			continue;
		if ((r = bch_journal_res_get(c, total, &res)))
			return r;
		c->roots->no_shrink++;
		if (!res.wrote)
			break;	/* nothing written since: the leaves found are the leaves */
		/* the reservation wrote (moved, split) nodes: look again */
		r = ensure_room(t, false, &ok);
		if (r || !ok) {
			c->roots->no_shrink--;
			bch_journal_res_put(c, &res);
			if (r)
				return r;
			continue;
		}
		break;
	}

	/* in the order given: a later key of a position goes in after an earlier one */
	unsigned nr_deleted = 0;
	for (unsigned i = 0; i < t->nr; i++) {
		struct bch_bkey *k = t->keys[i];
		if (!k)
			continue;
		void *d = bch_journal_res_add(c, &res, BCH_JSET_ENTRY_btree_keys, t->ids[i], 0, k->u64s);
		memcpy(d, k, bkey_bytes(k));
		t->leaf[i]->refs++;
		apply_key(c, t->leaf[i], k, res.seq);
		bch_btree_node_put(c, t->leaf[i]);
		nr_deleted += k->type == BCH_BKEY_deleted;
		if (t->ids[i] == BCH_BTREE_ID_inodes)
			inode_commits++;
	}
	/*
	 * Deletes can leave leaves nearly empty: merge them with a sibling.
	 * Every delete's leaf is looked at again once the journal reservation
	 * is put back and the reserve restored (which can write nodes), not
	 * only those at maybe_merge()'s size right after the apply: filtering
	 * on that size skipped merges (btree-bench, 1M keys deleted: 1.0M left
	 * on disk after close against 0.8M).
	 */
	struct bch_bpos *deleted = NULL;
	uint8_t *deleted_ids = NULL;
	unsigned n = 0;
	if (nr_deleted) {
		deleted = malloc(nr_deleted * sizeof(*deleted));
		deleted_ids = malloc(nr_deleted);
		if (!deleted || !deleted_ids)
			abort();
		for (unsigned i = 0; i < t->nr; i++)
			if (t->keys[i] && t->keys[i]->type == BCH_BKEY_deleted) {
				deleted[n] = t->keys[i]->p;
				deleted_ids[n++] = t->ids[i];
			}
	}
	c->roots->no_shrink--;
	bch_journal_res_put(c, &res);
	trans_clear(t);
	/* (each relinks through the journal's reserve: given back between them) */
	if (nr_deleted) {
		for (unsigned i = 0; i < n && !r; i++)
			if ((r = bch_journal_restore_reserve(c)) >= 0)
				r = maybe_merge(c, deleted_ids[i], 0, deleted[i]);
		free(deleted);
		free(deleted_ids);
		if (r)
			return r;
	}
	if ((flags & BCH_TRANS_SYNC) && (r = bch_journal_flush_seq(c, res.seq)))
		return r;
	return bch_btree_cache_shrink(c);
}

/* ------------------------------------------------------------ replay, roots */

int bch_btree_replay_key(struct bch_fs *c, unsigned id, unsigned level,
			 const struct bch_bkey *k, uint64_t seq)
{
	struct btree *b;
	int r;

	if (!c->roots->r[id].key)
		return bch_fs_err(c, -BCH_ERR_journal_bad, "journal: key for %s btree, which has no root",
				  bch_btree_id_name(id));
	if (level > c->roots->r[id].level)
		return 0;	/* an update of a node the current root replaced */
	c->roots->no_shrink++;
	r = bch_btree_find_node(c, id, level, k->p, &b);
	if (!r) {
		/*
		 * Older than what the node was last written with: the key is in
		 * it already, or was for a node this one replaced wholesale (a
		 * new root, a split half, a merge) and is not to be applied: an
		 * interior key of an earlier shape of the tree would point the
		 * node at a child that is gone.
		 */
		if (seq >= b->disk_journal_seq)
			apply_key(c, b, k, seq);
		if (id == BCH_BTREE_ID_inodes)
			inode_commits++;
		bch_btree_node_put(c, b);
	}
	c->roots->no_shrink--;
	return r;
}

int bch_btree_split_overfull(struct bch_fs *c)
{
	for (unsigned n = 0; n < 100000; n++) {
		int r = bch_journal_restore_reserve(c);	/* splits relink through it */

		if (r < 0)
			return r;
		struct btree *b = bch_btree_cache_first_overfull(c, split_threshold(c));
		if (!b)
			return 0;
		b->refs++;
		if ((r = split(c, b)))
			return r;
	}
	return bch_fs_err(c, -EIO, "btree: too many overfull nodes");
}

int bch_btree_feature_init(struct bch_fs *c, uint64_t feature, unsigned id)
{
	int r;

	if (c->roots->r[id].key && (c->sb->features & feature))
		return 0;
	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (!(c->sb->features & feature)) {
		c->sb->features |= feature;
		if ((r = bch_write_super(c)))
			return r;
	}
	return c->roots->r[id].key ? 0 : bch_btree_create_root(c, id);
}

int bch_btree_create_root(struct bch_fs *c, unsigned id)
{
	struct btree *b;
	int r = node_alloc(c, id, 0, &b);

	if (r)
		return r;
	b->min_key = POS_MIN;
	b->max_key = POS_MAX;
	if ((r = bch_btree_node_write_io(c, b, true))) {
		bch_btree_node_put(c, b);
		return r;
	}
	bch_btree_node_hash(c, b);
	set_root(c, b);
	bch_btree_node_put(c, b);
	return 0;
}

int bch_btree_create_roots(struct bch_fs *c)
{
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++) {
		/* made with the first subvolume (snapshot.c), the first shared extent
		 * (reflink.c), the first stripe (ec.c): journal entries stay as they were */
		if (id == BCH_BTREE_ID_snapshots || id == BCH_BTREE_ID_reflink || id == BCH_BTREE_ID_stripes)
			continue;
		int r = bch_btree_create_root(c, id);
		if (r)
			return r;
	}
	return 0;
}

unsigned bch_btree_roots_u64s(struct bch_fs *c)
{
	unsigned u64s = 0;

	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++)
		if (c->roots->r[id].key)
			u64s += 1 + c->roots->r[id].key->u64s;
	return u64s;
}

void bch_btree_roots_to_jset(struct bch_fs *c, struct bch_jset_entry *dst)
{
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++) {
		struct btree_root *r = &c->roots->r[id];

		if (!r->key)
			continue;
		memset(dst, 0, sizeof(*dst));
		dst->u64s = r->key->u64s;
		dst->btree_id = id;
		dst->level = r->level;
		dst->type = BCH_JSET_ENTRY_btree_root;
		memcpy(dst->_data, r->key, bkey_bytes(r->key));
		dst = (struct bch_jset_entry *)((__le64 *)dst + 1 + dst->u64s);
	}
}

int bch_btree_roots_from_jset(struct bch_fs *c, const struct bch_jset_entry *e)
{
	const struct bch_bkey *k = (const void *)e->_data;
	char err[160];

	if (e->type != BCH_JSET_ENTRY_btree_root)
		return 0;
	if (e->btree_id >= BCH_BTREE_ID_NR || e->u64s < BCH_BKEY_U64s || k->u64s != e->u64s ||
	    e->level >= 16 || bch_bkey_validate(k, e->btree_id, 1, err, sizeof(err)))
		return bch_fs_err(c, -BCH_ERR_journal_bad, "journal: invalid btree root entry");
	struct btree_root *r = &c->roots->r[e->btree_id];
	free(r->key);
	r->key = bch_bkey_dup(k);
	r->level = e->level;
	return 0;
}
