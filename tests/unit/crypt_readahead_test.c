// SPDX-License-Identifier: GPL-2.0
/*
 * crypt_readahead_test.c - the read-ahead of an encrypted file (fs_read.h:
 * bch_fs_read_ahead_plan(), bch_fs_read_ahead_run(), bch_fs_read_run()),
 * driven as op_read() drives it: plan and plan ahead under the "lock", run,
 * then run ahead after the "reply".  Sequential reads of a file of random
 * bytes (seed fixed and printed) come back right, mostly from extents read
 * ahead; random reads read nothing ahead; an extent read ahead is not used
 * by a plan made after space was reused (c->data_reuse_seq moved); reads
 * of an odd size are copied from extents decrypted ahead; a file rewritten
 * and not flushed is read ahead uncached, several extents a read; an
 * extent whose ciphertext was damaged on disk is never read ahead, and the
 * run that wants it refuses (-EAGAIN: the old path then reports it); a
 * reply from the slots (bch_fs_read_run_reply()) gives the file's bytes,
 * and its slots keep them until it is done while other reads go through
 * every other slot; and readers going through files while a writer rewrites them, so space read
 * ahead is freed and reused under them, get one whole version of each
 * 64 KiB (one transaction of the writer) every time.  (That last one is a
 * general check: with the sequence and key checks both taken out it still
 * passed, a slot being seldom still cached when its place is reused on
 * this 64 MiB filesystem; the cases before it guard each check.)
 *
 * plain_readahead_test.c builds the same cases for a filesystem that does
 * not encrypt (RA_ENCRYPTED false): its checksummed extents are read ahead
 * alike, verified against their checksum, and held as they are on disk.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "crypt.h"
#include "fs.h"
#include "fs_ops.h"
#include "fs_read.h"
#include "io.h"
#include "super.h"
#include "tests/lib/testfs.h"

#ifndef RA_SUITE
#define RA_SUITE	crypt_readahead
#define RA_ENCRYPTED	true
#define RA_TAG		"crypt_readahead"
#endif

#define SEED		0x3ead33u
#define FILE_BYTES	(4 << 20)
#define READ_BYTES	(256 << 10)	/* the kernel's usual read through the mount */

static struct testfs_one fs1;
static struct bch_fs *c;
static struct bch_fs_read_cache *ra;
static uint8_t *data, *buf;
static uint64_t inum;

static uint64_t rng;

static uint64_t rnd(void)
{
	return testfs_xorshift(&rng);
}

static void setup(void)
{
	testfs_encrypted = RA_ENCRYPTED;
	testfs_one_up(&fs1, "cra", 64);
	c = fs1.c;
	cr_assert_eq(bch_fs_encrypted(c), RA_ENCRYPTED);
	cr_assert_eq(bch_fs_read_cache_new(&ra), 0);
	rng = SEED;
	printf(RA_TAG ": seed %#x\n", SEED);
	data = malloc(FILE_BYTES);
	cr_assert_eq(posix_memalign((void **)&buf, 4096, FILE_BYTES), 0);
	for (size_t i = 0; i < FILE_BYTES; i += 8) {
		uint64_t x = rnd();
		memcpy(data + i, &x, 8);
	}
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	cr_assert_eq(bch_fs_write(c, inum, 0, data, FILE_BYTES), FILE_BYTES);
	cr_assert_eq(bch_fs_fsync(c), 0);
}

static void teardown(void)
{
	bch_fs_read_cache_free(ra);
	ra = NULL;
	free(data);
	free(buf);
	testfs_encrypted = false;
	testfs_one_down(&fs1);
	c = NULL;
}

TestSuite(RA_SUITE, .init = setup, .fini = teardown, .timeout = 60);

/* One read as op_read() does it; its result (the run's: len or -EAGAIN). */
static ssize_t read_once(uint64_t off, size_t len, void *to)
{
	struct bch_read_plan pl, ahead;

	cr_assert_eq(bch_fs_read_plan(c, inum, off, len, &pl), 0, "read at %llu not planned",
		     (unsigned long long)off);
	bool go = !bch_fs_read_ahead_plan(c, ra, inum, off, pl.len, &ahead);
	ssize_t n = bch_fs_read_run(ra, &pl, to);
	bch_data_read_plan_free(&pl);
	if (go)
		bch_fs_read_ahead_run(ra, &ahead);	/* after the reply */
	return n;
}

