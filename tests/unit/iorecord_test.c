// SPDX-License-Identifier: GPL-2.0
/*
 * iorecord_test.c - the crash-test recorder: what it records, and that its
 * power-cut images follow the model in tests/lib/iorecord.h, checked
 * against a reference built here from the same event list.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockdev.h"
#include "errcode.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/tmpdir.h"

#define NR_DEVS		2
#define DEV_SIZE	(64 << 10)
#define SECTOR_BYTES	512

static char tmpdir[64];
static struct bch_blockdev *devs[NR_DEVS];
static struct iorec *rec;

static const char *dev_path(unsigned i)
{
	static char p[NR_DEVS][128];

	snprintf(p[i], sizeof(p[i]), "%s/dev%u.img", tmpdir, i);
	return p[i];
}

/* Two image files with distinct patterns, opened, attached to a recorder. */
static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "iorecord");

	rec = iorec_new(NR_DEVS);
	cr_assert(rec);
	for (unsigned i = 0; i < NR_DEVS; i++) {
		unsigned char buf[DEV_SIZE];
		int ret = bch_dev_open(dev_path(i), BCH_DEV_CREATE, &devs[i]);

		cr_assert_eq(ret, 0, "open: %s", bch_err_str(ret));
		cr_assert_eq(bch_dev_set_size(devs[i], DEV_SIZE), 0);
		for (unsigned j = 0; j < DEV_SIZE; j++)
			buf[j] = j * 7 + i * 100 + (j >> 9);
		cr_assert_eq(bch_dev_write(devs[i], buf, DEV_SIZE, 0), 0);
		cr_assert_eq(iorec_attach(rec, i, devs[i]), 0);
	}
}

static void teardown(void)
{
	iorec_free(rec);
	rec = NULL;
	for (unsigned i = 0; i < NR_DEVS; i++) {
		bch_dev_close(devs[i]);
		devs[i] = NULL;
	}
	test_tmpdir_remove(tmpdir);
}

TestSuite(iorecord, .init = setup, .fini = teardown);

/* Write len bytes of value v at off on device i (through the hook). */
static void wr(unsigned i, uint64_t off, size_t len, unsigned char v)
{
	unsigned char *buf = malloc(len);

	cr_assert(buf);
	for (size_t j = 0; j < len; j++)
		buf[j] = v + j / SECTOR_BYTES;
	cr_assert_eq(bch_dev_write(devs[i], buf, len, off), 0);
	free(buf);
}

static void fl(unsigned i)
{
	cr_assert_eq(bch_dev_flush(devs[i]), 0);
}

/* A mixed workload on both devices; returns the number of events. */
static size_t workload(void)
{
	wr(0, 0, 4096, 0x10);
	wr(1, 8192, 1024, 0x20);
	fl(0);
	wr(0, 4096 + 100, 3000, 0x30);	/* unaligned: tears at absolute sectors */
	wr(1, 0, 512, 0x40);
	fl(1);
	wr(0, 1100, 200, 0x50);		/* inside one sector: cannot tear */
	wr(1, 8192 + 512, 2048, 0x60);	/* overlaps the write at 8192 */
	wr(0, 32768, 8192, 0x70);
	fl(0);
	wr(1, 16384, 4096, 0x80);
	wr(0, 0, 1536, 0x90);
	return iorec_nr_events(rec);
}

static void *base_of(unsigned dev)
{
	const struct iorec_plan none = { .at = 0, .torn_event = SIZE_MAX };
	void *img;
	size_t len;

	cr_assert_eq(iorec_image(rec, &none, dev, &img, &len), 0);
	cr_assert_eq(len, DEV_SIZE);
	return img;
}

/*
 * The model, restated the simple way: a write lands whole if a flush of its
 * device follows it before `at`, and otherwise as the plan says (checked
 * separately).  Builds the expected image from the event list.
 */
