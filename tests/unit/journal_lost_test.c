// SPDX-License-Identifier: GPL-2.0
/*
 * journal_lost_test.c - what the journal remembers of a lost entry
 * (journal.c, journal_lost()), beyond journal_review40's cases:
 *
 *  - a forked child keeps the result of a job the writer thread ended
 *    before the fork: the good entry before the failed one is durable
 *    there as in the parent (not cancelled with the later failure);
 *  - emergency read-only without a lost entry (another metadata write
 *    failed): a flush with something to write answers fs_emergency_ro
 *    and writes nothing;
 *  - a new open after the loss (what a remount does) writes and flushes
 *    again, and its journal replays.
 * Fixed scenarios, no timing: the writer's second entry write fails in the hook.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "errcode.h"
#include "journal.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"
#include "tests/lib/writerhold.h"

TestSuite(journal_lost, .fini = writerhold_teardown);


/*
 * Two full entries handed to the writer, the second's write fails; both
 * done, neither reaped.  Returns c; *lost: the failed entry, *mid: the
 * first tag of it (tags before are in the good entry or earlier).
 */
static struct bch_fs *second_entry_fails(uint64_t *lost, unsigned *mid, unsigned *end)
{
	struct bch_fs *c = writerhold_fresh_journal("jlost");
	static struct bch_io_hook h = { .fn = writerhold_fail_second_jset };
	unsigned tag = 2;

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	writerhold_jset_writes = 0;
	bch_dev_set_hook(c->devs[0]->bdev, &h);
	tag = writerhold_fill_entry(c, tag);
	*mid = tag - 1;		/* the record that did not fit went to the next entry */
	tag = writerhold_fill_entry(c, tag);
	*lost = bch_journal_seq_open(c) - 1;
	*end = tag;
	bch_journal_flush_wait(c);
	cr_assert_eq(__atomic_load_n(&writerhold_jset_writes, __ATOMIC_SEQ_CST), 2);
	return c;
}

/*
 * The child's first job ran fine in the parent's thread before the fork;
 * the second's preflush made it durable.  Without the job's own result
 * the child cancelled it with the second's error: durable stayed before it.
 */
Test(journal_lost, fork_keeps_the_good_entry_before_the_failed_one, .timeout = 120)
{
	uint64_t lost;
	unsigned mid, end;
	struct bch_fs *c = second_entry_fails(&lost, &mid, &end);

	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		/* the child: no criterion asserts; bits say what went wrong */
		bch_dev_set_hook(c->devs[0]->bdev, NULL);
		int st = 0;
		if (!bch_journal_flush(c))
			st |= 1;
		if (bch_journal_seq_durable(c) != lost - 1)
			st |= 2;
		testfs_journal_close(c);
		struct testfs_jseen *s = calloc(1, sizeof(*s));
		if (testfs_journal_replay(writerhold_paths[0], s) || s->bad)
			st |= 4;
		for (unsigned t = 1; t < mid; t++)
			st |= s->tag[t] ? 0 : 8;
		_exit(st);
	}
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	int r = bch_journal_flush(c);
	uint64_t durable = bch_journal_seq_durable(c);
	testfs_journal_close(c);
	cr_assert_neq(r, 0, "the parent's flush after its lost entry");
	cr_assert_eq(durable, lost - 1, "the parent: durable %" PRIu64 ", lost %" PRIu64, durable, lost);
	cr_assert(WIFEXITED(st), "the child died (status %d)", st);
	int x = WEXITSTATUS(st);
	cr_assert_eq(x, 0, "in the child:%s%s%s%s", x & 1 ? " the flush answered 0;" : "",
		     x & 2 ? " the good entry before the lost one not durable;" : "",
		     x & 4 ? " the journal no longer reads;" : "",
		     x & 8 ? " a record of the good entry not replayed" : "");
}

/*
 * Emergency read-only from another metadata write's failure (no journal
 * entry lost): the open entry's records are not written by a flush.
 */
Test(journal_lost, flush_after_emergency_ro_writes_nothing, .timeout = 120)
{
	struct bch_fs *c = writerhold_fresh_journal("jlost");

	cr_assert_eq(bch_journal_flush(c), 0, "%s", c->err_msg);
	uint64_t durable = bch_journal_seq_durable(c);
	testfs_journal_record(c, 2, 40);
	bch_fs_error(c, -EIO, false);	/* as a failed node write */
	cr_assert(c->emergency_ro);
	int r = bch_journal_flush(c);
	uint64_t seq = 0;
	int rs = bch_journal_flush_step(c, &seq);
	uint64_t after = bch_journal_seq_durable(c);
	testfs_journal_close(c);
	struct testfs_jseen *s = calloc(1, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	bool kept = s->tag[2];
	free(s);
	cr_assert_eq(r, -BCH_ERR_fs_emergency_ro, "flush: %s", bch_err_str(r));
	cr_assert_eq(rs, -BCH_ERR_fs_emergency_ro, "flush step: %s", bch_err_str(rs));
	cr_assert_eq(after, durable, "an entry was made durable after the error");
	cr_assert_not(kept, "the record was written after the error");
}

/*
 * A new open of the image after the loss (a remount): what was durable
 * replays, the journal continues after it, and its flushes answer 0.
 */
Test(journal_lost, new_open_after_a_loss_flushes_again, .timeout = 120)
{
	uint64_t lost;
	unsigned mid, end;
	struct bch_fs *c = second_entry_fails(&lost, &mid, &end);

	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_assert_neq(bch_journal_flush(c), 0);
	cr_assert_neq(bch_journal_flush(c), 0, "the second flush after the loss");
	testfs_journal_close(c);

	/* what the new open finds: the durable entries, nothing of the lost one, in order */
	struct testfs_jseen *s = calloc(1, sizeof(*s));
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	cr_assert_not(s->bad);
	for (unsigned t = 2; t < mid; t++)
		cr_assert(s->tag[t], "tag %u of the durable entry not replayed", t);
	for (unsigned t = mid; t < end; t++)
		cr_assert_not(s->tag[t], "tag %u of the lost entry replayed", t);

	char paths[1][TESTFS_PATH_MAX];
	uint64_t newest;
	snprintf(paths[0], sizeof(paths[0]), "%s", writerhold_paths[0]);
	c = testfs_journal_open(paths, 1, false, 0, 0);
	cr_assert_eq(bch_journal_read(c, NULL, NULL, &newest), 0, "%s", c->err_msg);
	cr_assert_lt(newest, lost);
	cr_assert_eq(bch_journal_start(c, 1), 0);
	testfs_journal_record(c, end, 40);
	int r = bch_journal_flush(c);
	uint64_t durable = bch_journal_seq_durable(c);
	testfs_journal_close(c);
	cr_assert_eq(r, 0, "the new open's flush: %s", bch_err_str(r));
	cr_assert_gt(durable, newest, "the new open's entry is durable (%" PRIu64 ")", durable);
	cr_assert_eq(testfs_journal_replay(writerhold_paths[0], s), 0);
	cr_assert_not(s->bad);
	cr_assert(s->tag[end], "the new open's record not replayed");
	free(s);
}