static void counts(uint64_t *hits, uint64_t *filled)
{
	uint64_t decrypted;

	bch_fs_read_cache_counts(ra, hits, filled, &decrypted);
}

Test(RA_SUITE, sequential_reads_come_from_the_readahead)
{
	uint64_t hits, filled;

	for (uint64_t off = 0; off < FILE_BYTES; off += READ_BYTES)
		cr_assert_eq(read_once(off, READ_BYTES, buf + off), READ_BYTES);
	cr_assert_eq(memcmp(buf, data, FILE_BYTES), 0, "a sequential read returned other bytes");
	counts(&hits, &filled);
	printf(RA_TAG ": sequential: %llu pieces from the read-ahead, %llu extents read ahead\n",
	       (unsigned long long)hits, (unsigned long long)filled);
	/* past the first read every extent was read ahead, each used once */
	cr_assert_gt(hits, 0, "nothing came from the read-ahead");
	cr_assert_eq(hits, filled, "extents read ahead and not used, or used twice");

	/* odd sizes and offsets, one after the other: the same bytes */
	memset(buf, 0, FILE_BYTES);
	uint64_t off = 0;
	while (off < FILE_BYTES) {
		size_t len = 1 + rnd() % (300 << 10);
		if (len > FILE_BYTES - off)
			len = FILE_BYTES - off;
		cr_assert_eq(read_once(off, len, buf + off), (ssize_t)len);
		cr_assert_eq(memcmp(buf + off, data + off, len), 0, "%zu bytes at %llu differ", len,
			     (unsigned long long)off);
		off += len;
	}
}

/*
 * Decrypt-ahead: every extent read ahead is decrypted there (its buffer
 * locked in memory), so a later read copies its pieces wherever they start;
 * a slot of ciphertext served only pieces starting on a 64-byte block of
 * the keystream.  Reads of an odd size, one after the other: from the
 * fourth on, every piece comes from the read-ahead (the first has nothing
 * before it to be sequential with, the second's run reads the extent its
 * end cuts, so the third reads the rest of it), and the bytes are right.
 */
#define ODD	100003		/* bytes per read: pieces start anywhere */

Test(RA_SUITE, odd_reads_are_copied_from_extents_decrypted_ahead)
{
	uint64_t hits, filled, decrypted, hits0, pieces = 0, odd = 0;
	void *probe = NULL;
	bool can_lock;

	/* can this process lock a slot's worth of memory (root, or RLIMIT_MEMLOCK)? */
	cr_assert_eq(posix_memalign(&probe, 4096, 256 << 10), 0);
	can_lock = !mlock(probe, 256 << 10);
	if (can_lock)
		munlock(probe, 256 << 10);
	free(probe);

	for (uint64_t off = 0; off < 3 * ODD; off += ODD)
		cr_assert_eq(read_once(off, ODD, buf + off), ODD);
	bch_fs_read_cache_counts(ra, &hits0, &filled, &decrypted);
	for (uint64_t off = 3 * ODD; off < FILE_BYTES; off += ODD) {
		size_t len = off + ODD <= FILE_BYTES ? ODD : FILE_BYTES - off;
		struct bch_read_plan pl;

		cr_assert_eq(bch_fs_read_plan(c, inum, off, len, &pl), 0);
		for (unsigned i = 0; i < pl.nr; i++) {
			pieces += pl.p[i].bdev != NULL;
			odd += pl.p[i].bdev && pl.p[i].src_off % 64;
		}
		bch_data_read_plan_free(&pl);
		cr_assert_eq(read_once(off, len, buf + off), (ssize_t)len);
	}
	cr_assert_eq(memcmp(buf, data, FILE_BYTES), 0, "an odd read returned other bytes");
	bch_fs_read_cache_counts(ra, &hits, &filled, &decrypted);
	printf(RA_TAG ": odd reads: %llu pieces (%llu not on a keystream block), %llu from the "
	       "read-ahead; %llu extents read ahead, %llu decrypted there%s\n",
	       (unsigned long long)pieces, (unsigned long long)odd, (unsigned long long)(hits - hits0),
	       (unsigned long long)filled, (unsigned long long)decrypted,
	       can_lock ? "" : " (mlock refused here: ciphertext kept)");
	cr_assert_gt(odd, 0, "no piece started off a keystream block: the case is not exercised");
	if (!RA_ENCRYPTED) {
		cr_assert_eq(decrypted, 0, "plain extents counted as decrypted");
	} else if (!can_lock) {
		cr_assert_eq(decrypted, 0, "plaintext kept in memory that could not be locked");
		return;
	} else {
		cr_assert_eq(decrypted, filled, "extents read ahead and left encrypted");
	}
	cr_assert_eq(hits - hits0, pieces, "pieces read again though their extent was read ahead");
}

