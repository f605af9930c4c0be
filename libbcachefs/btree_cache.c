// SPDX-License-Identifier: GPL-2.0
/*
 * btree_cache.c - btree nodes in memory.
 *
 * Nodes are found by the address of their first replica (a hash table) and
 * kept on an LRU list.  The cache's memory (keys included) is held near
 * btree_cache_size: when over it, clean unreferenced nodes are evicted from
 * the cold end; dirty ones are written first (which is why eviction can
 * fail: a write error).  A filesystem that cannot write (read-only, or
 * emergency read-only) keeps its dirty nodes whatever the limit: a read-only
 * journal replay dirties every node it puts keys in, and its later reads
 * must not fail for want of a write it may not do.  Keys in a node are a sorted array searched by
 * binary search over 32-bit prefixes of their positions (below); they lie in
 * the node's arena, inserts appended to its room; a leaf's keys as its last
 * pack laid them out are packed ("Packed leaves" below).  What changed since the
 * node was written: a bit per key changed (kdirty, moving with the index),
 * and `pending` for the positions deleted, appended as they come and sorted
 * (one a position, the newest) when written; past a share of the limit,
 * dirty nodes are written to keep those lists short.
 *
 * Opened for fsck, a node that failed to read is remembered by its address
 * and seq (with the error and its message, up to BAD_NODES_MAX of them), so
 * every later lookup through it fails at once instead of reading it again:
 * a damaged node costs one read per fsck.  A node hashed at that address, or
 * bch_btree_cache_drop() of it, forgets the failure.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"

struct bch_btree_cache {
	struct btree	**hash;
	unsigned	hash_size;
	struct btree	lru;		/* list head: next = hottest */
	size_t		bytes;
	size_t		limit;
	unsigned	nr;
	struct btree_hold *holds;	/* bch_btree_hold(): cleared when their node goes */
	size_t		held_bytes;	/* of the nodes held: not counted against limit */
	size_t		leaf_limit;	/* unreferenced leaves are kept up to this */
	size_t		pending_bytes;	/* of the nodes' pending lists (in bytes too) */
	struct bad_node	*bad;		/* fsck: reads that failed (a ring) */
	unsigned	nr_bad, next_bad;
};

#define BAD_NODES_MAX	256

struct bad_node {
	struct bch_extent_ptr	ptr;	/* first replica */
	uint64_t		seq;
	uint8_t			id, level;
	int			err;
	char			*msg;	/* c->err_msg the read left, malloc'd */
};

#define BC(c)	((c)->btree_cache)

size_t bch_btree_node_pending_bytes(const struct btree *b)
{
	/* (the rare whole copies are left out: a sort frees some, unaccounted) */
	return b->cap_pending * sizeof(struct btree_pending);
}

/*
 * The index's entries (offsets and prefixes): 16 bits while every offset
 * fits (arenas to 512 KiB, all of a 256k node's), else 32.  4 bytes a key
 * instead of 8: a leaf's index is a good part of its memory; 16 bits of
 * prefix still tell a node's keys apart but for a tie in a few percent of
 * searches (2000 keys spread over 65536 prefixes), which compares the key.
 */
#define INDEX_NARROW_MAX	UINT16_MAX

static size_t idx_size(const struct btree *b)
{
	return b->index_wide ? sizeof(uint32_t) : sizeof(uint16_t);
}

static void koff_set(struct btree *b, unsigned i, uint32_t off)
{
	if (b->index_wide)
		b->koff32[i] = off;
	else
		b->koff16[i] = off;
}

/* Key i's prefix, from the 32 bits kfmt_prefix() takes. */
static void kpos_set(struct btree *b, unsigned i, uint32_t prefix)
{
	if (b->index_wide)
		b->kpos32[i] = prefix;
	else
		b->kpos16[i] = prefix >> 16;
}

static uint32_t kfmt_prefix_of(const struct btree *b, unsigned i);

/*
 * The index is one block: koff's cap entries, then kpos's.  It lies in the
 * arena's allocation, after the keys' arena_bytes, once keys are appended to
 * the arena (index_in_arena): a leaf's index in a malloc'd block of its own
 * left holes in the heap as it grew (1M random keys: 2.1M of free chunks of
 * 1-4 KiB beside 4.1M of index), and in a mapping of its own it would take
 * a page partly used beside the arena's.  A read's raw bytes (no appends)
 * and a wide index keep it malloc'd.
 */
static size_t index_bytes(const struct btree *b)
{
	return (size_t)b->cap * 2 * idx_size(b);
}

/* What b's arena was allocated with: its keys' space, and the index when it lies there. */
static size_t arena_alloc_bytes(const struct btree *b)
{
	return b->arena_bytes + (b->index_in_arena ? index_bytes(b) : 0);
}

/* koff and kpos in the block at p (cap entries each). */
static void index_place(struct btree *b, void *p)
{
	b->koff = p;
	b->kpos = p ? (char *)p + (size_t)b->cap * idx_size(b) : NULL;
}

/* Out of the arena's allocation, which gives its bytes back (the keys stay). */
static void index_drop_from_arena(struct btree *b)
{
	if (!b->index_in_arena)
		return;
	size_t bytes = arena_alloc_bytes(b);

	b->index_in_arena = false;
	b->arena = bch_node_arena_resize(b->arena, bytes, b->arena_bytes);
	b->koff = b->kpos = NULL;
	b->cap = 0;
}

/* The index's entries [0, nr) kept in a block of cap entries each. */
static void index_set_cap(struct btree *b, unsigned cap)
{
	size_t es = idx_size(b), old = b->cap;
	char *p = b->koff;

	if (cap < b->nr)
		abort();
	if (cap == old)
		return;
	size_t take = ((cap - old) * 2 * es + 7) & ~(size_t)7;
	if (cap > old && b->index_in_arena && b->arena_bytes - b->arena_used >= take) {
		/*
		 * Grown down into the keys' room: the allocation keeps its
		 * size (grown at its end, a fitted mapping took a page more
		 * every few dozen inserts, to be fitted again by the next
		 * room the keys took).  Offsets first, then the prefixes,
		 * both down, neither over the other's entries still to move.
		 */
		size_t before = arena_alloc_bytes(b);
		char *to = p - take;
		memmove(to, p, b->nr * es);
		memmove(to + cap * es, p + old * es, b->nr * es);
		b->arena_bytes -= take;
		b->cap = cap;
		b->arena = bch_node_arena_resize(b->arena, before, arena_alloc_bytes(b));
		index_place(b, (char *)b->arena + b->arena_bytes);
		return;
	}
	if (cap < old && b->nr)		/* the prefixes down before the end goes */
		memmove(p + cap * es, p + old * es, b->nr * es);
	if (b->index_in_arena) {
		size_t before = arena_alloc_bytes(b);
		b->cap = cap;
		b->arena = bch_node_arena_resize(b->arena, before, arena_alloc_bytes(b));
		p = (char *)b->arena + b->arena_bytes;
	} else {
		p = realloc(p, cap ? cap * 2 * es : 1);
		if (!p)
			abort();
		b->cap = cap;
	}
	if (cap > old && b->nr)
		memmove(p + cap * es, p + old * es, b->nr * es);
	index_place(b, p);
}

/* Offsets past 16 bits to come: 32-bit entries (malloc'd), the prefixes taken again. */
static void index_widen(struct btree *b)
{
	if (b->index_wide)
		return;
	uint32_t *blk = malloc(b->cap ? b->cap * 2 * sizeof(uint32_t) : 1);
	if (!blk)
		abort();
	for (unsigned i = 0; i < b->nr; i++)
		blk[i] = b->koff16[i];
	unsigned cap = b->cap;
	if (b->index_in_arena)
		index_drop_from_arena(b);
	else
		free(b->koff);
	b->cap = cap;
	b->index_wide = true;
	index_place(b, blk);
	for (unsigned i = 0; i < b->nr; i++)
		b->kpos32[i] = kfmt_prefix_of(b, i);
}

static size_t node_overhead(const struct btree *b)
{
	return sizeof(*b) + b->cap * 2 * idx_size(b) + b->dirty_words * sizeof(uint64_t) +
	       bch_btree_node_pending_bytes(b);
}

/*
 * The changed keys' bits (kdirty): they move with the index's entries, so
 * bit i stays key i's.  Kept only while some are set (nr_dirty): a clean
 * node's inserts and deletes shift nothing.
 */
static bool dirty_test(const struct btree *b, unsigned i)
{
	return b->nr_dirty && b->kdirty[i / 64] >> (i % 64) & 1;
}

/* Room for a bit per entry of the index (cap), the new words zero. */
static void dirty_reserve(struct btree *b)
{
	unsigned words = (b->cap + 63) / 64;

	if (words <= b->dirty_words)
		return;
	b->kdirty = realloc(b->kdirty, words * sizeof(uint64_t));
	if (!b->kdirty)
		abort();
	memset(b->kdirty + b->dirty_words, 0, (words - b->dirty_words) * sizeof(uint64_t));
	b->dirty_words = words;
}

/* An entry comes in at i (before b->nr grows): bits [i, nr) up by one, bit i clear. */
static void dirty_insert(struct btree *b, unsigned i)
{
	if (!b->nr_dirty)
		return;
	dirty_reserve(b);
	uint64_t *m = b->kdirty, low = i % 64 ? ~0ULL >> (64 - i % 64) : 0;
	unsigned wi = i / 64, last = b->nr / 64;	/* bit nr is the highest one moved to */

	for (unsigned w = last; w > wi; w--)
		m[w] = m[w] << 1 | m[w - 1] >> 63;
	m[wi] = (m[wi] & low) | (m[wi] & ~low) << 1;
}

/* Entry i goes (before b->nr drops): its bit with it, bits (i, nr) down by one. */
static void dirty_remove(struct btree *b, unsigned i)
{
	if (!b->nr_dirty)
		return;
	uint64_t *m = b->kdirty, low = i % 64 ? ~0ULL >> (64 - i % 64) : 0;
	unsigned wi = i / 64, last = (b->nr - 1) / 64;

	if (m[wi] >> (i % 64) & 1)
		b->nr_dirty--;
	m[wi] = (m[wi] & low) | (m[wi] >> 1 & ~low);
	for (unsigned w = wi; w < last; w++) {
		m[w] |= m[w + 1] << 63;
		m[w + 1] >>= 1;
	}
}

