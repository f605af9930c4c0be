// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_inotable_test.c - the inode table fsck's file passes share
 * (fsck_files.c): numbers in the dense range and outside it, entries that
 * stay where they are across fsck_ino_reserve(), iteration order, and a
 * table sized for nothing that must still grow (reserve once looped forever
 * when asked for more than the table held), the packed range (two or four
 * bits a number) with what its palette cannot hold in the hash table, and the
 * range kept whole once too much would be there.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "fsck_files.h"

static unsigned ino_pack_test(const struct ino_info *ii)
{
	return (unsigned)ii->counts << 8 | ii->bits;
}

/* Add inum with names counted n. */
static void add_names(struct ino_table *t, uint64_t inum, uint32_t n)
{
	struct ino_info ii;

	fsck_ino_get_new(t, inum, &ii);
	fsck_ino_set_names(t, inum, &ii, n);
	fsck_ino_put(t, inum, &ii);
}

/* Names counted of inum (which must be there). */
static uint32_t names_of(struct ino_table *t, uint64_t inum)
{
	struct ino_info ii;

	cr_assert(fsck_ino_get(t, inum, &ii), "inode %llu is there", (unsigned long long)inum);
	return fsck_ino_names(t, inum, &ii);
}

/* Every entry fsck_ino_next() returns, in order; returns how many. */
static size_t walk(struct ino_table *t, uint64_t *out, size_t max)
{
	size_t pos = 0, n = 0;
	uint64_t inum;

	for (struct ino_info ii, again; fsck_ino_next(t, &pos, &inum, &ii);) {
		cr_assert_lt(n, max);
		cr_assert(fsck_ino_get(t, inum, &again));
		cr_assert_eq(ino_pack_test(&again), ino_pack_test(&ii));
		out[n++] = inum;
	}
	return n;
}

Test(fsck_inotable, dense_and_outside)
{
	struct ino_table t;

	fsck_ino_init(&t, 100, BCH_ROOT_INO + 99);
	cr_assert_eq(t.dense_len, 100);
	/* numbers outside [root, highest]: below the root and far above */
	uint64_t odd[] = { 1, 4095, BCH_ROOT_INO + 100, 1ULL << 40, UINT64_MAX - 1 };
	for (unsigned i = 0; i < 100; i += 3)
		add_names(&t, BCH_ROOT_INO + i, i + 1);
	for (unsigned i = 0; i < 5; i++)
		add_names(&t, odd[i], 1000 + i);
	cr_assert_eq(t.nr, 34 + 5);
	/* the range packed: names 1, 4, 7, 10, 13 and "15 or more" (in the side entry) */
	cr_assert_eq(t.hash.nr, 5);
	cr_assert_eq(t.nr_palette, 6);

	for (unsigned i = 0; i < 100; i++) {
		struct ino_info ii;
		if (i % 3)
			cr_assert(!fsck_ino_get(&t, BCH_ROOT_INO + i, &ii), "inode %u was never added", i);
		else
			cr_assert_eq(names_of(&t, BCH_ROOT_INO + i), i + 1);
	}
	for (unsigned i = 0; i < 5; i++)
		cr_assert_eq(names_of(&t, odd[i]), 1000 + i);
	/* putting back what is there counts nothing */
	struct ino_info ii;
	fsck_ino_get_new(&t, BCH_ROOT_INO, &ii);
	cr_assert_eq(fsck_ino_names(&t, BCH_ROOT_INO, &ii), 1);
	fsck_ino_put(&t, BCH_ROOT_INO, &ii);
	cr_assert_eq(t.nr, 39);

	/* the dense range first, in number order, then the others */
	uint64_t seen[64];
	size_t n = walk(&t, seen, 64);
	cr_assert_eq(n, 39);
	for (size_t i = 0; i < 34; i++)
		cr_assert_eq(seen[i], BCH_ROOT_INO + 3 * i);
	for (size_t i = 34; i < 39; i++)
		cr_assert_geq(names_of(&t, seen[i]), 1000);
	fsck_ino_exit(&t);
}

