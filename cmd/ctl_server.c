// SPDX-License-Identifier: GPL-2.0
/*
 * ctl_server.c - the daemon's side of the control channel (ctl.h; the
 * design and wire format are in ctl.c's header comment).
 *
 * Threads
 *   - the listener: accepts connections (at most CTL_MAX_CONNS at once, of
 *     them CTL_MAX_CONNS_OTHER per user other than root and the owner, so
 *     one user cannot shut the others out; more are told so and closed) and
 *     starts a connection thread for each;
 *   - a connection thread: reads and validates the request (ctl.c,
 *     invariant 1), checks the rights (2) and the one-changing-job rule
 *     (4), starts the body thread, then reads the client's messages
 *     (CANCEL) until the stream ends, joins the body and frees the
 *     connection;
 *   - a body thread: runs the command body (cmd_ctx.h) with out/err streams
 *     that frame what is printed to the client (fopencookie), sends EXIT,
 *     and shuts the socket down, which ends the connection thread's read.
 *
 * Locking: srv->lock guards conns[], nr_conns, busy and stopping.  A
 * connection's output (backlog) is written by one thread at a time: the
 * connection thread before the body starts, the body thread after; it never
 * blocks a body, which may hold the engine lock (flush()).  `cancel` is set
 * by the connection thread and by ctl_server_stop().  The engine is reached
 * only through the daemon's lock()/unlock() (struct ctl_daemon).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cmd_ctx.h"
#include "cmds.h"
#include "ctl.h"

#define CTL_MAX_CONNS		32
#define CTL_MAX_CONNS_OTHER	4	/* of one uid that is neither root nor the owner */
#define CTL_REQ_TIMEOUT_S	10	/* for the request to arrive */
#define CTL_SEND_TIMEOUT_S	5	/* a client that takes no output this long is gone */
#define CTL_BACKLOG_MAX		(1U << 20)	/* output waiting for a slow client */

struct ctl_conn {
	struct ctl_server *srv;
	int		fd;
	uid_t		uid;		/* SO_PEERCRED */
	bool		running;	/* the body thread was started */
	volatile int	cancel;		/* cmd_ctx.cancel */
	atomic_bool	gone;		/* output is dropped */
	char		*backlog;	/* frames not sent yet (one writer at a time) */
	size_t		blen, bcap;
	const struct cmd_ctl_cmd *cmd;
	char		*payload;	/* the request; argv points into it */
	char		**argv;
	int		argc;
	bool		tty;
	pthread_t	body;
};

struct ctl_server {
	struct ctl_daemon d;
	char		path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int		lfd;
	int		wake[2];	/* a byte here stops the listener */
	pthread_t	listener;
	uid_t		owner;		/* the daemon's uid: who mounted */
	pthread_mutex_t	lock;
	pthread_cond_t	cond;		/* nr_conns went down */
	bool		stopping;
	unsigned	nr_conns;
	struct ctl_conn	*conns[CTL_MAX_CONNS];
	const char	*busy;		/* the changing job that runs, or NULL */
};

/* ------------------------------------------------------------ output */

/*
 * Output never blocks the body, which may hold the engine lock: frames
 * queue in c->backlog and go out as the socket takes them (MSG_DONTWAIT).
 * A client that lets more than CTL_BACKLOG_MAX pile up, or whose socket
 * errors, is gone (invariant 3).  Only the EXIT, sent when the body has
 * returned (no lock held), waits for the client, up to CTL_SEND_TIMEOUT_S.
 */
