// SPDX-License-Identifier: GPL-2.0
/*
 * blockdev.c - access to one device or image file (see blockdev.h).
 *
 * Owns: the file descriptor and its open mode, the cached size and logical
 * block size, the exclusive-open claim, the libaio context of direct block
 * devices, the test hook, the I/O counters and the simulated delay.
 *
 * Invariants (numbered as in blockdev.h, plus the ones local to this file)
 *   (1) Exclusive: block devices opened read-write use O_EXCL (the kernel
 *       refuses a second exclusive opener and mounts); regular files take
 *       flock(LOCK_EX|LOCK_NB).  flock belongs to the open file description,
 *       so a second bch_dev_open() of the same file fails even in the same
 *       process, and the lock dies with the descriptor.
 *       A loop device is its backing file under another name: opened
 *       read-write it also takes the file's flock (through a descriptor of
 *       its own, backing_fd), so the image and its loop device are never
 *       written by two of us at once, whichever name each was opened by.
 *   (2) Read-only handles are opened O_RDONLY, so even a bug here cannot
 *       write; bch_dev_write() also refuses with -EROFS up front.
 *   (3) I/O is all or nothing: ranges past dev->size are refused before any
 *       byte moves; EINTR and short transfers are retried.
 *   (4) The hook sees every write and flush first.  Discard is not a write
 *       the hook can record, so with a hook set discard does nothing: a
 *       recorded crash image must match what the device really holds.
 *   (5) With BCH_DEV_DIRECT on a block device the descriptor is O_DIRECT.
 *       Requests that are not aligned to the logical block size (buffer,
 *       offset or length) go through an aligned bounce buffer: reads read the
 *       covering blocks, writes read-modify-write them.
 *
 *   (6) A mount daemon marks each device it serves with an OFD read lock on
 *       one byte at MOUNT_MARK + the mount's device number (a range far past
 *       any image's end; no data is locked).  The mark and the exclusive
 *       claim die together when the daemon closes the descriptor, i.e. after
 *       its last write.  An opener that finds a marked holder whose mount is
 *       no longer in /proc/self/mountinfo (that number, type fuse.bcachefs,
 *       a source naming this device) knows the holder is a daemon that
 *       was unmounted and is still closing (FUSE's umount does not wait for
 *       it): it waits, up to CLOSE_WAIT_MS, for the close -- a writer for the
 *       claim, a reader (which takes no claim) for the mark to go -- instead
 *       of failing or reading a half-closed filesystem; only a wait past
 *       CLOSE_NOTICE_MS is told (wait_notice), so the usual few
 *       milliseconds after an unmount print nothing.  A holder that is
 *       not marked, or whose mount is still there, is refused (a writer) or
 *       shared (a reader) at once, as before.
 *   (7) Counters and delay sit where a request reaches the descriptor
 *       (after the hook and the range check): bch_dev_read/write count
 *       themselves, batch_rw counts its vecs, and a hooked batch, which
 *       goes through bch_dev_write, is counted there only.  A delayed
 *       device runs batches one vec at a time through the synchronous path,
 *       so every request pays its delay in turn as on one slow spindle.
 *
 * States: open (read-only or read-write) -> closed.  No other state: every
 * call completes its I/O before returning.
 */
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <linux/fs.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bcachefs_format.h"	/* BCH_SECTOR_SIZE */
#include "blockdev.h"
#include "errcode.h"

#define AIO_DEPTH	64	/* iocbs in flight per batch chunk */

#define MOUNT_MARK	(1LL << 60)	/* invariant (6): mark offset base */
#define MOUNT_MARK_SPAN	(1LL << 44)	/* room for any encoded dev_t */
#define CLOSE_WAIT_MS	30000		/* longest wait for a closing daemon */
#define CLOSE_POLL_MS	10
#define CLOSE_NOTICE_MS	1000		/* a wait this long is told (wait_notice) */
#define DELAY_MAX_US	10000000	/* 10 s: more is a typo, not a disk */

static void (*wait_notice)(const char *path, unsigned timeout_s);
static void (*close_notice)(const struct bch_blockdev *dev);
static void (*open_notice)(struct bch_blockdev *dev);

struct bch_blockdev {
	char			*path;
	int			fd;
	int			backing_fd;	/* loop device: its backing file, flocked; -1 */
	uint64_t		size;		/* bytes */
	unsigned		block_size;	/* logical block size, bytes */
	bool			is_blockdev;
	bool			rdonly;
	bool			direct;		/* fd is O_DIRECT */
	int			ufd;		/* uncached reads: -1 not opened yet, -2 none */
	atomic_bool		ufd_refused;	/* the file refused an aligned one (EINVAL) */
	bool			have_hook;
	struct bch_io_hook	hook;
	io_context_t		aio;		/* set up on first batch; 0 = none */
	bool			aio_failed;	/* io_setup failed: use the loop */
	unsigned		delay_us;	/* BCH_DEV_DELAY_ENV: sleep per request */
	unsigned		flush_delay_us;	/* BCH_DEV_FLUSH_DELAY_ENV: sleep per flush */
	atomic_uint_fast64_t	nr_reads, read_bytes, nr_writes, write_bytes;
	atomic_uint_fast64_t	read_errors, write_errors;	/* requests the device failed */
	atomic_bool		unflushed;	/* written (or punched) since the last flush */
	atomic_uint		flushing;	/* flushes under way (bch_dev_flush) */
};

