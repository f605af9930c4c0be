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
	uint64_t inum;

	for (struct ino_info *ii; (ii = fsck_ino_next(t, &pos, &inum));) {
		cr_assert_lt(n, max);
		cr_assert_eq(fsck_ino_find(t, inum, false), ii);
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
		fsck_ino_find(&t, BCH_ROOT_INO + i, true)->names = i + 1;
	for (unsigned i = 0; i < 5; i++)
		fsck_ino_set_names(&t, odd[i], fsck_ino_find(&t, odd[i], true), 1000 + i);
	cr_assert_eq(t.nr, 34 + 5);
	cr_assert_eq(t.hash.nr, 5);

	for (unsigned i = 0; i < 100; i++) {
		struct ino_info *ii = fsck_ino_find(&t, BCH_ROOT_INO + i, false);
		if (i % 3) {
			cr_assert_null(ii, "inode %u was never added", i);
		} else {
			cr_assert_not_null(ii);
			cr_assert_eq(ii->names, i + 1);
		}
	}
	for (unsigned i = 0; i < 5; i++) {
		struct ino_info *ii = fsck_ino_find(&t, odd[i], false);
		cr_assert_not_null(ii, "inode %llu", (unsigned long long)odd[i]);
		cr_assert_eq(fsck_ino_names(&t, odd[i], ii), 1000 + i);
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
		cr_assert_geq(fsck_ino_names(&t, seen[i], fsck_ino_find(&t, seen[i], false)), 1000);
	fsck_ino_exit(&t);
}

Test(fsck_inotable, sparse_goes_to_hash)
{
	struct ino_table t;

	/* 10 inodes whose numbers spread over a million: no array */
	fsck_ino_init(&t, 10, BCH_ROOT_INO + 1000000);
	cr_assert_eq(t.dense_len, 0);
	for (unsigned i = 0; i < 10; i++)
		fsck_ino_find(&t, BCH_ROOT_INO + i * 100000, true)->type = S_IFREG >> 12;
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
	first->names = 7;
	fsck_ino_extra(&t, 12345, true)->subdirs = 9;
	/* far more than the table holds: must grow, not loop */
	fsck_ino_reserve(&t, 100000);
	first = fsck_ino_find(&t, 12345, false);
	cr_assert_not_null(first);
	cr_assert_eq(first->names, 7);
	struct ino_extra *x = fsck_ino_extra(&t, 12345, false);
	cr_assert_eq(x->subdirs, 9);
	/* the reserved room: adding that many moves nothing */
	for (uint64_t i = 1; i < 100000; i++) {
		fsck_ino_find(&t, 1000000 + i, true);
		fsck_ino_extra(&t, 1000000 + i, true)->subdirs = i;
	}
	cr_assert_eq(fsck_ino_find(&t, 12345, false), first);
	cr_assert_eq(fsck_ino_extra(&t, 12345, false), x);
	cr_assert_eq(fsck_ino_extra(&t, 1000000 + 777, false)->subdirs, 777);
	cr_assert_eq(t.nr, 100000);
	fsck_ino_exit(&t);
}

Test(fsck_inotable, inode_zero_and_side_entries)
{
	struct ino_table t;

	/* 0 is the hash table's empty key: a damaged dirent may still name it */
	fsck_ino_init(&t, 10, BCH_ROOT_INO + 9);
	cr_assert_null(fsck_ino_find(&t, 0, false));
	fsck_ino_find(&t, 0, true)->names = 3;
	fsck_ino_find(&t, BCH_ROOT_INO, true)->names = 1;
	cr_assert_eq(fsck_ino_find(&t, 0, false)->names, 3);
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
	uint32_t prev = fsck_bp_fp(BCH_ROOT_INO, 0);
	unsigned same = 0;

	for (uint64_t dir = BCH_ROOT_INO; dir < BCH_ROOT_INO + 64; dir++)
		for (uint64_t slot = 0; slot < 1024; slot++) {
			uint32_t fp = fsck_bp_fp(dir, slot);
			same += fp == prev;
			prev = fp;
		}
	cr_assert_lt(same, 2, "%u neighbouring pointers share a fingerprint", same);
	cr_assert_neq(fsck_bp_fp(4096, 1), fsck_bp_fp(4097, 1));
	cr_assert_neq(fsck_bp_fp(4096, 1), fsck_bp_fp(4096, 2));
}

Test(fsck_inotable, counts_past_a_byte)
{
	struct ino_table t;

	/* names and link counts of 255 and more live in the side entry */
	fsck_ino_init(&t, 10, BCH_ROOT_INO + 9);
	struct ino_info *ii = fsck_ino_find(&t, BCH_ROOT_INO + 1, true);
	for (uint32_t n = 1; n <= 70000; n++)
		fsck_ino_set_names(&t, BCH_ROOT_INO + 1, ii, fsck_ino_names(&t, BCH_ROOT_INO + 1, ii) + 1);
	cr_assert_eq(fsck_ino_names(&t, BCH_ROOT_INO + 1, ii), 70000);
	cr_assert_eq(ii->names, INO_SAT);
	fsck_ino_set_nlink(&t, BCH_ROOT_INO + 1, ii, 254);
	cr_assert_eq(ii->nlink, 254);
	cr_assert_eq(fsck_ino_nlink(&t, BCH_ROOT_INO + 1, ii), 254);
	fsck_ino_set_nlink(&t, BCH_ROOT_INO + 1, ii, 255);
	cr_assert_eq(fsck_ino_nlink(&t, BCH_ROOT_INO + 1, ii), 255);
	fsck_ino_set_nlink(&t, BCH_ROOT_INO + 1, ii, 1U << 31);
	cr_assert_eq(fsck_ino_nlink(&t, BCH_ROOT_INO + 1, ii), 1U << 31);
	/* back under: the entry itself again */
	fsck_ino_set_nlink(&t, BCH_ROOT_INO + 1, ii, 3);
	cr_assert_eq(fsck_ino_nlink(&t, BCH_ROOT_INO + 1, ii), 3);
	cr_assert_eq(sizeof(struct ino_info), 8);
	/* the mode keeps its type; state and flags share a byte */
	ino_set_mode(ii, S_IFDIR | 0755);
	cr_assert(S_ISDIR(ino_mode(ii)));
	ino_set_state(ii, 2);
	cr_assert_eq(ino_state(ii), 2);
	cr_assert(ii->flags & INO_PRESENT);
	ino_set_state(ii, 1);
	cr_assert_eq(ino_state(ii), 1);
	fsck_ino_exit(&t);
}
