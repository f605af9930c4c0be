// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_fusemount.c - `bcachefs fusemount [-o OPTS] [-f] [-d] DEVICES MOUNTPOINT`:
 * the filesystem as a mounted Linux filesystem through FUSE (libfuse3's
 * low-level API), with no kernel driver.  Also run as mount.fuse.bcachefs
 * (`mount -t fuse.bcachefs DEV MNT`, fstab).
 *
 * FUSE inode numbers are ours (the root, 4096, is FUSE_ROOT_ID).  Every
 * request takes the engine lock (m->lock) around its library calls: the
 * engine is single-threaded, the session is not.  A read holds it only to
 * plan; its device reads, checksums, cipher and decompression run with the
 * devices held open instead (need_handover(), io.h "Reads outside the
 * engine lock"), and a read that cannot finish so is redone under the lock
 * the old way.  A write larger than WRITE_UNLOCKED_MIN, or of whole blocks
 * (plan_write()), holds it to allocate its space and take a ticket, then
 * checksums, encrypts and writes its data with the devices held open, and
 * takes it again to add its extents once every earlier write of the file
 * has (fs_ops.h, bch_fs_write_begin()), or is ended by the writer that
 * holds it then (end_write());
 * fsync waits for the file's writes issued before it, and a command body
 * for every planned write.  The kernel caches reads; writes
 * are not cached (no writeback cache), so each write(2) is stored, or
 * refused with ENOSPC, before it returns.  Names and attributes are cached
 * for TIMEOUT (30 s): the kernel makes most changes itself, and every other
 * one is notified to it (another session's: invariant 9; a command's:
 * fusemount_name_changed()); while several sessions serve the filesystem
 * they are not cached at all (cache_timeout()).
 *
 * Invariants
 *   (1) An inode whose last name goes while the kernel still knows it (a
 *       lookup count or an open file) keeps its data: the library is told to
 *       defer the free, and it happens after the kernel forgets the inode
 *       (queued, up to 64 freed together: frees_run(), before any request
 *       but an rm -rf's takes the lock, and by the background thread), or at
 *       unmount.
 *   (2) fsync and fsyncdir return only after a journal flush.
 *   (3) Unmount (fusermount -u, umount, SIGTERM, SIGINT) closes the
 *       filesystem cleanly; a killed daemon leaves a filesystem that opens
 *       with journal replay.
 *   (4) FUSE's umount returns before the daemon has closed the filesystem.
 *       Every device is marked with the mount (bch_dev_mark_mounted) right
 *       after the mount, so a command that opens it once the mount is gone
 *       waits for the close instead of failing or reading a half-closed
 *       filesystem (blockdev.c, invariant 6).
 *   (5) Background work (rebalance, copygc) runs in one thread, started
 *       once the filesystem is mounted read-write (and after daemonizing: a
 *       fork keeps no threads) and joined before the filesystem is closed.
 *       It takes the lock for one step at a time (rebalance: BG_BUDGET) and
 *       lets waiting requests in between steps.  With nothing to do it
 *       sleeps on bg_cond (woken by writes, or after BG_IDLE); after each
 *       look it naps BG_KICK_GAP_MS deaf to writes (they only set bg_kick,
 *       looked at when the nap ends), so a stream of writes wakes it at
 *       most 1000/BG_KICK_GAP_MS times a second, not once per write (a
 *       wakeup per write cost untar a quarter of the daemon's CPU in futex
 *       calls and task switches); parked (the
 *       target is full) rebalance runs only once c->space_gen has moved or
 *       waiting work was kicked (c->rebalance_kicks: an option change, a write
 *       to a waiting file), so a parked daemon costs no CPU.  Copygc
 *       runs when bch_copygc_needed() says free buckets run low.  Never on
 *       a read-only mount; -o norebalance and -o nocopygc turn either off.
 *       A subvolume delete left unfinished (snapshot.h) is finished here in
 *       steps of BG_SNAP_GC_BUDGET positions.  Erasure-coded stripes are
 *       built when writes pause (bg_ec_defer: BG_EC_QUIET_NS after the
 *       last), or at once when space runs short.
 *   (6) Commands on the mountpoint (device add, data rebalance, ...) reach
 *       the daemon through its control channel (ctl.h, ctl_server.c),
 *       started with the background thread and stopped (running jobs
 *       cancelled and waited for, the socket removed) before it.  Their
 *       bodies take the same lock and may replace m->c (a membership
 *       change reopens the filesystem) and m->devs: every user of the
 *       engine reads m->c after taking the lock, never a copy kept across
 *       an unlock, except a read's plan, which keeps m->ra_lock for reading
 *       from before the unlock until its last device read, so no body runs
 *       meanwhile.  The mountpoint's root answers getxattr "bcachefs.ctl"
 *       with the socket's path.
 *   (7) atime is ours: the kernel marks FUSE inodes S_NOATIME.  A read, a
 *       listing or a readlink that reaches us updates it by the rules of
 *       the mountpoint it came through (fsess.atime, nodiratime: Linux's
 *       atime_needs_update()), never
 *       the ctime; with lazytime the new atime waits in the held table
 *       (lazy_atime, seen by every getattr) until fsync, the inode's forget,
 *       a remount or unmount.  Reads from the kernel's page cache never come:
 *       an open whose next read is due to update atime drops the cache.
 *   (8) mount -o remount (remount_front) asks the daemon over the control
 *       channel ("remount", cmd_fusemount_remount_body): options are
 *       checked whole first, then ro closes cleanly and reopens read-only
 *       (rw the other way: reopen()), with m->c replaced under the lock as
 *       in (6) and background work restarted as the mount now is.
 *   (9) One daemon, several mountpoints: a mount of a mounted filesystem
 *       is forwarded (join_front) to its daemon, which makes one more FUSE
 *       session (cmd_fusemount_mount_body), served by its own thread; the
 *       engine, the lock, the held table and background work are shared.
 *       A change made through one session is notified to the others after
 *       the reply (a write's data before it), without lock (others_inode,
 *       others_entry), so their kernels drop what they cache of it.  The filesystem is closed when
 *       the first session's loop has ended and every joined one with it
 *       (wait_joined); a signal unmounts them all.  A session that ends
 *       before others keeps what its kernel held until the last one ends.
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

#define TIMEOUT		30.0

/* libfuse3's functions, set by cmd_fusemount() before the session starts (fuse_dl.h) */
static const struct fuse_dl *lf;

/* Inodes the kernel holds (lookup count + open handles), for invariant (1). */
struct held {
	uint64_t	inum;		/* 0: empty */
	uint64_t	refs;
	int64_t		lazy_atime;	/* ns, not written yet (lazytime); 0: none */
};

/* -o relatime (the default), strictatime, noatime: when a read updates atime */
enum atime_mode {
	ATIME_RELATIME,
	ATIME_STRICT,
	ATIME_NONE,
};

struct fmount;

/*
 * One FUSE session: one mountpoint (invariant 9).  The first is made by
 * cmd_fusemount() and served by its own thread; more join through the
 * control channel ("mount", cmd_fusemount_mount_body) and each runs its loop
 * in a thread of its own.  A request's userdata is its session.
 */
struct fsess {
	struct fmount	*m;
	struct fuse_session *se;
	struct fuse_args args;		/* joined sessions: what session_new was given */
	char		mnt[PATH_MAX];	/* absolute */
	bool		joined;		/* not the first: ends in sess_thread() */
	/* atime rules (invariant 7): per mountpoint, as the kernel's MNT_ flags; lock */
	enum atime_mode	atime;
	bool		nodiratime;
	/* the INIT handshake (sess_read(), sess_writev()); killpriv_v2 read without lock */
	uint64_t	init_unique;	/* INIT's request, until its reply: 0 none */
	bool		init_offers_v2;	/* the kernel offered FUSE_HANDLE_KILLPRIV_V2 */
	bool		killpriv_v2;	/* and the reply took it */
	/* the last GETXATTR security.capability under KILLPRIV_V2 (op_setattr); lock */
	uint64_t	caps_probe_ino;
	pid_t		caps_probe_pid;
	struct fsess	*next;
};

struct fmount {
	struct bch_fs	*c;
	pthread_mutex_t	lock;
	struct held	*held;
	size_t		nr_held, cap_held;	/* cap: power of two */
	/*
	 * Inodes the kernel forgot, to free if unlinked (frees_run()): an
	 * rm -rf's files go FREE_PENDING at a time in a few transactions, not
	 * a commit each (lock).  Until then each is on disk with nlink 0 and
	 * the UNLINKED flag, as an open unlinked file is (fsck frees it after
	 * a crash).
	 */
	uint64_t	*free_pending;
	size_t		nr_free_pending;
	uint32_t	*open_subvol;	/* open files and directories per subvolume
					 * (subvolume delete refuses a busy one); made
					 * at the first open, freed at the unmount */
	bool		read_only;
	bool		lazytime;	/* the filesystem's, as the kernel's SB_LAZYTIME */
	int64_t		last_write_ns;	/* mono_ns() of the last write stored (bg_ec_defer) */
	size_t		nr_lazy;	/* held entries with lazy_atime */
	/*
	 * The sessions (invariant 9): the list changes with sess_rw held for
	 * writing and sess_mu; notifications walk it with sess_rw held for
	 * reading, never with lock.  nr_sess is read without either (fast path).
	 */
	struct fsess	*sess;
	pthread_rwlock_t sess_rw;
	pthread_mutex_t	sess_mu;
	pthread_cond_t	sess_cond;	/* a session ended (sess_mu) */
	atomic_uint	nr_sess;
	unsigned	live;		/* sessions initialised and not yet destroyed (sess_mu) */
	unsigned	nr_joined;	/* sess_thread()s not yet ended (sess_mu) */
	char		fsname[8192];	/* fsname= of every session */
	bool		fuse_debug;	/* -d */
	/* the last read: a read that follows it is sequential (readahead) */
	uint64_t	ra_inum, ra_end, ra_hinted;
	struct bch_fs_read_cache *rac;	/* encrypted extents read ahead (fs_read.h; NULL: none) */
	/* background work, invariant (5); the flags are under lock */
	bool		norebalance;	/* -o norebalance */
	bool		nocopygc;	/* -o nocopygc */
	bool		iostats;	/* -o iostats */
	pthread_t	bg;
	bool		bg_running;	/* bg is to be joined */
	bool		bg_stop;	/* unmounting: the thread returns */
	bool		bg_kick;	/* data was written: look for work now */
	bool		bg_unpark;	/* a file's options changed: parked work may go */
	bool		bg_deaf;	/* napping: a write's kick sets bg_kick, no signal */
	pthread_cond_t	bg_cond;	/* the thread sleeps on it with lock */
	atomic_uint	fg_waiting;	/* requests waiting for lock */
	/* the control channel, invariant (6) */
	struct ctl_server *ctl;
	char		**devs;		/* member paths (cmd_ctx.devs), under lock */
	unsigned	nr_devs;
	struct bch_opts	opts;		/* what the filesystem was opened with */
	char		mnt[PATH_MAX];	/* absolute, for messages */
	uint64_t	errors_logged;	/* c->nr_errors printed so far (errors=continue) */
	/*
	 * Readahead is issued after the lock is released, on the devices of the
	 * filesystem it was planned on: held for reading meanwhile, and for
	 * writing by command bodies, which may close and reopen the devices
	 * (device add, remove, resize).
	 */
	pthread_rwlock_t ra_lock;
	struct bch_fs	*marked_c;	/* whose devices are marked mounted */
	/*
	 * Writes in flight (fs_ops.h, bch_fs_write_begin()), under lock:
	 * write_cond is signalled when one ends (the next of its file may
	 * end, fsync and command bodies wait for them); writes_blocked: a
	 * command body waits for the planned ones, and none is planned.
	 */
	struct bch_fs_writes writes;
	pthread_cond_t	write_cond;
	unsigned	writes_blocked;
	/*
	 * Write ends combined (end_write()): a planned write whose run is
	 * done, while a holder of lock has ends_open set, queues itself on
	 * ends and sleeps; that holder ends it before it lets lock go.
	 * Under ends_mu, taken with or without lock held; lock is never taken
	 * with ends_mu held.
	 */
	pthread_mutex_t	ends_mu;
	struct end_wait	*ends;		/* in the order they came */
	bool		ends_open;
	unsigned	test_write_hold_us;	/* WRITE_HOLD_ENV */
};

/*
 * Test hook: BCACHEFS_TEST_WRITE_HOLD=USEC (read at mount, at most 1 s):
 * every write request holds lock USEC microseconds longer at its begin, so
 * that other writes come back from their runs while it holds it and are
 * ended in its hold (t85).
 */
#define WRITE_HOLD_ENV	"BCACHEFS_TEST_WRITE_HOLD"

#define BG_BUDGET	2048	/* sectors of work per step (1 MiB): lock held briefly */
#define BG_SNAP_GC_BUDGET	4096	/* positions per snapshot gc step */
#define BG_IDLE		1	/* seconds between looks when idle or parked */
#define BG_KICK_GAP_MS	50	/* the nap after a look, deaf to writes' kicks */
#define BG_BACKOFF_MAX	64	/* seconds between retries after errors */
/*
 * Stripes are built when writes pause: not within this long of the last
 * write (ns), unless less than 1/BG_EC_FREE_DIV of the space is free.  A
 * stripe built beside a write stream took the engine lock for a whole
 * stripe's reads and parity at a time: RS(4,2) wrote at 0.66x of
 * replicas=3 with the builder beside it, 0.95x without (bench/ec.sh).
 */
#define BG_EC_QUIET_NS	(200 * 1000000LL)
#define BG_EC_FREE_DIV	4

/*
 * libfuse's loop keeps every worker thread it started, idle or not (it
 * starts one only when all are busy; 3.12 and later at most max_threads,
 * 10).  With at most 8 idle (what it had), 4 clients' 4 KiB random writes
 * made it start and end 50-140 threads a second (perf stat
 * sched_process_fork), each end a madvise of the thread's stack (~95 a
 * second: TLB shootdowns to both cores) and each start its stack's page
 * faults; kept, none, and the daemon's CPU per write at 4 clients was
 * 14.4-15.5 us against 18.0-21.9 (perf stat, alternated runs, load 7-9).
 * More than the loop ever starts, and at most libfuse's limit (100000):
 * 3.14 says "Ignoring invalid max threads value" on stderr past it.
 */
#define LOOP_IDLE_THREADS	10000

#define BG_YIELD_US	10000	/* at most this long for waiting requests between steps */

/*
 * Forgotten inodes kept for one frees_run() at most (its transactions
 * free up to 64 inodes each, fs_ops.h): the lock is held ~0.2 ms for them.
 */
#define FREE_PENDING	64

#define RA_WINDOW	(8ULL << 20)	/* sequential reads: hinted this far ahead */
#define RA_NEAR		(1ULL << 20)	/* a read this close to the last end is sequential */

static struct fsess *SESS(fuse_req_t req)
{
	return lf->req_userdata(req);
}

static struct fmount *FM(fuse_req_t req)
{
	return SESS(req)->m;
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
	size_t j = mix(inum) & (m->cap_held - 1);
	while (m->held[j].inum) {
		if (m->held[j].inum == inum)
			return &m->held[j];
		j = (j + 1) & (m->cap_held - 1);
	}
	if (!add)
		return NULL;
	m->held[j].inum = inum;
	m->held[j].refs = 0;
	m->nr_held++;
	return &m->held[j];
}

/* Remove entry h, keeping the probe chains intact (backward shift). */
static void held_remove(struct fmount *m, struct held *h)
{
	size_t mask = m->cap_held - 1, i = h - m->held, j = i;

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

static void hold(struct fmount *m, uint64_t inum, uint64_t n)
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
static void frees_run(struct fmount *m)
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
		frees_run(m);
}

/* Drop n references; an inode none are left on goes to the pending frees (lock held). */
static void unhold(struct fmount *m, uint64_t inum, uint64_t n)
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

static fuse_ino_t to_fuse(uint64_t inum)
{
	return inum == BCH_ROOT_INO ? FUSE_ROOT_ID : inum;
}

static uint64_t from_fuse(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? BCH_ROOT_INO : ino;
}

/* One more (+1) or one fewer (-1) file or directory open in ino's subvolume (lock held). */
static void open_count(struct fmount *m, fuse_ino_t ino, int d)
{
	uint32_t sv = bch_fs_subvol_of(from_fuse(ino));

	if (!m->open_subvol && !(m->open_subvol = calloc(BCH_SUBVOL_MAX + 1, sizeof(*m->open_subvol))))
		return;		/* no memory: deletes are not refused for open files */
	if (sv <= BCH_SUBVOL_MAX && (d > 0 || m->open_subvol[sv]))
		m->open_subvol[sv] += d;
}

bool fusemount_subvol_busy(void *priv, uint32_t subvol)
{
	struct fmount *m = priv;

	return m && m->open_subvol && subvol <= BCH_SUBVOL_MAX && m->open_subvol[subvol];
}


static void fix_st(struct stat *st)
{
	st->st_ino = to_fuse(st->st_ino);
}

/*
 * The generation of inum, for file handles: (ino, generation) must name one
 * inode for the filesystem's life, and inode numbers can be reused (the
 * next number follows the highest one in use at open).  The creation time
 * in ns tells two inodes of one number apart; it never changes through the
 * mount.  The root's is 0: the kernel made its inode with generation 0, and
 * an entry for it with another would mark it stale.
 */
static uint32_t generation(struct fmount *m, uint64_t inum)
{
	struct bch_inode bi;

	if (inum == BCH_ROOT_INO || bch_inode_get(m->c, inum, &bi))
		return 0;
	uint64_t h = mix(bi.btime ^ 0x9e3779b97f4a7c15ULL);
	return (uint32_t)(h ^ (h >> 32)) | 1;
}

/* ------------------------------------------------------------ atime */

static int64_t ts_ns(struct timespec ts)
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
static bool atime_due(struct fmount *m, const struct fsess *s, const struct stat *st,
		      int64_t atime, int64_t now)
{
	if (m->read_only || s->atime == ATIME_NONE || (S_ISDIR(st->st_mode) && s->nodiratime) ||
	    m->c->devs_missing)
		return false;
	if (s->atime == ATIME_RELATIME && atime > ts_ns(st->st_mtim) && atime > ts_ns(st->st_ctim) &&
	    now - atime < RELATIME_MAX_NS)
		return false;
	return atime != now;
}

/* Store atime, leaving ctime as it is (a read changes no attribute). */
static void atime_write(struct fmount *m, uint64_t inum, int64_t atime)
{
	struct stat st;

	if (m->read_only || bch_fs_getattr(m->c, inum, &st))
		return;
	struct bch_setattr sa = {
		.valid = BCH_SETATTR_ATIME | BCH_SETATTR_CTIME | BCH_SETATTR_ATIME_READ,
		.atime = atime,
		.ctime = ts_ns(st.st_ctim),
	};
	bch_fs_setattr(m->c, inum, &sa);	/* as the kernel's, a failed update is no error */
}

/* lazytime: write h's atime now (it goes, is synced, or the mount changes). */
static void lazy_flush(struct fmount *m, struct held *h)
{
	if (!h->lazy_atime)
		return;
	atime_write(m, h->inum, h->lazy_atime);
	h->lazy_atime = 0;
	m->nr_lazy--;
}

static void lazy_flush_all(struct fmount *m)
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
static void lazy_stat(struct fmount *m, uint64_t inum, struct stat *st)
{
	int64_t a = lazy_atime(m, inum);

	if (a) {
		st->st_atim.tv_sec = a / 1000000000LL;
		st->st_atim.tv_nsec = a % 1000000000LL;
	}
}

/* bch_fs_getattr() with the atime lazytime has not written yet. */
static int getattr(struct fmount *m, uint64_t inum, struct stat *st)
{
	int r = bch_fs_getattr(m->c, inum, st);

	if (!r)
		lazy_stat(m, inum, st);
	return r;
}

/* chattr +A: reads of inum leave its atime (Linux's S_NOATIME).  Lock held. */
static bool file_noatime(struct fmount *m, uint64_t inum)
{
	unsigned fl;
	uint32_t project;

	return !bch_fs_get_flags(m->c, inum, &fl, &project) && (fl & FS_NOATIME_FL);
}

/*
 * touch_atime(): a read of inum (a file's data, a listing, a symlink's
 * target) reached us: update its atime by the mount's rules.  Lock held.
 */
static void read_atime(struct fmount *m, const struct fsess *s, uint64_t inum)
{
	struct stat st;
	int64_t now = bch_now_ns();

	if (m->read_only || s->atime == ATIME_NONE || getattr(m, inum, &st) ||
	    !atime_due(m, s, &st, ts_ns(st.st_atim), now) || file_noatime(m, inum))
		return;
	if (!m->lazytime) {
		atime_write(m, inum, now);
		return;
	}
	struct held *h = held_find(m, inum, true);
	if (!h->lazy_atime)
		m->nr_lazy++;
	h->lazy_atime = now;
}

/* An explicit atime (utimes, touch -a) replaces the lazy one. */
static void lazy_drop(struct fmount *m, uint64_t inum)
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
 * (invariant 9).  Another session's change is notified after its reply, so
 * a kernel that kept them could answer from its cache in between: t70 saw a
 * name created through one mountpoint still missing through the other.
 * What a kernel cached before the second session joined is dropped by the
 * notices alone.
 */
static double cache_timeout(struct fmount *m)
{
	return atomic_load_explicit(&m->nr_sess, memory_order_relaxed) < 2 ? TIMEOUT : 0.0;
}

/* Reply with an entry for inum (and count the lookup); lock held. */
static int make_entry(struct fmount *m, uint64_t inum, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	int r = getattr(m, inum, &e->attr);
	if (r)
		return r;
	fix_st(&e->attr);
	e->ino = to_fuse(inum);
	e->generation = generation(m, inum);
	e->attr_timeout = cache_timeout(m);
	e->entry_timeout = cache_timeout(m);
	hold(m, inum, 1);
	return 0;
}

/*
 * Request statistics (`bcachefs fs timestats MOUNTPOINT`): per request type,
 * how often it held the engine lock, how long it waited for it and held it,
 * and a histogram of the two together (log2 of microseconds).  A handler
 * names its type first (req_type()); the control channel's threads and the
 * sessions' own lock calls count as "command".  The counters change under
 * lock only.
 */
#define REQ_TYPES() \
	x(lookup) \
	x(forget) \
	x(forget_multi) \
	x(getattr) \
	x(setattr) \
	x(readlink) \
	x(mknod) \
	x(mkdir) \
	x(symlink) \
	x(link) \
	x(unlink) \
	x(rmdir) \
	x(rename) \
	x(open) \
	x(create) \
	x(read) \
	x(write) \
	x(fsync) \
	x(opendir) \
	x(readdir) \
	x(readdirplus) \
	x(releasedir) \
	x(release) \
	x(statfs) \
	x(setxattr) \
	x(getxattr) \
	x(listxattr) \
	x(removexattr) \
	x(fallocate) \
	x(lseek) \
	x(copy_file_range) \
	x(ioctl) \
	x(command)

enum req_type {
#define x(n)	REQ_##n,
	REQ_TYPES()
#undef x
	REQ_NR
};

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
static int64_t req_stats_since;		/* CLOCK_REALTIME ns of the last reset */
static __thread int req_cur = REQ_command;
static __thread int64_t req_wait_t0, req_lock_t0;

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The wall clock for "since" (not bch_now_ns(): SOURCE_DATE_EPOCH fixes that one). */
static int64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The request this thread serves from now on (its handler's first line). */
static void req_type(enum req_type t)
{
	req_cur = t;
}

/* The lock was taken after waiting since req_wait_t0 (lock held). */
static void req_locked(void)
{
	req_lock_t0 = mono_ns();
}

/* The lock is about to be released (lock held). */
static void req_unlocking(void)
{
	struct req_stat *st = &req_stats[req_cur];
	int64_t now = mono_ns(), wait = req_lock_t0 - req_wait_t0, hold = now - req_lock_t0;
	uint64_t us = (uint64_t)(wait + hold) / 1000;
	unsigned b = 0;

	while (b < REQ_HIST - 1 && us >= (1ULL << b))
		b++;
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
 * the lock only after they are done (fg_lock()), so a write, a create, a
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

/* Requests count themselves while they wait, so background work lets them in. */
static void fg_lock(struct fmount *m)
{
	req_wait_t0 = mono_ns();
	atomic_fetch_add(&m->fg_waiting, 1);
	pthread_mutex_lock(&m->lock);
	atomic_fetch_sub(&m->fg_waiting, 1);
	req_locked();
	if (m->nr_free_pending && !req_keeps_frees(req_cur))
		frees_run(m);
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

static void fg_unlock(struct fmount *m)
{
	exit_if_panicked(m);
	req_unlocking();
	pthread_mutex_unlock(&m->lock);
}

#define LOCK(m)		fg_lock(m)
#define UNLOCK(m)	fg_unlock(m)

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
 *                     turn: ctl_lock() waits (ENGINE released: need_wait())
 *                     until no planned write is in flight, and while a
 *                     body runs, writes are not planned (writes_blocked).
 * DEVICES is only ever taken with ENGINE held (need_handover()), so the
 * m->c a thread planned with is the one it reads from; and a thread holding
 * DEVICES never waits for ENGINE (a body holding ENGINE waits for DEVICES):
 * need_back() lets it go first.
 */
static void need_handover(struct fmount *m)	/* ENGINE -> DEVICES */
{
	pthread_rwlock_rdlock(&m->ra_lock);
	UNLOCK(m);
}

static void need_back(struct fmount *m)		/* DEVICES -> ENGINE */
{
	pthread_rwlock_unlock(&m->ra_lock);
	LOCK(m);
}

static void need_drop_devices(struct fmount *m)
{
	pthread_rwlock_unlock(&m->ra_lock);
}

/*
 * With ENGINE held: wait (it released meanwhile) until ready(m, arg); the
 * time counts as waiting for the lock, not holding it (fs timestats).
 */
static void need_wait(struct fmount *m, bool (*ready)(struct fmount *m, const void *arg), const void *arg)
{
	while (!ready(m, arg)) {
		int64_t t0 = mono_ns();
		pthread_cond_wait(&m->write_cond, &m->lock);
		req_lock_t0 += mono_ns() - t0;
	}
}

/* Reads run outside the engine lock (bch_data_read_plan_run()), and those redone under it. */
static atomic_uint_fast64_t reads_unlocked, reads_redone;
/* Writes encoded and written outside it (bch_fs_write_run()), and those redone under it. */
static atomic_uint_fast64_t writes_unlocked, writes_redone;
/* Of those, writes ended by another request's hold of it (ends_run()). */
static atomic_uint_fast64_t writes_combined;

/* Data was written (kick) or a file's options changed (unpark): lock held. */
static void bg_wake(struct fmount *m, bool unpark)
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
static struct bch_caller *caller_new(fuse_req_t req)
{
	const struct fuse_ctx *ctx = lf->req_ctx(req);
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
static int kill_priv(fuse_req_t req, struct fmount *m, uint64_t inum)
{
	struct stat st;
	int r = bch_fs_getattr(m->c, inum, &st);

	if (r || !S_ISREG(st.st_mode) || !(st.st_mode & (S_ISUID | S_ISGID)))
		return r;
	struct bch_caller *cr = caller_new(req);
	if (!cr)
		return -ENOMEM;
	r = bch_fs_kill_priv(m->c, inum, cr);
	free(cr);
	/* the kernel keeps the old mode for TIMEOUT unless told (attributes only) */
	if (r > 0)
		lf->lowlevel_notify_inval_inode(SESS(req)->se, to_fuse(inum), -1, 0);
	return r < 0 ? r : 0;
}

/*
 * The kernel's file_remove_privs() for a direct write (set_direct()):
 * a write removes the file's security.capability, whoever writes (Linux's
 * cap_inode_killpriv(); the buffered path asks and removes it through us).
 * *gone when one was removed.  Lock held.
 */
static int kill_caps(struct fmount *m, uint64_t inum, bool *gone)
{
	int r = bch_fs_kill_caps(m->c, inum);

	*gone = !r;
	return r == -ENODATA ? 0 : r;
}

/*
 * Invariant (9): what one session changed, the other sessions' kernels may
 * hold cached (attributes, pages, names and negative names): tell them.
 * Called after the reply, without lock: the kernel of the other session may
 * hold the inode or directory lock the notification needs, for a request
 * of its own that waits for lock (or for the reply of this one).  skip:
 * the session that made the change (NULL: a command made it, tell all).
 */
static void notify_sessions(struct fmount *m, const struct fsess *skip, fuse_ino_t ino,
			    const char *name, off_t off, off_t len)
{
	if (skip && atomic_load(&m->nr_sess) < 2)
		return;
	pthread_rwlock_rdlock(&m->sess_rw);
	for (struct fsess *o = m->sess; o; o = o->next) {
		if (o == skip)
			continue;
		if (name)	/* a name of directory ino (made, removed, renamed) */
			lf->lowlevel_notify_inval_entry(o->se, ino, name, strlen(name));
		else		/* ino's attributes, and its pages in [off, off + len) unless off < 0 */
			lf->lowlevel_notify_inval_inode(o->se, ino, off, len);
	}
	pthread_rwlock_unlock(&m->sess_rw);
}

static void others_inode(struct fsess *s, fuse_ino_t ino, off_t off, off_t len)
{
	notify_sessions(s->m, s, ino, NULL, off, len);
}

static void others_entry(struct fsess *s, fuse_ino_t parent, const char *name)
{
	notify_sessions(s->m, s, parent, name, 0, 0);
}

/* ------------------------------------------------------------ requests */

/*
 * The kernel's killpriv handshake, FUSE_HANDLE_KILLPRIV_V2.  Without it the
 * kernel keeps no S_NOSEC for a FUSE inode: before every buffered write it
 * asks GETXATTR security.capability (16,385 of them for 16,384 random 4 KiB
 * writes: one request in two), and before every chown a GETATTR.  With it
 * the kernel asks once per inode and leaves the set-id rule to the daemon,
 * which applies all of it already (kill_priv() on writes, truncates,
 * fallocate, open O_TRUNC and copies; chown_kill_bits() on chown); kill_caps()
 * then runs on every write, not only on direct ones, so a capability set
 * through another mountpoint or a command still goes.  libfuse 3.14 of
 * Debian 12 neither offers nor passes the flag (3.16 does:
 * FUSE_CAP_HANDLE_KILLPRIV_V2), so the session's own I/O
 * (fuse_session_custom_io(): the same read(2) and writev(2) libfuse makes)
 * adds it to the INIT reply when the kernel offered it in INIT.  errno is
 * left as the call set it: libfuse reads it after.
 */
static ssize_t sess_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fsess *s = userdata;
	ssize_t r = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	if (r >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags2)) &&
	    in->opcode == FUSE_INIT) {
		const struct fuse_init_in *init = (const void *)(in + 1);

		s->init_unique = in->unique;
		s->init_offers_v2 = init->flags & FUSE_HANDLE_KILLPRIV_V2;
	}
	return r;
}

static ssize_t sess_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fsess *s = userdata;

	if (s->init_unique && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    ((struct fuse_out_header *)iov[0].iov_base)->unique == s->init_unique) {
		struct fuse_out_header *out = iov[0].iov_base;

		s->init_unique = 0;
		if (!out->error && s->init_offers_v2 &&
		    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
			((struct fuse_init_out *)iov[1].iov_base)->flags |= FUSE_HANDLE_KILLPRIV_V2;
			s->killpriv_v2 = true;
		}
	}
	return writev(fd, iov, count);
}

/* Before session_mount()'s INIT is read: the session's I/O is sess_read()'s and sess_writev()'s. */
static int sess_own_io(struct fsess *s)
{
	static const struct fuse_custom_io io = { .read = sess_read, .writev = sess_writev };

	return lf->session_custom_io(s->se, &io, lf->session_fd(s->se));
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fmount *m = ((struct fsess *)userdata)->m;

	pthread_mutex_lock(&m->sess_mu);
	m->live++;
	pthread_mutex_unlock(&m->sess_mu);
	/*
	 * No writeback cache: with it the kernel acknowledges write(2) from its
	 * page cache and our ENOSPC arrives at writeback, where only close or
	 * fsync may report it.  Every write reaches us while the caller waits.
	 */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/*
	 * No asynchronous direct I/O: the kernel turns a short reply to an
	 * async O_DIRECT write (what fits on a full filesystem) into EIO; the
	 * synchronous path returns the short count, as ext4 does.
	 */
	conn->want &= ~FUSE_CAP_ASYNC_DIO;
	/* file handles: the kernel may look up "." and ".." (op_lookup) */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want &= ~FUSE_CAP_SPLICE_READ;
	/*
	 * The kernel clears set-id bits on chown itself, and on writes,
	 * truncates and fallocate only S_ISUID and S_ISGID with group-execute
	 * (fuse_setattr()); kill_priv() applies the whole rule on those, and
	 * chown_kill_bits() on chown.  FUSE_CAP_HANDLE_KILLPRIV would spare the
	 * GETATTR the kernel sends before every chown, but libfuse 3.14 of
	 * Debian 12 never passes it to the kernel (libfuse issue 884, fixed in
	 * 3.16), and it does not offer FUSE_CAP_HANDLE_KILLPRIV_V2: the
	 * session's own I/O takes that one (sess_read()).
	 */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/*
	 * POSIX ACLs: the kernel enforces them; we keep mode and ACL in step and
	 * give new files their directory's default ACL, so the umask is ours to
	 * apply (only when there is no default ACL).
	 */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	conn->max_write = 1 << 20;
	/*
	 * The kernel keeps cached pages when a file's mtime moves: this daemon
	 * is the only writer, the kernel's own writes update its pages, and a
	 * change made through another mountpoint is notified with its range
	 * (invariant 9).  With auto_inval_data the first stat after writing a
	 * large file dropped every cached page of it (130 ms for 1 GiB).
	 */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA)
		conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
}

/* A session ends; the last one frees what the kernels no longer hold. */
static void op_destroy(void *userdata)
{
	struct fmount *m = ((struct fsess *)userdata)->m;

	/*
	 * A session that goes while others stay drops its lookups and opens
	 * without forgets: what it held is kept until the last one goes.
	 */
	pthread_mutex_lock(&m->sess_mu);
	bool last = !--m->live;
	pthread_mutex_unlock(&m->sess_mu);
	if (!last)
		return;
	LOCK(m);
	lazy_flush_all(m);
	frees_run(m);
	/* inodes unlinked while open: nothing holds them any more */
	for (size_t i = 0; i < m->cap_held; i++) {
		struct stat st;
		uint64_t inum = m->held[i].inum;
		if (inum && !m->read_only && !bch_fs_getattr(m->c, inum, &st) && !st.st_nlink)
			bch_fs_inode_free(m->c, inum);
	}
	UNLOCK(m);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	req_type(REQ_lookup);
	struct fmount *m = FM(req);
	struct fuse_entry_param e;
	uint64_t inum;

	LOCK(m);
	/*
	 * "." of any inode: how the kernel finds an inode by number alone, for
	 * open_by_handle_at and NFS export of an inode it does not hold (EXPORT_SUPPORT)
	 */
	int r = 0;
	if (!strcmp(name, "."))
		inum = from_fuse(parent);
	else
		r = bch_fs_lookup(m->c, from_fuse(parent), name, &inum);
	if (!r)
		r = make_entry(m, inum, &e);
	UNLOCK(m);
	if (r == -ENOENT) {
		/* a negative entry the kernel may cache */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = cache_timeout(m);
		lf->reply_entry(req, &e);
	} else if (r) {
		lf->reply_err(req, -r);
	} else {
		lf->reply_entry(req, &e);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	req_type(REQ_forget);
	struct fmount *m = FM(req);

	LOCK(m);
	unhold(m, from_fuse(ino), nlookup);
	UNLOCK(m);
	lf->reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	req_type(REQ_forget_multi);
	struct fmount *m = FM(req);

	LOCK(m);
	for (size_t i = 0; i < count; i++)
		unhold(m, from_fuse(forgets[i].ino), forgets[i].nlookup);
	UNLOCK(m);
	lf->reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	req_type(REQ_getattr);
	struct fmount *m = FM(req);
	struct stat st;
	(void)fi;

	LOCK(m);
	int r = getattr(m, from_fuse(ino), &st);
	UNLOCK(m);
	if (r)
		lf->reply_err(req, -r);
	else {
		fix_st(&st);
		lf->reply_attr(req, &st, cache_timeout(m));
	}
}

/*
 * Linux's setattr_prepare(): a mode keeps S_ISGID only for a member of the
 * file's (new) group or with CAP_FSETID.  The kernel checks it too, but not
 * on the mode it sends itself to drop S_ISUID before a write (6766 written
 * by a non-member must become 0766).  Lock held.
 */
static int chmod_strip_sgid(fuse_req_t req, struct fmount *m, uint64_t inum, int to_set,
			    const struct stat *attr, mode_t *mode)
{
	struct stat st;
	int r = bch_fs_getattr(m->c, inum, &st);

	if (r)
		return r;
	struct bch_caller *cr = caller_new(req);
	if (!cr)
		return -ENOMEM;
	if (!cr->cap_fsetid &&
	    !bch_caller_in_group(cr, (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : st.st_gid))
		*mode &= ~S_ISGID;
	free(cr);
	return 0;
}

/*
 * chown or chgrp of a non-directory (chown_common(), setattr_should_drop_sgid()):
 * S_ISUID goes whoever the caller is; S_ISGID goes with group-execute, or
 * when the caller is neither in the file's group (the one before the change)
 * nor has CAP_FSETID.  The kernel's fuse_setattr() sends the first two
 * and recomputes the mode without the last (a chgrp by an owner outside
 * the file's group kept S_ISGID).  The set-id bits to clear; lock held.
 */
static mode_t chown_kill_bits(fuse_req_t req, const struct stat *st)
{
	mode_t kill = 0;

	if (S_ISDIR(st->st_mode))
		return 0;
	if (st->st_mode & S_ISUID)
		kill |= S_ISUID;
	if ((st->st_mode & S_ISGID) && (st->st_mode & S_IXGRP)) {
		kill |= S_ISGID;
	} else if (st->st_mode & S_ISGID) {
		struct bch_caller *cr = caller_new(req);
		if (!cr || (!cr->cap_fsetid && !bch_caller_in_group(cr, st->st_gid)))
			kill |= S_ISGID;	/* no memory: the safe side */
		free(cr);
	}
	return kill;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	req_type(REQ_setattr);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;
	struct bch_setattr sa = { 0 };
	struct stat st;
	(void)fi;

	if (to_set & FUSE_SET_ATTR_MODE) {
		sa.valid |= BCH_SETATTR_MODE;
		sa.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		sa.valid |= BCH_SETATTR_UID;
		sa.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		sa.valid |= BCH_SETATTR_GID;
		sa.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		sa.valid |= BCH_SETATTR_SIZE;
		sa.size = attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME) {
		sa.valid |= BCH_SETATTR_ATIME;
		sa.atime = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? BCH_TIME_NOW : ts_ns(attr->st_atim);
	}
	if (to_set & FUSE_SET_ATTR_MTIME) {
		sa.valid |= BCH_SETATTR_MTIME;
		sa.mtime = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? BCH_TIME_NOW : ts_ns(attr->st_mtim);
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		sa.valid |= BCH_SETATTR_CTIME;
		sa.ctime = ts_ns(attr->st_ctim);
	}
	LOCK(m);
	int r = 0;
	bool chown_rule = to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID);
	/*
	 * Under KILLPRIV_V2 chown(f, -1, -1) reaches us as nothing to set, with
	 * no flag to tell it (the kernel sends FATTR_KILL_SUIDGID only with an
	 * owner or group), right after its need-killpriv GETXATTR
	 * security.capability from the same caller: that pair takes the chown
	 * rule, as Linux clears the bits of any chown of a file.
	 */
	bool probed = se->caps_probe_ino == ino && se->caps_probe_pid == lf->req_ctx(req)->pid;
	se->caps_probe_ino = 0;
	if ((to_set & FUSE_SET_ATTR_MODE) && (sa.mode & S_ISGID))
		r = chmod_strip_sgid(req, m, from_fuse(ino), to_set, attr, &sa.mode);
	if (r) {
		/* nothing more */
	} else if (!(to_set & ~FUSE_SET_ATTR_CTIME) && probed) {
		chown_rule = true;
	} else if (!(to_set & ~FUSE_SET_ATTR_CTIME)) {
		/*
		 * Nothing to set: the kernel's file_remove_privs() before a write
		 * through its cache (writeback), from the writer.  Its fuse_setattr()
		 * drops the mode it would not change itself (S_ISGID without
		 * group-execute); the rule is ours.
		 */
		r = kill_priv(req, m, from_fuse(ino));
	} else if (to_set & FUSE_SET_ATTR_SIZE) {
		/* truncate clears set-id bits as a write does; a mode set with it wins */
		r = kill_priv(req, m, from_fuse(ino));
		if (!r && (to_set & FUSE_SET_ATTR_MODE) && !bch_fs_getattr(m->c, from_fuse(ino), &st))
			sa.mode &= ~(S_ISUID | S_ISGID) | st.st_mode;
	}
	if (!r && chown_rule && !(r = bch_fs_getattr(m->c, from_fuse(ino), &st))) {
		mode_t kill = chown_kill_bits(req, &st);
		if (kill) {
			if (!(sa.valid & BCH_SETATTR_MODE))
				sa.mode = st.st_mode;
			sa.valid |= BCH_SETATTR_MODE;
			sa.mode &= ~kill;
		}
	}
	/* chmod: the access ACL's owner, mask and other entries follow the mode */
	char acl[4096];
	ssize_t n = 0;
	bool have_st = false;
	if (!r && (to_set & FUSE_SET_ATTR_MODE) &&
	    (n = bch_fs_getxattr(m->c, from_fuse(ino), BCH_ACL_XATTR_ACCESS, acl, sizeof(acl))) > 0 &&
	    bch_acl_valid(acl, n))
		bch_acl_chmod(acl, n, sa.mode);
	else
		n = 0;
	if (r) {
		/* nothing more */
	} else if (n && !(to_set & ~(FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_CTIME))) {
		r = bch_fs_set_acl(m->c, from_fuse(ino), acl, n, sa.mode);	/* one transaction */
	} else if (!n) {
		/* the reply's attributes from the update itself: one inode read less */
		r = bch_fs_setattr_stat(m->c, from_fuse(ino), &sa, &st);
		have_st = !r;
	} else {
		r = bch_fs_setattr(m->c, from_fuse(ino), &sa);
		if (!r)
			r = bch_fs_setxattr(m->c, from_fuse(ino), BCH_ACL_XATTR_ACCESS, acl, n, 0);
	}
	if (!r && (to_set & FUSE_SET_ATTR_ATIME))
		lazy_drop(m, from_fuse(ino));
	if (have_st)
		lazy_stat(m, from_fuse(ino), &st);
	else if (!r)
		r = getattr(m, from_fuse(ino), &st);
	UNLOCK(m);
	if (r) {
		lf->reply_err(req, -r);
		return;
	}
	fix_st(&st);
	lf->reply_attr(req, &st, cache_timeout(m));
	others_inode(se, ino, (to_set & FUSE_SET_ATTR_SIZE) ? 0 : -1, 0);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	req_type(REQ_readlink);
	struct fmount *m = FM(req);
	char buf[4096];

	LOCK(m);
	ssize_t n = bch_fs_readlink(m->c, from_fuse(ino), buf, sizeof(buf));
	if (n >= 0)
		read_atime(m, SESS(req), from_fuse(ino));
	UNLOCK(m);
	if (n < 0)
		lf->reply_err(req, (int)-n);
	else
		lf->reply_readlink(req, buf);
}

static void reply_new(fuse_req_t req, struct fmount *m, int r, uint64_t inum, fuse_ino_t parent,
		      const char *name)
{
	struct fsess *se = SESS(req);
	struct fuse_entry_param e;

	if (!r)
		r = make_entry(m, inum, &e);
	UNLOCK(m);
	if (r) {
		lf->reply_err(req, -r);
		return;
	}
	lf->reply_entry(req, &e);
	others_entry(se, parent, name);
	others_inode(se, to_fuse(inum), -1, 0);		/* a link: its count */
}

/*
 * Create with what a kernel filesystem does to the mode: the parent's
 * default ACL, when it has one, becomes the new file's access ACL (limited by
 * the requested mode) and, for directories, its default ACL too; otherwise
 * the umask applies.  Lock held.
 */
static int create_acl(struct fmount *m, fuse_req_t req, uint64_t parent, const char *name, mode_t mode,
		      dev_t rdev, const char *symlink_target, uint64_t *inum)
{
	const struct fuse_ctx *ctx = lf->req_ctx(req);
	char def[4096], acc[4096];
	struct stat dir;
	gid_t gid = ctx->gid;
	ssize_t n = symlink_target ? -ENODATA
		  : bch_fs_getxattr(m->c, parent, BCH_ACL_XATTR_DEFAULT, def, sizeof(def));
	bool inherit = n > 0 && bch_acl_valid(def, n);
	int r;

	if ((r = bch_fs_getattr(m->c, parent, &dir)))
		return r;
	/* a setgid directory: as Linux's vfs_prepare_mode() and inode_init_owner() */
	if ((dir.st_mode & S_ISGID) && (mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) {
		struct bch_caller *cr = caller_new(req);
		if (!cr)
			return -ENOMEM;
		mode = bch_mode_strip_sgid(dir.st_mode, dir.st_gid, cr, mode);
		free(cr);
	}
	if (inherit)
		bch_acl_create_masq(def, n, acc, &mode);
	else if (!symlink_target)
		mode &= ~(ctx->umask & 0777);
	bch_inode_init_owner(dir.st_mode, dir.st_gid, &mode, &gid);
	r = symlink_target
		? bch_fs_symlink(m->c, parent, name, symlink_target, ctx->uid, gid, inum)
		: bch_fs_create(m->c, parent, name, mode, rdev, ctx->uid, gid, inum);
	if (r || !inherit)
		return r;
	if (!bch_acl_is_equiv_mode(acc, n))
		r = bch_fs_setxattr(m->c, *inum, BCH_ACL_XATTR_ACCESS, acc, n, 0);
	if (!r && S_ISDIR(mode))
		r = bch_fs_setxattr(m->c, *inum, BCH_ACL_XATTR_DEFAULT, def, n, 0);
	return r;
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct fmount *m = FM(req);
	uint64_t inum = 0;

	LOCK(m);
	int r = create_acl(m, req, from_fuse(parent), name, mode, rdev, NULL, &inum);
	reply_new(req, m, r, inum, parent, name);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	req_type(REQ_mknod);
	make_node(req, parent, name, mode, rdev);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	req_type(REQ_mkdir);
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	req_type(REQ_symlink);
	struct fmount *m = FM(req);
	uint64_t inum = 0;

	LOCK(m);
	int r = create_acl(m, req, from_fuse(parent), name, S_IFLNK | 0777, 0, link, &inum);
	reply_new(req, m, r, inum, parent, name);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	req_type(REQ_link);
	struct fmount *m = FM(req);

	LOCK(m);
	int r = bch_fs_link(m->c, from_fuse(ino), from_fuse(newparent), newname);
	reply_new(req, m, r, from_fuse(ino), newparent, newname);
}

/* The inode a name stands for, when other sessions are to hear of it; 0 if none.  Lock held. */
static uint64_t name_inum(struct fmount *m, fuse_ino_t parent, const char *name)
{
	uint64_t inum = 0;

	if (atomic_load(&m->nr_sess) < 2 || bch_fs_lookup(m->c, from_fuse(parent), name, &inum))
		return 0;
	return inum;
}

/* After a name went (unlink, rmdir, a rename's target): the others forget it. */
static void others_gone(struct fsess *se, fuse_ino_t parent, const char *name, uint64_t inum)
{
	others_entry(se, parent, name);
	if (inum)
		others_inode(se, to_fuse(inum), -1, 0);	/* its link count */
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	req_type(REQ_unlink);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;

	LOCK(m);
	uint64_t inum = name_inum(m, parent, name);
	int r = bch_fs_unlink(m->c, from_fuse(parent), name);
	if (r == -ENOSPC && m->nr_free_pending) {	/* the space of those queued first */
		frees_run(m);
		r = bch_fs_unlink(m->c, from_fuse(parent), name);
	}
	UNLOCK(m);
	lf->reply_err(req, -r);
	if (!r)
		others_gone(se, parent, name, inum);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	req_type(REQ_rmdir);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;

	LOCK(m);
	uint64_t inum = name_inum(m, parent, name);
	int r = bch_fs_rmdir(m->c, from_fuse(parent), name);
	if (r == -ENOSPC && m->nr_free_pending) {	/* the space of those queued first */
		frees_run(m);
		r = bch_fs_rmdir(m->c, from_fuse(parent), name);
	}
	UNLOCK(m);
	lf->reply_err(req, -r);
	if (!r)
		others_gone(se, parent, name, inum);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	req_type(REQ_rename);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;
	unsigned f = 0;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
		lf->reply_err(req, EINVAL);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		f |= BCH_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		f |= BCH_RENAME_EXCHANGE;
	LOCK(m);
	uint64_t target = name_inum(m, newparent, newname);
	/* RENAME_WHITEOUT (overlayfs): the kernel checked who may; the whiteout is the caller's */
	const struct fuse_ctx *ctx = lf->req_ctx(req);
	int r = (flags & RENAME_WHITEOUT)
		? bch_fs_rename_whiteout(m->c, from_fuse(parent), name, from_fuse(newparent), newname, f,
					 ctx->uid, ctx->gid)
		: bch_fs_rename(m->c, from_fuse(parent), name, from_fuse(newparent), newname, f);
	UNLOCK(m);
	lf->reply_err(req, -r);
	if (!r) {
		others_entry(se, parent, name);
		others_gone(se, newparent, newname, target);
	}
}

/*
 * may_open(): an immutable file opens for reading only; an append-only one
 * for writing only with O_APPEND, never with O_TRUNC.  (The kernel knows no
 * FUSE file's flags, so the open is refused here.)  Lock held.
 */
static int open_flags_check(struct fmount *m, uint64_t inum, int oflags)
{
	unsigned fl;
	uint32_t project;
	int r = bch_fs_get_flags(m->c, inum, &fl, &project);
	bool write = (oflags & O_ACCMODE) != O_RDONLY || (oflags & O_TRUNC);

	if (r || !write)
		return r;
	if (fl & FS_IMMUTABLE_FL)
		return -EPERM;
	if ((fl & FS_APPEND_FL) && (!(oflags & O_APPEND) || (oflags & O_TRUNC)))
		return -EPERM;
	return 0;
}

/*
 * A file opened write-only bypasses the kernel's page cache (direct_io).
 * Its pages would be of no use: write-through already sends every write
 * here, and the first read after a write drops them anyway while atime is
 * due (op_open), which for a large file costs more than writing it (76 ms
 * a GiB).  It also spares the kernel's security.capability lookup before
 * every buffered write (file_remove_privs): the daemon kills privileges
 * itself on a direct write (op_write).  An O_WRONLY descriptor cannot be
 * mapped or executed, so nothing else changes for its user; pages another
 * descriptor holds are dropped by the kernel over the written range.
 */
#define FH_DIRECT	1	/* fi->fh: opened direct_io (the kernel does not send the flag back) */

static void set_direct(struct fuse_file_info *fi)
{
	fi->direct_io = (fi->flags & O_ACCMODE) == O_WRONLY;
	fi->fh = fi->direct_io ? FH_DIRECT : 0;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	req_type(REQ_open);
	struct fmount *m = FM(req);
	struct stat st;

	LOCK(m);
	int r = bch_fs_getattr(m->c, from_fuse(ino), &st);
	if (!r)
		r = open_flags_check(m, from_fuse(ino), fi->flags);
	if (!r && (fi->flags & O_TRUNC) && S_ISREG(st.st_mode))
		r = kill_priv(req, m, from_fuse(ino));
	/* POSIX open(): O_TRUNC of a file that existed moves mtime and ctime, empty or not */
	if (!r && (fi->flags & O_TRUNC) && S_ISREG(st.st_mode)) {
		struct bch_setattr sa = { .valid = BCH_SETATTR_SIZE, .size = 0 };
		r = bch_fs_setattr(m->c, from_fuse(ino), &sa);
	}
	/*
	 * Reads the kernel answers from its cache never reach us: when the next
	 * read is to update atime, the cache goes (keep_cache 0), so it does.
	 * An empty file's reads never come (nothing to read): atime at open.
	 */
	bool due = false;
	if (!r && (fi->flags & O_ACCMODE) != O_WRONLY && !(fi->flags & O_NOATIME) &&
	    !(fi->flags & O_TRUNC)) {
		struct stat now;
		if (!getattr(m, from_fuse(ino), &now))
			due = atime_due(m, SESS(req), &now, ts_ns(now.st_atim), bch_now_ns()) &&
			      !file_noatime(m, from_fuse(ino));
		if (due && !now.st_size)
			read_atime(m, SESS(req), from_fuse(ino));
	}
	if (!r) {
		hold(m, from_fuse(ino), 1);
		open_count(m, ino, 1);
	}
	UNLOCK(m);
	if (r) {
		lf->reply_err(req, -r);
		return;
	}
	/* the kernel forgets a cached atime after a read, not after an open */
	if (due)
		lf->lowlevel_notify_inval_inode(SESS(req)->se, ino, -1, 0);
	fi->keep_cache = !due;
	set_direct(fi);
	lf->reply_open(req, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	req_type(REQ_create);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;
	struct fuse_entry_param e;
	uint64_t inum = 0;

	LOCK(m);
	int r = create_acl(m, req, from_fuse(parent), name, S_IFREG | (mode & 07777), 0, NULL, &inum);
	if (!r)
		r = make_entry(m, inum, &e);
	if (!r) {
		hold(m, inum, 1);	/* the open file */
		open_count(m, to_fuse(inum), 1);
	}
	UNLOCK(m);
	if (r) {
		lf->reply_err(req, -r);
		return;
	}
	set_direct(fi);
	lf->reply_create(req, &e, fi);
	others_entry(se, parent, name);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	req_type(REQ_release);
	struct fmount *m = FM(req);
	(void)fi;

	LOCK(m);
	unhold(m, from_fuse(ino), 1);
	open_count(m, ino, -1);
	UNLOCK(m);
	lf->reply_err(req, 0);
}

/*
 * A read that starts near where the last one ended (the kernel's readahead
 * may send a few out of order) is sequential: plan the reading of the
 * file's next RA_WINDOW into ra, so the disk works while we reply.  Random
 * reads plan nothing.  Called under m->lock; the caller issues ra after it
 * replies, outside the lock, as asking the kernel to read is the slow part.
 */
static void readahead_hint(struct fmount *m, uint64_t inum, uint64_t off, uint64_t n,
			   struct bch_readahead *ra)
{
	uint64_t end = off + n;

	ra->nr = 0;
	if (inum == m->ra_inum && off + RA_NEAR >= m->ra_end && off <= m->ra_end + RA_NEAR) {
		uint64_t from = m->ra_hinted > end ? m->ra_hinted : end;
		if (from < end + RA_WINDOW) {
			uint64_t to = bch_data_readahead_plan(m->c, inum, from >> BCH_SECTOR_SHIFT,
							      (end + RA_WINDOW - from) >> BCH_SECTOR_SHIFT, ra);
			m->ra_hinted = to << BCH_SECTOR_SHIFT;
		}
	} else {
		m->ra_hinted = 0;
	}
	m->ra_inum = inum;
	m->ra_end = end;
}

/*
 * Each worker thread's read buffer, kept between requests: a buffer of a
 * read's size (128 KiB and up) would be a fresh mmap() per request, and
 * faulting in and zeroing its pages cost a quarter of a sequential read.
 */
struct thread_buf {
	void		*p;	/* aligned: whole extents are read straight into it */
	size_t		cap;
};
static pthread_key_t thread_buf_key;
static pthread_once_t thread_buf_once = PTHREAD_ONCE_INIT;

static void thread_buf_free(void *v)
{
	struct thread_buf *t = v;

	free(t->p);
	free(t);
}

static void thread_buf_init(void)
{
	if (pthread_key_create(&thread_buf_key, thread_buf_free))
		abort();
}

static void *thread_buf(size_t size)
{
	pthread_once(&thread_buf_once, thread_buf_init);
	struct thread_buf *t = pthread_getspecific(thread_buf_key);
	if (!t) {
		if (!(t = calloc(1, sizeof(*t))))
			return NULL;
		if (pthread_setspecific(thread_buf_key, t)) {
			free(t);
			return NULL;
		}
	}
	if (t->cap < size) {
		void *p;
		if (posix_memalign(&p, 4096, size))
			return NULL;
		free(t->p);
		t->p = p;
		t->cap = size;
	}
	return t->p;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	req_type(REQ_read);
	struct fmount *m = FM(req);
	struct bch_readahead ra = { 0 };
	struct bch_read_plan pl;
	char *buf = thread_buf(size ? size : 1);

	if (!buf) {
		lf->reply_err(req, ENOMEM);
		return;
	}
	/*
	 * Under the lock the plan (BCH_READ_PLAN_NEEDS), atime and readahead;
	 * the reads and checks without it (BCH_READ_RUN_NEEDS: fs_read.h).
	 * What the plan or the run cannot do is read the old way, locked.
	 */
	LOCK(m);
	bool planned = !bch_fs_read_plan(m->c, from_fuse(ino), off, size, &pl), ahead = false;
	ssize_t n = planned ? (ssize_t)pl.len : bch_fs_read(m->c, from_fuse(ino), off, buf, size);
	struct bch_read_plan pl_ahead;
	if (n > 0) {
		readahead_hint(m, from_fuse(ino), (uint64_t)off, (uint64_t)n, &ra);
		ahead = planned && !bch_fs_read_ahead_plan(m->c, m->rac, from_fuse(ino), off, n, &pl_ahead);
	}
	if (n >= 0 && !(fi->flags & O_NOATIME))
		read_atime(m, SESS(req), from_fuse(ino));
	need_handover(m);	/* the devices stay open until the reads and readahead are done */
	if (planned) {
		n = bch_fs_read_run(m->rac, &pl, buf);
		bch_data_read_plan_free(&pl);
		atomic_fetch_add_explicit(n == -EAGAIN ? &reads_redone : &reads_unlocked, 1,
					  memory_order_relaxed);
		if (n == -EAGAIN) {
			need_back(m);
			ra.nr = 0;	/* planned on devices that may have been reopened since */
			if (ahead)
				bch_data_read_plan_free(&pl_ahead);
			ahead = false;
			n = bch_fs_read(m->c, from_fuse(ino), off, buf, size);
			need_handover(m);
		}
	}
	if (n < 0)
		lf->reply_err(req, (int)-n);
	else
		lf->reply_buf(req, buf, n);
	bch_data_readahead_issue(&ra);
	if (ahead)
		bch_fs_read_ahead_run(m->rac, &pl_ahead);
	need_drop_devices(m);
}

/*
 * Writes of at most this many bytes that do not cover whole blocks are not
 * planned (plan_write()): their plan reads the old bytes of the partial
 * blocks and checks them again at the end, under the lock either way.
 * A 1 MiB write holds it 23 us planned against 530 us (64 MiB: 1.5 against
 * 34.1 ms), 128 KiB 6 against 68 us.
 */
#define WRITE_UNLOCKED_MIN	4096

/*
 * Whether op_write() plans a write of size bytes at off (lock held).  A
 * write of whole blocks is planned however small: the old way holds the
 * lock across the device write, a system call that the scheduler preempts
 * at its return whenever another thread woke meanwhile (and that may sleep
 * on the image file's lock), and every request then waits for the holder to
 * run again.  4 clients' 4 KiB random writes, old way: 377 of 2087 lock
 * waits' holders were preempted inside that pwrite (perf sched_switch, load
 * 6); planned, the lock is held 4-5 us twice per write instead of 12-17 us
 * once (fs timestats).  Not while a command body blocks them (writes_blocked).
 */
static bool plan_write(struct fmount *m, size_t size, off_t off)
{
	uint64_t bs = (uint64_t)m->c->sb->block_size << BCH_SECTOR_SHIFT;

	return !m->writes_blocked &&
	       (size > WRITE_UNLOCKED_MIN || (size && !(off % bs) && !(size % bs)));
}

static bool write_turn(struct fmount *m, const void *op)
{
	return bch_fs_write_turn(&m->writes, op);
}

struct writes_mark {
	uint64_t	handle, mark;
};

static bool writes_ended(struct fmount *m, const void *arg)
{
	const struct writes_mark *w = arg;

	return !bch_fs_writes_before(&m->writes, w->handle, w->mark);
}

static bool no_planned_writes(struct fmount *m, const void *arg)
{
	(void)arg;
	return !m->writes.planned;
}

/*
 * With ENGINE held, before an op that allocates file space beside the
 * writes (fallocate, copy_file_range): the planned writes in flight hold
 * new space until their ends free what they replace, so they end first,
 * and none is planned meanwhile; its ENOSPC is then the serial answer, as
 * a write not planned gets it (fs_ops.h, bch_fs_write_begin()).
 */
static void wait_planned_writes(struct fmount *m)
{
	m->writes_blocked++;
	need_wait(m, no_planned_writes, NULL);
	m->writes_blocked--;
}

/*
 * Write ends combined.  A planned write comes back from its run (the device
 * writes, without lock) to end: to add its extents under lock.  Taking lock
 * for that, while another write holds it, costs a sleep on it, and its
 * holder's unlock a wakeup: between the two, lock is held by no one while
 * the woken thread is scheduled.  So instead, when the holder has said it
 * will (ends_open: it holds lock for a write of its own), the write queues
 * itself on m->ends and sleeps until the holder has ended it (ends_run())
 * along with its own, one after the other in the same hold: one wakeup, with
 * the result, and lock never idle in between.
 *   (1) While ends_open is set, its setter holds lock and runs ends_run()
 *       before letting lock go; it clears ends_open (ends_run(close)) under
 *       ends_mu in the same hold that found no queued write to end, so a
 *       write either is queued while a holder will still look, or finds
 *       ends_open clear and takes lock itself.
 *   (2) A queued write is ended only when its turn has come
 *       (bch_fs_write_turn()); one whose turn has not waits for an earlier
 *       write of its file, and every end, here or in a thread of its own
 *       (end_turn()), is followed by ends_run() under the same hold.  So
 *       writes of one file end in the order of issue, as before.
 *   (3) Every end signals write_cond (fsync, command bodies and old-way
 *       writes wait on it), counts in the timestats, kicks background
 *       work: end_one(), whoever runs it.
 */
struct end_wait {
	struct bch_fs_write_op	*op;
	ssize_t			n;	/* bch_fs_write_end()'s result */
	bool			done;	/* under ends_mu */
	pthread_cond_t		cond;	/* done was set */
	struct end_wait		*next;
};

/* End op, whose turn has come (lock held). */
static ssize_t end_one(struct fmount *m, struct bch_fs_write_op *op)
{
	ssize_t n = bch_fs_write_end(m->c, &m->writes, op);

	pthread_cond_broadcast(&m->write_cond);
	if (op->planned)
		atomic_fetch_add_explicit(op->redone ? &writes_redone : &writes_unlocked, 1,
					  memory_order_relaxed);
	if (n > 0) {
		m->last_write_ns = mono_ns();
		bg_wake(m, false);
	}
	return n;
}

/* Lock held: queued writes are ended before it is let go (1). */
static void ends_open(struct fmount *m)
{
	pthread_mutex_lock(&m->ends_mu);
	m->ends_open = true;
	pthread_mutex_unlock(&m->ends_mu);
}

/*
 * Lock held: end every queued write whose turn has come, until none has;
 * with close, clear ends_open once none has (1).
 */
static void ends_run(struct fmount *m, bool close)
{
	for (;;) {
		pthread_mutex_lock(&m->ends_mu);
		struct end_wait **pp = &m->ends, *w;
		while ((w = *pp) && !write_turn(m, w->op))
			pp = &w->next;
		if (!w) {
			if (close)
				m->ends_open = false;
			pthread_mutex_unlock(&m->ends_mu);
			return;
		}
		*pp = w->next;
		pthread_mutex_unlock(&m->ends_mu);

		ssize_t n = end_one(m, w->op);
		atomic_fetch_add_explicit(&writes_combined, 1, memory_order_relaxed);
		pthread_mutex_lock(&m->ends_mu);
		w->n = n;
		w->done = true;
		pthread_cond_signal(&w->cond);
		pthread_mutex_unlock(&m->ends_mu);
	}
}

/*
 * Lock held: end op once its turn has come (it waits with lock released
 * meanwhile, as need_wait()), ending queued writes too (2).  Lock still
 * held on return, ends_open clear.
 */
static ssize_t end_turn(struct fmount *m, struct bch_fs_write_op *op)
{
	for (;;) {
		ends_open(m);
		ends_run(m, false);
		if (write_turn(m, op))
			break;
		ends_run(m, true);	/* none left to end: its turn waits for another thread */
		int64_t t0 = mono_ns();
		pthread_cond_wait(&m->write_cond, &m->lock);
		req_lock_t0 += mono_ns() - t0;
	}
	ssize_t n = end_one(m, op);
	ends_run(m, true);
	return n;
}

/*
 * A planned write back from its run (DEVICES held, ENGINE not): ended by
 * the holder of lock when one has ends_open set, else under lock taken here
 * (end_turn()).  Returns with neither held.
 */
static ssize_t end_write(struct fmount *m, struct bch_fs_write_op *op)
{
	struct end_wait w = { .op = op };

	need_drop_devices(m);
	pthread_mutex_lock(&m->ends_mu);
	if (m->ends_open) {
		struct end_wait **pp = &m->ends;
		while (*pp)
			pp = &(*pp)->next;
		*pp = &w;
		pthread_cond_init(&w.cond, NULL);
		while (!w.done)
			pthread_cond_wait(&w.cond, &m->ends_mu);
		pthread_mutex_unlock(&m->ends_mu);
		pthread_cond_destroy(&w.cond);
		return w.n;
	}
	pthread_mutex_unlock(&m->ends_mu);
	LOCK(m);
	ssize_t n = end_turn(m, op);
	UNLOCK(m);
	return n;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	req_type(REQ_write);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;

	struct bch_fs_write_op op;

	/*
	 * Begin (BCH_WRITE_PLAN_NEEDS), run (BCH_WRITE_RUN_NEEDS: the
	 * checksum, cipher and device writes without the engine lock), then,
	 * every earlier write of the file ended, end (BCH_WRITE_INDEX_NEEDS).
	 * Small writes of partial blocks go the old way at once (plan_write()).
	 */
	LOCK(m);
	ends_open(m);	/* writes back from their runs meanwhile: ended here (end_write()) */
	if (m->test_write_hold_us)
		usleep(m->test_write_hold_us);
	ssize_t n = kill_priv(req, m, from_fuse(ino));
	bool caps_gone = false;
	if (!n && ((fi->fh & FH_DIRECT) || se->killpriv_v2))
		n = kill_caps(m, from_fuse(ino), &caps_gone);
	if (!n)
		n = bch_fs_write_begin(m->c, &m->writes, &op, from_fuse(ino), off, buf, size,
				       plan_write(m, size, off));
	if (!n && op.planned) {
		ends_run(m, true);
		need_handover(m);
		bch_fs_write_run(&op);
		n = end_write(m, &op);
	} else {
		if (!n)
			n = end_turn(m, &op);
		else
			ends_run(m, true);
		UNLOCK(m);
	}
	if (n < 0) {
		lf->reply_err(req, (int)-n);
		return;
	}
	/*
	 * Before the reply, unlike the namespace changes: once write(2)
	 * returns, a read through another mountpoint must not find the old
	 * bytes in its page cache (t70 saw them when the notice came after).
	 */
	if (n > 0)
		others_inode(se, ino, off, n);
	if (caps_gone)
		others_inode(se, ino, -1, 0);
	lf->reply_write(req, n);
}

/*
 * No flush op: every write is stored before it returns, so close(2) has
 * nothing to report, and libfuse's ENOSYS to the first FLUSH makes the
 * kernel stop sending them (one request less per close; dirty pages of a
 * shared mapping are still written back before close returns: the kernel
 * does that before it would send FLUSH).
 */

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	req_type(REQ_fsync);
	struct fmount *m = FM(req);
	(void)ino;
	(void)datasync;
	(void)fi;

	LOCK(m);
	/* the writes of the file issued before: ended (their index updates in the journal) */
	struct writes_mark w = { from_fuse(ino), bch_fs_writes_mark(&m->writes) };
	need_wait(m, writes_ended, &w);
	lazy_flush_all(m);
	int r = m->read_only ? 0 : bch_fs_fsync(m->c);
	UNLOCK(m);
	lf->reply_err(req, -r);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	req_type(REQ_opendir);
	struct fmount *m = FM(req);
	struct stat st;

	LOCK(m);
	int r = bch_fs_getattr(m->c, from_fuse(ino), &st);
	if (!r && !S_ISDIR(st.st_mode))
		r = -ENOTDIR;
	if (!r)
		open_count(m, ino, 1);
	UNLOCK(m);
	if (r)
		lf->reply_err(req, -r);
	else
		lf->reply_open(req, fi);
}

struct dir_fill {
	fuse_req_t	req;
	struct fmount	*m;
	char		*buf;
	size_t		size, used;
	bool		plus;
};

static int fill_one(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type,
		    uint64_t next_pos)
{
	struct dir_fill *f = priv;
	char nm[256];
	size_t n;

	memcpy(nm, name, len);
	nm[len] = 0;
	if (f->plus) {
		struct fuse_entry_param e;
		bool dots = !strcmp(nm, ".") || !strcmp(nm, "..");
		if (dots) {
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = to_fuse(inum);
			e.attr.st_mode = d_type << 12;
		} else if (make_entry(f->m, inum, &e)) {
			return 0;	/* vanished: skip */
		}
		n = lf->add_direntry_plus(f->req, f->buf + f->used, f->size - f->used, nm, &e, next_pos);
		if (n > f->size - f->used) {
			if (!dots)
				unhold(f->m, inum, 1);	/* not sent: no lookup counted */
			return 1;
		}
	} else {
		struct stat st = { .st_ino = to_fuse(inum), .st_mode = d_type << 12 };
		n = lf->add_direntry(f->req, f->buf + f->used, f->size - f->used, nm, &st, next_pos);
		if (n > f->size - f->used)
			return 1;
	}
	f->used += n;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct fmount *m = FM(req);
	struct dir_fill f = { .req = req, .m = m, .buf = malloc(size), .size = size, .plus = plus };

	if (!f.buf) {
		lf->reply_err(req, ENOMEM);
		return;
	}
	LOCK(m);
	int r = bch_fs_readdir(m->c, from_fuse(ino), off, fill_one, &f);
	if (r >= 0)
		read_atime(m, SESS(req), from_fuse(ino));
	UNLOCK(m);
	if (r < 0)
		lf->reply_err(req, -r);
	else
		lf->reply_buf(req, f.buf, f.used);
	free(f.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	req_type(REQ_readdir);
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	req_type(REQ_readdirplus);
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	req_type(REQ_releasedir);
	struct fmount *m = FM(req);

	(void)fi;
	LOCK(m);
	open_count(m, ino, -1);
	UNLOCK(m);
	lf->reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	req_type(REQ_statfs);
	struct fmount *m = FM(req);
	struct statvfs st;
	(void)ino;

	LOCK(m);
	bch_fs_statfs(m->c, &st);
	UNLOCK(m);
	lf->reply_statfs(req, &st);
}

/*
 * The per-file options ("bcachefs.<option>", fs_ops.h) are changed by the
 * file's owner or root only, as chattr(1) attributes; the kernel has
 * checked write permission already (default_permissions).  Lock held.
 */
static int inode_opt_xattr_perm(fuse_req_t req, struct fmount *m, fuse_ino_t ino, const char *name)
{
	const struct fuse_ctx *ctx = lf->req_ctx(req);
	struct stat st;

	if (strncmp(name, "bcachefs.", strlen("bcachefs.")) || !ctx->uid)
		return 0;
	int r = bch_fs_getattr(m->c, from_fuse(ino), &st);
	return r ? r : st.st_uid == ctx->uid ? 0 : -EPERM;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	req_type(REQ_setxattr);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;
	bool access = !strcmp(name, BCH_ACL_XATTR_ACCESS);
	int r;

	if ((access || !strcmp(name, BCH_ACL_XATTR_DEFAULT)) && !bch_acl_valid(value, size)) {
		lf->reply_err(req, EINVAL);
		return;
	}
	LOCK(m);
	if (access) {
		/*
		 * The mode follows the ACL, and loses S_ISGID as chmod's would (the
		 * kernel leaves that to us); an ACL the mode says all of is not
		 * kept.  Both in one transaction: a refusal changes neither.
		 */
		struct stat st;
		struct bch_caller *cr = NULL;
		r = bch_fs_getattr(m->c, from_fuse(ino), &st);
		if (!r && !(cr = caller_new(req)))
			r = -ENOMEM;
		if (!r) {
			mode_t mode = bch_acl_update_mode(st.st_mode, st.st_gid, cr, value, size);
			r = bch_fs_set_acl(m->c, from_fuse(ino),
					   bch_acl_is_equiv_mode(value, size) ? NULL : value, size, mode);
		}
		free(cr);
	} else if (!(r = inode_opt_xattr_perm(req, m, ino, name))) {
		r = bch_fs_setxattr(m->c, from_fuse(ino), name, value, size, flags);
	}
	if (!r && !strncmp(name, "bcachefs.", 9))
		bg_wake(m, true);	/* per-file options: parked work may now go elsewhere */
	UNLOCK(m);
	lf->reply_err(req, -r);
	if (!r)
		others_inode(se, ino, -1, 0);	/* ctime, and the mode and ACL the kernel caches */
}

/* A virtual xattr's value: its length for a size query, ERANGE if it does not fit. */
static void reply_xattr_text(fuse_req_t req, const char *text, size_t len, size_t size)
{
	if (!size)
		lf->reply_xattr(req, len);
	else if (size < len)
		lf->reply_err(req, ERANGE);
	else
		lf->reply_buf(req, text, len);
}

/* `bcachefs fs usage MOUNTPOINT` asks the daemon through a virtual xattr of the root. */
static bool usage_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fmount *m = FM(req);
	bool json = !strcmp(name, "bcachefs.usage.json"), human = !strcmp(name, "bcachefs.usage.h");
	char *text = NULL;
	size_t len = 0;

	if (ino != FUSE_ROOT_ID || (!json && !human && strcmp(name, "bcachefs.usage")))
		return false;
	FILE *f = open_memstream(&text, &len);
	if (!f) {
		lf->reply_err(req, ENOMEM);
		return true;
	}
	LOCK(m);
	int r = bch_fs_usage_print(f, m->c, json, human);
	UNLOCK(m);
	fclose(f);
	if (r)
		lf->reply_err(req, EIO);
	else
		reply_xattr_text(req, text, len, size);
	free(text);
	return true;
}

/* Commands find the control channel's socket through a virtual xattr of the root. */
static bool ctl_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fmount *m = FM(req);

	if (ino != FUSE_ROOT_ID || strcmp(name, CTL_XATTR))
		return false;
	if (!m->ctl) {
		lf->reply_err(req, ENODATA);
		return true;
	}
	const char *path = ctl_server_path(m->ctl);
	reply_xattr_text(req, path, strlen(path), size);
	return true;
}

/*
 * The member devices the daemon holds now (absolute paths joined by ':'):
 * the mount's source names those it was mounted with, and device add,
 * remove and offline change them.
 */
static bool devs_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fmount *m = FM(req);
	char *text = NULL;
	size_t len = 0;

	if (ino != FUSE_ROOT_ID || strcmp(name, "bcachefs.devs"))
		return false;
	FILE *f = open_memstream(&text, &len);
	if (!f) {
		lf->reply_err(req, ENOMEM);
		return true;
	}
	LOCK(m);
	for (unsigned i = 0; i < m->nr_devs; i++)
		fprintf(f, "%s%s", i ? ":" : "", m->devs[i]);
	UNLOCK(m);
	fclose(f);
	reply_xattr_text(req, text, len, size);
	free(text);
	return true;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	req_type(REQ_getxattr);
	struct fmount *m = FM(req);
	if (usage_xattr(req, ino, name, size) || ctl_xattr(req, ino, name, size) ||
	    devs_xattr(req, ino, name, size))
		return;
	char *buf = malloc(size ? size : 1);

	LOCK(m);
	if (SESS(req)->killpriv_v2 && !strcmp(name, "security.capability")) {
		SESS(req)->caps_probe_ino = ino;
		SESS(req)->caps_probe_pid = lf->req_ctx(req)->pid;
	}
	ssize_t n = bch_fs_getxattr(m->c, from_fuse(ino), name, buf, size);
	UNLOCK(m);
	if (n < 0)
		lf->reply_err(req, (int)-n);
	else if (!size)
		lf->reply_xattr(req, n);
	else
		lf->reply_buf(req, buf, n);
	free(buf);
}

/*
 * Drop the trusted.* names from list (n bytes of NUL-ended names) unless
 * the caller of req has CAP_SYS_ADMIN, as the kernel's filesystems list them
 * (the VFS filters getxattr of them, not listxattr).  Returns the new length.
 */
static ssize_t listxattr_filter(fuse_req_t req, char *list, ssize_t n)
{
	bool any = false;

	for (char *p = list; p < list + n; p += strlen(p) + 1)
		any |= !strncmp(p, "trusted.", 8);
	if (!any)
		return n;
	struct bch_caller *cr = caller_new(req);
	bool admin = cr && cr->cap_sys_admin;
	free(cr);
	if (admin)
		return n;
	char *to = list;
	for (char *p = list; p < list + n;) {
		size_t l = strlen(p) + 1;
		if (strncmp(p, "trusted.", 8)) {
			memmove(to, p, l);
			to += l;
		}
		p += l;
	}
	return to - list;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	req_type(REQ_listxattr);
	struct fmount *m = FM(req);
	char *buf = NULL;
	ssize_t n;

	/* the whole list, filtered, then measured against size */
	LOCK(m);
	n = bch_fs_listxattr(m->c, from_fuse(ino), NULL, 0);
	if (n > 0 && !(buf = malloc(n)))
		n = -ENOMEM;
	if (n > 0)
		n = bch_fs_listxattr(m->c, from_fuse(ino), buf, n);
	UNLOCK(m);
	if (n > 0)
		n = listxattr_filter(req, buf, n);
	if (n < 0)
		lf->reply_err(req, (int)-n);
	else if (!size)
		lf->reply_xattr(req, n);
	else if ((size_t)n > size)
		lf->reply_err(req, ERANGE);
	else
		lf->reply_buf(req, buf, n);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	req_type(REQ_removexattr);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;

	LOCK(m);
	int r = inode_opt_xattr_perm(req, m, ino, name);
	if (!r)
		r = bch_fs_removexattr(m->c, from_fuse(ino), name);
	if (!r && !strncmp(name, "bcachefs.", 9))
		bg_wake(m, true);
	UNLOCK(m);
	lf->reply_err(req, -r);
	if (!r)
		others_inode(se, ino, -1, 0);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	req_type(REQ_fallocate);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;
	(void)fi;

	LOCK(m);
	wait_planned_writes(m);
	int r = kill_priv(req, m, from_fuse(ino));
	if (!r)
		r = bch_fs_fallocate(m->c, from_fuse(ino), mode, offset, length);
	UNLOCK(m);
	lf->reply_err(req, -r);
	if (!r)		/* collapse and insert move what follows: all of it */
		others_inode(se, ino, 0, 0);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	req_type(REQ_lseek);
	struct fmount *m = FM(req);
	(void)fi;

	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		lf->reply_err(req, EINVAL);
		return;
	}
	LOCK(m);
	int64_t r = bch_fs_seek(m->c, from_fuse(ino), off, whence);
	UNLOCK(m);
	/* ENOSYS would make the kernel stop sending FUSE_LSEEK for the mount's life */
	if (r == -ENOSYS)
		r = -EIO;
	if (r < 0)
		lf->reply_err(req, (int)-r);
	else
		lf->reply_lseek(req, r);
}