static void dirty_clear(struct btree *b)
{
	if (b->nr_dirty)
		memset(b->kdirty, 0, b->dirty_words * sizeof(uint64_t));
	b->nr_dirty = 0;
}

size_t bch_btree_node_bytes(const struct btree *b)
{
	return node_overhead(b) + b->u64s * 8;
}

int bch_btree_cache_init(struct bch_fs *c)
{
	struct bch_btree_cache *bc = calloc(1, sizeof(*bc));

	if (!bc)
		return -ENOMEM;
	/*
	 * A chain per 4 KiB of the limit (the smallest node), 64 to 4096: a
	 * small cache (fsck -n: 512 KiB) has no 32 KB table to clear.
	 */
	bc->hash_size = 64;
	while (bc->hash_size < 4096 && (size_t)bc->hash_size << 12 < c->opts.v[Opt_btree_cache_size])
		bc->hash_size <<= 1;
	bc->hash = calloc(bc->hash_size, sizeof(*bc->hash));
	if (!bc->hash) {
		free(bc);
		return -ENOMEM;
	}
	bc->lru.lru_next = bc->lru.lru_prev = &bc->lru;
	bc->limit = c->opts.v[Opt_btree_cache_size];
	bc->leaf_limit = bc->limit;
	c->btree_cache = bc;
	return 0;
}

/*
 * Node arenas.  Those from ARENA_MAP_MIN on are pages mapped for them alone:
 * in the heap, arenas of every size coming and going as a scan reads and
 * evicts leaves left holes that kept the process's memory high.  A mapping
 * grows and shrinks in place or moves without a copy (mremap()).  One freed
 * mapping is kept for the next arena (a scan frees a leaf, then reads the
 * next), so a scan costs no mmap/munmap pair and no new faults per leaf.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_UNDER_ASAN	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_UNDER_ASAN	1
#endif
#endif
#define ARENA_MAP_BYTES	(32U << 10)
#ifdef ARENA_UNDER_ASAN
/*
 * All from malloc, so the sanitizer checks their bounds; a unit test of the
 * mappings themselves turns them on before its first arena
 * (bch_node_arenas_mapped()): each test runs in a process of its own.
 */
static size_t arena_map_min = SIZE_MAX;
#define ARENA_MAP_MIN	arena_map_min
void bch_node_arenas_mapped(void)
{
	arena_map_min = ARENA_MAP_BYTES;
}
#else
#define ARENA_MAP_MIN	ARENA_MAP_BYTES
void bch_node_arenas_mapped(void)
{
}
#endif
/* from here an arena's room is fitted to its pages (keys_space()); under ASan too, malloc'd */
#define ARENA_FIT_MIN	(32U << 10)

static pthread_mutex_t arena_spare_lock = PTHREAD_MUTEX_INITIALIZER;
static void *arena_spare;		/* under arena_spare_lock */
static size_t arena_spare_bytes;

static size_t page_round(size_t bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (bytes + page - 1) & ~(page - 1);
}

void *bch_node_arena_alloc(size_t bytes)
{
	void *p = NULL;
	size_t have = 0;

	if (bytes < ARENA_MAP_MIN) {
		p = malloc(bytes ? bytes : 8);
		if (!p)
			abort();
		return p;
	}
	pthread_mutex_lock(&arena_spare_lock);
	p = arena_spare;
	have = arena_spare_bytes;
	arena_spare = NULL;
	pthread_mutex_unlock(&arena_spare_lock);
	if (p && have != page_round(bytes))
		p = mremap(p, have, page_round(bytes), MREMAP_MAYMOVE);
	else if (!p)
		p = mmap(NULL, page_round(bytes), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		abort();	/* as malloc failing: out of memory */
	return p;
}

void *bch_node_arena_resize(void *p, size_t old_bytes, size_t new_bytes)
{
	void *n;

	if (!p)
		return bch_node_arena_alloc(new_bytes);
	if (old_bytes >= ARENA_MAP_MIN && new_bytes >= ARENA_MAP_MIN) {
		if (page_round(old_bytes) == page_round(new_bytes))
			return p;	/* the same pages (an index grown by a few entries) */
		n = mremap(p, page_round(old_bytes), page_round(new_bytes), MREMAP_MAYMOVE);
		if (n == MAP_FAILED)
			abort();
		return n;
	}
	if (old_bytes < ARENA_MAP_MIN && new_bytes < ARENA_MAP_MIN) {
		n = realloc(p, new_bytes ? new_bytes : 8);
		if (!n)
			abort();
		return n;
	}
	n = bch_node_arena_alloc(new_bytes);
	memcpy(n, p, old_bytes < new_bytes ? old_bytes : new_bytes);
	bch_node_arena_free(p, old_bytes);
	return n;
}

void bch_btree_node_arena_resize(struct btree *b, size_t bytes)
{
	/* the keys are offsets into it: nothing to move with them; the index follows the end */
	size_t ib = b->index_in_arena ? index_bytes(b) : 0, old = b->arena_bytes;

	if (bytes < old && ib)
		memmove((char *)b->arena + bytes, (char *)b->arena + old, ib);
	b->arena = bch_node_arena_resize(b->arena, old + ib, bytes + ib);
	if (bytes > old && ib)
		memmove((char *)b->arena + bytes, (char *)b->arena + old, ib);
	b->arena_bytes = bytes;
	if (b->index_in_arena)
		index_place(b, (char *)b->arena + bytes);
}

void bch_node_arena_free(void *p, size_t bytes)
{
	if (!p)
		return;
	if (bytes < ARENA_MAP_MIN) {
		free(p);
		return;
	}
	pthread_mutex_lock(&arena_spare_lock);
	if (!arena_spare) {
		arena_spare = p;
		arena_spare_bytes = page_round(bytes);
		p = NULL;
	}
	pthread_mutex_unlock(&arena_spare_lock);
	if (p)
		munmap(p, page_round(bytes));
}

/*
 * The room past used bytes of an arena just filled, up to its keys' end at
 * bytes (alloc: what was allocated; an index after bytes is kept): a mapping
 * taken from the spare keeps the pages the node before touched, resident
 * though nothing lies there yet.  Given back, they come again as inserts
 * reach them.
 */
static void arena_release_room(void *p, size_t used, size_t bytes, size_t alloc)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t from = page_round(used), to = bytes < alloc ? bytes & ~(page - 1) : page_round(bytes);

	if (alloc >= ARENA_MAP_MIN && to > from)
		madvise((char *)p + from, to - from, MADV_DONTNEED);
}

static void kfmt_choose(struct btree *b);
static void kfmt_choose_fmt(struct btree *b);
static void packed_forget(struct btree *b);

static bool in_arena(const struct btree *b, const void *k)
{
	return b && b->arena && (const char *)k >= (const char *)b->arena &&
	       (const char *)k < (const char *)b->arena + b->arena_bytes;
}

void bch_btree_node_free_keys(struct btree *b)
{
	size_t alloc = arena_alloc_bytes(b);

	b->mod++;
	dirty_clear(b);		/* no keys: no bits */
	if (b->index_in_arena) {	/* goes with it */
		b->index_in_arena = false;
		b->koff = b->kpos = NULL;
		b->cap = 0;
	}
	bch_node_arena_free(b->arena, alloc);
	b->arena = NULL;
	b->arena_bytes = 0;
	b->arena_used = 0;
	b->nr = 0;
	b->u64s = 0;
	packed_forget(b);
}

void bch_btree_node_free_index(struct btree *b)
{
	if (b->index_in_arena)
		index_drop_from_arena(b);
	else
		free(b->koff);
	free(b->kdirty);
	b->koff = NULL;
	b->kpos = NULL;
	b->kdirty = NULL;
	b->dirty_words = b->nr_dirty = 0;
	b->index_wide = false;
	b->cap = 0;
}

/* Key k, which lies in b's arena, as an offset (an always-on check: a wrong one reads garbage). */
static uint32_t arena_off(const struct btree *b, const struct bch_bkey *k)
{
	size_t off = (const char *)k - (const char *)b->arena;

	if (!in_arena(b, k) || off % 8 || off / 8 > UINT32_MAX)
		abort();
	return off / 8;
}

/*
 * The keys' space (arena_bytes) for used bytes of keys and a key of kb to
 * come, with an index of ib bytes after it (0: not in the arena).  With
 * room, an eighth of the live keys more (a few keys at least).  A mapped
 * arena with its index ends the keys' space where the index then ends a
 * page: the room is what is left of the page (its pages are all used but
 * for the last's tail, and a page partly used for the keys and another for
 * the index would be ~a page a leaf more: 1M random keys, 512 leaves), and
 * the arena grows by a page at a time as keys come.
 */
static size_t keys_space(const struct btree *b, size_t used, size_t kb, size_t ib, bool room)
{
	/* (a multiple of 8: the index after it is aligned, used + kb is) */
	if (ib && used + kb + ib >= ARENA_FIT_MIN)
		return (page_round(used + kb + ib) - ib) & ~(size_t)7;
	size_t live = used < b->u64s * 8 ? used : b->u64s * 8;	/* (packed: less) */

	return used + kb + (room ? (live / 8 + 512) & ~(size_t)7 : 0);
}

/*
 * Entries for nr keys and a few to come, in an index that lies in the
 * arena: it grows a few at a time, down into the keys' room (index_set_cap())
 * without a new allocation, so its spare entries are few bytes of the
 * arena's pages (by a 32nd, 1M random keys left ~160 bytes a leaf unused).
 */
#define INDEX_ARENA_STEP	16

static unsigned index_cap_for(unsigned nr)
{
	return nr + INDEX_ARENA_STEP;
}

