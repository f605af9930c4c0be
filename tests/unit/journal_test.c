// SPDX-License-Identifier: GPL-2.0
/*
 * journal_test.c - the journal on its own (no btree): entries written and
 * read back in order from last_seq, pins holding last_seq and flushed by
 * reclaim, the ring wrapping many times without failing, replication to two
 * devices (either one serves), a damaged entry in the replay range detected,
 * entries without a header checksum (older writers) still read, a bucket
 * read through a window (never held whole), and power cuts at every point of a recorded workload.
 * Seeds are fixed and printed on failure.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "checksum.h"
#include "errcode.h"
#include "format.h"
#include "journal.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64], paths[2][128];

static void make_fs_bucket(unsigned nr, unsigned replicas, unsigned bucket_size);

static void make_fs(unsigned nr, unsigned replicas)
{
	make_fs_bucket(nr, replicas, 64 << 10);
}

static void make_fs_bucket(unsigned nr, unsigned replicas, unsigned bucket_size)
{
	struct bch_format_dev devs[2] = { 0 };
	struct bch_format_args args = { .no_btrees = true };
	struct bch_opts o;
	char err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "journal");
	for (unsigned i = 0; i < nr; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/d%u.img", tmpdir, i);
		devs[i].path = paths[i];
		devs[i].size = bucket_size > (64 << 10) ? 48 << 20 : 8 << 20;
		devs[i].bucket_size = bucket_size;
		devs[i].durability = 1;
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 64 << 10);
	bch_opt_set(&o, Opt_metadata_replicas, replicas);
	cr_assert_eq(bch_format(devs, nr, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);
}

/* Nonzero: open_fs() takes the filesystem for one of this format version. */
static unsigned force_version;
/* open_fs(): members not given (a degraded open), a bit per index */
static uint64_t force_missing;

/* A bch_fs with devices open and the journal initialised (what fs.c does). */
static struct bch_fs *open_fs(char paths_[][128], unsigned nr, bool ro)
{
	return testfs_journal_open(paths_, nr, ro, force_version, force_missing);
}

/* A new one-device filesystem, its (empty) journal read and started for writing. */
static struct bch_fs *fresh_journal(uint64_t *newest)
{
	make_fs(1, 1);
	struct bch_fs *c = open_fs(paths, 1, false);

	cr_assert_eq(bch_journal_read(c, NULL, NULL, newest), 0);
	bch_journal_start(c, 1);
	return c;
}

struct seen {
	uint64_t	first, last, nr;
	uint64_t	tags[4096];
	unsigned	nr_tags;
	bool		bad;
};

static int collect(struct bch_fs *c, struct bch_jset *j, void *priv)
{
	struct seen *s = priv;
	struct bch_jset_entry *e;

	(void)c;
	if (!s->nr)
		s->first = j->seq;
	else if (j->seq != s->last + 1)
		s->bad = true;
	s->last = j->seq;
	s->nr++;
	for_each_jset_entry(e, j) {
		if (e->type != BCH_JSET_ENTRY_btree_keys || !e->u64s)
			continue;
		uint64_t tag = e->_data[0] / 1000003;
		for (unsigned i = 0; i < e->u64s; i++)
			if (e->_data[i] != tag * 1000003 + i)
				s->bad = true;
		if (s->nr_tags < 4096)
			s->tags[s->nr_tags++] = tag;
	}
	return 0;
}

static struct bch_journal_pin test_pin;
static unsigned pin_flushes;

static int pin_flush(struct bch_fs *c, struct bch_journal_pin *pin, uint64_t seq)
{
	(void)seq;
	pin_flushes++;
	bch_journal_pin_drop(c, pin);
	return 0;
}