static void *expected(unsigned dev, const struct iorec_plan *p)
{
	unsigned char *img = base_of(dev);

	for (size_t i = 0; i < p->at; i++) {
		const struct iorec_event *e = iorec_event(rec, i);

		if (e->type == IOREC_WRITE && e->dev == dev)
			memcpy(img + e->offset, e->data, p->bytes[i]);
	}
	return img;
}

static bool flushed_later(size_t i, size_t at)
{
	const struct iorec_event *w = iorec_event(rec, i);

	for (size_t j = i + 1; j < at; j++) {
		const struct iorec_event *e = iorec_event(rec, j);

		if (e->type == IOREC_FLUSH && e->dev == w->dev)
			return true;
	}
	return false;
}

static void check_image(const struct iorec_plan *p, const char *what)
{
	for (unsigned d = 0; d < NR_DEVS; d++) {
		void *want = expected(d, p), *got;
		size_t len;

		cr_assert_eq(iorec_image(rec, p, d, &got, &len), 0);
		cr_assert_eq(len, DEV_SIZE);
		if (memcmp(got, want, len)) {
			char *desc = iorec_plan_describe(rec, p);

			cr_assert_fail("%s: dev %u image differs; plan:\n%s", what, d, desc);
		}
		free(got);
		free(want);
	}
}

/* ------------------------------------------------------------- recording */

Test(iorecord, records_writes_and_flushes_in_order)
{
	size_t nr = workload();
	const struct iorec_event *e;

	cr_assert_eq(nr, 12);
	e = iorec_event(rec, 0);
	cr_expect(e->type == IOREC_WRITE && e->dev == 0 && e->offset == 0 && e->len == 4096);
	cr_expect_eq(((const unsigned char *)e->data)[0], 0x10);
	cr_expect_eq(((const unsigned char *)e->data)[4095], 0x10 + 7);
	e = iorec_event(rec, 1);
	cr_expect(e->type == IOREC_WRITE && e->dev == 1 && e->offset == 8192 && e->len == 1024);
	e = iorec_event(rec, 2);
	cr_expect(e->type == IOREC_FLUSH && e->dev == 0 && !e->len && !e->data);
	e = iorec_event(rec, 5);
	cr_expect(e->type == IOREC_FLUSH && e->dev == 1);
	e = iorec_event(rec, 11);
	cr_expect(e->type == IOREC_WRITE && e->dev == 0 && e->len == 1536);
	cr_expect_null(iorec_event(rec, 12));

	/* Recording does not get in the way: the writes reached the devices. */
	unsigned char b[4];
	cr_assert_eq(bch_dev_read(devs[1], b, 4, 16384), 0);
	cr_expect_eq(b[0], 0x80);
}

Test(iorecord, detach_stops_recording)
{
	wr(0, 0, 512, 1);
	iorec_detach(rec, 0);
	wr(0, 512, 512, 2);
	fl(0);
	wr(1, 0, 512, 3);
	cr_expect_eq(iorec_nr_events(rec), 2);
	cr_expect_eq(iorec_event(rec, 1)->dev, 1);
}

Test(iorecord, bad_arguments)
{
	struct iorec_plan p;

	workload();
	cr_expect_eq(iorec_attach(rec, 0, devs[0]), -EINVAL, "attached twice");
	cr_expect_eq(iorec_attach(rec, NR_DEVS, devs[0]), -EINVAL);
	cr_expect_eq(iorec_plan(rec, &(struct iorec_cut) { .at = 13 }, &p), -EINVAL);
	cr_expect_null(p.bytes);
	cr_expect_eq(iorec_plan(rec, &(struct iorec_cut) { .at = 1, .keep_pct = 101 }, &p),
		     -EINVAL);

	void *img;
	size_t len;
	cr_assert_eq(iorec_plan(rec, &(struct iorec_cut) { .at = 12 }, &p), 0);
	cr_expect_eq(iorec_image(rec, &p, NR_DEVS, &img, &len), -EINVAL);
	iorec_plan_free(&p);
}

/* ---------------------------------------------------------------- images */

