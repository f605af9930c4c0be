// SPDX-License-Identifier: GPL-2.0
/*
 * journal_queue_test.c - the journal writer's queue (issue 32: 4 clients
 * writing 4 KiB at random waited for the writer with the engine lock
 * held): sealed entries queue behind the one in flight, and a commit waits
 * only when the queue is full.
 *
 *  - while the writer is held inside its first entry's preflush, three
 *    more entries fill and are sealed behind it (no wait); the one after
 *    them waits (the queue is full), and everything replays in order once
 *    let go;
 *  - an fsync (bch_journal_flush_step) with entries in flight queues its
 *    own entry behind them at once instead of waiting for them first;
 *  - power cuts at every event of a run where four entries were queued
 *    behind a held writer: whatever was flushed replays, no entry after a
 *    missing one, and only whole entries in order;
 *  - the in-flight entry's write fails with three entries queued behind
 *    it: none of those is written, the failure reaches the flush, and the
 *    image replays nothing of them;
 *  - a small ring filled by queued entries: reservations refused with
 *    journal_full nowhere, every entry within the ring, all replayed.
 * Fixed seeds, printed on failure.  No timing: the hook holds the writer
 * until the test lets it go (a 20 s bound only so a bug cannot hang the
 * run; a test that needs the bound to pass fails its asserts instead).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "errcode.h"
#include "journal.h"
#include "journal_writer.h"
#include "super.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"
#include "tests/lib/writerhold.h"

TestSuite(journal_queue, .fini = writerhold_teardown);

/* Replay path: no bad entry, tags [1, upto) all there, none in [upto, end). */
static void replay_expect(const char *path, unsigned upto, unsigned end, const char *what)
{
	struct testfs_jseen *s = calloc(1, sizeof(*s));

	cr_assert_eq(testfs_journal_replay(path, s), 0, "%s", what);
	cr_assert_not(s->bad, "%s: replayed a bad or out-of-order entry", what);
	for (unsigned t = 1; t < upto; t++)
		cr_assert(s->tag[t], "%s: tag %u (of %u) lost", what, t, upto - 1);
	for (unsigned t = upto; t < end; t++)
		cr_assert_not(s->tag[t], "%s: tag %u replayed", what, t);
	free(s);
}

/*
 * A held writer does not hold up the next entries: BCH_JWRITER_QUEUE - 1
 * more are sealed behind the one held, the writer still held and nothing
 * durable.  Fails with one entry in flight at most: the second fill waits
 * for the held writer (until the hook's 20 s bound lets it go).
 */
Test(journal_queue, entries_sealed_behind_a_held_writer, .timeout = 120)
{
	struct bch_fs *c = writerhold_fresh_journal("jqueue");
	struct bch_io_hook h = { .fn = writerhold_hook };
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	uint64_t durable = bch_journal_seq_durable(c);
	uint64_t first = bch_journal_seq_open(c);

	writerhold_reset(BCH_IO_FLUSH);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	tag = writerhold_fill_entry(c, tag);
	cr_assert(writerhold_wait_held(), "the full entry's preflush never came from the writer");
	for (unsigned i = 1; i < BCH_JWRITER_QUEUE; i++) {
		tag = writerhold_fill_entry(c, tag);
		bool held = writerhold_held();
		cr_assert(held, "entry %u of the queue waited for the held writer", i + 1);
	}
	cr_assert_eq(bch_journal_seq_open(c), first + BCH_JWRITER_QUEUE);
	cr_assert_eq(writerhold_own_flushes, 0, "the request thread flushed");
	cr_assert_eq(writerhold_writer_writes, 0, "an entry was written past the held preflush");
	cr_assert_eq(bch_journal_seq_durable(c), durable, "an entry in the queue counts as durable");
	for (unsigned i = 0; i < 5; i++)
		testfs_journal_record(c, tag++, 50);

	writerhold_let_go();
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	cr_assert_eq(bch_journal_seq_durable(c), bch_journal_seq_open(c) - 1);
	cr_assert_geq(writerhold_writer_writes, BCH_JWRITER_QUEUE);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_assert_eq(writerhold_pin_flushes, 0, "the ring filled: the pin went");
	testfs_journal_close(c);
	replay_expect(writerhold_paths[0], tag, tag, "after the flush");
}

/*
 * The fsync step with an entry in flight hands its own entry over at once
 * (behind the one in flight) and says to wait; once the writer is let go,
 * both are durable.  Fails when the step waits for the entry in flight
 * before sealing its own: the open entry is still open.
 */
