// SPDX-License-Identifier: GPL-2.0
/*
 * journal_review40_test.c - a review of the journal writer's queue (sealed
 * entries queued behind the one in flight, h-journal40): what must hold
 * once an entry in the queue is lost.
 *
 *  - after a queued entry's write failed (the fs gone emergency read-only),
 *    a second fsync must not succeed: the entries after the hole are not
 *    durable, and no entry may be written past the hole (replay would stop
 *    there, or worse apply it over a missing one);
 *  - the same through bch_journal_flush_step(), as the FUSE daemon's fsync
 *    calls it.
 * Fixed scenario, no timing: the writer's first write fails in the hook.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
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

#ifndef BCH_JWRITER_QUEUE
#define BCH_JWRITER_QUEUE	1	/* main before h-journal40: one entry in flight at most */
#endif

TestSuite(journal_review40, .fini = writerhold_teardown);

/* The writer's first write fails; everything else goes by (counted). */
static bool fail_done;
static unsigned writes_after_fail;

static int fail_first_hook(void *priv, struct bch_blockdev *dev, enum bch_io_op op,
			   uint64_t offset, const void *buf, size_t len)
{
	int ret = writerhold_hook(priv, dev, op, offset, buf, len);

	if (ret || op != BCH_IO_WRITE)
		return ret;
	if (len >= sizeof(struct bch_jset) && ((const struct bch_jset *)buf)->magic == BCH_JSET_MAGIC) {
		if (!__atomic_exchange_n(&fail_done, true, __ATOMIC_SEQ_CST))
			return -EIO;
		__atomic_add_fetch(&writes_after_fail, 1, __ATOMIC_SEQ_CST);
	}
	return 0;
}

/*
 * nr entries sealed and handed to the writer, the first of which fails
 * (held at its write until all are queued), then extra records in the
 * open entry; with step, an fsync's entry queued after them (nr + 1
 * in all).  Returns the filesystem; *durable_to: first tag not durable
 * before, *end: the next tag.
 */
static struct bch_fs *lose_queued_entries(unsigned nr, unsigned extra, bool step,
					  unsigned *durable_to, unsigned *end)
{
	struct bch_fs *c = writerhold_fresh_journal("jrev40");
	static struct bch_io_hook h = { .fn = fail_first_hook };
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	*durable_to = tag;
	fail_done = false;
	writes_after_fail = 0;
	writerhold_reset(BCH_IO_WRITE);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	for (unsigned i = 0; i < nr; i++) {
		tag = writerhold_fill_entry(c, tag);
		if (!i)
			cr_assert(writerhold_wait_held(), "the full entry's write never came from the writer");
	}
	for (unsigned i = 0; i < extra; i++)
		testfs_journal_record(c, tag++, 40);
	if (step) {	/* an fsync's entry queued last: the open entry left empty */
		uint64_t seq = 0;
		if (!nr)
			testfs_journal_record(c, tag++, 40);
		cr_assert_eq(bch_journal_flush_step(c, &seq), 1, "%s", c->err_msg);
		cr_assert_eq(bch_journal_seq_open(c), seq + 1);
		if (!nr)
			cr_assert(writerhold_wait_held(), "the fsync's write never came from the writer");
	}
	writerhold_let_go();
	bch_journal_flush_wait(c);
	*end = tag;
	return c;
}

/*
 * Replay path: 0 or the read's error; *why says what is wrong (tags
 * [1, upto) all there, none in [upto, end), no bad entry), "" if nothing.
 */
static int replay_check(const char *path, unsigned upto, unsigned end, char *why, size_t len)
{
	struct testfs_jseen *s = calloc(1, sizeof(*s));
	int ret = testfs_journal_replay(path, s);

	why[0] = 0;
	if (ret)
		snprintf(why, len, "the journal no longer reads: %s", bch_err_str(ret));
	else if (s->bad)
		snprintf(why, len, "replayed a bad or out-of-order entry");
	for (unsigned t = 1; !ret && !why[0] && t < end; t++)
		if (s->tag[t] != (t < upto))
			snprintf(why, len, "tag %u %s (durable up to %u, of %u)", t,
				 s->tag[t] ? "replayed" : "lost", upto - 1, end - 1);
	free(s);
	return ret;
}