Test(iorecord, cut_at_end_keeping_all_is_the_device)
{
	size_t nr = workload();
	struct iorec_plan p;

	cr_assert_eq(iorec_plan(rec, &(struct iorec_cut) { .at = nr, .keep_pct = 100 }, &p), 0);
	cr_expect_eq(p.nr_durable + p.nr_unflushed, 9);
	cr_expect_eq(p.nr_kept, p.nr_unflushed);
	cr_expect_eq(p.torn_event, SIZE_MAX);

	for (unsigned d = 0; d < NR_DEVS; d++) {
		unsigned char dev[DEV_SIZE];
		void *img;
		size_t len;

		cr_assert_eq(bch_dev_read(devs[d], dev, DEV_SIZE, 0), 0);
		cr_assert_eq(iorec_image(rec, &p, d, &img, &len), 0);
		cr_assert_eq(len, DEV_SIZE);
		cr_expect_arr_eq(img, dev, DEV_SIZE, "dev %u", d);
		free(img);
	}
	iorec_plan_free(&p);
}

/* Flushes are per device: flushing dev 0 makes nothing of dev 1 durable. */
Test(iorecord, flush_is_per_device)
{
	size_t nr = workload();
	struct iorec_plan p;

	cr_assert_eq(iorec_plan(rec, &(struct iorec_cut) { .at = nr, .keep_pct = 0 }, &p), 0);
	/* dev 0: #0 #3 #6 #8 before its flush at #9; #11 after it */
	/* dev 1: #1 #4 before its flush at #5; #7 #10 after it */
	for (size_t i = 0; i < nr; i++) {
		const struct iorec_event *e = iorec_event(rec, i);
		bool durable = i == 0 || i == 3 || i == 6 || i == 8 || i == 1 || i == 4;

		if (e->type == IOREC_WRITE)
			cr_expect_eq(p.bytes[i], durable ? e->len : 0, "event %zu", i);
	}
	cr_expect_eq(p.nr_durable, 6);
	cr_expect_eq(p.nr_unflushed, 3);
	cr_expect_eq(p.nr_kept, 0);
	check_image(&p, "keep none");
	iorec_plan_free(&p);
}

/*
 * At every cut point, with nothing, everything, and a seeded half of the
 * unflushed writes kept: durable writes always land, the images match the
 * reference.
 */
Test(iorecord, every_cut_point)
{
	static const unsigned keep[] = { 0, 100, 50 };
	size_t nr = workload();

	for (size_t at = 0; at <= nr; at++)
		for (unsigned k = 0; k < 3; k++)
			for (uint64_t seed = 1; seed <= 5; seed++) {
				struct iorec_cut cut = { at, seed, keep[k], seed & 1 };
				struct iorec_plan p;
				char what[96];

				cr_assert_eq(iorec_plan(rec, &cut, &p), 0);
				snprintf(what, sizeof(what), "at %zu keep %u seed %llu torn %d",
					 at, keep[k], (unsigned long long)seed, cut.torn);
				for (size_t i = 0; i < at; i++) {
					const struct iorec_event *e = iorec_event(rec, i);

					if (e->type == IOREC_WRITE && flushed_later(i, at))
						cr_assert_eq(p.bytes[i], e->len, "%s: #%zu", what, i);
					if (e->type != IOREC_WRITE || flushed_later(i, at))
						continue;
					if (keep[k] == 100 && i != p.torn_event)
						cr_assert_eq(p.bytes[i], e->len, "%s: #%zu", what, i);
					if (keep[k] == 0)
						cr_assert_eq(p.bytes[i], 0, "%s: #%zu", what, i);
				}
				check_image(&p, what);
				iorec_plan_free(&p);
			}
}

