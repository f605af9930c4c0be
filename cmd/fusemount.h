/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fusemount.h - the FUSE daemon's private types, constants and the names
 * its modules share: cmd_fusemount.c (the command; its header has the
 * daemon's invariants), fusemount_req.c (request plumbing and the engine
 * lock), fusemount_ops.c (the FUSE operations), fusemount_bg.c (background
 * work, the control channel).  For these four files only.
 */
#ifndef _BCACHEFS_CMD_FUSEMOUNT_H
#define _BCACHEFS_CMD_FUSEMOUNT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "fs_ops.h"
#include "fs_read.h"
#include "fuse_dl.h"

#define TIMEOUT		30.0

/* libfuse3's functions, set by cmd_fusemount() before the session starts (fuse_dl.h) */
extern const struct fuse_dl *fm_lf;

/* Inodes the kernel holds (lookup count + open handles), for invariant (1). */
struct held {
	uint64_t	inum;		/* 0: empty */
	uint64_t	refs;
	int64_t		lazy_atime;	/* ns, not written yet (lazytime); 0: none */
	uint64_t	nosec;		/* fm_write_kill(): sec_gen + 1 when it found no
					 * set-id bit and no security.capability;
					 * 0: not known */
	uint64_t	nodefacl;	/* fm_default_acl(): defacl_gen + 1 when it had
					 * no default ACL; 0: not known */
	uint64_t	nosgid;		/* fm_dir_nosgid(): sec_gen + 1 when the directory
					 * had no S_ISGID; 0: not known */
	uint64_t	noacl;		/* fm_acl_none(): defacl_gen + 1 when it had no
					 * access ACL; 0: not known */
	uint64_t	chg_seq;	/* journal seq of its last change since m->c was
					 * last replaced (fm_changed()); 0: none */
	struct fm_lost	*lost;		/* a change lost at a replacement; NULL: none */
};

/*
 * A change of a held inode that a replacement of m->c lost (fm_changes_judge()):
 * Linux's errseq_t for a writeback error.  Each file handle open when it was
 * found, and each opened later before some handle was told (errseq_sample()
 * gives those 0), gets EIO from its next fsync, once (fm_lost_check()).  A
 * later loss starts over.
 */
struct fm_lost {
	uint64_t	fh_mark;	/* handles numbered up to it were open then */
	uint64_t	seen_mark;	/* the first told: handles numbered up to it
					 * were open then; 0: none told yet */
	uint32_t	nr, cap;
	uint64_t	*told;		/* the handles told of it */
};

/* -o relatime (the default), strictatime, noatime: when a read updates atime */
enum atime_mode {
	ATIME_RELATIME,
	ATIME_STRICT,
	ATIME_NONE,
};

struct fmount;

/*
 * A replacement of m->c (fusemount_bg.c, ctl_unlock()): what the old
 * filesystem had durable and would have flushed when the body's step
 * began (bch_fs_journal_seqs()), and what the new open proves durable
 * (bch_fs_open_durable(); 0: nothing).  Journal seqs continue across the
 * open, so an fsync's seq compares with all three.
 */
