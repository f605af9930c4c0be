// SPDX-License-Identifier: GPL-2.0
/*
 * fusemount_req.c - the plumbing every request of the FUSE daemon goes through
 * (cmd_fusemount.c's header has the daemon's invariants): the table of
 * inodes the kernel holds (invariant 1), the engine lock and what a step of
 * the engine needs (fm_need_*(): the one place where locking is decided),
 * atime (invariant 7), the entries and attributes replied, notices to the
 * other sessions (invariant 9), and the per-request lock statistics of
 * `bcachefs fs timestats`.
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
#include "journal.h"
#include "move.h"
#include "opts.h"
#include "copygc.h"
#include "rebalance.h"

#include "fusemount.h"

/* libfuse3's functions, set by cmd_fusemount() before the session starts */
const struct fuse_dl *fm_lf;

struct fsess *fm_session(fuse_req_t req)
{
	return fm_lf->req_userdata(req);
}

struct fmount *fm_mount(fuse_req_t req)
{
	return fm_session(req)->m;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	return x ^ (x >> 27);
}

static struct held *held_find(struct fmount *m, uint64_t inum, bool add)
{
	if (add && (m->nr_held + 1) * 2 > m->cap_held) {
		size_t ncap = m->cap_held ? m->cap_held * 2 : 1024;
		struct held *n = calloc(ncap, sizeof(*n));
		if (!n)
			abort();
		for (size_t i = 0; i < m->cap_held; i++)
			if (m->held[i].inum) {
				size_t j = mix(m->held[i].inum) & (ncap - 1);
				while (n[j].inum)
					j = (j + 1) & (ncap - 1);
				n[j] = m->held[i];
			}
		free(m->held);
		m->held = n;
		m->cap_held = ncap;
	}
	if (!m->cap_held)
		return NULL;
	size_t h0 = m->held_hint[0], h1 = m->held_hint[1];
	/* (0 is no inode's number: an empty slot's) */
	if (inum && h0 < m->cap_held && m->held[h0].inum == inum)
		return &m->held[h0];
	if (inum && h1 < m->cap_held && m->held[h1].inum == inum) {
		m->held_hint[0] = h1;
		m->held_hint[1] = h0;
		return &m->held[h1];
	}
	size_t j = mix(inum) & (m->cap_held - 1);
	while (m->held[j].inum) {
		if (m->held[j].inum == inum)
			goto found;
		j = (j + 1) & (m->cap_held - 1);
	}
	if (!add)
		return NULL;
	m->held[j].inum = inum;
	m->held[j].refs = 0;
	m->held[j].nosec = 0;
	m->held[j].nodefacl = 0;
	m->held[j].nosgid = 0;
	m->held[j].noacl = 0;
	m->held[j].chg_seq = 0;
	m->held[j].lost = NULL;	/* a removed entry's moved with it (held_remove()) */
	m->nr_held++;
found:
	m->held_hint[1] = m->held_hint[0];
	m->held_hint[0] = j;
	return &m->held[j];
}

/* Remove entry h, keeping the probe chains intact (backward shift). */
static void held_remove(struct fmount *m, struct held *h)
{
	size_t mask = m->cap_held - 1, i = h - m->held, j = i;

	if (h->lost) {
		free(h->lost->told);
		free(h->lost);
	}
	m->held[i].inum = 0;
	m->nr_held--;
	for (;;) {
		j = (j + 1) & mask;
		if (!m->held[j].inum)
			return;
		size_t home = mix(m->held[j].inum) & mask;
		/* move j back to i if its home is not in (i, j] */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			m->held[i] = m->held[j];
			m->held[j].inum = 0;
			i = j;
		}
	}
}

void fm_hold(struct fmount *m, uint64_t inum, uint64_t n)
{
	held_find(m, inum, true)->refs += n;
}

static void lazy_flush(struct fmount *m, struct held *h);

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Free the pending inodes that are unlinked (bch_fs_inodes_free() reads
 * each: one linked, or gone, is left alone) and that the kernel has not
 * looked up again since (held: it may still ask about it).  Lock held.
 */
void fm_frees_run(struct fmount *m)
{
	uint64_t *p = m->free_pending;
	size_t n = 0;

	if (!m->nr_free_pending)
		return;
	/* sorted: one inode once (a transaction must not delete it twice), subvolumes together */
	qsort(p, m->nr_free_pending, sizeof(*p), cmp_u64);
	for (size_t i = 0; i < m->nr_free_pending; i++)
		if ((!n || p[n - 1] != p[i]) && !held_find(m, p[i], false))
			p[n++] = p[i];
	m->nr_free_pending = 0;
	if (n && !m->read_only)
		bch_fs_inodes_free(m->c, p, n);
}

/* inum's last reference is gone: free it if unlinked, now or with others (lock held) */
static void free_pending_add(struct fmount *m, uint64_t inum)
{
	if (m->read_only)
		return;
	if (!m->free_pending && !(m->free_pending = malloc(FREE_PENDING * sizeof(*m->free_pending)))) {
		bch_fs_inodes_free(m->c, &inum, 1);	/* no memory: at once */
		return;
	}
	m->free_pending[m->nr_free_pending++] = inum;
	if (m->nr_free_pending == FREE_PENDING)
		fm_frees_run(m);
}

/* Drop n references; an inode none are left on goes to the pending frees (lock held). */
void fm_unhold(struct fmount *m, uint64_t inum, uint64_t n)
{
	struct held *h = held_find(m, inum, false);

	if (!h)
		return;
	h->refs = h->refs > n ? h->refs - n : 0;
	if (h->refs)
		return;
	lazy_flush(m, h);
	held_remove(m, h);
	free_pending_add(m, inum);
}

/* At the end: the table and what its entries own. */
void fm_held_free(struct fmount *m)
{
	for (size_t i = 0; i < m->cap_held; i++)
		if (m->held[i].inum && m->held[i].lost) {
			free(m->held[i].lost->told);
			free(m->held[i].lost);
		}
	free(m->held);
	m->held = NULL;
	m->cap_held = m->nr_held = 0;
}