Test(fsck_inotable, sparse_goes_to_hash)
{
	struct ino_table t;

	/* 10 inodes whose numbers spread over a million: no array */
	fsck_ino_init(&t, 10, BCH_ROOT_INO + 1000000);
	cr_assert_eq(t.dense_len, 0);
	struct ino_info ii;
	for (unsigned i = 0; i < 10; i++) {
		fsck_ino_get_new(&t, BCH_ROOT_INO + i * 100000, &ii);
		ino_set_mode(&ii, S_IFREG);
		fsck_ino_put(&t, BCH_ROOT_INO + i * 100000, &ii);
	}
	for (unsigned i = 0; i < 10; i++) {
		cr_assert(fsck_ino_get(&t, BCH_ROOT_INO + i * 100000, &ii));
		cr_assert(S_ISREG(ino_mode(&ii)));
	}
	cr_assert(!fsck_ino_get(&t, BCH_ROOT_INO + 1, &ii));
	fsck_ino_exit(&t);
}

Test(fsck_inotable, reserve_keeps_entries_in_place, .timeout = 10)
{
	struct ino_table t;

	/* sized for nothing: everything outside the (empty) array */
	fsck_ino_init(&t, 0, 0);
	add_names(&t, 12345, 7);
	fsck_ino_extra(&t, 12345, true)->subdirs = 9;
	/* far more than the table holds: must grow, not loop */
	fsck_ino_reserve(&t, 100000);
	cr_assert_eq(names_of(&t, 12345), 7);
	struct ino_extra *x = fsck_ino_extra(&t, 12345, false);
	cr_assert_eq(x->subdirs, 9);
	/* the reserved room: adding that many moves nothing */
	for (uint64_t i = 1; i < 100000; i++) {
		add_names(&t, 1000000 + i, 1);
		fsck_ino_extra(&t, 1000000 + i, true)->subdirs = i;
	}
	cr_assert_eq(names_of(&t, 12345), 7);
	cr_assert_eq(fsck_ino_extra(&t, 12345, false), x);
	cr_assert_eq(fsck_ino_extra(&t, 1000000 + 777, false)->subdirs, 777);
	cr_assert_eq(t.nr, 100000);
	fsck_ino_exit(&t);
}

/*
 * The directories' side table is reserved at the size asked (pass 3
 * counted them), not the next power of two: 1,018 entries of 48 bytes in
 * 1,408 slots (66 KB), where 2,048 slots took 96 KB.  Every entry is found
 * where it was put (probes wrap from the last slot to the first), nothing
 * moves while the reservation lasts, and past it the table still grows.
 */
Test(fsck_inotable, side_table_fitted_to_what_is_reserved)
{
	struct ino_table t;
	const unsigned n = 1018;

	fsck_ino_init(&t, 0, 0);
	fsck_map_fit(&t.extra, n);
	cr_assert_leq(t.extra.cap, (n * 4 + 2) / 3 + 63, "%zu slots for %u entries", t.extra.cap, n);
	cr_assert_geq(t.extra.cap * 3, n * 4, "%zu slots: more than 3/4 full", t.extra.cap);
	size_t cap = t.extra.cap;
	struct ino_extra *first = fsck_ino_extra(&t, 4096, true);
	first->subdirs = 1;
	for (unsigned i = 1; i < n; i++)
		fsck_ino_extra(&t, 4096 + (uint64_t)i * 7919, true)->subdirs = i + 1;
	cr_assert_eq(t.extra.cap, cap, "the reserved table grew");
	cr_assert_eq(fsck_ino_extra(&t, 4096, false), first, "an entry moved");
	for (unsigned i = 0; i < n; i++) {
		struct ino_extra *x = fsck_ino_extra(&t, 4096 + (uint64_t)i * 7919, false);
		cr_assert(x && x->subdirs == i + 1, "entry %u not found", i);
	}
	cr_assert_null(fsck_ino_extra(&t, 4095, false));
	/* past the reservation: it grows, and keeps them all */
	for (unsigned i = 0; i < 2 * n; i++)
		fsck_ino_extra(&t, 1ULL << 40 | i, true)->subdirs = i + 7;
	cr_assert_gt(t.extra.cap, cap);
	for (unsigned i = 0; i < n; i++)
		cr_assert_eq(fsck_ino_extra(&t, 4096 + (uint64_t)i * 7919, false)->subdirs, i + 1);
	for (unsigned i = 0; i < 2 * n; i++)
		cr_assert_eq(fsck_ino_extra(&t, 1ULL << 40 | i, false)->subdirs, i + 7);
	fsck_ino_exit(&t);
}