Test(journal, write_read_with_pins)
{
	make_fs(1, 1);
	struct bch_fs *c = open_fs(paths, 1, false);
	uint64_t newest;
	struct seen *s = calloc(1, sizeof(*s));

	cr_assert_eq(bch_journal_read(c, NULL, NULL, &newest), 0);
	cr_assert_eq(newest, 0, "fresh journal not empty");
	bch_journal_start(c, 1);

	uint64_t first = testfs_journal_record(c, 1, 10);
	bch_journal_pin_add(c, &test_pin, first, pin_flush);
	for (unsigned t = 2; t <= 50; t++) {
		testfs_journal_record(c, t, 1 + t % 30);
		if (t % 5 == 0)
			cr_assert_eq(bch_journal_flush(c), 0);
	}
	cr_assert_eq(bch_journal_last_seq(c), first);
	uint64_t durable = bch_journal_seq_durable(c);
	testfs_journal_record(c, 51, 3);		/* never flushed: must not be seen */
	testfs_journal_close(c);

	c = open_fs(paths, 1, true);
	cr_assert_eq(bch_journal_read(c, collect, s, &newest), 0, "%s", c->err_msg);
	cr_assert_eq(newest, durable);
	cr_assert_not(s->bad);
	cr_assert_eq(s->first, first, "replay starts at the pinned seq");
	cr_assert_eq(s->nr_tags, 50, "tags seen: %u", s->nr_tags);
	for (unsigned i = 0; i < 50; i++)
		cr_assert_eq(s->tags[i], i + 1);
	testfs_journal_close(c);
	free(s);
	test_tmpdir_remove(tmpdir);
}

/*
 * A bucket is read through a window (64 KiB), not held whole: 512 KiB
 * buckets holding entries of 5 KB are read 64 KiB at a time, and an entry
 * of 96 KB (longer than the window, across its edges) is still read whole
 * and replayed in order between the small ones.
 */
Test(journal, read_through_window)
{
	const unsigned bucket = 512 << 10, window = 64 << 10;

	for (unsigned big = 0; big < 2; big++) {
		make_fs_bucket(1, 1, bucket);
		struct bch_fs *c = open_fs(paths, 1, false);
		struct seen *s = calloc(1, sizeof(*s));
		uint64_t newest, first = 0;

		cr_assert_eq(bch_journal_read(c, NULL, NULL, &newest), 0);
		bch_journal_start(c, 1);
		memset(&test_pin, 0, sizeof(test_pin));	/* the last round's journal is gone */
		for (unsigned t = 1; t <= 40; t++) {
			uint64_t seq = testfs_journal_record(c, t, big && t == 21 ? 12000 : 600);
			if (!first) {
				first = seq;
				bch_journal_pin_add(c, &test_pin, first, pin_flush);	/* replay from it */
			}
			cr_assert_eq(bch_journal_flush(c), 0);
		}
		cr_assert_eq(bch_journal_last_seq(c), first, "last_seq %" PRIu64 ", %u pin flushes",
			     bch_journal_last_seq(c), pin_flushes);
		testfs_journal_close(c);

		c = open_fs(paths, 1, true);
		cr_assert_eq(bch_journal_read(c, collect, s, &newest), 0, "%s", c->err_msg);
		cr_assert(!s->bad, "entries out of order or damaged (big %u)", big);
		cr_assert_eq(s->first, first, "replayed from %" PRIu64 ", the first record is %" PRIu64, s->first, first);
		cr_assert_eq(s->nr_tags, 40, "%u records replayed (big %u)", s->nr_tags, big);
		for (unsigned i = 0; i < s->nr_tags; i++)
			cr_assert_eq(s->tags[i], i + 1);
		size_t held = bch_journal_read_window_max(c);
		if (big)	/* the entry whole, and not the bucket */
			cr_assert(held >= 96000 && held < bucket, "held %zu bytes", held);
		else
			cr_assert(held <= window, "held %zu bytes of a bucket of %u", held, bucket);
		testfs_journal_close(c);
		free(s);
		test_tmpdir_remove(tmpdir);
	}
}

