// SPDX-License-Identifier: GPL-2.0
/*
 * journal_flush_step_test.c - bch_journal_flush_step() (issue 32): an
 * fsync through the daemon hands its entry to the writer thread and lets
 * the engine lock go while the devices work.
 *
 *  - the step hands the entry over: its preflush is the writer's, and while
 *    it is held up the caller adds records and a second fsync finds its
 *    turn after the entry in flight; nothing counts as durable until the
 *    step says so, and then the asked entry is; the second fsync's entry
 *    follows, and everything replays in order;
 *  - a kill while the fsync's entry is held between its preflush and its
 *    write: what was durable before replays, the held entry does not;
 *  - nothing to write: the step says so at once.
 * No timing: the hook holds the writer until the test lets it go (a 20 s
 * bound only so a bug cannot hang the run).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "errcode.h"
#include "journal.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/writerhold.h"
#include "tests/lib/tmpdir.h"

/* The journal and its directory: writerhold_fresh_journal(), tests/lib/writerhold.h. */

/* Steps (waiting between them, as the daemon does without its lock) until done. */
static int step_until_done(struct bch_fs *c, uint64_t *seq)
{
	int r;

	for (unsigned n = 0; (r = bch_journal_flush_step(c, seq)) > 0; n++) {
		cr_assert_lt(n, 100, "the step never ended (seq %llu)", (unsigned long long)*seq);
		bch_journal_flush_wait(c);
	}
	return r;
}

TestSuite(journal_flush_step, .fini = writerhold_teardown);

/*
 * Fails when the step writes in line (as bch_journal_flush()): the
 * preflush is then the caller's, and the step returns 0 at once.
 */
Test(journal_flush_step, entry_handed_to_the_writer, .timeout = 120)
{
	struct bch_fs *c = writerhold_fresh_journal("jstep");
	struct bch_io_hook h = { .fn = writerhold_hook };
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	uint64_t durable = bch_journal_seq_durable(c);

	writerhold_reset(BCH_IO_FLUSH);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	writerhold_other_write(c);
	for (unsigned i = 0; i < 5; i++)
		testfs_journal_record(c, tag++, 40);
	unsigned first_done = tag;
	uint64_t seq = 0, seq2 = 0;
	cr_assert_eq(bch_journal_flush_step(c, &seq), 1, "the step wrote in line: %s", c->err_msg);
	cr_assert_eq(seq, bch_journal_seq_open(c) - 1, "the step's entry is not the one it sealed");
	cr_assert(writerhold_wait_held(), "the entry's preflush never came from the writer");

	/* the writer is inside the preflush: records go on into the next entry */
	for (unsigned i = 0; i < 5; i++)
		testfs_journal_record(c, tag++, 40);
	cr_assert_eq(bch_journal_flush_step(c, &seq2), 1, "a second fsync did not wait its turn");
	cr_assert_eq(seq2, seq + 1);
	cr_assert_eq(bch_journal_flush_step(c, &seq), 1, "done while the writer is held");
	unsigned own = writerhold_own_flushes;
	bool still = writerhold_held();
	cr_assert(still, "the writer went on by itself");
	cr_assert_eq(own, 0, "the caller flushed %u times", own);
	cr_assert_eq(bch_journal_seq_durable(c), durable, "an entry in flight counts as durable");

	writerhold_let_go();
	cr_assert_eq(step_until_done(c, &seq), 0, "%s", c->err_msg);
	cr_assert_geq(bch_journal_seq_durable(c), seq);
	cr_assert_eq(step_until_done(c, &seq2), 0, "%s", c->err_msg);
	cr_assert_geq(bch_journal_seq_durable(c), seq2);
	cr_assert_geq(writerhold_writer_flushes, 2, "the entries' flushes were not the writer's");
	cr_assert_eq(writerhold_own_flushes, 0, "the caller flushed %u times", writerhold_own_flushes);
	/* nothing since: done at once, nothing written */
	uint64_t seq3 = 0;
	uint64_t open = bch_journal_seq_open(c);
	cr_assert_eq(bch_journal_flush_step(c, &seq3), 0);
	cr_assert_eq(bch_journal_seq_open(c), open, "an entry written with nothing in it");
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	testfs_journal_close(c);

	struct testfs_jseen *s = calloc(1, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	cr_assert_not(s->bad, "replayed a bad or out-of-order entry");
	for (unsigned t = 1; t < tag; t++)
		cr_assert(s->tag[t], "tag %u (of %u; the first fsync's end at %u) lost", t, tag - 1,
			  first_done);
	free(s);
}

/*
 * A kill while the fsync's entry is held between its preflush and its
 * write (a copy of the image: what kill -9 leaves): what was durable
 * replays, the held entry's records do not; let go, all of them.
 */
Test(journal_flush_step, kill_with_the_entry_held, .timeout = 120)
{
	struct bch_fs *c = writerhold_fresh_journal("jstep");
	struct bch_io_hook h = { .fn = writerhold_hook };
	char crash[160];
	unsigned tag = 2;

	snprintf(crash, sizeof(crash), "%s/killed.img", writerhold_dir);
	for (unsigned i = 0; i < 5; i++)
		testfs_journal_record(c, tag++, 40);
	uint64_t seq = 0;
	cr_assert_eq(step_until_done(c, &seq), 0, "%s", c->err_msg);
	unsigned flushed_to = tag;

	writerhold_reset(BCH_IO_WRITE);
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	writerhold_other_write(c);
	for (unsigned i = 0; i < 5; i++)
		testfs_journal_record(c, tag++, 40);
	seq = 0;
	cr_assert_eq(bch_journal_flush_step(c, &seq), 1, "the step wrote in line");
	cr_assert(writerhold_wait_held(), "the entry's write never came from the writer");
	testfs_copy_file(writerhold_paths[0], crash);

	struct testfs_jseen *s = calloc(1, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(crash, s), 0);
	cr_assert_not(s->bad);
	for (unsigned t = 1; t < flushed_to; t++)
		cr_assert(s->tag[t], "durable tag %u lost", t);
	for (unsigned t = flushed_to; t < tag; t++)
		cr_assert_not(s->tag[t], "tag %u of the held entry replayed", t);

	writerhold_let_go();
	cr_assert_eq(step_until_done(c, &seq), 0, "%s", c->err_msg);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	testfs_journal_close(c);
	memset(s, 0, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	cr_assert_not(s->bad);
	for (unsigned t = 1; t < tag; t++)
		cr_assert(s->tag[t], "tag %u lost after the step", t);
	free(s);
}