/* ------------------------------------------------------------ open/close */

/*
 * Decide the open(2) flags from what the path is now.  A block device must
 * not get O_CREAT (with O_EXCL that would mean "must not exist").
 */
static int open_flags(unsigned flags, bool is_blk)
{
	int oflags = O_CLOEXEC;

	oflags |= flags & BCH_DEV_RDONLY ? O_RDONLY : O_RDWR;
	if (is_blk) {
		if (!(flags & (BCH_DEV_RDONLY | BCH_DEV_NO_LOCK)))
			oflags |= O_EXCL;
		if (flags & BCH_DEV_DIRECT)
			oflags |= O_DIRECT;
	} else if ((flags & BCH_DEV_CREATE) && !(flags & BCH_DEV_RDONLY)) {
		oflags |= O_CREAT;
	}
	return oflags;
}

static int stat_err(const struct stat *st)
{
	if (S_ISREG(st->st_mode) || S_ISBLK(st->st_mode))
		return 0;
	return S_ISDIR(st->st_mode) ? -EISDIR : -ENOTBLK;
}

/*
 * Open path with flags fit for its type.  If the path changed type between
 * stat and open (a file replaced by a device node), open again once with the
 * flags for the type actually opened.
 */
static int open_fd(const char *path, unsigned flags, int *fdp, struct stat *st)
{
	bool exists = !stat(path, st);
	bool is_blk = exists && S_ISBLK(st->st_mode);
	int ret;

	/* Refuse before open(2): opening a FIFO would block until a writer comes. */
	if (exists && (ret = stat_err(st)))
		return ret;

	for (unsigned attempt = 0; attempt < 2; attempt++) {
		int fd = open(path, open_flags(flags, is_blk), 0644);

		if (fd < 0)
			return errno == EBUSY ? -BCH_ERR_device_busy : -errno;
		if (fstat(fd, st)) {
			ret = -errno;
			close(fd);
			return ret;
		}
		if ((ret = stat_err(st))) {
			close(fd);
			return ret;
		}
		if (S_ISBLK(st->st_mode) == is_blk) {
			*fdp = fd;
			return 0;
		}
		close(fd);
		is_blk = S_ISBLK(st->st_mode);
	}
	return -EAGAIN;
}

static int lock_file(int fd)
{
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno == EWOULDBLOCK)
			return -BCH_ERR_device_busy;
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/*
 * If the block device open on fd is a loop device, open its backing file:
 * the path from sysfs (full length, unlike LOOP_GET_STATUS64's 64 bytes),
 * checked against the device and inode the driver reports, so a file
 * renamed or replaced since is not taken for it.  Returns the descriptor,
 * or -1 when there is none (not a loop device, no file attached, the file
 * gone or unreadable: it then holds no lock or mark of ours).
 */
static int open_loop_backing(int dev_fd, const struct stat *st)
{
	struct loop_info64 info;
	struct stat bst;
	char sys[96], path[4096];
	FILE *f;
	int fd;

	if (!S_ISBLK(st->st_mode) || ioctl(dev_fd, LOOP_GET_STATUS64, &info))
		return -1;
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/loop/backing_file",
		 major(st->st_rdev), minor(st->st_rdev));
	if (!(f = fopen(sys, "re")))
		return -1;
	bool got = fgets(path, sizeof(path), f);
	fclose(f);
	if (!got)
		return -1;
	path[strcspn(path, "\n")] = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -1;
	if (fstat(fd, &bst) || !S_ISREG(bst.st_mode) ||
	    bst.st_ino != info.lo_inode || bst.st_dev != info.lo_device) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A loop device's backing file is locked as an image opened by that name would be. */
static int lock_loop_backing(struct bch_blockdev *dev, const struct stat *st)
{
	int fd = open_loop_backing(dev->fd, st), ret;

	if (fd < 0)
		return 0;
	if ((ret = lock_file(fd))) {
		close(fd);
		return ret;
	}
	dev->backing_fd = fd;
	return 0;
}

/* ------------------------------------------------- closing mount daemons */

static uint64_t mark_encode(dev_t d)
{
	return ((uint64_t)major(d) << 20) | (minor(d) & 0xfffff);
}

/* The mount a daemon marked fd's file with (invariant 6); false if unmarked. */
static bool mount_mark(int fd, uint64_t *mnt)
{
	struct flock fl = {
		.l_type = F_WRLCK, .l_whence = SEEK_SET,
		.l_start = MOUNT_MARK, .l_len = MOUNT_MARK_SPAN,
	};

	if (fcntl(fd, F_OFD_GETLK, &fl) || fl.l_type == F_UNLCK)
		return false;
	*mnt = fl.l_start - MOUNT_MARK;
	return true;
}