Test(journal, ring_wraps_and_reclaims)
{
	uint64_t newest;
	struct bch_fs *c = fresh_journal(&newest);

	pin_flushes = 0;
	/* far more data than the ring holds, with a pin always held: reclaim must flush it */
	for (unsigned t = 1; t <= 3000; t++) {
		uint64_t seq = testfs_journal_record(c, t, 200);
		if (!test_pin.seq)
			bch_journal_pin_add(c, &test_pin, seq, pin_flush);
		if (t % 3 == 0)
			cr_assert_eq(bch_journal_flush(c), 0, "t %u: %s", t, c->err_msg);
	}
	cr_assert_gt(pin_flushes, 0, "reclaim never flushed the pin");
	cr_assert_eq(bch_journal_reclaim_all(c), 0, "%s", c->err_msg);
	uint64_t durable = bch_journal_seq_durable(c);
	testfs_journal_close(c);

	struct seen *s = calloc(1, sizeof(*s));
	c = open_fs(paths, 1, true);
	cr_assert_eq(bch_journal_read(c, collect, s, &newest), 0, "%s", c->err_msg);
	cr_assert_eq(newest, durable);
	cr_assert_eq(s->nr, 1, "after reclaim_all only the last entry is needed");
	testfs_journal_close(c);
	free(s);
	test_tmpdir_remove(tmpdir);
}

Test(journal, too_big_refused)
{
	struct bch_journal_res res;
	uint64_t newest;
	struct bch_fs *c = fresh_journal(&newest);

	cr_assert_eq(bch_journal_res_get(c, 1U << 20, &res), -EINVAL);
	testfs_journal_close(c);
	test_tmpdir_remove(tmpdir);
}

Test(journal, replicated_either_device_serves)
{
	make_fs(2, 2);
	struct bch_fs *c = open_fs(paths, 2, false);
	uint64_t newest;

	cr_assert_eq(bch_journal_read(c, NULL, NULL, &newest), 0);
	bch_journal_start(c, 1);
	uint64_t first = testfs_journal_record(c, 1, 5);
	bch_journal_pin_add(c, &test_pin, first, pin_flush);
	for (unsigned t = 2; t <= 20; t++)
		testfs_journal_record(c, t, 5), bch_journal_flush(c);
	uint64_t durable = bch_journal_seq_durable(c);
	testfs_journal_close(c);

	/* wipe the journal of one device at a time: the other has every entry */
	for (unsigned wipe = 0; wipe < 2; wipe++) {
		char copy[2][128];
		for (unsigned i = 0; i < 2; i++) {
			snprintf(copy[i], sizeof(copy[i]), "%s/copy%u.img", tmpdir, i);
			char cmd[400];
			snprintf(cmd, sizeof(cmd), "cp %s %s", paths[i], copy[i]);
			cr_assert_eq(system(cmd), 0);
		}
		struct bch_fs *w = open_fs(copy, 2, false);
		struct bch_sb_field_journal *jf = bch_sb_get_journal(w->sb);
		unsigned runs = (jf->field.u64s * 8 - sizeof(jf->field)) / sizeof(jf->runs[0]);
		for (unsigned r = 0; r < runs; r++) {
			if (jf->runs[r].dev != wipe)
				continue;
			struct bch_member *m = bch_sb_member(w->sb, wipe);
			size_t bytes = (size_t)jf->runs[r].nr * m->bucket_size * 512;
			void *z = calloc(1, bytes);
			cr_assert_eq(bch_dev_write(w->devs[wipe]->bdev, z, bytes,
						   jf->runs[r].start * m->bucket_size * 512), 0);
			free(z);
		}
		testfs_journal_close(w);
		struct seen *s = calloc(1, sizeof(*s));
		w = open_fs(copy, 2, true);
		cr_assert_eq(bch_journal_read(w, collect, s, &newest), 0, "wipe %u: %s", wipe, w->err_msg);
		cr_assert_eq(newest, durable);
		cr_assert_eq(s->nr_tags, 20, "wipe %u: %u tags", wipe, s->nr_tags);
		testfs_journal_close(w);
		free(s);
	}
	test_tmpdir_remove(tmpdir);
}

