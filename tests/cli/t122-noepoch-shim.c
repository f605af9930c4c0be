/*
 * t122: preloaded (LD_PRELOAD) into the daemon.
 *   T122_NOEPOCH=1: a kernel before Linux 6.16: the daemon's
 *     FUSE_NOTIFY_INC_EPOCH (8) is refused with EINVAL, as such a kernel's
 *     fuse_notify() refuses a code it does not know.
 *   T122_ENTRY_DELAY_US=N: each FUSE_NOTIFY_INVAL_ENTRY (3) leaves N us
 *     late, as when the notifying thread is descheduled right after its
 *     reply (seen unforced: up to 131 of 300 in a round on a loaded host,
 *     0 in others); with the epoch working it must change nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

struct out_header {
	uint32_t	len;
	int32_t		error;	/* a notice's code */
	uint64_t	unique;	/* 0: a notice */
};

static int notice_code(const void *buf, size_t n)
{
	struct out_header h;

	if (n < sizeof(h))
		return -1;
	memcpy(&h, buf, sizeof(h));
	return h.unique ? -1 : h.error;
}

ssize_t write(int fd, const void *buf, size_t n)
{
	static ssize_t (*real)(int, const void *, size_t);

	if (!real)
		real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	if (n == sizeof(struct out_header) && notice_code(buf, n) == 8 && getenv("T122_NOEPOCH")) {
		errno = EINVAL;
		return -1;
	}
	return real(fd, buf, n);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	static ssize_t (*real)(int, const struct iovec *, int);
	const char *d = getenv("T122_ENTRY_DELAY_US");

	if (!real)
		real = (ssize_t (*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
	if (cnt > 0 && d && notice_code(iov[0].iov_base, iov[0].iov_len) == 3)
		usleep(atoi(d));
	if (cnt > 0 && notice_code(iov[0].iov_base, iov[0].iov_len) == 8 && getenv("T122_NOEPOCH")) {
		errno = EINVAL;
		return -1;
	}
	return real(fd, iov, cnt);
}