/*
 * copy_file_range: whole blocks are shared (reflink: no data is read or
 * written, the extents are counted once for both files); an unaligned head
 * and tail are copied inside the daemon (bch_fs_remap_range).  In steps of
 * REMAP_STEP so that other requests get the lock between them.
 */
#define REMAP_STEP	(64ULL << 20)
static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	req_type(REQ_copy_file_range);
	struct fsess *se = SESS(req);
	struct fmount *m = se->m;
	size_t done = 0;
	ssize_t r = 0;
	(void)fi_in;
	(void)fi_out;

	if (flags) {
		lf->reply_err(req, EINVAL);
		return;
	}
	while (done < len) {
		uint64_t want = len - done < REMAP_STEP ? len - done : REMAP_STEP;
		LOCK(m);
		wait_planned_writes(m);
		r = done ? 0 : kill_priv(req, m, from_fuse(ino_out));
		if (!r)
			r = bch_fs_remap_range(m->c, from_fuse(ino_in), off_in + done, from_fuse(ino_out),
					       off_out + done, want);
		if (r > 0)
			bg_wake(m, false);
		UNLOCK(m);
		if (r <= 0)
			break;
		done += r;
		if ((uint64_t)r < want)
			break;		/* the source's end */
	}
	if (r < 0 && !done) {
		lf->reply_err(req, (int)-r);
		return;
	}
	lf->reply_write(req, done);
	if (done)
		others_inode(se, ino_out, off_out, done);
}

