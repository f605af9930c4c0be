// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_inotable_test.c - the inode table fsck's file passes share
 * (fsck_files.c): numbers in the dense range and outside it, entries that
 * stay where they are across fsck_ino_reserve(), iteration order, and a
 * table sized for nothing that must still grow (reserve once looped forever
 * when asked for more than the table held).
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "fsck_files.h"

/* Every entry fsck_ino_next() returns, in order; returns how many. */
static size_t walk(struct ino_table *t, uint64_t *out, size_t max)
{
	size_t pos = 0, n = 0;

	for (struct ino_info *ii; (ii = fsck_ino_next(t, &pos));) {
		cr_assert_lt(n, max);
		out[n++] = ii->inum;
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
		fsck_ino_find(&t, BCH_ROOT_INO + i, true)->names = i + 1;
	for (unsigned i = 0; i < 5; i++)
		fsck_ino_find(&t, odd[i], true)->names = 1000 + i;
	cr_assert_eq(t.nr, 34 + 5);
	cr_assert_eq(t.hash_nr, 5);

	for (unsigned i = 0; i < 100; i++) {
		struct ino_info *ii = fsck_ino_find(&t, BCH_ROOT_INO + i, false);
		if (i % 3) {
			cr_assert_null(ii, "inode %u was never added", i);
		} else {
			cr_assert_not_null(ii);
			cr_assert_eq(ii->inum, BCH_ROOT_INO + i);
			cr_assert_eq(ii->names, i + 1);
		}
	}
	for (unsigned i = 0; i < 5; i++) {
		struct ino_info *ii = fsck_ino_find(&t, odd[i], false);
		cr_assert_not_null(ii, "inode %llu", (unsigned long long)odd[i]);
		cr_assert_eq(ii->names, 1000 + i);
	}
	/* adding what is there finds it, counts nothing */
	cr_assert_eq(fsck_ino_find(&t, BCH_ROOT_INO, true)->names, 1);
	cr_assert_eq(t.nr, 39);

	/* the dense range first, in number order, then the others */
	uint64_t seen[64];
	size_t n = walk(&t, seen, 64);
	cr_assert_eq(n, 39);
	for (size_t i = 0; i < 34; i++)
		cr_assert_eq(seen[i], BCH_ROOT_INO + 3 * i);
	for (size_t i = 34; i < 39; i++)
		cr_assert_geq(fsck_ino_find(&t, seen[i], false)->names, 1000);
	fsck_ino_exit(&t);
}

Test(fsck_inotable, sparse_goes_to_hash)
{
	struct ino_table t;

	/* 10 inodes whose numbers spread over a million: no array */
	fsck_ino_init(&t, 10, BCH_ROOT_INO + 1000000);
	cr_assert_eq(t.dense_len, 0);
	for (unsigned i = 0; i < 10; i++)
		fsck_ino_find(&t, BCH_ROOT_INO + i * 100000, true)->mode = 0100644;
	for (unsigned i = 0; i < 10; i++)
		cr_assert_not_null(fsck_ino_find(&t, BCH_ROOT_INO + i * 100000, false));
	cr_assert_null(fsck_ino_find(&t, BCH_ROOT_INO + 1, false));
	fsck_ino_exit(&t);
}

Test(fsck_inotable, reserve_keeps_entries_in_place, .timeout = 10)
{
	struct ino_table t;

	/* sized for nothing: everything outside the (empty) array */
	fsck_ino_init(&t, 0, 0);
	struct ino_info *first = fsck_ino_find(&t, 12345, true);
	first->subdirs = 7;
	/* far more than the table holds: must grow, not loop */
	fsck_ino_reserve(&t, 100000);
	first = fsck_ino_find(&t, 12345, false);
	cr_assert_not_null(first);
	cr_assert_eq(first->subdirs, 7);
	/* the reserved room: adding that many moves nothing */
	for (uint64_t i = 1; i < 100000; i++)
		fsck_ino_find(&t, 1000000 + i, true);
	cr_assert_eq(fsck_ino_find(&t, 12345, false), first);
	cr_assert_eq(t.nr, 100000);
	fsck_ino_exit(&t);
}