/* ------------------------------------------------------------ lost changes */

void fm_changed(struct fmount *m, uint64_t inum)
{
	struct held *h = held_find(m, inum, false);

	if (h)
		h->chg_seq = bch_journal_seq_needed(m->c);
}

/* h's change was lost: every handle open now is to be told, and a first later one */
static void lost_add(struct fmount *m, struct held *h)
{
	if (!h->lost && !(h->lost = calloc(1, sizeof(*h->lost))))
		abort();	/* as the held table's own growth: not a false 0 */
	h->lost->fh_mark = m->next_fh;
	h->lost->seen_mark = 0;
	h->lost->nr = 0;
}

void fm_changes_judge(struct fmount *m, const struct fm_repl *p)
{
	for (size_t i = 0; i < m->cap_held; i++) {
		struct held *h = &m->held[i];

		if (!h->inum || !h->chg_seq)
			continue;
		if (p->old_durable < h->chg_seq && p->new_durable < h->chg_seq)
			lost_add(m, h);
		h->chg_seq = 0;
	}
}

uint64_t fm_fh_new(struct fmount *m)
{
	return ++m->next_fh;
}

int fm_lost_check(struct fmount *m, uint64_t inum, uint64_t fh)
{
	struct held *h = held_find(m, inum, false);
	struct fm_lost *l = h ? h->lost : NULL;

	if (!l)
		return 0;
	for (uint32_t i = 0; i < l->nr; i++)
		if (l->told[i] == fh)
			return 0;
	if (fh > l->fh_mark && l->seen_mark && fh > l->seen_mark)
		return 0;	/* opened after it was told (errseq_sample() saw it seen) */
	if (!l->seen_mark)
		l->seen_mark = m->next_fh;
	if (l->nr == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 4;
		uint64_t *t = realloc(l->told, cap * sizeof(*t));
		if (!t)
			return -EIO;	/* not remembered: told again, never a false 0 */
		l->told = t;
		l->cap = cap;
	}
	l->told[l->nr++] = fh;
	return -EIO;
}

/*
 * One more (+1) or one fewer (-1) file or directory open in ino's
 * subvolume.  +1 with the lock held (the array is made then); -1 needs no
 * lock: a releasedir takes none (the subvolume is in ino's handle).
 */
void fm_open_count(struct fmount *m, fuse_ino_t ino, int d)
{
	uint32_t sv = bch_fs_subvol_of(fm_from_fuse(ino));

	atomic_uint *n = atomic_load(&m->open_subvol);

	if (!n && d > 0) {
		if (!(n = calloc(BCH_SUBVOL_MAX + 1, sizeof(*n))))
			return;		/* no memory: deletes are not refused for open files */
		atomic_store(&m->open_subvol, n);
	}
	if (!n || sv > BCH_SUBVOL_MAX)
		return;
	if (d > 0) {
		atomic_fetch_add(&n[sv], 1);
		return;
	}
	/* not below 0: an open counted before the array was made is not counted down */
	unsigned v = atomic_load(&n[sv]);
	while (v && !atomic_compare_exchange_weak(&n[sv], &v, v - 1))
		;
}

bool fusemount_subvol_busy(void *priv, uint32_t subvol)
{
	struct fmount *m = priv;

	atomic_uint *n = m ? atomic_load(&m->open_subvol) : NULL;

	return n && subvol <= BCH_SUBVOL_MAX && atomic_load(&n[subvol]);
}


void fm_fix_st(struct stat *st)
{
	st->st_ino = fm_to_fuse(st->st_ino);
}

/*
 * The generation of inum, for file handles: (ino, generation) must name one
 * inode for the filesystem's life, and inode numbers can be reused (the
 * next number follows the highest one in use at open).  The creation time
 * in ns tells two inodes of one number apart; it never changes through the
 * mount.  The root's is 0: the kernel made its inode with generation 0, and
 * an entry for it with another would mark it stale.
 */
static uint32_t generation_of(uint64_t btime)
{
	uint64_t h = mix(btime ^ 0x9e3779b97f4a7c15ULL);

	return (uint32_t)(h ^ (h >> 32)) | 1;
}

/*
 * That of inum, whose creation time in its own subvolume's view is btime
 * (fm_make_entry() read it with the attributes).  An inode of another
 * subvolume than the first (a handle with subvolume bits) keeps what the
 * lookup without a view gives it, as before (0 when it finds none).
 */
static uint32_t generation(struct fmount *m, uint64_t inum, int64_t btime)
{
	struct bch_inode bi;

	if (inum == BCH_ROOT_INO)
		return 0;
	if (!(inum & ~BCH_HANDLE_INUM_MASK))
		return generation_of(btime);
	return bch_inode_get(m->c, inum, &bi) ? 0 : generation_of(bi.btime);
}

/* ------------------------------------------------------------ atime */

int64_t fm_ts_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#define RELATIME_MAX_NS	(24LL * 3600 * 1000000000LL)

/*
 * Linux's atime_needs_update() for a read of the inode st describes (dir: a
 * listing), atime its atime as seen (a lazy one included): relatime updates
 * only an atime not newer than mtime or ctime, or a day old.  Not while a
 * member is missing: a read would write metadata with fewer copies than
 * asked, left for `data rereplicate` to mend.  Lock held.
 */
bool fm_atime_due(struct fmount *m, const struct fsess *s, const struct stat *st,
		      int64_t atime, int64_t now)
{
	if (m->read_only || s->atime == ATIME_NONE || (S_ISDIR(st->st_mode) && s->nodiratime) ||
	    m->c->devs_missing)
		return false;
	if (s->atime == ATIME_RELATIME && atime > fm_ts_ns(st->st_mtim) && atime > fm_ts_ns(st->st_ctim) &&
	    now - atime < RELATIME_MAX_NS)
		return false;
	return atime != now;
}