/* ------------------------------------------------------------ file flags */

/* FS_XFLAG_* of FS_IOC_FSGETXATTR and the FS_*_FL they stand for */
static const struct { unsigned x, fl; } xflags[] = {
	{ FS_XFLAG_IMMUTABLE,	FS_IMMUTABLE_FL },
	{ FS_XFLAG_APPEND,	FS_APPEND_FL },
	{ FS_XFLAG_SYNC,	FS_SYNC_FL },
	{ FS_XFLAG_NOATIME,	FS_NOATIME_FL },
	{ FS_XFLAG_NODUMP,	FS_NODUMP_FL },
};

static unsigned fl_to_xflags(unsigned fl)
{
	unsigned x = 0;

	for (size_t i = 0; i < sizeof(xflags) / sizeof(xflags[0]); i++)
		if (fl & xflags[i].fl)
			x |= xflags[i].x;
	return x;
}

/* -EOPNOTSUPP for an xflag not kept here */
static int xflags_to_fl(unsigned x, unsigned *fl)
{
	*fl = 0;
	for (size_t i = 0; i < sizeof(xflags) / sizeof(xflags[0]); i++)
		if (x & xflags[i].x) {
			*fl |= xflags[i].fl;
			x &= ~xflags[i].x;
		}
	return x ? -EOPNOTSUPP : 0;
}

