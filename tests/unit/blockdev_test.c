// SPDX-License-Identifier: GPL-2.0
/*
 * blockdev_test.c - bch_dev_* on image files and, when running as root, on a
 * loop device: sizes, round trips, the end of the device, read-only and
 * exclusive opens, the test hook (order, failure, torn writes), batches, the
 * I/O counters and the simulated slow device (BCACHEFS_TEST_DEVICE_DELAY).
 *
 * Every test works in its own mkdtemp directory under /tmp, removed by the
 * fixture; the loop test detaches the loop device it attached, by name.
 */
#include <criterion/criterion.h>
#include <sys/uio.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blockdev.h"
#include "errcode.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64];

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "blockdev");
}

static void teardown(void)
{
	test_tmpdir_remove(tmpdir);
}

TestSuite(blockdev, .init = setup, .fini = teardown);

static const char *tmp_path(const char *name)
{
	static char p[256];

	snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
	return p;
}

/* Byte i of the test pattern with a seed, so different writes differ. */
static void fill(void *buf, size_t len, unsigned seed)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (i * 131 + seed * 7 + (i >> 9)) ^ seed;
}

/* Create a file of len bytes holding the pattern of seed. */
static void make_file(const char *path, size_t len, unsigned seed)
{
	char *buf = malloc(len);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert(buf && fd >= 0);
	fill(buf, len, seed);
	cr_assert_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
	free(buf);
}

/* Whole file contents, malloc'd; *len set. */
static char *slurp(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY);
	char *buf;

	cr_assert(fd >= 0 && !fstat(fd, &st));
	*len = st.st_size;
	buf = malloc(*len + 1);
	cr_assert(buf);
	cr_assert_eq(pread(fd, buf, *len, 0), (ssize_t)*len);
	close(fd);
	return buf;
}

static struct bch_blockdev *open_ok(const char *path, unsigned flags)
{
	struct bch_blockdev *dev;
	int ret = bch_dev_open(path, flags, &dev);

	cr_assert_eq(ret, 0, "open %s: %s", path, bch_err_str(ret));
	return dev;
}

/* ------------------------------------------------------------- basics */

Test(blockdev, create_and_grow)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	struct stat st;

	cr_expect_eq(bch_dev_open(path, 0, &dev), -ENOENT);
	cr_expect_null(dev);

	mode_t old = umask(022);
	dev = open_ok(path, BCH_DEV_CREATE);
	umask(old);
	cr_assert(!stat(path, &st));
	cr_expect_eq(st.st_mode & 07777, 0644);
	cr_expect_eq(bch_dev_size(dev), 0);
	cr_expect_eq(bch_dev_logical_block_size(dev), 512);
	cr_expect_not(bch_dev_is_blockdev(dev));
	cr_expect_not(bch_dev_is_rdonly(dev));
	cr_expect_str_eq(bch_dev_path(dev), path);
	cr_expect_geq(bch_dev_fd(dev), 0);

	cr_assert_eq(bch_dev_set_size(dev, 1 << 20), 0);
	cr_expect_eq(bch_dev_size(dev), 1 << 20);
	cr_assert(!stat(path, &st));
	cr_expect_eq(st.st_size, 1 << 20);

	cr_assert_eq(bch_dev_set_size(dev, 8192), 0);	/* shrink too */
	cr_expect_eq(bch_dev_size(dev), 8192);
	bch_dev_close(dev);

	dev = open_ok(path, BCH_DEV_CREATE);		/* exists: kept as is */
	cr_expect_eq(bch_dev_size(dev), 8192);
	bch_dev_close(dev);
}

Test(blockdev, not_a_file_or_device)
{
	struct bch_blockdev *dev;

	cr_expect_eq(bch_dev_open(tmpdir, BCH_DEV_RDONLY, &dev), -EISDIR);
	cr_expect_eq(bch_dev_open("/dev/null", BCH_DEV_RDONLY, &dev), -ENOTBLK);

	/* A FIFO with no writer: refused, not a hang in open(2). */
	cr_assert_eq(mkfifo(tmp_path("fifo"), 0600), 0);
	cr_expect_eq(bch_dev_open(tmp_path("fifo"), BCH_DEV_RDONLY, &dev), -ENOTBLK);
}

Test(blockdev, read_write_round_trip)
{
	const char *path = tmp_path("img");
	static const struct { uint64_t off; size_t len; } io[] = {
		{ 0, 4096 }, { 4096, 512 }, { 5000, 3 }, { 8191, 1 },
		{ 12345, 20000 }, { 65536 - 700, 700 },
	};
	char buf[20000], back[20000];
	struct bch_blockdev *dev;
	size_t flen;

	make_file(path, 65536, 1);
	dev = open_ok(path, 0);
	cr_expect_eq(bch_dev_size(dev), 65536);

	for (unsigned i = 0; i < 6; i++) {
		fill(buf, io[i].len, 10 + i);
		cr_assert_eq(bch_dev_write(dev, buf, io[i].len, io[i].off), 0, "write %u", i);
		memset(back, 0, sizeof(back));
		cr_assert_eq(bch_dev_read(dev, back, io[i].len, io[i].off), 0, "read %u", i);
		cr_assert_arr_eq(back, buf, io[i].len, "round trip %u", i);
	}
	cr_expect_eq(bch_dev_flush(dev), 0);
	bch_dev_close(dev);

	/* The writes are disjoint: the file holds each of them. */
	char *img = slurp(path, &flen);
	cr_assert_eq(flen, 65536);
	for (unsigned i = 0; i < 6; i++) {
		fill(buf, io[i].len, 10 + i);
		cr_expect_arr_eq(img + io[i].off, buf, io[i].len, "file %u", i);
	}
	free(img);
}