/*
 * The read-ahead reads whole runs of extents with one uncached (O_DIRECT)
 * read where the device can (blockdev.h): a file rewritten and not yet
 * flushed (its new ciphertext dirty in the image's page cache) is read
 * back right, every extent from the read-ahead, in fewer device reads than
 * extents.
 */
Test(RA_SUITE, rewritten_file_read_ahead_uncached_in_runs)
{
	struct bch_read_plan pl;
	struct bch_dev_io_stats st0, st1;
	uint64_t hits0, hits, filled0, filled, decrypted;

	cr_assert_eq(bch_fs_read_plan(c, inum, 0, 1, &pl), 0);
	struct bch_blockdev *bdev = pl.p[0].bdev;
	bch_data_read_plan_free(&pl);
	cr_assert_not_null(bdev);
	if (!bch_dev_uncached_ok(bdev)) {
		printf(RA_TAG ": no O_DIRECT on this test directory: case not run\n");
		return;
	}
	for (size_t i = 0; i < FILE_BYTES; i += 8) {
		uint64_t x = rnd();
		memcpy(data + i, &x, 8);
	}
	cr_assert_eq(bch_fs_write(c, inum, 0, data, FILE_BYTES), FILE_BYTES);	/* no fsync */
	bch_fs_read_cache_counts(ra, &hits0, &filled0, &decrypted);
	bch_dev_io_stats(bdev, &st0);
	for (uint64_t off = 0; off < FILE_BYTES; off += READ_BYTES)
		cr_assert_eq(read_once(off, READ_BYTES, buf + off), READ_BYTES);
	bch_dev_io_stats(bdev, &st1);
	bch_fs_read_cache_counts(ra, &hits, &filled, &decrypted);
	cr_assert_eq(memcmp(buf, data, FILE_BYTES), 0, "a read of the rewritten file returned other bytes");
	printf(RA_TAG ": rewritten: %llu extents read ahead in %llu device reads, %llu pieces "
	       "from the read-ahead\n", (unsigned long long)(filled - filled0),
	       (unsigned long long)(st1.reads - st0.reads), (unsigned long long)(hits - hits0));
	cr_assert_gt(filled - filled0, 0, "nothing read ahead");
	cr_assert_eq(hits - hits0, filled - filled0, "extents read ahead and dropped, or not used");
	cr_assert_lt(st1.reads - st0.reads, filled - filled0, "a device read per extent: no runs read at once");
}

Test(RA_SUITE, random_reads_read_nothing_ahead)
{
	uint64_t hits, filled;

	uint64_t last = 0;

	for (unsigned i = 0; i < 64; i++) {
		uint64_t off;
		do	/* a read within 1 MiB of the last one's end is sequential */
			off = (rnd() % (FILE_BYTES / 4096 - 64)) * 4096;
		while (off + (1 << 20) >= last && off <= last + (1 << 20));
		last = off + 4096;
		cr_assert_eq(read_once(off, 4096, buf), 4096);
		cr_assert_eq(memcmp(buf, data + off, 4096), 0);
	}
	counts(&hits, &filled);
	cr_assert_eq(filled, 0, "random reads read %llu extents ahead", (unsigned long long)filled);
}

