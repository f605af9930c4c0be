// SPDX-License-Identifier: GPL-2.0
/*
 * journal_async_test.c - the journal writer (issue 32): an entry written
 * because it is full is preflushed and written by the writer thread while
 * requests fill the next entry.
 *
 *  - off the request path: the full entry's preflush and write reach the
 *    device from another thread, and while they are held up, reservations
 *    fill the next entry; a flush then waits for the one in flight, and
 *    everything is replayed after a reopen;
 *  - a kill while the writer is held up (after its preflush, before its
 *    write; and before the preflush): the image as the process leaves it
 *    replays everything flushed before, and nothing out of order;
 *  - power cuts at every event of a run of full entries with few flushes
 *    (iorecord): whatever was flushed is replayed;
 *  - a fork with an entry in flight (fusemount opens, then goes to the
 *    background): the child, where the writer thread is not, writes it
 *    itself and goes on with a writer of its own.
 * Fixed seeds, printed on failure.  No timing: the hook holds the writer
 * until the test lets it go (a 20 s bound only so a bug cannot hang the run).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "errcode.h"
#include "journal.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/writerhold.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/tmpdir.h"

/* The journal and its directory: writerhold_fresh_journal(), tests/lib/writerhold.h. */

TestSuite(journal_async, .fini = writerhold_teardown);

/*
 * A full entry's preflush and write are the writer's: while its preflush
 * is held up, the next entry fills (a request waits only when both are
 * busy), nothing counts as durable, and a flush afterwards makes all of it
 * durable.  Fails when the full entry is written in line: the preflush is
 * then the test thread's.
 */