Test(journal, damaged_entry_in_replay_range)
{
	uint64_t newest;
	struct bch_fs *c = fresh_journal(&newest);
	uint64_t first = testfs_journal_record(c, 1, 5);
	bch_journal_pin_add(c, &test_pin, first, pin_flush);
	cr_assert_eq(bch_journal_flush(c), 0);
	testfs_journal_record(c, 2, 5);
	cr_assert_eq(bch_journal_flush(c), 0);
	testfs_journal_record(c, 3, 5);
	cr_assert_eq(bch_journal_flush(c), 0);
	testfs_journal_close(c);

	/* the second entry sits right after the first (one block each) */
	c = open_fs(paths, 1, false);
	struct bch_sb_field_journal *jf = bch_sb_get_journal(c->sb);
	struct bch_member *m = bch_sb_member(c->sb, 0);
	uint64_t at = jf->runs[0].start * m->bucket_size * 512 + (uint64_t)c->sb->block_size * 512 + 100;
	unsigned char junk = 0x55;
	cr_assert_eq(bch_dev_write(c->devs[0]->bdev, &junk, 1, at), 0);
	testfs_journal_close(c);

	struct seen *s = calloc(1, sizeof(*s));
	c = open_fs(paths, 1, true);
	int ret = bch_journal_read(c, collect, s, &newest);
	cr_assert_eq(ret, -BCH_ERR_journal_missing, "damage not detected: %d", ret);
	cr_assert(strstr(c->err_msg, "missing"), "%s", c->err_msg);
	testfs_journal_close(c);
	free(s);
	test_tmpdir_remove(tmpdir);
}

/*
 * Entries written before the header checksum existed (flag clear, field 0)
 * are still read: their buckets are dated by reading the whole first entry.
 * A header checksum that does not match makes the entry invalid.
 */
Test(journal, entries_without_header_checksum)
{
	uint64_t newest;
	force_version = BCH_VERSION_1;	/* one ring, no stubs: entries back to back */
	struct bch_fs *c = fresh_journal(&newest);

	for (unsigned i = 1; i <= 3; i++) {
		uint64_t seq = testfs_journal_record(c, i, 5);
		if (i == 1)	/* held: every entry is in the replay range */
			bch_journal_pin_add(c, &test_pin, seq, pin_flush);
		cr_assert_eq(bch_journal_flush(c), 0);
	}
	testfs_journal_close(c);

	/* rewrite the entries as an older version wrote them */
	c = open_fs(paths, 1, false);
	struct bch_sb_field_journal *jf = bch_sb_get_journal(c->sb);
	struct bch_member *m = bch_sb_member(c->sb, 0);
	size_t block = (size_t)c->sb->block_size * 512;
	uint64_t start = jf->runs[0].start * m->bucket_size * 512;
	struct bch_jset *js = bch_dev_alloc_buf(block);
	unsigned rewritten = 0;
	for (unsigned b = 0; b < 3; b++) {
		cr_assert_eq(bch_dev_read(c->devs[0]->bdev, js, block, start + b * block), 0);
		if (js->magic != BCH_JSET_MAGIC)
			continue;
		cr_assert(js->flags & BCH_JSET_HDR_CSUM, "new entries carry a header checksum");
		js->flags &= ~BCH_JSET_HDR_CSUM;
		js->hdr_csum = 0;
		cr_assert_eq(bch_checksum(js->flags & 0xf, &js->magic,
					  sizeof(*js) - sizeof(js->csum) + js->u64s * 8, &js->csum), 0);
		cr_assert_eq(bch_dev_write(c->devs[0]->bdev, js, block, start + b * block), 0);
		rewritten++;
	}
	cr_assert_eq(rewritten, 3);
	testfs_journal_close(c);

	struct seen *s = calloc(1, sizeof(*s));
	c = open_fs(paths, 1, true);
	cr_assert_eq(bch_journal_read(c, collect, s, &newest), 0, "%s", c->err_msg);
	cr_assert_eq(newest, 3);
	cr_assert(!s->bad);
	cr_assert_eq(s->nr_tags, 3, "tags replayed: %u", s->nr_tags);
	testfs_journal_close(c);

	/* a header checksum that does not match its header: not an entry */
	c = open_fs(paths, 1, false);
	cr_assert_eq(bch_dev_read(c->devs[0]->bdev, js, block, start + 2 * block), 0);
	js->flags |= BCH_JSET_HDR_CSUM;
	js->hdr_csum = 12345;
	cr_assert_eq(bch_checksum(js->flags & 0xf, &js->magic,
				  sizeof(*js) - sizeof(js->csum) + js->u64s * 8, &js->csum), 0);
	cr_assert_eq(bch_dev_write(c->devs[0]->bdev, js, block, start + 2 * block), 0);
	testfs_journal_close(c);
	memset(s, 0, sizeof(*s));
	c = open_fs(paths, 1, true);
	cr_assert_eq(bch_journal_read(c, collect, s, &newest), 0, "%s", c->err_msg);
	cr_assert_eq(newest, 2, "the entry with a bad header checksum was taken");
	testfs_journal_close(c);
	free(js);
	free(s);
	force_version = 0;
	test_tmpdir_remove(tmpdir);
}