/*
 * Packed leaves.  A leaf's keys laid out anew (a pack, set_keys) go into the
 * arena packed against a format fitted to them (bkey.h), when that is
 * shorter than the 40-byte header: random keys of one type and length take
 * 16 bytes (2 words of header).  A key appended after them is packed in
 * its place while every key before it is packed and it fits the format
 * (append_packed()); from the first that does not, keys lie after them
 * whole until a pack takes them in: when they pass the packed bytes
 * divided by LOOSE_SHARE, or as before when a quarter of the arena is
 * dead.  Only
 * leaves: an interior node's keys are few, and read on every lookup.
 * LOOSE_SHARE 1 (as many bytes whole as packed): 4 made every commit of
 * the mount repack (callgrind, 4096 random 4 KiB writes into one file:
 * pack_keys_room 2.1M instructions before packing, 16.6M with 4, 8.2M
 * with 1, the whole writes 31.3k, 32.8k, 30.9k a write); btree-bench's 1M
 * keys peak at 71M with 1 against 65M with 4 (LMDB 85.6M).
 */
#define LOOSE_SHARE	1

static size_t packed_saving(const struct bch_bkey_format *f)
{
	return (BCH_BKEY_U64s - f->key_u64s) * 8;
}

static void packed_forget(struct btree *b)
{
	free(b->pack_fmt);
	b->pack_fmt = NULL;
	b->packed_u64s = 0;
	b->packed_saved = 0;
}

/*
 * The format for keys[0..nr), or b's own keys when keys is NULL; NULL when
 * packing would not pay (or b is not a leaf).
 */
static struct bch_bkey_format *format_for(const struct btree *b, const struct bch_bkey * const *keys,
					  unsigned nr)
{
	struct bch_bkey_format_state st;
	struct bch_bkey_format f, *ret;

	if (b->level || !nr)
		return NULL;
	bch_bkey_format_state_init(&st);
	for (unsigned i = 0; i < nr; i++) {
		if (keys) {
			bch_bkey_format_add(&st, keys[i]);
		} else {
			struct bch_bkey h = bch_btree_key_header(b, i);
			bch_bkey_format_add(&st, &h);
		}
	}
	bch_bkey_format_done(&st, &f);
	if (f.key_u64s >= BCH_BKEY_U64s)
		return NULL;
	if (!(ret = malloc(sizeof(*ret))))
		abort();
	*ret = f;
	return ret;
}

/* k at p, packed in fmt if any: the bytes it takes. */
static size_t put_key(const struct bch_bkey_format *fmt, const struct bch_bkey *k, char *p)
{
	if (!fmt) {
		memcpy(p, k, bkey_bytes(k));
		return bkey_bytes(k);
	}
	size_t n = bch_bkey_pack(fmt, k, (uint64_t *)p);

	if (!n)
		abort();	/* the format was fitted to these keys */
	return n * 8;
}

/* The keys just laid out (nr of them, up to p) are packed in fmt, which b takes (or keeps). */
static void packed_take(struct btree *b, struct bch_bkey_format *fmt, unsigned nr, const char *p)
{
	if (fmt && fmt == b->pack_fmt)
		b->pack_fmt = NULL;	/* kept */
	packed_forget(b);
	if (!fmt)
		return;
	b->pack_fmt = fmt;
	b->packed_u64s = (p - (const char *)b->arena) / 8;
	b->packed_saved = nr * packed_saving(fmt);
}

/*
 * Do the keys b holds whole (put since its keys were packed) fit its
 * format?  Then a pack keeps it, and copies the packed keys as they are.
 */
static bool loose_keys_fit(const struct btree *b)
{
	if (!b->pack_fmt)
		return false;
	for (unsigned i = 0; i < b->nr; i++) {
		if (bch_btree_key_packed(b, i))
			continue;
		struct bch_bkey h = bch_btree_key_header(b, i);
		if (!bch_bkey_format_fits(b->pack_fmt, &h))
			return false;
	}
	return true;
}

/*
 * Keys one after another in one allocation: a scan or a search then walks
 * memory in order instead of chasing scattered allocations.  The index
 * comes along into it (narrow) or into a block of its own (wide).  With
 * room: for a key of kb bytes and those to come.
 */
static void pack_keys_room(struct btree *b, size_t kb, bool room)
{
	bool keep = loose_keys_fit(b);
	struct bch_bkey_format *fmt = keep ? b->pack_fmt : format_for(b, NULL, b->nr);
	size_t used = b->u64s * 8 - (fmt ? b->nr * packed_saving(fmt) : 0);
	unsigned cap = b->cap;

	if (cap < b->nr || cap > index_cap_for(b->nr) + INDEX_ARENA_STEP)
		cap = index_cap_for(b->nr);	/* (a read's arrays, sized by its bsets) */
	size_t ib = cap * 2 * sizeof(uint16_t);
	size_t bytes = keys_space(b, used, kb, ib, room);
	bool wide = bytes / 8 > INDEX_NARROW_MAX;
	if (wide) {
		ib = 0;
		bytes = keys_space(b, used, kb, 0, room);
	}
	char *arena = bch_node_arena_alloc(bytes + ib), *p = arena;
	void *index = wide ? malloc(cap ? cap * 2 * sizeof(uint32_t) : 1) : arena + bytes;
	uint16_t *off16 = index;
	uint32_t *off32 = index;

	if (!index)
		abort();
	b->mod++;		/* the keys move */
	for (unsigned i = 0; i < b->nr; i++) {
		const uint64_t *src = (const uint64_t *)b->arena + bch_btree_key_off(b, i);
		struct bch_bkey_buf buf;
		size_t n;

		if (keep && bch_btree_key_packed(b, i)) {
			n = bch_bkey_packed_u64s(fmt, src) * 8;
			memcpy(p, src, n);
		} else {
			n = put_key(fmt, bch_btree_key(b, i, &buf), p);
		}

		if (wide)
			off32[i] = (p - arena) / 8;
		else
			off16[i] = (p - arena) / 8;
		p += n;
	}
	/*
	 * The keys keep their order and positions: their prefixes are what
	 * they were while the format chosen for them is (most repacks: a
	 * quarter of the leaf dead after overwrites), copied now before the
	 * old index goes (callgrind, untar: a repack ~107k instructions, 45k of
	 * them taking every prefix again).
	 */
	struct bch_bpos old_lo = b->kfmt_lo;
	uint8_t old_mode = b->kfmt_mode, old_bits = b->kfmt_bits;
	bool kpos_kept = wide == b->index_wide && b->kpos;
	if (kpos_kept)
		memcpy((char *)index + (size_t)cap * (wide ? 4 : 2), b->kpos, (size_t)b->nr * (wide ? 4 : 2));
	size_t old_alloc = arena_alloc_bytes(b);
	if (!b->index_in_arena)
		free(b->koff);
	/*
	 * An interior node packed whole (after a read, or a write): its old
	 * arena goes back to the system, not to the spare.  Interior nodes
	 * are few and large, and nothing of their size comes soon: kept as
	 * the spare, a root read beside the packed copy stayed resident until
	 * the next arena took it (fsck -n of 1M files: the inodes root's 184
	 * KiB through most of pass 5, the run's peak).
	 */
	if (!room && b->level && old_alloc >= ARENA_MAP_MIN)
		munmap(b->arena, page_round(old_alloc));
	else
		bch_node_arena_free(b->arena, old_alloc);
	b->arena = arena;
	b->arena_bytes = bytes;
	b->arena_used = p - arena;
	b->index_wide = wide;
	b->index_in_arena = !wide;
	b->cap = cap;
	index_place(b, index);
	packed_take(b, fmt, b->nr, p);
	arena_release_room(arena, b->arena_used, bytes, arena_alloc_bytes(b));
	kfmt_choose_fmt(b);	/* laid out anew: the format chosen again */
	if (!kpos_kept || !bpos_eq(old_lo, b->kfmt_lo) || old_mode != b->kfmt_mode ||
	    old_bits != b->kfmt_bits)
		for (unsigned i = 0; i < b->nr; i++)
			kpos_set(b, i, kfmt_prefix_of(b, i));
}

void bch_btree_node_pack_keys(struct btree *b)
{
	pack_keys_room(b, 0, false);
}

/*
 * Make room for a key of kb bytes at the arena's end: pack the keys into a
 * new arena when a quarter of it is dead (overwritten, deleted), the keys
 * appended whole since a leaf's keys were packed reach LOOSE_SHARE of them,
 * or it takes no appends; else grow it in place (its keys follow if it
 * moves).
 */
static void arena_make_room(struct btree *b, size_t kb)
{
	size_t live = bch_btree_node_live_bytes(b);
	size_t packed = (size_t)b->packed_u64s * 8;

	if (!b->arena_used || b->arena_used - live > b->arena_used / 4 ||
	    (b->pack_fmt && b->arena_used - packed > packed / LOOSE_SHARE)) {
		pack_keys_room(b, kb, true);
		return;
	}
	bch_btree_node_arena_resize(b, keys_space(b, b->arena_used, kb,
						  b->index_in_arena ? index_bytes(b) : 0, true));
}

/*
 * b (empty) takes copies of keys[0..nr) (sorted, no whiteouts) in one arena,
 * its index in it, sized to them: how splits and merges fill their new
 * nodes, without a malloc a key and a pack after.
 */