Test(blockdev, short_io_at_end)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	char buf[4096];
	size_t flen;

	make_file(path, 8192, 2);
	dev = open_ok(path, 0);
	cr_expect_eq(bch_dev_read(dev, buf, 4096, 6144), -BCH_ERR_device_short_io);
	cr_expect_eq(bch_dev_read(dev, buf, 1, 8192), -BCH_ERR_device_short_io);
	cr_expect_eq(bch_dev_read(dev, buf, 1, UINT64_MAX), -BCH_ERR_device_short_io);
	cr_expect_eq(bch_dev_read(dev, buf, 0, 8192), 0);
	cr_expect_eq(bch_dev_read(dev, buf, 2048, 6144), 0);

	/* Writes do not grow the device either: that is bch_dev_set_size()'s job. */
	cr_expect_eq(bch_dev_write(dev, buf, 4096, 6144), -BCH_ERR_device_short_io);
	bch_dev_close(dev);

	free(slurp(path, &flen));
	cr_expect_eq(flen, 8192);
}

Test(blockdev, read_only_never_writes)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	char buf[4096], *before, *after;
	size_t blen, alen;

	make_file(path, 65536, 3);
	before = slurp(path, &blen);

	dev = open_ok(path, BCH_DEV_RDONLY);
	cr_expect(bch_dev_is_rdonly(dev));
	fill(buf, sizeof(buf), 99);
	struct bch_io_vec v = { buf, sizeof(buf), 0 };

	cr_expect_eq(bch_dev_write(dev, buf, sizeof(buf), 0), -EROFS);
	cr_expect_eq(bch_dev_write_batch(dev, &v, 1), -EROFS);
	cr_expect_eq(bch_dev_set_size(dev, 1 << 20), -EROFS);
	cr_expect_eq(bch_dev_discard(dev, 0, 65536), -EROFS);
	cr_expect_eq(bch_dev_flush(dev), 0);
	cr_expect_eq(bch_dev_read(dev, buf, sizeof(buf), 4096), 0);
	cr_expect_arr_eq(buf, before + 4096, sizeof(buf));
	bch_dev_close(dev);

	after = slurp(path, &alen);
	cr_assert_eq(alen, blen);
	cr_expect_arr_eq(after, before, blen, "read-only open changed the file");
	free(before);
	free(after);
}

Test(blockdev, read_only_does_not_create)
{
	struct bch_blockdev *dev;

	cr_expect_eq(bch_dev_open(tmp_path("nope"), BCH_DEV_RDONLY | BCH_DEV_CREATE, &dev),
		     -ENOENT);
}

/*
 * flock locks belong to the open file description, so a second open(2) in
 * the same process conflicts with the first just like another process does.
 * Both are checked: the same process, and a forked child.
 */
Test(blockdev, second_writer_is_busy)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *a, *b;
	int status;
	pid_t pid;

	make_file(path, 8192, 4);
	a = open_ok(path, 0);

	cr_expect_eq(bch_dev_open(path, 0, &b), -BCH_ERR_device_busy);
	cr_expect_null(b);

	pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		struct bch_blockdev *c;

		_exit(bch_dev_open(path, 0, &c) == -BCH_ERR_device_busy ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && !WEXITSTATUS(status),
		  "child's read-write open was not refused");

	b = open_ok(path, BCH_DEV_RDONLY);	/* readers are not excluded */
	bch_dev_close(b);
	b = open_ok(path, BCH_DEV_NO_LOCK);	/* explicit opt-out */
	bch_dev_close(b);

	bch_dev_close(a);
	b = open_ok(path, 0);			/* the lock died with a */
	bch_dev_close(b);
}

/*
 * Invariant (6): a holder marked with a mount that no longer exists is a
 * closing daemon: a writer waits for it (and is told once), a reader waits
 * for the mark to go; so does one whose mount number now belongs to another
 * mount; an unmarked holder is refused at once.
 */
static unsigned waits;
static void count_wait(const char *path, unsigned timeout_s)
{
	(void)path;
	cr_expect(timeout_s >= 1 && timeout_s <= 30, "timeout %u s", timeout_s);	/* what is left of the wait */
	waits++;
}

/*
 * A mount daemon closing: a child opens PATH, marks it mounted on MNT, holds
 * it MS ms and closes it.  *CLOSING is the read end of a pipe the child writes a
 * byte to just before its close: an open that returned while no byte is
 * there did not wait for the close (on a loaded machine the parent may be
 * scheduled late, so the time it waited tells nothing).
 */
static pid_t hold_marked(const char *path, dev_t mnt, unsigned ms, int *closing)
{
	int pfd[2];
	char c;

	cr_assert_eq(pipe(pfd), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		struct bch_blockdev *h;
		close(pfd[0]);
		if (bch_dev_open(path, 0, &h) || bch_dev_mark_mounted(h, mnt))
			_exit(1);
		(void)!write(pfd[1], "x", 1);
		usleep(ms * 1000);
		(void)!write(pfd[1], "c", 1);
		bch_dev_close(h);
		_exit(0);
	}
	close(pfd[1]);
	cr_assert_eq(read(pfd[0], &c, 1), 1, "holder could not open and mark");
	*closing = pfd[0];
	return pid;
}