/* Store atime, leaving ctime (ctime_ns, read under the same hold) as it is (a read changes no attribute). */
static void atime_write(struct fmount *m, uint64_t inum, int64_t atime, int64_t ctime_ns)
{
	if (m->read_only)
		return;
	struct bch_setattr sa = {
		.valid = BCH_SETATTR_ATIME | BCH_SETATTR_CTIME | BCH_SETATTR_ATIME_READ,
		.atime = atime,
		.ctime = ctime_ns,
	};
	bch_fs_setattr(m->c, inum, &sa);	/* as the kernel's, a failed update is no error */
}

/* lazytime: write h's atime now (it goes, is synced, or the mount changes). */
static void lazy_flush(struct fmount *m, struct held *h)
{
	struct stat st;

	if (!h->lazy_atime)
		return;
	if (!bch_fs_getattr(m->c, h->inum, &st))
		atime_write(m, h->inum, h->lazy_atime, fm_ts_ns(st.st_ctim));
	h->lazy_atime = 0;
	m->nr_lazy--;
}

void fm_lazy_flush_all(struct fmount *m)
{
	for (size_t i = 0; m->nr_lazy && i < m->cap_held; i++)
		if (m->held[i].inum)
			lazy_flush(m, &m->held[i]);
	m->nr_lazy = 0;
}

/* The atime not written yet, or 0. */
static int64_t lazy_atime(struct fmount *m, uint64_t inum)
{
	struct held *h = m->nr_lazy ? held_find(m, inum, false) : NULL;

	return h ? h->lazy_atime : 0;
}

/* The atime lazytime has not written yet into st, inum's stat as stored. */
void fm_lazy_stat(struct fmount *m, uint64_t inum, struct stat *st)
{
	int64_t a = lazy_atime(m, inum);

	if (a) {
		st->st_atim.tv_sec = a / 1000000000LL;
		st->st_atim.tv_nsec = a % 1000000000LL;
	}
}

/* bch_fs_getattr() with the atime lazytime has not written yet. */
int fm_getattr(struct fmount *m, uint64_t inum, struct stat *st)
{
	int r = bch_fs_getattr(m->c, inum, st);

	if (!r)
		fm_lazy_stat(m, inum, st);
	return r;
}

/*
 * touch_atime(): a read of inum (a file's data, a listing, a symlink's
 * target) reached us: update its atime by the mount's rules.  Lock held.
 */
void fm_read_atime(struct fmount *m, const struct fsess *s, uint64_t inum)
{
	struct stat st;
	unsigned fl;
	int64_t now = bch_now_ns();

	/* one inode read: the times, and chattr +A */
	if (m->read_only || s->atime == ATIME_NONE || bch_fs_getattr_flags(m->c, inum, &st, &fl))
		return;
	fm_lazy_stat(m, inum, &st);
	if (!fm_atime_due(m, s, &st, fm_ts_ns(st.st_atim), now) || (fl & FS_NOATIME_FL))
		return;
	if (!m->lazytime) {
		atime_write(m, inum, now, fm_ts_ns(st.st_ctim));
		return;
	}
	struct held *h = held_find(m, inum, true);
	if (!h->lazy_atime)
		m->nr_lazy++;
	h->lazy_atime = now;
}

/* An explicit atime (utimes, touch -a) replaces the lazy one. */
void fm_lazy_drop(struct fmount *m, uint64_t inum)
{
	struct held *h = m->nr_lazy ? held_find(m, inum, false) : NULL;

	if (h && h->lazy_atime) {
		h->lazy_atime = 0;
		m->nr_lazy--;
	}
}

/*
 * How long a kernel may keep a name, a missing name or attributes: TIMEOUT
 * while one session serves the filesystem, not at all while several do
 * (invariant 9).  Another session's change of a name is notified after its
 * reply, so a kernel that kept them could answer from its cache in
 * between: t70 saw a name created through one mountpoint still missing
 * through the other.  What a kernel cached before the second session
 * joined is dropped at the join (fm_notify_joined()).
 */
double fm_cache_timeout(struct fmount *m)
{
	return atomic_load_explicit(&m->nr_sess, memory_order_relaxed) < 2 ? TIMEOUT : 0.0;
}

/* Reply with an entry for inum (and count the lookup); lock held. */
int fm_make_entry(struct fmount *m, uint64_t inum, struct fuse_entry_param *e)
{
	return fm_make_entry_from(m, inum, NULL, 0, e);
}

int fm_make_entry_from(struct fmount *m, uint64_t inum, const struct stat *st, int64_t btime,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	if (st) {
		e->attr = *st;
	} else {
		int r = bch_fs_getattr_btime(m->c, inum, &e->attr, &btime);	/* one inode read for both */
		if (r)
			return r;
	}
	fm_lazy_stat(m, inum, &e->attr);
	fm_fix_st(&e->attr);
	e->ino = fm_to_fuse(inum);
	e->generation = generation(m, inum, btime);
	e->attr_timeout = fm_cache_timeout(m);
	e->entry_timeout = fm_cache_timeout(m);
	fm_hold(m, inum, 1);
	return 0;
}

static const char *const req_names[] = {
#define x(n)	#n,
	REQ_TYPES()
#undef x
};

#define REQ_HIST	24	/* bucket b: under 2^b microseconds (the last: the rest) */

struct req_stat {
	uint64_t	calls;		/* lock holds */
	uint64_t	wait_ns, hold_ns, max_ns;
	uint64_t	hist[REQ_HIST];
};

static struct req_stat req_stats[REQ_NR];
int64_t fm_req_stats_since;		/* CLOCK_REALTIME ns of the last reset */
static __thread int req_cur = REQ_command;
__thread int64_t fm_req_wait_t0, fm_req_lock_t0;