void bch_btree_node_set_keys(struct btree *b, const struct bch_bkey * const *keys, unsigned nr)
{
	size_t u64s = 0;

	for (unsigned i = 0; i < nr; i++)
		u64s += keys[i]->u64s;
	bch_btree_node_free_keys(b);	/* an index in the arena goes with it */
	if (!b->index_in_arena)
		free(b->koff);
	b->koff = b->kpos = NULL;
	b->u64s = u64s;		/* keys_space() sizes the room by it */
	struct bch_bkey_format *fmt = format_for(b, keys, nr);
	size_t used = u64s * 8 - (fmt ? nr * packed_saving(fmt) : 0);
	b->cap = index_cap_for(nr);
	size_t ib = b->cap * 2 * sizeof(uint16_t);
	b->arena_bytes = keys_space(b, used, 0, ib, true);
	b->index_wide = b->arena_bytes / 8 > INDEX_NARROW_MAX;
	if (b->index_wide) {
		ib = 0;
		b->arena_bytes = keys_space(b, used, 0, 0, true);
	}
	b->index_in_arena = !b->index_wide;
	char *p = b->arena = bch_node_arena_alloc(b->arena_bytes + ib);
	void *index = b->index_wide ? malloc(index_bytes(b)) : p + b->arena_bytes;
	if (!index)
		abort();
	index_place(b, index);
	for (unsigned i = 0; i < nr; i++) {
		koff_set(b, i, (p - (char *)b->arena) / 8);
		p += put_key(fmt, keys[i], p);
	}
	b->arena_used = p - (char *)b->arena;
	b->nr = nr;
	b->u64s = u64s;
	packed_take(b, fmt, nr, p);
	arena_release_room(b->arena, b->arena_used, b->arena_bytes, arena_alloc_bytes(b));
	kfmt_choose(b);
}

struct bch_bkey *bch_btree_key_dup(const struct btree *b, unsigned i)
{
	struct bch_bkey_buf buf;

	return bch_bkey_dup(bch_btree_key(b, i, &buf));
}

uint64_t *bch_btree_keys_unpacked(const struct btree *b, unsigned from, unsigned to,
				  const struct bch_bkey **ptrs)
{
	size_t words = 0;

	for (unsigned i = from; i < to; i++)
		if (bch_btree_key_packed(b, i))
			words += bch_btree_key_u64s(b, i);
	uint64_t *blk = malloc(words ? words * 8 : 1), *p = blk;

	if (!blk)
		abort();
	for (unsigned i = from; i < to; i++) {
		if (!bch_btree_key_packed(b, i)) {
			ptrs[i - from] = bch_btree_key(b, i, NULL);
			continue;
		}
		bch_bkey_unpack(b->pack_fmt, (const uint64_t *)b->arena + bch_btree_key_off(b, i),
				(struct bch_bkey *)p);
		ptrs[i - from] = (const struct bch_bkey *)p;
		p += ((const struct bch_bkey *)p)->u64s;
	}
	return blk;
}

static void free_node(struct btree *b)
{
	bch_btree_node_free_keys(b);
	bch_btree_node_pending_clear(b);
	for (unsigned i = 0; i < b->nr_dropped; i++)
		free(b->dropped[i]);
	free(b->dropped);
	bch_btree_node_free_index(b);
	free(b->pending);
	free(b);
}

void bch_btree_cache_exit(struct bch_fs *c)
{
	struct bch_btree_cache *bc = BC(c);

	if (!bc)
		return;
	while (bc->lru.lru_next != &bc->lru) {
		struct btree *b = bc->lru.lru_next;
		b->lru_next->lru_prev = b->lru_prev;
		b->lru_prev->lru_next = b->lru_next;
		if (b->pin.seq && c->journal)
			bch_journal_pin_drop(c, &b->pin);
		free_node(b);
	}
	for (unsigned i = 0; i < bc->nr_bad; i++)
		free(bc->bad[i].msg);
	free(bc->bad);
	free(bc->hash);
	free(bc);
	c->btree_cache = NULL;
}

size_t bch_btree_cache_bytes(struct bch_fs *c)
{
	return BC(c)->bytes;
}

static unsigned hash_of(struct bch_btree_cache *bc, const struct bch_extent_ptr *p)
{
	uint64_t h = p->offset * 0x9e3779b97f4a7c15ULL ^ p->dev;

	return (h >> 20) % bc->hash_size;
}

static void hash_remove(struct bch_btree_cache *bc, struct btree *b)
{
	if (!b->nr_ptrs)
		return;
	for (struct btree **p = &bc->hash[hash_of(bc, &b->ptrs[0])]; *p; p = &(*p)->hnext)
		if (*p == b) {
			*p = b->hnext;
			b->hnext = NULL;
			return;
		}
}

void bch_btree_node_unhash(struct bch_fs *c, struct btree *b)
{
	hash_remove(BC(c), b);
}

struct btree *bch_btree_cache_first_dirty(struct bch_fs *c)
{
	struct bch_btree_cache *bc = BC(c);

	/* leaves first: writing them dirties parents, not the other way round */
	struct btree *best = NULL;
	for (struct btree *b = bc->lru.lru_next; b != &bc->lru; b = b->lru_next)
		if (b->dirty && (!best || b->level < best->level))
			best = b;
	return best;
}

struct btree *bch_btree_cache_first_overfull(struct bch_fs *c, size_t u64s)
{
	struct bch_btree_cache *bc = BC(c);

	for (struct btree *b = bc->lru.lru_next; b != &bc->lru; b = b->lru_next)
		if (b->u64s > u64s && b->nr >= 2)
			return b;
	return NULL;
}

static struct bad_node *bad_find(struct bch_btree_cache *bc, const struct bch_extent_ptr *p)
{
	for (unsigned i = 0; i < bc->nr_bad; i++)
		if (bc->bad[i].ptr.dev == p->dev && bc->bad[i].ptr.offset == p->offset)
			return &bc->bad[i];
	return NULL;
}

static void bad_forget(struct bch_btree_cache *bc, const struct bch_extent_ptr *p)
{
	struct bad_node *n = bc->nr_bad ? bad_find(bc, p) : NULL;

	if (n) {
		free(n->msg);
		n->msg = NULL;
		n->ptr.offset = UINT64_MAX;	/* a free slot: matches no node */
	}
}

static void bad_remember(struct bch_fs *c, unsigned id, unsigned level,
			 const struct bch_btree_ptr *bp, int err)
{
	struct bch_btree_cache *bc = BC(c);
	struct bad_node *n;

	if (!bc->bad && !(bc->bad = calloc(BAD_NODES_MAX, sizeof(*bc->bad))))
		return;	/* only costs reads */
	if (bc->nr_bad < BAD_NODES_MAX) {
		n = &bc->bad[bc->nr_bad++];
	} else {
		n = &bc->bad[bc->next_bad];
		bc->next_bad = (bc->next_bad + 1) % BAD_NODES_MAX;
		free(n->msg);
	}
	*n = (struct bad_node) { .ptr = bp->ptrs[0], .seq = bp->seq, .id = id, .level = level,
				 .err = err, .msg = strdup(c->err_msg) };
}

void bch_btree_node_hash(struct bch_fs *c, struct btree *b)
{
	struct bch_btree_cache *bc = BC(c);
	unsigned h = hash_of(bc, &b->ptrs[0]);

	if (bc->nr_bad)
		bad_forget(bc, &b->ptrs[0]);

	b->hnext = bc->hash[h];
	bc->hash[h] = b;
	if (c->roots)
		c->roots->node_gen++;	/* (a new node may take a hinted leaf's range) */
}

static void lru_touch(struct bch_btree_cache *bc, struct btree *b)
{
	b->lru_next->lru_prev = b->lru_prev;
	b->lru_prev->lru_next = b->lru_next;
	b->lru_next = bc->lru.lru_next;
	b->lru_prev = &bc->lru;
	bc->lru.lru_next->lru_prev = b;
	bc->lru.lru_next = b;
}

struct btree *bch_btree_node_new(struct bch_fs *c, unsigned id, unsigned level)
{
	struct bch_btree_cache *bc = BC(c);
	struct btree *b = calloc(1, sizeof(*b));

	if (!b)
		abort();
	b->id = id;
	b->level = level;
	b->lru_next = b->lru_prev = b;
	lru_touch(bc, b);
	bc->nr++;
	bc->bytes += bch_btree_node_bytes(b);
	b->refs = 1;
	return b;
}

void bch_btree_node_forget(struct bch_fs *c, struct btree *b)
{
	struct bch_btree_cache *bc = BC(c);

	hash_remove(bc, b);
	if (c->roots)
		c->roots->node_gen++;	/* no leaf hint keeps it */
	for (struct btree_hold *h = bc->holds; h; h = h->next)
		if (h->b == b) {
			h->b = NULL;	/* its reference goes with the node */
			bc->held_bytes -= h->bytes;
			h->bytes = 0;
		}
	b->lru_next->lru_prev = b->lru_prev;
	b->lru_prev->lru_next = b->lru_next;
	bc->nr--;
	bc->bytes -= bch_btree_node_bytes(b);
	bc->pending_bytes -= bch_btree_node_pending_bytes(b);
	if (b->pin.seq)
		bch_journal_pin_drop(c, &b->pin);
	free_node(b);
}

/* Bytes of the leaves in the cache that nobody holds or references. */
static size_t free_leaf_bytes(struct bch_btree_cache *bc)
{
	size_t n = 0;

	for (struct btree *b = bc->lru.lru_next; b != &bc->lru; b = b->lru_next)
		if (!b->level && !b->refs)
			n += bch_btree_node_bytes(b);
	return n;
}

/*
 * Leaves go first: every lookup passes through the interior nodes above
 * them, which are few, while a scan moves through many leaves.  Leaves are
 * also evicted past leaf_limit (bch_btree_cache_set_leaf_limit()).
 */
void bch_btree_cache_evict_clean(struct bch_fs *c)
{
	struct bch_btree_cache *bc = BC(c);
	size_t leaves = bc->leaf_limit < bc->limit ? free_leaf_bytes(bc) : 0;
	struct btree *b = bc->lru.lru_prev;

	while ((bc->bytes > bc->limit + bc->held_bytes || leaves > bc->leaf_limit) &&
	       b != &bc->lru) {
		struct btree *prev = b->lru_prev;
		if (!b->refs && !b->dirty && !b->level) {
			size_t bytes = bch_btree_node_bytes(b);
			leaves = leaves > bytes ? leaves - bytes : 0;
			bch_btree_node_forget(c, b);
		}
		b = prev;
	}
	b = bc->lru.lru_prev;
	while (bc->bytes > bc->limit + bc->held_bytes && b != &bc->lru) {
		struct btree *prev = b->lru_prev;
		if (!b->refs && !b->dirty)
			bch_btree_node_forget(c, b);
		b = prev;
	}
}