struct fm_repl {
	uint64_t	old_durable;
	uint64_t	old_need;
	uint64_t	new_durable;
};
#define FM_REPL_RING	8	/* an fsync that slept across more gets EIO */

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
	size_t		held_hint[2];	/* slots of the last two found (held_find()): a
					 * request asks of its inode and its parent a few
					 * times each; checked by inum, so never wrong */
	/*
	 * Inodes the kernel forgot, to free if unlinked (frees_run()): an
	 * rm -rf's files go FREE_PENDING at a time in a few transactions, not
	 * a commit each (lock).  Until then each is on disk with nlink 0 and
	 * the UNLINKED flag, as an open unlinked file is (fsck frees it after
	 * a crash).
	 */
	uint64_t	*free_pending;
	size_t		nr_free_pending;
	_Atomic(atomic_uint *) open_subvol;	/* open files and directories per
					 * subvolume (subvolume delete refuses a busy
					 * one); made at the first open (lock held),
					 * freed at the unmount; a releasedir counts
					 * down without the lock (fm_open_count()) */
	bool		read_only;
	bool		lazytime;	/* the filesystem's, as the kernel's SB_LAZYTIME */
	int64_t		last_write_ns;	/* mono_ns() of the last write stored (bg_ec_defer) */
	size_t		nr_lazy;	/* held entries with lazy_atime */
	uint64_t	sec_gen;	/* lock: one more at every hold by a request
					 * that may set a mode or an xattr (held.nosec) */
	uint64_t	defacl_gen;	/* lock: one more at every hold by a request
					 * that may set a default ACL (held.nodefacl) */
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
	/*
	 * The page notices sent before a reply now (fm_notify_pages()),
	 * under notice_mu: the cycle breaker.  Only while several sessions.
	 */
	pthread_mutex_t	notice_mu;
	struct fm_notice *notices;
	/*
	 * The page notices deferred past their replies (notice_mu): sent by
	 * one thread of their own, started at the first, so that no request
	 * thread waits in one (the loop has 10 per session: all waiting in
	 * such notices, none was left to read the request whose page they
	 * waited for; t122 append).
	 */
	struct fm_notice *later;
	pthread_cond_t	later_cond;
	pthread_t	later_thread;
	bool		later_started, later_stop;
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
	 * Replacements of m->c by command bodies (invariant 6), for an fsync
	 * that waits across one (op_fsync(), fm_fsync_across()): fs_gen
	 * counts them, and repl[gen % FM_REPL_RING] is what the gen-th
	 * found; body_* are m->c's journal seqs when the body's step took
	 * the lock (ctl_lock(): no write in flight).  Under lock.
	 */
	uint64_t	fs_gen;
	struct fm_repl	repl[FM_REPL_RING];
	uint64_t	body_durable, body_need;
	uint64_t	next_fh;	/* lock: the number of the next file handle (fm_fh_new()) */
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
	 * with ends_mu held.  Looked at without it where a stale look is
	 * safe (fusemount_ops.c, ends_run()): ends_open set by lock's holder,
	 * ends found empty before a look under ends_mu, ends_open found clear
	 * by a write that then takes lock itself.
	 */
	pthread_mutex_t	ends_mu;
	struct end_wait	*ends;		/* in the order they came */
	bool		ends_open;
	unsigned	test_write_hold_us;	/* WRITE_HOLD_ENV */
	const char	*test_gate;		/* TEST_GATE_ENV: a directory, or NULL */
};

/*
 * Test hook: BCACHEFS_TEST_GATE=DIR (absolute; read at mount): while
 * DIR/io-fail exists, every write and flush of the daemon's devices fails
 * with EIO (nothing written); while DIR/fsync-park exists, an fsync whose
 * journal write has finished parks before it takes the lock again,
 * holding nothing (DIR/fsync-parked made, at most 60 s), so that command
 * bodies run, and may replace m->c, before it looks (t95); while
 * DIR/acl-fail exists, a create's inherited access ACL fails with EIO
 * after the name is made (t118).
 */
#define TEST_GATE_ENV	"BCACHEFS_TEST_GATE"

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

#define LOCK(m)		fm_fg_lock(m)
#define UNLOCK(m)	fm_fg_unlock(m)

/* ------------------------------------------------------------ fusemount_req.c */

struct fsess *fm_session(fuse_req_t req);
struct fmount *fm_mount(fuse_req_t req);
void fm_hold(struct fmount *m, uint64_t inum, uint64_t n);

/*
 * Free the pending inodes that are unlinked (bch_fs_inodes_free() reads
 * each: one linked, or gone, is left alone) and that the kernel has not
 * looked up again since (held: it may still ask about it).  Lock held.
 */
void fm_frees_run(struct fmount *m);

/* Drop n references; an inode none are left on goes to the pending frees (lock held). */
void fm_unhold(struct fmount *m, uint64_t inum, uint64_t n);

/* At the end: the held table and what its entries own (struct fm_lost). */
void fm_held_free(struct fmount *m);

/*
 * inum's data or metadata changed (a request's commit, lock held): its
 * journal seq is remembered in its held entry, for fm_changes_judge().  The
 * seq is what a flush now would need (bch_journal_seq_needed()): the
 * commit's own, or a later one when the commit wrote its entry and the next
 * holds only new btree roots, which can only make an EIO where nothing was
 * lost, never a 0.
 */
void fm_changed(struct fmount *m, uint64_t inum);

/*
 * m->c was replaced (fusemount_bg.c, fs_replaced(); p: its record): every
 * held inode whose last change since the one before is durable by neither
 * p->old_durable nor p->new_durable lost it (struct fm_lost).  Lock held.
 */
void fm_changes_judge(struct fmount *m, const struct fm_repl *p);

/* A file handle's number, for fm_lost_check() (lock held): 1, 2, ... */
uint64_t fm_fh_new(struct fmount *m);

/*
 * An fsync of inum through handle fh (its number, fm_fh_new()): -EIO when
 * a change of inum was lost that the handle was not told of yet, once
 * (struct fm_lost); else 0.  Lock held.
 */