int64_t fm_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The wall clock for "since" (not bch_now_ns(): SOURCE_DATE_EPOCH fixes that one). */
int64_t fm_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The request this thread serves from now on (its handler's first line). */
void fm_req_type(enum req_type t)
{
	req_cur = t;
}

/* The lock was taken after waiting since req_wait_t0 (lock held). */
static void req_locked(void)
{
	fm_req_lock_t0 = fm_mono_ns();
}

/* The lock is about to be released (lock held). */
static void req_unlocking(void)
{
	struct req_stat *st = &req_stats[req_cur];
	int64_t now = fm_mono_ns(), wait = fm_req_lock_t0 - fm_req_wait_t0, hold = now - fm_req_lock_t0;
	uint64_t us = (uint64_t)(wait + hold) / 1000;
	/* the first b with us < 2^b: us's bit length */
	unsigned b = us ? 64 - __builtin_clzll(us) : 0;

	if (b > REQ_HIST - 1)
		b = REQ_HIST - 1;
	st->calls++;
	st->wait_ns += wait;
	st->hold_ns += hold;
	if ((uint64_t)(wait + hold) > st->max_ns)
		st->max_ns = wait + hold;
	st->hist[b]++;
}

/*
 * Requests that leave the pending frees for later: an rm -rf's, none of
 * which needs the space or can see an unlinked inode.  Every other takes
 * the lock only after they are done (fm_fg_lock()), so a write, a create, a
 * statfs or a command finds the space of what was deleted before it, as
 * when each forget freed its inode.
 */
static bool req_keeps_frees(int t)
{
	switch (t) {
	case REQ_forget: case REQ_forget_multi: case REQ_unlink: case REQ_rmdir:
	case REQ_lookup: case REQ_getattr: case REQ_opendir: case REQ_readdir:
	case REQ_readdirplus: case REQ_releasedir:
		return true;
	}
	return false;
}

/*
 * Requests that add no set-id bit and no security.capability to any inode
 * but the one they tell fm_sec_mode() of, or one they make: what
 * fm_write_kill() and fm_dir_nosgid() found stays true across their holds.
 * Every other (setxattr, an ioctl, a command body, a type added later)
 * makes them look again.  A write only removes set-id bits and
 * capabilities; a setattr changes one inode's mode (fm_sec_mode()) and its
 * access ACL; the namespace changes give modes and ACLs only to the inodes
 * they make (a new inode's held entry starts with nothing known, and a
 * create's is set by fm_sec_new()) and change no other's mode.
 */
static bool req_keeps_sec(int t)
{
	switch (t) {
	case REQ_setattr: case REQ_create: case REQ_mknod: case REQ_mkdir: case REQ_symlink:
	case REQ_link: case REQ_unlink: case REQ_rmdir: case REQ_rename:
	case REQ_write: case REQ_read: case REQ_fsync: case REQ_lookup: case REQ_getattr:
	case REQ_forget: case REQ_forget_multi: case REQ_open: case REQ_release:
	case REQ_opendir: case REQ_readdir: case REQ_readdirplus: case REQ_releasedir:
	case REQ_statfs: case REQ_getxattr: case REQ_listxattr: case REQ_lseek:
	case REQ_readlink:
		return true;
	}
	return false;
}

/*
 * Requests that set no default ACL and give no inode an access ACL it had
 * not (held.nodefacl, held.noacl): those that set no xattr at all, and the
 * namespace changes and setattr, which set them only on a new inode
 * (create_acl(): its number is in no held entry) or change an access ACL
 * there is (chmod).
 */
static bool req_keeps_defacl(int t)
{
	switch (t) {
	case REQ_create: case REQ_mkdir: case REQ_mknod: case REQ_symlink: case REQ_link:
	case REQ_unlink: case REQ_rmdir: case REQ_rename: case REQ_setattr:
		return true;
	}
	return req_keeps_sec(t);
}

/*
 * Requests count themselves while they wait, so background work lets them
 * in.  One that finds the lock free neither waits nor counts: its hold
 * starts when it looked (one clock read, no atomics).
 */
void fm_fg_lock(struct fmount *m)
{
	fm_req_wait_t0 = fm_mono_ns();
	if (!pthread_mutex_trylock(&m->lock)) {
		fm_req_lock_t0 = fm_req_wait_t0;
	} else {
		atomic_fetch_add(&m->fg_waiting, 1);
		pthread_mutex_lock(&m->lock);
		atomic_fetch_sub(&m->fg_waiting, 1);
		req_locked();
	}
	if (!req_keeps_sec(req_cur))
		m->sec_gen++;
	if (!req_keeps_defacl(req_cur))
		m->defacl_gen++;
	if (m->nr_free_pending && !req_keeps_frees(req_cur))
		fm_frees_run(m);
}

/*
 * errors=panic: a filesystem error stops the daemon before anything more is
 * written (no close, no clean record); the mount is left to be unmounted.
 */
static void exit_if_panicked(struct fmount *m)
{
	if (m->c && m->c->nr_errors != m->errors_logged && !m->c->panicked) {
		/* errors=continue keeps going, errors=ro went read-only: say so once each */
		m->errors_logged = m->c->nr_errors;
		fprintf(stderr, "bcachefs fusemount: %s: filesystem error (errors=%s%s): %s\n",
			m->mnt, bch_error_action_names[m->c->opts.v[Opt_errors] > 2 ? 1
						       : m->c->opts.v[Opt_errors]],
			m->c->emergency_ro ? "; read-only now" : "; going on",
			m->c->err_msg[0] ? m->c->err_msg : bch_err_str(m->c->first_error));
	}
	if (!bch_fs_panicked(m->c))
		return;
	fprintf(stderr, "bcachefs fusemount: %s: filesystem error with errors=panic (%s); "
		"exiting without writing\n", m->mnt,
		m->c->err_msg[0] ? m->c->err_msg : bch_err_str(m->c->first_error));
	_exit(1);
}

void fm_fg_unlock(struct fmount *m)
{
	exit_if_panicked(m);
	req_unlocking();
	pthread_mutex_unlock(&m->lock);
}

/*
 * What a step of the engine needs (io.h, enum bch_lock_need), taken here
 * and nowhere else, so another scheme (a reader-writer engine lock, locks
 * per btree) replaces these three:
 *   BCH_LOCK_ENGINE   m->lock (LOCK/UNLOCK: the one engine lock).
 *   BCH_LOCK_DEVICES  m->ra_lock for reading: m->c and its devices stay
 *                     open.  Command bodies, which may close, reopen and
 *                     replace them, hold it for writing (ctl_lock()).
 *                     A planned write holds space of m->c from its begin
 *                     to its end, across a DEVICES step and a wait for its
 *                     turn: ctl_lock() waits (ENGINE released: fm_need_wait())
 *                     until no planned write is in flight, and while a
 *                     body runs, writes are not planned (writes_blocked).
 * DEVICES is only ever taken with ENGINE held (fm_need_handover()), so the
 * m->c a thread planned with is the one it reads from; and a thread holding
 * DEVICES never waits for ENGINE (a body holding ENGINE waits for DEVICES):
 * fm_need_back() lets it go first.
 */
void fm_need_handover(struct fmount *m)	/* ENGINE -> DEVICES */
{
	pthread_rwlock_rdlock(&m->ra_lock);
	UNLOCK(m);
}

void fm_need_back(struct fmount *m)		/* DEVICES -> ENGINE */
{
	pthread_rwlock_unlock(&m->ra_lock);
	LOCK(m);
}

void fm_need_drop_devices(struct fmount *m)
{
	pthread_rwlock_unlock(&m->ra_lock);
}

bool fm_test_gate(struct fmount *m, const char *name)
{
	char p[PATH_MAX];

	if (!m->test_gate)
		return false;
	snprintf(p, sizeof(p), "%s/%s", m->test_gate, name);
	return !access(p, F_OK);
}

void fm_test_park(struct fmount *m)
{
	char park[PATH_MAX], parked[PATH_MAX];

	if (!m->test_gate)
		return;
	snprintf(park, sizeof(park), "%s/fsync-park", m->test_gate);
	snprintf(parked, sizeof(parked), "%s/fsync-parked", m->test_gate);
	if (access(park, F_OK))
		return;
	pthread_rwlock_unlock(&m->ra_lock);
	int fd = open(parked, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
	for (unsigned i = 0; i < 6000 && !access(park, F_OK); i++)
		usleep(10000);
	pthread_rwlock_rdlock(&m->ra_lock);
}

/*
 * With ENGINE held: wait (it released meanwhile) until ready(m, arg); the
 * time counts as waiting for the lock, not holding it (fs timestats).
 */
void fm_need_wait(struct fmount *m, bool (*ready)(struct fmount *m, const void *arg), const void *arg)
{
	while (!ready(m, arg)) {
		int64_t t0 = fm_mono_ns();
		pthread_cond_wait(&m->write_cond, &m->lock);
		fm_req_lock_t0 += fm_mono_ns() - t0;
	}
}

/* Reads run outside the engine lock (bch_data_read_plan_run()), and those redone under it. */
atomic_uint_fast64_t fm_reads_unlocked, fm_reads_redone;
/* Writes encoded and written outside it (bch_fs_write_run()), and those redone under it. */
atomic_uint_fast64_t fm_writes_unlocked, fm_writes_redone;
/* Of those, writes ended by another request's hold of it (ends_run()). */
atomic_uint_fast64_t fm_writes_combined;

/* Data was written (kick) or a file's options changed (unpark): lock held. */
void fm_bg_wake(struct fmount *m, bool unpark)
{
	if (!m->bg_running || (m->bg_kick && (!unpark || m->bg_unpark)))
		return;
	m->bg_kick = true;
	m->bg_unpark |= unpark;
	if (unpark || !m->bg_deaf)
		pthread_cond_signal(&m->bg_cond);
}

#define CAP_FSETID_BIT	4	/* <linux/capability.h> CAP_FSETID */
#define CAP_FOWNER_BIT	3	/* CAP_FOWNER */
#define CAP_LINUX_IMMUTABLE_BIT	9	/* CAP_LINUX_IMMUTABLE */
#define CAP_SYS_ADMIN_BIT	21	/* CAP_SYS_ADMIN */

/*
 * Who asks, for the set-id rules (fs_ops.h), malloc'd (free() it; NULL: no
 * memory): fuse_req_ctx() has the fsuid and fsgid; the supplementary groups
 * and CAP_FSETID, CAP_FOWNER, CAP_LINUX_IMMUTABLE and CAP_SYS_ADMIN are read from /proc/PID/status.  A request the kernel makes
 * itself (pid 0) or whose process is gone counts as privileged only for
 * uid 0.
 */
struct bch_caller *fm_caller_new(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fm_lf->req_ctx(req);
	struct bch_caller *cr = calloc(1, sizeof(*cr));
	gid_t *groups = NULL;
	char path[64], *line = NULL;
	size_t cap = 0, nr = 0, room = 0;
	FILE *f;

	if (!cr)
		return NULL;
	*cr = (struct bch_caller) { .uid = ctx->uid, .gid = ctx->gid, .cap_fsetid = !ctx->uid,
				    .cap_fowner = !ctx->uid, .cap_linux_immutable = !ctx->uid,
				    .cap_sys_admin = !ctx->uid };
	snprintf(path, sizeof(path), "/proc/%d/status", (int)ctx->pid);
	if (!ctx->pid || !(f = fopen(path, "re")))
		return cr;
	while (getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "Groups:", 7)) {
			char *p = line + 7, *end;
			for (unsigned long g; g = strtoul(p, &end, 10), end != p; p = end) {
				if (nr == room) {
					gid_t *n = realloc(groups, (room = room ? 2 * room : 16) * sizeof(*n));
					if (!n)
						break;
					groups = n;
				}
				groups[nr++] = g;
			}
		} else if (!strncmp(line, "CapEff:", 7)) {
			unsigned long long caps = strtoull(line + 7, NULL, 16);
			cr->cap_fsetid = (caps >> CAP_FSETID_BIT) & 1;
			cr->cap_fowner = (caps >> CAP_FOWNER_BIT) & 1;
			cr->cap_linux_immutable = (caps >> CAP_LINUX_IMMUTABLE_BIT) & 1;
			cr->cap_sys_admin = (caps >> CAP_SYS_ADMIN_BIT) & 1;
		}
	}
	free(line);
	fclose(f);
	/* the groups live as long as cr: one block */
	struct bch_caller *all = realloc(cr, sizeof(*cr) + nr * sizeof(gid_t));
	if (all) {
		cr = all;
		gid_t *g = (gid_t *)(cr + 1);

		if (nr)		/* no groups: groups is NULL, which memcpy may not take */
			memcpy(g, groups, nr * sizeof(gid_t));
		cr->groups = g;
		cr->nr_groups = nr;
	}
	free(groups);
	return cr;
}