static void flush(struct ctl_conn *c, bool wait)
{
	size_t sent = 0;

	while (sent < c->blen && !atomic_load(&c->gone)) {
		ssize_t n = send(c->fd, c->backlog + sent, c->blen - sent,
				 MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
		if (n > 0)
			sent += n;
		else if (n < 0 && errno == EINTR)
			continue;
		else if (n < 0 && errno == EAGAIN && !wait)
			break;
		else
			atomic_store(&c->gone, true);	/* error, or SO_SNDTIMEO */
	}
	if (atomic_load(&c->gone))
		sent = c->blen;
	memmove(c->backlog, c->backlog + sent, c->blen - sent);
	c->blen -= sent;
}

static void queue(struct ctl_conn *c, uint32_t type, const char *buf, size_t len)
{
	unsigned char hdr[CTL_HDR_BYTES] = {
		type, type >> 8, type >> 16, type >> 24, len, len >> 8, len >> 16, len >> 24
	};

	if (c->blen + sizeof(hdr) + len > CTL_BACKLOG_MAX) {
		atomic_store(&c->gone, true);
		c->blen = 0;
	}
	if (atomic_load(&c->gone))
		return;
	if (c->blen + sizeof(hdr) + len > c->bcap) {
		size_t ncap = c->bcap ? c->bcap : 4096;
		while (ncap < c->blen + sizeof(hdr) + len)
			ncap *= 2;
		if (!(c->backlog = realloc(c->backlog, ncap)))
			abort();
		c->bcap = ncap;
	}
	memcpy(c->backlog + c->blen, hdr, sizeof(hdr));
	memcpy(c->backlog + c->blen + sizeof(hdr), buf, len);
	c->blen += sizeof(hdr) + len;
}

static void conn_out(struct ctl_conn *c, uint32_t type, const char *buf, size_t len)
{
	for (size_t off = 0; off < len; off += CTL_MAX_PAYLOAD)
		queue(c, type, buf + off, len - off < CTL_MAX_PAYLOAD ? len - off : CTL_MAX_PAYLOAD);
	flush(c, false);
}

static ssize_t out_write(void *cookie, const char *buf, size_t len)
{
	conn_out(cookie, CTL_STDOUT, buf, len);
	return len;
}

static ssize_t err_write(void *cookie, const char *buf, size_t len)
{
	conn_out(cookie, CTL_STDERR, buf, len);
	return len;
}

/* The last message; waits (bounded) until everything has gone out. */
static void conn_exit(struct ctl_conn *c, int code)
{
	char b[4] = { code, code >> 8, code >> 16, code >> 24 };

	queue(c, CTL_EXIT, b, sizeof(b));
	flush(c, true);
}

/* A refusal before the body runs: a message and the exit code. */
__attribute__((format(printf, 3, 4)))
static void conn_refuse(struct ctl_conn *c, int code, const char *fmt, ...)
{
	char msg[1024];
	int n = snprintf(msg, sizeof(msg), "bcachefs %s: %s: ", c->cmd ? c->cmd->name : "ctl",
			 c->srv->d.mnt);
	va_list args;

	va_start(args, fmt);
	if (n >= 0 && (size_t)n < sizeof(msg))
		n += vsnprintf(msg + n, sizeof(msg) - n, fmt, args);
	va_end(args);
	if (n < 0 || (size_t)n >= sizeof(msg) - 1)
		n = sizeof(msg) - 2;
	msg[n++] = '\n';
	conn_out(c, CTL_STDERR, msg, n);
	conn_exit(c, code);
}

/* ------------------------------------------------------------ requests */

static uint32_t le32(const char *p)
{
	const unsigned char *u = (const unsigned char *)p;

	return u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

/* Read and check the request (ctl.c, invariant 1); 0 or the exit code after a reply. */
static int read_request(struct ctl_conn *c)
{
	uint32_t type;
	size_t len;
	int r;

	c->payload = malloc(CTL_MAX_PAYLOAD + 1);
	if (!c->payload)
		abort();
	r = ctl_recv(c->fd, &type, c->payload, CTL_MAX_PAYLOAD, &len);
	if (r == -EPROTO) {
		conn_refuse(c, EXIT_USAGE, "bad request: a message of %zu bytes (at most %u)", len,
			    CTL_MAX_PAYLOAD);
		return EXIT_USAGE;
	}
	if (r) {
		if (r == -EAGAIN)
			conn_refuse(c, EXIT_USAGE, "bad request: none within %d s", CTL_REQ_TIMEOUT_S);
		else
			conn_refuse(c, EXIT_USAGE, "bad request: %s",
				    r == -ECONNRESET ? "truncated" : strerror(-r));
		return EXIT_USAGE;
	}
	if (type != CTL_REQUEST) {
		conn_refuse(c, EXIT_USAGE, "bad request: message type %u where a request was expected",
			    type);
		return EXIT_USAGE;
	}
	if (len < 12) {
		conn_refuse(c, EXIT_USAGE, "bad request: %zu bytes, shorter than its header", len);
		return EXIT_USAGE;
	}

	uint32_t version = le32(c->payload), flags = le32(c->payload + 4), argc = le32(c->payload + 8);
	if (version != CTL_VERSION) {
		conn_refuse(c, EXIT_USAGE, "protocol version %u; this daemon speaks version %u "
			    "(is the bcachefs binary the same as the daemon's?)", version, CTL_VERSION);
		return EXIT_USAGE;
	}
	if (flags & ~CTL_FLAG_TTY) {
		conn_refuse(c, EXIT_USAGE, "bad request: unknown flags 0x%x", flags & ~CTL_FLAG_TTY);
		return EXIT_USAGE;
	}
	if (!argc || argc > CTL_MAX_ARGS) {
		conn_refuse(c, EXIT_USAGE, "bad request: %u arguments (1 to %u)", argc, CTL_MAX_ARGS);
		return EXIT_USAGE;
	}
	c->tty = flags & CTL_FLAG_TTY;
	c->argv = calloc(argc + 1, sizeof(char *));
	if (!c->argv)
		abort();

	char *p = c->payload + 12, *end = c->payload + len;
	for (uint32_t i = 0; i < argc; i++) {
		size_t room = end - p, l = strnlen(p, room < CTL_MAX_ARG ? room : CTL_MAX_ARG);
		if (l == room) {
			conn_refuse(c, EXIT_USAGE, "bad request: argument %u of %u is not NUL-terminated "
				    "within the message", i, argc);
			return EXIT_USAGE;
		}
		if (l == CTL_MAX_ARG) {
			conn_refuse(c, EXIT_USAGE, "bad request: argument %u longer than %u bytes", i,
				    CTL_MAX_ARG - 1);
			return EXIT_USAGE;
		}
		c->argv[i] = p;
		p += l + 1;
	}
	if (p != end) {
		conn_refuse(c, EXIT_USAGE, "bad request: %zu bytes after the last argument",
			    (size_t)(end - p));
		return EXIT_USAGE;
	}
	c->argc = argc;
	if (!(c->cmd = cmd_ctl_find(c->argv[0]))) {
		char name[64];
		size_t i;
		/* printable only: it is untrusted */
		for (i = 0; c->argv[0][i] && i < sizeof(name) - 1; i++)
			name[i] = c->argv[0][i] >= ' ' && c->argv[0][i] < 127 ? c->argv[0][i] : '?';
		name[i] = 0;
		conn_refuse(c, EXIT_USAGE, "bad request: '%s' is not a command the daemon runs", name);
		return EXIT_USAGE;
	}
	return 0;
}

static void lend_lock(struct ctl_server *s, bool take)
{
	struct cmd_ctx x = { .priv = s->d.priv, .cp = s->d.cp };

	if (take)
		s->d.lock(&x);
	else
		s->d.unlock(&x);
}

/* Invariant (2): may c's peer change the filesystem?  NULL, or why not. */
static const char *may_change(struct ctl_conn *c, char *buf, size_t len)
{
	struct ctl_server *s = c->srv;
	const char *why = NULL;

	if (c->uid == 0)
		return NULL;
	if (c->uid != s->owner) {
		snprintf(buf, len, "permission denied: changing the filesystem needs root, or the "
			 "user who mounted it (uid %u) owning every member device; you are uid %u",
			 (unsigned)s->owner, (unsigned)c->uid);
		return buf;
	}
	lend_lock(s, true);
	for (unsigned i = 0; i < *s->d.nr_devs && !why; i++) {
		const char *dev = (*s->d.devs)[i];
		struct stat st;
		if (stat(dev, &st) || st.st_uid != c->uid) {
			snprintf(buf, len, "permission denied: %s is not owned by uid %u (changing a "
				 "filesystem mounted by a user needs that user to own every member "
				 "device, or root)", dev, (unsigned)c->uid);
			why = buf;
		}
	}
	lend_lock(s, false);
	return why;
}

/* ------------------------------------------------------------ threads */

static void *body_thread(void *arg)
{
	struct ctl_conn *c = arg;
	struct ctl_server *s = c->srv;
	cookie_io_functions_t out_fns = { .write = out_write }, err_fns = { .write = err_write };
	FILE *out = fopencookie(c, "w", out_fns), *err = fopencookie(c, "w", err_fns);
	int code = EXIT_FAIL;

	if (out && err) {
		setvbuf(out, NULL, _IOLBF, 4096);
		setvbuf(err, NULL, _IOLBF, 4096);
		struct cmd_ctx x = {
			.cmd		= c->cmd->name,
			.out		= out,
			.err		= err,
			.tty		= c->tty,
			.mounted	= true,
			.cancel		= &c->cancel,
			.cp		= s->d.cp,
			.devs		= s->d.devs,
			.nr_devs	= s->d.nr_devs,
			.open_opts	= s->d.open_opts,
			.lock		= s->d.lock,
			.unlock		= s->d.unlock,
			.priv		= s->d.priv,
		};
		code = c->cmd->run(&x, c->argc, c->argv);
	} else {
		conn_refuse(c, EXIT_FAIL, "out of memory");
	}
	if (out)
		fclose(out);
	if (err)
		fclose(err);
	/* the job is over: the next may start while a slow client reads */
	pthread_mutex_lock(&s->lock);
	if (c->cmd->changes)
		s->busy = NULL;
	pthread_mutex_unlock(&s->lock);
	conn_exit(c, code);
	/* ends the connection thread's read of CANCEL */
	shutdown(c->fd, SHUT_RDWR);
	return NULL;
}

/* After the request: CANCEL messages, until the stream ends. */
static void read_cancels(struct ctl_conn *c)
{
	struct timeval none = { 0 };
	char buf[16];
	uint32_t type;
	size_t len;
	int r;

	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	while (!(r = ctl_recv(c->fd, &type, buf, 0, &len)) || r == -EINTR) {
		if (r)
			continue;
		if (type != CTL_CANCEL)
			break;
		__atomic_store_n(&c->cancel, 1, __ATOMIC_RELAXED);
	}
	/*
	 * The end of the stream (the client closed its side, went away, or the
	 * body's shutdown), or a protocol error: nothing more is read, the job
	 * goes on; output stops when a send fails (invariant 3).
	 */
}

/*
 * After a refusal: take what the client still sends (bounded) before
 * closing, so that the close does not reset the connection and lose the
 * reply it has not read yet.
 */
static void drain(struct ctl_conn *c)
{
	struct timeval t = { .tv_sec = 1 };
	char buf[4096];
	size_t total = 0;
	ssize_t n;

	shutdown(c->fd, SHUT_WR);
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof(t));
	while (total < (1U << 20) && ((n = recv(c->fd, buf, sizeof(buf), 0)) > 0 ||
				      (n < 0 && errno == EINTR)))
		total += n > 0 ? n : 0;
}

/* Start the body (invariant 4); 0, or the exit code after a refusal. */
static int start_body(struct ctl_conn *c)
{
	struct ctl_server *s = c->srv;
	char why[512];
	const char *no;
	int r;

	if (c->cmd->changes && (no = may_change(c, why, sizeof(why)))) {
		conn_refuse(c, EXIT_FAIL, "%s", no);
		return EXIT_FAIL;
	}
	pthread_mutex_lock(&s->lock);
	if (s->stopping) {
		pthread_mutex_unlock(&s->lock);
		conn_refuse(c, EXIT_FAIL, "unmounting: no new commands");
		return EXIT_FAIL;
	}
	if (c->cmd->changes && s->busy) {
		const char *busy = s->busy;
		pthread_mutex_unlock(&s->lock);
		conn_refuse(c, EXIT_FAIL, "busy: %s is running; try again when it has finished", busy);
		return EXIT_FAIL;
	}
	if ((r = pthread_create(&c->body, NULL, body_thread, c))) {
		pthread_mutex_unlock(&s->lock);
		conn_refuse(c, EXIT_FAIL, "cannot start a thread: %s", strerror(r));
		return EXIT_FAIL;
	}
	if (c->cmd->changes)
		s->busy = c->cmd->name;
	c->running = true;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void conn_free(struct ctl_conn *c)
{
	struct ctl_server *s = c->srv;

	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < CTL_MAX_CONNS; i++)
		if (s->conns[i] == c)
			s->conns[i] = NULL;
	s->nr_conns--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	close(c->fd);
	free(c->argv);
	free(c->payload);
	free(c->backlog);
	free(c);
}

static void *conn_thread(void *arg)
{
	struct ctl_conn *c = arg;

	if (!read_request(c) && !start_body(c)) {
		read_cancels(c);
		pthread_join(c->body, NULL);
	} else {
		drain(c);
	}
	conn_free(c);
	return NULL;
}

static void accept_one(struct ctl_server *s, int fd)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct ctl_conn *c = calloc(1, sizeof(*c));
	struct timeval rt = { .tv_sec = CTL_REQ_TIMEOUT_S }, st = { .tv_sec = CTL_SEND_TIMEOUT_S };
	pthread_attr_t attr;
	unsigned slot;

	if (!c)
		abort();
	c->srv = s;
	c->fd = fd;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &st, sizeof(st));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl)) {
		close(fd);
		free(c);
		return;
	}
	c->uid = cred.uid;

	pthread_mutex_lock(&s->lock);
	unsigned same = 0, limit = c->uid && c->uid != s->owner ? CTL_MAX_CONNS_OTHER : CTL_MAX_CONNS;
	for (unsigned i = 0; i < CTL_MAX_CONNS; i++)
		same += s->conns[i] && s->conns[i]->uid == c->uid;
	for (slot = 0; slot < CTL_MAX_CONNS && s->conns[slot]; slot++)
		;
	if (slot == CTL_MAX_CONNS || same >= limit) {
		pthread_mutex_unlock(&s->lock);
		conn_refuse(c, EXIT_FAIL, "busy: %u connections already; try again later",
			    slot == CTL_MAX_CONNS ? CTL_MAX_CONNS : limit);
		close(fd);
		free(c->backlog);
		free(c);
		return;
	}
	s->conns[slot] = c;
	s->nr_conns++;
	pthread_mutex_unlock(&s->lock);

	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int r = pthread_create(&t, &attr, conn_thread, c);
	pthread_attr_destroy(&attr);
	if (r) {
		conn_refuse(c, EXIT_FAIL, "cannot start a thread: %s", strerror(r));
		conn_free(c);
	}
}