/* Set the flags (and project) as the caller of req; lock held. */
static int ioctl_set(fuse_req_t req, struct fmount *m, uint64_t inum, unsigned fl, uint32_t project)
{
	struct bch_caller *cr = caller_new(req);

	if (!cr)
		return -ENOMEM;
	int r = bch_fs_set_flags(m->c, inum, fl, project, cr);
	free(cr);
	return r;
}

/*
 * chattr(1) and lsattr(1): FS_IOC_GETFLAGS / SETFLAGS (an int, whatever the
 * command's encoded size says: the kernel's fileattr code sends 4 bytes) and
 * FS_IOC_FSGETXATTR / FSSETXATTR (struct fsxattr: the same flags and the
 * project ID; extent size hints are not kept, so nonzero ones are refused).
 * The kernel sends these for regular files and directories only (fs/fuse
 * fileattr), after its own owner and CAP_LINUX_IMMUTABLE checks; the engine
 * checks again with the caller's credentials.  Anything else: ENOTTY.
 */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		     size_t out_bufsz)
{
	req_type(REQ_ioctl);
	struct fmount *m = FM(req);
	uint64_t inum = from_fuse(ino);
	unsigned fl = 0;
	uint32_t project = 0;
	struct fsxattr fa;
	int r, v;
	(void)arg;
	(void)fi;

	/*
	 * 32-bit callers: the kernel turns their FS_IOC32_[GS]ETFLAGS into
	 * FS_IOC_[GS]ETFLAGS (fileattr) before they come; the 32-bit numbers
	 * themselves (a 64-bit caller may use them too) take an int as well,
	 * and struct fsxattr is the same size either way, so FUSE_IOCTL_COMPAT
	 * changes nothing here.
	 */
	(void)flags;
	if (cmd == FS_IOC32_GETFLAGS)
		cmd = FS_IOC_GETFLAGS;
	else if (cmd == FS_IOC32_SETFLAGS)
		cmd = FS_IOC_SETFLAGS;
	LOCK(m);
	switch (cmd) {
	case FS_IOC_GETFLAGS:
		r = out_bufsz < sizeof(int) ? -EINVAL : bch_fs_get_flags(m->c, inum, &fl, &project);
		UNLOCK(m);
		v = fl;
		if (r)
			lf->reply_err(req, -r);
		else
			lf->reply_ioctl(req, 0, &v, sizeof(v));
		return;
	case FS_IOC_FSGETXATTR:
		r = out_bufsz < sizeof(fa) ? -EINVAL : bch_fs_get_flags(m->c, inum, &fl, &project);
		UNLOCK(m);
		memset(&fa, 0, sizeof(fa));
		fa.fsx_xflags = fl_to_xflags(fl);
		fa.fsx_projid = project;
		if (r)
			lf->reply_err(req, -r);
		else
			lf->reply_ioctl(req, 0, &fa, sizeof(fa));
		return;
	case FS_IOC_SETFLAGS:
		if (in_bufsz < sizeof(int)) {
			r = -EINVAL;
			break;
		}
		memcpy(&v, in_buf, sizeof(v));
		r = bch_fs_get_flags(m->c, inum, &fl, &project);
		if (!r)
			r = ioctl_set(req, m, inum, (unsigned)v, project);
		break;
	case FS_IOC_FSSETXATTR:
		if (in_bufsz < sizeof(fa)) {
			r = -EINVAL;
			break;
		}
		memcpy(&fa, in_buf, sizeof(fa));
		r = fa.fsx_extsize || fa.fsx_cowextsize ? -EINVAL : xflags_to_fl(fa.fsx_xflags, &fl);
		if (!r)		/* every flag kept here has its xflag: all are set */
			r = ioctl_set(req, m, inum, fl, fa.fsx_projid);
		break;
	default:
		r = -ENOTTY;
		break;
	}
	UNLOCK(m);
	/* ctime changed: the kernel's cached attributes go */
	if (!r)
		lf->lowlevel_notify_inval_inode(SESS(req)->se, ino, -1, 0);
	if (r) {
		lf->reply_err(req, -r);
		return;
	}
	struct fsess *se = SESS(req);
	lf->reply_ioctl(req, 0, NULL, 0);
	others_inode(se, ino, -1, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.init		= op_init,
	.destroy	= op_destroy,
	.lookup		= op_lookup,
	.forget		= op_forget,
	.forget_multi	= op_forget_multi,
	.getattr	= op_getattr,
	.setattr	= op_setattr,
	.readlink	= op_readlink,
	.mknod		= op_mknod,
	.mkdir		= op_mkdir,
	.symlink	= op_symlink,
	.link		= op_link,
	.unlink		= op_unlink,
	.rmdir		= op_rmdir,
	.rename		= op_rename,
	.open		= op_open,
	.create		= op_create,
	.read		= op_read,
	.write		= op_write,
	.release	= op_release,
	.fsync		= op_fsync,
	.opendir	= op_opendir,
	.readdir	= op_readdir,
	.readdirplus	= op_readdirplus,
	.releasedir	= op_releasedir,
	.fsyncdir	= op_fsync,
	.statfs		= op_statfs,
	.setxattr	= op_setxattr,
	.getxattr	= op_getxattr,
	.listxattr	= op_listxattr,
	.removexattr	= op_removexattr,
	.fallocate	= op_fallocate,
	.lseek		= op_lseek,
	.copy_file_range = op_copy_file_range,
	.ioctl		= op_ioctl,
};

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
 * stop; writes meanwhile set bg_kick without a signal (bg_wake()).  Lock held.
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
	if (mono_ns() - m->last_write_ns >= BG_EC_QUIET_NS)
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
		frees_run(m);	/* what an rm -rf left pending, once it paused */
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
static void bg_start(struct fmount *m)
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
static void bg_stop(struct fmount *m)
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

	fg_lock(m);
	/* planned writes hold space of this m->c: they end first, and no more are planned */
	m->writes_blocked++;
	need_wait(m, no_planned_writes, NULL);
	pthread_rwlock_wrlock(&m->ra_lock);
}