/*
 * A change of ino's data or size by the caller of req: clear the set-id bits
 * Linux clears (bch_kill_priv_bits()).  The kernel does part of this itself
 * (S_ISUID, and S_ISGID with group-execute) and not the rest: a setgid file
 * without group-execute written by a non-member.  /proc is read only when
 * the file has a set-id bit.  Lock held.
 */
static int kill_priv(fuse_req_t req, struct fmount *m, uint64_t inum, bool *plain)
{
	struct stat st;
	int r = bch_fs_getattr(m->c, inum, &st);

	*plain = !r && !(st.st_mode & (S_ISUID | S_ISGID));
	if (r || !S_ISREG(st.st_mode) || !(st.st_mode & (S_ISUID | S_ISGID)))
		return r;
	struct bch_caller *cr = fm_caller_new(req);
	if (!cr)
		return -ENOMEM;
	r = bch_fs_kill_priv(m->c, inum, cr);
	free(cr);
	/* the kernel keeps the old mode for TIMEOUT unless told (attributes only) */
	if (r > 0)
		fm_lf->lowlevel_notify_inval_inode(fm_session(req)->se, fm_to_fuse(inum), -1, 0);
	return r < 0 ? r : 0;
}

/* inum known to have no set-id bit and no security.capability (held.nosec) */
bool fm_sec_plain(struct fmount *m, uint64_t inum)
{
	struct held *h = held_find(m, inum, false);

	return h && h->nosec == m->sec_gen + 1;
}

