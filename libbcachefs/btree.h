/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_BTREE_H
#define _BCACHEFS_BTREE_H

/*
 * btree.h - the btrees: in-memory nodes, the node cache, node I/O,
 * iterators and transactions.  Modules: btree_io.c (node format on disk),
 * btree_cache.c (nodes in memory, limit, eviction), btree_update.c
 * (transactions, inserts, splits, node writes and moves), btree_iter.c
 * (lookups, iteration, walking nodes).
 *
 * A node in memory holds its live keys as a sorted array of offsets into
 * its arena with a prefix of each position beside them (binary search over
 * the prefixes, a key compared only on a tie; no linear scans): 16 bits
 * each while the arena is at most 512 KiB, 4 bytes a key; else 32 bits.
 * The keys themselves lie in the arena, in order, after a read or a write
 * (a scan walks memory in order); inserts since are
 * appended to the arena's room, which is packed again, or grown in place,
 * when it runs out.  A leaf's keys laid out anew (a pack, a split's or a
 * merge's new node) lie packed against a format fitted to them (bkey.h: a
 * base and a bit width per header field; random keys of one type and length
 * take 16 bytes of header, not 40), when that is shorter; keys put since are
 * packed as they come while they fit it, and from the first that does not
 * lie whole after them until a pack takes them in (keeping the format, and
 * copying the packed keys as they are, when the new ones fit it).  So a key
 * is read into a buffer of the caller's (bch_btree_key()), or only its
 * position (a search's tie) or header; nothing writes through either.
 * Interior nodes and a read's raw bytes hold none packed, and a node is
 * written with whole keys: packing is memory only.  Once keys are appended to it, the index (offsets, then
 * prefixes) lies in the arena's allocation too, right after the keys' room;
 * a mapped arena's room ends where the index then ends a page (its pages
 * all full but the last) and grows a page at a time.  It also
 * holds what changed since it was last written: a bit beside each key
 * changed (kdirty), and the positions deleted (`pending`, each keeping its
 * whiteout; appended as they come and sorted when written or when they
 * pile up), which the next write appends to the node's space as a new bset.  When the space is used up
 * the node is rewritten compacted to a new place and its parent updated.
 *
 * Invariants
 *   (1) Write-ahead: a node is written where its parent (or the root)
 *       already points — an append, a whole write in place — only after the
 *       journal is durable up to the newest key in it (b->journal_seq).
 *   (2) A dirty node holds a journal pin at the oldest unwritten key's
 *       sequence, so the journal keeps those entries until it is written.
 *   (3) New nodes (splits, merges, moves, new roots) are written before the
 *       journal entry that links them into their parent (or the entry whose
 *       roots name a new root), so replay never follows a pointer to space
 *       that was not written: every entry is written after a flush of every
 *       device (journal.c), and its own flush makes it durable.
 *   (4) Space of a node that is no longer pointed to is freed at the current
 *       journal sequence and reused only once that sequence is durable.
 *   (5) The cache evicts only clean, unreferenced nodes; its memory stays
 *       near btree_cache_size (dirty nodes are written to make room).
 *   (6) A new node needs no journal flush before it is written (only the
 *       device flush for the children's appends its hints cover): it is
 *       reached only through the entry S that links it, journalled after
 *       every key it holds (S >= its journal_seq).  S on disk means every
 *       entry before S is (3), so its keys are in the journal and it is on
 *       disk; S not on disk means recovery uses the node it replaced, whose
 *       space (4) keeps until an entry at least S is durable, and replays
 *       the same keys into it.  So (1)'s promise holds for every node that
 *       can be reached: none holds a key of an entry that is not durable.
 *       An unlinked new node a crash leaves may; the node scan does not
 *       take a leaf newer than the journal (btree_node_scan.c rule (5)).
 *   (7) The node a new node replaces keeps its journal pin until the link
 *       is pinned (the parent's apply at S) or the roots name the new node,
 *       and nothing reclaims in between (no_shrink: the link takes the
 *       journal's reserve); so no entry records a last_seq past keys that
 *       only an unlinked new node holds.  A new root's bset journal_seq is
 *       the open entry's, which holds no key of the root's level (written
 *       first when it does): replay applies none journalled for an earlier
 *       shape of the tree to it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"
#include "bkey.h"
#include "journal.h"

struct bch_fs;

/*
 * A position deleted since its node was last written (struct btree's
 * pending): a changed position that holds a key is a bit beside the key in
 * the index instead (kdirty).
 */