void bch_btree_cache_evict_unused(struct bch_fs *c)
{
	struct bch_btree_cache *bc = BC(c);

	for (struct btree *b = bc->lru.lru_prev, *prev; b != &bc->lru; b = prev) {
		prev = b->lru_prev;
		if (!b->refs && !b->dirty)
			bch_btree_node_forget(c, b);
	}
}

void bch_btree_cache_set_leaf_limit(struct bch_fs *c, size_t bytes)
{
	BC(c)->leaf_limit = bytes;
}

/*
 * Write dirty b found on the LRU, held while it is written: < 0 an error,
 * 1 when the write split it (b is gone), else 0.
 */
static int write_cold(struct bch_fs *c, struct btree *b)
{
	b->refs++;
	int r = bch_btree_node_write(c, b);
	if (r == 0)
		b->refs--;
	return r;
}

/*
 * The pending lists hold a position for every delete the journal has that
 * the nodes on disk lack (a changed key is a bit beside it: kdirty): as
 * many as the journal's dirty part, which can be far more than the nodes'
 * own size (a large journal, no reclaim needed yet).  Past 1/PENDING_SHARE
 * of the cache's limit (PENDING_MIN at least), the dirty nodes from the
 * cold end are written (appends) until half of it is left.  (btree-bench,
 * 1M random keys, 256 MiB cache, when the lists held every change: a share
 * of 1/16 peaked at 120M, 1/64 at 106M, 1/128 at 104M with more writes;
 * with 4-byte indexes and lists grown by a quarter, 1/128 peaked at 89.5M
 * with a 83.3M image, 1/192 at 88.2M with 89.4M, 1/256 at 87.8M with
 * 97.0M.  With the changed keys as bits, the inserts write nothing for the
 * budget: 87.2M at their end, image 81.1M; the deletes' whiteouts are the
 * lists, which at 1/192 (1 MiB, 40-byte entries) peaked at 88.1M, 1/1024
 * (256 KiB) at 87.8M but with 350k appends (a leaf's append updates its
 * parent's hint), deletes 4x slower.  With 24-byte entries, 1/320 (800
 * KiB: as many whiteouts as 1/192 held) keeps the deletes' memory within
 * 0.1M of the inserts' end and their speed.  That was the heap's holes
 * left by the indexes, which the lists filled: with the indexes in the
 * arenas, the lists' memory is new, +0.9M over the inserts' end at 800 KiB,
 * +0.5M at 512 KiB, +0.3M at 256 KiB, while written nodes kept 16 entries
 * each (freed now).  256 KiB made 1.3M keys' deletes (1024 leaves, ~10
 * whiteouts a leaf a write) 3x slower in CPU time; 512 KiB: 1M keys peak
 * 85.9M (deletes within 0.2M of the inserts' end), 1.3M keys' deletes 11%
 * slower than at 800 KiB.)
 */
#define PENDING_SHARE	512
#define PENDING_MIN	(512U << 10)

/*
 * A relinking write (a move or a split: bch_btree_node_write_relinks())
 * updates the parent through the journal's reserve and may split the
 * parent.  With nodes held (held: the shrink of a read, whose caller holds
 * the node just read and its parent) neither is safe: a split would free a
 * node the caller holds, and a run of moves would use up the reserve with
 * nothing giving it back (reclaim would write, and split, held nodes too).
 * Such nodes stay dirty, over the limit as a filesystem that cannot write
 * keeps them, until the next shrink from the top (the end of a commit), a
 * reclaim or the close.  From the top, the reserve is given back before
 * each relinking write (restore, once between writes: it may write and
 * free nodes, so the walk starts again from the cold end).
 *   < 0 an error; 1 b is skipped; 2 the reserve was restored (rescan);
 *   0 write it.
 */
static int relink_check(struct bch_fs *c, struct btree *b, bool held, bool *restored)
{
	if (!bch_btree_node_write_relinks(c, b))
		return 0;
	if (held)
		return 1;
	if (*restored)
		return 0;
	*restored = true;
	int ret = bch_journal_restore_reserve(c);
	return ret < 0 ? ret : 2;
}

/*
 * A read's shrink looks at this many dirty nodes it may not write, then
 * stops: with more dirty nodes than the limit (after a replay), every read
 * would otherwise go through all of them.
 */
#define HELD_SKIPS_MAX	16

static int write_pending(struct bch_fs *c, bool held)
{
	struct bch_btree_cache *bc = BC(c);
	size_t budget = bc->limit / PENDING_SHARE > PENDING_MIN ? bc->limit / PENDING_SHARE : PENDING_MIN;
	unsigned writes = 0, skips = 0;
	bool restored = false;

	if (bc->pending_bytes <= budget || c->read_only || c->emergency_ro)
		return 0;
	for (struct btree *b = bc->lru.lru_prev;
	     b != &bc->lru && bc->pending_bytes > budget / 2 && writes < 100000;) {
		/*
		 * Only nodes whose write needs no flush first: a budget is not
		 * worth an fdatasync (a parent holding children's hints waits
		 * for a device flush, a key not yet durable for the journal's).
		 */
		if (b->refs || !b->dirty || !b->nr_pending ||
		    b->journal_seq > bch_journal_seq_durable(c) ||
		    b->hint_flush > bch_journal_flush_gen(c)) {
			b = b->lru_prev;
			continue;
		}
		int ret = relink_check(c, b, held, &restored);
		if (ret < 0)
			return ret;
		if (ret == 1 && ++skips >= HELD_SKIPS_MAX)
			break;
		if (ret) {
			b = ret == 1 ? b->lru_prev : bc->lru.lru_prev;
			continue;
		}
		if ((ret = write_cold(c, b)) < 0)
			return ret;
		writes++;
		restored = false;
		/* writes can split and free other nodes: rescan from the cold end */
		b = bc->lru.lru_prev;
	}
	return 0;
}

/* Evict to the limit; held: see relink_check(). */
static int shrink(struct bch_fs *c, bool held)
{
	struct bch_btree_cache *bc = BC(c);

	if (c->roots && c->roots->no_shrink) {
		bch_btree_cache_evict_clean(c);
		return 0;
	}
	bch_btree_cache_evict_clean(c);
	struct btree *b = bc->lru.lru_prev;
	unsigned writes = 0, skips = 0;
	bool restored = false;

	while (bc->bytes > bc->limit + bc->held_bytes && b != &bc->lru) {
		struct btree *prev = b->lru_prev;

		if (!b->refs && b->dirty && !c->read_only && !c->emergency_ro && writes < 100000) {
			int ret = relink_check(c, b, held, &restored);
			if (ret < 0)
				return ret;
			if (ret == 2) {
				b = bc->lru.lru_prev;
				continue;
			}
			if (ret == 1 && ++skips >= HELD_SKIPS_MAX)
				break;
			if (!ret) {
				if ((ret = write_cold(c, b)) < 0)
					return ret;
				writes++;
				restored = false;
				/* writes can split and free other nodes: rescan from the cold end */
				b = bc->lru.lru_prev;
				continue;
			}
		}
		if (!b->refs && !b->dirty)
			bch_btree_node_forget(c, b);
		b = prev;
	}
	return write_pending(c, held);
}

int bch_btree_cache_shrink(struct bch_fs *c)
{
	return shrink(c, false);
}

/* Every copy on a member not given (degraded): not damage, not an error of the filesystem. */
static bool all_copies_missing(struct bch_fs *c, const struct bch_bkey *ptr)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);

	for (unsigned i = 0; i < bch_btree_ptr_nr(ptr); i++)
		if (!bch_dev_missing(c, bp->ptrs[i].dev))
			return false;
	return true;
}

int bch_btree_node_get(struct bch_fs *c, unsigned id, unsigned level,
		       const struct bch_bkey *ptr, struct btree **ret)
{
	struct bch_btree_cache *bc = BC(c);
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	struct btree *b;
	int r;

	if (c->panicked)
		return -BCH_ERR_fs_panic;	/* errors=panic: the command is stopping */
	if (!bch_btree_ptr_nr(ptr))
		return bch_fs_err(c, -BCH_ERR_btree_node_bad, "invalid btree pointer");
	for (b = bc->hash[hash_of(bc, &bp->ptrs[0])]; b; b = b->hnext)
		if (b->ptrs[0].dev == bp->ptrs[0].dev && b->ptrs[0].offset == bp->ptrs[0].offset &&
		    b->id == id && b->level == level && b->seq == bp->seq) {
			/*
			 * one node, two ranges: a damaged parent (or two) points
			 * twice at it.  Handing it out would give a walk a node
			 * twice and an iterator a leaf behind its position.
			 */
			if (!bpos_eq(b->min_key, bp->min_key) || !bpos_eq(b->max_key, ptr->p))
				return bch_fs_err(c, -BCH_ERR_btree_node_bad,
						  "%s btree level %u node at %u:%" PRIu64
						  ": reached for another key range",
						  bch_btree_id_name(id), level, bp->ptrs[0].dev,
						  (uint64_t)bp->ptrs[0].offset);
			b->refs++;
			lru_touch(bc, b);
			*ret = b;
			return 0;
		}
	struct bad_node *bad = bc->nr_bad ? bad_find(bc, &bp->ptrs[0]) : NULL;
	if (bad && bad->seq == bp->seq && bad->id == id && bad->level == level)
		return bch_fs_err(c, bad->err, "%s", bad->msg ? bad->msg : bch_err_str(bad->err));
	/* make room first: an unreferenced leaf past the limit goes before the new node comes */
	bch_btree_cache_evict_clean(c);
	r = bch_btree_node_read(c, id, level, ptr, &b);
	if (r) {
		/* damage stays damage for this open: not read again (not a missing library) */
		if (c->opts.v[Opt_fsck] &&
		    (r == -BCH_ERR_btree_node_bad || r == -BCH_ERR_btree_node_read))
			bad_remember(c, id, level, bp, r);
		if ((r == -BCH_ERR_btree_node_bad || r == -BCH_ERR_btree_node_read) &&
		    !all_copies_missing(c, ptr))
			r = bch_fs_error(c, r, true);	/* the errors option */
		return r;
	}
	/* a read node's arrays were sized by its bsets: cut them to the keys it has */
	if (b->cap > b->nr && b->nr && !b->index_in_arena)
		index_set_cap(b, b->nr);
	kfmt_choose(b);		/* read in order from the node's range: from its keys now */
	/* keys were added while the node was not yet accounted: fix the size */
	bc->bytes += bch_btree_node_bytes(b) - sizeof(*b);
	b->refs = 1;
	bch_btree_node_hash(c, b);
	*ret = b;
	if (c->roots && c->roots->no_shrink) {
		bch_btree_cache_evict_clean(c);
		return 0;
	}
	return shrink(c, true);	/* the caller holds the path */
}