Test(iorecord, same_seed_same_plan_and_seeds_vary)
{
	size_t nr = workload();
	struct iorec_cut cut = { .at = nr, .seed = 42, .keep_pct = 50, .torn = true };
	struct iorec_plan a, b;
	unsigned kept[12] = { 0 }, distinct = 0;
	size_t first[12];

	cr_assert_eq(iorec_plan(rec, &cut, &a), 0);
	cr_assert_eq(iorec_plan(rec, &cut, &b), 0);
	cr_expect_arr_eq(a.bytes, b.bytes, nr * sizeof(size_t), "seed 42 not reproducible");
	cr_expect_eq(a.torn_event, b.torn_event);
	iorec_plan_free(&b);
	memcpy(first, a.bytes, sizeof(first));
	iorec_plan_free(&a);

	for (uint64_t seed = 0; seed < 64; seed++) {
		cut.seed = seed;
		cut.torn = false;
		cr_assert_eq(iorec_plan(rec, &cut, &a), 0);
		distinct += !!memcmp(a.bytes, first, sizeof(first));
		for (size_t i = 0; i < nr; i++)
			kept[i] += !!a.bytes[i];
		iorec_plan_free(&a);
	}
	cr_expect_gt(distinct, 0);
	/* The three unflushed writes (#7 #10 #11) are each kept sometimes, lost sometimes. */
	cr_expect(kept[7] > 0 && kept[7] < 64, "#7 kept %u/64", kept[7]);
	cr_expect(kept[10] > 0 && kept[10] < 64, "#10 kept %u/64", kept[10]);
	cr_expect(kept[11] > 0 && kept[11] < 64, "#11 kept %u/64", kept[11]);
}

/* Check one torn plan: a sector-aligned proper prefix of a tearable write. */
static size_t check_tear(const struct iorec_plan *p, uint64_t seed)
{
	const struct iorec_event *e;
	size_t n;

	cr_assert_neq(p->torn_event, SIZE_MAX, "seed %llu: nothing torn",
		      (unsigned long long)seed);
	e = iorec_event(rec, p->torn_event);
	n = p->bytes[p->torn_event];
	cr_assert(n > 0 && n < e->len, "seed %llu: tear %zu of %zu",
		  (unsigned long long)seed, n, e->len);
	cr_assert_eq((e->offset + n) % SECTOR_BYTES, 0,
		     "seed %llu: tear of #%zu not at a sector boundary",
		     (unsigned long long)seed, p->torn_event);
	check_image(p, "torn");
	return p->torn_event;
}

/*
 * At the end of the workload the unflushed writes are #7, #10 and #11, all
 * tearable; at cut 7 they are #3 (unaligned: 4196..7196) and #6 (one
 * sector, untearable).  Over many seeds every candidate gets torn.
 */
Test(iorecord, torn_write_lands_a_sector_prefix)
{
	size_t nr = workload();
	unsigned seen[12] = { 0 };
	struct iorec_plan p;

	for (uint64_t seed = 0; seed < 200; seed++) {
		struct iorec_cut cut = { .at = nr, .seed = seed, .keep_pct = 100, .torn = true };

		cr_assert_eq(iorec_plan(rec, &cut, &p), 0);
		seen[check_tear(&p, seed)]++;
		iorec_plan_free(&p);

		cut.at = 7;
		cr_assert_eq(iorec_plan(rec, &cut, &p), 0);
		cr_assert_eq(check_tear(&p, seed), 3, "seed %llu", (unsigned long long)seed);
		iorec_plan_free(&p);
	}
	cr_expect(seen[7] && seen[10] && seen[11], "torn: #7 %u, #10 %u, #11 %u times",
		  seen[7], seen[10], seen[11]);
	cr_expect_eq(seen[7] + seen[10] + seen[11], 200);
}

Test(iorecord, nothing_to_tear)
{
	struct iorec_plan p;

	wr(0, 1100, 200, 1);		/* one sector: no tear point */
	wr(1, 0, 4096, 2);
	fl(1);
	cr_assert_eq(iorec_plan(rec, &(struct iorec_cut) {
		.at = 3, .seed = 7, .keep_pct = 100, .torn = true }, &p), 0);
	cr_expect_eq(p.torn_event, SIZE_MAX);
	cr_expect_eq(p.bytes[0], 200);
	cr_expect_eq(p.bytes[1], 4096);
	iorec_plan_free(&p);
}