/* true when the holder of hold_marked() had begun its close; closes FD */
static bool holder_closed(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c = 0;
	bool r = poll(&p, 1, 0) == 1 && read(fd, &c, 1) == 1 && c == 'c';

	close(fd);
	return r;
}

Test(blockdev, closing_daemon_is_waited_for)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *b;
	struct stat root;
	int status;
	pid_t pid;
	int closing;

	make_file(path, 8192, 4);
	bch_dev_on_wait(count_wait);
	/* device number 0:1048575 is no mount's */
	dev_t gone = makedev(0, 0xfffff);

	waits = 0;
	pid = hold_marked(path, gone, 300, &closing);
	cr_expect_eq(bch_dev_open(path, 0, &b), 0, "writer did not get the device after the close");
	cr_expect(holder_closed(closing), "writer did not wait for the closing holder");
	cr_expect_eq(waits, 0, "a short wait was told");
	bch_dev_close(b);
	waitpid(pid, &status, 0);

	waits = 0;
	pid = hold_marked(path, gone, 300, &closing);
	cr_expect_eq(bch_dev_open(path, BCH_DEV_RDONLY, &b), 0);
	cr_expect(holder_closed(closing), "reader did not wait for the closing holder");
	cr_expect_eq(waits, 0, "a short wait was told");
	bch_dev_close(b);
	waitpid(pid, &status, 0);

	/* a wait past a second is told, once */
	waits = 0;
	pid = hold_marked(path, gone, 1400, &closing);
	cr_expect_eq(bch_dev_open(path, BCH_DEV_RDONLY, &b), 0);
	cr_expect(holder_closed(closing), "reader did not wait for the closing holder");
	cr_expect_eq(waits, 1, "a long wait was not told");
	bch_dev_close(b);
	waitpid(pid, &status, 0);

	/*
	 * the number of a mount that is not this device's (the root
	 * filesystem's: another mount took the number the daemon's freed) is
	 * no live mount of it either: waited for (t24 checks a live one)
	 */
	cr_assert_eq(stat("/", &root), 0);
	waits = 0;
	pid = hold_marked(path, root.st_dev, 300, &closing);
	cr_expect_eq(bch_dev_open(path, 0, &b), 0);
	cr_expect(holder_closed(closing), "a reused mount number was taken for a live mount");
	cr_expect_eq(waits, 0, "a short wait was told");
	bch_dev_close(b);
	waitpid(pid, &status, 0);

	/* an unmarked holder (not a mount daemon): refused at once, no wait */
	struct bch_blockdev *a = open_ok(path, 0);
	waits = 0;
	cr_expect_eq(bch_dev_open(path, 0, &b), -BCH_ERR_device_busy);
	cr_expect_eq(waits, 0, "waited for an unmarked holder");	/* a wait of a second is told */
	bch_dev_close(a);
	bch_dev_on_wait(NULL);
}

/* --------------------------------------------------------------- hook */

#define MAX_REC 32

struct rec {
	unsigned	nr;
	struct {
		enum bch_io_op	op;
		uint64_t	offset;
		size_t		len;
		unsigned char	first;
	}		ev[MAX_REC];
	int		ret;		/* what the hook answers */
	unsigned	fail_at;	/* answer ret from this event on */
};

static int rec_hook(void *priv, struct bch_blockdev *dev, enum bch_io_op op,
		    uint64_t offset, const void *buf, size_t len)
{
	struct rec *r = priv;

	(void)dev;
	cr_assert_lt(r->nr, MAX_REC);
	r->ev[r->nr].op = op;
	r->ev[r->nr].offset = offset;
	r->ev[r->nr].len = len;
	r->ev[r->nr].first = buf && len ? *(const unsigned char *)buf : 0;
	return r->nr++ >= r->fail_at ? r->ret : 0;
}

static void set_rec(struct bch_blockdev *dev, struct rec *r, unsigned fail_at, int ret)
{
	struct bch_io_hook hook = { rec_hook, r };

	memset(r, 0, sizeof(*r));
	r->fail_at = fail_at;
	r->ret = ret;
	bch_dev_set_hook(dev, &hook);
}