static void second_fsync_fails(unsigned nr, unsigned extra, bool step)
{
	unsigned durable_to, end;
	struct bch_fs *c = lose_queued_entries(nr, extra, step, &durable_to, &end);
	uint64_t lost = bch_journal_seq_open(c) - nr - step;	/* the entry whose write failed */
	char why[200];

	int r1 = bch_journal_flush(c);
	cr_assert_neq(r1, 0, "the failed entry's flush succeeded");
	cr_assert(c->emergency_ro);
	cr_assert_lt(bch_journal_seq_durable(c), lost);
	/* an fsync again, as an application retrying or a second file's fsync */
	int r2 = bch_journal_flush(c);
	uint64_t durable = bch_journal_seq_durable(c);
	unsigned after = __atomic_load_n(&writes_after_fail, __ATOMIC_SEQ_CST);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	testfs_journal_close(c);
	replay_check(writerhold_paths[0], durable_to, end, why, sizeof(why));
	cr_assert_neq(r2, 0, "an fsync after entry %" PRIu64 " was lost succeeded (durable %" PRIu64
		      ", %u entry writes after the failure; replay: %s)", lost, durable, after,
		      why[0] ? why : "fine");
	cr_assert_lt(durable, lost, "entry %" PRIu64 " lost, durable says %" PRIu64, lost, durable);
	cr_assert_eq(after, 0, "%u journal entries written after the lost one", after);
	cr_assert_not(why[0], "after the lost entry: %s", why);
}

/*
 * One entry in flight, lost: a second bch_journal_flush() writes the open
 * entry past the hole and answers 0; the journal then reads as entries
 * missing.
 */
Test(journal_review40, second_fsync_after_a_lost_entry, .timeout = 120)
{
	second_fsync_fails(1, 5, false);
}

/* The same with the queue full: the first entry lost, three cancelled behind it. */
Test(journal_review40, second_fsync_after_lost_queue, .timeout = 120)
{
	second_fsync_fails(BCH_JWRITER_QUEUE, 5, false);
}

/*
 * The FUSE daemon's fsync (bch_journal_flush_step with the wait between):
 * the first answers the error; a second must too, and write nothing.
 */
Test(journal_review40, second_flush_step_after_lost_queue, .timeout = 120)
{
	unsigned durable_to, end;
	struct bch_fs *c = lose_queued_entries(BCH_JWRITER_QUEUE, 5, false, &durable_to, &end);
	uint64_t lost = bch_journal_seq_open(c) - BCH_JWRITER_QUEUE;
	char why[200];
	int r[2];

	for (unsigned k = 0; k < 2; k++) {
		uint64_t seq = 0;
		unsigned n = 0;
		while ((r[k] = bch_journal_flush_step(c, &seq)) > 0) {
			cr_assert_lt(n++, 100, "the step never ended");
			bch_journal_flush_wait(c);
		}
	}
	uint64_t durable = bch_journal_seq_durable(c);
	unsigned after = __atomic_load_n(&writes_after_fail, __ATOMIC_SEQ_CST);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	testfs_journal_close(c);
	replay_check(writerhold_paths[0], durable_to, end, why, sizeof(why));
	cr_assert_neq(r[0], 0, "the first fsync after the lost entry succeeded");
	cr_assert_neq(r[1], 0, "the second fsync after entry %" PRIu64 " was lost succeeded "
		      "(durable %" PRIu64 ", %u entry writes after; replay: %s)", lost, durable, after,
		      why[0] ? why : "fine");
	cr_assert_lt(durable, lost);
	cr_assert_eq(after, 0, "%u journal entries written after the lost one", after);
	cr_assert_not(why[0], "after the lost entry: %s", why);
}

/*
 * Nothing committed after the lost entries (the last queued is an fsync's,
 * the open entry empty): a second fsync (another file whose changes were
 * in them) must answer the error too.  bch_journal_seq_needed() is
 * j->written, set back before the hole, so "everything so far" looks
 * durable.
 */
