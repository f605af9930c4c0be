// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_fusemount.c - `bcachefs fusemount [-o OPTS] [-f] [-d] DEVICES MOUNTPOINT`:
 * the filesystem as a mounted Linux filesystem through FUSE (libfuse3's
 * low-level API), with no kernel driver.  Also run as mount.fuse.bcachefs
 * (`mount -t fuse.bcachefs DEV MNT`, fstab).
 *
 * The daemon is five files: this one (the command, options, mount flags,
 * sessions, remount, signals), fusemount_req.c (what every request goes
 * through: held inodes, the engine lock and the needs of a step, atime,
 * entries, notices, statistics), fusemount_ops.c (the FUSE operations),
 * fusemount_bg.c (background work, the control channel) and fusemount.h
 * (their types and shared names).
 *
 * FUSE inode numbers are ours (the root, 4096, is FUSE_ROOT_ID).  Every
 * request takes the engine lock (m->lock) around its library calls: the
 * engine is single-threaded, the session is not.  A read holds it only to
 * plan; its device reads, checksums, cipher and decompression run with the
 * devices held open instead (fm_need_handover(), io.h "Reads outside the
 * engine lock"), and a read that cannot finish so is redone under the lock
 * the old way.  A write larger than WRITE_UNLOCKED_MIN, or of whole blocks
 * (plan_write()), holds it to allocate its space and take a ticket, then
 * checksums, encrypts and writes its data with the devices held open, and
 * takes it again to add its extents once every earlier write of the file
 * has (fs_ops.h, bch_fs_write_begin()), or is ended by the writer that
 * holds it then (end_write());
 * fsync waits for the file's writes issued before it, then hands the
 * journal entry to the journal's writer thread and waits for its write and
 * flush with the devices held open, not the lock (op_fsync(), journal.h
 * bch_journal_flush_step()): other requests run meanwhile, and fsyncs that
 * come during it go out together in the next entry.  A command body waits
 * for every planned write.  The kernel caches reads; writes
 * are not cached (no writeback cache), so each write(2) is stored, or
 * refused with ENOSPC, before it returns.  Names and attributes are cached
 * for TIMEOUT (30 s): the kernel makes most changes itself, and every other
 * one is notified to it (another session's: invariant 9; a command's:
 * fusemount_name_changed()); while several sessions serve the filesystem
 * they are not cached at all (fm_cache_timeout()).
 *
 * Invariants
 *   (1) An inode whose last name goes while the kernel still knows it (a
 *       lookup count or an open file) keeps its data: the library is told to
 *       defer the free, and it happens after the kernel forgets the inode
 *       (queued, up to 64 freed together: fm_frees_run(), before any request
 *       but an rm -rf's takes the lock, and by the background thread), or at
 *       unmount.
 *   (2) fsync and fsyncdir return only after a journal flush: the entry
 *       open when they took the lock (or the last one written) is durable.
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
 *       meanwhile.  A replacement is counted (m->fs_gen, ctl_unlock()) with
 *       what the old filesystem had durable and what the new open proves
 *       durable: an fsync that slept across it answers from that
 *       (fusemount_ops.c, fm_fsync_across()), not from the old close;
 *       a held inode's change it lost (its journal seq, fm_changed(), is
 *       durable by neither) is reported by the next fsync of each handle
 *       open then, once, as Linux's errseq_t (fm_changes_judge(),
 *       fm_lost_check()).
 *       The mountpoint's root answers getxattr "bcachefs.ctl"
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
 *       A change made through one session is notified to the others
 *       without lock (fm_others_pages, fm_others_attrs, fm_others_entry),
 *       so their kernels drop what they cache of it: an inode's attributes,
 *       ACL and pages before the reply (pages after it when two sessions'
 *       writes to one inode race: fm_notify_pages()), a name after it
 *       (fm_notify_sessions(): a name's notice before it could deadlock two
 *       sessions' creates in one directory).  No name is cached meanwhile (fm_cache_timeout()),
 *       and what the others cached alone goes at the join
 *       (fm_notify_joined()), so once a call returns no other mountpoint
 *       shows the state before it (t117).  The filesystem is closed when
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

#include "fusemount.h"

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
void fm_mark_mounted(struct bch_fs *c, const char *mnt)
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
		fm_mark_mounted(m->c, m->mnt);
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

	fm_lf->session_loop_mt(s->se, &config);
	sess_remove(m, s);
	fm_lf->session_unmount(s->se);
	fm_lf->session_destroy(s->se);	/* op_destroy: the last session frees what is held */
	fm_lf->opt_free_args(&s->args);
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
	s->se = fm_lf->session_new(&s->args, &fm_ops, sizeof(fm_ops), s);
	if (!s->se) {
		fprintf(x->err, "bcachefs mount: %s: could not start a FUSE session (a FUSE option "
			"it does not know?)\n", mnt);
		fm_lf->opt_free_args(&s->args);
		free(s);
		return EXIT_USAGE;
	}
	if (fm_lf->session_mount(s->se, mnt)) {
		fprintf(x->err, "bcachefs mount: %s: could not mount there (not a directory, or "
			"not one this daemon's user may mount on)\n", mnt);
		fm_lf->session_destroy(s->se);
		fm_lf->opt_free_args(&s->args);
		free(s);
		return EXIT_FAIL;
	}
	(void)fm_sess_own_io(s);	/* failing (no memory), libfuse's own I/O: no KILLPRIV_V2 */
	int r;
	if ((ms & MNT_FLAGS_OURS) && (r = kernel_remount(mnt, ms)))
		fprintf(x->err, "bcachefs mount: %s: setting the mount's flags: %s; the daemon "
			"follows them all the same\n", mnt, strerror(-r));
	pthread_mutex_lock(&m->sess_mu);
	m->nr_joined++;
	pthread_mutex_unlock(&m->sess_mu);
	sess_add(m, s);
	fm_notify_joined(m, s);

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
		fm_lf->session_unmount(s->se);
		fm_lf->session_destroy(s->se);
		fm_lf->opt_free_args(&s->args);
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

/* TEST_GATE_ENV (fusemount.h): writes and flushes fail while DIR/io-fail exists. */
static const char *test_gate_dir;

static int test_gate_io(void *priv, struct bch_blockdev *dev, enum bch_io_op op,
			uint64_t offset, const void *buf, size_t len)
{
	char p[PATH_MAX];

	(void)priv; (void)dev; (void)op; (void)offset; (void)buf; (void)len;
	snprintf(p, sizeof(p), "%s/io-fail", test_gate_dir);
	return access(p, F_OK) ? 0 : -EIO;
}

static void test_gate_install(struct bch_blockdev *dev)
{
	static const struct bch_io_hook hook = { .fn = test_gate_io };

	bch_dev_set_hook(dev, &hook);
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
		fm_lazy_flush_all(m);
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
	m->marked_c = NULL;	/* ctl_unlock() marks the new opens, at the old address or not */
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
			fm_lazy_flush_all(m);
		se->atime = am;
		se->nodiratime = nodir;
		m->lazytime = lazy;
		m->norebalance = nrb;
		m->nocopygc = ncg;
		m->iostats = ios;
		fm_bg_wake(m, true);
	}
	x->unlock(x);
	/* background work as the mount now is: stopped read-only, or with its options */
	fm_bg_stop(m);
	m->bg_stop = false;
	fm_bg_start(m);
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
	if (fuse_dl_load("fusemount", &fm_lf)) {
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
	if (getenv(TEST_GATE_ENV) && getenv(TEST_GATE_ENV)[0] == '/') {
		m.test_gate = test_gate_dir = getenv(TEST_GATE_ENV);
		bch_dev_on_open(test_gate_install);	/* the devices of every open, reopens too */
	}
	pthread_rwlock_init(&m.ra_lock, NULL);
	pthread_rwlock_init(&m.sess_rw, NULL);
	pthread_mutex_init(&m.sess_mu, NULL);
	pthread_mutex_init(&m.notice_mu, NULL);
	pthread_cond_init(&m.later_cond, NULL);
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
	struct fuse_session *se = fm_lf->session_new(&args, &fm_ops, sizeof(fm_ops), &first);
	if (!se) {
		cmd_err("fusemount", "could not start a FUSE session (see above)");
		fm_lf->opt_free_args(&args);
		free_devs(devs);
		return EXIT_FAIL;
	}
	first.se = se;
	int r = bch_fs_open(devs, nr, &opts, &m.c, err, sizeof(err));
	if (r) {
		cmd_err("fusemount", "%s", err);
		free_devs(devs);
		fm_lf->session_destroy(se);
		fm_lf->opt_free_args(&args);
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
	if (fm_lf->set_signal_handlers(se)) {
		cmd_err("fusemount", "could not set signal handlers");
		goto destroy;
	}
	chain_signals();
	if (fm_lf->session_mount(se, m.mnt)) {	/* absolute: the daemon's cwd becomes / */
		cmd_err("fusemount", "could not mount on %s", mnt);
		goto signals;
	}
	(void)fm_sess_own_io(&first);	/* failing (no memory), libfuse's own I/O: no KILLPRIV_V2 */
	snprintf(first.mnt, sizeof(first.mnt), "%s", m.mnt);
	sess_add(&m, &first);
	fm_mark_mounted(m.c, mnt);
	m.marked_c = m.c;
	/* the flags libfuse does not know (invariant 7): root only, as for any mount */
	if ((ma.ms & MNT_FLAGS_OURS) && !geteuid() && (r = kernel_remount(m.mnt, ma.ms)))
		cmd_err("fusemount", "%s: setting the mount's flags (nodiratime, strictatime, lazytime, "
			"nosymfollow): %s; the daemon follows them all the same", m.mnt, strerror(-r));
	if (!foreground && fm_lf->daemonize(0)) {
		cmd_err("fusemount", "could not go to the background");
		goto unmount;
	}
	fm_req_stats_since = fm_real_ns();
	fm_ctl_start(&m);
	fm_bg_start(&m);
	struct fuse_loop_config config = { .clone_fd = 0, .max_idle_threads = LOOP_IDLE_THREADS };
	ret = fm_lf->session_loop_mt(se, &config) ? EXIT_FAIL : EXIT_OK;
	/* invariant (9): this mountpoint went; the daemon serves the others until they go too */
	sess_remove(&m, &first);
	fm_lf->session_unmount(se);
	wait_joined(&m);
	fm_notice_stop(&m);
	ctl_server_stop(m.ctl);
	m.ctl = NULL;
	fm_bg_stop(&m);
unmount:
	fm_lf->session_unmount(se);
signals:
	fm_lf->remove_signal_handlers(se);
	unchain_signals();
destroy:
	fm_lf->session_destroy(se);
	fm_lf->opt_free_args(&args);
	if (m.iostats)
		bch_dev_on_close(print_iostats);
	r = bch_fs_close(m.c);
	if (r) {
		fprintf(stderr, "bcachefs fusemount: closing: %s\n", bch_err_str(r));
		ret = EXIT_FAIL;
	}
	fm_held_free(&m);
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