void fm_sec_new(struct fmount *m, uint64_t inum, mode_t mode)
{
	struct held *h = held_find(m, inum, false);

	if (h)
		h->nosec = mode & (S_ISUID | S_ISGID) ? 0 : m->sec_gen + 1;
}

void fm_sec_mode(struct fmount *m, uint64_t inum, mode_t mode)
{
	struct held *h;

	if ((mode & (S_ISUID | S_ISGID)) && (h = held_find(m, inum, false)))
		h->nosec = h->nosgid = 0;
}

bool fm_dir_nosgid(struct fmount *m, uint64_t dir)
{
	struct held *h = held_find(m, dir, false);

	return h && h->nosgid == m->sec_gen + 1;
}

void fm_dir_nosgid_set(struct fmount *m, uint64_t dir)
{
	struct held *h = held_find(m, dir, false);

	if (h)
		h->nosgid = m->sec_gen + 1;
}

int fm_kill_priv(fuse_req_t req, struct fmount *m, uint64_t inum)
{
	bool plain;

	return fm_sec_plain(m, inum) ? 0 : kill_priv(req, m, inum, &plain);
}

/*
 * What a write by req removes before its data (fusemount.h).  The lookups
 * behind it were ~10% of the daemon's user CPU per 4 KiB random write (a
 * getattr, a view, an xattr name's hash and a hash lookup), all under the
 * engine lock.
 */
int fm_write_kill(fuse_req_t req, struct fmount *m, uint64_t inum, bool caps, bool *caps_gone)
{
	struct held *h = held_find(m, inum, false);
	bool plain;

	*caps_gone = false;
	if (h && h->nosec == m->sec_gen + 1)
		return 0;
	int r = kill_priv(req, m, inum, &plain);
	if (!r && caps)
		r = fm_kill_caps(m, inum, caps_gone);
	/* removed a capability: the kernel is told (caps_gone), and none is left */
	if (!r && plain && caps && h)
		h->nosec = m->sec_gen + 1;
	return r;
}

bool fm_acl_none(struct fmount *m, uint64_t inum)
{
	struct held *h = held_find(m, inum, false);

	return h && h->noacl == m->defacl_gen + 1;
}

void fm_acl_none_set(struct fmount *m, uint64_t inum)
{
	struct held *h = held_find(m, inum, false);

	if (h)
		h->noacl = m->defacl_gen + 1;
}

ssize_t fm_default_acl(struct fmount *m, uint64_t dir, char *buf, size_t size)
{
	struct held *h = held_find(m, dir, false);

	if (h && h->nodefacl == m->defacl_gen + 1)
		return -ENODATA;
	ssize_t n = bch_fs_getxattr(m->c, dir, BCH_ACL_XATTR_DEFAULT, buf, size);
	if (n == -ENODATA && h)
		h->nodefacl = m->defacl_gen + 1;
	return n;
}

/*
 * The kernel's file_remove_privs() for a direct write (set_direct()):
 * a write removes the file's security.capability, whoever writes (Linux's
 * cap_inode_killpriv(); the buffered path asks and removes it through us).
 * *gone when one was removed.  Lock held.
 */
int fm_kill_caps(struct fmount *m, uint64_t inum, bool *gone)
{
	int r = bch_fs_kill_caps(m->c, inum);

	*gone = !r;
	return r == -ENODATA ? 0 : r;
}

/*
 * Invariant (9): what one session changed, the other sessions' kernels may
 * hold cached (attributes, pages, names and negative names): tell them.
 * Without lock; an inode's before the reply, a name's after it (why:
 * fusemount.h, where it is declared).  skip: the session that made the
 * change (NULL: a command made it, tell all).
 */