Test(blockdev, hook_sees_writes_and_flushes_in_order)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	unsigned char a[512] = { 0xaa }, b[1024] = { 0xbb }, c[100] = { 0xcc };
	struct rec r;

	make_file(path, 65536, 5);
	dev = open_ok(path, 0);
	set_rec(dev, &r, UINT32_MAX, 0);

	cr_assert_eq(bch_dev_write(dev, a, sizeof(a), 4096), 0);
	cr_assert_eq(bch_dev_write(dev, b, sizeof(b), 0), 0);
	cr_assert_eq(bch_dev_flush(dev), 0);
	cr_assert_eq(bch_dev_write(dev, c, sizeof(c), 9000), 0);
	cr_assert_eq(bch_dev_flush(dev), 0);
	cr_assert_eq(bch_dev_read(dev, a, sizeof(a), 0), 0);	/* reads: not hooked */

	cr_assert_eq(r.nr, 5);
	cr_expect(r.ev[0].op == BCH_IO_WRITE && r.ev[0].offset == 4096 &&
		  r.ev[0].len == 512 && r.ev[0].first == 0xaa);
	cr_expect(r.ev[1].op == BCH_IO_WRITE && r.ev[1].offset == 0 &&
		  r.ev[1].len == 1024 && r.ev[1].first == 0xbb);
	cr_expect(r.ev[2].op == BCH_IO_FLUSH);
	cr_expect(r.ev[3].op == BCH_IO_WRITE && r.ev[3].offset == 9000 &&
		  r.ev[3].len == 100 && r.ev[3].first == 0xcc);
	cr_expect(r.ev[4].op == BCH_IO_FLUSH);

	bch_dev_set_hook(dev, NULL);
	cr_assert_eq(bch_dev_write(dev, a, sizeof(a), 0), 0);
	cr_expect_eq(r.nr, 5, "cleared hook still called");
	bch_dev_close(dev);
}

Test(blockdev, hook_failure_writes_nothing)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	char buf[4096], *before, *after;
	size_t blen, alen;
	struct rec r;

	make_file(path, 65536, 6);
	before = slurp(path, &blen);
	dev = open_ok(path, 0);
	set_rec(dev, &r, 0, -EIO);

	fill(buf, sizeof(buf), 77);
	cr_expect_eq(bch_dev_write(dev, buf, sizeof(buf), 8192), -EIO);
	cr_expect_eq(bch_dev_flush(dev), -EIO);
	struct bch_io_vec v[2] = { { buf, 512, 0 }, { buf, 512, 1024 } };
	cr_expect_eq(bch_dev_write_batch(dev, v, 2), -EIO);
	cr_expect_eq(r.nr, 3, "the failing batch stops at its first write");
	cr_expect_eq(bch_dev_discard(dev, 0, 65536), 0);	/* skipped under a hook */
	bch_dev_close(dev);

	after = slurp(path, &alen);
	cr_assert_eq(alen, blen);
	cr_expect_arr_eq(after, before, blen, "a refused write reached the file");
	free(before);
	free(after);
}

/*
 * Uncached (O_DIRECT) reads, the read-ahead's (fs_read.h), stand aside
 * while a test hook is set: the device's reads all go the usual way then,
 * where a hook on reads would see them; they come back when it is cleared.
 */
Test(blockdev, hook_turns_uncached_reads_away)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	struct rec r;
	void *buf = bch_dev_alloc_buf(4096);
	struct iovec iov = { buf, 4096 };

	cr_assert(buf);
	make_file(path, 65536, 8);
	dev = open_ok(path, 0);
	cr_assert(bch_dev_uncached_ok(dev), "%s: no O_DIRECT reads here", path);
	cr_assert_eq(bch_dev_readv_uncached(dev, &iov, 1, 8192), 0);

	set_rec(dev, &r, UINT32_MAX, 0);
	cr_expect(!bch_dev_uncached_ok(dev), "uncached reads with a hook set");
	cr_expect_eq(bch_dev_readv_uncached(dev, &iov, 1, 8192), -EOPNOTSUPP);
	cr_expect_eq(bch_dev_read_try(dev, buf, 4096, 8192), 0);

	bch_dev_set_hook(dev, NULL);
	cr_expect(bch_dev_uncached_ok(dev));
	cr_expect_eq(bch_dev_readv_uncached(dev, &iov, 1, 8192), 0);
	bch_dev_close(dev);
	free(buf);
}

Test(blockdev, torn_write_writes_exact_prefix)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	char buf[4096], *before, *after;
	size_t blen, alen;
	struct rec r;

	make_file(path, 65536, 7);
	before = slurp(path, &blen);
	dev = open_ok(path, 0);
	set_rec(dev, &r, 0, 1000);

	fill(buf, sizeof(buf), 55);
	cr_expect_eq(bch_dev_write(dev, buf, sizeof(buf), 8192), -BCH_ERR_injected_fault);
	bch_dev_close(dev);

	after = slurp(path, &alen);
	cr_assert_eq(alen, blen);
	cr_expect_arr_eq(after, before, 8192);
	cr_expect_arr_eq(after + 8192, buf, 1000, "the prefix must be written");
	cr_expect_arr_eq(after + 9192, before + 9192, blen - 9192,
			 "nothing past the prefix may be written");
	free(before);
	free(after);
}

Test(blockdev, torn_batch_stops_at_the_tear)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	char b0[512], b1[512], b2[512], *before, *after;
	size_t blen, alen;
	struct rec r;

	make_file(path, 65536, 8);
	before = slurp(path, &blen);
	dev = open_ok(path, 0);
	set_rec(dev, &r, 1, 100);		/* tear the second write */
	fill(b0, 512, 1);
	fill(b1, 512, 2);
	fill(b2, 512, 3);
	struct bch_io_vec v[3] = { { b0, 512, 0 }, { b1, 512, 4096 }, { b2, 512, 8192 } };

	cr_expect_eq(bch_dev_write_batch(dev, v, 3), -BCH_ERR_injected_fault);
	cr_expect_eq(r.nr, 2, "the batch must stop at the torn write");
	bch_dev_close(dev);

	after = slurp(path, &alen);
	cr_assert_eq(alen, blen);
	cr_expect_arr_eq(after, b0, 512);
	cr_expect_arr_eq(after + 4096, b1, 100);
	cr_expect_arr_eq(after + 4196, before + 4196, 412);
	cr_expect_arr_eq(after + 8192, before + 8192, 512, "write after the tear reached the file");
	free(before);
	free(after);
}

