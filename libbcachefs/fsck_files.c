// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_files.c - passes 5 to 11 over files: what they share (the inode
 * table, the key cursor, one-key repairs).  The driver, which runs them
 * (once per subvolume view on a filesystem with snapshots), is
 * fsck_files_run.c; each pass lives in its own file (fsck_extents.c,
 * fsck_inodes.c, fsck_dirents.c, fsck_dirs.c, fsck_links.c, fsck_data.c);
 * this overview lists every check:
 *
 * Checks
 *   pass 5 (one scan of the extents btree, with pass 6)
 *     extent_ptr_bad       pointer to a missing device, outside the device's
 *                          buckets or into a superblock, journal or btree bucket
 *     extent_ptr_stale     pointer whose generation is not its bucket's
 *     extent_ptr_dup       two encoded extents claim the same blocks
 *                          (keys split from one encoded extent share it, each
 *                          covering a later piece of it)
 *     cached_ptr_bad       a cached pointer that is not stale, into a bucket
 *                          of btree, journal or superblock data, or on the
 *                          device of a dirty copy (a stale one is no damage)
 *     repair: the pointer is dropped; an extent with none left is deleted
 *   pass 6
 *     extent_no_inode, extent_bad_inode   owner missing / not a file or symlink
 *     extent_overlap       starts before the previous extent of its inode ends
 *     extent_past_eof      data starts past the block holding the file's last byte
 *                          (a reservation may: fallocate KEEP_SIZE)
 *     inode_sectors_wrong  inode's sectors != sum of its extents' sizes
 *     reserved_sectors_wrong  the clean record's promised sectors != the
 *                          reservation keys' (size x replicas summed)
 *     rebalance_work_missing  a regular file's extent needs rebalance
 *                          (bch_extent_rebalance_reasons) and neither its work
 *                          key (with a cursor before the extent's end) nor the
 *                          scan key (cursor <= its inode) covers it: key added
 *     rebalance_work_stale a work key of an inode that is missing or not a
 *                          regular file: deleted (the work keys are read in
 *                          step with the extents and inodes)
 *   pass 7
 *     inode_unlinked       no names and nlink 0 / unlinked flag: finish deleting
 *     inode_back_pointer   parent pointer does not name one of its links
 *   pass 8 (dirents, then xattrs)
 *     dirent_bad_dir, dirent_dangling, dirent_to_root: the entry is deleted
 *     dirent_type_wrong    d_type differs from the inode's type: corrected
 *     dirent_misplaced     a lookup of its name does not reach it: re-hashed
 *     dirent_duplicate     a lookup of its name finds an earlier entry: deleted
 *     dir_multiple_links   a directory with a second name: the entry is deleted
 *     dirent_subvol_dangling  a name (BCH_DT_SUBVOL) of a subvolume that does
 *                          not exist: deleted (minor: a snapshot of its
 *                          directory keeps it); the names of subvolumes count
 *                          as subdirectories
 *     xattr_no_inode, xattr_misplaced   likewise for xattrs
 *   pass 9
 *     root_missing         a new root directory is created
 *     lost_found_missing   created when something needs reattaching
 *     dir_unreachable      a directory with no name: moved to lost+found
 *     dir_loop             directories whose parents never reach the root:
 *                          one of them is moved to lost+found
 *     inode_unreachable    a file with nlink > 0 but no name: to lost+found
 *   pass 10
 *     nlink_wrong          nlink != names (directories: 2 + subdirectories)
 *   pass 11 (--data)
 *     data_replica_bad     a copy fails its checksum or cannot be read while
 *                          another is good: rewritten from the good one (a
 *                          cached copy is dropped; a stale one is not read)
 *     data_unreadable      no good copy: reported, left as is
 *
 * Memory: four bits per inode in the table (fsck_files.h: two bytes at
 * worst; directories and the rare odd file 16 bytes in a hash table, and
 * directories 48 more) and, during pass 5, the blocks claimed on each device
 * (runs while few, else one bit per block: struct fsck_claims); never in
 * proportion to the data.  Keys are read in batches and repairs happen between batches, so no iterator is open while
 * the tree changes.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "alloc.h"
#include "alloc_btree.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "btree_prefetch.h"
#include "checksum.h"
#include "crypt.h"
#include "errcode.h"
#include "extents.h"
#include "fs_ops.h"
#include "fsck.h"
#include "inode.h"
#include "io.h"
#include "snapshot.h"
#include "super.h"
#include "fsck_files.h"

/* ------------------------------------------------------------ inode table */

#if defined(__SANITIZE_ADDRESS__)
#define TABLE_UNDER_ASAN	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TABLE_UNDER_ASAN	1
#endif
#endif

void *fsck_table_alloc(size_t bytes)
{
#ifdef TABLE_UNDER_ASAN
	return calloc(bytes ? bytes : 1, 1);	/* the sanitizer checks its bounds */
#else
	void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
#endif
}

void fsck_table_free(void *p, size_t bytes)
{
	if (!p)
		return;
#ifdef TABLE_UNDER_ASAN
	(void)bytes;
	free(p);
#else
	munmap(p, bytes ? bytes : 1);
#endif
}

/* Bytes of the packed range at code_bits bits a number. */
static size_t packed_bytes(const struct ino_table *t, unsigned code_bits)
{
	return (t->dense_len * code_bits + 7) / 8;
}

/*
 * Slot of a key: runs of 64 consecutive numbers keep their order in 64
 * adjacent slots (passes visit inodes in number order, so the next entry is
 * usually on the cache line already read), and the runs themselves are
 * scattered by a mixing hash (so no choice of numbers lines them up into one
 * long probe sequence).
 */
static uint64_t map_hash(uint64_t x)
{
	uint64_t run = x >> 6;

	run ^= run >> 33;
	run *= 0xff51afd7ed558ccdULL;
	run ^= run >> 33;
	return (run << 6) | (x & 63);
}

static inline void *map_slot(const struct fsck_map *m, size_t i)
{
	return (char *)m->e + i * m->esize;
}

static inline uint64_t map_key(const struct fsck_map *m, size_t i)
{
	uint64_t k;

	memcpy(&k, map_slot(m, i), sizeof(k));
	return k;
}

/*
 * A key's first slot in a table of cap slots: its hash's low bits when cap
 * is a power of two (as the tables grow), else the hash scaled to cap (a
 * table reserved at its size, fsck_map_reserve()).  Probes go on to the
 * next slot, from the last back to the first.
 */
static inline size_t map_home(uint64_t key, size_t cap)
{
	uint64_t h = map_hash(key);

	return cap & (cap - 1) ? (size_t)(((unsigned __int128)h * cap) >> 64) : h & (cap - 1);
}

static inline size_t map_next(size_t j, size_t cap)
{
	return j + 1 == cap ? 0 : j + 1;
}

/* Move the entries into a table of ncap slots. */
static void map_resize(struct fsck_map *m, size_t ncap)
{
	char *ne = calloc(ncap, m->esize);

	if (!ne)
		abort();
	for (size_t i = 0; i < m->cap; i++) {
		uint64_t k = map_key(m, i);
		if (!k)
			continue;
		size_t j = map_home(k, ncap);
		for (;;) {
			uint64_t o;
			memcpy(&o, ne + j * m->esize, sizeof(o));
			if (!o)
				break;
			j = map_next(j, ncap);
		}
		memcpy(ne + j * m->esize, map_slot(m, i), m->esize);
	}
	free(m->e);
	m->e = ne;
	m->cap = ncap;
}

/* Slots for nr entries at most 3/4 full: a power of two, so growing doubles. */
static size_t map_cap_for(size_t nr)
{
	size_t cap = 64;

	while (nr * 4 > cap * 3)
		cap *= 2;
	return cap;
}

void *fsck_map_find(struct fsck_map *m, uint64_t key, bool add)
{
	if (add && (m->nr + 1) * 4 > m->cap * 3)
		map_resize(m, map_cap_for(m->nr + 1));
	if (!m->cap || !key)
		return NULL;
	size_t j = map_home(key, m->cap);
	for (uint64_t k; (k = map_key(m, j)); j = map_next(j, m->cap))
		if (k == key)
			return map_slot(m, j);
	if (!add)
		return NULL;
	void *e = map_slot(m, j);
	memset(e, 0, m->esize);
	memcpy(e, &key, sizeof(key));
	m->nr++;
	return e;
}

void fsck_map_reserve(struct fsck_map *m, size_t extra)
{
	size_t cap = map_cap_for(m->nr + extra);

	if (cap > m->cap)
		map_resize(m, cap);
}

/*
 * As fsck_map_reserve(), sized to what is asked, not the next power of two:
 * the directories' side table of 1M files (1,018 entries of 48 bytes) takes
 * 1,408 slots, 66 KB, where 2,048 took 96 KB (all of it resident: entries
 * spread over every page).  Only for tables nothing walks in slot order
 * (the walk's order would change with the size).
 */
void fsck_map_fit(struct fsck_map *m, size_t extra)
{
	size_t nr = m->nr + extra, cap = (nr * 4 + 2) / 3;

	cap = cap < 64 ? 64 : (cap + 63) / 64 * 64;
	if (cap > m->cap)
		map_resize(m, cap);
}

/* ------------------------------------------------------------ blocks claimed */

void fsck_claims_init(struct fsck_claims *cl, uint64_t blocks)
{
	memset(cl, 0, sizeof(*cl));
	cl->blocks = blocks;
}

void fsck_claims_exit(struct fsck_claims *cl)
{
	free(cl->run);
	fsck_table_free(cl->map, (cl->blocks + 7) / 8);
	memset(cl, 0, sizeof(*cl));
}

/* Set bits [start, end) of map; whether any was set already. */
static bool map_take(uint8_t *map, uint64_t start, uint64_t end)
{
	bool taken = false;

	for (; start < end && start % 8; start++) {
		taken |= map[start / 8] >> (start % 8) & 1;
		map[start / 8] |= 1U << (start % 8);
	}
	for (; start + 8 <= end; start += 8) {
		taken |= map[start / 8] != 0;
		map[start / 8] = 0xff;
	}
	for (; start < end; start++) {
		taken |= map[start / 8] >> (start % 8) & 1;
		map[start / 8] |= 1U << (start % 8);
	}
	return taken;
}

/* Too many runs: the bitmap from now on. */
static void claims_to_map(struct fsck_claims *cl)
{
	cl->map = fsck_table_alloc((cl->blocks + 7) / 8);
	if (!cl->map)
		abort();	/* as malloc failing: out of memory */
	for (size_t i = 0; i < cl->nr; i++)
		map_take(cl->map, cl->run[i][0], cl->run[i][1]);
	free(cl->run);
	cl->run = NULL;
	cl->nr = cl->cap = 0;
}

bool fsck_claims_take(struct fsck_claims *cl, uint64_t first, uint64_t last)
{
	uint64_t end = last + 1;

	if (cl->map)
		return map_take(cl->map, first, end);
	uint64_t (*r)[2] = cl->run;
	size_t nr = cl->nr;
	/* the common case: at or past the end of the last run (data in order) */
	if (nr && first == r[nr - 1][1]) {
		r[nr - 1][1] = end;
		return false;
	}
	size_t lo = nr;
	if (nr && first < r[nr - 1][1]) {
		/* the first run that ends at or after first (runs apart: ends sorted) */
		size_t hi = nr;
		lo = 0;
		while (lo < hi) {
			size_t m = lo + (hi - lo) / 2;
			if (r[m][1] < first)
				lo = m + 1;
			else
				hi = m;
		}
	}
	/* the runs that overlap or touch [first, end) become one */
	bool taken = false;
	uint64_t s = first, e = end;
	size_t j = lo;
	for (; j < nr && r[j][0] <= end; j++) {
		taken |= r[j][0] < end && r[j][1] > first;
		s = r[j][0] < s ? r[j][0] : s;
		e = r[j][1] > e ? r[j][1] : e;
	}
	if (j > lo) {
		r[lo][0] = s;
		r[lo][1] = e;
		memmove(&r[lo + 1], &r[j], (nr - j) * sizeof(*r));
		cl->nr -= j - lo - 1;
		return taken;
	}
	if (nr == FSCK_CLAIM_RUNS) {
		claims_to_map(cl);
		return map_take(cl->map, first, end);
	}
	if (nr == cl->cap) {
		cl->cap = cl->cap ? cl->cap * 2 : 16;
		if (cl->cap > FSCK_CLAIM_RUNS)
			cl->cap = FSCK_CLAIM_RUNS;
		r = cl->run = realloc(cl->run, cl->cap * sizeof(*r));
		if (!r)
			abort();
	}
	memmove(&r[lo + 1], &r[lo], (nr - lo) * sizeof(*r));
	r[lo][0] = first;
	r[lo][1] = end;
	cl->nr++;
	return false;
}

void fsck_map_exit(struct fsck_map *m)
{
	free(m->e);
	m->e = NULL;
	m->cap = m->nr = 0;
}

void fsck_ino_init(struct ino_table *t, size_t nr, uint64_t max_inum)
{
	memset(t, 0, sizeof(*t));
	t->hash.esize = sizeof(struct ino_hent);
	t->extra.esize = sizeof(struct ino_extra);
	if (max_inum >= BCH_ROOT_INO && max_inum - BCH_ROOT_INO < 2 * (uint64_t)nr + 4096) {
		t->dense_base = BCH_ROOT_INO;
		t->dense_len = max_inum - BCH_ROOT_INO + 1;
		t->code_bits = 2;
		t->packed = fsck_table_alloc(packed_bytes(t, 2));
		t->hashed_runs = calloc(t->dense_len / 64 / 64 + 1, sizeof(uint64_t));
		if (!t->packed || !t->hashed_runs)
			abort();
	} else {
		fsck_map_reserve(&t->hash, nr);
	}
}

/* How many fingerprint chunks the dense range spans. */
static size_t fp_chunks_nr(const struct ino_table *t)
{
	return (t->dense_len + INO_FP_CHUNK - 1) / INO_FP_CHUNK;
}

void fsck_ino_exit(struct ino_table *t)
{
	if (t->fp_chunks)
		for (size_t i = 0; i < fp_chunks_nr(t); i++)
			free(t->fp_chunks[i]);
	free(t->fp_chunks);
	fsck_table_free(t->packed, packed_bytes(t, t->code_bits));
	fsck_table_free(t->wide, t->dense_len * sizeof(*t->wide));
	free(t->hashed_runs);
	fsck_map_exit(&t->hash);
	fsck_map_exit(&t->extra);
	memset(t, 0, sizeof(*t));
}

/* Codes of code_bits (2 or 4) bits, the lowest bits of a byte first. */
static inline unsigned packed_get(const struct ino_table *t, size_t i)
{
	return fsck_ino_code(t, i);
}

static inline void packed_set(struct ino_table *t, size_t i, unsigned code)
{
	unsigned per_shift = t->code_bits == 2 ? 2 : 1, shift = (i & ((1U << per_shift) - 1)) * t->code_bits;
	unsigned mask = ((1U << t->code_bits) - 1) << shift;

	t->packed[i >> per_shift] = (t->packed[i >> per_shift] & ~mask) | code << shift;
}

/* A fourth value: codes of four bits from now on (the range copied once). */
static void packed_deepen(struct ino_table *t)
{
	uint8_t *n = fsck_table_alloc(packed_bytes(t, 4));

	if (!n)
		abort();
	for (size_t i = 0; i < t->dense_len; i++) {
		unsigned code = packed_get(t, i);
		n[i / 2] |= code << (i % 2 * 4);
	}
	fsck_table_free(t->packed, packed_bytes(t, 2));
	t->packed = n;
	t->code_bits = 4;
}

static inline uint16_t ino_pack(const struct ino_info *ii)
{
	return (uint16_t)ii->counts << 8 | ii->bits;
}


/* The code of *ii's value (added when there is room and it may be), or 0. */
static unsigned palette_code(struct ino_table *t, const struct ino_info *ii)
{
	uint16_t v = ino_pack(ii);
	unsigned h = fsck_palette_hash(v), c = t->palette_hint[h];

	if (c && t->palette[c - 1] == v)
		return c;
	for (unsigned k = 0; k < t->nr_palette; k++)
		if (t->palette[k] == v)
			return t->palette_hint[h] = k + 1;
	/* a directory's counts differ from one to the next: none of its values */
	if (t->nr_palette == INO_PALETTE || S_ISDIR(ino_mode(ii)))
		return 0;
	if (t->nr_palette == (1U << t->code_bits) - 1)
		packed_deepen(t);
	t->palette[t->nr_palette++] = v;
	return t->palette_hint[h] = t->nr_palette;
}

/*
 * Too many of the dense range are outside the palette: keep the range
 * whole instead, two bytes a number (the bound on memory); the hash keeps
 * only the numbers outside it.
 */
static void ino_widen(struct ino_table *t)
{
	struct fsck_map rest = { .esize = sizeof(struct ino_hent) };

	t->wide = fsck_table_alloc(t->dense_len * sizeof(*t->wide));
	if (!t->wide)
		abort();
	for (size_t i = 0; i < t->dense_len; i++) {
		unsigned code = packed_get(t, i);
		if (code) {
			t->wide[i].counts = t->palette[code - 1] >> 8;
			t->wide[i].bits = t->palette[code - 1] & 0xff;
		}
	}
	fsck_table_free(t->packed, packed_bytes(t, t->code_bits));
	t->packed = NULL;
	fsck_map_reserve(&rest, t->hash.nr - t->nr_hashed_dense);
	for (size_t j = 0; j < t->hash.cap; j++) {
		const struct ino_hent *h = map_slot(&t->hash, j);
		if (!h->inum)
			continue;
		if (h->inum - t->dense_base < t->dense_len)
			t->wide[h->inum - t->dense_base] = h->i;
		else
			*(struct ino_hent *)fsck_map_find(&rest, h->inum, true) = *h;
	}
	fsck_map_exit(&t->hash);
	t->hash = rest;
	t->nr_hashed_dense = 0;
}

/* Is some number of i's run of 64 (in the dense range) in the hash? */
static inline bool run_hashed(const struct ino_table *t, uint64_t i)
{
	return t->hashed_runs[i / 64 / 64] & (1ULL << (i / 64 % 64));
}

/*
 * inum's entry in the hash, or NULL.  The slot last found is tried first:
 * lookups of one number come together (a directory's, for each of its names).
 */
static struct ino_hent *hash_find(struct ino_table *t, uint64_t inum)
{
	struct ino_hent *h;

	if (inum == t->last_inum && t->last_slot < t->hash.cap &&
	    (h = map_slot(&t->hash, t->last_slot))->inum == inum)
		return h;
	if ((h = fsck_map_find(&t->hash, inum, false))) {
		t->last_inum = inum;
		t->last_slot = ((char *)h - (char *)t->hash.e) / t->hash.esize;
	}
	return h;
}

bool __fsck_ino_get(struct ino_table *t, uint64_t inum, struct ino_info *ii)
{
	uint64_t i = inum - t->dense_base;
	const struct ino_hent *h = NULL;

	if (i < t->dense_len && t->wide) {
		*ii = t->wide[i];
	} else if (i < t->dense_len && packed_get(t, i)) {
		uint16_t v = t->palette[packed_get(t, i) - 1];
		ii->counts = v >> 8;
		ii->bits = v & 0xff;
	} else if (!inum) {
		*ii = t->zero;	/* the hash table's empty key */
	} else if ((i >= t->dense_len || run_hashed(t, i)) && (h = hash_find(t, inum))) {
		*ii = h->i;
	} else {
		memset(ii, 0, sizeof(*ii));
	}
	return ii->bits & INO_PRESENT;
}

void fsck_ino_get_new(struct ino_table *t, uint64_t inum, struct ino_info *ii)
{
	if (!fsck_ino_get(t, inum, ii))
		ii->bits = INO_PRESENT;
}

void __fsck_ino_put(struct ino_table *t, uint64_t inum, const struct ino_info *ii)
{
	uint64_t i = inum - t->dense_base;
	struct ino_hent *h;

	if (i < t->dense_len && t->wide) {
		t->nr += !(t->wide[i].bits & INO_PRESENT);
		t->wide[i] = *ii;
		return;
	}
	if (i < t->dense_len) {
		unsigned code = packed_get(t, i);
		h = !code && run_hashed(t, i) ? hash_find(t, inum) : NULL;
		if (h) {	/* once in the hash, it stays there */
			h->i = *ii;
			return;
		}
		t->nr += !code;
		if ((code = palette_code(t, ii))) {
			packed_set(t, i, code);
			return;
		}
		packed_set(t, i, 0);
		t->hashed_runs[i / 64 / 64] |= 1ULL << (i / 64 % 64);
		h = fsck_map_find(&t->hash, inum, true);
		h->i = *ii;
		if (++t->nr_hashed_dense > t->dense_len / INO_WIDE_RATIO + 64)
			ino_widen(t);
		return;
	}
	if (!inum) {
		t->nr += !(t->zero.bits & INO_PRESENT);
		t->zero = *ii;
		return;
	}
	if (!(h = hash_find(t, inum))) {
		h = fsck_map_find(&t->hash, inum, true);
		t->nr++;
	}
	h->i = *ii;
}

void fsck_ino_reserve(struct ino_table *t, size_t extra)
{
	fsck_map_reserve(&t->hash, extra);
	fsck_map_fit(&t->extra, extra);
}

bool fsck_ino_next(struct ino_table *t, size_t *pos, uint64_t *inum, struct ino_info *ii)
{
	while (*pos < t->dense_len) {
		size_t i = (*pos)++;
		if (fsck_ino_get(t, t->dense_base + i, ii)) {
			*inum = t->dense_base + i;
			return true;
		}
	}
	while (*pos < t->dense_len + t->hash.cap) {
		struct ino_hent *h = map_slot(&t->hash, (*pos)++ - t->dense_len);
		/* those of the dense range came in their place */
		if (h->inum && h->inum - t->dense_base >= t->dense_len && (h->i.bits & INO_PRESENT)) {
			*inum = h->inum;
			*ii = h->i;
			return true;
		}
	}
	if (*pos == t->dense_len + t->hash.cap) {
		(*pos)++;
		if (t->zero.bits & INO_PRESENT) {
			*inum = 0;
			*ii = t->zero;
			return true;
		}
	}
	memset(ii, 0, sizeof(*ii));
	return false;
}

void fsck_ino_set_fp(struct ino_table *t, uint64_t inum, uint16_t fp)
{
	uint64_t i = inum - t->dense_base;

	if (i < t->dense_len) {
		if (!t->fp_chunks && !(t->fp_chunks = calloc(fp_chunks_nr(t), sizeof(*t->fp_chunks))))
			abort();
		uint16_t **c = &t->fp_chunks[i / INO_FP_CHUNK];
		if (!*c && !(*c = calloc(INO_FP_CHUNK, sizeof(**c))))
			abort();
		(*c)[i % INO_FP_CHUNK] = fp;
	} else if (!inum) {
		t->zero_fp = fp;
	} else {
		struct ino_hent *h = fsck_map_find(&t->hash, inum, false);
		if (h)
			h->bp_fp = fp;
	}
}

uint16_t fsck_ino_fp(struct ino_table *t, uint64_t inum)
{
	uint64_t i = inum - t->dense_base;

	if (i < t->dense_len) {
		const uint16_t *c = t->fp_chunks ? t->fp_chunks[i / INO_FP_CHUNK] : NULL;
		return c ? c[i % INO_FP_CHUNK] : 0;
	}
	if (!inum)
		return t->zero_fp;
	const struct ino_hent *h = fsck_map_find(&t->hash, inum, false);
	return h ? h->bp_fp : 0;
}

struct ino_extra *fsck_ino_extra(struct ino_table *t, uint64_t inum, bool add)
{
	return fsck_map_find(&t->extra, inum, add);
}

/* A count kept in 4 bits of the entry, or at INO_SAT and past in the side entry. */
static uint32_t count_get(struct ino_table *t, uint64_t inum, unsigned small, bool names)
{
	const struct ino_extra *x = small == INO_SAT ? fsck_ino_extra(t, inum, false) : NULL;

	return !x ? small : names ? x->names : x->nlink;
}

/* Store n; returns what the entry's 4 bits hold. */
static unsigned count_set(struct ino_table *t, uint64_t inum, bool names, uint32_t n)
{
	struct ino_extra *x = n >= INO_SAT ? fsck_ino_extra(t, inum, true) : NULL;

	if (!x)
		return n;
	*(names ? &x->names : &x->nlink) = n;
	return INO_SAT;
}

uint32_t fsck_ino_names(struct ino_table *t, uint64_t inum, const struct ino_info *ii)
{
	return count_get(t, inum, ii->counts & 0x0f, true);
}

void fsck_ino_set_names(struct ino_table *t, uint64_t inum, struct ino_info *ii, uint32_t n)
{
	unsigned v = count_set(t, inum, true, n);

	ii->counts = (ii->counts & 0xf0) | v;
}

uint32_t fsck_ino_nlink(struct ino_table *t, uint64_t inum, const struct ino_info *ii)
{
	return count_get(t, inum, ii->counts >> 4, false);
}

void fsck_ino_set_nlink(struct ino_table *t, uint64_t inum, struct ino_info *ii, uint32_t n)
{
	unsigned v = count_set(t, inum, false, n);

	ii->counts = (ii->counts & 0x0f) | v << 4;
}

unsigned fsck_ino_state(struct ino_table *t, uint64_t inum)
{
	const struct ino_extra *x = fsck_ino_extra(t, inum, false);

	return x ? x->state : 0;
}

void fsck_ino_set_state(struct ino_table *t, uint64_t inum, unsigned state)
{
	fsck_ino_extra(t, inum, true)->state = state;
}

/* ------------------------------------------------------------------ state */


bool fsck_fixing(struct fstate *s, enum bch_fsck_problem p, const char *where, const char *detail)
{
	if (s->par_b && !fsck_par_defer(s, p, where, detail))
		return false;	/* kept for later (-n: nothing is repaired) */
	return bch_fsck_problem(s->ctx, p, where, detail) && !s->c->read_only;
}

void fsck_fix_done(struct fstate *s, enum bch_fsck_problem p, int r)
{
	if (!r)
		bch_fsck_fixed(s->ctx, p);
	else if (!s->err)
		s->err = r;
}

uint64_t fsck_view_root(struct bch_fs *c)
{
	const struct bch_view *v = bch_view_cur(c);
	const struct bch_subvol_info *sv = v && v->subvol != BCH_SUBVOL_NONE
		? bch_subvol_get(c, v->subvol) : NULL;

	return sv ? sv->v.root_inum : BCH_ROOT_INO;
}

/* "inode 4100 (/etc/passwd)": the path from the inode's parent pointers, best effort. */
void fsck_inode_where(struct bch_fs *c, uint64_t inum, char *buf, size_t len)
{
	char path[512] = "", sv[32] = "";
	uint64_t cur = inum, root = fsck_view_root(c);
	const struct bch_view *v = bch_view_cur(c);
	unsigned depth = 0;

	if (v && v->subvol != BCH_SUBVOL_NONE && bch_fs_has_snapshots(c))
		snprintf(sv, sizeof(sv), "subvolume %u ", v->subvol);
	while (cur != root && depth++ < 64) {
		struct bch_inode i;
		struct bch_bkey *k;
		if (bch_inode_get(c, cur, &i) || !i.dir ||
		    bch_vlookup(c, BCH_BTREE_ID_dirents, POS(i.dir, i.dir_offset, 0), &k))
			break;
		const struct bch_dirent *d = bkey_val(k);
		if (k->type != BCH_BKEY_dirent || d->inum != cur || d->d_type == BCH_DT_SUBVOL) {
			free(k);
			break;
		}
		char tmp[sizeof(path) + BCH_NAME_MAX + 2];
		snprintf(tmp, sizeof(tmp), "/%.*s%s", d->name_len, d->name, path);
		size_t n = strlen(tmp) < sizeof(path) - 1 ? strlen(tmp) : sizeof(path) - 1;
		memcpy(path, tmp, n);
		path[n] = 0;
		free(k);
		cur = i.dir;
	}
	c->err_msg[0] = 0;	/* a lookup that missed is no error of the pass */
	if (cur == root)
		snprintf(buf, len, "%sinode %" PRIu64 " (%s)", sv, inum, path[0] ? path : "/");
	else
		snprintf(buf, len, "%sinode %" PRIu64, sv, inum);
}

int fsck_put_key(struct bch_fs *c, unsigned id, const struct bch_bkey *k)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (!r) {
		r = bch_trans_update(t, id, k);
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
	}
	return r;
}

