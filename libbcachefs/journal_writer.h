/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_JOURNAL_WRITER_H
#define _BCACHEFS_JOURNAL_WRITER_H

/*
 * journal_writer.h - the thread that writes full journal entries.
 *
 * Owns: one thread per process and the job it runs: flush a set of
 * devices (the preflush), write one buffer to each of a set of places,
 * optionally flush those devices again and write a stub after.  The job
 * names block devices and byte offsets, never journal state: what the
 * entry means (which sequences it makes durable, where the ring stands) is
 * journal.c's, which fills a job, submits it and waits for it.
 *
 * Invariants
 *   (1) One job at a time: bch_jwriter_submit() only after the previous
 *       job was waited for (bch_jwriter_wait()).
 *   (2) Between submit and wait, the submitter touches no field of the
 *       job; the thread touches nothing else.  The fields marked "under
 *       lock" are the only ones both sides read.
 *   (3) A job's steps run in order and stop at the first failure, which
 *       names its device (failed_bd) and whether a flush failed; a failed
 *       stub write fails nothing (the stub is a hint, journal.c).
 *   (4) After a fork the thread stays with the parent: the child's wait
 *       runs a job in flight itself, and the next start makes a new thread.
 *   (5) The thread never takes a signal: they go to the request threads.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bcachefs_format.h"

struct bch_blockdev;

struct bch_jwriter {
	pthread_t		thread;
	pthread_mutex_t		lock;
	pthread_cond_t		cond;		/* a job was submitted, one is done, or stop */
	pid_t			pid;		/* the process the thread runs in (0: none) */
	bool			stop;		/* under lock */
	bool			queued;		/* under lock: submitted, not taken yet */
	bool			done;		/* under lock: the thread finished the job */
	bool			busy;		/* under lock: submitted, not waited for */
	int			ret;		/* under lock: its result */

	/* the job, filled by the submitter */
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
};

/*
 * Is the thread running in this process?  Started on first use, and again
 * in a child after a fork.  false: none could be; run the job in line.
 */
bool bch_jwriter_start(struct bch_jwriter *w);

/* Hand the filled job to the thread (started). */
void bch_jwriter_submit(struct bch_jwriter *w);

/* Wait for the submitted job and return its result (0 or -errno). */
int bch_jwriter_wait(struct bch_jwriter *w);

/* Has the thread finished the submitted job (bch_jwriter_wait() would not wait)? */
bool bch_jwriter_done(struct bch_jwriter *w);

/*
 * Wait until the thread has no job left to run (done, or none submitted),
 * taking no result: the submitter still waits for it (bch_jwriter_wait()).
 * For a thread other than the submitter's, which need not hold what the
 * submitter holds: the thread is started and not stopped meanwhile.
 */
void bch_jwriter_wait_idle(struct bch_jwriter *w);

/* Stop the thread of this process, if any; no job may be in flight. */
void bch_jwriter_stop(struct bch_jwriter *w);

#endif /* _BCACHEFS_JOURNAL_WRITER_H */