/* -------------------------------------------------------------- batches */

/* nr vecs of varied sizes at disjoint offsets, data of seed; alloc'd buffers. */
static void make_vecs(struct bch_io_vec *v, unsigned nr, unsigned align, unsigned seed)
{
	uint64_t off = 0;

	for (unsigned i = 0; i < nr; i++) {
		size_t len = align * (1 + i % 5);

		if (align == 1)
			len = 100 + 37 * i;
		v[i].buf = bch_dev_alloc_buf(len);
		cr_assert(v[i].buf);
		v[i].len = len;
		v[i].offset = off;
		fill(v[i].buf, len, seed + i);
		off += len + align * (i % 3);	/* gaps, and out of order below */
	}
	/* Reverse half of them so submission order is not offset order. */
	for (unsigned i = 0; i < nr / 4; i++) {
		struct bch_io_vec t = v[i];

		v[i] = v[nr / 2 - 1 - i];
		v[nr / 2 - 1 - i] = t;
	}
}

static void free_vecs(struct bch_io_vec *v, unsigned nr)
{
	for (unsigned i = 0; i < nr; i++)
		free(v[i].buf);
}

/* Write v as a batch, read it back as a batch, compare. */
static void batch_round_trip(struct bch_blockdev *dev, struct bch_io_vec *v, unsigned nr)
{
	struct bch_io_vec *r = calloc(nr, sizeof(*r));

	cr_assert(r);
	cr_assert_eq(bch_dev_write_batch(dev, v, nr), 0);
	cr_assert_eq(bch_dev_flush(dev), 0);
	for (unsigned i = 0; i < nr; i++) {
		r[i] = v[i];
		r[i].buf = bch_dev_alloc_buf(v[i].len);
		cr_assert(r[i].buf);
	}
	cr_assert_eq(bch_dev_read_batch(dev, r, nr), 0);
	for (unsigned i = 0; i < nr; i++)
		cr_assert_arr_eq(r[i].buf, v[i].buf, v[i].len, "vec %u", i);
	free_vecs(r, nr);
	free(r);
}

Test(blockdev, batch_round_trip_file)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	struct bch_io_vec v[100];

	make_file(path, 4 << 20, 9);
	dev = open_ok(path, BCH_DEV_DIRECT);	/* ignored for files */

	make_vecs(v, 100, 4096, 20);
	batch_round_trip(dev, v, 100);
	free_vecs(v, 100);

	make_vecs(v, 100, 1, 40);		/* unaligned sizes are fine on files */
	batch_round_trip(dev, v, 100);

	/* A vec past the end fails the batch before anything is written. */
	v[50].offset = (4 << 20) - 10;
	cr_expect_eq(bch_dev_write_batch(dev, v, 100), -BCH_ERR_device_short_io);
	cr_expect_eq(bch_dev_read_batch(dev, v, 100), -BCH_ERR_device_short_io);
	free_vecs(v, 100);
	cr_expect_eq(bch_dev_read_batch(dev, NULL, 0), 0);
	bch_dev_close(dev);
}

Test(blockdev, discard_file_punches_hole)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	char zero[8192] = { 0 }, *img;
	size_t len;

	make_file(path, 65536, 10);
	dev = open_ok(path, 0);
	cr_expect_eq(bch_dev_discard(dev, 8192, 8192), 0);
	cr_expect_eq(bch_dev_discard(dev, 60000, 1 << 20), 0);	/* clamped */
	cr_expect_eq(bch_dev_size(dev), 65536);
	bch_dev_close(dev);

	img = slurp(path, &len);
	cr_expect_eq(len, 65536, "discard must keep the size");
	cr_expect_arr_eq(img + 8192, zero, 8192);
	cr_expect_arr_eq(img + 60000, zero, 65536 - 60000);
	free(img);
}

Test(blockdev, alloc_buf_aligned_and_zeroed)
{
	unsigned char *p = bch_dev_alloc_buf(10000);

	cr_assert(p);
	cr_expect_eq((uintptr_t)p % 4096, 0);
	for (unsigned i = 0; i < 10000; i++)
		cr_assert_eq(p[i], 0);
	free(p);
}

/* ------------------------------------------------ counters and delay */

static void expect_stats(struct bch_blockdev *dev, uint64_t reads, uint64_t rbytes,
			 uint64_t writes, uint64_t wbytes, const char *when)
{
	struct bch_dev_io_stats s;

	bch_dev_io_stats(dev, &s);
	cr_expect(s.reads == reads && s.read_bytes == rbytes &&
		  s.writes == writes && s.write_bytes == wbytes,
		  "%s: reads %lu (%lu bytes), writes %lu (%lu bytes); expected "
		  "%lu (%lu), %lu (%lu)", when,
		  (unsigned long)s.reads, (unsigned long)s.read_bytes,
		  (unsigned long)s.writes, (unsigned long)s.write_bytes,
		  (unsigned long)reads, (unsigned long)rbytes,
		  (unsigned long)writes, (unsigned long)wbytes);
}