static void *listener_thread(void *arg)
{
	struct ctl_server *s = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = s->lfd, .events = POLLIN },
				       { .fd = s->wake[0], .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			accept_one(s, fd);
		else if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
			usleep(100000);	/* out of descriptors: let connections end */
	}
	return NULL;
}

/* ------------------------------------------------------------ start, stop */

/* The socket's directory (ctl.c, "Where"): created, or checked to be safe. */
static int socket_dir(char *dir, size_t len, char *err, size_t elen)
{
	uid_t uid = geteuid();
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	mode_t mode = uid ? 0700 : 0755;
	struct stat st;

	if (!uid)
		snprintf(dir, len, "/run/bcachefs");
	else if (xdg && xdg[0] == '/')
		snprintf(dir, len, "%s/bcachefs", xdg);
	else
		snprintf(dir, len, "/tmp/bcachefs-%u", (unsigned)uid);
	if (mkdir(dir, mode) && errno != EEXIST) {
		snprintf(err, elen, "%s: %s", dir, strerror(errno));
		return -errno;
	}
	if (lstat(dir, &st)) {
		snprintf(err, elen, "%s: %s", dir, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 022) ||
	    (uid && (st.st_mode & 077))) {
		snprintf(err, elen, "%s: not a directory of uid %u writable only by it%s", dir,
			 (unsigned)uid, uid ? " (mode 0700)" : "");
		return -EPERM;
	}
	return 0;
}