Test(journal_review40, second_fsync_nothing_new_after_lost_queue, .timeout = 120)
{
	second_fsync_fails(BCH_JWRITER_QUEUE - 1, 0, true);
}

/* The same with only the fsync's entry lost (on main too: its flush step hands it to the writer). */
Test(journal_review40, second_fsync_nothing_new_after_lost_fsync_entry, .timeout = 120)
{
	second_fsync_fails(0, 0, true);
}

/*
 * The writer's nth op of one kind (a write, or a flush: preflushes and,
 * with stubs, entries' own flushes) fails while the queue is full: the
 * flush answers the error, nothing at or after the failed entry counts as
 * durable, and the image replays every record up to what was durable, in
 * order, none after a missing one.
 */
static int nth_op, nth_n;
static pthread_t nth_test_thread;
static bool nth_failed_stub, nth_own_flush, nth_after_write;		/* the failed write was a stub's: fails nothing */
static unsigned nth_seen;
static uint64_t nth_last_written, nth_failed_after;	/* jset seqs the writer wrote */

static int nth_hook(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
		    const void *buf, size_t len)
{
	int ret = writerhold_hook(priv, dev, op, offset, buf, len);
	const struct bch_jset *js = buf;

	if (ret || pthread_equal(pthread_self(), nth_test_thread))
		return ret;
	if ((int)op == nth_op && __atomic_add_fetch(&nth_seen, 1, __ATOMIC_SEQ_CST) == (unsigned)nth_n) {
		nth_failed_after = __atomic_load_n(&nth_last_written, __ATOMIC_SEQ_CST);
		nth_failed_stub = op == BCH_IO_WRITE && js->magic == BCH_JSET_MAGIC &&
				  (js->flags & BCH_JSET_STUB);
		nth_own_flush = op == BCH_IO_FLUSH && nth_after_write;
		return -EIO;
	}
	nth_after_write = op == BCH_IO_WRITE && len >= sizeof(*js) && js->magic == BCH_JSET_MAGIC &&
			  !(js->flags & BCH_JSET_STUB);
	if (op == BCH_IO_WRITE && len >= sizeof(*js) && js->magic == BCH_JSET_MAGIC &&
	    !(js->flags & BCH_JSET_STUB))
		__atomic_store_n(&nth_last_written, js->seq, __ATOMIC_SEQ_CST);
	return 0;
}

