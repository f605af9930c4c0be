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
		fsck_ino_set_names(&t, BCH_ROOT_INO + i, fsck_ino_find(&t, BCH_ROOT_INO + i, true), i + 1);
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
			cr_assert_eq(fsck_ino_names(&t, BCH_ROOT_INO + i, ii), i + 1);
		}
	}
	for (unsigned i = 0; i < 5; i++) {
		struct ino_info *ii = fsck_ino_find(&t, odd[i], false);
		cr_assert_not_null(ii, "inode %llu", (unsigned long long)odd[i]);
		cr_assert_eq(fsck_ino_names(&t, odd[i], ii), 1000 + i);
	}
	/* adding what is there finds it, counts nothing */
	cr_assert_eq(fsck_ino_names(&t, BCH_ROOT_INO, fsck_ino_find(&t, BCH_ROOT_INO, true)), 1);
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
		ino_set_mode(fsck_ino_find(&t, BCH_ROOT_INO + i * 100000, true), S_IFREG);
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
	fsck_ino_set_names(&t, 12345, first, 7);
	fsck_ino_extra(&t, 12345, true)->subdirs = 9;
	/* far more than the table holds: must grow, not loop */
	fsck_ino_reserve(&t, 100000);
	first = fsck_ino_find(&t, 12345, false);
	cr_assert_not_null(first);
	cr_assert_eq(fsck_ino_names(&t, 12345, first), 7);
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
	fsck_ino_set_names(&t, 0, fsck_ino_find(&t, 0, true), 3);
	fsck_ino_set_names(&t, BCH_ROOT_INO, fsck_ino_find(&t, BCH_ROOT_INO, true), 1);
	cr_assert_eq(fsck_ino_names(&t, 0, fsck_ino_find(&t, 0, false)), 3);
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
	fsck_ino_find(&t, BCH_ROOT_INO + 5, true);
	fsck_ino_set_fp(&t, BCH_ROOT_INO + 5, 0xbeef);
	cr_assert_not_null(t.fp_chunks);
	/* only the chunk that holds it */
	cr_assert_not_null(t.fp_chunks[0]);
	cr_assert_null(t.fp_chunks[1]);
	cr_assert_null(t.fp_chunks[2]);
	fsck_ino_find(&t, last, true);
	fsck_ino_set_fp(&t, last, 0x1234);
	cr_assert_null(t.fp_chunks[1]);
	cr_assert_not_null(t.fp_chunks[2]);
	/* numbers outside the dense range keep theirs in their hash entry, 0 too */
	fsck_ino_find(&t, far, true);
	fsck_ino_set_fp(&t, far, 0x7777);
	fsck_ino_find(&t, 0, true);
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
	struct ino_info *ii = fsck_ino_find(&t, BCH_ROOT_INO + 1, true);
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