static void mark_mounted(struct bch_fs *c, const char *mnt);

/*
 * Between a body's steps: background work may look for what the step left
 * (a scheduled scan, moved data), and the requests that wait go first.
 */
static void ctl_unlock(struct cmd_ctx *x)
{
	struct fmount *m = x->priv;

	/* reopened by the body (device add, remove, resize, online): mark the new opens */
	if (m->c && m->c != m->marked_c) {
		mark_mounted(m->c, m->mnt);
		m->marked_c = m->c;
		m->c->defer_unlinked_free = true;	/* invariant (1) holds across the reopen */
	}
	pthread_rwlock_unlock(&m->ra_lock);
	m->writes_blocked--;
	bg_wake(m, false);
	UNLOCK(m);
	for (unsigned us = 0; us < BG_YIELD_US && atomic_load(&m->fg_waiting); us += 100)
		usleep(100);
}

void fusemount_name_changed(void *priv, uint64_t dir, const char *name)
{
	struct fmount *m = priv;

	if (m)
		notify_sessions(m, NULL, to_fuse(dir), name, 0, 0);
}

/* After daemonizing (threads); a failure only warns: the mount works without it. */
static void ctl_start(struct fmount *m)
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

/* ------------------------------------------------------------ command */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs fusemount [-o OPTIONS] [-f] [-d] DEVICE[:DEVICE...] | UUID=<uuid> MOUNTPOINT\n"
"Mount the filesystem through FUSE (no kernel driver needed).  UUID=<uuid>:\n"
"the block devices holding its members (found by scanning; image files are\n"
"not scanned).  A filesystem already mounted is mounted here too by its\n"
"daemon (one engine, a FUSE session per mountpoint; suid, dev, exec and\n"
"atime per mountpoint, ro and the filesystem's options as the first has).\n"
"\n"
"  -o OPTIONS   comma-separated: filesystem options that apply when open\n"
"               (compression=zstd, data_replicas=2, metadata_target=ssd, ...),\n"
"               ro, degraded, very_degraded, btree_cache_size=SIZE, and FUSE\n"
"               mount options (allow_other, default_permissions is always on)\n"
"               degraded: members may be missing while the others hold a copy\n"
"               of everything; very_degraded: even if some data has none left\n"
"               norebalance: no background rebalance while mounted;\n"
"               nocopygc: copygc only when a write finds no space\n"
"               iostats: at unmount print each device's I/O counters to stderr\n"
"               (with -f; a daemon's stderr is /dev/null), one line per device:\n"
"               iostats DEVICE reads=N read_bytes=N writes=N write_bytes=N\n"
"               mount(8)'s flags: ro, rw, suid, dev, exec (nosuid,nodev unless\n"
"               given, and only root may), noexec, sync, dirsync, nosymfollow;\n"
"               atime: relatime (default), strictatime, noatime, nodiratime,\n"
"               lazytime, kept by this daemon as the kernel keeps them\n"
"               remount: change a mounted filesystem (mount -o remount,ro|rw):\n"
"               ro/rw, the atime rules, norebalance, nocopygc, iostats and\n"
"               run-time filesystem options change live; others are refused\n"
"  -f           stay in the foreground\n"
"  -d           debug: print every FUSE request (implies -f)\n"
"  -h, --help   this text\n"
"\n"
"Permissions, POSIX ACLs and set-user/group-ID bits follow Linux's rules (a\n"
"write by another user clears them, setgid directories pass on their group);\n"
"xattr values up to 64 KiB.  Per-file options are xattrs bcachefs.OPTION\n"
"(setfattr -n bcachefs.compression -v zstd DIR), changed by the file's owner\n"
"or root: see \"File options\" in bcachefs(8).  A write that does not fit\n"
"fails with ENOSPC at that write(2) (the kernel caches no writes), fallocate\n"
"reserves real space, and a full filesystem still deletes.\n"
"chattr/lsattr work on files and directories: immutable (i), append-only (a),\n"
"nodump (d), noatime (A), sync (S) and the project ID (-p), kept with the\n"
"kernel's rules (i and a by root only).  mknod of a 0/0 character device and\n"
"renameat2(RENAME_WHITEOUT) make whiteouts: the mount can be an overlayfs\n"
"upper and work directory.\n"
"Mounted read-write, a background thread moves data to its background_target\n"
"and recompresses it with background_compression (rebalance) in small steps\n"
"between requests; when the target is full it waits, using no CPU, until\n"
"space is freed.  It also runs copygc when a device's free buckets run low.\n"
"Its errors are printed once on stderr (seen with -f).\n"
"Commands given the mountpoint (data rebalance, set-fs-option, device ...)\n"
"are run by this daemon over its control channel, a unix socket whose path\n"
"is the root's xattr bcachefs.ctl: see CONTROL CHANNEL in bcachefs(8).\n"
"Unmount with fusermount3 -u MOUNTPOINT (or umount as root): the filesystem is\n"
"closed cleanly.  Both return before the daemon has finished closing; a command\n"
"run at once on the same devices (fsck, fusemount, image) waits for the close\n"
"(up to 30 s; silent unless it lasts over a second).  Also installed as\n"
"mount.fuse.bcachefs, so `mount -t fuse.bcachefs DEVICE MOUNTPOINT` and fstab\n"
"entries work (as root: suid,dev unless nosuid/nodev are given, as mount(8)\n"
"means), and so does `mount -o remount,OPTIONS MOUNTPOINT`.\n"
"Exit: 0 unmounted cleanly, 1 failure, 16 usage error; a refused remount 32\n"
"(as mount(8) documents), 1 when the caller is not root.\n");
}