struct btree_pending {
	struct bch_bpos		p;		/* p.pad (zero on disk): 0 for a plain
						 * whiteout (no version, size, value),
						 * else 1 + its copy's slot in
						 * pending_copies (kv --unchecked) */
};
_Static_assert(sizeof(struct btree_pending) == 24, "btree_pending size");

struct btree {
	uint8_t			id;
	uint8_t			level;
	struct bch_bpos		min_key, max_key;
	uint64_t		seq;		/* this node life's identity */
	unsigned		nr_ptrs;
	struct bch_extent_ptr	ptrs[BCH_REPLICAS_MAX];
	unsigned		sectors_written;	/* 0: never written */
	uint8_t			bad_replicas;	/* bit i: ptrs[i] failed when read (fsck rewrites) */
	uint8_t			csum_type;	/* of the bsets on disk: appends keep it */
	bool			torn_tail;	/* read: a torn append was forgiven (recovery);
						 * the next write rewrites the node elsewhere */
	bool			no_append;	/* encrypted filesystem, node read from disk:
						 * the next write rewrites it under a new seq
						 * (crypt.h invariant (1)) */
	char			**dropped;	/* fsck: invalid keys skipped when read ("pos: why") */
	unsigned		nr_dropped;

	/*
	 * The index: 16-bit entries while every offset fits (an arena to
	 * 512 KiB: all of a 256k node's), else 32-bit (index_wide).
	 */
	union {				/* live keys, sorted: where the i-th lies in
					 * arena, in u64s (bch_btree_key()) */
		void		*koff;
		uint16_t	*koff16;
		uint32_t	*koff32;
	};
	union {				/* key i's search prefix (the top 16 or 32
					 * order-keeping bits of its position, from a
					 * base position: btree_cache.c), searched
					 * without touching the keys; ties compare them */
		void		*kpos;
		uint16_t	*kpos16;
		uint32_t	*kpos32;
	};
	bool			index_wide;
	bool			index_in_arena;	/* koff and kpos (cap entries each, one
						 * block) lie right after the arena's
						 * arena_bytes, in its allocation; else the
						 * block is malloc'd (a read's raw bytes, a
						 * wide index) */
	/*
	 * A leaf's keys laid out anew (a pack, set_keys) lie packed in the
	 * arena against pack_fmt (bkey.h), when that is shorter: the keys at
	 * offsets below packed_u64s, which grows while keys appended since
	 * fit (btree_cache.c append_packed()); from the first that does not
	 * (offsets at or after) they are whole.  Interior nodes and a read's
	 * raw bytes: none.
	 */
	struct bch_bkey_format	*pack_fmt;	/* NULL: no key packed */
	uint32_t		packed_u64s;
	size_t			packed_saved;	/* bytes the live packed keys take less
						 * than whole (bch_btree_node_live_bytes()) */
	struct bch_bpos		kfmt_lo;	/* the base the prefixes are taken from */
	struct bch_bpos		kfmt_ref;	/* and the last position they tell apart */
	uint8_t			kfmt_mode, kfmt_bits;
	unsigned		nr, cap;
	size_t			u64s;		/* of the live keys */
	void			*arena;		/* every key: packed in order after a read, a
						 * write or a pack, inserts appended since */
	size_t			arena_bytes;
	size_t			arena_used;	/* keys are appended from here while it has
						 * room; 0: no appends (a node's read bytes) */