Test(blockdev, io_stats_count_what_reaches_the_device)
{
	const char *path = tmp_path("img");
	struct bch_blockdev *dev;
	char buf[8192];
	struct bch_io_vec v[30];
	uint64_t vbytes = 0;
	struct rec r;

	make_file(path, 4 << 20, 21);
	dev = open_ok(path, 0);
	expect_stats(dev, 0, 0, 0, 0, "fresh open");

	fill(buf, sizeof(buf), 3);
	cr_assert_eq(bch_dev_write(dev, buf, 4096, 0), 0);
	cr_assert_eq(bch_dev_write(dev, buf, 100, 9000), 0);
	cr_assert_eq(bch_dev_read(dev, buf, 8192, 4096), 0);
	cr_assert_eq(bch_dev_flush(dev), 0);				/* not counted */
	cr_expect_eq(bch_dev_read(dev, buf, 512, 4 << 20), -BCH_ERR_device_short_io);
	expect_stats(dev, 1, 8192, 2, 4196, "single requests");

	make_vecs(v, 30, 512, 80);
	for (unsigned i = 0; i < 30; i++)
		vbytes += v[i].len;
	batch_round_trip(dev, v, 30);				/* one request per vec */
	expect_stats(dev, 31, 8192 + vbytes, 32, 4196 + vbytes, "batches");

	/* A refused write counts nothing; a torn one counts its prefix. */
	set_rec(dev, &r, 0, -EIO);
	cr_expect_eq(bch_dev_write(dev, buf, 4096, 0), -EIO);
	cr_expect_eq(bch_dev_write_batch(dev, v, 30), -EIO);
	set_rec(dev, &r, 0, 1000);
	cr_expect_eq(bch_dev_write(dev, buf, 4096, 0), -BCH_ERR_injected_fault);
	expect_stats(dev, 31, 8192 + vbytes, 33, 5196 + vbytes, "hooked writes");

	/* A read-only handle refuses writes before they reach the file. */
	struct bch_blockdev *ro = open_ok(path, BCH_DEV_RDONLY);
	cr_expect_eq(bch_dev_write(ro, buf, 512, 0), -EROFS);
	cr_assert_eq(bch_dev_read(ro, buf, 512, 0), 0);
	expect_stats(ro, 1, 512, 0, 0, "read-only handle (counters are per handle)");
	bch_dev_close(ro);
	free_vecs(v, 30);
	bch_dev_close(dev);
}

static struct bch_dev_io_stats closed_stats;
static unsigned closed_nr;

static void on_close(const struct bch_blockdev *dev)
{
	bch_dev_io_stats(dev, &closed_stats);
	closed_nr++;
}