/*
 * The device number of the newest fuse.bcachefs mount on mnt, from
 * /proc/self/mountinfo: stat(mnt) would ask this daemon, which does not
 * serve requests yet.
 */
static int mount_dev(const char *mnt, dev_t *dev)
{
	char want[PATH_MAX], line[16384];
	FILE *f;
	int r = -ENOENT;

	if (!realpath(mnt, want) || !(f = fopen("/proc/self/mountinfo", "re")))
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned maj, mnr;
		char point[8192], *sep = strstr(line, " - ");
		if (sscanf(line, "%*u %*u %u:%u %*s %8191s", &maj, &mnr, point) != 3 || !sep ||
		    strncmp(sep + 3, "fuse.bcachefs ", 14))
			continue;
		bch_mountinfo_unescape(point);
		if (!strcmp(point, want)) {
			*dev = makedev(maj, mnr);
			r = 0;
		}
	}
	fclose(f);
	return r;
}

/* Invariant (4); a device left unmarked only loses the wait, so this warns. */
static void mark_mounted(struct bch_fs *c, const char *mnt)
{
	dev_t d = 0;
	int r = mount_dev(mnt, &d);

	for (unsigned i = 0; !r && i < BCH_SB_MEMBERS_MAX; i++)
		if (c->devs[i] && c->devs[i]->bdev)
			r = bch_dev_mark_mounted(c->devs[i]->bdev, d);
	if (r)
		cmd_err("fusemount", "%s: cannot mark the devices as mounted (%s): commands run "
			"right after unmounting may not wait for the close", mnt, strerror(-r));
}

/* -o iostats: a device's counters as it closes, after its last write. */
static void print_iostats(const struct bch_blockdev *dev)
{
	struct bch_dev_io_stats s;

	bch_dev_io_stats(dev, &s);
	fprintf(stderr, "bcachefs fusemount: iostats %s reads=%" PRIu64 " read_bytes=%" PRIu64
		" writes=%" PRIu64 " write_bytes=%" PRIu64 "\n",
		bch_dev_path(dev), s.reads, s.read_bytes, s.writes, s.write_bytes);
}

/* ------------------------------------------------------------ mount flags */

/*
 * The VFS flags mount(8) names, read as libmount reads them: each sets or
 * clears one MS_ bit, in order.  libfuse is given the ones it knows
 * (fuse_flags()); the rest (nodiratime, strictatime, lazytime,
 * nosymfollow) are applied by a remount of our own once mounted, which
 * only root may do.  The daemon keeps the atime ones (invariant 7).
 */
struct mnt_flag {
	const char	*name;
	unsigned long	flag;
	bool		set;
};

static const struct mnt_flag mnt_flags[] = {
	{ "rw", MS_RDONLY, false },		{ "ro", MS_RDONLY, true },
	{ "suid", MS_NOSUID, false },		{ "nosuid", MS_NOSUID, true },
	{ "dev", MS_NODEV, false },		{ "nodev", MS_NODEV, true },
	{ "exec", MS_NOEXEC, false },		{ "noexec", MS_NOEXEC, true },
	{ "async", MS_SYNCHRONOUS, false },	{ "sync", MS_SYNCHRONOUS, true },
	{ "dirsync", MS_DIRSYNC, true },
	{ "atime", MS_NOATIME, false },		{ "noatime", MS_NOATIME, true },
	{ "diratime", MS_NODIRATIME, false },	{ "nodiratime", MS_NODIRATIME, true },
	{ "norelatime", MS_RELATIME, false },	{ "relatime", MS_RELATIME, true },
	{ "nostrictatime", MS_STRICTATIME, false }, { "strictatime", MS_STRICTATIME, true },
	{ "nolazytime", MS_LAZYTIME, false },	{ "lazytime", MS_LAZYTIME, true },
	{ "symfollow", MS_NOSYMFOLLOW, false },	{ "nosymfollow", MS_NOSYMFOLLOW, true },
};

/* The MS_ flags a remount sets (mount(2)); what libfuse's mount cannot. */
#define MNT_FLAGS_ALL	(MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_SYNCHRONOUS | \
			 MS_DIRSYNC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME | \
			 MS_STRICTATIME | MS_LAZYTIME | MS_NOSYMFOLLOW)
#define MNT_FLAGS_OURS	(MS_NODIRATIME | MS_STRICTATIME | MS_LAZYTIME | MS_NOSYMFOLLOW)

/* Apply o to *ms if it is a flag of mnt_flags[]; false if it is not one. */
static bool mnt_flag_apply(const char *o, unsigned long *ms)
{
	for (unsigned i = 0; i < sizeof(mnt_flags) / sizeof(mnt_flags[0]); i++)
		if (!strcmp(o, mnt_flags[i].name)) {
			if (mnt_flags[i].set)
				*ms |= mnt_flags[i].flag;
			else
				*ms &= ~mnt_flags[i].flag;
			return true;
		}
	return false;
}

/* Linux's rule (path_mount()): strictatime wins, then noatime, else relatime. */
static enum atime_mode atime_of(unsigned long ms)
{
	return (ms & MS_STRICTATIME) ? ATIME_STRICT : (ms & MS_NOATIME) ? ATIME_NONE : ATIME_RELATIME;
}

/* The flags of ms libfuse's mount takes, as options (it starts from nosuid,nodev). */
static void fuse_flags(unsigned long ms, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s%s%s%s", (ms & MS_RDONLY) ? ",ro" : "",
		 (ms & MS_NOSUID) ? "" : ",suid", (ms & MS_NODEV) ? "" : ",dev",
		 (ms & MS_NOEXEC) ? ",noexec" : "", (ms & MS_SYNCHRONOUS) ? ",sync" : "",
		 (ms & MS_DIRSYNC) ? ",dirsync" : "",
		 (ms & MS_NOATIME) && !(ms & MS_STRICTATIME) ? ",noatime" : "");
}

/* The mount's VFS flags become ms (mount(2) MS_REMOUNT; root).  0 or -errno. */
static int kernel_remount(const char *mnt, unsigned long ms)
{
	return mount(NULL, mnt, NULL, MS_REMOUNT | (ms & MNT_FLAGS_ALL), NULL) ? -errno : 0;
}

struct mount_args {
	bool		norebalance, nocopygc, iostats;
	unsigned long	ms;		/* MS_ flags (mnt_flags[]) */
	bool		remount;	/* -o remount */
};

/* The daemon's own options (also live through remount); false if o is none. */
static bool daemon_opt(const char *o, bool *norebalance, bool *nocopygc, bool *iostats)
{
	if (!strcmp(o, "norebalance") || !strcmp(o, "rebalance"))
		*norebalance = o[0] == 'n';
	else if (!strcmp(o, "nocopygc") || !strcmp(o, "copygc"))
		*nocopygc = o[0] == 'n';
	else if (!strcmp(o, "iostats") || !strcmp(o, "noiostats"))
		*iostats = o[0] == 'i';
	else
		return false;
	return true;
}

/* Split -o: the flags, our options and the filesystem's; the rest go to FUSE. */
static int split_opts(const char *list, struct bch_opts *opts, char *fuse_opts, size_t len,
		      struct mount_args *a)
{
	char *dup = strdup(list), *save = NULL;
	int r = 0;