int fm_lost_check(struct fmount *m, uint64_t inum, uint64_t fh);

/* Our root is FUSE's FUSE_ROOT_ID; every other number is the same (inline: a few a request). */
static inline fuse_ino_t fm_to_fuse(uint64_t inum)
{
	return inum == BCH_ROOT_INO ? FUSE_ROOT_ID : inum;
}

static inline uint64_t fm_from_fuse(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? BCH_ROOT_INO : ino;
}

/* One more (+1) or one fewer (-1) file or directory open in ino's subvolume (lock held). */
void fm_open_count(struct fmount *m, fuse_ino_t ino, int d);

void fm_fix_st(struct stat *st);
int64_t fm_ts_ns(struct timespec ts);

/*
 * Linux's atime_needs_update() for a read of the inode st describes (dir: a
 * listing), atime its atime as seen (a lazy one included): relatime updates
 * only an atime not newer than mtime or ctime, or a day old.  Not while a
 * member is missing: a read would write metadata with fewer copies than
 * asked, left for `data rereplicate` to mend.  Lock held.
 */
bool fm_atime_due(struct fmount *m, const struct fsess *s, const struct stat *st,
		      int64_t atime, int64_t now);

void fm_lazy_flush_all(struct fmount *m);

/* The atime lazytime has not written yet into st, inum's stat as stored. */
void fm_lazy_stat(struct fmount *m, uint64_t inum, struct stat *st);

/* bch_fs_getattr() with the atime lazytime has not written yet. */
int fm_getattr(struct fmount *m, uint64_t inum, struct stat *st);

/*
 * touch_atime(): a read of inum (a file's data, a listing, a symlink's
 * target) reached us: update its atime by the mount's rules.  Lock held.
 */
void fm_read_atime(struct fmount *m, const struct fsess *s, uint64_t inum);

/* An explicit atime (utimes, touch -a) replaces the lazy one. */
void fm_lazy_drop(struct fmount *m, uint64_t inum);

/*
 * How long a kernel may keep a name, a missing name or attributes: TIMEOUT
 * while one session serves the filesystem, not at all while several do
 * (invariant 9).  Another session's change is notified after its reply, so
 * a kernel that kept them could answer from its cache in between: t70 saw a
 * name created through one mountpoint still missing through the other.
 * What a kernel cached before the second session joined is dropped by the
 * notices alone.
 */
double fm_cache_timeout(struct fmount *m);

/* Reply with an entry for inum (and count the lookup); lock held. */
int fm_make_entry(struct fmount *m, uint64_t inum, struct fuse_entry_param *e);
/* The same from inum's attributes and birth time when known (st not NULL: no inode read). */
int fm_make_entry_from(struct fmount *m, uint64_t inum, const struct stat *st, int64_t btime,
		       struct fuse_entry_param *e);

extern int64_t fm_req_stats_since;	/* CLOCK_REALTIME ns of the last reset */
extern __thread int64_t fm_req_wait_t0, fm_req_lock_t0;
int64_t fm_mono_ns(void);

/* The wall clock for "since" (not bch_now_ns(): SOURCE_DATE_EPOCH fixes that one). */
int64_t fm_real_ns(void);

/* The request this thread serves from now on (its handler's first line). */
void fm_req_type(enum req_type t);

/* Requests count themselves while they wait, so background work lets them in. */
void fm_fg_lock(struct fmount *m);

void fm_fg_unlock(struct fmount *m);

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
void fm_need_handover(struct fmount *m);	/* ENGINE -> DEVICES */

void fm_need_back(struct fmount *m);	/* DEVICES -> ENGINE */
void fm_need_drop_devices(struct fmount *m);
/* With DEVICES held (TEST_GATE_ENV): park there, DEVICES let go meanwhile. */
void fm_test_park(struct fmount *m);
/* TEST_GATE_ENV: DIR/name exists (a failure to make on purpose). */
bool fm_test_gate(struct fmount *m, const char *name);

/*
 * With ENGINE held: wait (it released meanwhile) until ready(m, arg); the
 * time counts as waiting for the lock, not holding it (fs timestats).
 */
void fm_need_wait(struct fmount *m, bool (*ready)(struct fmount *m, const void *arg), const void *arg);

/* Reads run outside the engine lock (bch_data_read_plan_run()), and those redone under it. */
extern atomic_uint_fast64_t fm_reads_unlocked, fm_reads_redone;

/* Writes encoded and written outside it (bch_fs_write_run()), and those redone under it. */
extern atomic_uint_fast64_t fm_writes_unlocked, fm_writes_redone;

