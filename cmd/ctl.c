// SPDX-License-Identifier: GPL-2.0
/*
 * ctl.c - the control channel between commands and a fusemount daemon
 * (ctl.h): the wire format, the client (ctl_forward) and, until fsname.c
 * is merged, the fronts' naming of a filesystem.  The daemon's side is
 * ctl_server.c.
 *
 * Where
 *   A unix stream socket per mounted filesystem, created by the daemon once
 *   it runs in the background:
 *     root:      /run/bcachefs/fusemount-PID.sock (directory 0755, socket
 *                0666: anyone may connect; rights are checked per request)
 *     otherwise: $XDG_RUNTIME_DIR/bcachefs/fusemount-PID.sock, or without
 *                it /tmp/bcachefs-UID/fusemount-PID.sock (directory 0700,
 *                owned by the user: refused otherwise)
 *   A client finds it with getxattr(MOUNTPOINT, "bcachefs.ctl"), which the
 *   daemon answers on its root directory (like "bcachefs.usage.json").
 *   Unmount removes the socket; one left by a killed daemon (nothing
 *   listens: ECONNREFUSED) is removed by the next daemon that starts.
 *
 * Messages (all integers little-endian)
 *   OFFSET SIZE DESCRIPTION
 *   0      4    type (enum ctl_msg)
 *   4      4    payload length, at most CTL_MAX_PAYLOAD (64 KiB)
 *   8      len  payload
 *   client -> daemon
 *     1 REQUEST  u32 version (1), u32 flags (bit 0: the client's stdout is a
 *                terminal; other bits must be 0), u32 argc (1..256), then
 *                argc NUL-terminated strings filling the payload exactly,
 *                each at most 4096 bytes: the body's argv (cmd_ctx.h),
 *                argv[0] the command name ("data rebalance"), which must be
 *                in cmd_ctl_cmds[].  The first message, within 10 s.
 *     2 CANCEL   empty: stop the job at its next safe point (Ctrl-C).
 *   daemon -> client
 *     3 STDOUT, 4 STDERR  bytes to write to the client's stdout / stderr.
 *     5 EXIT     u32 exit code; the last message, then the daemon closes.
 *
 * Invariants
 *   (1) Everything a client sends is untrusted: a header announcing more
 *       than 64 KiB, an unknown type, a truncated message, a request whose
 *       counts, strings or flags do not add up, an unknown command or
 *       version get a STDERR message and EXIT 16 (usage error), and the
 *       connection is closed; the daemon goes on serving.
 *   (2) Rights come from the socket (SO_PEERCRED), never from the request:
 *       a command whose table entry `changes` the filesystem runs for root,
 *       or for the uid that runs the daemon when that uid owns every member
 *       device; anyone else gets EXIT 1 and nothing runs.  Read-only
 *       commands run for anyone who can reach the socket.
 *   (3) A job outlives its client: once the client is gone (a send to it
 *       fails, or it takes no output for 5 s) output is dropped and the job
 *       runs to its end.  Only CANCEL stops it early.
 *   (4) At most one job that changes the filesystem at a time; another is
 *       refused with "busy: COMMAND is running" (EXIT 1).
 *   (5) Unmount cancels running jobs and waits for them before the
 *       filesystem is closed.
 *
 * The client (ctl_forward) relays until EXIT; on SIGINT it sends CANCEL and
 * keeps relaying (the daemon stops at a point a rerun resumes from; a second
 * SIGINT ends the client at once); when the stream ends without EXIT it says
 * the daemon went away (exit 1).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "cmds.h"
#include "ctl.h"
#include "fsname.h"

/* ------------------------------------------------------------ wire */

static void put_u32(unsigned char *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static uint32_t get_u32(const unsigned char *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= n;
	}
	return 0;
}

static int recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		if (!n)
			return -ECONNRESET;
		p += n;
		len -= n;
	}
	return 0;
}

int ctl_send(int fd, uint32_t type, const void *buf, size_t len)
{
	unsigned char hdr[CTL_HDR_BYTES];
	int r;

	if (len > CTL_MAX_PAYLOAD)
		return -EMSGSIZE;
	put_u32(hdr, type);
	put_u32(hdr + 4, len);
	if ((r = send_all(fd, hdr, sizeof(hdr))))
		return r;
	return len ? send_all(fd, buf, len) : 0;
}