void fm_notify_sessions(struct fmount *m, const struct fsess *skip, fuse_ino_t ino,
			    const char *name, off_t off, off_t len)
{
	if (skip && atomic_load(&m->nr_sess) < 2)
		return;
	pthread_rwlock_rdlock(&m->sess_rw);
	for (struct fsess *o = m->sess; o; o = o->next) {
		if (o == skip)
			continue;
		if (name)	/* a name of directory ino (made, removed, renamed) */
			fm_lf->lowlevel_notify_inval_entry(o->se, ino, name, strlen(name));
		else		/* ino's attributes, and its pages in [off, off + len) unless off < 0 */
			fm_lf->lowlevel_notify_inval_inode(o->se, ino, off, len);
	}
	pthread_rwlock_unlock(&m->sess_rw);
}

bool fm_notify_pages(struct fmount *m, const struct fsess *from, fuse_ino_t ino,
		     off_t off, off_t len)
{
	struct fm_notice me = { .ino = ino, .from = from };
	bool wait = false;

	pthread_mutex_lock(&m->notice_mu);
	for (struct fm_notice *o = m->notices; o && !wait; o = o->next)
		wait = o->ino == ino && o->from != from;	/* o tells from's kernel */
	if (!wait) {
		me.next = m->notices;
		m->notices = &me;
	}
	pthread_mutex_unlock(&m->notice_mu);
	/*
	 * Reply first: o may wait for a page locked for our request.  The
	 * attributes now all the same (no page lock): an O_APPEND write
	 * through another mountpoint must find the new size (t122 append lost
	 * 1868 of 4000 appends without).
	 */
	if (wait) {
		fm_notify_sessions(m, from, ino, NULL, -1, 0);
		return false;
	}
	fm_notify_sessions(m, from, ino, NULL, off, len);
	pthread_mutex_lock(&m->notice_mu);
	struct fm_notice **p = &m->notices;
	while (*p != &me)
		p = &(*p)->next;
	*p = me.next;
	pthread_mutex_unlock(&m->notice_mu);
	return true;
}

/* m->later's thread: the deferred page notices, in their order */
static void *later_thread(void *arg)
{
	struct fmount *m = arg;

	pthread_mutex_lock(&m->notice_mu);
	while (1) {
		while (!m->later && !m->later_stop)
			pthread_cond_wait(&m->later_cond, &m->notice_mu);
		if (!m->later)
			break;
		struct fm_notice *n = m->later;

		m->later = n->next;
		pthread_mutex_unlock(&m->notice_mu);
		/* the sessions are walked under sess_rw: one gone meanwhile is not told */
		fm_notify_sessions(m, n->from, n->ino, NULL, n->off, n->len);
		free(n);
		pthread_mutex_lock(&m->notice_mu);
	}
	pthread_mutex_unlock(&m->notice_mu);
	return NULL;
}

void fm_others_pages_after(struct fsess *s, fuse_ino_t ino, off_t off, off_t len)
{
	struct fmount *m = s->m;
	struct fm_notice *n = malloc(sizeof(*n));

	pthread_mutex_lock(&m->notice_mu);
	if (!m->later_started && !m->later_stop && n)
		m->later_started = !pthread_create(&m->later_thread, NULL, later_thread, m);
	bool queued = n && m->later_started && !m->later_stop;
	if (queued) {
		*n = (struct fm_notice) { .ino = ino, .from = s, .off = off, .len = len };
		struct fm_notice **p = &m->later;
		while (*p)
			p = &(*p)->next;
		*p = n;
		pthread_cond_signal(&m->later_cond);
	}
	pthread_mutex_unlock(&m->notice_mu);
	if (!queued) {		/* no memory or no thread: here */
		free(n);
		fm_notify_sessions(m, s, ino, NULL, off, len);
	}
}

void fm_notice_stop(struct fmount *m)
{
	pthread_mutex_lock(&m->notice_mu);
	m->later_stop = true;
	bool started = m->later_started;
	if (started)
		pthread_cond_signal(&m->later_cond);
	pthread_mutex_unlock(&m->notice_mu);
	if (started)
		pthread_join(m->later_thread, NULL);
}

/* The kernel's FUSE_NOTIFY_INC_EPOCH (protocol 7.44, Linux 6.16; not in libfuse 3.14's headers) */
#define NOTIFY_INC_EPOCH	8

/*
 * Every name the kernel of se holds (and every missing name) is looked up
 * again before its next use: its connection's epoch moves past the one
 * each dentry was made in.  0, or -errno (EINVAL: a kernel without it).
 */
static int notify_inc_epoch(struct fuse_session *se)
{
	struct fuse_out_header out = { .len = sizeof(out), .error = NOTIFY_INC_EPOCH };

	return write(fm_lf->session_fd(se), &out, sizeof(out)) == sizeof(out) ? 0 : -errno;
}

/*
 * Session s joined (invariant 9): the kernels of the others cached names,
 * missing names and attributes for TIMEOUT while they were alone, and no
 * notice after another session's reply closes the moment in between
 * (t117: a name removed through the new mountpoint was still found through
 * the old one right after unlink(2) returned).  From now on they cache
 * nothing (fm_cache_timeout()); here they drop what they have: their
 * names by the epoch, the attributes of every inode held.  Without lock;
 * after sess_add().  A kernel before 6.16 keeps its names until the
 * notices of their changes come (the man page says so).
 */
