/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_BLOCKDEV_H
#define _BCACHEFS_BLOCKDEV_H

/*
 * blockdev.h - access to one device or image file.
 *
 * Owns: the file descriptor, the device's size and logical block size, the
 * exclusive-open guarantee, the test hook through which every write and
 * flush can be recorded, failed or torn, the device's I/O counters, and the
 * simulated delay of a slow device (a test hook read from the environment).
 *
 * Invariants
 *   (1) A device opened for writing is held exclusively: O_EXCL on block
 *       devices, an exclusive advisory lock (flock) on regular files, and
 *       both on a loop device (O_EXCL on it, flock on its backing file).  A
 *       second writer, by either name, gets -BCH_ERR_device_busy.
 *   (2) A device opened read-only is never written: bch_dev_write() returns
 *       -EROFS without touching it.
 *   (3) I/O never returns short: EINTR and partial transfers are retried;
 *       hitting the end of the device is -BCH_ERR_device_short_io.
 *   (4) Every write and flush passes through the hook first, when one is set.
 *   (5) The I/O counters count every request that reached the device, and
 *       only those: bytes actually transferred (a torn write counts its
 *       prefix; a write the hook refused counts nothing).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bch_blockdev;

/* Open flags */
#define BCH_DEV_RDONLY		(1U << 0)	/* never write */
#define BCH_DEV_CREATE		(1U << 1)	/* create a regular file if missing */
#define BCH_DEV_NO_LOCK		(1U << 2)	/* skip exclusive open (tests only) */
#define BCH_DEV_DIRECT		(1U << 3)	/* O_DIRECT where supported (block devices) */

/*
 * Test hook.  When set on a device, every write and flush calls it before
 * doing anything.  Return 0 to let the operation proceed, a negative error to
 * fail it (nothing written), or, for writes only, a positive number of bytes
 * to write before failing with -BCH_ERR_injected_fault (a torn write).
 * Hooks let crash tests record the exact sequence of writes and flushes.
 */
enum bch_io_op { BCH_IO_WRITE, BCH_IO_FLUSH };

struct bch_io_hook {
	int	(*fn)(void *priv, struct bch_blockdev *dev, enum bch_io_op op,
		      uint64_t offset, const void *buf, size_t len);
	void	*priv;
};

/*
 * Open path.  flags are BCH_DEV_*.  On success *ret is a new handle, owned
 * by the caller, freed by bch_dev_close().  Errors: -errno from open(2),
 * -BCH_ERR_device_busy when another writer holds it.
 */
int bch_dev_open(const char *path, unsigned flags, struct bch_blockdev **ret);
void bch_dev_close(struct bch_blockdev *dev);

/*
 * A mount daemon unmounted by FUSE's umount closes the filesystem after
 * umount has returned.  bch_dev_mark_mounted() marks dev as served by the
 * mount whose device number (st_dev of the mount point) is mnt_dev, until
 * dev is closed.  bch_dev_open() of a device held by such a daemon whose
 * mount is gone waits for the close (at most 30 s; then
 * -BCH_ERR_device_busy) instead of failing or reading a half-closed
 * filesystem; fn, when set, is called once per open that has waited a
 * second (the command prints "waiting ... to close"; the usual wait of a
 * few milliseconds prints nothing).  Returns 0 or -errno.
 */
int bch_dev_mark_mounted(struct bch_blockdev *dev, dev_t mnt_dev);
void bch_dev_on_wait(void (*fn)(const char *path, unsigned timeout_s));

const char *bch_dev_path(const struct bch_blockdev *dev);
uint64_t bch_dev_size(const struct bch_blockdev *dev);		/* bytes */
unsigned bch_dev_logical_block_size(const struct bch_blockdev *dev); /* bytes, 512 for files */
bool bch_dev_is_blockdev(const struct bch_blockdev *dev);
bool bch_dev_is_rdonly(const struct bch_blockdev *dev);
int bch_dev_fd(const struct bch_blockdev *dev);