Test(fsck_inotable, inode_zero_and_side_entries)
{
	struct ino_table t;

	/* 0 is the hash table's empty key: a damaged dirent may still name it */
	fsck_ino_init(&t, 10, BCH_ROOT_INO + 9);
	struct ino_info ii;
	cr_assert(!fsck_ino_get(&t, 0, &ii));
	add_names(&t, 0, 3);
	add_names(&t, BCH_ROOT_INO, 1);
	cr_assert_eq(names_of(&t, 0), 3);
	cr_assert_null(fsck_ino_extra(&t, 0, true), "no side entry for inode 0");
	uint64_t seen[4];
	cr_assert_eq(walk(&t, seen, 4), 2);
	cr_assert_eq(seen[0], BCH_ROOT_INO);
	cr_assert_eq(seen[1], 0);
	/* side entries only for what asks */
	cr_assert_null(fsck_ino_extra(&t, BCH_ROOT_INO, false));
	fsck_ino_extra(&t, BCH_ROOT_INO, true)->parent = 42;
	cr_assert_eq(fsck_ino_extra(&t, BCH_ROOT_INO, false)->parent, 42);
	cr_assert_eq(t.extra.nr, 1);
	fsck_ino_exit(&t);
}

Test(fsck_inotable, parent_pointer_fingerprint)
{
	/* neighbouring slots and directories must not collide (a fixed sample) */
	uint16_t prev = fsck_bp_fp(BCH_ROOT_INO, 0);
	unsigned same = 0;

	for (uint64_t dir = BCH_ROOT_INO; dir < BCH_ROOT_INO + 64; dir++)
		for (uint64_t slot = 0; slot < 1024; slot++) {
			uint16_t fp = fsck_bp_fp(dir, slot);
			same += fp == prev;
			prev = fp;
		}
	/* 65536 pairs of 16-bit values: about one equal pair by chance */
	cr_assert_lt(same, 6, "%u neighbouring pointers share a fingerprint", same);
	cr_assert_neq(fsck_bp_fp(4096, 1), fsck_bp_fp(4097, 1));
	cr_assert_neq(fsck_bp_fp(4096, 1), fsck_bp_fp(4096, 2));
}

Test(fsck_inotable, fingerprints_of_hard_linked_files)
{
	struct ino_table t;
	uint64_t far = 1ULL << 40, last = BCH_ROOT_INO + 3 * INO_FP_CHUNK - 1;

	fsck_ino_init(&t, 3 * INO_FP_CHUNK, last);
	/* a tree without hard links makes no fingerprint storage at all */
	cr_assert_eq(fsck_ino_fp(&t, BCH_ROOT_INO + 5), 0);
	cr_assert_null(t.fp_chunks);
	add_names(&t, BCH_ROOT_INO + 5, 0);
	fsck_ino_set_fp(&t, BCH_ROOT_INO + 5, 0xbeef);
	cr_assert_not_null(t.fp_chunks);
	/* only the chunk that holds it */
	cr_assert_not_null(t.fp_chunks[0]);
	cr_assert_null(t.fp_chunks[1]);
	cr_assert_null(t.fp_chunks[2]);
	add_names(&t, last, 0);
	fsck_ino_set_fp(&t, last, 0x1234);
	cr_assert_null(t.fp_chunks[1]);
	cr_assert_not_null(t.fp_chunks[2]);
	/* numbers outside the dense range keep theirs in their hash entry, 0 too */
	add_names(&t, far, 0);
	fsck_ino_set_fp(&t, far, 0x7777);
	add_names(&t, 0, 0);
	fsck_ino_set_fp(&t, 0, 0x4242);
	cr_assert_eq(fsck_ino_fp(&t, BCH_ROOT_INO + 5), 0xbeef);
	cr_assert_eq(fsck_ino_fp(&t, BCH_ROOT_INO + 6), 0);
	cr_assert_eq(fsck_ino_fp(&t, last), 0x1234);
	cr_assert_eq(fsck_ino_fp(&t, far), 0x7777);
	cr_assert_eq(fsck_ino_fp(&t, 0), 0x4242);
	cr_assert_eq(fsck_ino_fp(&t, far + 1), 0, "an unknown number has none");
	fsck_ino_exit(&t);
}

