// SPDX-License-Identifier: GPL-2.0
/*
 * readahead_reopen_test.c - the read-ahead's slots (fs_read.h) outlive a
 * close and open of the filesystem under them, as the FUSE daemon's m->rac
 * outlives reopen() (remount ro, rw): a slot is keyed by its device's
 * struct bch_blockdev pointer, the offset, the key's version and checksum,
 * and used for a plan of the same c->data_reuse_seq.  A new open starts
 * c->data_reuse_seq again from 0, and malloc() may give the new device the
 * old one's address.  With data_checksum=none (csum 0 in every key) a slot
 * filled just after one open holds the bytes of an extent that was freed
 * and whose space another file took before the next open; after it, the
 * same plan seq, device pointer, offset and size: the new file's read
 * must not be served the old file's bytes.
 * Driven as op_read() drives it (plan, plan ahead, run, run ahead).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcachefs.h"
#include "fs.h"
#include "fs_ops.h"
#include "fs_read.h"
#include "io.h"
#include "tests/lib/testfs.h"

#define U	(64 << 10)
#define A_UNITS	64		/* 4 MiB */

static struct testfs_one fs1;
static struct bch_fs *c;
static struct bch_fs_read_cache *ra;

static void unit(uint8_t *p, unsigned file, uint64_t i)
{
	for (unsigned k = 0; k < U; k += 16)
		snprintf((char *)p + k, 16 + 1, "%c%06llu:%07u", 'A' + file, (unsigned long long)i, k);
}

static ssize_t read_once(uint64_t inum, uint64_t off, size_t len, void *to)
{
	struct bch_read_plan pl, ahead;

	cr_assert_eq(bch_fs_read_plan(c, inum, off, len, &pl), 0);
	bool go = !bch_fs_read_ahead_plan(c, ra, inum, off, pl.len, &ahead);
	ssize_t n = bch_fs_read_run(ra, &pl, to);
	bch_data_read_plan_free(&pl);
	if (go)
		bch_fs_read_ahead_run(ra, &ahead);
	return n;
}

/* The device offset of the extent holding unit i of inum (UINT64_MAX: none). */
static uint64_t dev_off(uint64_t inum, uint64_t i)
{
	struct bch_read_plan pl;
	uint64_t o = UINT64_MAX;

	cr_assert_eq(bch_fs_read_plan(c, inum, i * U, U, &pl), 0);
	if (pl.nr == 1 && pl.p[0].bdev)
		o = pl.p[0].dev_off;
	bch_data_read_plan_free(&pl);
	return o;
}

static void reopen(void)
{
	cr_assert_eq(bch_fs_close(c), 0);
	c = fs1.c = testfs_must_open(fs1.paths, 1, 0);
	c->opts.v[Opt_data_checksum] = BCH_CSUM_none;
}

/*
 * Under ASan the freed struct is held in quarantine (never given back in
 * 400 opens): the test runs itself again, the quarantine off, as one more
 * process of this binary, RA_REOPEN_INNER set (that run does the work).
 */
static int rerun_without_quarantine(void)
{
	const char *a = getenv("ASAN_OPTIONS");
	char *env, cmd[256];

	cr_assert(asprintf(&env, "%s%squarantine_size_mb=0:thread_local_quarantine_size_kb=0", a ? a : "",
			   a && *a ? ":" : "") > 0);
	setenv("ASAN_OPTIONS", env, 1);
	setenv("RA_REOPEN_INNER", "1", 1);
	unsetenv("BXFI_MAP");		/* else it takes itself for a worker of this run */
	free(env);
	snprintf(cmd, sizeof(cmd), "/proc/%d/exe --jobs 1 --filter 'readahead_reopen/*'", (int)getpid());
	return system(cmd);
}