void bch_btree_node_ref(struct bch_fs *c, struct btree *b)
{
	b->refs++;
	lru_touch(BC(c), b);
}

void bch_btree_cache_drop(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	struct bch_btree_cache *bc = BC(c);

	if (bc->nr_bad)
		bad_forget(bc, p);
	for (struct btree *b = bc->hash[hash_of(bc, p)]; b; b = b->hnext)
		if (b->ptrs[0].dev == p->dev && b->ptrs[0].offset == p->offset) {
			if (!b->refs)
				bch_btree_node_forget(c, b);
			return;
		}
}

void bch_btree_node_put(struct bch_fs *c, struct btree *b)
{
	(void)c;
	if (b && b->refs)
		b->refs--;
}

void bch_btree_hold(struct bch_fs *c, struct btree_hold *h, struct btree *b)
{
	struct bch_btree_cache *bc = BC(c);

	bch_btree_unhold(c, h);
	h->b = b;
	h->mod = b->mod;
	h->bytes = bch_btree_node_bytes(b);
	bc->held_bytes += h->bytes;
	h->next = bc->holds;
	bc->holds = h;
}

void bch_btree_unhold(struct bch_fs *c, struct btree_hold *h)
{
	struct bch_btree_cache *bc = BC(c);

	for (struct btree_hold **p = &bc->holds; *p; p = &(*p)->next)
		if (*p == h) {
			*p = h->next;
			break;
		}
	if (h->b)
		bch_btree_node_put(c, h->b);
	bc->held_bytes -= h->bytes;
	h->bytes = 0;
	h->b = NULL;
	h->next = NULL;
}

/* ------------------------------------------------------- keys in a node */

/*
 * Search prefixes.  Every key of a node lies at or after a base position lo
 * (the node's min_key, or the first key's); a prefix packs what differs
 * from it into 64 bits, keeping order: with the inodes differing, the
 * inode's distance from lo's in k bits and the offset's top bits under it;
 * with one inode, the offset's distance in k bits and the snapshot's top
 * bits; with one position, the snapshot (on top).  A key past what k bits hold (or
 * of another inode, position) takes the largest prefix.  So a < b gives
 * prefix(a) <= prefix(b), and a tie is decided by the keys themselves.
 * k is chosen from the keys when they are laid out anew (set_keys, pack,
 * a read): wide enough for all but the last (an interior node's last key
 * is its range's end, often far off), so the rest rarely tie.  A key before
 * lo takes every prefix again: an interior node's from its min_key; a
 * leaf's from below the key by as much again as the format spans, and a
 * leaf's key past what k bits reach likewise, up to as far past it
 * (kfmt_refit()): a leaf's keys, between packs, no longer tie from the
 * first that came before its base or past its reach (4096 random 4 KiB
 * writes into one file: its extents' leaf took the node's min_key, POS_MIN,
 * as base at the first, all its keys then one inode's in 16 bits of
 * prefix, ~400 instructions a search, 12 key compares).
 */
enum { KFMT_INODE, KFMT_OFFSET, KFMT_SNAPSHOT };

static unsigned bits_for(uint64_t d)	/* k with d < 2^k - 1 */
{
	unsigned k = d ? 65 - __builtin_clzll(d) : 1;

	return k > 64 ? 64 : k;
}

static inline uint64_t kfmt_prefix64(const struct btree *b, struct bch_bpos p)
{
	unsigned k = b->kfmt_bits;
	struct bch_bpos lo = b->kfmt_lo;
	uint64_t d;

	switch (b->kfmt_mode) {
	case KFMT_INODE:
		d = p.inode - lo.inode;
		if (k == 64)
			return d;
		if (d >= (1ULL << k) - 1)
			return UINT64_MAX;
		return d << (64 - k) | p.offset >> k;
	case KFMT_OFFSET:
		if (p.inode != lo.inode)
			return UINT64_MAX;
		d = p.offset - lo.offset;
		if (k == 64)
			return d;
		if (d >= (1ULL << k) - 1)
			return UINT64_MAX;
		return d << (64 - k) | ((uint64_t)p.snapshot << 32) >> k;
	default:
		return p.inode != lo.inode || p.offset != lo.offset ? UINT64_MAX :
		       (uint64_t)p.snapshot << 32;
	}
}

/*
 * The prefix kept: the top 32 bits of the 64 above (still order-keeping),
 * of which a narrow index (INDEX_NARROW_MAX) keeps the top 16.  A fraction
 * of the bytes a key, and the array a binary search touches as short; a
 * node's keys rarely share their top bits (k is fitted to the keys'
 * spread), and a tie costs one key's compare.
 */
static inline uint32_t kfmt_prefix(const struct btree *b, struct bch_bpos p)
{
	return kfmt_prefix64(b, p) >> 32;
}

static uint32_t kfmt_prefix_of(const struct btree *b, unsigned i)
{
	return kfmt_prefix(b, bch_btree_key_pos(b, i));
}

/* Is p at or after the base (a prefix can be taken)? */
static bool kfmt_covers(const struct btree *b, struct bch_bpos p)
{
	return bpos_cmp(p, b->kfmt_lo) >= 0;
}

/* A format for keys from lo up to ref (the last key to tell apart). */
static void kfmt_set(struct btree *b, struct bch_bpos lo, struct bch_bpos ref)
{
	if (bpos_cmp(lo, ref) > 0)
		ref = lo;
	b->kfmt_lo = lo;
	b->kfmt_ref = ref;
	if (lo.inode != ref.inode) {
		b->kfmt_mode = KFMT_INODE;
		b->kfmt_bits = bits_for(ref.inode - lo.inode);
	} else if (lo.offset != ref.offset) {
		b->kfmt_mode = KFMT_OFFSET;
		b->kfmt_bits = bits_for(ref.offset - lo.offset);
	} else {
		b->kfmt_mode = KFMT_SNAPSHOT;
		b->kfmt_bits = 32;
	}
}

/* Choose the format from the keys b holds (the prefixes not taken). */
static void kfmt_choose_fmt(struct btree *b)
{
	if (b->nr < 3) {
		kfmt_set(b, b->min_key, b->max_key);
		if (b->nr && !kfmt_covers(b, bch_btree_key_pos(b, 0)))
			kfmt_set(b, POS_MIN, POS_MAX);
	} else {
		kfmt_set(b, bch_btree_key_pos(b, 0), bch_btree_key_pos(b, b->nr - 2));
	}
}

/* Choose the format from the keys b holds, and take every prefix again. */
static void kfmt_choose(struct btree *b)
{
	kfmt_choose_fmt(b);
	for (unsigned i = 0; i < b->nr; i++)
		kpos_set(b, i, kfmt_prefix_of(b, i));
}

/* lo less (hi - lo), in the first field they differ in (saturating) */
static struct bch_bpos pos_less_span(struct bch_bpos lo, struct bch_bpos hi)
{
	if (lo.inode != hi.inode) {
		uint64_t d = hi.inode - lo.inode;
		return POS(lo.inode > d ? lo.inode - d : 0, 0, 0);
	}
	if (lo.offset != hi.offset) {
		uint64_t d = hi.offset - lo.offset;
		return POS(lo.inode, lo.offset > d ? lo.offset - d : 0, 0);
	}
	return POS(lo.inode, lo.offset, 0);
}

/* hi plus (hi - lo), in the first field they differ in (saturating) */
static struct bch_bpos pos_plus_span(struct bch_bpos lo, struct bch_bpos hi)
{
	if (lo.inode != hi.inode) {
		uint64_t d = hi.inode - lo.inode;
		return POS(hi.inode < UINT64_MAX - d ? hi.inode + d : UINT64_MAX, UINT64_MAX, UINT32_MAX);
	}
	if (lo.offset != hi.offset) {
		uint64_t d = hi.offset - lo.offset;
		return POS(hi.inode, hi.offset < UINT64_MAX - d ? hi.offset + d : UINT64_MAX, UINT32_MAX);
	}
	return POS(hi.inode, hi.offset, UINT32_MAX);
}

/*
 * A leaf's key at p lies before the base or past what the prefixes reach:
 * the format spans p too, and as much again beyond it on that side (never
 * less than it spanned, never past the node's range when p is inside it),
 * and every prefix is taken again.  The span at least doubles each time:
 * keys coming in order take every prefix again a few times, not each.
 */
static void kfmt_refit(struct btree *b, struct bch_bpos p)
{
	struct bch_bpos lo = b->kfmt_lo, hi = b->kfmt_ref;

	if (bpos_cmp(p, lo) < 0) {
		lo = pos_less_span(p, hi);
		if (bpos_cmp(lo, b->min_key) < 0 && bpos_cmp(b->min_key, p) <= 0)
			lo = b->min_key;
	} else {
		hi = pos_plus_span(lo, bpos_cmp(p, hi) > 0 ? p : hi);
		if (bpos_cmp(hi, b->max_key) > 0 && bpos_cmp(b->max_key, p) >= 0)
			hi = b->max_key;
	}
	kfmt_set(b, lo, hi);
	for (unsigned i = 0; i < b->nr; i++)
		kpos_set(b, i, kfmt_prefix_of(b, i));
}