int fsck_delete_key(struct bch_fs *c, unsigned id, struct bch_bpos p)
{
	struct bch_bkey k = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = p };
	return fsck_put_key(c, id, &k);
}

/* Replace extent old by new (NULL: delete it), with space accounting. */
int fsck_replace_extent(struct bch_fs *c, const struct bch_bkey *old, const struct bch_bkey *new,
			  bool account_new)
{
	struct bch_extent_update u = { 0 };
	struct btree_trans *t;
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = old->p };
	int r = bch_trans_init(c, &t);

	if (r)
		return r;
	/* the old key's accounting goes; the new one's comes (punch of exactly its range) */
	uint64_t done;
	r = bch_extents_punch(c, t, old->p.inode, bch_extent_start(old), old->p.offset, 0, &u, &done);
	if (!r && new)
		r = bch_extent_insert(t, new, account_new, &u);
	else if (!r)
		r = bch_trans_update(t, BCH_BTREE_ID_extents, &del);
	if (!r) {
		r = bch_trans_commit(t, 0);
		if (r)
			bch_extent_update_abort(c, &u);
		else
			bch_extent_update_apply(c, &u);
	}
	bch_trans_exit(t);
	bch_extent_update_exit(&u);
	return r;
}


/* A repair that adds or removes a subdirectory keeps its parent's nlink in step. */
int fsck_adjust_nlink(struct bch_fs *c, uint64_t inum, int delta)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return r;
	i.nlink += delta;
	return fsck_update_inode(c, inum, &i);
}