/* Grow (or create) a regular file to size bytes.  -ENOTTY for block devices. */
int bch_dev_set_size(struct bch_blockdev *dev, uint64_t size);

/* Read/write len bytes at byte offset; all or nothing (see invariant 3). */
int bch_dev_read(struct bch_blockdev *dev, void *buf, size_t len, uint64_t offset);
int bch_dev_write(struct bch_blockdev *dev, const void *buf, size_t len, uint64_t offset);
/*
 * bch_dev_read() whose failure is not counted (read_errors): a read that is
 * retried the counted way when it fails (io.h, reads outside the engine lock).
 */
int bch_dev_read_try(struct bch_blockdev *dev, void *buf, size_t len, uint64_t offset);

/*
 * Tell the kernel reads will hop about (no readahead: reading one block
 * each of many buckets fetches only those blocks) or are back to normal.
 * A hint: errors are ignored.
 */
void bch_dev_advise_random(struct bch_blockdev *dev, bool random);

/* Ask the kernel to start reading [offset, offset + len) now (a hint). */
void bch_dev_willneed(struct bch_blockdev *dev, uint64_t offset, uint64_t len);

/*
 * Reads that bypass the page cache, for bytes the caller keeps itself (the
 * read-ahead of encrypted extents, fs_read.h): no page allocated, filled,
 * copied out and reclaimed for them.  Through a second descriptor of the
 * same file opened O_DIRECT on first use (the device's own when it is
 * O_DIRECT); coherent with buffered writes (the kernel writes dirty pages
 * of the range back before it reads).  Delayed and counted as
 * bch_dev_read_try(), failures not counted.
 *   bch_dev_uncached_ok(): can this device read so (the first call opens;
 *     false from the first read the file refused for its alignment on, and
 *     while a test hook is set: its reads all go the usual way then).
 *   bch_dev_readv_uncached(): len(iov) bytes at offset, buffers, lengths
 *     and offset aligned to the logical block size; 0, -errno, or
 *     -EOPNOTSUPP when this read cannot be done so (no O_DIRECT here, an
 *     alignment the file wants, a test hook set): read it the usual way.
 */
struct iovec;
bool bch_dev_uncached_ok(struct bch_blockdev *dev);
int bch_dev_readv_uncached(struct bch_blockdev *dev, const struct iovec *iov, unsigned nr, uint64_t offset);

/*
 * Ask the kernel to start writing [offset, offset + len), just written, to
 * the device now, without waiting (sync_file_range WRITE): a hint, errors
 * ignored, durability unchanged (only bch_dev_flush() makes it durable).
 * A stream of large writes then reaches the disk while it goes on, instead
 * of all at the next flush (a journal entry's preflush) with the engine
 * lock held.
 */
void bch_dev_writeback_start(struct bch_blockdev *dev, uint64_t offset, uint64_t len);

/*
 * fdatasync / cache flush.  Returns 0 only when earlier writes are durable.
 * Skipped (0 at once) when nothing was written or punched through dev since
 * its last flush; the first flush after open always runs.
 */
int bch_dev_flush(struct bch_blockdev *dev);

/* Discard (BLKDISCARD / punch hole); best effort, errors other than EIO ignored. */
int bch_dev_discard(struct bch_blockdev *dev, uint64_t offset, uint64_t len);
/*
 * A regular file: punch a hole (reads back as zeroes).  -EOPNOTSUPP for a
 * block device or while a write hook is set (callers write zeroes then),
 * else 0 or -errno.
 */
int bch_dev_punch(struct bch_blockdev *dev, uint64_t offset, uint64_t len);

/*
 * Batched I/O: submit many reads or writes at once (libaio on block devices
 * opened with BCH_DEV_DIRECT, plain pread/pwrite otherwise).  All complete
 * before return; the first error is returned.  Buffers must be aligned to the
 * logical block size for O_DIRECT (use bch_dev_alloc_buf()).
 */