/* Of those, writes ended by another request's hold of it (ends_run()). */
extern atomic_uint_fast64_t fm_writes_combined;

/* Data was written (kick) or a file's options changed (unpark): lock held. */
void fm_bg_wake(struct fmount *m, bool unpark);

/*
 * Who asks, for the set-id rules (fs_ops.h), malloc'd (free() it; NULL: no
 * memory): fuse_req_ctx() has the fsuid and fsgid; the supplementary groups
 * and CAP_FSETID, CAP_FOWNER, CAP_LINUX_IMMUTABLE and CAP_SYS_ADMIN are read from /proc/PID/status.  A request the kernel makes
 * itself (pid 0) or whose process is gone counts as privileged only for
 * uid 0.
 */
struct bch_caller *fm_caller_new(fuse_req_t req);

/*
 * A change of ino's data or size by the caller of req: clear the set-id bits
 * Linux clears (bch_kill_priv_bits()); nothing to look at when
 * fm_sec_plain().  The kernel does part of this itself
 * (S_ISUID, and S_ISGID with group-execute) and not the rest: a setgid file
 * without group-execute written by a non-member.  /proc is read only when
 * the file has a set-id bit.  Lock held.
 */
int fm_kill_priv(fuse_req_t req, struct fmount *m, uint64_t inum);

/*
 * What a write by req removes before its data (op_write()): the set-id bits
 * (fm_kill_priv()) and, when caps, security.capability (fm_kill_caps(): *caps_gone
 * when one was removed).  Remembered as Linux's S_NOSEC: an inode found with
 * neither is not looked at again until a request that may set either holds
 * the lock (sec_gen).  Lock held.
 */
int fm_write_kill(fuse_req_t req, struct fmount *m, uint64_t inum, bool caps, bool *caps_gone);

/* inum has no set-id bit and no security.capability (held.nosec still true).  Lock held. */
bool fm_sec_plain(struct fmount *m, uint64_t inum);

/*
 * inum was just made with mode (no security.capability yet): plain unless
 * mode has a set-id bit, without a lookup at its first write.  Lock held.
 */
void fm_sec_new(struct fmount *m, uint64_t inum, mode_t mode);

/* A setattr gave inum mode: a set-id bit in it ends what held.nosec and nosgid say.  Lock held. */
void fm_sec_mode(struct fmount *m, uint64_t inum, mode_t mode);

/*
 * A create in directory dir: true when dir is known to have no S_ISGID
 * (held.nosgid), so neither its gid nor its mode matter to the new inode
 * (bch_inode_init_owner()) and it need not be read.  Lock held.
 */
bool fm_dir_nosgid(struct fmount *m, uint64_t dir);

/* dir was read and has no S_ISGID: remember it (held.nosgid).  Lock held. */
void fm_dir_nosgid_set(struct fmount *m, uint64_t dir);

/*
 * Directory dir's default ACL into buf (bch_fs_getxattr()'s result), for a
 * create in it.  One found missing is remembered until a request that may
 * set one (setxattr, removexattr, a command) holds the lock: untar's
 * creates looked it up each time, ~9% of a CREATE's instructions.  Lock held.
 */
ssize_t fm_default_acl(struct fmount *m, uint64_t dir, char *buf, size_t size);

/*
 * inum has no access ACL (held.noacl, learnt at its create or a chmod that
 * found none): a chmod need not look for one to follow the mode (untar:
 * one xattr lookup less a file).  Lock held.
 */
bool fm_acl_none(struct fmount *m, uint64_t inum);
void fm_acl_none_set(struct fmount *m, uint64_t inum);

/*
 * The kernel's file_remove_privs() for a direct write (set_direct()):
 * a write removes the file's security.capability, whoever writes (Linux's
 * cap_inode_killpriv(); the buffered path asks and removes it through us).
 * *gone when one was removed.  Lock held.
 */
int fm_kill_caps(struct fmount *m, uint64_t inum, bool *gone);

/*
 * Invariant (9): what one session changed, the other sessions' kernels may
 * hold cached (attributes, pages, names and negative names): tell them.
 * Without lock: the kernel of the other session may hold the inode,
 * directory or page lock the notice needs for a request of its own that
 * waits for lock.  A name's notice comes after the reply: the other
 * kernel's directory lock may be held for a request of its own in the
 * same directory whose thread tells us of its change (each waits for the
 * other's lock).  An inode's comes before it (its attributes take no lock
 * the kernel holds for a request; pages are locked only for a request of
 * the other session, which another thread answers, unless that thread
 * waits in a notice for a page of ours: fm_notify_pages()), so once the
 * call returns no other mountpoint serves its old attributes, ACL or bytes.
 * skip: the session that made the change (NULL: a command made it, tell all).
 */