	for (char *o = strtok_r(dup, ",", &save); o && !r; o = strtok_r(NULL, ",", &save)) {
		char name[64], err[256];
		const char *eq = strchr(o, '=');
		snprintf(name, sizeof(name), "%.*s", (int)(eq ? eq - o : (long)strlen(o)), o);
		if (!strcmp(o, "remount")) {
			a->remount = true;
			continue;
		}
		if (!strcmp(o, "default_permissions") || mnt_flag_apply(o, &a->ms) ||
		    daemon_opt(o, &a->norebalance, &a->nocopygc, &a->iostats))
			continue;
		int id = bch_opt_lookup(name);
		if (id >= 0 && (bch_opt_table[id].flags & (OPT_MOUNT | OPT_RUNTIME))) {
			if (bch_opts_parse_list(opts, o, OPT_MOUNT | OPT_RUNTIME, err, sizeof(err))) {
				cmd_err("fusemount", "%s", err);
				r = -EINVAL;
			}
			continue;
		}
		/* FUSE's own (allow_other, ...) */
		size_t used = strlen(fuse_opts);
		snprintf(fuse_opts + used, len - used, ",%s", o);
	}
	free(dup);
	return r;
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
	int64_t since = req_stats_since;	/* RFC 3339, as every --json time */
	uint64_t unlocked = atomic_load(&reads_unlocked), redone = atomic_load(&reads_redone);
	uint64_t w_unlocked = atomic_load(&writes_unlocked), w_redone = atomic_load(&writes_redone);
	uint64_t w_combined = atomic_load(&writes_combined);
	if (reset) {
		atomic_fetch_sub(&writes_unlocked, w_unlocked);
		atomic_fetch_sub(&writes_redone, w_redone);
		atomic_fetch_sub(&writes_combined, w_combined);
		memset(req_stats, 0, sizeof(req_stats));
		req_stats_since = real_ns();
		atomic_fetch_sub(&reads_unlocked, unlocked);
		atomic_fetch_sub(&reads_redone, redone);
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

/* ------------------------------------------------------------ more mountpoints */

/* mount(8)'s exit status for a mount (or remount) that failed; 1 is a bad invocation or permission */
#define MOUNT_EX_FAIL	32

/*
 * Invariant (9): a second mount of a mounted filesystem joins its daemon.
 * The list of sessions changes here only.
 */
static void sess_add(struct fmount *m, struct fsess *s)
{
	pthread_rwlock_wrlock(&m->sess_rw);
	pthread_mutex_lock(&m->sess_mu);
	s->next = m->sess;
	m->sess = s;
	atomic_fetch_add(&m->nr_sess, 1);
	pthread_mutex_unlock(&m->sess_mu);
	pthread_rwlock_unlock(&m->sess_rw);
}

/*
 * s's mountpoint is gone: no more notifications to it.  If messages and the
 * devices' mount mark named it, they name one still mounted.
 */
static void sess_remove(struct fmount *m, struct fsess *s)
{
	char next[PATH_MAX] = "";

	pthread_rwlock_wrlock(&m->sess_rw);
	pthread_mutex_lock(&m->sess_mu);
	for (struct fsess **p = &m->sess; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			atomic_fetch_sub(&m->nr_sess, 1);
			break;
		}
	if (m->sess)
		snprintf(next, sizeof(next), "%s", m->sess->mnt);
	pthread_mutex_unlock(&m->sess_mu);
	pthread_rwlock_unlock(&m->sess_rw);
	LOCK(m);
	if (next[0] && !strcmp(m->mnt, s->mnt) && m->c) {
		snprintf(m->mnt, sizeof(m->mnt), "%s", next);
		mark_mounted(m->c, m->mnt);
		m->marked_c = m->c;
	}
	UNLOCK(m);
}

/* A joined session's loop; when its mountpoint goes, the session ends. */
static void *sess_thread(void *arg)
{
	struct fsess *s = arg;
	struct fmount *m = s->m;
	struct fuse_loop_config config = { .clone_fd = 0, .max_idle_threads = LOOP_IDLE_THREADS };

	lf->session_loop_mt(s->se, &config);
	sess_remove(m, s);
	lf->session_unmount(s->se);
	lf->session_destroy(s->se);	/* op_destroy: the last session frees what is held */
	lf->opt_free_args(&s->args);
	free(s);
	pthread_mutex_lock(&m->sess_mu);
	m->nr_joined--;
	pthread_cond_broadcast(&m->sess_cond);
	pthread_mutex_unlock(&m->sess_mu);
	return NULL;
}

/* Unmount a joined session's mountpoint (its loop then ends): umount2, or fusermount3 -u -z. */
static void unmount_path(const char *mnt)
{
	if (!geteuid()) {
		umount2(mnt, MNT_DETACH);
		return;
	}
	pid_t pid = fork();
	if (!pid) {
		execlp("fusermount3", "fusermount3", "-u", "-q", "-z", "--", mnt, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/*
 * The daemon's side of `mount DEV MNT2` for a filesystem this daemon has
 * mounted (cmd_fusemount() forwards it): argv is "mount" [-o LIST] MNT, MNT
 * absolute.  As for a kernel filesystem's second mount: per mountpoint
 * suid, dev, exec, sync, dirsync, the atime rules (but lazytime) and FUSE's
 * options (allow_other); ro must agree with the filesystem (a read-only
 * mount of a read-write filesystem is refused, a read-write one of a
 * read-only filesystem is made read-only, with a warning).  The
 * filesystem's options (lazytime, the daemon's, the engine's) are one for
 * all mountpoints: a differing one is refused by name (the kernel would
 * ignore it).
 */
int cmd_fusemount_mount_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct fmount *m = x->priv;
	const char *list = "", *mnt = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			list = argv[++i];
		else if (!mnt && argv[i][0] == '/')
			mnt = argv[i];
		else
			mnt = NULL, i = argc;
	}
	if (!x->mounted || !m || !mnt) {
		fprintf(x->err, "bcachefs mount: usage: mount [-o OPTIONS] /MOUNTPOINT (daemon only)\n");
		return EXIT_USAGE;
	}

	x->lock(x);
	char cur[PATH_MAX], extra[4096] = "";
	unsigned long ms = MS_NOSUID | MS_NODEV;
	bool nrb = m->norebalance, ncg = m->nocopygc, ios = m->iostats, lazy_named = false;
	bool ro = m->read_only, lazy = m->lazytime;
	struct bch_opts fsopts = m->opts;
	snprintf(cur, sizeof(cur), "%s", m->mnt);
	bool taken = false;
	pthread_rwlock_rdlock(&m->sess_rw);
	for (struct fsess *o = m->sess; o; o = o->next)
		taken |= !strcmp(o->mnt, mnt);
	pthread_rwlock_unlock(&m->sess_rw);
	x->unlock(x);
	if (taken) {
		fprintf(x->err, "bcachefs mount: %s: already mounted there\n", mnt);
		return MOUNT_EX_FAIL;
	}

	int ret = 0;
	char *dup = strdup(list), *save = NULL;
	size_t el = 0;
	for (char *o = strtok_r(dup, ",", &save); o && !ret; o = strtok_r(NULL, ",", &save)) {
		char name[64], err[256];
		bool n1 = nrb, n2 = ncg, n3 = ios;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(o, "="), o);
		if (!strcmp(o, "default_permissions") || !strcmp(o, "remount"))
			continue;
		if (mnt_flag_apply(o, &ms)) {
			lazy_named |= strstr(o, "lazytime") != NULL;
			continue;
		}
		if (daemon_opt(o, &n1, &n2, &n3)) {
			if (n1 != nrb || n2 != ncg || n3 != ios) {
				fprintf(x->err, "bcachefs mount: %s: option '%s' is the filesystem's, "
					"mounted on %s without it: change it there with mount -o "
					"remount,%s %s\n", mnt, o, cur, o, cur);
				ret = MOUNT_EX_FAIL;
			}
			continue;
		}
		int id = bch_opt_lookup(name);
		if (id >= 0) {
			struct bch_opts want = fsopts;
			memset(&want.set, 0, sizeof(want.set));
			if (bch_opts_parse_list(&want, o, OPT_MOUNT | OPT_RUNTIME, err, sizeof(err))) {
				fprintf(x->err, "bcachefs mount: %s: %s\n", mnt, err);
				ret = EXIT_USAGE;
			} else if (want.v[id] != fsopts.v[id]) {
				fprintf(x->err, "bcachefs mount: %s: option '%s' is the filesystem's, "
					"already mounted on %s with another value (one filesystem, one "
					"set of options; mount -o remount of %s changes those that can "
					"change)\n", mnt, o, cur, cur);
				ret = MOUNT_EX_FAIL;
			}
			continue;
		}
		el += snprintf(extra + el, el < sizeof(extra) ? sizeof(extra) - el : 0, ",%s", o);
	}
	free(dup);
	if (!ret && el >= sizeof(extra)) {
		fprintf(x->err, "bcachefs mount: %s: option list too long\n", mnt);
		ret = EXIT_USAGE;
	}
	if (!ret && lazy_named && !!(ms & MS_LAZYTIME) != lazy) {
		fprintf(x->err, "bcachefs mount: %s: option '%s' is the filesystem's, mounted on "
			"%s with%s it: change it there with mount -o remount\n", mnt,
			lazy ? "nolazytime" : "lazytime", cur, lazy ? "" : "out");
		ret = MOUNT_EX_FAIL;
	}
	if (!ret && !ro && (ms & MS_RDONLY)) {
		/* as the kernel's: one superblock is read-only or not (EBUSY) */
		fprintf(x->err, "bcachefs mount: %s: already mounted read-write on %s (a "
			"read-only mount needs the filesystem read-only: mount -o remount,ro %s)\n",
			mnt, cur, cur);
		ret = MOUNT_EX_FAIL;
	}
	if (!ret && ro && !(ms & MS_RDONLY)) {
		fprintf(x->err, "bcachefs mount: %s: the filesystem is read-only (mounted on %s): "
			"mounted read-only\n", mnt, cur);
		ms |= MS_RDONLY;
	}
	if (!ret && (ms & (MS_STRICTATIME | MS_NODIRATIME | MS_LAZYTIME | MS_NOSYMFOLLOW)) &&
	    geteuid()) {
		fprintf(x->err, "bcachefs mount: %s: nodiratime, strictatime, lazytime and "
			"nosymfollow need a daemon running as root\n", mnt);
		ret = EXIT_FAIL;
	}
	if (ret)
		return ret;

	struct fsess *s = calloc(1, sizeof(*s) + 16384);
	if (!s) {
		fprintf(x->err, "bcachefs mount: %s: out of memory\n", mnt);
		return EXIT_FAIL;
	}
	char *fo = (char *)(s + 1);
	size_t fl = snprintf(fo, 16384, "default_permissions,fsname=%s,subtype=bcachefs%s",
			     m->fsname, extra);
	fuse_flags(ms, fo + fl, 16384 - fl);
	char *fargv[] = { "bcachefs", "-o", fo, m->fuse_debug ? "-d" : NULL, NULL };
	s->args = (struct fuse_args)FUSE_ARGS_INIT(m->fuse_debug ? 4 : 3, fargv);
	s->m = m;
	s->joined = true;
	s->atime = atime_of(ms);
	s->nodiratime = ms & MS_NODIRATIME;
	snprintf(s->mnt, sizeof(s->mnt), "%s", mnt);
	s->se = lf->session_new(&s->args, &ops, sizeof(ops), s);
	if (!s->se) {
		fprintf(x->err, "bcachefs mount: %s: could not start a FUSE session (a FUSE option "
			"it does not know?)\n", mnt);
		lf->opt_free_args(&s->args);
		free(s);
		return EXIT_USAGE;
	}
	if (lf->session_mount(s->se, mnt)) {
		fprintf(x->err, "bcachefs mount: %s: could not mount there (not a directory, or "
			"not one this daemon's user may mount on)\n", mnt);
		lf->session_destroy(s->se);
		lf->opt_free_args(&s->args);
		free(s);
		return EXIT_FAIL;
	}
	(void)sess_own_io(s);	/* failing (no memory), libfuse's own I/O: no KILLPRIV_V2 */
	int r;
	if ((ms & MNT_FLAGS_OURS) && (r = kernel_remount(mnt, ms)))
		fprintf(x->err, "bcachefs mount: %s: setting the mount's flags: %s; the daemon "
			"follows them all the same\n", mnt, strerror(-r));
	pthread_mutex_lock(&m->sess_mu);
	m->nr_joined++;
	pthread_mutex_unlock(&m->sess_mu);
	sess_add(m, s);

	/* the signals are the first session's (cmd_fusemount()): none here */
	sigset_t all, old;
	pthread_t t;
	pthread_attr_t at;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &at, sess_thread, s);
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		fprintf(x->err, "bcachefs mount: %s: cannot start a thread: %s\n", mnt, strerror(r));
		sess_remove(m, s);
		lf->session_unmount(s->se);
		lf->session_destroy(s->se);
		lf->opt_free_args(&s->args);
		free(s);
		pthread_mutex_lock(&m->sess_mu);
		m->nr_joined--;
		pthread_mutex_unlock(&m->sess_mu);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* ------------------------------------------------------------ remount */

/*
 * The newest fuse.bcachefs mount on mnt (absolute): its VFS flags and its
 * superblock's options (mountinfo's fourth and last fields).  0 or -ENOENT.
 */
static int find_mount(const char *mnt, char *vfs, char *sup, size_t len)
{
	char line[16384];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int r = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char point[8192], v[4096], type[256], src[8192], so[4096];
		char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*u %*u %*u:%*u %*s %8191s %4095s", point, v) != 2 ||
		    sscanf(sep + 3, "%255s %8191s %4095s", type, src, so) != 3 ||
		    strcmp(type, "fuse.bcachefs"))
			continue;
		bch_mountinfo_unescape(point);
		if (strcmp(point, mnt))
			continue;
		snprintf(vfs, len, "%s", v);
		snprintf(sup, len, "%s", so);
		r = 0;
	}
	fclose(f);
	return r;
}

/* Is o one of the comma-separated list? */
static bool in_list(const char *o, const char *list)
{
	size_t l = strlen(o);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, o, l) && (p[l] == ',' || !p[l]))
			return true;
	return false;
}

/*
 * `mount -o remount,...`: mount(8) runs the helper with the mount's whole
 * option list (its present flags and options merged with the new ones).
 * The flags go to the kernel (mount(2) MS_REMOUNT), ro/rw, the atime rules
 * and the daemon's and filesystem's options to the daemon over the control
 * channel (cmd_fusemount_remount_body); an option that cannot change on a
 * mounted filesystem is refused by name before anything changes.  Going
 * read-only, the kernel first (it refuses while a file is open for
 * writing: EBUSY), then the daemon; otherwise the daemon first (it may fail
 * to open the devices read-write), then the kernel.  Exit code as mount(8)
 * documents it: 32 for a refused remount, 1 for a caller who is not root.
 */

static int remount_front(const char *mnt, const char *list)
{
	char real[PATH_MAX], vfs[4096], sup[4096], dopts[8192] = "";
	unsigned long cur = 0, ms;
	bool nrb = false, ncg = false, ios = false;
	size_t l = 0;
	int r;

	if (!realpath(mnt, real) || find_mount(real, vfs, sup, sizeof(vfs))) {
		cmd_err("fusemount", "%s: remount: not a mounted bcachefs filesystem", mnt);
		return MOUNT_EX_FAIL;
	}
	if (geteuid()) {
		cmd_err("fusemount", "%s: remount: only root may remount (as mount(8) says)", real);
		return EXIT_FAIL;
	}
	char *dup = strdup(vfs), *save = NULL;
	for (char *o = strtok_r(dup, ",", &save); o; o = strtok_r(NULL, ",", &save))
		mnt_flag_apply(o, &cur);
	free(dup);
	if (in_list("lazytime", sup))	/* a superblock flag: listed with its options */
		cur |= MS_LAZYTIME;
	/*
	 * The list is whole, as mount(2) takes it (mount(8) merges the present
	 * flags in, and leaves out those the new ones negate): flags not named
	 * are the kernel's defaults, but for atime, kept when none is named.
	 */
	ms = 0;
	bool atime_named = false;
	dup = strdup(list);
	save = NULL;
	for (char *o = strtok_r(dup, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(o, "="), o);
		if (mnt_flag_apply(o, &ms)) {
			atime_named |= strstr(o, "atime") != NULL;
			continue;
		}
		if (!strcmp(o, "remount") || in_list(o, sup))
			continue;
		if (daemon_opt(o, &nrb, &ncg, &ios) || bch_opt_lookup(name) >= 0) {
			l += snprintf(dopts + l, sizeof(dopts) - l, "%s,", o);
			continue;
		}
		cmd_err("fusemount", "%s: remount: option '%s' cannot change on a mounted filesystem "
			"(unmount and mount again)", real, o);
		free(dup);
		return MOUNT_EX_FAIL;
	}
	free(dup);
	if (!atime_named)
		ms = (ms & ~(MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME)) |
		     (cur & (MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME));
	if (l >= sizeof(dopts) - 64) {
		cmd_err("fusemount", "%s: remount: option list too long", real);
		return EXIT_FAIL;	/* mount(8): incorrect invocation */
	}
	enum atime_mode am = atime_of(ms);
	snprintf(dopts + l, sizeof(dopts) - l, "%s,%s,%s,%s", (ms & MS_RDONLY) ? "ro" : "rw",
		 am == ATIME_STRICT ? "strictatime" : am == ATIME_NONE ? "noatime" : "relatime",
		 (ms & MS_NODIRATIME) ? "nodiratime" : "diratime",
		 (ms & MS_LAZYTIME) ? "lazytime" : "nolazytime");

	char *check[] = { "remount", "--check", "-o", dopts, "--mountpoint", real, NULL };
	char *apply[] = { "remount", "-o", dopts, "--mountpoint", real, NULL };
	if ((r = ctl_forward("fusemount", real, 6, check)))
		return MOUNT_EX_FAIL;
	bool to_ro = (ms & MS_RDONLY) && !(cur & MS_RDONLY);
	if (to_ro && (r = kernel_remount(real, ms))) {
		cmd_err("fusemount", "%s: remount read-only: %s", real,
			r == -EBUSY ? "busy (a file is open for writing)" : strerror(-r));
		return MOUNT_EX_FAIL;
	}
	if ((r = ctl_forward("fusemount", real, 5, apply))) {
		if (to_ro)
			kernel_remount(real, cur);	/* the daemon stayed as it was */
		return MOUNT_EX_FAIL;
	}
	if (!to_ro && (r = kernel_remount(real, ms))) {
		cmd_err("fusemount", "%s: remount: the daemon took the options, the kernel refused "
			"the flags: %s", real, strerror(-r));
		return MOUNT_EX_FAIL;
	}
	return EXIT_OK;
}

/*
 * Read-only <-> read-write: close, open again the other way.  x locked.  No
 * inode is unlinked and still open when going read-only: the kernel refuses
 * that remount (EBUSY, as for a file open for writing), so none is left for
 * fsck by a read-only forget.
 */
static int reopen(struct cmd_ctx *x, struct fmount *m, bool ro)
{
	struct bch_opts o = m->opts, old = m->opts;
	char err[512], e2[512];
	int r;

	if (ro)
		lazy_flush_all(m);
	bch_opt_set(&o, Opt_read_only, ro);
	r = bch_fs_close(m->c);
	m->c = NULL;
	if (r)
		fprintf(x->err, "bcachefs remount: %s: closing: %s\n", m->mnt, bch_err_str(r));
	r = bch_fs_open(m->devs, m->nr_devs, &o, &m->c, err, sizeof(err));
	if (r) {
		fprintf(x->err, "bcachefs remount: %s: opening %s: %s\n", m->mnt,
			ro ? "read-only" : "read-write", err);
		if (bch_fs_open(m->devs, m->nr_devs, &old, &m->c, e2, sizeof(e2))) {
			/* nothing to serve requests with: as errors=panic does */
			fprintf(stderr, "bcachefs fusemount: %s: remount: cannot open the filesystem "
				"again (%s); exiting\n", m->mnt, e2);
			_exit(1);
		}
	} else {
		m->opts = o;
	}
	m->c->defer_unlinked_free = true;
	m->read_only = m->c->read_only;
	return r ? EXIT_FAIL : 0;
}