	/*
	 * Changed since the last write.  A position that holds a key now: bit
	 * i of kdirty for key i (the key is the node's own; the bits move with
	 * the index's entries), a bit a key instead of a position a change:
	 * the keys changed between two writes of a leaf are most of its keys
	 * (random inserts), whose positions took as many bytes as the index.
	 * A deleted position: an entry in pending (a delete keeps its
	 * whiteout's fields), appended unsorted; [0, nr_pending_sorted) is
	 * sorted with one entry a position, and bch_btree_node_pending_sort()
	 * sorts the rest in and drops those whose position holds a key again.
	 */
	uint64_t		*kdirty;	/* NULL until a key changes; bits >= nr are 0 */
	unsigned		dirty_words, nr_dirty;	/* allocated; bits set */
	bool			pending_recheck;	/* a key came in while deletes were
						 * pending: one may be superseded */
	unsigned		last_insert;	/* index of the key node_array_insert() placed */
	uint64_t		last_insert_mod;	/* mod when it did, and the key's position:
						 * the pending_add() after it finds it there */
	struct bch_bpos		last_insert_pos;
	struct btree_pending	*pending;
	unsigned		nr_pending, cap_pending, nr_pending_sorted;
	struct bch_bkey		**pending_copies;	/* deletes unlike a plain whiteout, whole */
	unsigned		nr_pending_copies, nr_copy_slots, cap_copy_slots;
	size_t			pending_u64s;	/* of the bset they make: exact once sorted */

	bool			dirty;
	uint64_t		journal_seq;	/* newest journal seq of a key in it */
	uint64_t		hint_flush;	/* written only once bch_journal_flush_gen()
						 * reaches this: children's appends that
						 * its hints cover are durable first */
	uint64_t		disk_journal_seq;	/* the newest journal_seq of the bsets
						 * read: a key for this node from an older
						 * entry is in them, or belonged to a node
						 * this one replaced (replay skips it) */
	struct bch_journal_pin	pin;

	/* cache */
	struct btree		*hnext;
	struct btree		*lru_prev, *lru_next;
	unsigned		refs;
	uint64_t		mod;		/* bumped by every change to its keys */
};

struct btree_root {
	struct bch_bkey		*key;		/* btree_ptr to the root node, NULL = none */
	unsigned		level;
};

struct bch_btree_roots {
	struct btree_root	r[BCH_BTREE_ID_NR];
	unsigned		no_shrink;	/* inside a commit: no eviction (no nested writes) */
	uint64_t		seq_counter;	/* makes node seqs unique */
	uint64_t		copygc_moves;	/* nodes moved by copygc (for tests, -v) */
	/* new nodes written holding keys of entries not durable yet (invariant (6); tests) */
	uint64_t		ahead_splits, ahead_merges, ahead_moves;
	/*
	 * The leaf each btree's last descent found (bch_btree_leaf_hint()),
	 * good while no node came into the cache or left it (node_gen, moved
	 * by btree_cache.c: a split's, merge's, move's new nodes are hashed,
	 * the nodes they replace forgotten; a node's range never changes) and
	 * the root is the one it was found under (fsck swaps roots by hand).
	 */
	uint64_t		node_gen;
	struct bch_leaf_hint {
		struct btree		*b;
		uint64_t		gen;
		const struct bch_bkey	*root_key;
		uint64_t		root_seq;
		unsigned		root_level;
	}			hint[BCH_BTREE_ID_NR];
};

/* ------------------------------------------------------------ cache */

int  bch_btree_cache_init(struct bch_fs *c);
void bch_btree_cache_exit(struct bch_fs *c);

/*
 * The node a btree_ptr key points to (read and validated if not cached),
 * with a reference; put it with bch_btree_node_put().
 */
int  bch_btree_node_get(struct bch_fs *c, unsigned id, unsigned level,
			const struct bch_bkey *ptr, struct btree **ret);
void bch_btree_node_put(struct bch_fs *c, struct btree *b);