/* The device of the file's first extent: does it read uncached (O_DIRECT here)? */
static bool uncached_here(void)
{
	struct bch_read_plan pl;

	cr_assert_eq(bch_fs_read_plan(c, inum, 0, 1, &pl), 0);
	struct bch_blockdev *bdev = pl.p[0].bdev;
	bch_data_read_plan_free(&pl);
	cr_assert_not_null(bdev);
	if (!bch_dev_uncached_ok(bdev))
		printf(RA_TAG ": no O_DIRECT on this test directory: case not run\n");
	return bch_dev_uncached_ok(bdev);
}

/*
 * io.h's readahead hints (fusemount has the kernel read ahead into the
 * image's page cache) leave out every extent this read-ahead reads
 * uncached: the kernel would read each a second time, into pages nobody
 * reads.
 */
Test(RA_SUITE, hints_leave_out_what_is_read_ahead_uncached)
{
	struct bch_readahead h;

	if (!uncached_here())
		return;
	uint64_t to = bch_data_readahead_plan(c, inum, 0, FILE_BYTES >> BCH_SECTOR_SHIFT, &h);
	cr_assert_eq(h.nr, 0, "%u runs hinted to the page cache (the first %llu bytes at %llu)", h.nr,
		     (unsigned long long)(h.nr ? h.run[0].len : 0), (unsigned long long)(h.nr ? h.run[0].offset : 0));
	cr_assert_eq(to, FILE_BYTES >> BCH_SECTOR_SHIFT);
}