/* Power cuts: whatever was flushed is replayed; nothing invalid is. */
Test(journal, crash_every_cut, .timeout = 300)
{
	make_fs(1, 1);
	struct bch_fs *c = open_fs(paths, 1, false);
	struct iorec *rec = iorec_new(1);
	uint64_t newest;
	size_t flushed_at[200];		/* event count once tag t was durable */
	unsigned nr_tags = 0;

	cr_assert_eq(bch_journal_read(c, NULL, NULL, &newest), 0);
	bch_journal_start(c, 1);
	uint64_t first = testfs_journal_record(c, ++nr_tags, 4);
	flushed_at[nr_tags] = SIZE_MAX;
	bch_journal_pin_add(c, &test_pin, first, pin_flush);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	srandom(77);
	pin_flushes = 0;
	/* as many records as the ring of a lane holds with the pin kept (checked below) */
	for (unsigned i = 0; i < 36; i++) {
		unsigned t = ++nr_tags;
		testfs_journal_record(c, t, 1 + random() % 300);
		flushed_at[t] = SIZE_MAX;
		if (random() % 3 == 0) {
			cr_assert_eq(bch_journal_flush(c), 0);
			for (unsigned u = 1; u <= t; u++)
				if (flushed_at[u] == SIZE_MAX)
					flushed_at[u] = iorec_nr_events(rec);
		}
	}
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	testfs_journal_close(c);
	cr_assert_eq(pin_flushes, 0, "the ring filled: the pin was flushed, tag 1 need not be replayed");

	char crash[1][128];
	snprintf(crash[0], sizeof(crash[0]), "%s/crash.img", tmpdir);
	unsigned states = 0;
	for (size_t at = 0; at <= events; at++)
		for (unsigned seed = 0; seed < 4; seed++) {
			struct iorec_cut cut = { .at = at, .seed = seed * 31 + at, .keep_pct = 50,
						 .torn = seed & 1 };
			struct iorec_plan plan;
			struct seen *s = calloc(1, sizeof(*s));

			cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
			cr_assert_eq(iorec_write_image(rec, &plan, 0, crash[0]), 0);
			struct bch_fs *r = open_fs(crash, 1, true);
			int ret = bch_journal_read(r, collect, s, &newest);
			char *why = ret || s->bad ? iorec_plan_describe(rec, &plan) : NULL;
			cr_assert_eq(ret, 0, "cut %zu seed %u: %s\n%s", at, seed, r->err_msg, why);
			cr_assert_not(s->bad, "cut %zu seed %u: replayed a bad or out-of-order entry\n%s",
				      at, seed, why);
			/* every tag durable before the cut is replayed (the pin keeps all) */
			for (unsigned u = 1; u <= nr_tags; u++) {
				if (flushed_at[u] > at)
					continue;
				bool found = false;
				for (unsigned k = 0; k < s->nr_tags; k++)
					found |= s->tags[k] == u;
				cr_assert(found, "cut %zu seed %u: flushed tag %u lost\n%s", at, seed, u,
					  why = iorec_plan_describe(rec, &plan));
			}
			testfs_journal_close(r);
			free(s);
			free(why);
			iorec_plan_free(&plan);
			states++;
		}
	cr_log_info("journal crash: %zu events, %u states", events, states);
	iorec_free(rec);
	test_tmpdir_remove(tmpdir);
}

/*
 * Flushes on a small journal (8 MiB device, 64 KiB buckets), with a pin taken
 * once and never renewed, like a file written once and then fsynced forever:
 * the pin holds last_seq, so only reclaim can free the ring.  20,000 flushes
 * must all succeed, and flushes with nothing new must write nothing.
 */