void fm_notify_joined(struct fmount *m, const struct fsess *s)
{
	uint64_t *inums = NULL;
	size_t nr = 0;

	LOCK(m);
	if (m->nr_held && (inums = malloc(m->nr_held * sizeof(*inums))))
		for (size_t i = 0; i < m->cap_held && nr < m->nr_held; i++)
			if (m->held[i].inum)
				inums[nr++] = m->held[i].inum;
	UNLOCK(m);
	pthread_rwlock_rdlock(&m->sess_rw);
	for (struct fsess *o = m->sess; o; o = o->next) {
		if (o == s)
			continue;
		int r = notify_inc_epoch(o->se);
		if (r && r != -EINVAL)
			fprintf(stderr, "bcachefs fusemount: %s: dropping the names the kernel "
				"cached: %s\n", o->mnt, strerror(-r));
		for (size_t i = 0; i < nr; i++)
			fm_lf->lowlevel_notify_inval_inode(o->se, fm_to_fuse(inums[i]), -1, 0);
	}
	pthread_rwlock_unlock(&m->sess_rw);
	free(inums);
}


/* ------------------------------------------------------------ fs timestats */

/* The upper bound (ns) of the histogram bucket holding the q-th of n calls. */
static uint64_t req_quantile(const struct req_stat *st, double q)
{
	uint64_t want = (uint64_t)(q * st->calls), seen = 0;

	for (unsigned b = 0; b < REQ_HIST; b++) {
		seen += st->hist[b];
		if (seen > want || b == REQ_HIST - 1)
			return (b == REQ_HIST - 1 ? st->max_ns / 1000 : (1ULL << b)) * 1000ULL;
	}
	return st->max_ns;
}

/*
 * `fs timestats [--json] [--reset]` (cmd_fs_timestats.c forwards it): the
 * request statistics since the daemon started or was last reset.
 */
int cmd_fusemount_timestats_body(struct cmd_ctx *x, int argc, char **argv)
{
	bool json = false, reset = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--reset"))
			reset = true;
		else {
			fprintf(x->err, "bcachefs fs timestats: unknown argument '%s'\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!x->mounted || !x->priv) {
		fprintf(x->err, "bcachefs fs timestats: only a fusemount daemon keeps them\n");
		return EXIT_USAGE;
	}
	/* a reset is a change: only under the name whose rights were checked (ctl_server.c) */
	if (reset && strcmp(x->cmd, "fs timestats --reset")) {
		fprintf(x->err, "bcachefs fs timestats: --reset sent as a read-only request\n");
		return EXIT_USAGE;
	}
	struct req_stat *copy = malloc(sizeof(req_stats));
	if (!copy)
		return EXIT_FAIL;
	x->lock(x);
	memcpy(copy, req_stats, sizeof(req_stats));
	int64_t since = fm_req_stats_since;	/* RFC 3339, as every --json time */
	uint64_t unlocked = atomic_load(&fm_reads_unlocked), redone = atomic_load(&fm_reads_redone);
	uint64_t w_unlocked = atomic_load(&fm_writes_unlocked), w_redone = atomic_load(&fm_writes_redone);
	uint64_t w_combined = atomic_load(&fm_writes_combined);
	if (reset) {
		atomic_fetch_sub(&fm_writes_unlocked, w_unlocked);
		atomic_fetch_sub(&fm_writes_redone, w_redone);
		atomic_fetch_sub(&fm_writes_combined, w_combined);
		memset(req_stats, 0, sizeof(req_stats));
		fm_req_stats_since = fm_real_ns();
		atomic_fetch_sub(&fm_reads_unlocked, unlocked);
		atomic_fetch_sub(&fm_reads_redone, redone);
	}
	x->unlock(x);

	char when[64] = "";
	time_t secs = since / 1000000000LL;
	struct tm tm;
	if (gmtime_r(&secs, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (json) {
		fprintf(x->out, "{\"version\": %d, \"since\": \"%s\", \"requests\": [", BCH_JSON_VERSION,
			when);
		bool first = true;
		for (unsigned i = 0; i < REQ_NR; i++) {
			const struct req_stat *st = &copy[i];
			if (!st->calls)
				continue;
			fprintf(x->out, "%s{\"type\": \"%s\", \"calls\": %" PRIu64 ", \"wait_ns\": %" PRIu64
				", \"hold_ns\": %" PRIu64 ", \"max_ns\": %" PRIu64 ", \"p50_ns\": %" PRIu64
				", \"p99_ns\": %" PRIu64 "}", first ? "" : ", ", req_names[i], st->calls,
				st->wait_ns, st->hold_ns, st->max_ns, req_quantile(st, .5),
				req_quantile(st, .99));
			first = false;
		}
		fprintf(x->out, "], \"reads_unlocked\": %" PRIu64 ", \"reads_redone\": %" PRIu64
			", \"writes_unlocked\": %" PRIu64 ", \"writes_redone\": %" PRIu64
			", \"writes_combined\": %" PRIu64 "}\n",
			unlocked, redone, w_unlocked, w_redone, w_combined);
	} else {
		fprintf(x->out, "Requests since %s: the engine lock, waited for and held, per request type\n"
			"%-16s %9s %10s %9s %9s %9s %9s %6s\n", when, "type", "calls", "total ms",
			"mean us", "p50 us", "p99 us", "max us", "wait%");
		for (unsigned i = 0; i < REQ_NR; i++) {
			const struct req_stat *st = &copy[i];
			if (!st->calls)
				continue;
			uint64_t total = st->wait_ns + st->hold_ns;
			fprintf(x->out, "%-16s %9" PRIu64 " %10.1f %9.1f %9" PRIu64 " %9" PRIu64 " %9.1f %6.1f\n",
				req_names[i], st->calls, total / 1e6, total / 1e3 / st->calls,
				req_quantile(st, .5) / 1000, req_quantile(st, .99) / 1000, st->max_ns / 1e3,
				total ? 100.0 * st->wait_ns / total : 0.0);
		}
		fprintf(x->out, "(p50 and p99: the upper bound of a power-of-two bucket)\n"
			"Reads outside the lock: %" PRIu64 ", redone under it: %" PRIu64 "\n"
			"Writes outside the lock: %" PRIu64 ", redone under it: %" PRIu64
			", ended in another's hold of it: %" PRIu64 "\n",
			unlocked, redone, w_unlocked, w_redone, w_combined);
	}
	free(copy);
	return EXIT_OK;
}