Test(iorecord, write_image_and_describe)
{
	size_t nr = workload();
	struct iorec_plan p;
	char path[128], *desc;
	void *img;
	size_t len;

	cr_assert_eq(iorec_plan(rec, &(struct iorec_cut) {
		.at = nr, .seed = 3, .keep_pct = 100, .torn = true }, &p), 0);
	snprintf(path, sizeof(path), "%s/crash1.img", tmpdir);
	cr_assert_eq(iorec_write_image(rec, &p, 1, path), 0);
	cr_assert_eq(iorec_image(rec, &p, 1, &img, &len), 0);

	struct bch_blockdev *c;
	unsigned char buf[DEV_SIZE];
	cr_assert_eq(bch_dev_open(path, BCH_DEV_RDONLY, &c), 0);
	cr_assert_eq(bch_dev_size(c), DEV_SIZE);
	cr_assert_eq(bch_dev_read(c, buf, DEV_SIZE, 0), 0);
	cr_expect_arr_eq(buf, img, len);
	bch_dev_close(c);
	free(img);

	desc = iorec_plan_describe(rec, &p);
	cr_assert(desc);
	cr_expect(strstr(desc, "#0 dev 0 off 0 len 4096: durable\n"), "%s", desc);
	cr_expect(strstr(desc, "#2 dev 0 flush\n"), "%s", desc);
	cr_expect(strstr(desc, "torn at "), "%s", desc);
	free(desc);
	iorec_plan_free(&p);
}

/*
 * iorec_follow(): a handle opened later on the same file records as the
 * device followed (read-write opens only), the attach-time handle may be
 * closed under it, and after iorec_unfollow() new handles record nothing.
 */
Test(iorecord, follow_records_reopened_handles)
{
	struct bch_blockdev *bd, *ro;
	unsigned char buf[SECTOR_BYTES];

	cr_assert_eq(iorec_follow(rec, NR_DEVS, dev_path(1)), -EINVAL);
	cr_assert_eq(iorec_follow(rec, 1, "/nonexistent/dev.img"), -ENOENT);
	cr_assert_eq(iorec_follow(rec, 1, dev_path(1)), 0);
	bch_dev_close(devs[1]);		/* as a library call closing the filesystem */
	devs[1] = NULL;

	cr_assert_eq(bch_dev_open(dev_path(1), 0, &bd), 0);
	cr_assert_eq(bch_dev_open(dev_path(1), BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &ro), 0);
	memset(buf, 0xab, sizeof(buf));
	cr_assert_eq(bch_dev_write(bd, buf, sizeof(buf), 1024), 0);
	cr_assert_eq(bch_dev_flush(bd), 0);
	cr_assert_eq(bch_dev_read(ro, buf, sizeof(buf), 0), 0);
	bch_dev_close(ro);
	cr_assert_eq(iorec_nr_events(rec), 2);
	const struct iorec_event *e = iorec_event(rec, 0);
	cr_assert(e->type == IOREC_WRITE && e->dev == 1 && e->offset == 1024 && e->len == sizeof(buf));
	e = iorec_event(rec, 1);
	cr_assert(e->type == IOREC_FLUSH && e->dev == 1);
	/* device 0 is not followed: its other handles do not record */
	struct bch_blockdev *other;
	cr_assert_eq(bch_dev_open(dev_path(0), BCH_DEV_NO_LOCK, &other), 0);
	cr_assert_eq(bch_dev_write(other, buf, sizeof(buf), 0), 0);
	bch_dev_close(other);
	cr_assert_eq(iorec_nr_events(rec), 2);

	iorec_unfollow(rec);
	bch_dev_close(bd);
	cr_assert_eq(bch_dev_open(dev_path(1), 0, &bd), 0);
	cr_assert_eq(bch_dev_write(bd, buf, sizeof(buf), 0), 0);
	bch_dev_close(bd);
	cr_assert_eq(iorec_nr_events(rec), 2);
}