int cmd_fusemount_remount_body(struct cmd_ctx *x, int argc, char **argv)
{
	struct fmount *m = x->priv;
	const char *list = NULL, *point = NULL;
	bool check = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--check"))
			check = true;
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			list = argv[++i];
		else if (!strcmp(argv[i], "--mountpoint") && i + 1 < argc)
			point = argv[++i];
		else
			break;
	}
	if (!x->mounted || !m || !list || !point) {
		fprintf(x->err, "bcachefs remount: usage: remount [--check] -o OPTIONS --mountpoint "
			"MOUNTPOINT (daemon only)\n");
		return EXIT_USAGE;
	}

	/* what the mount becomes: checked whole before anything changes */
	x->lock(x);
	/* the atime rules are the mountpoint's (invariant 9); the list is read under lock */
	struct fsess *se = NULL;
	pthread_rwlock_rdlock(&m->sess_rw);
	for (struct fsess *o = m->sess; o; o = o->next)
		if (!strcmp(o->mnt, point))
			se = o;
	pthread_rwlock_unlock(&m->sess_rw);
	if (!se) {
		x->unlock(x);
		fprintf(x->err, "bcachefs remount: %s: not a mountpoint of this daemon\n", point);
		return EXIT_FAIL;
	}
	bool ro = m->read_only, nodir = se->nodiratime, lazy = m->lazytime;
	bool nrb = m->norebalance, ncg = m->nocopygc, ios = m->iostats;
	enum atime_mode am = se->atime;
	struct bch_opts set, cur = m->c->opts;
	char *dup = strdup(list), *save = NULL, err[256];
	int ret = 0;

	bch_opts_default(&set);
	set.set = 0;
	for (char *o = strtok_r(dup, ",", &save); o && !ret; o = strtok_r(NULL, ",", &save)) {
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(o, "="), o);
		int id = bch_opt_lookup(name);
		if (!strcmp(o, "ro") || !strcmp(o, "rw")) {
			ro = o[1] == 'o';
		} else if (!strcmp(o, "relatime") || !strcmp(o, "strictatime") || !strcmp(o, "noatime")) {
			am = o[0] == 'r' ? ATIME_RELATIME : o[0] == 's' ? ATIME_STRICT : ATIME_NONE;
		} else if (!strcmp(o, "nodiratime") || !strcmp(o, "diratime")) {
			nodir = o[0] == 'n';
		} else if (!strcmp(o, "lazytime") || !strcmp(o, "nolazytime")) {
			lazy = o[0] == 'l';
		} else if (daemon_opt(o, &nrb, &ncg, &ios)) {
		} else if (id < 0 || !(bch_opt_table[id].flags & (OPT_MOUNT | OPT_RUNTIME)) ||
			   id == Opt_read_only) {
			fprintf(x->err, "bcachefs remount: %s: unknown option '%s'\n", m->mnt, o);
			ret = EXIT_USAGE;
		} else if (bch_opts_parse_list(&set, o, OPT_MOUNT | OPT_RUNTIME, err, sizeof(err))) {
			fprintf(x->err, "bcachefs remount: %s: %s\n", m->mnt, err);
			ret = EXIT_USAGE;
		} else if (!(bch_opt_table[id].flags & OPT_RUNTIME) && set.v[id] != cur.v[id]) {
			fprintf(x->err, "bcachefs remount: %s: option '%s' cannot change on a mounted "
				"filesystem (unmount and mount again)\n", m->mnt, name);
			ret = EXIT_FAIL;
		}
	}
	free(dup);
	if (!ret && !ro && m->read_only && m->c->emergency_ro) {
		fprintf(x->err, "bcachefs remount: %s: an error made the filesystem read-only; "
			"unmount and run fsck\n", m->mnt);
		ret = EXIT_FAIL;
	}
	if (ret || check) {
		x->unlock(x);
		return ret;
	}

	if (ro != m->read_only)
		ret = reopen(x, m, ro);
	if (!ret) {
		for (unsigned id = 0; id < BCH_OPT_NR; id++)
			if (bch_opt_is_set(&set, id) && (bch_opt_table[id].flags & OPT_RUNTIME)) {
				bch_opt_set(&m->opts, id, set.v[id]);
				m->c->opts.v[id] = set.v[id];
			}
		if (m->lazytime && !lazy)
			lazy_flush_all(m);
		se->atime = am;
		se->nodiratime = nodir;
		m->lazytime = lazy;
		m->norebalance = nrb;
		m->nocopygc = ncg;
		m->iostats = ios;
		bg_wake(m, true);
	}
	x->unlock(x);
	/* background work as the mount now is: stopped read-only, or with its options */
	bg_stop(m);
	m->bg_stop = false;
	bg_start(m);
	return ret;
}

/*
 * SIGTERM, SIGINT, SIGHUP end every mountpoint: libfuse's handler ends the
 * first session's loop, and term_requested tells wait_joined() to unmount
 * the joined ones (their threads block these signals).
 */
static volatile sig_atomic_t term_requested;
static struct sigaction fuse_sa[3];
static const int term_sigs[3] = { SIGTERM, SIGINT, SIGHUP };

static void on_term(int sig)
{
	term_requested = 1;
	for (unsigned i = 0; i < 3; i++)
		if (term_sigs[i] == sig && fuse_sa[i].sa_handler != SIG_DFL &&
		    fuse_sa[i].sa_handler != SIG_IGN)
			fuse_sa[i].sa_handler(sig);
}

static void chain_signals(void)
{
	struct sigaction sa = { .sa_handler = on_term };

	sigemptyset(&sa.sa_mask);
	for (unsigned i = 0; i < 3; i++)
		sigaction(term_sigs[i], &sa, &fuse_sa[i]);
}

static void unchain_signals(void)
{
	for (unsigned i = 0; i < 3; i++)
		signal(term_sigs[i], SIG_DFL);
}

/* The first mountpoint went: serve the joined ones until they go (or a signal ends them). */
static void wait_joined(struct fmount *m)
{
	bool unmounting = false;

	pthread_mutex_lock(&m->sess_mu);
	while (m->nr_joined) {
		if (term_requested && !unmounting) {
			char (*mnts)[PATH_MAX] = calloc(m->nr_joined, PATH_MAX);
			unsigned n = 0;
			for (struct fsess *s = m->sess; s && mnts && n < m->nr_joined; s = s->next)
				snprintf(mnts[n++], PATH_MAX, "%s", s->mnt);
			pthread_mutex_unlock(&m->sess_mu);
			for (unsigned i = 0; i < n; i++)
				unmount_path(mnts[i]);
			free(mnts);
			unmounting = true;
			pthread_mutex_lock(&m->sess_mu);
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 200 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&m->sess_cond, &m->sess_mu, &ts);
	}
	pthread_mutex_unlock(&m->sess_mu);
}

/*
 * `mount DEV MNT2` while DEV is mounted on MNT: the daemon of MNT mounts
 * MNT2 too (invariant 9), as a kernel filesystem shares one superblock.
 */
static int join_front(const char *dev, const char *cur, const char *mnt, int argc, char **argv)
{
	char real[PATH_MAX], list[16384] = "";
	struct stat st;
	size_t l = 0;

	if (!realpath(mnt, real) || stat(real, &st) || !S_ISDIR(st.st_mode)) {
		cmd_err("fusemount", "%s: not a directory", mnt);
		return EXIT_USAGE;
	}
	if (!strcmp(real, cur)) {
		cmd_err("fusemount", "%s: already mounted on %s", dev, cur);
		return MOUNT_EX_FAIL;
	}
	for (int i = 1; i < argc; i++) {
		const char *o = !strcmp(argv[i], "-o") && i + 1 < argc ? argv[++i] :
				!strncmp(argv[i], "-o", 2) && argv[i][2] ? argv[i] + 2 : NULL;
		if (o)
			l += snprintf(list + l, l < sizeof(list) ? sizeof(list) - l : 0, "%s%s",
				      l ? "," : "", o);
	}
	if (l >= sizeof(list)) {
		cmd_err("fusemount", "option list too long");
		return EXIT_USAGE;
	}
	char *fwd[] = { "mount", "-o", list, real, NULL };
	return ctl_forward("fusemount", cur, 4, fwd);
}

int cmd_fusemount(int argc, char *argv[])
{
	struct bch_opts opts;
	char fuse_opts[10240] = "default_permissions,fsname=";
	bool foreground = false, debug = false;
	/* FUSE's defaults: nosuid,nodev (mount(8)'s helper asks for suid,dev as root) */
	struct mount_args ma = { .ms = MS_NOSUID | MS_NODEV };
	const char *dev = NULL, *mnt = NULL;

	bch_opts_default(&opts);
	memset(&opts.set, 0, sizeof(opts.set));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return EXIT_OK;
		} else if (!strcmp(a, "-f")) {
			foreground = true;
		} else if (!strcmp(a, "-d")) {
			debug = foreground = true;
		} else if (!strcmp(a, "-o") && i + 1 < argc) {
			i++;
			continue;	/* parsed below, once the device name is known */
		} else if (!strncmp(a, "-o", 2) && a[2]) {
			continue;
		} else if (a[0] == '-') {
			cmd_err("fusemount", "unknown option '%s'", a);
			usage(stderr);
			return EXIT_USAGE;
		} else if (!dev) {
			dev = a;
		} else if (!mnt) {
			mnt = a;
		} else {
			cmd_err("fusemount", "too many arguments");
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (!dev || !mnt) {
		usage(stderr);
		return EXIT_USAGE;
	}
	/* -o remount: the mount there changes, nothing is opened here */
	for (int i = 1; i < argc; i++) {
		const char *list = !strcmp(argv[i], "-o") && i + 1 < argc ? argv[++i] :
				   !strncmp(argv[i], "-o", 2) ? argv[i] + 2 : NULL;
		if (list && in_list("remount", list)) {
			char all[16384] = "";
			for (int j = 1, l = 0; j < argc; j++) {
				const char *o = !strcmp(argv[j], "-o") && j + 1 < argc ? argv[++j] :
						!strncmp(argv[j], "-o", 2) ? argv[j] + 2 : NULL;
				if (o)
					l += snprintf(all + l, sizeof(all) - l, "%s%s", l ? "," : "", o);
				if (l >= (int)sizeof(all)) {
					cmd_err("fusemount", "option list too long");
					return EXIT_USAGE;
				}
			}
			return remount_front(mnt, all);
		}
	}
	/* DEV[:DEV...] or UUID=... (fsname.h) */
	struct cmd_fs fsn;
	char *dev_arg[1] = { (char *)dev };
	int rr = cmd_fs_resolve("fusemount", dev_arg, 1, &fsn);
	if (rr)
		return rr;
	if (fsn.mounted) {
		int jr = join_front(dev, fsn.mnt, mnt, argc, argv);
		cmd_fs_free(&fsn);
		return jr;
	}
	/* fsname: the devices with absolute paths, so show-super MOUNTPOINT finds them */
	char fsname[8192] = "";
	for (unsigned i = 0; i < fsn.nr; i++) {
		char abs[PATH_MAX], *p = fsn.devs[i];
		size_t fl = strlen(fsname);
		/* absolute: the daemon's cwd is /, and commands name members by path */
		if (realpath(p, abs) && strcmp(abs, p)) {
			char *d = strdup(abs);
			if (d) {
				free(fsn.devs[i]);
				fsn.devs[i] = p = d;
			}
		}
		snprintf(fsname + fl, sizeof(fsname) - fl, "%s%s", fl ? ":" : "", p);
	}
	size_t l = strlen(fuse_opts);
	snprintf(fuse_opts + l, sizeof(fuse_opts) - l, "%s,subtype=bcachefs", fsname);
	for (int i = 1; i < argc; i++) {
		const char *list = NULL;
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			list = argv[++i];
		else if (!strncmp(argv[i], "-o", 2) && argv[i][2])
			list = argv[i] + 2;
		if (list && split_opts(list, &opts, fuse_opts, sizeof(fuse_opts), &ma)) {
			cmd_fs_free(&fsn);
			return EXIT_USAGE;
		}
	}
	if (ma.ms & MS_RDONLY)		/* the last of ro and rw, in every -o */
		bch_opt_set(&opts, Opt_read_only, 1);
	struct stat st;
	if (stat(mnt, &st) || !S_ISDIR(st.st_mode)) {
		cmd_err("fusemount", "%s: not a directory", mnt);
		cmd_fs_free(&fsn);
		return EXIT_USAGE;
	}
	/* before the filesystem is opened: without libfuse3 nothing is touched */
	if (fuse_dl_load("fusemount", &lf)) {
		cmd_fs_free(&fsn);
		return EXIT_FAIL;
	}

	unsigned nr = fsn.nr;
	char **devs = fsn.devs, err[512];
	struct fmount m = {
		.read_only = ma.ms & MS_RDONLY, .norebalance = ma.norebalance, .nocopygc = ma.nocopygc,
		.iostats = ma.iostats, .lazytime = ma.ms & MS_LAZYTIME,
	};
	pthread_condattr_t ca;
	pthread_mutex_init(&m.lock, NULL);
	pthread_mutex_init(&m.ends_mu, NULL);
	if (getenv(WRITE_HOLD_ENV)) {
		unsigned long us = strtoul(getenv(WRITE_HOLD_ENV), NULL, 10);
		m.test_write_hold_us = us < 1000000 ? us : 1000000;
	}
	pthread_rwlock_init(&m.ra_lock, NULL);
	pthread_rwlock_init(&m.sess_rw, NULL);
	pthread_mutex_init(&m.sess_mu, NULL);
	snprintf(m.fsname, sizeof(m.fsname), "%s", fsname);
	m.fuse_debug = debug;
	struct fsess first = { .m = &m, .atime = atime_of(ma.ms), .nodiratime = ma.ms & MS_NODIRATIME };
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m.bg_cond, &ca);
	pthread_cond_init(&m.sess_cond, &ca);
	pthread_cond_init(&m.write_cond, &ca);
	pthread_condattr_destroy(&ca);

	l = strlen(fuse_opts);
	fuse_flags(ma.ms, fuse_opts + l, sizeof(fuse_opts) - l);
	char *fargv[] = { "bcachefs", "-o", fuse_opts, debug ? "-d" : NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(debug ? 4 : 3, fargv);
	/*
	 * The session first: libfuse checks the options FUSE gets (-o
	 * nosuchopt) here, before the filesystem is opened read-write, so a
	 * bad one writes nothing to the devices.
	 */
	struct fuse_session *se = lf->session_new(&args, &ops, sizeof(ops), &first);
	if (!se) {
		cmd_err("fusemount", "could not start a FUSE session (see above)");
		lf->opt_free_args(&args);
		free_devs(devs);
		return EXIT_FAIL;
	}
	first.se = se;
	int r = bch_fs_open(devs, nr, &opts, &m.c, err, sizeof(err));
	if (r) {
		cmd_err("fusemount", "%s", err);
		free_devs(devs);
		lf->session_destroy(se);
		lf->opt_free_args(&args);
		return EXIT_FAIL;
	}
	cmd_note_degraded("fusemount", m.c, devs, nr);
	for (unsigned i = 0; i < nr; i++) {
		char *abs = realpath(devs[i], NULL);
		if (abs) {
			free(devs[i]);
			devs[i] = abs;
		}
	}
	m.devs = devs;		/* absolute paths: the daemon's cwd becomes / */
	m.nr_devs = nr;
	m.opts = opts;
	if (!realpath(mnt, m.mnt))
		snprintf(m.mnt, sizeof(m.mnt), "%s", mnt);
	m.c->defer_unlinked_free = true;
	m.read_only = m.c->read_only;
	if (bch_fs_read_cache_new(&m.rac))	/* freed at destroy, as every exit from here */
		m.rac = NULL;		/* reads without the read-ahead of encrypted extents */

	int ret = EXIT_FAIL;
	if (lf->set_signal_handlers(se)) {
		cmd_err("fusemount", "could not set signal handlers");
		goto destroy;
	}
	chain_signals();
	if (lf->session_mount(se, m.mnt)) {	/* absolute: the daemon's cwd becomes / */
		cmd_err("fusemount", "could not mount on %s", mnt);
		goto signals;
	}
	(void)sess_own_io(&first);	/* failing (no memory), libfuse's own I/O: no KILLPRIV_V2 */
	snprintf(first.mnt, sizeof(first.mnt), "%s", m.mnt);
	sess_add(&m, &first);
	mark_mounted(m.c, mnt);
	m.marked_c = m.c;
	/* the flags libfuse does not know (invariant 7): root only, as for any mount */
	if ((ma.ms & MNT_FLAGS_OURS) && !geteuid() && (r = kernel_remount(m.mnt, ma.ms)))
		cmd_err("fusemount", "%s: setting the mount's flags (nodiratime, strictatime, lazytime, "
			"nosymfollow): %s; the daemon follows them all the same", m.mnt, strerror(-r));
	if (!foreground && lf->daemonize(0)) {
		cmd_err("fusemount", "could not go to the background");
		goto unmount;
	}
	req_stats_since = real_ns();
	ctl_start(&m);
	bg_start(&m);
	struct fuse_loop_config config = { .clone_fd = 0, .max_idle_threads = LOOP_IDLE_THREADS };
	ret = lf->session_loop_mt(se, &config) ? EXIT_FAIL : EXIT_OK;
	/* invariant (9): this mountpoint went; the daemon serves the others until they go too */
	sess_remove(&m, &first);
	lf->session_unmount(se);
	wait_joined(&m);
	ctl_server_stop(m.ctl);
	m.ctl = NULL;
	bg_stop(&m);
unmount:
	lf->session_unmount(se);
signals:
	lf->remove_signal_handlers(se);
	unchain_signals();
destroy:
	lf->session_destroy(se);
	lf->opt_free_args(&args);
	if (m.iostats)
		bch_dev_on_close(print_iostats);
	r = bch_fs_close(m.c);
	if (r) {
		fprintf(stderr, "bcachefs fusemount: closing: %s\n", bch_err_str(r));
		ret = EXIT_FAIL;
	}
	free(m.held);
	free(m.free_pending);
	free(m.open_subvol);
	bch_fs_read_cache_free(m.rac);
	free_devs(m.devs);
	pthread_cond_destroy(&m.bg_cond);
	pthread_cond_destroy(&m.sess_cond);
	pthread_cond_destroy(&m.write_cond);
	pthread_mutex_destroy(&m.ends_mu);
	bch_fs_writes_exit(&m.writes);
	return ret;
}