int fsck_update_inode(struct bch_fs *c, uint64_t inum, const struct bch_inode *i)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (!r) {
		r = bch_inode_update(t, inum, i);
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
	}
	return r;
}

void fsck_cursor_init(struct key_cursor *cur, struct bch_fs *c, unsigned id)
{
	memset(cur, 0, sizeof(*cur));
	cur->c = c;
	cur->id = id;
	cur->next = POS_MIN;
	cur->done = !c->roots->r[id].key;
	cur->filter = bch_btree_id_is_file(id) && bch_view_cur(c) && bch_fs_has_snapshots(c);
	cur->snap = bch_view_snap(c);
	/* streamed leaves need a parent to find them in, and nothing changing them */
	if (bch_leaf_stream_allowed(c) && !cur->filter && !cur->done &&
	    c->roots->r[id].level >= 1 && !(cur->ls = malloc(sizeof(*cur->ls))))
		abort();
}

void fsck_cursor_exit(struct key_cursor *cur)
{
	if (cur->lock)
		pthread_mutex_lock(cur->lock);
	bch_btree_unhold(cur->c, &cur->leaf);
	if (cur->lock)
		pthread_mutex_unlock(cur->lock);
	free(cur->ls);
	cur->ls = NULL;
	cur->stream = false;
	free(cur->key);
	cur->key = NULL;
	cur->key_cap = 0;
}

