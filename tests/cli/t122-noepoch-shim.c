/* t122: LD_PRELOAD into the daemon, a kernel before Linux 6.16: its FUSE_NOTIFY_INC_EPOCH (8) write refused with EINVAL, as such a kernel does (fuse_notify(): unknown code) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
ssize_t write(int fd, const void *buf, size_t n)
{
	static ssize_t (*real)(int, const void *, size_t);
	if (n == 16) {
		uint32_t len; int32_t err; uint64_t uniq;
		memcpy(&len, buf, 4); memcpy(&err, (const char *)buf + 4, 4); memcpy(&uniq, (const char *)buf + 8, 8);
		if (len == 16 && err == 8 && uniq == 0) { errno = EINVAL; return -1; }
	}
	if (!real) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	return real(fd, buf, n);
}