/* AnonHugePages of this process (kB), or -1. */
static long anon_huge_kb(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * The slots lie in huge pages where the kernel gives them for the asking
 * (transparent_hugepage "madvise" or "always"): the pages of an uncached
 * read into a slot and of a reply from it are pinned a huge page at a
 * time, not 4 KiB at a time.
 */
Test(RA_SUITE, slots_lie_in_huge_pages)
{
	char mode[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (f) {
		if (!fgets(mode, sizeof(mode), f))
			mode[0] = 0;
		fclose(f);
	}
	if (!uncached_here())
		return;
	long before = anon_huge_kb();
	for (uint64_t off = 0; off < FILE_BYTES; off += READ_BYTES)
		cr_assert_eq(read_once(off, READ_BYTES, buf + off), READ_BYTES);
	cr_assert_eq(memcmp(buf, data, FILE_BYTES), 0);
	long after = anon_huge_kb();
	printf(RA_TAG ": AnonHugePages %ld -> %ld kB (transparent_hugepage: %.*s)\n", before, after,
	       (int)strcspn(mode, "\n"), mode);
	if (!mode[0] || strstr(mode, "[never]") || before < 0) {
		printf(RA_TAG ": no transparent huge pages here: case not run\n");
		return;
	}
	cr_assert_geq(after - before, 2048, "the slots read ahead lie in no huge page");
}

Test(RA_SUITE, space_reused_since_the_readahead_is_read_again)
{
	uint64_t hits, filled, hits2, filled2;

	cr_assert_eq(read_once(0, READ_BYTES, buf), READ_BYTES);
	cr_assert_eq(read_once(READ_BYTES, READ_BYTES, buf + READ_BYTES), READ_BYTES);
	counts(&hits, &filled);
	cr_assert_gt(filled, 0, "nothing read ahead");
	bch_data_reuse_bump(c);		/* as an allocation would: the extents read ahead are stale */
	cr_assert_eq(read_once(2 * READ_BYTES, READ_BYTES, buf + 2 * READ_BYTES), READ_BYTES);
	counts(&hits2, &filled2);
	cr_assert_eq(hits2, hits, "an extent read ahead before the space was reused was used");
	cr_assert_eq(memcmp(buf, data, 3 * READ_BYTES), 0);
}

/*
 * A slot read ahead before space was reused serves no later plan (above);
 * a second pass over the file reads those extents ahead again rather than
 * leave them to its runs, as if nothing were cached.
 */
Test(RA_SUITE, a_second_pass_after_reuse_reads_ahead_again)
{
	uint64_t hits0, hits, filled0, filled;

	for (uint64_t off = 0; off < FILE_BYTES; off += READ_BYTES)
		cr_assert_eq(read_once(off, READ_BYTES, buf + off), READ_BYTES);
	counts(&hits0, &filled0);
	cr_assert_gt(filled0, 0, "nothing read ahead");
	bch_data_reuse_bump(c);
	memset(buf, 0, FILE_BYTES);
	for (uint64_t off = 0; off < FILE_BYTES; off += READ_BYTES)
		cr_assert_eq(read_once(off, READ_BYTES, buf + off), READ_BYTES);
	counts(&hits, &filled);
	cr_assert_eq(memcmp(buf, data, FILE_BYTES), 0);
	printf(RA_TAG ": second pass after reuse: %llu extents read ahead again, %llu pieces from them\n",
	       (unsigned long long)(filled - filled0), (unsigned long long)(hits - hits0));
	cr_assert_gt(hits - hits0, (hits0 * 3) / 4, "the second pass was served by its own runs");
}

Test(RA_SUITE, a_damaged_extent_is_not_read_ahead)
{
	struct bch_read_plan pl;
	uint64_t hits, filled;

	/* the ciphertext of the extent holding byte 1 MiB, one bit flipped on disk */
	cr_assert_eq(bch_fs_read_plan(c, inum, 1 << 20, 1, &pl), 0);
	cr_assert_eq(pl.nr, 1);
	struct bch_read_piece p = pl.p[0];
	bch_data_read_plan_free(&pl);
	cr_assert_not_null(p.bdev);
	uint64_t at = p.dev_off + p.src_off;
	uint8_t b;
	cr_assert_eq(bch_dev_read_try(p.bdev, &b, 1, at), 0);
	b ^= 0x10;
	cr_assert_eq(bch_dev_write(p.bdev, &b, 1, at), 0);

	/* read up to it: it is planned ahead and dropped by its MAC */
	uint64_t off;
	for (off = 0; off + READ_BYTES <= (1 << 20) - p.src_off; off += READ_BYTES)
		cr_assert_eq(read_once(off, READ_BYTES, buf + off), READ_BYTES);
	counts(&hits, &filled);
	cr_assert_gt(filled, 0, "nothing read ahead");
	/* every read touching it refuses, as the run without read-ahead does */
	ssize_t n = read_once((1 << 20) - p.src_off, 4096, buf);
	cr_assert_eq(n, -EAGAIN, "a read of the damaged extent returned %zd", n);
	n = read_once((1 << 20), 4096, buf);
	cr_assert_eq(n, -EAGAIN, "a read of the damaged extent returned %zd", n);
}

/* ------------------------------------------------ replies from the slots */

/* rep's bytes (or buf's, when it holds none) gathered into out; their count. */
static size_t gather(const struct bch_fs_read_reply *rep, const void *from_buf, size_t n, uint8_t *out,
		     unsigned *outside)
{
	size_t at = 0;

	if (!rep->nr) {
		memcpy(out, from_buf, n);
		return n;
	}
	for (unsigned i = 0; i < rep->nr; i++) {
		const uint8_t *b = rep->iov[i].iov_base;
		if (b < (const uint8_t *)from_buf || b >= (const uint8_t *)from_buf + n)
			(*outside)++;
		memcpy(out + at, b, rep->iov[i].iov_len);
		at += rep->iov[i].iov_len;
	}
	return at;
}

/* One read as op_read() does it with a reply from the slots; rep kept (caller: _done). */
static ssize_t read_reply(uint64_t ino_, uint64_t off, size_t len, void *to, struct bch_fs_read_reply *rep,
			  bool ahead_now)
{
	struct bch_read_plan pl, ahead;

	cr_assert_eq(bch_fs_read_plan(c, ino_, off, len, &pl), 0);
	bool go = !bch_fs_read_ahead_plan(c, ra, ino_, off, pl.len, &ahead);
	ssize_t n = bch_fs_read_run_reply(ra, &pl, to, rep);
	bch_data_read_plan_free(&pl);
	if (go && ahead_now)
		bch_fs_read_ahead_run(ra, &ahead);
	else if (go)
		bch_data_read_plan_free(&ahead);
	return n;
}

/*
 * bch_fs_read_run_reply(): sequential reads are replied from the slots
 * decrypted ahead (iovecs outside the reply buffer), and give the file's
 * bytes; a reply not yet done keeps its slots: another file read through
 * the cache meanwhile (16 MiB: more extents than the cache has slots, so
 * every slot not held is taken again) does not change its bytes, and once
 * it is done those slots serve again.
 */
#define OTHER_BYTES	(16 << 20)

Test(RA_SUITE, replies_come_from_the_slots_and_hold_them)
{
	struct bch_fs_read_reply rep;
	uint8_t *got = malloc(FILE_BYTES), *other = malloc(OTHER_BYTES);
	unsigned outside = 0, from_slots = 0;
	uint64_t ino2, hits0, hits, filled, decrypted;
	void *probe = NULL;

	cr_assert_eq(posix_memalign(&probe, 4096, 256 << 10), 0);
	bool can_lock = !mlock(probe, 256 << 10);
	if (can_lock)
		munlock(probe, 256 << 10);
	free(probe);
	if (RA_ENCRYPTED && !can_lock) {
		printf(RA_TAG ": mlock refused here: no plaintext slots to reply from: case not run\n");
		free(got);
		free(other);
		return;
	}
	/* written first: a write moves c->data_reuse_seq, and slots read before it serve no later plan */
	for (size_t i = 0; i < OTHER_BYTES; i += 8) {
		uint64_t x = rnd();
		memcpy(other + i, &x, 8);
	}
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "g", S_IFREG | 0644, 0, 0, 0, &ino2), 0);
	cr_assert_eq(bch_fs_write(c, ino2, 0, other, OTHER_BYTES), OTHER_BYTES);
	cr_assert_eq(bch_fs_fsync(c), 0);
	for (uint64_t off = 0; off < FILE_BYTES; off += READ_BYTES) {
		unsigned o = outside;
		cr_assert_eq(read_reply(inum, off, READ_BYTES, buf, &rep, true), READ_BYTES);
		cr_assert_eq(gather(&rep, buf, READ_BYTES, got + off, &outside), READ_BYTES);
		from_slots += outside > o;
		bch_fs_read_reply_done(&rep);
		cr_assert_null(rep.iov);
	}
	cr_assert_eq(memcmp(got, data, FILE_BYTES), 0, "a reply from the slots gave other bytes");
	printf(RA_TAG ": replies: %u of %u replies from the slots, %u iovecs there\n", from_slots,
	       FILE_BYTES / READ_BYTES, outside);
	cr_assert_gt(from_slots, FILE_BYTES / READ_BYTES / 2, "replies copied into the buffer, not from the slots");

	/* a reply held across another file's reads */
	uint64_t at = 0;
	for (; at < 2 * READ_BYTES; at += READ_BYTES) {	/* sequential: the next ones are read ahead */
		cr_assert_eq(read_reply(inum, at, READ_BYTES, buf, &rep, true), READ_BYTES);
		bch_fs_read_reply_done(&rep);
	}
	cr_assert_eq(read_reply(inum, at, READ_BYTES, buf, &rep, false), READ_BYTES);
	cr_assert_gt(rep.nr, 0, "this reply holds no slot");
	bch_fs_read_cache_counts(ra, &hits0, &filled, &decrypted);
	uint64_t filled0 = filled;
	uint8_t *tmp = malloc(READ_BYTES);
	for (uint64_t off = 0; off < OTHER_BYTES; off += READ_BYTES) {
		struct bch_fs_read_reply r2;
		unsigned o2 = 0;
		cr_assert_eq(read_reply(ino2, off, READ_BYTES, tmp, &r2, true), READ_BYTES);
		cr_assert_eq(gather(&r2, tmp, READ_BYTES, got, &o2), READ_BYTES);
		cr_assert_eq(memcmp(got, other + off, READ_BYTES), 0, "file g at %llu", (unsigned long long)off);
		bch_fs_read_reply_done(&r2);
	}
	bch_fs_read_cache_counts(ra, &hits, &filled, &decrypted);
	printf(RA_TAG ": held reply: %u iovecs; meanwhile %llu extents read ahead\n", rep.nr,
	       (unsigned long long)(filled - filled0));
	cr_assert_gt(filled - filled0, 128, "too few extents read ahead to take every slot");
	memset(got, 0, READ_BYTES);
	unsigned o3 = 0;
	cr_assert_eq(gather(&rep, buf, READ_BYTES, got, &o3), READ_BYTES);
	cr_assert_eq(memcmp(got, data + at, READ_BYTES), 0, "a held reply's bytes changed under it");
	bch_fs_read_reply_done(&rep);
	free(tmp);
	free(got);
	free(other);
}