void bch_mountinfo_unescape(char *s)
{
	char *o = s;

	for (; *s; s++, o++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o = (s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0');
			s += 3;
		} else {
			*o = *s;
		}
	}
	*o = 0;
}

/* Is path (from a mount's source) the file or block device st describes? */
static bool same_file(const char *path, const struct stat *st)
{
	struct stat ps;

	if (stat(path, &ps))
		return false;
	if (S_ISBLK(st->st_mode))
		return S_ISBLK(ps.st_mode) && ps.st_rdev == st->st_rdev;
	return ps.st_dev == st->st_dev && ps.st_ino == st->st_ino;
}

/*
 * Is the mount with device number mnt (encoded) still there, a
 * fuse.bcachefs mount whose source (fusemount's fsname: the devices'
 * absolute paths joined by ':') names the file st describes?  Device
 * numbers of FUSE mounts are reused once freed, by any later mount: the
 * number alone does not tell.
 */
static bool mounted(uint64_t mnt, const struct stat *st)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[16384];
	bool found = false;

	if (!f)
		return true;	/* cannot tell: do not wait on a live mount */
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned maj, mnr;
		char *sep = strstr(line, " - "), *save = NULL;
		if (sscanf(line, "%*u %*u %u:%u", &maj, &mnr) != 2 || !sep ||
		    mark_encode(makedev(maj, mnr)) != mnt)
			continue;
		char *type = strtok_r(sep + 3, " ", &save), *src = strtok_r(NULL, " ", &save);
		if (!type || !src || strcmp(type, "fuse.bcachefs"))
			continue;
		bch_mountinfo_unescape(src);
		for (char *p = strtok_r(src, ":", &save); p && !found; p = strtok_r(NULL, ":", &save))
			found = same_file(p, st);
	}
	fclose(f);
	return found;
}

/* fd's file, or for a loop device its backing file, is held by an unmounted daemon. */
static bool daemon_closing(int fd, const struct stat *st)
{
	struct stat bst;
	uint64_t mnt;
	bool ret = mount_mark(fd, &mnt) && !mounted(mnt, st);
	int bfd;

	if (!ret && (bfd = open_loop_backing(fd, st)) >= 0) {
		ret = !fstat(bfd, &bst) && mount_mark(bfd, &mnt) && !mounted(mnt, &bst);
		close(bfd);
	}
	return ret;
}

static int mark_fd(int fd, uint64_t mnt)
{
	struct flock fl = {
		.l_type = F_RDLCK, .l_whence = SEEK_SET,
		.l_start = MOUNT_MARK + mnt, .l_len = 1,
	};

	return fcntl(fd, F_OFD_SETLK, &fl) ? -errno : 0;
}

int bch_dev_mark_mounted(struct bch_blockdev *dev, dev_t mnt_dev)
{
	uint64_t mnt = mark_encode(mnt_dev);
	int ret = mark_fd(dev->fd, mnt);

	if (!ret && dev->backing_fd >= 0)
		ret = mark_fd(dev->backing_fd, mnt);
	return ret;
}