Test(blockdev, on_close_sees_the_final_counters)
{
	struct bch_blockdev *dev;
	char buf[4096] = { 1 }, path[256];

	snprintf(path, sizeof(path), "%s", tmp_path("img"));
	make_file(path, 65536, 22);
	bch_dev_on_close(on_close);
	dev = open_ok(path, 0);
	cr_assert_eq(bch_dev_write(dev, buf, sizeof(buf), 0), 0);
	cr_assert_eq(bch_dev_write(dev, buf, 512, 8192), 0);
	cr_assert_eq(bch_dev_read(dev, buf, 1024, 0), 0);
	bch_dev_close(dev);
	cr_expect_eq(closed_nr, 1);
	cr_expect(closed_stats.writes == 2 && closed_stats.write_bytes == 4608 &&
		  closed_stats.reads == 1 && closed_stats.read_bytes == 1024);

	/* a failed open is no device: no call */
	cr_assert_neq(bch_dev_open(tmp_path("missing"), 0, &dev), 0);
	bch_dev_on_close(NULL);
	dev = open_ok(path, 0);
	bch_dev_close(dev);
	cr_expect_eq(closed_nr, 1, "cleared, or called for a failed open");
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Microseconds that reads reads of 4 KiB (one call each) take on dev. */
static uint64_t time_reads(struct bch_blockdev *dev, unsigned reads)
{
	char buf[4096];
	uint64_t t0 = mono_us();

	for (unsigned i = 0; i < reads; i++)
		cr_assert_eq(bch_dev_read(dev, buf, sizeof(buf), i * 4096), 0);
	return mono_us() - t0;
}

#define DELAY_US	20000

Test(blockdev, delay_applies_to_the_named_device_only)
{
	char slow[256], fast[256], spec[700], link[256], dotted[300];
	struct bch_blockdev *s, *f, *l;
	struct bch_io_vec v[4];
	uint64_t t0, us;

	snprintf(slow, sizeof(slow), "%s", tmp_path("slow.img"));
	snprintf(fast, sizeof(fast), "%s", tmp_path("fast.img"));
	snprintf(link, sizeof(link), "%s", tmp_path("link.img"));
	make_file(slow, 65536, 23);
	make_file(fast, 65536, 24);
	cr_assert_eq(symlink(slow, link), 0);
	/* named with "/./" in the variable, opened by a symlink: same realpath */
	snprintf(dotted, sizeof(dotted), "%s/./slow.img", tmpdir);
	snprintf(spec, sizeof(spec), "%s=%u,/nonexistent/x.img=7", dotted, DELAY_US);
	cr_assert_eq(setenv(BCH_DEV_DELAY_ENV, spec, 1), 0);
	fprintf(stderr, "blockdev/delay: %s=%s\n", BCH_DEV_DELAY_ENV, spec);

	s = open_ok(slow, 0);
	f = open_ok(fast, 0);
	cr_expect_eq(bch_dev_delay_us(s), DELAY_US);
	cr_expect_eq(bch_dev_delay_us(f), 0, "a device not named is delayed");

	/* sleeping is a lower bound whatever the machine's load */
	us = time_reads(s, 5);
	cr_expect_geq(us, 5 * DELAY_US, "5 delayed reads took %lu us", (unsigned long)us);

	/* writes too, and every vec of a batch (not one sleep per batch) */
	char buf[512] = { 9 };
	t0 = mono_us();
	cr_assert_eq(bch_dev_write(s, buf, sizeof(buf), 0), 0);
	make_vecs(v, 4, 512, 90);
	cr_assert_eq(bch_dev_write_batch(s, v, 4), 0);
	cr_assert_eq(bch_dev_read_batch(s, v, 4), 0);
	us = mono_us() - t0;
	cr_expect_geq(us, 9 * DELAY_US, "9 delayed requests took %lu us", (unsigned long)us);
	expect_stats(s, 9, 5 * 4096 + 512 * (1 + 2 + 3 + 4), 5, 512 + 512 * (1 + 2 + 3 + 4),
		     "delayed device");
	free_vecs(v, 4);
	bch_dev_close(s);

	/* the same file by another name: realpath matches */
	l = open_ok(link, 0);
	cr_expect_eq(bch_dev_delay_us(l), DELAY_US, "matched by realpath");
	bch_dev_close(l);

	/* the exact string given to the open matches too, even if it is not a file yet */
	snprintf(spec, sizeof(spec), "%s=5", tmp_path("new.img"));
	cr_assert_eq(setenv(BCH_DEV_DELAY_ENV, spec, 1), 0);
	l = open_ok(tmp_path("new.img"), BCH_DEV_CREATE);
	cr_expect_eq(bch_dev_delay_us(l), 5);
	bch_dev_close(l);
	bch_dev_close(f);
	unsetenv(BCH_DEV_DELAY_ENV);
}

Test(blockdev, flush_delay_slows_flushes_only)
{
	char slow[256], spec[300];
	struct bch_blockdev *s;
	char buf[512] = { 7 };
	uint64_t us;

	snprintf(slow, sizeof(slow), "%s", tmp_path("slowflush.img"));
	make_file(slow, 65536, 25);
	snprintf(spec, sizeof(spec), "%s=%u", slow, DELAY_US);
	cr_assert_eq(setenv(BCH_DEV_FLUSH_DELAY_ENV, spec, 1), 0);
	fprintf(stderr, "blockdev/flush_delay: %s=%s\n", BCH_DEV_FLUSH_DELAY_ENV, spec);
	s = open_ok(slow, 0);
	cr_expect_eq(bch_dev_delay_us(s), 0, "reads and writes are not delayed");

	/* a flush after a write reaches the device and sleeps (a lower bound) */
	cr_assert_eq(bch_dev_write(s, buf, sizeof(buf), 0), 0);
	uint64_t t0 = mono_us();
	cr_assert_eq(bch_dev_flush(s), 0);
	us = mono_us() - t0;
	cr_expect_geq(us, DELAY_US, "a flush after a write took %lu us", (unsigned long)us);
	bch_dev_close(s);

	/* a malformed value fails the open, as the request delay's does */
	cr_assert_eq(setenv(BCH_DEV_FLUSH_DELAY_ENV, "x.img=fast", 1), 0);
	cr_expect_eq(bch_dev_open(slow, 0, &s), -BCH_ERR_device_delay_spec);
	unsetenv(BCH_DEV_FLUSH_DELAY_ENV);
}

Test(blockdev, delay_spec_malformed_fails_every_open)
{
	const char *bad[] = {
		"noequals", "=5", "x.img=", "x.img=abc", "x.img=5us", "x.img=-1",
		"x.img=10000001", "x.img=99999999999999999999999", "a.img=1,junk",
	};
	struct bch_blockdev *dev;
	const char *path = tmp_path("img");

	make_file(path, 65536, 25);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(setenv(BCH_DEV_DELAY_ENV, bad[i], 1), 0);
		cr_expect_eq(bch_dev_open(path, 0, &dev), -BCH_ERR_device_delay_spec,
			     "'%s' accepted", bad[i]);
		cr_expect_null(dev);
	}
	/* the largest delay, 10 s, and an empty variable are fine */
	cr_assert_eq(setenv(BCH_DEV_DELAY_ENV, "x.img=10000000", 1), 0);
	dev = open_ok(path, 0);
	cr_expect_eq(bch_dev_delay_us(dev), 0);
	bch_dev_close(dev);
	cr_assert_eq(setenv(BCH_DEV_DELAY_ENV, "", 1), 0);
	dev = open_ok(path, 0);
	bch_dev_close(dev);
	unsetenv(BCH_DEV_DELAY_ENV);
}

/* ----------------------------------------------------------- loop device */

static char loopdev[64];	/* attached by the test, detached by the fixture */

static void loop_teardown(void)
{
	char cmd[128];

	if (loopdev[0]) {
		snprintf(cmd, sizeof(cmd), "losetup -d %s", loopdev);
		if (system(cmd))
			fprintf(stderr, "blockdev: could not detach %s\n", loopdev);
		loopdev[0] = 0;
	}
	teardown();
}