struct bch_io_vec {
	void		*buf;
	size_t		len;
	uint64_t	offset;
};
int bch_dev_read_batch(struct bch_blockdev *dev, struct bch_io_vec *v, unsigned nr);
int bch_dev_write_batch(struct bch_blockdev *dev, const struct bch_io_vec *v, unsigned nr);

/* Page-aligned, zeroed buffer suitable for direct I/O; free with free(). */
void *bch_dev_alloc_buf(size_t len);

/* Install (or clear, with NULL) the test hook. */
void bch_dev_set_hook(struct bch_blockdev *dev, const struct bch_io_hook *hook);

/*
 * I/O counters, since the device was opened: one request is one
 * bch_dev_read()/bch_dev_write() call or one vec of a batch.  Relaxed atomic
 * counters, cheap enough to be always on, and readable from any thread while
 * I/O runs (a reader sees each counter some time during its call, not a
 * snapshot of all four at once).  Flushes and discards are not counted.
 */
struct bch_dev_io_stats {
	uint64_t	reads;		/* read requests */
	uint64_t	read_bytes;
	uint64_t	writes;		/* write requests */
	uint64_t	write_bytes;
	uint64_t	read_errors;	/* requests the device failed (EIO...) */
	uint64_t	write_errors;
};
void bch_dev_io_stats(const struct bch_blockdev *dev, struct bch_dev_io_stats *s);

/*
 * Called by bch_dev_close() for every device, just before it closes, with
 * the device's final counters (all of its I/O done): a process that wants
 * the totals of devices a library call closes (fusemount -o iostats) sets
 * it once.  NULL clears it.  Process-wide, like bch_dev_on_wait().
 */
void bch_dev_on_close(void (*fn)(const struct bch_blockdev *dev));

/*
 * Test hook: called by every successful bch_dev_open() before it returns,
 * so a crash test can install its write recorder (bch_dev_set_hook()) on
 * the handles a library call opens and closes by itself (device add, drop
 * and resize reopen the filesystem; iorec_follow()).  NULL clears it.
 * Process-wide, like bch_dev_on_close().
 */
void bch_dev_on_open(void (*fn)(struct bch_blockdev *dev));

/*
 * Test hook: a simulated slow device.  The environment variable
 *
 *	BCACHEFS_TEST_DEVICE_DELAY=PATH=USEC[,PATH=USEC...]
 *
 * read by bch_dev_open(), makes every read and write request of the device
 * opened as PATH (the same string, or a path with the same realpath(3)) sleep
 * USEC microseconds (at most 10 s) before it is done: each call and each
 * vec of a batch (batches then go one vec at a time).  Flushes and
 * discards are not delayed.  A malformed value fails every open with
 * -BCH_ERR_device_delay_spec, so a benchmark never runs undelayed by
 * mistake.  The bench scripts use it for a hard disk behind an SSD.
 */
#define BCH_DEV_DELAY_ENV	"BCACHEFS_TEST_DEVICE_DELAY"

/*
 * Test hook: a device whose cache flush is slow (an SSD's or a disk's, where
 * this machine's image files flush in a fraction of a millisecond).
 *
 *	BCACHEFS_TEST_FLUSH_DELAY=PATH=USEC[,PATH=USEC...]
 *
 * the same syntax and matching as BCH_DEV_DELAY_ENV: every flush that
 * reaches the named device (a flush with nothing written since the last
 * one does not) sleeps USEC microseconds after its fdatasync.  Reads and
 * writes are not delayed.  bench/fuse.sh's BENCH_FUSE_FLUSH_US uses it.
 */
#define BCH_DEV_FLUSH_DELAY_ENV	"BCACHEFS_TEST_FLUSH_DELAY"

/* The delay the hook gives dev, in microseconds (0: none). */
unsigned bch_dev_delay_us(const struct bch_blockdev *dev);

/* Undo /proc/self/mountinfo's octal escapes (\040 for a space, ...) in place. */
void bch_mountinfo_unescape(char *s);

#endif /* _BCACHEFS_BLOCKDEV_H */