Test(journal_async, full_entry_written_while_the_next_fills, .timeout = 120)
{
	struct bch_fs *c = writerhold_fresh_journal("jasync");
	struct bch_io_hook h = { .fn = writerhold_hook };
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	uint64_t durable = bch_journal_seq_durable(c);

	writerhold_reset(BCH_IO_FLUSH);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	tag = writerhold_fill_entry(c, tag);
	cr_assert(writerhold_wait_held(), "the full entry's preflush never came from the writer "
		  "(preflushes by the request thread: %u)", writerhold_own_flushes);
	/* the writer is inside its preflush: requests go on into the next entry */
	unsigned next_first = tag;
	for (unsigned i = 0; i < 20; i++)
		testfs_journal_record(c, tag++, 50);
	bool still_held = writerhold_held();
	unsigned own = writerhold_own_flushes;
	cr_assert(still_held, "the writer went on by itself");
	cr_assert_eq(own, 0, "the request thread flushed %u times while filling", own);
	cr_assert_eq(bch_journal_seq_durable(c), durable, "an entry not yet written counts as durable");
	cr_assert_gt(next_first, 2);

	writerhold_let_go();
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	cr_assert_eq(bch_journal_seq_durable(c), bch_journal_seq_open(c) - 1);
	cr_assert_geq(writerhold_writer_writes, 1, "the full entry was not written by the writer");
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_assert_eq(writerhold_pin_flushes, 0, "the ring filled: the pin went");
	testfs_journal_close(c);

	struct testfs_jseen *s = calloc(1, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	cr_assert_not(s->bad, "replayed a bad or out-of-order entry");
	for (unsigned t = 1; t < tag; t++)
		cr_assert(s->tag[t], "tag %u (of %u) lost", t, tag - 1);
	free(s);
}

/*
 * A kill while the writer is held: before its preflush, and after it (the
 * entry not yet written).  The image as the process leaves it (a copy of
 * the file: what a kill -9 leaves in the page cache) replays every record
 * flushed before, in order; and after letting go, everything.
 */
static void kill_while_held(int op)
{
	struct bch_fs *c = writerhold_fresh_journal("jasync");
	struct bch_io_hook h = { .fn = writerhold_hook };
	char crash[160];
	unsigned tag = 2;

	snprintf(crash, sizeof(crash), "%s/killed.img", writerhold_dir);
	/* a few full entries written, then a flush: tags below flushed_to are durable */
	for (unsigned i = 0; i < 3; i++)
		tag = writerhold_fill_entry(c, tag);
	testfs_journal_record(c, tag++, 5);
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	unsigned flushed_to = tag;

	writerhold_reset(op);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	tag = writerhold_fill_entry(c, tag);
	cr_assert(writerhold_wait_held(), "op %d: the writer never came", op);
	for (unsigned i = 0; i < 10; i++)
		testfs_journal_record(c, tag++, 50);
	testfs_copy_file(writerhold_paths[0], crash);

	struct testfs_jseen *s = calloc(1, sizeof(*s));
	int ret = testfs_journal_replay(crash, s);
	cr_assert_eq(ret, 0, "op %d: killed with the writer held: %s", op, bch_err_str(ret));
	cr_assert_not(s->bad, "op %d: replayed a bad or out-of-order entry", op);
	for (unsigned t = 1; t < flushed_to; t++)
		cr_assert(s->tag[t], "op %d: flushed tag %u lost", op, t);
	for (unsigned t = flushed_to; t < tag; t++)
		cr_assert_not(s->tag[t], "op %d: tag %u of the held entry replayed", op, t);

	writerhold_let_go();
	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_assert_eq(writerhold_pin_flushes, 0, "the ring filled: the pin went");
	testfs_journal_close(c);
	memset(s, 0, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	cr_assert_not(s->bad);
	for (unsigned t = 1; t < tag; t++)
		cr_assert(s->tag[t], "op %d: tag %u lost after the flush", op, t);
	free(s);
}

Test(journal_async, kill_before_the_preflush, .timeout = 120)
{
	kill_while_held(BCH_IO_FLUSH);
}

Test(journal_async, kill_between_preflush_and_write, .timeout = 120)
{
	kill_while_held(BCH_IO_WRITE);
}

/*
 * Power cuts at every event of a run of full entries (the writer's) with a
 * flush now and then: every record flushed before the cut is replayed, and
 * only whole entries in order.  The writer's I/O interleaves with the test
 * thread's in the record, as it may on a device.
 */
Test(journal_async, power_cut_every_event, .timeout = 600)
{
	struct bch_fs *c = writerhold_fresh_journal("jasync");
	struct iorec *rec = iorec_new(1);
	size_t flushed_at[4096];	/* event count once tag t was durable */
	unsigned tag = 2;

	flushed_at[1] = SIZE_MAX;

	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	srandom(32);
	for (unsigned i = 0; i < 30; i++) {
		for (unsigned n = 1 + random() % 6; n; n--) {
			flushed_at[tag] = SIZE_MAX;
			testfs_journal_record(c, tag++, 50 + random() % 300);
		}
		if (random() % 6 == 0) {
			cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
			for (unsigned u = 1; u < tag; u++)
				if (flushed_at[u] == SIZE_MAX)
					flushed_at[u] = iorec_nr_events(rec);
		}
	}
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	cr_assert_eq(writerhold_pin_flushes, 0, "the ring filled: the pin went");
	testfs_journal_close(c);

	unsigned states = writerhold_check_cuts(rec, events, tag, flushed_at, 2, 31, false);

	cr_log_info("journal_async power cuts: %zu events, %u states, %u records", events, states,
		    tag - 1);
	iorec_free(rec);
}

/*
 * Fork while the writer holds an entry (held before its write): in the
 * child the parent's thread is not there; the child writes the entry
 * itself when it needs it, starts a writer of its own for the next full
 * entries, and everything it flushed is replayed.  The parent then only
 * lets its writer finish (the same bytes at the same place) and closes.
 */
Test(journal_async, fork_with_an_entry_in_flight, .timeout = 120)
{
	struct bch_fs *c = writerhold_fresh_journal("jasync");
	struct bch_io_hook h = { .fn = writerhold_hook };
	unsigned tag = 2;

	writerhold_reset(BCH_IO_WRITE);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	tag = writerhold_fill_entry(c, tag);
	cr_assert(writerhold_wait_held(), "the writer never came");

	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		/* the child: no criterion asserts (they would report twice) */
		bch_dev_set_hook(c->devs[0]->bdev, NULL);
		for (unsigned i = 0; i < 3; i++) {
			uint64_t seq = bch_journal_seq_open(c);
			while (bch_journal_seq_open(c) == seq)
				testfs_journal_record(c, tag++, 200);
		}
		int ok = !bch_journal_flush(c) && bch_journal_seq_durable(c) == bch_journal_seq_open(c) - 1 &&
			 !writerhold_pin_flushes;
		testfs_journal_close(c);
		struct testfs_jseen *s = calloc(1, sizeof(*s));
		ok &= !testfs_journal_replay(writerhold_paths[0], s) && !s->bad;
		for (unsigned t = 1; t < tag; t++)
			ok &= s->tag[t];
		_exit(ok ? 0 : 1);
	}
	/* bounded: a child waiting for a thread it does not have is killed, not left */
	int st = 0;
	pid_t w = 0;
	for (unsigned ms = 0; ms < 20000 && !(w = waitpid(pid, &st, WNOHANG)); ms += 10)
		usleep(10000);
	if (!w) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		writerhold_let_go();
		cr_assert_fail("the child hung (waiting for the parent's writer?)");
	}
	cr_assert_eq(w, pid);
	cr_assert(WIFEXITED(st) && !WEXITSTATUS(st), "the child failed (status %d)", st);
	writerhold_let_go();
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	testfs_journal_close(c);
}