Test(fsck_inotable, parent_pointer_sums)
{
	/* a sum over pointers changes when any one of them is another name */
	uint64_t keys = 0, names = 0;

	for (uint64_t i = 0; i < 1000; i++) {
		keys += fsck_bp_hash(BCH_ROOT_INO + i, BCH_ROOT_INO + i / 10, i * 7919);
		names += fsck_bp_hash(BCH_ROOT_INO + i, BCH_ROOT_INO + i / 10, i * 7919);
	}
	cr_assert_eq(keys, names);
	uint64_t wrong = names - fsck_bp_hash(BCH_ROOT_INO + 5, BCH_ROOT_INO, 5 * 7919) +
			 fsck_bp_hash(BCH_ROOT_INO + 5, BCH_ROOT_INO, 6 * 7919);
	cr_assert_neq(keys, wrong);
	/* the inode, the directory and the slot each count */
	cr_assert_neq(fsck_bp_hash(4100, 4096, 1), fsck_bp_hash(4101, 4096, 1));
	cr_assert_neq(fsck_bp_hash(4100, 4096, 1), fsck_bp_hash(4100, 4097, 1));
	cr_assert_neq(fsck_bp_hash(4100, 4096, 1), fsck_bp_hash(4100, 4096, 2));
	cr_assert_neq(fsck_bp_hash(1, 2, 3), fsck_bp_hash(3, 2, 1));
}

Test(fsck_inotable, counts_past_four_bits)
{
	struct ino_table t;

	/* names and link counts of 15 and more live in the side entry */
	fsck_ino_init(&t, 10, BCH_ROOT_INO + 9);
	struct ino_info e, *ii = &e;
	fsck_ino_get_new(&t, BCH_ROOT_INO + 1, ii);
	for (uint32_t n = 1; n <= 70000; n++)
		fsck_ino_set_names(&t, BCH_ROOT_INO + 1, ii, fsck_ino_names(&t, BCH_ROOT_INO + 1, ii) + 1);
	cr_assert_eq(fsck_ino_names(&t, BCH_ROOT_INO + 1, ii), 70000);
	cr_assert_eq(ii->counts & 0x0f, INO_SAT);
	fsck_ino_set_nlink(&t, BCH_ROOT_INO + 1, ii, 14);
	cr_assert_eq(ii->counts >> 4, 14);
	cr_assert_eq(fsck_ino_nlink(&t, BCH_ROOT_INO + 1, ii), 14);
	cr_assert_eq(fsck_ino_names(&t, BCH_ROOT_INO + 1, ii), 70000, "names kept beside nlink");
	fsck_ino_set_nlink(&t, BCH_ROOT_INO + 1, ii, 15);
	cr_assert_eq(fsck_ino_nlink(&t, BCH_ROOT_INO + 1, ii), 15);
	fsck_ino_set_nlink(&t, BCH_ROOT_INO + 1, ii, 1U << 31);
	cr_assert_eq(fsck_ino_nlink(&t, BCH_ROOT_INO + 1, ii), 1U << 31);
	/* back under: the entry itself again */
	fsck_ino_set_nlink(&t, BCH_ROOT_INO + 1, ii, 3);
	cr_assert_eq(fsck_ino_nlink(&t, BCH_ROOT_INO + 1, ii), 3);
	fsck_ino_set_names(&t, BCH_ROOT_INO + 1, ii, 0);
	cr_assert(!ino_named(ii));
	cr_assert_eq(fsck_ino_nlink(&t, BCH_ROOT_INO + 1, ii), 3);
	cr_assert_eq(sizeof(struct ino_info), 2);
	/* the mode keeps its type beside the flags */
	ino_set_mode(ii, S_IFDIR | 0755);
	cr_assert(S_ISDIR(ino_mode(ii)));
	cr_assert(ino_has_key(ii));
	cr_assert(ii->bits & INO_PRESENT);
	ii->bits |= INO_HAS_BP | INO_BP_NAMED;
	ino_set_mode(ii, S_IFLNK | 0777);
	cr_assert(S_ISLNK(ino_mode(ii)));
	cr_assert_eq(ii->bits & (INO_HAS_BP | INO_BP_NAMED | INO_PRESENT),
		     INO_HAS_BP | INO_BP_NAMED | INO_PRESENT);
	/* a directory's walk state lives in its side entry */
	cr_assert_eq(fsck_ino_state(&t, BCH_ROOT_INO + 2), 0);
	fsck_ino_set_state(&t, BCH_ROOT_INO + 2, 2);
	cr_assert_eq(fsck_ino_state(&t, BCH_ROOT_INO + 2), 2);
	fsck_ino_set_state(&t, BCH_ROOT_INO + 2, 1);
	cr_assert_eq(fsck_ino_state(&t, BCH_ROOT_INO + 2), 1);
	fsck_ino_exit(&t);
}