Test(readahead_reopen, old_bytes_not_served_after_reopen, .timeout = 120)
{
	if (!getenv("RA_REOPEN_INNER")) {
		int st = rerun_without_quarantine();
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "the run with the quarantine off failed (status %#x): see its output above", st);
		return;
	}
	static uint8_t w[U], r[U + 1];
	uint64_t a, f, seq_a, n = 0;

	testfs_one_up(&fs1, "rareopen", 64);
	c = fs1.c;
	c->opts.v[Opt_data_checksum] = BCH_CSUM_none;
	cr_assert_eq(bch_fs_read_cache_new(&ra), 0);

	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "A", S_IFREG | 0644, 0, 0, 0, &a), 0);
	for (uint64_t i = 0; i < A_UNITS; i++) {
		unit(w, 0, i);
		cr_assert_eq(bch_fs_write(c, a, i * U, w, U), U);
	}
	cr_assert_eq(bch_fs_fsync(c), 0);
	reopen();
	struct bch_blockdev *bdev_a = c->devs[0]->bdev;

	/* A read sequentially just after the open: its extents read ahead */
	seq_a = c->data_reuse_seq;
	for (uint64_t i = 0; i < A_UNITS; i++) {
		cr_assert_eq(read_once(a, i * U, U, r), U);
		unit(w, 0, i);
		cr_assert_eq(memcmp(r, w, U), 0, "A unit %llu", (unsigned long long)i);
	}
	cr_assert_eq(c->data_reuse_seq, seq_a, "the reads of A reused no space");
	uint64_t a_off[A_UNITS];	/* where each unit of A lies */
	for (uint64_t i = 0; i < A_UNITS; i++)
		a_off[i] = dev_off(a, i);

	/* A gone; F fills the filesystem, A's old space too */
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "A"), 0);
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "F", S_IFREG | 0644, 0, 0, 0, &f), 0);
	for (;; n++) {
		unit(w, 5, n);
		if (bch_fs_write(c, f, n * U, w, U) != U)
			break;
	}
	bch_fs_fsync(c);
	cr_assert_gt(n, A_UNITS);
	/*
	 * Opened again until the device's struct lands where it was when A
	 * was read (malloc's choice: glibc's usually gives it back at once;
	 * ASan's quarantine holds it back for a while).
	 */
	unsigned opens = 0;
	do {
		reopen();
		opens++;
	} while (c->devs[0]->bdev != bdev_a && opens < 400);
	printf("readahead_reopen: %u opens\n", opens);
	cr_assert_eq((void *)c->devs[0]->bdev, (void *)bdev_a,
		     "the device never came back at the same address: the case was not set up");
	printf("readahead_reopen: A read at seq %llu on bdev %p; now seq %llu on bdev %p; F %llu units\n",
	       (unsigned long long)seq_a, (void *)bdev_a, (unsigned long long)c->data_reuse_seq,
	       (void *)c->devs[0]->bdev, (unsigned long long)n);

	/* the units of F where A was, each read alone (no other read takes a slot) */
	unsigned wrong = 0, from_a = 0, there = 0;
	for (uint64_t i = n; i-- > 0;) {
		uint64_t o = dev_off(f, i);
		bool in_a = false;
		for (unsigned k = 0; k < A_UNITS; k++)
			in_a |= a_off[k] == o;
		if (!in_a)
			continue;
		there++;
		ssize_t got = read_once(f, i * U, U, r);
		if (got != U)
			continue;	/* a short last unit: ENOSPC mid-write */
		unit(w, 5, i);
		if (memcmp(r, w, U)) {
			wrong++;
			from_a += r[0] == 'A';
			if (wrong == 1)
				printf("readahead_reopen: F unit %llu read as \"%.15s\"\n",
				       (unsigned long long)i, (char *)r);
		}
	}
	printf("readahead_reopen: %u units of F lie where A did\n", there);
	bch_fs_read_cache_free(ra);
	ra = NULL;
	testfs_one_down(&fs1);		/* the images go whatever the verdict */
	cr_assert_gt(there, 0, "F took none of A's space: the test checked nothing");
	cr_assert_eq(wrong, 0, "%u units of F read wrong after the reopen, %u of them A's old bytes",
		     wrong, from_a);
}