/* ------------------------------------------------ readers and a writer */

#define NFILES		3
#define RFILE_BYTES	(1 << 20)
#define CHUNK		(64 << 10)	/* one transaction of a write (fs_ops WRITE_CHUNK) */
#define READERS		2
#define RUN_MS		1500
#define RUN_MAX_MS	20000

static pthread_mutex_t engine = PTHREAD_MUTEX_INITIALIZER;	/* the daemon's m->lock */
static uint64_t ino[NFILES];
static atomic_bool stop;
static atomic_uint_fast64_t nr_bad, nr_reads, nr_redone, nr_writes;
static char bad_msg[256];

static uint64_t word(unsigned f, uint64_t v, uint64_t i)
{
	uint64_t x = ((uint64_t)f << 56) ^ (v << 24) ^ i ^ 0x9e3779b97f4a7c15ULL;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

/* Version v of file f: each chunk's first word the version, then words only it has. */
static void fill_version(uint64_t *p, unsigned f, uint64_t v)
{
	for (uint64_t i = 0; i < RFILE_BYTES / 8; i++)
		p[i] = i % (CHUNK / 8) ? word(f, v, i) : v;
}

/* The chunk at off of file f read into p (n bytes): one whole version? */
static bool chunk_ok(const uint64_t *p, ssize_t n, unsigned f, uint64_t off)
{
	if (n == 0)
		return true;		/* truncated, not yet rewritten */
	if (n != CHUNK)
		return false;
	for (uint64_t i = 1; i < CHUNK / 8; i++)
		if (p[i] != word(f, p[0], off / 8 + i))
			return false;
	return true;
}


/* One read of a chunk as op_read() does it, redone under the lock when the run refuses. */
static ssize_t read_chunk(unsigned f, uint64_t off, void *to, uint64_t *rng)
{
	struct bch_read_plan pl, ahead;
	ssize_t n;

	pthread_mutex_lock(&engine);
	uint64_t inum = ino[f];
	bool planned = !bch_fs_read_plan(c, inum, off, CHUNK, &pl), go = false;
	if (!planned)
		n = bch_fs_read(c, inum, off, to, CHUNK);
	else
		go = !bch_fs_read_ahead_plan(c, ra, inum, off, pl.len, &ahead);
	pthread_mutex_unlock(&engine);
	if (!planned)
		return n;
	if (testfs_xorshift(rng) % 16 == 0)
		usleep(testfs_xorshift(rng) % 20000);	/* the writer gets in between */
	n = bch_fs_read_run(ra, &pl, to);
	bch_data_read_plan_free(&pl);
	if (go)
		bch_fs_read_ahead_run(ra, &ahead);
	if (n == -EAGAIN) {
		atomic_fetch_add(&nr_redone, 1);
		pthread_mutex_lock(&engine);
		n = bch_fs_read(c, ino[f], off, to, CHUNK);
		pthread_mutex_unlock(&engine);
	}
	return n;
}

static void *reader(void *arg)
{
	uint64_t rng = SEED + (uintptr_t)arg * 7919, *p;

	if (posix_memalign((void **)&p, 4096, CHUNK))
		return NULL;
	while (!atomic_load(&stop)) {
		unsigned f = testfs_xorshift(&rng) % NFILES;
		for (uint64_t off = 0; off < RFILE_BYTES && !atomic_load(&stop); off += CHUNK) {
			ssize_t n = read_chunk(f, off, p, &rng);
			atomic_fetch_add(&nr_reads, 1);
			if (n == -ENOENT || n == -ESTALE)
				break;	/* unlinked and made again meanwhile */
			if (n < 0 || !chunk_ok(p, n, f, off)) {
				if (atomic_fetch_add(&nr_bad, 1) == 0)
					snprintf(bad_msg, sizeof(bad_msg), "file %u at %llu: %zd bytes, version %llu",
						 f, (unsigned long long)off, n, n > 0 ? (unsigned long long)p[0] : 0ULL);
			}
		}
	}
	free(p);
	return NULL;
}

static void writer_step(uint64_t *rng, uint64_t *p, uint64_t *ver)
{
	unsigned f = testfs_xorshift(rng) % NFILES;

	pthread_mutex_lock(&engine);
	if (testfs_xorshift(rng) % 4 == 0)
		cr_assert_eq(bch_fs_truncate(c, ino[f], 0), 0, "truncate: %s", c->err_msg);
	fill_version(p, f, ++*ver);
	cr_assert_eq(bch_fs_write(c, ino[f], 0, p, RFILE_BYTES), RFILE_BYTES, "write: %s", c->err_msg);
	if (testfs_xorshift(rng) % 2 == 0)
		cr_assert_eq(bch_fs_fsync(c), 0);	/* freed space becomes reusable */
	pthread_mutex_unlock(&engine);
	atomic_fetch_add(&nr_writes, 1);
}

Test(RA_SUITE, readers_while_space_is_reused)
{
	uint64_t rng = SEED, ver = 0, *p = NULL, seq0 = c->data_reuse_seq, hits, filled, decrypted;
	pthread_t th[READERS];

	cr_assert_eq(posix_memalign((void **)&p, 4096, RFILE_BYTES), 0);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		snprintf(name, sizeof(name), "r%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &ino[f]), 0);
		fill_version(p, f, ++ver);
		cr_assert_eq(bch_fs_write(c, ino[f], 0, p, RFILE_BYTES), RFILE_BYTES);
	}
	atomic_store(&stop, false);
	for (uintptr_t i = 0; i < READERS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, reader, (void *)i), 0);
	struct timespec t0, t;
	long ms;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {	/* RUN_MS, then on until space was reused under the readers (RUN_MAX_MS at most) */
		writer_step(&rng, p, &ver);
		usleep(200);
		clock_gettime(CLOCK_MONOTONIC, &t);
		ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		bch_fs_read_cache_counts(ra, &hits, &filled, &decrypted);
	} while (ms < RUN_MS || (ms < RUN_MAX_MS && (!hits || !atomic_load(&nr_redone))));
	atomic_store(&stop, true);
	for (unsigned i = 0; i < READERS; i++)
		pthread_join(th[i], NULL);
	free(p);
	bch_fs_read_cache_counts(ra, &hits, &filled, &decrypted);
	printf(RA_TAG ": %llu reads (%llu redone), %llu writes, reuse seq +%llu, "
	       "%llu pieces from the read-ahead, %llu extents read ahead\n",
	       (unsigned long long)nr_reads, (unsigned long long)nr_redone, (unsigned long long)nr_writes,
	       (unsigned long long)(c->data_reuse_seq - seq0), (unsigned long long)hits,
	       (unsigned long long)filled);
	cr_assert_eq(nr_bad, 0, "%llu bad reads; the first: %s", (unsigned long long)nr_bad, bad_msg);
	cr_assert_gt(hits, 0, "nothing came from the read-ahead");
	cr_assert_gt(c->data_reuse_seq - seq0, 10, "space was hardly reused");
	cr_assert_eq(c->nr_errors, 0, "filesystem errors counted: %s", c->err_msg);
}