/* Room for a copy of k in cur->key. */
static int cursor_copy(struct key_cursor *cur, const struct bch_bkey *k)
{
	size_t bytes = bkey_bytes(k);

	if (bytes > cur->key_cap) {
		struct bch_bkey *n = realloc(cur->key, bytes * 2);
		if (!n)
			return -ENOMEM;
		cur->key = n;
		cur->key_cap = bytes * 2;
	}
	memcpy(cur->key, k, bytes);
	return 0;
}

static bool same_pos(struct bch_bpos a, struct bch_bpos b)
{
	return a.inode == b.inode && a.offset == b.offset;
}

/*
 * Filtered: the key cur->snap sees at the position of b's key cur->idx
 * into cur->key (*seen false: none, or a whiteout).  The position's keys
 * lie side by side, snapshots ascending; when they may go on in the next
 * leaf the answer is looked up instead (rare).
 */
static int cursor_pick(struct key_cursor *cur, struct btree *b, bool *seen)
{
	struct bch_bpos first = bch_btree_key_pos(b, cur->idx);
	unsigned j = cur->idx, best = b->nr;

	for (; j < b->nr && same_pos(bch_btree_key_pos(b, j), first); j++)
		if (bch_snap_is_ancestor(cur->c, bch_btree_key_pos(b, j).snapshot, cur->snap))
			best = j;
	cur->group_end = j;
	*seen = false;
	if (j == b->nr && !bpos_eq(b->max_key, POS_MAX) &&
	    b->max_key.inode == first.inode && b->max_key.offset == first.offset) {
		struct bch_bkey *k;
		int r = bch_vlookup(cur->c, cur->id, first, &k);
		if (r == -BCH_ERR_key_not_found) {
			cur->c->err_msg[0] = 0;
			return 0;
		}
		if (!r) {
			r = cursor_copy(cur, k);
			*seen = !r;
			free(k);
		}
		return r;
	}
	if (best == b->nr || bch_btree_key_header(b, best).type == BCH_BKEY_whiteout)
		return 0;
	*seen = true;

	struct bch_bkey_buf buf;
	return cursor_copy(cur, bch_btree_key(b, best, &buf));
}

