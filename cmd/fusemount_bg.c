// SPDX-License-Identifier: GPL-2.0
/*
 * fusemount_bg.c - the FUSE daemon's background thread (rebalance, copygc,
 * snapshot gc, erasure coding: invariant 5 of cmd_fusemount.c) and the
 * control channel through which commands on the mountpoint reach the
 * daemon (invariant 6).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <signal.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs.h"
#include "cmd_ctx.h"
#include "cmds.h"
#include "ctl.h"
#include "acl.h"
#include "blockdev.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "fs_read.h"
#include "snapshot.h"
#include "fuse_dl.h"
#include "fsname.h"
#include "inode.h"
#include "io.h"
#include "move.h"
#include "opts.h"
#include "copygc.h"
#include "rebalance.h"

#include "fusemount.h"

/* ------------------------------------------------------------ background work */

/* One kind of background work, and its errors. */
struct bg_job {
	const char	*name;
	int		last_err;	/* printed once; 0 after a success */
	unsigned	backoff;	/* seconds between retries after errors */
	time_t		retry_at;	/* monotonic seconds: not before */
};

static time_t mono_secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/*
 * After a step of j returned r: an error is printed the first time (a new
 * one too) and backs j off, doubling up to BG_BACKOFF_MAX; a success
 * resets both.  Returns r.  Lock held.
 */
static int bg_job_done(struct fmount *m, struct bg_job *j, int r)
{
	if (r >= 0) {
		j->last_err = 0;
		j->backoff = 0;
		return r;
	}
	if (r != j->last_err)
		fprintf(stderr, "bcachefs fusemount: %s: %s; retrying in the background\n", j->name,
			m->c->err_msg[0] ? m->c->err_msg : bch_err_str(r));
	j->last_err = r;
	j->backoff = j->backoff ? j->backoff * 2 : 1;
	if (j->backoff > BG_BACKOFF_MAX)
		j->backoff = BG_BACKOFF_MAX;
	j->retry_at = mono_secs() + j->backoff;
	return r;
}

/*
 * After a look: sleep BG_KICK_GAP_MS, woken early only by an unpark or the
 * stop; writes meanwhile set bg_kick without a signal (fm_bg_wake()).  Lock held.
 */
static void bg_nap(struct fmount *m)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += BG_KICK_GAP_MS * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	m->bg_deaf = true;
	while (!m->bg_stop && !m->bg_unpark &&
	       pthread_cond_timedwait(&m->bg_cond, &m->lock, &ts) != ETIMEDOUT)
		;
	m->bg_deaf = false;
}

/* Sleep on bg_cond until woken or secs have passed (lock held). */
static void bg_sleep(struct fmount *m, unsigned secs)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += secs;
	while (!m->bg_stop && !m->bg_kick &&
	       pthread_cond_timedwait(&m->bg_cond, &m->lock, &ts) != ETIMEDOUT)
		;
}

/*
 * One rebalance step.  On parking the journal is flushed, so the waiting
 * work is on disk.  Parked, the step runs only once space was freed
 * (c->space_gen moved) or waiting work was kicked (a write to it, an
 * option change: c->rebalance_kicks), and then after a journal flush: space freed at
 * journal sequence S is reused only once S is durable, and without the
 * flush the step would find no room and park again until the next,
 * unrelated, free.  Lock held.
 */
static int bg_rebalance(struct bch_fs *c, struct bch_move_stats *s, bool *parked,
			uint64_t *parked_gen, bool ec_defer)
{
	int r = 0;

	/* parked until space is freed or waiting work is kicked (rebalance.h) */
	if (*parked && c->space_gen + c->rebalance_kicks == *parked_gen)
		return 0;
	if (*parked)
		r = bch_fs_fsync(c);
	if (!r) {
		c->ec_build_deferred = ec_defer;
		r = bch_rebalance_step(c, BG_BUDGET, s, parked);
		c->ec_build_deferred = false;
	}
	if (!r && *parked) {
		/* parking: the work left waiting is on disk (fs usage reads it there) */
		r = bch_fs_fsync(c);
		*parked_gen = c->space_gen + c->rebalance_kicks;
	}
	return r;
}