/*
 * A leaf held between calls by a long scan (fsck's key cursors), so that
 * reading other nodes meanwhile cannot evict it: the hold keeps a
 * reference.  The scan must check bch_btree_hold_valid() before each use:
 * a node that is forgotten (split, merged, moved) clears the hold, and a
 * change to its keys makes the hold stale; the scan then looks its position
 * up again.  Held nodes do not count against the cache's limit.
 */
struct btree_hold {
	struct btree		*b;	/* NULL: nothing held */
	uint64_t		mod;	/* b->mod when taken */
	size_t			bytes;	/* b's size when taken (the cache's held_bytes) */
	struct btree_hold	*next;	/* the cache's list of holds */
};
/* Hold b, taking over the caller's reference to it. */
void bch_btree_hold(struct bch_fs *c, struct btree_hold *h, struct btree *b);
/* Let go of what h holds (if anything). */
void bch_btree_unhold(struct bch_fs *c, struct btree_hold *h);
static inline bool bch_btree_hold_valid(const struct btree_hold *h)
{
	return h->b && h->b->mod == h->mod;
}
struct btree *bch_btree_node_new(struct bch_fs *c, unsigned id, unsigned level);
void bch_btree_node_hash(struct bch_fs *c, struct btree *b);	/* after ptrs change */
void bch_btree_node_forget(struct bch_fs *c, struct btree *b);	/* drop from cache, free */
void bch_btree_node_unhash(struct bch_fs *c, struct btree *b);	/* before ptrs change */
void bch_btree_cache_drop(struct bch_fs *c, const struct bch_extent_ptr *p);	/* if cached, unreferenced */
/*
 * Evict to the limit, from the top (no node held for a caller): dirty nodes
 * are written, the journal's reserve given back before each write that
 * relinks.  A read's own shrink (in bch_btree_node_get()) writes in place only.
 */
int  bch_btree_cache_shrink(struct bch_fs *c);
void bch_btree_cache_evict_clean(struct bch_fs *c);		/* no writes */
/* Every clean node nobody references or holds, out (a scan moving to other btrees). */
void bch_btree_cache_evict_unused(struct bch_fs *c);
/*
 * Keep unreferenced leaves to bytes (default: the whole limit), leaving the
 * rest of btree_cache_size to interior nodes: for a scan that reads each
 * leaf once (fsck -n), while lookups still find the nodes above cached.
 */
void bch_btree_cache_set_leaf_limit(struct bch_fs *c, size_t bytes);
/*
 * The leaf of btree id that covers pos, with a reference, when it is the
 * one the last descent found (struct bch_btree_roots' hint) and no node has
 * come into the cache or left it since, nor the root changed; else NULL
 * (descend).  bch_btree_find_node()'s shortcut: most lookups fall in the
 * leaf the one before found.
 */
struct btree *bch_btree_leaf_hint(struct bch_fs *c, unsigned id, struct bch_bpos pos);
/* One more reference to cached node b, which becomes the hottest. */
void bch_btree_node_ref(struct bch_fs *c, struct btree *b);
struct btree *bch_btree_cache_first_dirty(struct bch_fs *c);
struct btree *bch_btree_cache_first_overfull(struct bch_fs *c, size_t u64s);
size_t bch_btree_cache_bytes(struct bch_fs *c);

/*
 * Keys of a node in memory.  A key may lie packed in the arena (a leaf's,
 * pack_fmt): it is read through a buffer of the caller's, into which it is
 * unpacked; nothing writes through what these return.
 */
struct bch_bkey_buf {
	uint64_t		w[BCH_BKEY_U64s + BCH_BKEY_VAL_U64s_MAX];	/* any key whole */
};

/* Where b's i-th key lies in its arena, in u64s. */
static inline uint32_t bch_btree_key_off(const struct btree *b, unsigned i)
{
	return b->index_wide ? b->koff32[i] : b->koff16[i];
}

static inline bool bch_btree_key_packed(const struct btree *b, unsigned i)
{
	return bch_btree_key_off(b, i) < b->packed_u64s;
}

