// SPDX-License-Identifier: GPL-2.0
/*
 * journal_writer.c - the thread that writes sealed journal entries (see
 * journal_writer.h for the contract; journal.c, "The writer's queue", for
 * what an entry in flight means to the journal).
 */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "blockdev.h"
#include "journal_writer.h"

/* The job: preflush every device, then write the copies, then flush them. */
static int jwriter_run(struct bch_jwriter_job *job)
{
	int ret;

	for (unsigned i = 0; job->preflush && i < job->nr_flush; i++)
		if ((ret = bch_dev_flush(job->flush_bd[i]))) {
			job->failed_bd = job->flush_bd[i];
			job->failed_flush = true;
			return ret;
		}
	for (unsigned i = 0; i < job->nr; i++)
		if ((ret = bch_dev_write(job->bd[i], job->buf, job->bytes, job->off[i]))) {
			job->failed_bd = job->bd[i];
			return ret;
		}
	for (unsigned i = 0; job->flush && i < job->nr; i++) {
		bool flushed = false;
		for (unsigned k = 0; k < i; k++)
			flushed |= job->bd[k] == job->bd[i];
		if (!flushed && (ret = bch_dev_flush(job->bd[i]))) {
			job->failed_bd = job->bd[i];
			job->failed_flush = true;
			return ret;
		}
	}
	/* the stub follows its entry's flush; a failed one fails nothing */
	if (job->stub)
		bch_dev_write(job->stub_bd, job->stub, job->stub_bytes, job->stub_off);
	return 0;
}

/* Run job, or cancel it after a failure (invariant (4)); w->lock not held. */
static int jwriter_run_or_cancel(struct bch_jwriter_job *job, int failed)
{
	if (failed) {
		job->cancelled = true;
		return failed;
	}
	return jwriter_run(job);
}

static void *jwriter_thread(void *arg)
{
	struct bch_jwriter *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (w->taken == w->submitted && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->taken == w->submitted)
			break;
		struct bch_jwriter_job *job = w->q[w->taken++ % BCH_JWRITER_QUEUE];
		int failed = w->failed;
		pthread_mutex_unlock(&w->lock);
		int ret = jwriter_run_or_cancel(job, failed);
		pthread_mutex_lock(&w->lock);
		job->ret = ret;
		if (ret && !w->failed)
			w->failed = ret;
		w->done++;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

bool bch_jwriter_start(struct bch_jwriter *w)
{
	sigset_t all, old;
	int r;

	if (w->pid == getpid())
		return true;
	if (w->submitted != w->waited)
		return false;	/* forked with jobs in flight: the child waits for them first */
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->stop = false;
	w->submitted = w->taken = w->done = w->waited = 0;
	w->failed = 0;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&w->thread, NULL, jwriter_thread, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		w->pid = 0;
		return false;
	}
	w->pid = getpid();
	return true;
}

void bch_jwriter_submit(struct bch_jwriter *w, struct bch_jwriter_job *job)
{
	job->failed_bd = NULL;
	job->failed_flush = false;
	job->cancelled = false;
	job->ret = 0;
	pthread_mutex_lock(&w->lock);
	w->q[w->submitted++ % BCH_JWRITER_QUEUE] = job;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int bch_jwriter_wait(struct bch_jwriter *w)
{
	struct bch_jwriter_job *job = w->q[w->waited % BCH_JWRITER_QUEUE];
	int ret;

	if (w->pid != getpid()) {
		/*
		 * Forked in flight: the thread stayed with the parent.  A job
		 * it ended before the fork keeps its result (w->failed may be
		 * a later job's); the others run here.
		 */
		ret = w->waited < w->done ? job->ret : jwriter_run_or_cancel(job, w->failed);
		if (ret && !w->failed)
			w->failed = ret;
		if (++w->waited == w->submitted)
			w->failed = 0;
		return ret;
	}
	pthread_mutex_lock(&w->lock);
	while (w->done == w->waited)
		pthread_cond_wait(&w->cond, &w->lock);
	ret = job->ret;
	if (++w->waited == w->submitted)
		w->failed = 0;	/* every job after the failure was waited for */
	pthread_mutex_unlock(&w->lock);
	return ret;
}

bool bch_jwriter_done(struct bch_jwriter *w)
{
	if (w->pid != getpid())
		return true;	/* forked: the wait runs the job in line */
	pthread_mutex_lock(&w->lock);
	bool done = w->done > w->waited || w->submitted == w->waited;
	pthread_mutex_unlock(&w->lock);
	return done;
}

unsigned bch_jwriter_begun(struct bch_jwriter *w)
{
	if (w->pid != getpid())
		return 0;	/* forked: nothing begun yet in this process */
	pthread_mutex_lock(&w->lock);
	unsigned n = w->taken - w->waited;
	pthread_mutex_unlock(&w->lock);
	return n;
}

void bch_jwriter_wait_idle(struct bch_jwriter *w)
{
	if (w->pid != getpid())
		return;		/* forked: the submitter's wait runs the job */
	pthread_mutex_lock(&w->lock);
	uint64_t upto = w->submitted;
	while (w->done < upto)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

void bch_jwriter_stop(struct bch_jwriter *w)
{
	if (w->pid != getpid())
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	w->pid = 0;
}