/* Attach path to a free loop device; returns false (and why) on failure. */
static bool loop_attach(const char *path, char *why, size_t whylen)
{
	char cmd[300];
	FILE *f;
	int status;

	snprintf(cmd, sizeof(cmd), "losetup --find --show %s 2>&1", path);
	f = popen(cmd, "r");
	if (!f) {
		snprintf(why, whylen, "popen: %s", strerror(errno));
		return false;
	}
	if (!fgets(loopdev, sizeof(loopdev), f))
		loopdev[0] = 0;
	status = pclose(f);
	loopdev[strcspn(loopdev, "\n")] = 0;
	if (status || strncmp(loopdev, "/dev/", 5)) {
		snprintf(why, whylen, "losetup failed: %s", loopdev);
		loopdev[0] = 0;
		return false;
	}
	return true;
}

/* Past the batch's vecs (about 2.5 MiB), not block aligned. */
#define BOUNCE_OFF	((5 << 20) + 1000)
#define BOUNCE_OFF2	((5 << 20) + 8192)

Test(blockdev, loop_device_direct_batches, .fini = loop_teardown)
{
	const char *path = tmp_path("loop.img");
	struct bch_blockdev *dev, *other;
	struct bch_io_vec v[150];
	char why[300], buf[700], buf2[1025], back[1025], *img, *orig;
	size_t len;

	if (geteuid()) {
		fprintf(stderr, "blockdev/loop_device_direct_batches: skipped: not root\n");
		loop_teardown();	/* a skipped test gets no .fini */
		cr_skip_test("not root: cannot attach a loop device");
	}
	make_file(path, 8 << 20, 11);
	if (!loop_attach(path, why, sizeof(why))) {
		fprintf(stderr, "blockdev/loop_device_direct_batches: skipped: %s\n", why);
		loop_teardown();
		cr_skip_test("%s", why);
	}
	orig = slurp(path, &len);

	dev = open_ok(loopdev, BCH_DEV_DIRECT);
	cr_expect(bch_dev_is_blockdev(dev));
	cr_expect_eq(bch_dev_size(dev), 8 << 20);
	unsigned lbs = bch_dev_logical_block_size(dev);
	cr_expect(lbs >= 512 && !(lbs & (lbs - 1)), "logical block size %u", lbs);
	cr_expect(fcntl(bch_dev_fd(dev), F_GETFL) & O_DIRECT);

	cr_expect_eq(bch_dev_open(loopdev, 0, &other), -BCH_ERR_device_busy,
		     "O_EXCL must keep a second writer out");
	other = open_ok(loopdev, BCH_DEV_RDONLY);
	bch_dev_close(other);
	cr_expect_eq(bch_dev_set_size(dev, 1 << 20), -ENOTTY);

	/* More vecs than one libaio chunk, aligned: the libaio path. */
	make_vecs(v, 150, 4096, 60);
	batch_round_trip(dev, v, 150);

	/* Unaligned buffer, offset and length: the bounce path. */
	fill(buf, sizeof(buf), 66);
	cr_assert_eq(bch_dev_write(dev, buf + 1, 699, BOUNCE_OFF), 0);
	cr_assert_eq(bch_dev_read(dev, back + 3, 699, BOUNCE_OFF), 0);
	cr_assert_arr_eq(back + 3, buf + 1, 699);

	/* Aligned offset and length from an unaligned buffer: bounce, no read. */
	fill(buf2, sizeof(buf2), 67);
	cr_assert_eq(bch_dev_write(dev, buf2 + 1, 1024, BOUNCE_OFF2), 0);
	cr_assert_eq(bch_dev_read(dev, back + 1, 1024, BOUNCE_OFF2), 0);
	cr_assert_arr_eq(back + 1, buf2 + 1, 1024);

	cr_assert_eq(bch_dev_flush(dev), 0);
	cr_expect_eq(bch_dev_read(dev, back, 512, 8 << 20), -BCH_ERR_device_short_io);
	cr_expect_eq(bch_dev_discard(dev, 6 << 20, 1 << 20), 0);

	/* the libaio and bounce paths count like the others: a request per vec */
	uint64_t vbytes = 0;
	for (unsigned i = 0; i < 150; i++)
		vbytes += v[i].len;
	expect_stats(dev, 152, vbytes + 699 + 1024, 152, vbytes + 699 + 1024, "loop device");
	bch_dev_close(dev);

	/* The backing file saw exactly those writes. */
	img = slurp(path, &len);
	for (unsigned i = 0; i < 150; i++)
		cr_assert_arr_eq(img + v[i].offset, v[i].buf, v[i].len, "file vec %u", i);
	cr_expect_arr_eq(img + BOUNCE_OFF, buf + 1, 699);
	cr_expect_arr_eq(img + BOUNCE_OFF2, buf2 + 1, 1024);
	cr_expect_arr_eq(img + BOUNCE_OFF - 1, orig + BOUNCE_OFF - 1, 1,
			 "byte before the bounce write changed");
	cr_expect_arr_eq(img + BOUNCE_OFF + 699, orig + BOUNCE_OFF + 699, 1,
			 "byte after the bounce write changed");
	free(orig);
	free_vecs(v, 150);
	free(img);
}