#define FLUSH_LOOPS	20000

Test(journal, flush_loop_never_fills)
{
	uint64_t newest;
	struct bch_fs *c = fresh_journal(&newest);

	pin_flushes = 0;
	uint64_t first = testfs_journal_record(c, 1, 20);
	bch_journal_pin_add(c, &test_pin, first, pin_flush);
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);

	/* nothing new: nothing written */
	uint64_t durable = bch_journal_seq_durable(c);
	for (unsigned i = 0; i < FLUSH_LOOPS; i++)
		cr_assert_eq(bch_journal_flush(c), 0, "empty flush %u: %s", i, c->err_msg);
	cr_assert_eq(bch_journal_seq_durable(c), durable,
		     "%" PRIu64 " entries written by flushes with nothing new",
		     bch_journal_seq_durable(c) - durable);
	cr_assert_eq(pin_flushes, 0);

	/* something depends on each entry (a seq handed out, or a reservation) */
	for (unsigned i = 0; i < FLUSH_LOOPS; i++) {
		if (i & 1) {
			struct bch_journal_res res;
			cr_assert_eq(bch_journal_res_get(c, 0, &res), 0, "res %u: %s", i, c->err_msg);
			bch_journal_res_put(c, &res);
		} else {
			bch_journal_cur_seq(c);
		}
		cr_assert_eq(bch_journal_flush(c), 0, "flush %u: %s", i, c->err_msg);
	}
	cr_assert(!c->emergency_ro);
	cr_assert_eq(pin_flushes, 1, "reclaim flushed the pin %u times", pin_flushes);
	uint64_t written = bch_journal_seq_durable(c) - durable;
	cr_assert_geq(written, FLUSH_LOOPS);
	cr_assert_leq(written, FLUSH_LOOPS + FLUSH_LOOPS / 10, "%" PRIu64 " entries for %u flushes",
		      written, FLUSH_LOOPS);
	cr_log_info("journal: %u flushes wrote %" PRIu64 " entries", FLUSH_LOOPS, written);
	durable = bch_journal_seq_durable(c);
	testfs_journal_close(c);

	/* what is left replays: from the newest entry's last_seq, in order */
	struct seen *s = calloc(1, sizeof(*s));
	c = open_fs(paths, 1, true);
	cr_assert_eq(bch_journal_read(c, collect, s, &newest), 0, "%s", c->err_msg);
	cr_assert_eq(newest, durable);
	cr_assert_not(s->bad);
	cr_assert_gt(s->first, first, "last_seq never advanced past the reclaimed pin");
	testfs_journal_close(c);
	free(s);
	test_tmpdir_remove(tmpdir);
}

/*
 * Flushes from inside a btree operation (or the allocator) may not reclaim:
 * they write into the reserve.  The next flush from the top reclaims and
 * the journal goes on.
 */
Test(journal, nested_flushes_then_reclaim)
{
	uint64_t newest;
	struct bch_fs *c = fresh_journal(&newest);

	pin_flushes = 0;
	bch_journal_pin_add(c, &test_pin, testfs_journal_record(c, 1, 20), pin_flush);
	for (unsigned i = 0; i < 3000 && !pin_flushes; i++) {
		c->alloc_flushing = i % 2;	/* nested and from the top, in turn */
		bch_journal_cur_seq(c);
		cr_assert_eq(bch_journal_flush(c), 0, "flush %u: %s", i, c->err_msg);
	}
	c->alloc_flushing = false;
	cr_assert_eq(pin_flushes, 1);
	for (unsigned t = 2; t < 500; t++) {
		testfs_journal_record(c, t, 50);
		cr_assert_eq(bch_journal_flush(c), 0, "t %u: %s", t, c->err_msg);
	}
	cr_assert_eq(bch_journal_reclaim_all(c), 0, "%s", c->err_msg);
	testfs_journal_close(c);
	test_tmpdir_remove(tmpdir);
}

/* Read every valid stub (version 2) and entry header of dev 0's journal: seq -> offset. */
struct jrec {
	uint64_t	seq, off;
	bool		stub;
};