void fm_notify_sessions(struct fmount *m, const struct fsess *skip, fuse_ino_t ino,
			    const char *name, off_t off, off_t len);

/* Session s joined: the others drop what they cached for TIMEOUT (names, attributes). */
void fm_notify_joined(struct fmount *m, const struct fsess *s);

/*
 * s changed ino (its attributes; its pages in [off, off + len) unless off
 * < 0) or a name of directory parent: tell the other sessions.  Inline:
 * with one session, every change's notice is a load and a branch.
 */
/*
 * One page notice sent before its reply (fm_notify_pages()): about ino,
 * to every session but from.
 */
struct fm_notice {
	fuse_ino_t		ino;
	const struct fsess	*from;
	struct fm_notice	*next;
	off_t			off, len;	/* m->later's */
};

/*
 * s changed ino's pages in [off, off + len) (len 0: to the end) and its
 * attributes: tell the other sessions before the reply, unless that could
 * wait for good.  A kernel keeps a page a write only partly covers locked
 * until our reply; the notice to that kernel locks the same page
 * (invalidate_inode_pages2_range()).  Two writes in flight to one page
 * through two mountpoints: each thread's notice waits for the page the
 * other kernel keeps locked for the other thread's request (t122).  So,
 * under notice_mu: a thread about to notify others about ino while another
 * thread is notifying s's kernel about ino (from another session) does not
 * wait: false (the attributes told, they take no page lock), and the
 * caller replies first, then fm_others_pages_after().
 * Of any cycle of such waits, the last thread to register sees the one
 * before it: one replies, its page is unlocked, the others go on.  The
 * cost, only in that race (concurrent writes to one inode through two
 * mountpoints, whose order the writers cannot know): one page notice
 * lands shortly after its reply (its attributes' still before).  true: told (or nobody to tell).
 */
bool fm_notify_pages(struct fmount *m, const struct fsess *from, fuse_ino_t ino,
		     off_t off, off_t len);

/* Inline: with one session, every change's notice is a load and a branch. */
static inline __attribute__((warn_unused_result))
bool fm_others_pages(struct fsess *s, fuse_ino_t ino, off_t off, off_t len)
{
	return atomic_load_explicit(&s->m->nr_sess, memory_order_relaxed) < 2 ||
		fm_notify_pages(s->m, s, ino, off, len);
}

/* fm_others_pages() said false: the reply went, now the notice (queued: m->later). */
void fm_others_pages_after(struct fsess *s, fuse_ino_t ino, off_t off, off_t len);

/* After the last session went (wait_joined()): the deferred notices' thread ends. */
void fm_notice_stop(struct fmount *m);

/*
 * s changed ino's attributes (no pages: the notice takes no lock a kernel
 * holds for a request, so before the reply) or a name of directory parent
 * (after it): tell the other sessions.
 */
static inline void fm_others_attrs(struct fsess *s, fuse_ino_t ino)
{
	if (atomic_load_explicit(&s->m->nr_sess, memory_order_relaxed) > 1)
		fm_notify_sessions(s->m, s, ino, NULL, -1, 0);
}

static inline void fm_others_entry(struct fsess *s, fuse_ino_t parent, const char *name)
{
	if (atomic_load_explicit(&s->m->nr_sess, memory_order_relaxed) > 1)
		fm_notify_sessions(s->m, s, parent, name, 0, 0);
}

/* ------------------------------------------------------------ fusemount_ops.c */

/* Before session_mount()'s INIT is read: the session's I/O is sess_read()'s and sess_writev()'s. */
int fm_sess_own_io(struct fsess *s);

bool fm_no_planned_writes(struct fmount *m, const void *arg);
extern const struct fuse_lowlevel_ops fm_ops;

/* ------------------------------------------------------------ fusemount_bg.c */

/* After the mount (and the fork to the background); a failure only warns. */
void fm_bg_start(struct fmount *m);

/* Before the filesystem is closed: the thread finishes its step and returns. */
void fm_bg_stop(struct fmount *m);

/* After daemonizing (threads); a failure only warns: the mount works without it. */
void fm_ctl_start(struct fmount *m);

/* ------------------------------------------------------------ cmd_fusemount.c */

/* Invariant (4); a device left unmarked only loses the wait, so this warns. */
void fm_mark_mounted(struct bch_fs *c, const char *mnt);

#endif /* _BCACHEFS_CMD_FUSEMOUNT_H */