/*
 * b's i-th key (i < b->nr): in b's arena when it lies there whole, else
 * unpacked into buf.  Valid until b's keys change (b->mod) and buf is
 * reused or goes.
 */
static inline const struct bch_bkey *bch_btree_key(const struct btree *b, unsigned i,
						   struct bch_bkey_buf *buf)
{
	const uint64_t *k = (const uint64_t *)b->arena + bch_btree_key_off(b, i);

	if (!bch_btree_key_packed(b, i))
		return (const struct bch_bkey *)k;
	bch_bkey_unpack(b->pack_fmt, k, (struct bch_bkey *)buf->w);
	return (const struct bch_bkey *)buf->w;
}

/* An interior node's i-th key (a btree_ptr): interior nodes hold none packed. */
static inline const struct bch_bkey *bch_btree_interior_key(const struct btree *b, unsigned i)
{
	if (bch_btree_key_packed(b, i))
		__builtin_trap();
	return (const struct bch_bkey *)((const uint64_t *)b->arena + bch_btree_key_off(b, i));
}

/* Only its position / its header (no value): nothing but these unpacked. */
static inline __attribute__((always_inline)) struct bch_bpos bch_btree_key_pos(const struct btree *b,
									  unsigned i)
{
	const uint64_t *k = (const uint64_t *)b->arena + bch_btree_key_off(b, i);

	if (!bch_btree_key_packed(b, i))
		return ((const struct bch_bkey *)k)->p;
	return bch_bkey_packed_pos(b->pack_fmt, k);
}

/* Its length in words, whole. */
static inline unsigned bch_btree_key_u64s(const struct btree *b, unsigned i)
{
	const uint64_t *k = (const uint64_t *)b->arena + bch_btree_key_off(b, i);
	const struct bch_bkey_format *f = b->pack_fmt;

	if (!bch_btree_key_packed(b, i))
		return ((const struct bch_bkey *)k)->u64s;
	return f->bits[BKF_U64S] ? f->base[BKF_U64S] +
		bch_bkey_bits_read(k, f->off[BKF_U64S], f->bits[BKF_U64S]) : f->base[BKF_U64S];
}

static inline struct bch_bkey bch_btree_key_header(const struct btree *b, unsigned i)
{
	const uint64_t *k = (const uint64_t *)b->arena + bch_btree_key_off(b, i);
	struct bch_bkey h;

	if (!bch_btree_key_packed(b, i))
		return *(const struct bch_bkey *)k;
	bch_bkey_unpack_header(b->pack_fmt, k, &h);
	return h;
}

/*
 * A copy of b's i-th key, malloc'd; and all of keys [from, to) at once:
 * ptrs[] (to - from of them) point at each, whole, in the block returned
 * (free it) or in b's arena; valid until b's keys change.
 */
struct bch_bkey *bch_btree_key_dup(const struct btree *b, unsigned i);
uint64_t *bch_btree_keys_unpacked(const struct btree *b, unsigned from, unsigned to,
				  const struct bch_bkey **ptrs);
/* The bytes b's live keys take in its arena (less than b->u64s words when packed). */
static inline size_t bch_btree_node_live_bytes(const struct btree *b)
{
	return b->u64s * 8 - b->packed_saved;
}
/* Free b's key index (koff, kpos), when b itself goes. */
void bch_btree_node_free_index(struct btree *b);
int  bch_btree_node_find(const struct btree *b, struct bch_bpos pos);	/* first >= pos */
void bch_btree_node_insert_key(struct btree *b, const struct bch_bkey *k);	/* copies */
/* k itself (inside b->arena, not copied): node reads place keys where they lie. */
void bch_btree_node_insert_ref(struct btree *b, const struct bch_bkey *k);
/* Room for nr keys in b's arrays at once (a read knows how many come). */
void bch_btree_node_reserve(struct btree *b, unsigned nr);
void bch_btree_node_pack_keys(struct btree *b);		/* keys into one arena, in order */
/* Empty b takes copies of keys[0..nr) (sorted, live keys only), packed. */
void bch_btree_node_set_keys(struct btree *b, const struct bch_bkey * const *keys, unsigned nr);
void bch_btree_node_free_keys(struct btree *b);		/* every key and the arena; nr 0 */