static void nth_op_fails(int op, int n)
{
	struct bch_fs *c = writerhold_fresh_journal("jrev40");
	static struct bch_io_hook h = { .fn = nth_hook };
	static uint64_t tag_seq[4096];
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	nth_op = op;
	nth_n = n;
	nth_seen = 0;
	nth_last_written = nth_failed_after = 0;
	nth_failed_stub = nth_own_flush = nth_after_write = false;
	nth_test_thread = pthread_self();
	writerhold_reset(BCH_IO_FLUSH);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	for (unsigned i = 0; i < BCH_JWRITER_QUEUE; i++) {
		uint64_t seq = bch_journal_seq_open(c);
		writerhold_other_write(c);
		while (bch_journal_seq_open(c) == seq) {
			cr_assert_lt(tag, 4096);
			tag_seq[tag] = testfs_journal_record(c, tag, 200);
			tag++;
		}
		if (i == 0)
			cr_assert(writerhold_wait_held(), "the writer's preflush never came");
	}
	writerhold_let_go();
	int r = bch_journal_flush(c);
	uint64_t durable = bch_journal_seq_durable(c);
	unsigned seen = __atomic_load_n(&nth_seen, __ATOMIC_SEQ_CST);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_assert_geq(seen, (unsigned)n, "only %u ops of the kind came", seen);
	if (nth_failed_stub) {
		cr_assert_eq(r, 0, "a stub's write failed: %s", c->err_msg);
	} else {
		cr_assert_neq(r, 0, "op %d #%d failed, the flush succeeded", op, n);
		cr_assert(c->emergency_ro);
	}
	/*
	 * A failed write or preflush: its entry is the one after the last
	 * written, and nothing from it on is durable; a failed entry's own
	 * flush (stubs): nothing from the last written on.
	 */
	if (!nth_failed_stub)
		cr_assert_lt(durable, nth_failed_after + !nth_own_flush,
			     "durable %" PRIu64 ", the failure after entry %" PRIu64, durable,
			     nth_failed_after);
	testfs_journal_close(c);

	struct testfs_jseen *s = calloc(1, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	cr_assert_not(s->bad, "a bad or out-of-order entry");
	bool hole = false;
	for (unsigned t = 2; t < tag; t++) {
		if (tag_seq[t] <= durable)
			cr_assert(s->tag[t], "tag %u (seq %" PRIu64 ", durable %" PRIu64 ") lost", t,
				  tag_seq[t], durable);
		cr_assert(!hole || !s->tag[t], "tag %u replayed after a missing one", t);
		hole |= !s->tag[t];
	}
	cr_log_info("op %d #%d failed after entry %" PRIu64 "%s: durable %" PRIu64 ", replayed to %"
		    PRIu64, op, n, nth_failed_after, nth_failed_stub ? " (a stub)" : nth_own_flush ?
		    " (its own flush)" : "", durable, s->last);
	free(s);
}

Test(journal_review40, second_write_of_the_queue_fails, .timeout = 120) { nth_op_fails(BCH_IO_WRITE, 2); }
Test(journal_review40, third_write_of_the_queue_fails, .timeout = 120) { nth_op_fails(BCH_IO_WRITE, 3); }
Test(journal_review40, second_flush_of_the_queue_fails, .timeout = 120) { nth_op_fails(BCH_IO_FLUSH, 2); }
Test(journal_review40, third_flush_of_the_queue_fails, .timeout = 120) { nth_op_fails(BCH_IO_FLUSH, 3); }
Test(journal_review40, fourth_flush_of_the_queue_fails, .timeout = 120) { nth_op_fails(BCH_IO_FLUSH, 4); }
Test(journal_review40, fourth_write_of_the_queue_fails, .timeout = 120) { nth_op_fails(BCH_IO_WRITE, 4); }
Test(journal_review40, fifth_flush_of_the_queue_fails, .timeout = 120) { nth_op_fails(BCH_IO_FLUSH, 5); }

/*
 * bch_journal_seq_durable_now() (the daemon's bch_fs_journal_seqs(), at
 * every command body's lock) reaps the failed entry first: the first
 * fsync after it must still answer the error.  It answers 0 (and, with
 * records in the open entry, writes it past the hole).
 */
static void first_fsync_after_durable_now(unsigned extra)
{
	unsigned durable_to, end;
	struct bch_fs *c = lose_queued_entries(BCH_JWRITER_QUEUE, extra, false, &durable_to, &end);
	uint64_t lost = bch_journal_seq_open(c) - BCH_JWRITER_QUEUE;
	char why[200];

	uint64_t d = bch_journal_seq_durable_now(c);
	int r = bch_journal_flush(c);
	uint64_t durable = bch_journal_seq_durable(c);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	testfs_journal_close(c);
	replay_check(writerhold_paths[0], durable_to, end, why, sizeof(why));
	cr_assert_lt(d, lost);
	cr_assert_neq(r, 0, "the first fsync after entry %" PRIu64 " was lost succeeded (durable %"
		      PRIu64 "; replay: %s)", lost, durable, why[0] ? why : "fine");
	cr_assert_lt(durable, lost);
	cr_assert_not(why[0], "after the lost entry: %s", why);
}

Test(journal_review40, fsync_after_durable_now_reaped_the_failure, .timeout = 120)
{
	first_fsync_after_durable_now(5);
}

/*
 * Fork after the writer finished two queued entries, the first written,
 * the second failed, neither reaped: the child inherits the writer's
 * failure (w->failed) and runs its copies of the jobs itself.  It must
 * see the loss as the parent would: an error at its flush, the fs
 * emergency read-only, and no entry written past the hole.  In the child
 * the first job is cancelled with the second's error (it ran fine), and
 * jwriter_reap_one() takes a cancelled job for one lost "with an earlier
 * entry, which said so": no bch_fs_error(), j->written not set back; a
 * later flush writes entry 4 after the missing 3 and answers 0.
 */

Test(journal_review40, fork_after_a_queued_entry_failed, .timeout = 120)
{
	struct bch_fs *c = writerhold_fresh_journal("jrev40");
	static struct bch_io_hook h = { .fn = writerhold_fail_second_jset };
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	writerhold_jset_writes = 0;
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	tag = writerhold_fill_entry(c, tag);
	tag = writerhold_fill_entry(c, tag);
	uint64_t lost = bch_journal_seq_open(c) - 1;	/* the second entry */
	bch_journal_flush_wait(c);	/* both done, neither reaped */
	cr_assert_eq(__atomic_load_n(&writerhold_jset_writes, __ATOMIC_SEQ_CST), 2);

	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		/* the child: no criterion asserts (they would report twice); bits say what went wrong */
		bch_dev_set_hook(c->devs[0]->bdev, NULL);
		int st = 0;
		if (!bch_journal_flush(c))
			st |= 1;		/* the loss not reported */
		if (!c->emergency_ro)
			st |= 2;		/* the fs goes on writing */
		bch_journal_flush(c);
		int r = bch_journal_flush(c);
		if (!r || bch_journal_seq_durable(c) >= lost)
			st |= 4;		/* a later flush succeeds past the lost entry */
		testfs_journal_close(c);
		struct testfs_jseen *s = calloc(1, sizeof(*s));
		if (testfs_journal_replay(writerhold_paths[0], s) || s->bad)
			st |= 8;		/* the journal no longer reads */
		_exit(st);
	}
	int st = 0;
	pid_t w = 0;
	for (unsigned ms = 0; ms < 20000 && !(w = waitpid(pid, &st, WNOHANG)); ms += 10)
		usleep(10000);
	if (!w) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		cr_assert_fail("the child hung");
	}
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_assert_neq(bch_journal_flush(c), 0, "the parent's flush after its lost entry");
	testfs_journal_close(c);
	cr_assert(WIFEXITED(st), "the child died (status %d)", st);
	int x = WEXITSTATUS(st);
	cr_assert_eq(x, 0, "in the child:%s%s%s%s", x & 1 ? " the first flush answered 0;" : "",
		     x & 2 ? " not emergency read-only after it;" : "",
		     x & 4 ? " a later flush answered 0 past the lost entry;" : "",
		     x & 8 ? " the journal no longer reads" : "");
}