int ctl_recv(int fd, uint32_t *type, void *buf, size_t max, size_t *len)
{
	unsigned char hdr[CTL_HDR_BYTES];
	int r;

	if ((r = recv_all(fd, hdr, sizeof(hdr))))
		return r;
	*type = get_u32(hdr);
	*len = get_u32(hdr + 4);
	if (*len > max)
		return -EPROTO;
	return *len ? recv_all(fd, buf, *len) : 0;
}

/* ------------------------------------------------------------ client */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int connect_to(const char *cmd, const char *mnt, int *fd)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	ssize_t n = getxattr(mnt, CTL_XATTR, path, sizeof(path) - 1);

	if (n < 0) {
		cmd_err(cmd, "%s: cannot find the daemon's control channel (%s): not a bcachefs "
			"mount, or its daemon runs without one", mnt, strerror(errno));
		return EXIT_FAIL;
	}
	path[n] = 0;

	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0 || connect(*fd, (struct sockaddr *)&sa, sizeof(sa))) {
		cmd_err(cmd, "%s: cannot reach the daemon at %s: %s", mnt, path, strerror(errno));
		if (*fd >= 0)
			close(*fd);
		return EXIT_FAIL;
	}
	return 0;
}

static int send_request(int fd, int argc, char **argv, bool tty)
{
	size_t len = 12;
	int r;

	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	if (len > CTL_MAX_PAYLOAD || argc > CTL_MAX_ARGS)
		return -E2BIG;

	unsigned char *p = malloc(len), *q = p + 12;
	if (!p)
		abort();
	put_u32(p, CTL_VERSION);
	put_u32(p + 4, tty ? CTL_FLAG_TTY : 0);
	put_u32(p + 8, argc);
	for (int i = 0; i < argc; i++) {
		size_t l = strlen(argv[i]) + 1;
		memcpy(q, argv[i], l);
		q += l;
	}
	r = ctl_send(fd, CTL_REQUEST, p, len);
	free(p);
	return r;
}

/* Relay the daemon's messages until EXIT; the exit code. */
static int relay(const char *cmd, const char *mnt, int fd, const struct sigaction *old_int)
{
	static char buf[CTL_MAX_PAYLOAD];
	bool cancelled = false;

	for (;;) {
		if (interrupted && !cancelled) {
			cancelled = true;
			fflush(stdout);
			fprintf(stderr, "\nbcachefs %s: %s: interrupted: asking the daemon to stop at "
				"a safe point (Ctrl-C again: stop waiting)\n", cmd, mnt);
			/* a second Ctrl-C ends the client; the job stops all the same */
			sigaction(SIGINT, old_int, NULL);
			if (ctl_send(fd, CTL_CANCEL, NULL, 0))
				break;
		}
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}

		uint32_t type;
		size_t len;
		int r = ctl_recv(fd, &type, buf, sizeof(buf), &len);
		if (r == -EINTR)
			continue;
		if (r)
			break;
		switch (type) {
		case CTL_STDOUT:
			fwrite(buf, 1, len, stdout);
			fflush(stdout);
			break;
		case CTL_STDERR:
			fflush(stdout);
			fwrite(buf, 1, len, stderr);
			break;
		case CTL_EXIT:
			if (len == 4)
				return get_u32((unsigned char *)buf) & 0xff;
			/* fall through */
		default:
			cmd_err(cmd, "%s: the daemon sent a bad message (type %u, %zu bytes)", mnt,
				type, len);
			return EXIT_FAIL;
		}
	}
	fflush(stdout);
	cmd_err(cmd, "%s: the daemon went away before the command finished (unmounted, or "
		"killed); run the command again to see where it stands", mnt);
	return EXIT_FAIL;
}

int ctl_forward(const char *cmd, const char *mnt, int argc, char **argv)
{
	int fd, ret;

	if ((ret = connect_to(cmd, mnt, &fd)))
		return ret;
	if ((ret = send_request(fd, argc, argv, isatty(STDOUT_FILENO)))) {
		cmd_err(cmd, "%s: sending the command to the daemon: %s", mnt,
			ret == -E2BIG ? "command line too long" : strerror(-ret));
		close(fd);
		return ret == -E2BIG ? EXIT_USAGE : EXIT_FAIL;
	}

	struct sigaction sa = { .sa_handler = on_sigint }, old_int;
	sigemptyset(&sa.sa_mask);
	interrupted = 0;
	sigaction(SIGINT, &sa, &old_int);
	ret = relay(cmd, mnt, fd, &old_int);
	sigaction(SIGINT, &old_int, NULL);
	close(fd);
	return ret;
}