/* A key came before the base: every prefix again, from the node's range. */
static void kfmt_widen(struct btree *b, struct bch_bpos p)
{
	struct bch_bpos lo = bpos_cmp(b->min_key, p) <= 0 ? b->min_key : POS_MIN;

	kfmt_set(b, lo, b->nr ? bch_btree_key_pos(b, b->nr - 1) : b->max_key);
	for (unsigned i = 0; i < b->nr; i++)
		kpos_set(b, i, kfmt_prefix_of(b, i));
}

/* First key >= pos: over the prefixes, a key read only on a tie. */
static unsigned find_pos(const struct btree *b, struct bch_bpos pos)
{
	unsigned lo = 0, hi = b->nr;

	if (!hi || bpos_cmp(pos, b->kfmt_lo) < 0)
		return 0;
	uint32_t x = kfmt_prefix(b, pos);
#define FIND(kpos, x)										\
	while (lo < hi) {									\
		unsigned mid = lo + (hi - lo) / 2;						\
		if (kpos[mid] < x || (kpos[mid] == x && bpos_cmp(bch_btree_key_pos(b, mid), pos) < 0))	\
			lo = mid + 1;								\
		else										\
			hi = mid;								\
	}
	if (b->index_wide) {
		FIND(b->kpos32, x);
	} else {
		uint16_t x16 = x >> 16;
		FIND(b->kpos16, x16);
	}
#undef FIND
	return lo;
}

int bch_btree_node_find(const struct btree *b, struct bch_bpos pos)
{
	return find_pos(b, pos);
}

/* Key i leaves b's live keys (replaced or deleted). */
static void key_unaccount(struct btree *b, unsigned i)
{
	b->u64s -= bch_btree_key_u64s(b, i);
	if (bch_btree_key_packed(b, i))
		b->packed_saved -= packed_saving(b->pack_fmt);
}

/*
 * Put k, which lies in b's arena, in b's sorted arrays (replacing the key
 * at its position); a whiteout (anywhere) only removes.  Keys mostly arrive
 * in order (node reads, splits): appending is checked first.  at: k's
 * index, first key >= k->p, when the caller found it (else UINT_MAX).
 */
static void node_array_insert(struct btree *b, const struct bch_bkey *k, unsigned at)
{
	unsigned i;

	if (!kfmt_covers(b, k->p) && k->type == BCH_BKEY_deleted)
		return;		/* before every key: none there to remove */
	if (!b->nr)		/* a leaf: from its first key (kfmt_refit() after) */
		kfmt_set(b, b->level ? b->min_key : k->p, b->level ? b->max_key : k->p);
	if (!kfmt_covers(b, k->p)) {
		if (b->level)
			kfmt_widen(b, k->p);
		else
			kfmt_refit(b, k->p);
	} else if (!b->level && kfmt_prefix64(b, k->p) == UINT64_MAX &&
		   bpos_cmp(k->p, b->max_key) <= 0) {
		kfmt_refit(b, k->p);	/* past the prefixes' reach */
	}
	if (at != UINT_MAX)
		i = at;		/* found by the caller (insert_in_place()) */
	else if (!b->nr || bpos_cmp(bch_btree_key_pos(b, b->nr - 1), k->p) < 0)
		i = b->nr;
	else
		i = find_pos(b, k->p);
	bool exists = i < b->nr && bpos_eq(bch_btree_key_pos(b, i), k->p);
	/* where k lies, before the index grows (in the arena, it may move) */
	struct bch_bpos kp = k->p;
	uint32_t off = k->type == BCH_BKEY_deleted ? 0 : arena_off(b, k);
	unsigned u64s = k->u64s;

	if (exists) {
		key_unaccount(b, i);
		if (k->type == BCH_BKEY_deleted) {
			size_t es = idx_size(b);
			dirty_remove(b, i);
			memmove((char *)b->koff + i * es, (char *)b->koff + (i + 1) * es,
				(b->nr - i - 1) * es);
			memmove((char *)b->kpos + i * es, (char *)b->kpos + (i + 1) * es,
				(b->nr - i - 1) * es);
			b->nr--;
			return;
		}
	} else {
		if (k->type == BCH_BKEY_deleted)
			return;
		if (b->nr == b->cap)
			/*
			 * by an eighth: a leaf's arrays are a good part of its
			 * memory (by half, 1M random keys left 0.3M spare); in
			 * the arena by a few (index_cap_for())
			 */
			index_set_cap(b, b->index_in_arena ? index_cap_for(b->cap) :
					 b->cap + b->cap / 8 + 16);
		size_t es = idx_size(b);
		dirty_insert(b, i);
		memmove((char *)b->koff + (i + 1) * es, (char *)b->koff + i * es, (b->nr - i) * es);
		memmove((char *)b->kpos + (i + 1) * es, (char *)b->kpos + i * es, (b->nr - i) * es);
		b->nr++;
	}
	if (off > INDEX_NARROW_MAX)
		index_widen(b);	/* (entry i not yet set: its prefix is taken below) */
	koff_set(b, i, off);
	kpos_set(b, i, kfmt_prefix(b, kp));
	b->u64s += u64s;
	b->last_insert = i;
	b->last_insert_mod = b->mod;
	b->last_insert_pos = kp;
}

/*
 * k, just appended whole at dst (the arena's end) and indexed, packed in
 * its place when every key before it is packed and it fits the leaf's
 * format: the packed keys grow, and a leaf packs again when a quarter of
 * it is dead, not each time as many bytes came whole (btree-bench 1M
 * keys: peak RSS 71.1M -> 67.7M, fewer repacks on insert).  k is not dst
 * (the caller's key, or its copy).
 */
static void append_packed(struct btree *b, const struct bch_bkey *k, struct bch_bkey *dst)
{
	size_t at = (char *)dst - (char *)b->arena, n;

	if (!b->pack_fmt || at != (size_t)b->packed_u64s * 8 ||
	    !(n = bch_bkey_pack(b->pack_fmt, k, (uint64_t *)dst)))
		return;
	b->arena_used = at + n * 8;
	b->packed_u64s += n;
	b->packed_saved += packed_saving(b->pack_fmt);
}

/*
 * k over the leaf key at its position, in its place, when it takes the
 * same room there (the same length: packed, when it fits the leaf's format
 * too): no bytes appended, nothing in the index moves.  Most overwrites
 * are such (an inode's i_size and times, an extent rewritten whole), and
 * each appended its copy: a small leaf, the inodes', packed again every few
 * commits (callgrind, 4096 random 4 KiB writes: 832 packs, 1.5k
 * instructions a write).  Leaves only, whose keys arrive only through
 * inserts, and only an arena of our own (not a read's raw bytes).  false:
 * nothing done, and *at k's index when it was found on the way (its
 * position and order do not change until node_array_insert() uses it:
 * making room packs the keys in order), else UINT_MAX.
 */
static bool insert_in_place(struct btree *b, const struct bch_bkey *k, unsigned *at)
{
	unsigned i = b->last_insert;

	*at = UINT_MAX;
	if (b->level || !b->arena_used || !b->nr || in_arena(b, k))
		return false;
	if (i >= b->nr || !bpos_eq(bch_btree_key_pos(b, i), k->p)) {
		if (!kfmt_covers(b, k->p))
			return false;
		if (bpos_cmp(bch_btree_key_pos(b, b->nr - 1), k->p) < 0) {
			*at = b->nr;	/* after every key (node_array_insert()'s first check) */
			return false;
		}
		*at = i = find_pos(b, k->p);
		if (i >= b->nr || !bpos_eq(bch_btree_key_pos(b, i), k->p))
			return false;
	}
	uint64_t *dst = (uint64_t *)b->arena + bch_btree_key_off(b, i);

	*at = i;
	if (bch_btree_key_u64s(b, i) != k->u64s)
		return false;
	if (bch_btree_key_packed(b, i)) {
		/* (same u64s, same packed length; dst unchanged when k does not fit) */
		if (!bch_bkey_pack(b->pack_fmt, k, dst))
			return false;
	} else {
		memcpy(dst, k, bkey_bytes(k));
	}
	b->last_insert = i;
	b->last_insert_mod = b->mod;
	b->last_insert_pos = k->p;
	return true;
}

void bch_btree_node_insert_key(struct btree *b, const struct bch_bkey *k)
{
	b->mod++;
	if (k->type == BCH_BKEY_deleted) {	/* nothing to place */
		node_array_insert(b, k, UINT_MAX);
		return;
	}
	if (b->nr_pending)
		b->pending_recheck = true;	/* over a pending delete, maybe */
	unsigned at;
	if (insert_in_place(b, k, &at))
		return;
	/* appended to the arena (no malloc a key; a scan still walks one block) */
	size_t kb = bkey_bytes(k);
	struct bch_bkey *own = NULL;
	if (in_arena(b, k))	/* making room may move it */
		k = own = bch_bkey_dup(k);
	if (!b->arena_used || b->arena_used + kb > b->arena_bytes)
		arena_make_room(b, kb);
	struct bch_bkey *dst = (struct bch_bkey *)((char *)b->arena + b->arena_used);
	memcpy(dst, k, kb);
	b->arena_used += kb;
	node_array_insert(b, dst, at);
	append_packed(b, k, dst);
	free(own);
}

/*
 * A read sizes the arrays once for the keys of a bset: grown by half per
 * key inserted, each node read left a trail of freed sizes in the heap (the
 * read-ahead thread's among the main thread's), its holes resident.
 */
void bch_btree_node_reserve(struct btree *b, unsigned nr)
{
	if (nr <= b->cap)
		return;
	index_set_cap(b, nr);
}

void bch_btree_node_insert_ref(struct btree *b, const struct bch_bkey *k)
{
	node_array_insert(b, k, UINT_MAX);
}

/*
 * Record k's position as changed since the last write (a delete keeps its
 * whiteout): k was just put in b (bch_btree_node_insert_key()).
 */