/*
 * The small ring (31 buckets) lapped by fsyncs as the FUSE daemon makes
 * them: several fsyncs under way at once, each a bch_journal_flush_step()
 * sequence (its entry queued behind those in flight, or waiting for them)
 * with records committed in between and bch_journal_flush_wait() now and
 * then, the writer slowed so entries queue; a pin holds last_seq back
 * most of the time (the ring runs short).  No step fails (journal_full
 * nowhere), every fsync ends with its seq durable, and every record from
 * the last pin on replays in order.  Seed 40.
 */
static struct bch_journal_pin step_pin;
static unsigned step_pin_flushes;

static int step_pin_flush(struct bch_fs *c, struct bch_journal_pin *pin, uint64_t seq)
{
	(void)seq;
	step_pin_flushes++;
	bch_journal_pin_drop(c, pin);
	return 0;
}

static int slow_writer_hook(void *priv, struct bch_blockdev *dev, enum bch_io_op op,
			    uint64_t offset, const void *buf, size_t len)
{
	(void)priv; (void)dev; (void)offset; (void)buf; (void)len; (void)op;
	if (!pthread_equal(pthread_self(), nth_test_thread))
		usleep(500);
	return 0;
}

Test(journal_review40, small_ring_lapped_by_fsync_steps, .timeout = 300)
{
	struct bch_fs *c = writerhold_fresh_journal("jrev40");
	static struct bch_io_hook h = { .fn = slow_writer_hook };
	struct { uint64_t seq; bool on; } fs[6] = { 0 };
	unsigned tag = 2, pin_tag = 0, ended = 0, waited = 0;

	nth_test_thread = pthread_self();
	step_pin_flushes = 0;
	memset(&step_pin, 0, sizeof(step_pin));
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	srandom(40);
	for (; tag < 3000; tag++) {
		uint64_t seq = testfs_journal_record(c, tag, 100 + random() % 600);
		if (!step_pin.seq && tag % 70 == 0) {
			bch_journal_pin_add(c, &step_pin, seq, step_pin_flush);
			pin_tag = tag;
		}
		unsigned k = random() % 6;
		if (!fs[k].on && random() % 3 == 0) {
			fs[k].on = true;
			fs[k].seq = 0;
		}
		for (unsigned i = 0; i < 6; i++) {
			if (!fs[i].on || random() % 2)
				continue;
			int r = bch_journal_flush_step(c, &fs[i].seq);
			cr_assert_geq(r, 0, "tag %u, fsync %u: %s (%s)", tag, i, bch_err_str(r), c->err_msg);
			if (!r) {
				cr_assert_geq(bch_journal_seq_durable(c), fs[i].seq, "tag %u: fsync %u ended, "
					      "seq %" PRIu64 " not durable", tag, i, fs[i].seq);
				fs[i].on = false;
				ended++;
			}
		}
		if (random() % 8 == 0) {
			bch_journal_flush_wait(c);
			waited++;
		}
	}
	if (!step_pin.seq) {
		bch_journal_pin_add(c, &step_pin, testfs_journal_record(c, tag, 100), step_pin_flush);
		pin_tag = tag++;
	}
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_log_info("small ring by fsync steps: %u pin flushes, %u fsyncs ended, %u waits",
		    step_pin_flushes, ended, waited);
	cr_assert_gt(step_pin_flushes, 2, "the ring never ran short (%u pin flushes)", step_pin_flushes);
	testfs_journal_close(c);

	struct testfs_jseen *s = calloc(1, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	cr_assert_not(s->bad, "replayed a bad or out-of-order entry");
	for (unsigned t = pin_tag; t < tag; t++)
		cr_assert(s->tag[t], "tag %u (pinned from %u, of %u) lost", t, pin_tag, tag - 1);
	free(s);
}

/*
 * Power cuts at every event of a run made durable by fsync steps (the
 * daemon's way: each fsync's entry queued behind those in flight, the
 * writer's own flush making it durable), several under way at once: a
 * record is counted durable once a step answered 0 for a seq at or past
 * it; at every cut whatever was counted durable replays, and the tags
 * replayed are a prefix.  Seed 41.
 */
Test(journal_review40, power_cut_with_fsync_steps_queued, .timeout = 900)
{
	struct bch_fs *c = writerhold_fresh_journal("jrev40");
	struct iorec *rec = iorec_new(1);
	static size_t flushed_at[4096];
	static uint64_t tag_seq[4096];
	struct { uint64_t seq; bool on; } fs[4] = { 0 };
	unsigned tag = 2, ended = 0;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	flushed_at[1] = 0;
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	srandom(41);
	for (unsigned i = 0; i < 40; i++) {
		for (unsigned n = 1 + random() % 6; n; n--) {
			flushed_at[tag] = SIZE_MAX;
			tag_seq[tag] = testfs_journal_record(c, tag, 50 + random() % 400);
			tag++;
		}
		unsigned k = random() % 4;
		if (!fs[k].on) {
			fs[k].on = true;
			fs[k].seq = 0;
		}
		for (unsigned f = 0; f < 4; f++) {
			if (!fs[f].on)
				continue;
			int r = bch_journal_flush_step(c, &fs[f].seq);
			cr_assert_geq(r, 0, "%s", c->err_msg);
			if (r)
				continue;
			fs[f].on = false;
			ended++;
			for (unsigned u = 2; u < tag; u++)
				if (flushed_at[u] == SIZE_MAX && tag_seq[u] <= fs[f].seq)
					flushed_at[u] = iorec_nr_events(rec);
		}
		if (random() % 3 == 0)
			bch_journal_flush_wait(c);
	}
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	testfs_journal_close(c);
	cr_assert_gt(ended, 10, "only %u fsyncs ended", ended);

	unsigned states = writerhold_check_cuts(rec, events, tag, flushed_at, 2, 43, true);

	cr_log_info("power cuts with fsync steps: %zu events, %u states, %u records, %u fsyncs",
		    events, states, tag - 1, ended);
	iorec_free(rec);
}