/*
 * Read ahead (fsck -n) the leaf after b, as its parent lists them: a
 * cursor reads the leaves of its btree in order.
 */
static void prefetch_next(struct key_cursor *cur, const struct btree *b)
{
	struct bch_fs *c = cur->c;
	struct btree *parent;

	if (c->roots->r[cur->id].level < 1 || bpos_eq(b->max_key, POS_MAX))
		return;
	if (bch_btree_find_node(c, cur->id, 1, b->max_key, &parent)) {
		c->err_msg[0] = 0;	/* the read that needs it reports it */
		return;
	}
	unsigned i = bch_btree_node_find(parent, b->max_key);
	if (i + 1 < parent->nr)
		bch_prefetch_node(c, cur->id, 0, bch_btree_interior_key(parent, i + 1));
	bch_btree_node_put(c, parent);
}

static void cursor_lock(struct key_cursor *cur)
{
	if (cur->lock)
		pthread_mutex_lock(cur->lock);
}

static void cursor_unlock(struct key_cursor *cur)
{
	if (cur->lock)
		pthread_mutex_unlock(cur->lock);
}

static int stream_open(struct key_cursor *cur);

static int stream_open_locked(struct key_cursor *cur)
{
	cursor_lock(cur);
	int r = stream_open(cur);
	cursor_unlock(cur);
	return r;
}

