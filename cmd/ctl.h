/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CTL_H
#define _BCACHEFS_CTL_H

/*
 * ctl.h - the control channel between commands and a fusemount daemon.
 * (Design and wire format: ctl.c's header comment and bcachefs(8).)
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Client: send the command line argv (a body's argv, cmd_ctx.h) of command
 * cmd to the daemon serving mountpoint mnt, relay its output to our
 * stdout/stderr until it ends, and return its exit code.  Ctrl-C asks the
 * daemon to stop the job at a safe point; losing the connection otherwise
 * leaves the job running.
 */
int ctl_forward(const char *cmd, const char *mnt, int argc, char **argv);

/* ---- wire format (ctl.c) */

#define CTL_VERSION	1
#define CTL_XATTR	"bcachefs.ctl"	/* the mountpoint root's xattr: the socket path */

enum ctl_msg {
	CTL_REQUEST	= 1,	/* client: u32 version, u32 flags, u32 argc, argc strings */
	CTL_CANCEL	= 2,	/* client: empty */
	CTL_STDOUT	= 3,	/* daemon: bytes for the client's stdout */
	CTL_STDERR	= 4,	/* daemon: bytes for the client's stderr */
	CTL_EXIT	= 5,	/* daemon: u32 exit code; the last message */
};

#define CTL_HDR_BYTES	8		/* u32 type, u32 payload length (little-endian) */
#define CTL_MAX_PAYLOAD	(64U << 10)	/* any message */
#define CTL_MAX_ARGS	256		/* argc of a request */
#define CTL_MAX_ARG	4096		/* bytes of one argument, its NUL included */
#define CTL_FLAG_TTY	1U		/* request flags: the client's stdout is a terminal */

/*
 * Send one message (MSG_NOSIGNAL: a client that went away is an error, not
 * a signal).  0 or -errno.
 */
int ctl_send(int fd, uint32_t type, const void *buf, size_t len);
/*
 * Receive one message into buf (max bytes).  0 and *type, *len; -EPROTO when
 * the header announces more than max (the rest is not read: the stream
 * cannot be trusted any more), -ECONNRESET at end of stream (also in the
 * middle of a message), -errno otherwise (-EAGAIN: timeout).
 */
int ctl_recv(int fd, uint32_t *type, void *buf, size_t max, size_t *len);

/* ---- daemon side (ctl_server.c) */

struct bch_fs;
struct bch_opts;
struct cmd_ctx;

/* What the daemon lends to the bodies it runs (cmd_ctx.h). */
struct ctl_daemon {
	const char	*mnt;		/* the mountpoint, for messages */
	struct bch_fs	**cp;
	char		***devs;
	unsigned	*nr_devs;
	const struct bch_opts *open_opts;
	void		(*lock)(struct cmd_ctx *x);
	void		(*unlock)(struct cmd_ctx *x);
	void		*priv;		/* cmd_ctx.priv */
};

struct ctl_server;

/*
 * Create the socket (ctl.c: where), start the listener thread.  Returns 0
 * and *s, or -errno with a message in err.  Call after daemonizing.
 */
int ctl_server_start(const struct ctl_daemon *d, struct ctl_server **s, char *err, size_t len);
/* The socket's path (for getxattr CTL_XATTR on the mountpoint's root). */
const char *ctl_server_path(const struct ctl_server *s);
/*
 * Unmounting: stop accepting, cancel running jobs and wait for them to end
 * (their clients get their exit codes), remove the socket, free s.
 */
void ctl_server_stop(struct ctl_server *s);


#endif /* _BCACHEFS_CTL_H */