static unsigned journal_records(struct bch_fs *c, struct jrec *out, unsigned max)
{
	struct bch_sb_field_journal *jf = bch_sb_get_journal(c->sb);
	struct bch_member *m = bch_sb_member(c->sb, 0);
	size_t block = (size_t)c->sb->block_size * 512;
	uint64_t start = jf->runs[0].start * m->bucket_size * 512;
	uint64_t len = (uint64_t)jf->runs[0].nr * m->bucket_size * 512;
	struct bch_jset *js = bch_dev_alloc_buf(block);
	unsigned n = 0;

	for (uint64_t off = start; off < start + len && n < max; off += block) {
		cr_assert_eq(bch_dev_read(c->devs[0]->bdev, js, block, off), 0);
		if (js->magic != BCH_JSET_MAGIC || !js->seq)
			continue;
		out[n++] = (struct jrec) { js->seq, off, !!(js->flags & BCH_JSET_STUB) };
	}
	free(js);
	return n;
}

static void zero_block(struct bch_fs *c, uint64_t off)
{
	size_t block = (size_t)c->sb->block_size * 512;
	void *z = calloc(1, block);

	cr_assert_eq(bch_dev_write(c->devs[0]->bdev, z, block, off), 0);
	free(z);
}

/*
 * One copy on one device (version 2): each entry's stub goes to the other
 * half of the journal once the entry is durable.  Zeroing the newest
 * entries (their stubs left) is found: entries missing, not a journal that
 * simply ended there.  Zeroing an entry and its stub is not (documented).
 */
Test(journal, stub_finds_lost_tail)
{
	uint64_t newest;
	struct bch_fs *c = fresh_journal(&newest);
	uint64_t last = 0;

	for (unsigned t = 1; t <= 6; t++) {
		last = testfs_journal_record(c, t, 5);
		if (t == 1)
			bch_journal_pin_add(c, &test_pin, last, pin_flush);
		cr_assert_eq(bch_journal_flush(c), 0);
	}
	bch_journal_pin_drop(c, &test_pin);
	testfs_journal_close(c);

	c = open_fs(paths, 1, false);
	struct jrec r[256];
	unsigned n = journal_records(c, r, 256), entries = 0, stubs = 0;
	for (unsigned i = 0; i < n; i++) {
		entries += !r[i].stub;
		stubs += r[i].stub;
	}
	cr_assert_geq(stubs, 6, "a stub per entry: %u entries, %u stubs", entries, stubs);
	/* the two newest entries, not their stubs */
	for (unsigned i = 0; i < n; i++)
		if (!r[i].stub && r[i].seq + 1 >= last)
			zero_block(c, r[i].off);
	testfs_journal_close(c);

	struct seen *s = calloc(1, sizeof(*s));
	c = open_fs(paths, 1, true);
	int ret = bch_journal_read(c, collect, s, &newest);
	cr_assert_eq(ret, -BCH_ERR_journal_missing, "lost tail not found: %d (%s)", ret, c->err_msg);
	cr_assert(strstr(c->err_msg, "missing"), "%s", c->err_msg);
	testfs_journal_close(c);

	/* and the newest entry with its stub: what a crash before the write leaves */
	c = open_fs(paths, 1, false);
	n = journal_records(c, r, 256);
	for (unsigned i = 0; i < n; i++)
		if (r[i].seq + 2 >= last)
			zero_block(c, r[i].off);
	testfs_journal_close(c);
	c = open_fs(paths, 1, true);
	memset(s, 0, sizeof(*s));
	ret = bch_journal_read(c, collect, s, &newest);
	cr_assert_eq(ret, 0, "%s", c->err_msg);
	cr_assert_eq(newest, last - 3);
	testfs_journal_close(c);
	free(s);
	test_tmpdir_remove(tmpdir);
}

/*
 * Two copies on one device (metadata_replicas=2, version 2): the copies of
 * every entry are in the two halves of the journal; zeroing one half's
 * newest blocks loses nothing.
 */