/*
 * Node arenas (btree_cache.c): large ones are pages mapped for them alone,
 * small ones come from malloc.  Free and resize with the size they have
 * (b->arena_bytes).  Running out of memory aborts.
 */
void *bch_node_arena_alloc(size_t bytes);
void *bch_node_arena_resize(void *p, size_t old_bytes, size_t new_bytes);
void bch_node_arena_free(void *p, size_t bytes);
/* Tests: large arenas mapped under ASan too (they are already elsewhere); before any arena. */
void bch_node_arenas_mapped(void);
/* Resize b's arena to bytes; the keys that lie in it follow it if it moves. */
void bch_btree_node_arena_resize(struct btree *b, size_t bytes);
void bch_btree_node_pending_add(struct btree *b, const struct bch_bkey *k);	/* after insert_key */
/* Sort and merge b's pending positions (newest wins); pending_u64s is then exact. */
void bch_btree_node_pending_sort(struct btree *b);
/* Anything changed since b was last written (keys or deletes)? */
static inline bool bch_btree_node_has_pending(const struct btree *b)
{
	return b->nr_dirty || b->nr_pending;
}
/*
 * The bset of b's changes, sorted (after bch_btree_node_pending_sort()): the
 * changed keys and the deletes' whiteouts in position order, into dst of
 * max_u64s words.  The words written, or SIZE_MAX when they do not fit.
 */
size_t bch_btree_node_pending_pack(const struct btree *b, uint64_t *dst, size_t max_u64s);
/* Drop every pending position (the node was written). */
void bch_btree_node_pending_clear(struct btree *b);
void bch_btree_cache_account(struct bch_fs *c, long delta);
/* The same for the pending lists' part of it (bch_btree_node_pending_bytes()). */
void bch_btree_cache_account_pending(struct bch_fs *c, long delta);
size_t bch_btree_node_pending_bytes(const struct btree *b);
size_t bch_btree_node_bytes(const struct btree *b);

/* A btree_ptr key for b (malloc'd). */
struct bch_bkey *bch_btree_ptr_key(const struct btree *b);

/* ------------------------------------------------------------ node I/O */

/* Read and validate the node ptr points to; the whole node, all bsets. */
int bch_btree_node_read(struct bch_fs *c, unsigned id, unsigned level,
			const struct bch_bkey *ptr, struct btree **ret);
/*
 * Read and check every copy (of those with a bit in only) of the node ptr
 * points to, as a read would, without caching anything (scrub): *bad gets
 * a bit per copy that fails, *missing one per copy on a member not given;
 * the first failure's reason goes into err; *bytes grows by what the good
 * copies hold.  A missing library or memory is returned (no copy marked).
 */
int bch_btree_node_verify(struct bch_fs *c, unsigned id, unsigned level, const struct bch_bkey *ptr,
			  unsigned only, unsigned *bad, unsigned *missing, uint64_t *bytes,
			  char *err, size_t errlen);
/* Write b: append its pending keys, or write it whole when new. */
int bch_btree_node_write_io(struct bch_fs *c, struct btree *b, bool whole);
/* Does b's content fit in one node written whole? */
bool bch_btree_node_fits(struct bch_fs *c, const struct btree *b);
/* Sectors an append of b's pending keys takes (sorts them: pending_sort()). */
unsigned bch_btree_node_append_sectors(struct bch_fs *c, struct btree *b);
/*
 * Would writing dirty b relink it (a move or a split: an update of its
 * parent through the journal's reserve, which may split the parent)?
 * false: an append, or a first write where its parent points.
 */
bool bch_btree_node_write_relinks(struct bch_fs *c, struct btree *b);

/* ------------------------------------------------------------ updates */