/*
 * Defer stripe building now (BG_EC_QUIET_NS)?  Writes came within that
 * long, and at least 1/BG_EC_FREE_DIV of the space is free (the stripes
 * give back the copies they replace).  Lock held.
 */
static bool bg_ec_defer(struct fmount *m, struct bch_fs *c)
{
	struct statvfs st;

	if (!c->opts.v[Opt_erasure_code] && !(c->sb->features & BCH_FEATURE_INODE_EC))
		return false;	/* nothing to stripe: no statfs */
	if (fm_mono_ns() - m->last_write_ns >= BG_EC_QUIET_NS)
		return false;
	bch_fs_statfs(c, &st);
	return st.f_bfree >= st.f_blocks / BG_EC_FREE_DIV;
}

/* Invariant (5).  Returns when bg_stop is set. */
static void *bg_thread(void *arg)
{
	struct fmount *m = arg;
	struct bch_fs *last = NULL;
	struct bch_move_stats s;
	struct bg_job rb = { .name = "rebalance" }, gc = { .name = "copygc" }, sg = { .name = "snapshot gc" };
	struct bch_snapshot_gc_cursor sgc = { 0 };
	bool parked = false;
	uint64_t parked_gen = 0;

	memset(&s, 0, sizeof(s));
	pthread_mutex_lock(&m->lock);
	while (!m->bg_stop) {
		/* invariant (6): a command may have reopened it while we slept */
		struct bch_fs *c = m->c;
		if (c != last)
			parked = false;
		last = c;
		if (m->bg_unpark)
			parked = false;
		m->bg_kick = m->bg_unpark = false;
		if (c->read_only || c->emergency_ro)
			break;
		fm_frees_run(m);	/* what an rm -rf left pending, once it paused */
		time_t now = mono_secs();
		bool more = false;
		if (!m->norebalance && now >= rb.retry_at) {
			c->err_msg[0] = 0;
			more |= bg_job_done(m, &rb, bg_rebalance(c, &s, &parked, &parked_gen,
								  bg_ec_defer(m, c))) == 1;
		}
		if (!m->nocopygc && now >= gc.retry_at && bch_copygc_needed(c)) {
			c->err_msg[0] = 0;
			more |= bg_job_done(m, &gc, bch_copygc_step(c, &s)) == 1;
		}
		/* a subvolume delete left unfinished (a crash, a Ctrl-C): its keys, in steps */
		if (now >= sg.retry_at && bch_snapshot_gc_pending(c)) {
			bool done = false;
			c->err_msg[0] = 0;
			int r = bch_snapshot_gc_step(c, &sgc, BG_SNAP_GC_BUDGET, &done, NULL, NULL);
			more |= bg_job_done(m, &sg, r ? r : !done) == 1;
		}
		if (!more) {
			bg_nap(m);
			if (!m->bg_kick)
				bg_sleep(m, BG_IDLE);
			continue;
		}
		/* more to do: let the requests that wait for the lock in first */
		pthread_mutex_unlock(&m->lock);
		for (unsigned us = 0; us < BG_YIELD_US && atomic_load(&m->fg_waiting); us += 100)
			usleep(100);
		pthread_mutex_lock(&m->lock);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* After the mount (and the fork to the background); a failure only warns. */
void fm_bg_start(struct fmount *m)
{
	if (m->read_only || (m->norebalance && m->nocopygc))
		return;
	int r = pthread_create(&m->bg, NULL, bg_thread, m);
	if (r)
		cmd_err("fusemount", "cannot start the background thread (%s): no rebalance "
			"or copygc until a write needs space", strerror(r));
	else
		m->bg_running = true;
}

/* Before the filesystem is closed: the thread finishes its step and returns. */
void fm_bg_stop(struct fmount *m)
{
	if (!m->bg_running)
		return;
	pthread_mutex_lock(&m->lock);
	m->bg_stop = true;
	pthread_cond_signal(&m->bg_cond);
	pthread_mutex_unlock(&m->lock);
	pthread_join(m->bg, NULL);
	m->bg_running = false;
}

/* ------------------------------------------------------------ control channel */

/* A command body's lock: it waits like a request, so background work lets it in. */
static void ctl_lock(struct cmd_ctx *x)
{
	struct fmount *m = x->priv;

	fm_fg_lock(m);
	/* planned writes hold space of this m->c: they end first, and no more are planned */
	m->writes_blocked++;
	fm_need_wait(m, fm_no_planned_writes, NULL);
	pthread_rwlock_wrlock(&m->ra_lock);
	/* what an fsync waiting across a replacement by this step is judged by */
	m->body_durable = m->body_need = 0;
	if (m->c)
		bch_fs_journal_seqs(m->c, &m->body_durable, &m->body_need);
}

/*
 * The body's step replaced m->c (or closed it): the replacement's record,
 * for fsyncs that sleep across it (fusemount_ops.c, fm_fsync_across()),
 * and the held inodes' changes it lost, for fsyncs that begin after it.
 */
static void fs_replaced(struct fmount *m)
{
	struct fm_repl *p = &m->repl[++m->fs_gen % FM_REPL_RING];

	p->old_durable = m->body_durable;
	p->old_need = m->body_need;
	p->new_durable = m->c ? bch_fs_open_durable(m->c) : 0;
	fm_changes_judge(m, p);	/* for fsyncs that begin after it */
	m->errors_logged = 0;	/* the new open's count (exit_if_panicked()) */
}


/*
 * Between a body's steps: background work may look for what the step left
 * (a scheduled scan, moved data), and the requests that wait go first.
 */
static void ctl_unlock(struct cmd_ctx *x)
{
	struct fmount *m = x->priv;

	/*
	 * Reopened by the body (device add, remove, resize, online): mark the
	 * new opens.  A new open may have the old one's address (freed, then
	 * allocated again): it is told by defer_unlinked_free, which only ours
	 * have set (remount's reopen() sets it, and marked_c NULL).  Closed
	 * and not opened again (both opens failed): counted too.
	 */
	if (m->c != m->marked_c || (m->c && !m->c->defer_unlinked_free)) {
		fs_replaced(m);
		m->marked_c = m->c;
		if (m->c) {
			fm_mark_mounted(m->c, m->mnt);
			m->c->defer_unlinked_free = true;	/* invariant (1) holds across the reopen */
		}
	}
	pthread_rwlock_unlock(&m->ra_lock);
	m->writes_blocked--;
	fm_bg_wake(m, false);
	UNLOCK(m);
	for (unsigned us = 0; us < BG_YIELD_US && atomic_load(&m->fg_waiting); us += 100)
		usleep(100);
}

void fusemount_name_changed(void *priv, uint64_t dir, const char *name)
{
	struct fmount *m = priv;

	if (m)
		fm_notify_sessions(m, NULL, fm_to_fuse(dir), name, 0, 0);
}

/* After daemonizing (threads); a failure only warns: the mount works without it. */
void fm_ctl_start(struct fmount *m)
{
	struct ctl_daemon d = {
		.mnt		= m->mnt,
		.cp		= &m->c,
		.devs		= &m->devs,
		.nr_devs	= &m->nr_devs,
		.open_opts	= &m->opts,
		.lock		= ctl_lock,
		.unlock		= ctl_unlock,
		.priv		= m,
	};
	char err[512];

	if (ctl_server_start(&d, &m->ctl, err, sizeof(err)))
		cmd_err("fusemount", "%s: no control channel (%s): commands on the mountpoint "
			"(data rebalance, set-fs-option, device ...) will not reach this daemon",
			m->mnt, err);
}