Test(journal_queue, fsync_queued_behind_an_entry_in_flight, .timeout = 120)
{
	struct bch_fs *c = writerhold_fresh_journal("jqueue");
	struct bch_io_hook h = { .fn = writerhold_hook };
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	writerhold_reset(BCH_IO_FLUSH);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	tag = writerhold_fill_entry(c, tag);
	cr_assert(writerhold_wait_held(), "the full entry's preflush never came from the writer");
	for (unsigned i = 0; i < 5; i++)
		testfs_journal_record(c, tag++, 40);
	uint64_t seq = 0;
	cr_assert_eq(bch_journal_flush_step(c, &seq), 1, "the step did not wait: %s", c->err_msg);
	cr_assert_eq(bch_journal_seq_open(c), seq + 1, "the fsync's entry was not queued at once");
	bool held = writerhold_held();
	cr_assert(held, "the writer went on by itself");
	cr_assert_eq(writerhold_own_flushes, 0);

	writerhold_let_go();
	int r;
	for (unsigned n = 0; (r = bch_journal_flush_step(c, &seq)) > 0; n++) {
		cr_assert_lt(n, 100, "the step never ended");
		bch_journal_flush_wait(c);
	}
	cr_assert_eq(r, 0, "%s", c->err_msg);
	cr_assert_geq(bch_journal_seq_durable(c), seq);
	cr_assert_eq(writerhold_own_flushes, 0, "the caller flushed %u times", writerhold_own_flushes);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	testfs_journal_close(c);
	replay_expect(writerhold_paths[0], tag, tag, "after the step");
}

/*
 * Power cuts at every event after a held writer let go with the queue
 * full, then more entries and flushes: whatever was flushed before the cut
 * replays, and the tags replayed are a prefix (an entry after a missing
 * one would show as a gap: bad, or a later tag without an earlier one).
 * Entries before the hold were flushed: the recording starts there.
 */
Test(journal_queue, power_cut_with_entries_queued, .timeout = 600)
{
	struct bch_fs *c = writerhold_fresh_journal("jqueue");
	struct bch_io_hook h = { .fn = writerhold_hook };
	struct iorec *rec = iorec_new(1);
	size_t flushed_at[4096];	/* event count once tag t was durable */
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	flushed_at[1] = 0;
	writerhold_reset(BCH_IO_FLUSH);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	unsigned from = tag;
	tag = writerhold_fill_entry(c, tag);
	cr_assert(writerhold_wait_held(), "the full entry's preflush never came from the writer");
	for (unsigned i = 1; i < BCH_JWRITER_QUEUE; i++)
		tag = writerhold_fill_entry(c, tag);
	for (unsigned t = from; t < tag; t++)
		flushed_at[t] = SIZE_MAX;
	/* recorded from here: the held preflush goes by unrecorded (it flushes nothing new) */
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	writerhold_let_go();

	srandom(40);
	for (unsigned i = 0; i < 12; i++) {
		for (unsigned n = 1 + random() % 8; n; n--) {
			flushed_at[tag] = SIZE_MAX;
			testfs_journal_record(c, tag++, 50 + random() % 300);
		}
		if (random() % 4 == 0) {
			cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
			for (unsigned u = 1; u < tag; u++)
				if (flushed_at[u] == SIZE_MAX)
					flushed_at[u] = iorec_nr_events(rec);
		}
	}
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	for (unsigned u = 1; u < tag; u++)
		if (flushed_at[u] == SIZE_MAX)
			flushed_at[u] = iorec_nr_events(rec);
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	cr_assert_eq(writerhold_pin_flushes, 0, "the ring filled: the pin went");
	testfs_journal_close(c);

	unsigned states = writerhold_check_cuts(rec, events, tag, flushed_at, 3, 41, true);

	cr_log_info("journal_queue power cuts: %zu events, %u states, %u records", events, states,
		    tag - 1);
	iorec_free(rec);
}

/*
 * The writer's first write fails (after being held until the queue is
 * full): the entries queued behind it are not written at all, the flush
 * reports the failure (as an fsync would), the filesystem stops writing,
 * and the image replays what was durable before and nothing of the queue.
 */
static unsigned fail_writes_seen;
static bool fail_done;
static pthread_t fail_test_thread;

static int fail_hook(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
		     const void *buf, size_t len)
{
	int ret = writerhold_hook(priv, dev, op, offset, buf, len);

	if (ret || op != BCH_IO_WRITE || pthread_equal(pthread_self(), fail_test_thread))
		return ret;
	/* the writer's: the first (held until the queue was full) fails */
	if (!__atomic_exchange_n(&fail_done, true, __ATOMIC_SEQ_CST))
		return -EIO;
	__atomic_add_fetch(&fail_writes_seen, 1, __ATOMIC_SEQ_CST);
	return 0;
}