/*
 * Streamed (cur->ls): open the leaf that holds cur->next, through its
 * parent (cached: lookups pass through it).  0 opened, 1 it does not stream
 * (hold it as before), negative: an error.
 */
static int stream_open(struct key_cursor *cur)
{
	struct bch_fs *c = cur->c;
	struct btree *parent;

	if (cur->next_after)
		cur->next = bpos_successor(cur->last);
	cur->next_after = false;
	int r = bch_btree_find_node(c, cur->id, 1, cur->next, &parent);
	if (r)
		return r;
	unsigned i = bch_btree_node_find(parent, cur->next);
	if (i >= parent->nr) {
		bch_btree_node_put(c, parent);
		return 1;	/* the ordinary way says what is wrong */
	}
	/* the read-ahead thread makes the first pass over the next leaf meanwhile */
	if (i + 1 < parent->nr)
		bch_prefetch_verify(c, cur->id, bch_btree_interior_key(parent, i + 1), false);
	r = bch_leaf_stream_open(c, cur->ls, cur->id, bch_btree_interior_key(parent, i), false, NULL, NULL);
	if (!r)
		cur->stream_max = bch_btree_key_pos(parent, i);
	bch_btree_node_put(c, parent);
	cur->stream = !r;
	return r;
}

/*
 * Streamed: the next key at or after cur->next in the open leaf (1 and
 * *k), or 0 at the leaf's end (the cursor then moves to the next leaf),
 * or negative.
 */