void bch_dev_on_wait(void (*fn)(const char *path, unsigned timeout_s))
{
	wait_notice = fn;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------- simulated slow device */

/* Does name (from the environment) stand for the device opened as path? */
static bool delay_matches(const char *name, const char *path, const char *real)
{
	char buf[PATH_MAX];

	return !strcmp(name, path) ||
	       (real && (!strcmp(name, real) || (realpath(name, buf) && !strcmp(buf, real))));
}

/*
 * *us from the environment variable name (BCH_DEV_DELAY_ENV's syntax, see
 * blockdev.h).  Every entry is checked, also those naming other devices,
 * so a typo fails at once.  The last entry matching wins.
 */
static int delay_from_env(struct bch_blockdev *dev, const char *name, unsigned *us_out)
{
	const char *env = getenv(name);
	char real[PATH_MAX], *dup, *save = NULL;
	const char *rp = realpath(dev->path, real) ? real : NULL;
	int ret = 0;

	if (!env || !*env)
		return 0;
	if (!(dup = strdup(env)))
		return -ENOMEM;
	for (char *e = strtok_r(dup, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		char *eq = strrchr(e, '='), *end;
		unsigned long us;

		if (!eq || eq == e || !eq[1] || eq[1] < '0' || eq[1] > '9') {
			ret = -BCH_ERR_device_delay_spec;
			break;
		}
		*eq = 0;
		errno = 0;
		us = strtoul(eq + 1, &end, 10);
		if (errno || *end || us > DELAY_MAX_US) {
			ret = -BCH_ERR_device_delay_spec;
			break;
		}
		if (delay_matches(e, dev->path, rp))
			*us_out = us;
	}
	free(dup);
	return ret;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = {
		.tv_sec = us / 1000000,
		.tv_nsec = (long)(us % 1000000) * 1000,
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void delay(const struct bch_blockdev *dev)
{
	sleep_us(dev->delay_us);
}

unsigned bch_dev_delay_us(const struct bch_blockdev *dev)
{
	return dev->delay_us;
}

/* ---------------------------------------------------------- I/O counters */

static void count(struct bch_blockdev *dev, bool write, unsigned nr, uint64_t bytes)
{
	atomic_fetch_add_explicit(write ? &dev->nr_writes : &dev->nr_reads, nr,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(write ? &dev->write_bytes : &dev->read_bytes, bytes,
				  memory_order_relaxed);
	if (write)	/* failed ones too: a part may have landed */
		atomic_store(&dev->unflushed, true);
}

void bch_dev_io_stats(const struct bch_blockdev *dev, struct bch_dev_io_stats *s)
{
	s->reads = atomic_load_explicit(&dev->nr_reads, memory_order_relaxed);
	s->read_bytes = atomic_load_explicit(&dev->read_bytes, memory_order_relaxed);
	s->writes = atomic_load_explicit(&dev->nr_writes, memory_order_relaxed);
	s->write_bytes = atomic_load_explicit(&dev->write_bytes, memory_order_relaxed);
	s->read_errors = atomic_load_explicit(&dev->read_errors, memory_order_relaxed);
	s->write_errors = atomic_load_explicit(&dev->write_errors, memory_order_relaxed);
}

/* A request the device failed (not one refused before it was issued). */
static void count_err(struct bch_blockdev *dev, bool write)
{
	atomic_fetch_add_explicit(write ? &dev->write_errors : &dev->read_errors, 1,
				  memory_order_relaxed);
}

void bch_dev_on_close(void (*fn)(const struct bch_blockdev *dev))
{
	close_notice = fn;
}

void bch_dev_on_open(void (*fn)(struct bch_blockdev *dev))
{
	open_notice = fn;
}

static int read_geometry(struct bch_blockdev *dev, const struct stat *st)
{
	int lbs;

	if (!dev->is_blockdev) {
		dev->size = st->st_size;
		dev->block_size = BCH_SECTOR_SIZE;
		return 0;
	}
	if (ioctl(dev->fd, BLKGETSIZE64, &dev->size) ||
	    ioctl(dev->fd, BLKSSZGET, &lbs))
		return -errno;
	dev->block_size = lbs > 0 ? lbs : BCH_SECTOR_SIZE;
	return 0;
}

/* Open dev->fd and take the claims of invariant (1); on error nothing is left open. */
static int open_once(struct bch_blockdev *dev, const char *path, unsigned flags, struct stat *st)
{
	bool lock = !(flags & (BCH_DEV_RDONLY | BCH_DEV_NO_LOCK));
	int err;

	if ((err = open_fd(path, flags, &dev->fd, st)))
		return err;
	if (lock && !S_ISBLK(st->st_mode) && (err = lock_file(dev->fd)))
		goto err;
	if (lock && S_ISBLK(st->st_mode) && (err = lock_loop_backing(dev, st)))
		goto err;
	return 0;
err:
	close(dev->fd);
	dev->fd = -1;
	return err;
}

/*
 * Invariant (6): is the open that gave err (0 or busy) waiting on a daemon
 * that was unmounted and is still closing?  A busy open has no descriptor
 * of its own: look through a read-only one.
 */
static bool must_wait(struct bch_blockdev *dev, const char *path, int err)
{
	struct stat st;
	bool ret = false;
	int fd = dev->fd;

	if (err) {
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return false;
	}
	if (!fstat(fd, &st))
		ret = daemon_closing(fd, &st);
	if (err)
		close(fd);
	return ret;
}

int bch_dev_open(const char *path, unsigned flags, struct bch_blockdev **ret)
{
	struct bch_blockdev *dev;
	struct stat st;
	uint64_t start = 0;
	bool noticed = false;
	int err;

	*ret = NULL;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->fd = -1;
	dev->backing_fd = -1;
	dev->ufd = -1;
	dev->path = strdup(path);
	if (!dev->path) {
		err = -ENOMEM;
		goto err;
	}

	for (bool again = true;;) {
		err = open_once(dev, path, flags, &st);
		if ((err && err != -BCH_ERR_device_busy) || (flags & BCH_DEV_NO_LOCK) ||
		    (!err && !(flags & BCH_DEV_RDONLY)))
			break;
		if (!must_wait(dev, path, err)) {
			/*
			 * A closing daemon's close() drops its mark a moment
			 * before its claim (and a loop device's before its
			 * backing file's): a busy open that found no mark
			 * tries once more.
			 */
			if (!err || !again)
				break;
			again = false;
			usleep(CLOSE_POLL_MS * 1000);
			continue;
		}
		/* a daemon closing: wait, then open again (a reader too: from scratch) */
		/*
		 * A close right after an unmount takes a few milliseconds: only a
		 * long wait is told, so a script's mount after umount stays quiet.
		 */
		if (!start) {
			start = now_ms();
		} else if (now_ms() - start >= CLOSE_WAIT_MS) {
			err = -BCH_ERR_device_busy;
			break;
		} else if (!noticed && now_ms() - start >= CLOSE_NOTICE_MS) {
			noticed = true;
			if (wait_notice)
				wait_notice(path, (CLOSE_WAIT_MS - CLOSE_NOTICE_MS) / 1000);
		}
		if (!err) {
			close(dev->fd);
			dev->fd = -1;
		}
		usleep(CLOSE_POLL_MS * 1000);
	}
	if (err)
		goto err;
	dev->is_blockdev = S_ISBLK(st.st_mode);
	dev->rdonly = flags & BCH_DEV_RDONLY;
	/*
	 * The first flush is never skipped: what an earlier process wrote and
	 * did not flush (killed mid-session) is durable before anything of ours.
	 */
	atomic_init(&dev->unflushed, true);
	dev->direct = dev->is_blockdev && (flags & BCH_DEV_DIRECT);
	if ((err = read_geometry(dev, &st)) || (err = delay_from_env(dev, BCH_DEV_DELAY_ENV, &dev->delay_us)) ||
	    (err = delay_from_env(dev, BCH_DEV_FLUSH_DELAY_ENV, &dev->flush_delay_us)))
		goto err;
	if (open_notice)
		open_notice(dev);
	*ret = dev;
	return 0;
err:
	bch_dev_close(dev);
	return err;
}

void bch_dev_close(struct bch_blockdev *dev)
{
	if (!dev)
		return;
	if (close_notice && dev->fd >= 0)
		close_notice(dev);
	if (dev->aio)
		io_destroy(dev->aio);
	if (dev->ufd >= 0 && dev->ufd != dev->fd)
		close(dev->ufd);
	if (dev->fd >= 0)
		close(dev->fd);		/* drops the flock / O_EXCL claim */
	if (dev->backing_fd >= 0)
		close(dev->backing_fd);	/* and the loop device's backing file's flock */
	free(dev->path);
	free(dev);
}

/* ------------------------------------------------------------- accessors */

const char *bch_dev_path(const struct bch_blockdev *dev)
{
	return dev->path;
}

uint64_t bch_dev_size(const struct bch_blockdev *dev)
{
	return dev->size;
}

unsigned bch_dev_logical_block_size(const struct bch_blockdev *dev)
{
	return dev->block_size;
}

bool bch_dev_is_blockdev(const struct bch_blockdev *dev)
{
	return dev->is_blockdev;
}

bool bch_dev_is_rdonly(const struct bch_blockdev *dev)
{
	return dev->rdonly;
}

int bch_dev_fd(const struct bch_blockdev *dev)
{
	return dev->fd;
}

void bch_dev_set_hook(struct bch_blockdev *dev, const struct bch_io_hook *hook)
{
	dev->have_hook = hook && hook->fn;
	if (dev->have_hook)
		dev->hook = *hook;
}

void *bch_dev_alloc_buf(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	if (posix_memalign(&p, page > 0 ? page : 4096, len ? len : 1))
		return NULL;
	memset(p, 0, len);
	return p;
}

int bch_dev_set_size(struct bch_blockdev *dev, uint64_t size)
{
	if (dev->is_blockdev)
		return -ENOTTY;
	if (dev->rdonly)
		return -EROFS;
	while (ftruncate(dev->fd, size))
		if (errno != EINTR)
			return -errno;
	dev->size = size;
	return 0;
}

/* ------------------------------------------------------ synchronous I/O */

/* Full-length pread/pwrite: retries EINTR and partial transfers. */
static int rw_loop(int fd, bool write, void *buf, size_t len, uint64_t offset)
{
	char *p = buf;

	while (len) {
		ssize_t n = write
			? pwrite(fd, p, len, offset)
			: pread(fd, p, len, offset);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!n)		/* end of file or device */
			return -BCH_ERR_device_short_io;
		p += n;
		len -= n;
		offset += n;
	}
	return 0;
}

static bool is_aligned(const struct bch_blockdev *dev, const void *buf,
		       size_t len, uint64_t offset)
{
	unsigned mask = dev->block_size - 1;

	return !(((uintptr_t)buf | len | offset) & mask);
}

/*
 * O_DIRECT needs whole aligned blocks: move the covering blocks through an
 * aligned buffer.  A write that covers only part of its first or last block
 * reads the blocks first, so the bytes around the request keep their contents.
 */
static int rw_bounce(struct bch_blockdev *dev, bool write, void *buf,
		     size_t len, uint64_t offset)
{
	uint64_t mask = dev->block_size - 1;
	uint64_t start = offset & ~mask;
	uint64_t end = (offset + len + mask) & ~mask;
	bool partial = start != offset || end != offset + len;
	char *b = bch_dev_alloc_buf(end - start);
	int ret = 0;

	if (!b)
		return -ENOMEM;
	if (!write || partial)
		ret = rw_loop(dev->fd, false, b, end - start, start);
	if (!ret && write) {
		memcpy(b + (offset - start), buf, len);
		ret = rw_loop(dev->fd, true, b, end - start, start);
	} else if (!ret) {
		memcpy(buf, b + (offset - start), len);
	}
	free(b);
	return ret;
}

static int do_rw(struct bch_blockdev *dev, bool write, void *buf,
		 size_t len, uint64_t offset)
{
	if (dev->direct && !is_aligned(dev, buf, len, offset))
		return rw_bounce(dev, write, buf, len, offset);
	return rw_loop(dev->fd, write, buf, len, offset);
}

static bool in_range(const struct bch_blockdev *dev, size_t len, uint64_t offset)
{
	return offset <= dev->size && len <= dev->size - offset;
}

/* One request as it reaches the device: delayed, done, counted (invariant 7). */
static int dev_rw(struct bch_blockdev *dev, bool write, void *buf,
		  size_t len, uint64_t offset)
{
	int ret;

	if (dev->delay_us)
		delay(dev);
	ret = do_rw(dev, write, buf, len, offset);
	count(dev, write, 1, ret ? 0 : len);
	if (ret)
		count_err(dev, write);
	return ret;
}

int bch_dev_read(struct bch_blockdev *dev, void *buf, size_t len, uint64_t offset)
{
	if (!in_range(dev, len, offset))
		return -BCH_ERR_device_short_io;
	return dev_rw(dev, false, buf, len, offset);
}

int bch_dev_read_try(struct bch_blockdev *dev, void *buf, size_t len, uint64_t offset)
{
	if (!in_range(dev, len, offset))
		return -BCH_ERR_device_short_io;
	if (dev->delay_us)
		delay(dev);
	int ret = do_rw(dev, false, buf, len, offset);
	if (!ret)
		count(dev, false, 1, len);
	return ret;
}

/*
 * The descriptor of uncached reads, opened on first use: the device's own
 * when it is O_DIRECT, else the same file (/proc/self/fd: whatever the
 * path names now) again with O_DIRECT and no lock of its own; -2: none.
 */
static int ufd_get(struct bch_blockdev *dev)
{
	int fd = __atomic_load_n(&dev->ufd, __ATOMIC_ACQUIRE), want = -1;
	char path[32];

	if (fd != -1)
		return fd;
	if (dev->direct) {
		fd = dev->fd;
	} else {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", dev->fd);
		fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (fd < 0)
			fd = -2;
	}
	if (!__atomic_compare_exchange_n(&dev->ufd, &want, fd, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (fd >= 0 && fd != dev->fd)
			close(fd);	/* another thread opened it first */
		fd = want;
	}
	return fd;
}

/*
 * Not with a test hook set: its device's reads then all go the usual way
 * (bch_dev_read_try()), where a hook on reads would see them, as discard
 * and punch stand aside for it.
 */
bool bch_dev_uncached_ok(struct bch_blockdev *dev)
{
	return dev->fd >= 0 && !dev->have_hook &&
	       !atomic_load_explicit(&dev->ufd_refused, memory_order_relaxed) && ufd_get(dev) >= 0;
}

int bch_dev_readv_uncached(struct bch_blockdev *dev, const struct iovec *iov, unsigned nr, uint64_t offset)
{
	size_t len = 0;
	int fd;

	for (unsigned i = 0; i < nr; i++) {
		if (!is_aligned(dev, iov[i].iov_base, iov[i].iov_len, offset))
			return -EOPNOTSUPP;
		len += iov[i].iov_len;
	}
	if (!in_range(dev, len, offset))
		return -BCH_ERR_device_short_io;
	if (nr > IOV_MAX || dev->have_hook || atomic_load_explicit(&dev->ufd_refused, memory_order_relaxed) ||
	    (fd = ufd_get(dev)) < 0)
		return -EOPNOTSUPP;
	if (dev->delay_us)
		delay(dev);
	ssize_t n = preadv(fd, iov, (int)nr, (off_t)offset);
	if (n < 0 && errno == EINVAL) {
		/*
		 * A larger alignment than the logical block size this file was
		 * given (a file over 4 KiB sectors): no more uncached reads, so
		 * callers go back to the page cache and its readahead hints.
		 */
		atomic_store_explicit(&dev->ufd_refused, true, memory_order_relaxed);
		return -EOPNOTSUPP;
	}
	if (n < 0)
		return -errno;
	if ((size_t)n != len)
		return -BCH_ERR_device_short_io;
	count(dev, false, 1, len);
	return 0;
}

int bch_dev_write(struct bch_blockdev *dev, const void *buf, size_t len, uint64_t offset)
{
	size_t n = len;
	int hret = 0, ret;

	if (dev->rdonly)
		return -EROFS;
	if (!in_range(dev, len, offset))
		return -BCH_ERR_device_short_io;

	if (dev->have_hook) {
		hret = dev->hook.fn(dev->hook.priv, dev, BCH_IO_WRITE, offset, buf, len);
		if (hret < 0)
			return hret;
		if (hret > 0) {		/* torn write: a prefix, then fail */
			n = (size_t)hret < len ? (size_t)hret : len;
			hret = -BCH_ERR_injected_fault;
		}
	}
	/* do_rw takes void * for both directions; a write never modifies buf. */
	ret = dev_rw(dev, true, (void *)buf, n, offset);
	return ret ?: hret;
}

static int __dev_flush(struct bch_blockdev *dev)
{
	int ret;

	/*
	 * Nothing written since the last flush: nothing to make durable,
	 * unless another flush is under way (the journal's writer thread): it
	 * may have taken the flag and not be done, so this one flushes too.
	 */
	if (!atomic_exchange(&dev->unflushed, false) && atomic_load(&dev->flushing) == 1)
		return 0;
	if (dev->have_hook) {
		ret = dev->hook.fn(dev->hook.priv, dev, BCH_IO_FLUSH, 0, NULL, 0);
		if (ret) {
			atomic_store(&dev->unflushed, true);
			return ret < 0 ? ret : -BCH_ERR_injected_fault;
		}
	}
	/* A block device's fdatasync may skip the cache flush; fsync does not. */
	while (dev->is_blockdev ? fsync(dev->fd) : fdatasync(dev->fd))
		if (errno != EINTR) {
			ret = -errno;
			atomic_store(&dev->unflushed, true);
			return ret;
		}
	if (dev->flush_delay_us)
		sleep_us(dev->flush_delay_us);
	return 0;
}

/*
 * Counted in flushing: the journal's writer thread flushes while requests
 * run, and a flush that finds unflushed cleared by one still under way
 * must not return before that one's fdatasync does (no lock: a fork in
 * the middle of a flush leaves nothing held, at worst flushes that are
 * never skipped).
 */
int bch_dev_flush(struct bch_blockdev *dev)
{
	int ret;

	if (dev->rdonly)
		return 0;	/* nothing of ours can be dirty */
	atomic_fetch_add(&dev->flushing, 1);
	ret = __dev_flush(dev);
	atomic_fetch_sub(&dev->flushing, 1);
	return ret;
}

/* --------------------------------------------------------------- discard */

static int discard_blockdev(struct bch_blockdev *dev, uint64_t offset, uint64_t len)
{
	uint64_t mask = dev->block_size - 1;
	uint64_t range[2];

	/* Discard only whole logical blocks inside the range. */
	range[0] = (offset + mask) & ~mask;
	range[1] = ((offset + len) & ~mask);
	if (range[1] <= range[0])
		return 0;
	range[1] -= range[0];
	return ioctl(dev->fd, BLKDISCARD, range) ? -errno : 0;
}

int bch_dev_discard(struct bch_blockdev *dev, uint64_t offset, uint64_t len)
{
	int ret;

	if (dev->rdonly)
		return -EROFS;
	if (dev->have_hook || offset >= dev->size || !len)
		return 0;	/* see invariant (4) */
	if (len > dev->size - offset)
		len = dev->size - offset;

	if (dev->is_blockdev)
		ret = discard_blockdev(dev, offset, len);
	else
		ret = fallocate(dev->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				offset, len) ? -errno : 0;
	atomic_store(&dev->unflushed, true);

	/* Best effort: only an I/O error says something about the device. */
	return ret == -EIO ? ret : 0;
}

int bch_dev_punch(struct bch_blockdev *dev, uint64_t offset, uint64_t len)
{
	if (dev->rdonly)
		return -EROFS;
	if (dev->is_blockdev || dev->have_hook)
		return -EOPNOTSUPP;	/* a recorder must see the zeroes written */
	atomic_store(&dev->unflushed, true);
	return fallocate(dev->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, len) ? -errno : 0;
}

/* ------------------------------------------------------------ batched I/O */

/* A vec that the kernel can take as one O_DIRECT request. */
static bool aio_ok(const struct bch_blockdev *dev, const struct bch_io_vec *v)
{
	return is_aligned(dev, v->buf, v->len, v->offset) && v->len;
}

static bool use_aio(struct bch_blockdev *dev)
{
	if (!dev->direct || dev->aio_failed)
		return false;
	if (!dev->aio && io_setup(AIO_DEPTH, &dev->aio)) {
		/* e.g. fs.aio-max-nr exhausted: the loop is slower, not wrong */
		dev->aio = 0;
		dev->aio_failed = true;
		return false;
	}
	return true;
}

/*
 * Submit cbs; returns how many the kernel took.  On a refusal (EAGAIN: out of
 * aio resources, or an error) the caller does the rest synchronously.
 */
static unsigned aio_submit_all(struct bch_blockdev *dev, struct iocb **cbs, unsigned nr)
{
	unsigned done = 0;

	while (done < nr) {
		int n = io_submit(dev->aio, nr - done, cbs + done);

		if (n == -EINTR)
			continue;
		if (n <= 0)
			break;
		done += n;
	}
	return done;
}

/*
 * Wait for nr completions.  A short completion is finished synchronously
 * (the rest of that vec), so the caller only sees errors.
 */
static int aio_reap(struct bch_blockdev *dev, bool write, unsigned nr)
{
	struct io_event ev[AIO_DEPTH];
	int ret = 0;

	while (nr) {
		int n = io_getevents(dev->aio, 1, nr, ev, NULL);

		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;	/* context broken; cannot wait further */
		for (int i = 0; i < n; i++) {
			struct bch_io_vec *v = ev[i].data;
			long res = (long)ev[i].res;
			int err = 0;

			if (res < 0)
				err = res;
			else if ((size_t)res < v->len)
				err = do_rw(dev, write, (char *)v->buf + res,
					    v->len - res, v->offset + res);
			if (!ret)
				ret = err;
		}
		nr -= n;
	}
	return ret;
}

/* One chunk of at most AIO_DEPTH aligned vecs through libaio. */
static int aio_chunk(struct bch_blockdev *dev, bool write,
		     struct bch_io_vec *v, unsigned nr)
{
	struct iocb cb[AIO_DEPTH], *cbs[AIO_DEPTH];
	unsigned submitted;
	int ret;

	for (unsigned i = 0; i < nr; i++) {
		if (write)
			io_prep_pwrite(&cb[i], dev->fd, v[i].buf, v[i].len, v[i].offset);
		else
			io_prep_pread(&cb[i], dev->fd, v[i].buf, v[i].len, v[i].offset);
		cb[i].data = &v[i];
		cbs[i] = &cb[i];
	}

	submitted = aio_submit_all(dev, cbs, nr);
	ret = submitted ? aio_reap(dev, write, submitted) : 0;

	for (unsigned i = submitted; i < nr; i++) {
		int err = do_rw(dev, write, v[i].buf, v[i].len, v[i].offset);

		if (!ret)
			ret = err;
	}
	return ret;
}

/*
 * Run a batch: aligned vecs go to libaio in chunks, the rest (and every vec
 * when libaio is not in use) through the synchronous path.  Every vec is
 * attempted; the first error is returned.
 */
static int batch_rw(struct bch_blockdev *dev, bool write,
		    struct bch_io_vec *v, unsigned nr)
{
	bool aio = !dev->delay_us && use_aio(dev);
	int ret = 0;

	for (unsigned i = 0; i < nr; i++)
		if (!in_range(dev, v[i].len, v[i].offset))
			return -BCH_ERR_device_short_io;

	for (unsigned i = 0; i < nr;) {
		unsigned n = 0;
		int err;

		while (aio && i + n < nr && n < AIO_DEPTH && aio_ok(dev, &v[i + n]))
			n++;
		if (n) {
			uint64_t bytes = 0;

			err = aio_chunk(dev, write, v + i, n);
			for (unsigned j = 0; !err && j < n; j++)
				bytes += v[i + j].len;
			count(dev, write, n, bytes);	/* a failed chunk: no bytes */
			if (err)
				count_err(dev, write);
		} else {
			err = dev_rw(dev, write, v[i].buf, v[i].len, v[i].offset);
			n = 1;
		}
		if (!ret)
			ret = err;
		i += n;
	}
	return ret;
}

int bch_dev_read_batch(struct bch_blockdev *dev, struct bch_io_vec *v, unsigned nr)
{
	return batch_rw(dev, false, v, nr);
}

int bch_dev_write_batch(struct bch_blockdev *dev, const struct bch_io_vec *v, unsigned nr)
{
	int ret;

	if (dev->rdonly)
		return -EROFS;
	if (dev->have_hook) {
		/*
		 * One write at a time, so the hook sees the order and a failed
		 * or torn write stops the batch as a crash would.
		 */
		for (unsigned i = 0; i < nr; i++)
			if ((ret = bch_dev_write(dev, v[i].buf, v[i].len, v[i].offset)))
				return ret;
		return 0;
	}
	/* batch_rw only reads through v's buffers when writing. */
	return batch_rw(dev, true, (struct bch_io_vec *)v, nr);
}

void bch_dev_advise_random(struct bch_blockdev *dev, bool random)
{
	(void)posix_fadvise(dev->fd, 0, 0, random ? POSIX_FADV_RANDOM : POSIX_FADV_NORMAL);
}

void bch_dev_writeback_start(struct bch_blockdev *dev, uint64_t offset, uint64_t len)
{
	if (dev->direct || dev->rdonly)
		return;		/* O_DIRECT: nothing of ours is in the page cache */
	(void)sync_file_range(dev->fd, (off_t)offset, (off_t)len, SYNC_FILE_RANGE_WRITE);
}

void bch_dev_willneed(struct bch_blockdev *dev, uint64_t offset, uint64_t len)
{
	if (dev->direct)
		return;		/* O_DIRECT reads would not use what it fetched */
	(void)posix_fadvise(dev->fd, (off_t)offset, (off_t)len, POSIX_FADV_WILLNEED);
}
