/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_JOURNAL_WRITER_H
#define _BCACHEFS_JOURNAL_WRITER_H

/*
 * journal_writer.h - the thread that writes sealed journal entries.
 *
 * Owns: one thread per process and a queue of up to BCH_JWRITER_QUEUE
 * jobs, run one after the other in the order they were submitted.  A job:
 * flush a set of devices (the preflush), write one buffer to each of a
 * set of places, optionally flush those devices again and write a stub
 * after.  A job names block devices and byte offsets, never journal
 * state: what an entry means (which sequences it makes durable, where the
 * ring stands) is journal.c's, which fills jobs, submits them and waits
 * for them, oldest first.
 *
 * Invariants
 *   (1) At most BCH_JWRITER_QUEUE jobs submitted and not waited for;
 *       bch_jwriter_wait() takes the oldest.
 *   (2) Jobs run in submission order, each after the previous one ended:
 *       a job's preflush follows the previous job's writes (and flush).
 *   (3) Between submit and wait, the submitter touches no field of the
 *       job; the thread touches nothing else.  The fields marked "under
 *       lock" are the only ones both sides read.
 *   (4) A job's steps run in order and stop at the first failure, which
 *       names its device (failed_bd) and whether a flush failed; a failed
 *       stub write fails nothing (the stub is a hint, journal.c).  Every
 *       job queued after a failed one is not run at all (cancelled, with
 *       the failure's result): what follows a lost entry is lost with it.
 *       Jobs run again once every job up to the failure was waited for.
 *   (5) After a fork the thread stays with the parent: the child's wait
 *       takes the result of a job the thread ended before the fork, runs
 *       any other job in flight itself, and once none is left the next
 *       start makes a new thread.
 *   (6) The thread never takes a signal: they go to the request threads.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bcachefs_format.h"

struct bch_blockdev;

/* Jobs queued at once: a commit waits for the writer only when all are busy. */
#define BCH_JWRITER_QUEUE	4

struct bch_jwriter_job {
	/* filled by the submitter */
	const void		*buf;		/* the entry */
	size_t			bytes;
	bool			preflush;	/* flush flush_bd[] first */
	struct bch_blockdev	*flush_bd[BCH_SB_MEMBERS_MAX];
	unsigned		nr_flush;
	struct bch_blockdev	*bd[BCH_REPLICAS_MAX];		/* where the copies go */
	uint64_t		off[BCH_REPLICAS_MAX];		/* bytes */
	unsigned		nr;
	bool			flush;		/* flush the copies' devices after */
	const void		*stub;		/* then written, if any (best effort) */
	struct bch_blockdev	*stub_bd;
	uint64_t		stub_off;
	size_t			stub_bytes;

	/* the job's failure, set by whoever ran it */
	struct bch_blockdev	*failed_bd;
	bool			failed_flush;	/* it failed a flush, not a write */
	bool			cancelled;	/* not run: an earlier job failed */
	int			ret;		/* under lock: its result */
};

struct bch_jwriter {
	pthread_t		thread;
	pthread_mutex_t		lock;
	pthread_cond_t		cond;		/* a job was submitted, one is done, or stop */
	pid_t			pid;		/* the process the thread runs in (0: none) */
	bool			stop;		/* under lock */
	struct bch_jwriter_job	*q[BCH_JWRITER_QUEUE];	/* job n at q[n % QUEUE] */
	uint64_t		submitted;	/* under lock: jobs handed over */
	uint64_t		taken;		/* under lock: jobs the thread began */
	uint64_t		done;		/* under lock: jobs ended (run or cancelled) */
	uint64_t		waited;		/* jobs waited for (the submitter's) */
	int			failed;		/* under lock: a job failed, later ones
						 * are cancelled (invariant (4)) */
};

/*
 * Is the thread running in this process?  Started on first use, and again
 * in a child after a fork once no job is left.  false: none could be (or a
 * forked child still has jobs to wait for); run the job in line.
 */
bool bch_jwriter_start(struct bch_jwriter *w);

/* Queue the filled job (started, fewer than BCH_JWRITER_QUEUE in flight). */
void bch_jwriter_submit(struct bch_jwriter *w, struct bch_jwriter_job *job);

/* Wait for the oldest job in flight and return its result (0 or -errno). */
int bch_jwriter_wait(struct bch_jwriter *w);

/* Has the oldest job in flight ended (bch_jwriter_wait() would not wait)? */
bool bch_jwriter_done(struct bch_jwriter *w);

/* How many of the jobs in flight (oldest first) the thread has begun. */
unsigned bch_jwriter_begun(struct bch_jwriter *w);

/*
 * Wait until every job submitted before the call has ended, taking no
 * result: the submitter still waits for each (bch_jwriter_wait()).  For a
 * thread other than the submitter's, which need not hold what the
 * submitter holds: the thread is started and not stopped meanwhile.
 */
void bch_jwriter_wait_idle(struct bch_jwriter *w);

/* Stop the thread of this process, if any; no job may be in flight. */
void bch_jwriter_stop(struct bch_jwriter *w);

#endif /* _BCACHEFS_JOURNAL_WRITER_H */