static int stream_next(struct key_cursor *cur, const struct bch_bkey **k)
{
	while ((*k = bch_leaf_stream_next(cur->ls)))
		if (bpos_cmp((*k)->p, cur->next) >= 0)
			return 1;
	cur->stream = false;
	if (cur->ls->err) {
		cursor_lock(cur);
		int r = bch_fs_err(cur->c, cur->ls->err, "%s btree: a leaf changed while being read",
				   bch_btree_id_name(cur->id));
		cursor_unlock(cur);
		return r;
	}
	if (bpos_eq(cur->stream_max, POS_MAX))
		cur->done = true;
	else
		cur->next = bpos_successor(cur->stream_max);
	cur->next_after = false;
	return 0;
}

const struct bch_bkey *fsck_cursor_peek(struct key_cursor *cur, int *err)
{
	if (cur->have)
		return cur->peeked;
	while (!cur->done) {
		if (cur->ls && !cur->leaf.b) {
			const struct bch_bkey *k = NULL;
			int r = cur->stream ? 0 : stream_open_locked(cur);
			if (!r)
				r = stream_next(cur, &k);
			if (r < 0) {
				*err = r;
				cur->done = true;
				break;
			}
			if (r == 1 && cur->stream) {
				cur->peeked = k;
				cur->have = true;
				return k;
			}
			if (!r)
				continue;	/* the leaf's end */
			/* 1: this leaf does not stream: held, as below */
		}
		cursor_lock(cur);	/* a held leaf: under the cache's lock (rare: leaves stream) */
		if (!bch_btree_hold_valid(&cur->leaf)) {
			struct btree *b;
			if (cur->next_after)
				cur->next = bpos_successor(cur->last);
			cur->next_after = false;
			int r = bch_btree_find_node(cur->c, cur->id, 0, cur->next, &b);
			if (r) {
				*err = r;
				cur->done = true;
				cursor_unlock(cur);
				break;
			}
			cur->idx = bch_btree_node_find(b, cur->next);
			bch_btree_hold(cur->c, &cur->leaf, b);
			if (cur->c->prefetch && !cur->ls)	/* streamed: nothing to parse ahead */
				prefetch_next(cur, b);
		}
		struct btree *b = cur->leaf.b;
		if (cur->idx >= b->nr) {
			if (bpos_eq(b->max_key, POS_MAX))
				cur->done = true;
			else
				cur->next = bpos_successor(b->max_key);
			cur->next_after = false;
			bch_btree_unhold(cur->c, &cur->leaf);
			cursor_unlock(cur);
			continue;
		}
		if (cur->filter) {
			bool seen;
			int r = cursor_pick(cur, b, &seen);
			if (r) {
				*err = r;
				cur->done = true;
				cursor_unlock(cur);
				break;
			}
			if (!seen) {
				/* nothing here for this snapshot: past the whole position */
				struct bch_bpos end = POS(bch_btree_key_pos(b, cur->idx).inode,
							  bch_btree_key_pos(b, cur->idx).offset, UINT32_MAX);
				cur->idx = cur->group_end;
				if (bpos_eq(end, POS_MAX))
					cur->done = true;
				else
					cur->next = bpos_successor(end);
				cur->next_after = false;
				if (cur->idx >= b->nr)
					bch_btree_unhold(cur->c, &cur->leaf);	/* the position may go on */
				cursor_unlock(cur);
				continue;
			}
		} else if (cur->c->read_only && !bch_btree_key_packed(b, cur->idx)) {
			/*
			 * nothing changes a node (no repair is made): the key in
			 * the held leaf stays as it is until the cursor moves on
			 * (a key held packed is copied whole)
			 */
			cur->peeked = bch_btree_key(b, cur->idx, NULL);
			cur->have = true;
			cursor_unlock(cur);
			return cur->peeked;
		} else {
			struct bch_bkey_buf buf;

			if (cursor_copy(cur, bch_btree_key(b, cur->idx, &buf))) {
				*err = -ENOMEM;
				cur->done = true;
				cursor_unlock(cur);
				break;
			}
		}
		cur->have = true;
		cur->peeked = cur->key;
		cursor_unlock(cur);
		return cur->key;
	}
	if (cur->leaf.b || cur->leaf.bytes) {	/* held (a cursor at its end is peeked once per inode: no lock then) */
		cursor_lock(cur);
		bch_btree_unhold(cur->c, &cur->leaf);
		cursor_unlock(cur);
	}
	return NULL;
}