/*
 * Sockets of daemons that were killed (SIGKILL leaves them): nobody
 * listens (ECONNREFUSED), so they go.  A live daemon's socket answers.
 */
static void remove_stale(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		if (strncmp(e->d_name, "fusemount-", 10) || l < 5 || strcmp(e->d_name + l - 5, ".sock") ||
		    (size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, e->d_name) >=
		    sizeof(sa.sun_path))
			continue;
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			break;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno == ECONNREFUSED)
			unlink(sa.sun_path);
		close(fd);
	}
	closedir(d);
}

static int make_socket(struct ctl_server *s, char *err, size_t elen)
{
	char dir[4096];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int r;

	if ((r = socket_dir(dir, sizeof(dir), err, elen)))
		return r;
	if ((size_t)snprintf(s->path, sizeof(s->path), "%s/fusemount-%d.sock", dir, (int)getpid()) >=
	    sizeof(s->path)) {
		snprintf(err, elen, "%s: path too long for a unix socket", dir);
		return -ENAMETOOLONG;
	}
	remove_stale(dir);
	/* a daemon killed with this pid left it behind */
	if (!lstat(s->path, &st) && S_ISSOCK(st.st_mode))
		unlink(s->path);
	memcpy(sa.sun_path, s->path, sizeof(s->path));
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(s->path, geteuid() ? 0600 : 0666) || listen(s->lfd, 16)) {
		r = -errno;
		snprintf(err, elen, "%s: %s", s->path, strerror(errno));
		if (s->lfd >= 0) {
			close(s->lfd);
			unlink(s->path);
		}
		return r;
	}
	return 0;
}