struct btree_trans;
#define BCH_TRANS_SYNC	(1U << 0)	/* durable (journal flushed) on return */

int  bch_trans_init(struct bch_fs *c, struct btree_trans **trans);
/* Insert or overwrite k (type deleted: delete) in btree id; copies k. */
int  bch_trans_update(struct btree_trans *t, unsigned id, const struct bch_bkey *k);
/* The filesystem t belongs to. */
struct bch_fs *bch_trans_fs(struct btree_trans *t);
/* The most words (a word per key plus its u64s) one transaction may hold. */
size_t bch_trans_max_u64s(struct bch_fs *c);
/* Commit atomically through the journal; the transaction is then empty. */
int  bch_trans_commit(struct btree_trans *t, unsigned flags);
/* Debugging (bcachefs kv --unchecked): commit keys without validating them. */
extern bool bch_trans_unchecked;
void bch_trans_exit(struct btree_trans *t);

/*
 * Write a dirty node (moving it when its space is full).  Returns 1 when the
 * node had to be split instead: then b is gone (freed), 0 when written.
 */
int  bch_btree_node_write(struct bch_fs *c, struct btree *b);
/* Write every dirty node (used at clean close and by reclaim). */
int  bch_btree_flush_all(struct bch_fs *c);
/* Apply one key at level in btree id without journalling (journal replay). */
int  bch_btree_replay_key(struct bch_fs *c, unsigned id, unsigned level,
			  const struct bch_bkey *k, uint64_t seq);
/* Rewrite b whole at a new place (every replica) and relink it (fsck: bad replicas). */
int  bch_btree_node_rewrite(struct bch_fs *c, struct btree *b);

/*
 * Copygc: move the live nodes out of mostly-empty buckets, so the buckets
 * can be reused.  Runs from commits when free space runs low.
 */
int  bch_btree_copygc(struct bch_fs *c);

/* Split nodes left too full by replay. */
int  bch_btree_split_overfull(struct bch_fs *c);
/* Create an empty root leaf for every btree (format) / for one (fsck rebuild). */
int  bch_btree_create_roots(struct bch_fs *c);
int  bch_btree_create_root(struct bch_fs *c, unsigned id);
/*
 * A btree made on first use behind a feature bit (reflink, stripes): the bit
 * is written first, so a crash between leaves an empty btree, never keys
 * the superblock does not announce; then the root.  0 once both are there;
 * -BCH_ERR_fs_read_only when they are not and c is read-only.
 */
int  bch_btree_feature_init(struct bch_fs *c, uint64_t feature, unsigned id);

/* Roots in journal entries (registered with the journal by fs.c). */
unsigned bch_btree_roots_u64s(struct bch_fs *c);
void bch_btree_roots_to_jset(struct bch_fs *c, struct bch_jset_entry *dst);
int  bch_btree_roots_from_jset(struct bch_fs *c, const struct bch_jset_entry *e);

/* ------------------------------------------------------------ iterators */

/*
 * Lookup: a malloc'd copy of the key at pos, or -BCH_ERR_key_not_found.
 * Iteration: the first key >= pos (next) / <= pos (prev) before end,
 * malloc'd into *ret; -BCH_ERR_key_not_found when there is none.
 */
int bch_btree_lookup(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bkey **ret);
/*
 * Commits that changed an inode key, counted for the process (never reset):
 * an inode read while it was n is still what the btree holds while it is n.
 */
uint64_t bch_btree_inode_commits(void);
/* 1 when btree id holds a key in [pos, end] (whiteouts too), 0 when none, or the error. */
int bch_btree_any(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos end);
/* bch_btree_lookup() into the caller's buffer (*ret points into buf): no malloc and free. */
int bch_btree_lookup_buf(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bkey_buf *buf,
			 const struct bch_bkey **ret);
int bch_btree_peek(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos end,
		   struct bch_bkey **ret);
/*
 * The walks' form of bch_btree_peek(): 1 and the key in *ret, 0 when no
 * key is left before end (no error, and c->err_msg left empty), or the
 * error.
 */