void fsck_cursor_pop(struct key_cursor *cur)
{
	if (!cur->have)
		return;
	cur->have = false;
	cur->nr_popped++;
	struct bch_bpos end = cur->peeked->p;
	if (cur->filter) {
		cur->idx = cur->group_end;
		end.snapshot = UINT32_MAX;
		if (cur->leaf.b && cur->idx >= cur->leaf.b->nr)
			bch_btree_unhold(cur->c, &cur->leaf);	/* looked up past the leaf */
	} else {
		cur->idx++;
	}
	if (bpos_eq(end, POS_MAX)) {
		cur->done = true;
	} else {
		/* the position after it: needed only when the leaf is looked up again */
		cur->last = end;
		cur->next_after = true;
	}
}

/*
 * Visit every key of btree id in order: fn gets a copy and may change the
 * tree (no iterator is open while it runs).
 */
int fsck_for_each_key(struct fstate *s, unsigned id, key_fn fn)
{
	struct key_cursor cur;
	const struct bch_bkey *k;
	int err = 0, r = 0;

	fsck_lock(s);	/* init asks the cache whether leaves may stream */
	fsck_cursor_init(&cur, s->c, id);
	fsck_unlock(s);
	cur.lock = fsck_par_cache(s);
	while (!r && !s->ctx->cancelled && (k = fsck_cursor_peek(&cur, &err))) {
		if (!(cur.nr_popped & 255) && s->ctx->tick && s->max_inum > BCH_FIRST_INO) {
			/* every 256 keys; keys are ordered by inode number: that is how far this pass is */
			uint64_t at = id == BCH_BTREE_ID_inodes ? k->p.offset : k->p.inode;
			at = at < BCH_FIRST_INO ? 0 : at - BCH_FIRST_INO;
			s->ctx->tick(s->ctx, at >= s->max_inum - BCH_FIRST_INO ? 100
					     : (unsigned)(at * 100 / (s->max_inum - BCH_FIRST_INO)));
		}
		r = fn(s, k);
		fsck_cursor_pop(&cur);
	}
	fsck_cursor_exit(&cur);
	return err ? err : r;
}