Test(journal, copies_on_one_device)
{
	uint64_t newest;
	make_fs(1, 2);
	struct bch_fs *c = open_fs(paths, 1, false);
	cr_assert_eq(bch_journal_read(c, NULL, NULL, &newest), 0);
	bch_journal_start(c, 1);
	uint64_t last = 0;

	for (unsigned t = 1; t <= 8; t++) {
		last = testfs_journal_record(c, t, 5);
		if (t == 1)
			bch_journal_pin_add(c, &test_pin, last, pin_flush);
		cr_assert_eq(bch_journal_flush(c), 0);
	}
	testfs_journal_close(c);

	c = open_fs(paths, 1, false);
	struct jrec r[256];
	unsigned n = journal_records(c, r, 256), copies = 0;
	uint64_t half = 0;
	for (unsigned i = 0; i < n; i++) {
		cr_assert_not(r[i].stub, "two copies: no stubs");
		copies += r[i].seq == last;
		if (r[i].seq == last && r[i].off > half)
			half = r[i].off;	/* the copy in the second half */
	}
	cr_assert_eq(copies, 2, "entry %" PRIu64 " has %u copies", last, copies);
	/* every record of the second half: its newest blocks and more */
	for (unsigned i = 0; i < n; i++)
		if (r[i].off >= half - 3 * (uint64_t)c->sb->block_size * 512 && r[i].off <= half)
			zero_block(c, r[i].off);
	testfs_journal_close(c);

	struct seen *s = calloc(1, sizeof(*s));
	c = open_fs(paths, 1, true);
	cr_assert_eq(bch_journal_read(c, collect, s, &newest), 0, "%s", c->err_msg);
	cr_assert_eq(newest, last);
	cr_assert_eq(s->nr_tags, 8, "tags replayed: %u", s->nr_tags);
	testfs_journal_close(c);
	free(s);
	test_tmpdir_remove(tmpdir);
}

/*
 * Lanes split differently in two sessions: a degraded one (member 1 not
 * given) splits member 0's ring in two lanes, entries alternating between
 * them with their stubs; the next one, with both members, reads member 0's
 * ring whole.  Every entry from last_seq on is found there.
 */
Test(journal, lanes_then_whole_ring)
{
	uint64_t newest;
	struct seen *s = calloc(1, sizeof(*s));

	make_fs(2, 1);
	force_missing = 1ULL << 1;
	struct bch_fs *c = open_fs(paths, 1, false);
	force_missing = 0;
	pin_flushes = 0;
	cr_assert_eq(bch_journal_read(c, NULL, NULL, &newest), 0, "%s", c->err_msg);
	cr_assert_eq(bch_journal_start(c, 1), 0, "%s", c->err_msg);
	uint64_t pinned = 0, durable = 0;
	for (unsigned t = 1; t <= 20; t++) {
		uint64_t seq = testfs_journal_record(c, t, 5);
		/* last_seq moves on to tag 14's entry: the first of the second bucket of one lane, the
		 * other lane's second bucket starting one entry earlier */
		if (t == 1 || t == 14) {
			if (test_pin.seq)
				bch_journal_pin_drop(c, &test_pin);
			bch_journal_pin_add(c, &test_pin, seq, pin_flush);
			pinned = seq;
		}
		cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
		durable = seq;
	}
	cr_assert_eq(bch_journal_last_seq(c), pinned, "last_seq %" PRIu64 ", pinned %" PRIu64 ", %u pin flushes",
		     bch_journal_last_seq(c), pinned, pin_flushes);
	bch_journal_pin_drop(c, &test_pin);
	testfs_journal_close(c);		/* a crash: no clean record */

	c = open_fs(paths, 2, true);
	int ret = bch_journal_read(c, collect, s, &newest);
	cr_assert_eq(ret, 0, "entries from last_seq %" PRIu64 " not all read: %s", pinned, c->err_msg);
	cr_assert_eq(newest, durable);
	cr_assert_not(s->bad);
	cr_assert_eq(s->first, pinned, "replay starts at %" PRIu64 ", last_seq is %" PRIu64, s->first, pinned);
	cr_assert_eq(s->nr_tags, 7, "tags seen: %u", s->nr_tags);
	for (unsigned i = 0; i < 7; i++)
		cr_assert_eq(s->tags[i], 14 + i);
	testfs_journal_close(c);
	free(s);
	test_tmpdir_remove(tmpdir);
}