Test(journal_queue, failed_write_loses_the_queue_behind_it, .timeout = 120)
{
	struct bch_fs *c = writerhold_fresh_journal("jqueue");
	struct bch_io_hook h = { .fn = fail_hook };
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	unsigned durable_to = tag;
	fail_writes_seen = 0;
	fail_done = false;
	fail_test_thread = pthread_self();
	writerhold_reset(BCH_IO_WRITE);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	tag = writerhold_fill_entry(c, tag);
	cr_assert(writerhold_wait_held(), "the full entry's write never came from the writer");
	for (unsigned i = 1; i < BCH_JWRITER_QUEUE; i++)
		tag = writerhold_fill_entry(c, tag);
	unsigned queued_to = tag;
	writerhold_let_go();

	int ret = bch_journal_flush(c);
	cr_assert_neq(ret, 0, "the failed entry's flush succeeded");
	cr_assert(fail_done, "no write failed");
	cr_assert_eq(fail_writes_seen, 0, "%u writes of entries queued after the failed one",
		     fail_writes_seen);
	cr_assert(c->emergency_ro, "the filesystem goes on writing after a lost entry");
	cr_assert_lt(bch_journal_seq_durable(c), bch_journal_seq_open(c) - BCH_JWRITER_QUEUE);
	struct bch_journal_res res;
	cr_assert_neq(bch_journal_res_get(c, 10, &res), 0, "a commit after the lost entries");
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	testfs_journal_close(c);
	replay_expect(writerhold_paths[0], durable_to, queued_to, "after the failed write");
}

/*
 * A small ring (31 buckets of 64 KiB) lapped a few times while the writer
 * is slowed (1 ms an op in the hook, only so that entries queue up; no
 * assert depends on it): a pin held most of the time keeps last_seq back,
 * so the ring runs short with entries queued, and reservations reclaim
 * (the pin's flush) instead of failing with journal_full.  Every record
 * from the last pin on replays, in order.
 */
static struct bch_journal_pin ring_pin;
static unsigned ring_pin_flushes;
static uint64_t ring_open;		/* the open seq, as the test thread last saw it */
static uint64_t ring_max_depth;		/* most entries sealed behind one being written */
static unsigned ring_own_flushes;	/* flushes by the test thread (under the engine lock) */

static int ring_pin_flush(struct bch_fs *c, struct bch_journal_pin *pin, uint64_t seq)
{
	(void)seq;
	ring_pin_flushes++;
	bch_journal_pin_drop(c, pin);
	return 0;
}

static int slow_hook(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
		     const void *buf, size_t len)
{
	(void)priv; (void)dev; (void)offset;
	if (pthread_equal(pthread_self(), fail_test_thread)) {
		ring_own_flushes += op == BCH_IO_FLUSH;
		return 0;
	}
	if (op == BCH_IO_WRITE && len >= sizeof(struct bch_jset)) {
		const struct bch_jset *js = buf;
		uint64_t open = __atomic_load_n(&ring_open, __ATOMIC_SEQ_CST);
		if (js->magic == BCH_JSET_MAGIC && open > js->seq + 1 &&
		    open - js->seq - 1 > __atomic_load_n(&ring_max_depth, __ATOMIC_SEQ_CST))
			__atomic_store_n(&ring_max_depth, open - js->seq - 1, __ATOMIC_SEQ_CST);
	}
	usleep(1000);
	return 0;
}

Test(journal_queue, small_ring_short_with_entries_queued, .timeout = 300)
{
	struct bch_fs *c = writerhold_fresh_journal("jqueue");
	struct bch_io_hook h = { .fn = slow_hook };
	unsigned tag = 2, pin_tag = 0;

	fail_test_thread = pthread_self();
	ring_pin_flushes = 0;
	ring_max_depth = 0;
	ring_own_flushes = 0;
	memset(&ring_pin, 0, sizeof(ring_pin));
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	for (; tag < 2500; tag++) {
		uint64_t seq = testfs_journal_record(c, tag, 500);
		__atomic_store_n(&ring_open, bch_journal_seq_open(c), __ATOMIC_SEQ_CST);
		if (!ring_pin.seq && tag % 50 == 0) {
			bch_journal_pin_add(c, &ring_pin, seq, ring_pin_flush);
			pin_tag = tag;
		}
	}
	if (!ring_pin.seq) {
		bch_journal_pin_add(c, &ring_pin, testfs_journal_record(c, tag, 500), ring_pin_flush);
		pin_tag = tag++;
	}
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_assert_gt(ring_pin_flushes, 2, "the ring never ran short (%u pin flushes)", ring_pin_flushes);
	cr_assert_geq(ring_max_depth, 2, "entries never queued behind one being written");
	cr_log_info("small ring: %u pin flushes, up to %" PRIu64 " entries queued behind a write, "
		    "%u flushes by the request thread", ring_pin_flushes, ring_max_depth, ring_own_flushes);
	testfs_journal_close(c);

	struct testfs_jseen *s = calloc(1, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	cr_assert_not(s->bad, "replayed a bad or out-of-order entry");
	for (unsigned t = pin_tag; t < tag; t++)
		cr_assert(s->tag[t], "tag %u (pinned from %u, of %u) lost", t, pin_tag, tag - 1);
	free(s);
}