/* A regular file with names and nlink counted as given. */
static void put_file(struct ino_table *t, uint64_t inum, uint32_t names, uint32_t nlink, uint32_t mode)
{
	struct ino_info ii;

	fsck_ino_get_new(t, inum, &ii);
	ino_set_mode(&ii, mode);
	ii.bits |= INO_LOADED;
	fsck_ino_set_names(t, inum, &ii, names);
	fsck_ino_set_nlink(t, inum, &ii, nlink);
	fsck_ino_put(t, inum, &ii);
}

static void check_file(struct ino_table *t, uint64_t inum, uint32_t names, uint32_t nlink, uint32_t mode)
{
	struct ino_info ii;

	cr_assert(fsck_ino_get(t, inum, &ii), "inode %llu", (unsigned long long)inum);
	cr_assert_eq(fsck_ino_names(t, inum, &ii), names, "inode %llu", (unsigned long long)inum);
	cr_assert_eq(fsck_ino_nlink(t, inum, &ii), nlink, "inode %llu", (unsigned long long)inum);
	cr_assert_eq(ino_mode(&ii), mode & S_IFMT);
	cr_assert_eq(ii.bits & (INO_PRESENT | INO_LOADED), INO_PRESENT | INO_LOADED);
}

Test(fsck_inotable, packed_with_the_rest_in_the_hash)
{
	struct ino_table t;
	const size_t n = 4000;

	fsck_ino_init(&t, n, BCH_ROOT_INO + n - 1);
	cr_assert_not_null(t.packed);
	cr_assert_null(t.wide);
	/* files of 15 values fill the palette; directories never enter it */
	for (size_t i = 0; i < n; i++) {
		if (i % 100 == 7)
			put_file(&t, BCH_ROOT_INO + i, 1, 2 + i % 13, S_IFDIR);
		else
			put_file(&t, BCH_ROOT_INO + i, i % 3, 1 + i % 5, S_IFREG);
	}
	cr_assert_eq(t.nr_palette, 15);
	cr_assert_eq(t.nr_hashed_dense, n / 100, "only the directories are in the hash");
	/* a 16th value: the hash too, and it stays there when set back */
	put_file(&t, BCH_ROOT_INO + 1, 2, 6, S_IFREG);
	cr_assert_eq(t.nr_hashed_dense, n / 100 + 1);
	put_file(&t, BCH_ROOT_INO + 1, 1, 2, S_IFREG);
	cr_assert_eq(t.nr_hashed_dense, n / 100 + 1);
	put_file(&t, BCH_ROOT_INO + n + 5, 1, 1, S_IFLNK);	/* outside the range */
	cr_assert_eq(t.nr, n + 1);
	for (size_t i = 0; i < n; i++) {
		if (i % 100 == 7)
			check_file(&t, BCH_ROOT_INO + i, 1, 2 + i % 13, S_IFDIR);
		else
			check_file(&t, BCH_ROOT_INO + i, i % 3, 1 + i % 5, S_IFREG);
	}
	check_file(&t, BCH_ROOT_INO + n + 5, 1, 1, S_IFLNK);
	/* in number order, hashed ones in their place, then the one outside */
	uint64_t *seen = calloc(n + 1, sizeof(*seen));
	cr_assert_eq(walk(&t, seen, n + 1), n + 1);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(seen[i], BCH_ROOT_INO + i);
	cr_assert_eq(seen[n], BCH_ROOT_INO + n + 5);
	free(seen);
	fsck_ino_exit(&t);
}