void bch_btree_node_pending_add(struct btree *b, const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_deleted) {
		unsigned i = b->last_insert;

		/* right after its insert (apply_key()): where it put k, unless b changed since */
		if (b->last_insert_mod != b->mod || i >= b->nr || !bpos_eq(b->last_insert_pos, k->p)) {
			if (i >= b->nr || !bpos_eq(bch_btree_key_pos(b, i), k->p))
				i = find_pos(b, k->p);
			if (i >= b->nr || !bpos_eq(bch_btree_key_pos(b, i), k->p))
				abort();	/* not in b: its write would lose it */
		}
		dirty_reserve(b);
		if (!(b->kdirty[i / 64] >> (i % 64) & 1)) {
			b->kdirty[i / 64] |= 1ULL << (i % 64);
			b->nr_dirty++;
		}
		return;
	}
	if (b->nr_pending == b->cap_pending) {
		/* many deletes of few positions: merge before growing */
		if (b->nr_pending - b->nr_pending_sorted >= 64 &&
		    b->nr_pending - b->nr_pending_sorted >= b->nr_pending_sorted) {
			bch_btree_node_pending_sort(b);
			if (b->nr_pending < b->cap_pending)
				goto add;
		}
		/* by a quarter: the budget (PENDING_SHARE) counts their room too */
		b->cap_pending = b->cap_pending ? b->cap_pending + b->cap_pending / 4 : 16;
		b->pending = realloc(b->pending, b->cap_pending * sizeof(*b->pending));
		if (!b->pending)
			abort();
	}
add:;
	struct btree_pending *e = &b->pending[b->nr_pending++];

	e->p = k->p;
	e->p.pad = 0;
	if (k->u64s != BCH_BKEY_U64s || k->flags || k->version || k->size || k->p.pad) {
		if (b->nr_copy_slots == b->cap_copy_slots) {
			b->cap_copy_slots = b->cap_copy_slots ? b->cap_copy_slots * 2 : 4;
			b->pending_copies = realloc(b->pending_copies,
						    b->cap_copy_slots * sizeof(*b->pending_copies));
			if (!b->pending_copies)
				abort();
		}
		b->pending_copies[b->nr_copy_slots] = bch_bkey_dup(k);
		e->p.pad = ++b->nr_copy_slots;
		b->nr_pending_copies++;
	}
	/* still sorted when it comes after the last (keys in order) */
	if (b->nr_pending_sorted == b->nr_pending - 1 &&
	    (b->nr_pending == 1 || bpos_cmp(b->pending[b->nr_pending - 2].p, k->p) < 0))
		b->nr_pending_sorted++;
}

static int cmp_pending(const struct btree_pending *x, const struct btree_pending *y)
{
	return bpos_cmp(x->p, y->p);
}

/* Stable merge sort of a[0..n) (tmp: n entries): equal positions keep their order. */
static void pending_msort(struct btree_pending *a, struct btree_pending *tmp, unsigned n)
{
	if (n < 2)
		return;
	unsigned h = n / 2;
	pending_msort(a, tmp, h);
	pending_msort(a + h, tmp, n - h);
	if (cmp_pending(&a[h - 1], &a[h]) <= 0)
		return;
	unsigned i = 0, j = h, o = 0;
	while (i < h && j < n)
		tmp[o++] = cmp_pending(&a[j], &a[i]) < 0 ? a[j++] : a[i++];
	while (i < h)
		tmp[o++] = a[i++];
	while (j < n)
		tmp[o++] = a[j++];
	memcpy(a, tmp, n * sizeof(*a));
}

static void pending_drop(struct btree *b, struct btree_pending *e)
{
	if (e->p.pad) {
		free(b->pending_copies[e->p.pad - 1]);
		b->pending_copies[e->p.pad - 1] = NULL;
		e->p.pad = 0;
		b->nr_pending_copies--;
	}
}

/* The words pending entry e takes in a bset: its whiteout or its copy. */
static size_t pending_entry_u64s(const struct btree *b, const struct btree_pending *e)
{
	return e->p.pad ? b->pending_copies[e->p.pad - 1]->u64s : BCH_BKEY_U64s;
}

/*
 * Does p hold a key in b (inserted again after its delete)?  Then that key
 * is what p changed to: marked changed (it is already, when it came
 * through bch_btree_node_pending_add()).
 */
static bool holds_key(struct btree *b, struct bch_bpos p)
{
	unsigned i = find_pos(b, p);

	if (i >= b->nr || !bpos_eq(bch_btree_key_pos(b, i), p))
		return false;
	if (!dirty_test(b, i)) {
		dirty_reserve(b);
		b->kdirty[i / 64] |= 1ULL << (i % 64);
		b->nr_dirty++;
	}
	return true;
}

void bch_btree_node_pending_sort(struct btree *b)
{
	unsigned s = b->nr_pending_sorted, n = b->nr_pending;

	if (s < n) {
		struct btree_pending *tmp = malloc(n * sizeof(*tmp)), *tail = b->pending + s;
		if (!tmp)
			abort();
		pending_msort(tail, tmp, n - s);
		/* one entry a position: the newest (last) of the tail's */
		unsigned t = 0;
		for (unsigned i = 0; i < n - s; i++) {
			if (t && bpos_eq(tail[t - 1].p, tail[i].p)) {
				pending_drop(b, &tail[t - 1]);
				tail[t - 1] = tail[i];
			} else {
				tail[t++] = tail[i];
			}
		}
		/* merge with the sorted head; the tail is newer */
		unsigned i = 0, j = 0, o = 0;
		while (i < s || j < t) {
			int c = i == s ? 1 : j == t ? -1 : cmp_pending(&b->pending[i], &tail[j]);
			if (c < 0) {
				tmp[o++] = b->pending[i++];
			} else {
				if (!c)
					pending_drop(b, &b->pending[i++]);
				tmp[o++] = tail[j++];
			}
		}
		memcpy(b->pending, tmp, o * sizeof(*tmp));
		free(tmp);
		b->nr_pending = b->nr_pending_sorted = o;
	}
	/*
	 * a delete whose position holds a key again is superseded (the key's
	 * bit says so): looked for only when a key came in since (a search a
	 * whiteout cost the deletes 8% of their CPU)
	 */
	if (b->pending_recheck) {
		unsigned o = 0;
		for (unsigned i = 0; i < b->nr_pending; i++) {
			if (holds_key(b, b->pending[i].p))
				pending_drop(b, &b->pending[i]);
			else
				b->pending[o++] = b->pending[i];
		}
		b->nr_pending = b->nr_pending_sorted = o;
		b->pending_recheck = false;
	}
	b->pending_u64s = 0;
	for (unsigned i = 0; i < b->nr_pending; i++)
		b->pending_u64s += pending_entry_u64s(b, &b->pending[i]);
	for (unsigned w = 0; b->nr_dirty && w < b->dirty_words; w++)
		for (uint64_t m = b->kdirty[w]; m; m &= m - 1)
			b->pending_u64s += bch_btree_key_u64s(b, w * 64 + __builtin_ctzll(m));
}

/* The next changed key's index at or after i (b->nr when none). */
static unsigned dirty_next(const struct btree *b, unsigned i)
{
	if (!b->nr_dirty)
		return b->nr;
	while (i < b->nr) {
		uint64_t m = b->kdirty[i / 64] >> (i % 64);
		if (m)
			return i + __builtin_ctzll(m);
		i = (i / 64 + 1) * 64;
	}
	return b->nr;
}

size_t bch_btree_node_pending_pack(const struct btree *b, uint64_t *dst, size_t max_u64s)
{
	size_t u64s = 0;
	unsigned i = 0, j = dirty_next(b, 0);

	while (i < b->nr_pending || j < b->nr) {
		const struct btree_pending *e = i < b->nr_pending ? &b->pending[i] : NULL;
		const struct bch_bkey *k;
		struct bch_bkey w;
		struct bch_bkey_buf buf;

		if (j < b->nr && (!e || bpos_cmp(bch_btree_key_pos(b, j), e->p) < 0)) {
			k = bch_btree_key(b, j, &buf);
			j = dirty_next(b, j + 1);
		} else if (e->p.pad) {
			k = b->pending_copies[e->p.pad - 1];
			i++;
		} else {
			memset(&w, 0, sizeof(w));
			w.u64s = BCH_BKEY_U64s;
			w.type = BCH_BKEY_deleted;
			w.p = e->p;
			k = &w;
			i++;
		}
		if (u64s + k->u64s > max_u64s)
			return SIZE_MAX;
		memcpy(dst + u64s, k, bkey_bytes(k));
		u64s += k->u64s;
	}
	return u64s;
}

void bch_btree_node_pending_clear(struct btree *b)
{
	for (unsigned i = 0; i < b->nr_pending; i++)
		pending_drop(b, &b->pending[i]);
	dirty_clear(b);
	b->pending_recheck = false;
	free(b->pending_copies);
	b->pending_copies = NULL;
	b->nr_copy_slots = b->cap_copy_slots = 0;
	b->nr_pending = b->nr_pending_sorted = 0;
	b->pending_u64s = 0;
	/*
	 * A written node may stay clean a long time: its list goes (kept at 16
	 * entries, 512 leaves' lists took 196K of the deletes' 256K budget)
	 */
	if (b->cap_pending) {
		free(b->pending);
		b->pending = NULL;
		b->cap_pending = 0;
	}
}

/* Update the cache's byte count after b changed size by delta. */
void bch_btree_cache_account(struct bch_fs *c, long delta)
{
	BC(c)->bytes += delta;
}

void bch_btree_cache_account_pending(struct bch_fs *c, long delta)
{
	BC(c)->pending_bytes += delta;
}

struct bch_bkey *bch_btree_ptr_key(const struct btree *b)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_btree_ptr, b->max_key,
					    sizeof(struct bch_btree_ptr) +
					    b->nr_ptrs * sizeof(struct bch_extent_ptr));
	struct bch_btree_ptr *bp = bkey_val(k);

	bp->seq = b->seq;
	/* what is written so far: a reader starts with that much (a hint only) */
	bp->sectors_written = b->sectors_written <= UINT16_MAX ? b->sectors_written : 0;
	bp->min_key = b->min_key;
	memcpy(bp->ptrs, b->ptrs, b->nr_ptrs * sizeof(b->ptrs[0]));
	return k;
}