int bch_btree_peek_next(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos end,
			struct bch_bkey **ret);
/*
 * The offset of btree id's last key at or before max (the highest inode
 * number, indirect extent or stripe index in use): *found false and 0 when
 * the btree holds none before max, which is no error.
 */
int bch_btree_last_offset(struct bch_fs *c, unsigned id, struct bch_bpos max, uint64_t *offset,
			  bool *found);
int bch_btree_peek_prev(struct bch_fs *c, unsigned id, struct bch_bpos pos,
			struct bch_bpos start, struct bch_bkey **ret);

/*
 * A forward iterator over [pos, end] that keeps its place in a leaf, for
 * scans: next() returns a pointer into the leaf or, for a key held packed,
 * into the iterator's buffer: valid until the next call.
 * The tree must not be changed while an iterator is open (re-seek after).
 */
struct btree_iter {
	struct bch_fs		*c;
	unsigned		id;
	struct bch_bpos		pos, end;
	struct btree		*leaf;
	unsigned		idx;
	bool			leaf_inside;	/* the whole leaf is <= end: no per-key check */
	struct bch_bkey_buf	buf;		/* the key next() returned, unpacked */
};
void bch_btree_iter_init(struct btree_iter *it, struct bch_fs *c, unsigned id,
			 struct bch_bpos start, struct bch_bpos end);
/*
 * bch_btree_iter_next()'s every case: the first key, a new leaf, the end's
 * check on a leaf that passes it.
 */
const struct bch_bkey *bch_btree_iter_next_slow(struct btree_iter *it, int *err);

/*
 * How far ahead of the key it returns a scan asks for memory, in keys.  8
 * was set for whole keys (80 bytes: 640 bytes ahead); packed ones are
 * shorter and take longer each to unpack.  btree-bench, 1M keys, a scan's
 * best of 20 passes (BENCH_CPU=1, alternated, 3 runs each): 8: 87-95M
 * keys/s, 16: 97-110M, 32: 118-161M, 64: 97-99M, 128: 100-154M.
 */
#define BCH_BTREE_ITER_PREFETCH	32

/*
 * Next key, or NULL at the end; *err is set (0 at a normal end).  Inline,
 * the step inside a leaf wholly before the end (most of a scan's keys),
 * and only that: a scan's key then costs its unpacking, not a call.
 */
static inline const struct bch_bkey *bch_btree_iter_next(struct btree_iter *it, int *err)
{
	const struct btree *b = it->leaf;

	if (b && it->leaf_inside && it->idx < b->nr) {
		unsigned i = it->idx++;

		*err = 0;
		/* keys lie apart from their prefixes: ask for the one
		 * BCH_BTREE_ITER_PREFETCH ahead now, so a scan does not wait
		 * on memory for each key it returns */
		if (i + BCH_BTREE_ITER_PREFETCH < b->nr)
			__builtin_prefetch((const uint64_t *)b->arena +
					   bch_btree_key_off(b, i + BCH_BTREE_ITER_PREFETCH));
		return bch_btree_key(b, i, &it->buf);
	}
	return bch_btree_iter_next_slow(it, err);
}
void bch_btree_iter_exit(struct btree_iter *it);

/* Visit every node of btree id, parents before children, left to right. */
int bch_btree_walk_nodes(struct bch_fs *c, unsigned id,
			 int (*fn)(struct bch_fs *c, struct btree *b, void *priv), void *priv);

/* The same over the nodes at min_level and above (1: interior nodes only). */
int bch_btree_walk_levels(struct bch_fs *c, unsigned id, unsigned min_level,
			  int (*fn)(struct bch_fs *c, struct btree *b, void *priv), void *priv);

/* The leaf covering pos (with a reference) and, if path, its ancestors. */
int bch_btree_find_node(struct bch_fs *c, unsigned id, unsigned level, struct bch_bpos pos,
			struct btree **ret);

#endif /* _BCACHEFS_BTREE_H */