Test(fsck_inotable, too_many_outside_the_palette_widens)
{
	struct ino_table t;
	const size_t n = 8000;

	fsck_ino_init(&t, n, BCH_ROOT_INO + n - 1);
	put_file(&t, 1ULL << 40, 3, 3, S_IFREG);	/* outside: stays in the hash */
	/* 4 x 8 values: half of them cannot be packed */
	for (size_t i = 0; i < n; i++)
		put_file(&t, BCH_ROOT_INO + i, i % 4, 1 + i / 4 % 8, i % 2 ? S_IFLNK : S_IFREG);
	cr_assert_not_null(t.wide, "more than 1/%u of the range hashed: kept whole", INO_WIDE_RATIO);
	cr_assert_null(t.packed);
	cr_assert_eq(t.nr_hashed_dense, 0);
	cr_assert_eq(t.hash.nr, 1);
	cr_assert_eq(t.nr, n + 1);
	for (size_t i = 0; i < n; i++)
		check_file(&t, BCH_ROOT_INO + i, i % 4, 1 + i / 4 % 8, i % 2 ? S_IFLNK : S_IFREG);
	check_file(&t, 1ULL << 40, 3, 3, S_IFREG);
	/* changes after widening are kept too */
	put_file(&t, BCH_ROOT_INO + 3, 9, 9, S_IFREG);
	check_file(&t, BCH_ROOT_INO + 3, 9, 9, S_IFREG);
	cr_assert_eq(t.nr, n + 1);
	uint64_t *seen = calloc(n + 1, sizeof(*seen));
	cr_assert_eq(walk(&t, seen, n + 1), n + 1);
	cr_assert_eq(seen[n], 1ULL << 40);
	free(seen);
	fsck_ino_exit(&t);
}

Test(fsck_inotable, two_bits_until_a_fourth_value)
{
	struct ino_table t;
	const size_t n = 1001;

	fsck_ino_init(&t, n, BCH_ROOT_INO + n - 1);
	/* files of one link: loaded, then named; and a symlink */
	for (size_t i = 0; i < n; i++)
		put_file(&t, BCH_ROOT_INO + i, 0, 1, S_IFREG);
	for (size_t i = 0; i < n; i += 2)
		put_file(&t, BCH_ROOT_INO + i, 1, 1, S_IFREG);
	put_file(&t, BCH_ROOT_INO + 5, 1, 1, S_IFLNK);
	cr_assert_eq(t.code_bits, 2, "three values: two bits a number");
	cr_assert_eq(t.nr_palette, 3);
	/* a fourth: every code moves to four bits, none is lost */
	put_file(&t, BCH_ROOT_INO + 7, 2, 2, S_IFREG);
	cr_assert_eq(t.code_bits, 4);
	cr_assert_eq(t.nr_hashed_dense, 0);
	for (size_t i = 0; i < n; i++) {
		if (i == 5)
			check_file(&t, BCH_ROOT_INO + i, 1, 1, S_IFLNK);
		else if (i == 7)
			check_file(&t, BCH_ROOT_INO + i, 2, 2, S_IFREG);
		else
			check_file(&t, BCH_ROOT_INO + i, i % 2 ? 0 : 1, 1, S_IFREG);
	}
	cr_assert_eq(t.nr, n);
	fsck_ino_exit(&t);
}
