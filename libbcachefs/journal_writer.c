// SPDX-License-Identifier: GPL-2.0
/*
 * journal_writer.c - the thread that writes full journal entries (see
 * journal_writer.h for the contract; journal.c, "Double buffering", for
 * what an entry in flight means to the journal).
 */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "blockdev.h"
#include "journal_writer.h"

/* The job: preflush every device, then write the copies, then flush them. */
static int jwriter_run(struct bch_jwriter *w)
{
	int ret;

	for (unsigned i = 0; w->preflush && i < w->nr_flush; i++)
		if ((ret = bch_dev_flush(w->flush_bd[i]))) {
			w->failed_bd = w->flush_bd[i];
			w->failed_flush = true;
			return ret;
		}
	for (unsigned i = 0; i < w->nr; i++)
		if ((ret = bch_dev_write(w->bd[i], w->buf, w->bytes, w->off[i]))) {
			w->failed_bd = w->bd[i];
			return ret;
		}
	for (unsigned i = 0; w->flush && i < w->nr; i++) {
		bool flushed = false;
		for (unsigned k = 0; k < i; k++)
			flushed |= w->bd[k] == w->bd[i];
		if (!flushed && (ret = bch_dev_flush(w->bd[i]))) {
			w->failed_bd = w->bd[i];
			w->failed_flush = true;
			return ret;
		}
	}
	/* the stub follows its entry's flush; a failed one fails nothing */
	if (w->stub)
		bch_dev_write(w->stub_bd, w->stub, w->stub_bytes, w->stub_off);
	return 0;
}

static void *jwriter_thread(void *arg)
{
	struct bch_jwriter *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->queued && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->queued)
			break;
		w->queued = false;
		pthread_mutex_unlock(&w->lock);
		int ret = jwriter_run(w);
		pthread_mutex_lock(&w->lock);
		w->ret = ret;
		w->done = true;
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
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->stop = w->queued = w->done = w->busy = false;
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

void bch_jwriter_submit(struct bch_jwriter *w)
{
	w->failed_bd = NULL;
	w->failed_flush = false;
	pthread_mutex_lock(&w->lock);
	w->queued = true;
	w->busy = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int bch_jwriter_wait(struct bch_jwriter *w)
{
	int ret;

	if (w->pid != getpid())
		return jwriter_run(w);	/* forked in flight: the thread stayed with the parent */
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		pthread_cond_wait(&w->cond, &w->lock);
	w->done = w->busy = false;
	ret = w->ret;
	pthread_mutex_unlock(&w->lock);
	return ret;
}

bool bch_jwriter_done(struct bch_jwriter *w)
{
	if (w->pid != getpid())
		return true;	/* forked: the wait runs the job in line */
	pthread_mutex_lock(&w->lock);
	bool done = w->done;
	pthread_mutex_unlock(&w->lock);
	return done;
}

void bch_jwriter_wait_idle(struct bch_jwriter *w)
{
	if (w->pid != getpid())
		return;		/* forked: the submitter's wait runs the job */
	pthread_mutex_lock(&w->lock);
	while (w->busy && !w->done)
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