int ctl_server_start(const struct ctl_daemon *d, struct ctl_server **sp, char *err, size_t len)
{
	struct ctl_server *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		abort();
	s->d = *d;
	s->owner = geteuid();
	s->lfd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if ((r = make_socket(s, err, len)))
		goto err;
	if (pipe2(s->wake, O_CLOEXEC)) {
		r = -errno;
		snprintf(err, len, "pipe: %s", strerror(errno));
		goto err_sock;
	}
	if ((r = -pthread_create(&s->listener, NULL, listener_thread, s))) {
		snprintf(err, len, "cannot start the listener thread: %s", strerror(-r));
		close(s->wake[0]);
		close(s->wake[1]);
		goto err_sock;
	}
	*sp = s;
	return 0;
err_sock:
	close(s->lfd);
	unlink(s->path);
err:
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
	return r;
}

const char *ctl_server_path(const struct ctl_server *s)
{
	return s->path;
}

void ctl_server_stop(struct ctl_server *s)
{
	if (!s)
		return;
	/* no new clients find it or connect */
	unlink(s->path);
	while (write(s->wake[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(s->listener, NULL);
	close(s->lfd);

	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	for (unsigned i = 0; i < CTL_MAX_CONNS; i++) {
		struct ctl_conn *c = s->conns[i];
		if (!c)
			continue;
		if (c->running)
			/* invariant (5): it stops at a safe point */
			__atomic_store_n(&c->cancel, 1, __ATOMIC_RELAXED);
		else
			shutdown(c->fd, SHUT_RD);	/* still reading its request */
	}
	while (s->nr_conns)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);

	close(s->wake[0]);
	close(s->wake[1]);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}
