// SPDX-License-Identifier: GPL-2.0
/*
 * fuse_floor.c - build/fuse-floor: a measuring instrument, NOT a filesystem.
 *
 * `build/fuse-floor [-o LIST] MOUNTPOINT` mounts a FUSE low-level daemon that
 * keeps its whole tree (names, attributes, xattrs and file data) in memory
 * and answers every request with the least work it can: no device, no
 * journal, no checksum, one mutex around a hash table and some arrays.
 * Everything is lost at unmount.  It exists to tell what FUSE itself costs
 * on this kernel and libfuse (bench/fuse_floor.sh): the time of a workload
 * through it is the floor under any FUSE daemon that negotiates the same
 * things, `bcachefs fusemount` included (issue 32).
 *
 * Like for like with fusemount (read cmd/fusemount_ops.c's op_init, op_open and the
 * session setup before changing anything here): the same libfuse3 (3.14 on
 * Debian 12, linked directly, FUSE_USE_VERSION 35), the same init wishes
 * (no writeback cache, no async DIO, export support, no splice read, no
 * HANDLE_KILLPRIV but HANDLE_KILLPRIV_V2, POSIX ACLs with DONT_MASK, max_write 1 MiB, no
 * auto_inval_data, explicit_inval_data), the same mount options
 * (default_permissions, suid, dev), entry and attribute timeouts of 30 s,
 * negative entries cached as long, the same open flags (direct_io for
 * O_WRONLY opens, keep_cache otherwise), no flush op, one lock around all
 * work, and fuse_session_loop_mt() with clone_fd 0 and 8 idle threads.
 *
 * -o LIST (comma-separated) turns one thing at a time the other way, to
 * measure what a change in cmd_fusemount.c would save:
 *   wbc          ask for FUSE_CAP_WRITEBACK_CACHE
 *   killpriv     ask for FUSE_CAP_HANDLE_KILLPRIV (libfuse 3.14 never passes
 *                it on to the kernel: no request changes, as measured)
 *   nokillpriv2  do not add FUSE_HANDLE_KILLPRIV_V2 to the INIT reply
 *                (fusemount does, floor_writev()): the kernel then asks
 *                GETXATTR security.capability before writes, GETATTR
 *                before chown
 *   noacl        no FUSE_CAP_POSIX_ACL / DONT_MASK
 *   noexport     no FUSE_CAP_EXPORT_SUPPORT
 *   noplus       no FUSE_CAP_READDIRPLUS (plain READDIR, LOOKUP per name)
 *   noplusauto   no FUSE_CAP_READDIRPLUS_AUTO (libfuse's default, kept by
 *                fusemount): READDIRPLUS for every listing
 *   cachesym     FUSE_CAP_CACHE_SYMLINKS
 *   noparallel   no FUSE_CAP_PARALLEL_DIROPS
 *   nodirect     no direct_io for O_WRONLY opens (the page cache path)
 *   rwdirect     direct_io for O_RDWR opens too (fusemount keeps the page
 *                cache there: shared mappings need it without
 *                FUSE_DIRECT_IO_ALLOW_MMAP, which libfuse 3.14 cannot ask for)
 *   nocreate     ENOSYS to CREATE: the kernel sends MKNOD and OPEN instead
 *                (with noopen: MKNOD alone, and no RELEASE at close)
 *   flush        answer FLUSH (0) instead of ENOSYS
 *   noneg        no negative entries: a missing name is ENOENT, not cached
 *   noxattr      no xattr ops: ENOSYS, after which the kernel sends none
 *   cachedir     directory listings kept in the kernel's cache (cache_readdir
 *                and keep_cache at OPENDIR)
 *   noopen       ENOSYS to OPEN and OPENDIR (NO_OPEN(DIR)_SUPPORT: the
 *                kernel stops sending OPEN/RELEASE, OPENDIR/RELEASEDIR; a
 *                CREATE's RELEASE still comes)
 *   noperm       mount without default_permissions: the kernel checks no
 *                permission itself (the daemon would have to; this one
 *                checks nothing), so it needs no fresh attributes for it.
 *                Only with noacl: the kernel turns default_permissions on
 *                whenever POSIX ACLs are negotiated
 *   timeout=S    entry and attribute timeout in seconds (default 30)
 *
 * Request counts: getfattr -n user.floor.counts MOUNTPOINT gives the
 * requests seen per type since the mount or the last reset (setfattr -n
 * user.floor.reset -v 1 MOUNTPOINT), FORGETs included, which the kernel's
 * fuse_request_send tracepoint does not show.  -f: foreground (the default
 * too; the daemon never forks), -d: libfuse's debug output.
 *
 * Invariants (enough to run bench/fuse.sh's workloads correctly)
 *   (1) A node lives until its last name is gone and the kernel forgot it
 *       (nlookup 0); its data is freed then.  Node numbers are never reused.
 *   (2) A request takes `lock` at most once, around all its work.
 */
#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>

#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/*
 * File data in 2 MiB chunks: chunk 0 a heap buffer grown to what was
 * written (small files stay small), the others transparent huge pages, so
 * a 1 GiB write costs 512 page faults, not 262144 (the floor must not be
 * slower than the daemons it measures).
 */
#define CHUNK_SHIFT	21
#define CHUNK		(1UL << CHUNK_SHIFT)
#define HASH_BITS	18

struct xattr {
	struct xattr	*next;
	char		*name;
	void		*val;
	size_t		len;
};

struct node {
	struct stat	st;
	uint64_t	nlookup;
	char		*link;		/* symlink target */
	uint8_t		**chunks;	/* regular file data; NULL chunk: zeros */
	size_t		nr_chunks;
	size_t		head_cap;	/* bytes allocated in chunks[0] (the rest reads as zeros) */
	struct dent	**ents;		/* directory entries in creation order; NULL: removed */
	size_t		nr_ents, cap_ents;
	struct xattr	*xattrs;
};

struct dent {
	struct dent	*next;		/* hash chain */
	uint64_t	parent, ino;
	size_t		slot;		/* index in the parent's ents */
	char		name[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct node **nodes;
static size_t nr_nodes, cap_nodes;
static struct dent *hash[1 << HASH_BITS];
static double timeout = 30.0;
static bool o_wbc, o_killpriv, o_noacl, o_noexport, o_noplus, o_noplusauto, o_cachesym,
	    o_noparallel, o_cachedir, o_nodirect, o_flush, o_noneg, o_noxattr, o_noopen, o_noperm, o_rwdirect,
	    o_nocreate, o_nokillpriv2;

/* per-request counts (user.floor.counts) */
#define OPS() x(lookup) x(forget) x(getattr) x(setattr) x(readlink) x(mknod) x(mkdir) \
	x(unlink) x(rmdir) x(symlink) x(rename) x(link) x(open) x(read) x(write) \
	x(flush) x(release) x(fsync) x(opendir) x(readdir) x(readdirplus) x(releasedir) \
	x(fsyncdir) x(statfs) x(setxattr) x(getxattr) x(listxattr) x(removexattr) \
	x(create) x(fallocate)
enum op {
#define x(n) OP_##n,
	OPS()
#undef x
	OP_NR
};
static const char *const op_names[] = {
#define x(n) #n,
	OPS()
#undef x
};
static atomic_ulong counts[OP_NR];

static void count(enum op o)
{
	atomic_fetch_add_explicit(&counts[o], 1, memory_order_relaxed);
}

static struct timespec now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return t;
}

static unsigned hash_of(uint64_t parent, const char *name)
{
	uint64_t h = parent * 0x9e3779b97f4a7c15ULL;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	return (h ^ (h >> 29)) & ((1 << HASH_BITS) - 1);
}

static struct node *get(fuse_ino_t ino)
{
	return ino < nr_nodes ? nodes[ino] : NULL;
}

static struct dent **find(uint64_t parent, const char *name)
{
	struct dent **d = &hash[hash_of(parent, name)];

	for (; *d; d = &(*d)->next)
		if ((*d)->parent == parent && !strcmp((*d)->name, name))
			return d;
	return d;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p) {
		perror("fuse-floor");
		abort();
	}
	return p;
}

static uint64_t new_node(mode_t mode, const struct fuse_ctx *ctx, dev_t rdev)
{
	struct node *n = calloc(1, sizeof(*n));
	struct timespec t = now();

	if (!n)
		abort();
	if (nr_nodes == cap_nodes) {
		cap_nodes = cap_nodes ? cap_nodes * 2 : 1024;
		nodes = xrealloc(nodes, cap_nodes * sizeof(*nodes));
	}
	n->st.st_ino = nr_nodes;
	n->st.st_mode = mode;
	n->st.st_nlink = S_ISDIR(mode) ? 2 : 1;
	n->st.st_uid = ctx ? ctx->uid : 0;
	n->st.st_gid = ctx ? ctx->gid : 0;
	n->st.st_rdev = rdev;
	n->st.st_blksize = 4096;
	n->st.st_atim = n->st.st_mtim = n->st.st_ctim = t;
	nodes[nr_nodes] = n;
	return nr_nodes++;
}

static void chunk_free(struct node *n, size_t c)
{
	if (!n->chunks[c])
		return;
	if (c)
		munmap(n->chunks[c], CHUNK);
	else
		free(n->chunks[0]), n->head_cap = 0;
	n->chunks[c] = NULL;
}

/* chunk c, able to hold its bytes [0, end) (lock held) */
static uint8_t *chunk_get(struct node *n, size_t c, size_t end)
{
	if (!c && end > n->head_cap) {
		size_t cap = n->head_cap * 2 < CHUNK ? n->head_cap * 2 : CHUNK;
		if (cap < ((end + 4095) & ~4095UL))
			cap = (end + 4095) & ~4095UL;
		n->chunks[0] = xrealloc(n->chunks[0], cap);
		memset(n->chunks[0] + n->head_cap, 0, cap - n->head_cap);
		n->head_cap = cap;
	} else if (c && !n->chunks[c]) {
		uint8_t *p = mmap(NULL, 2 * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			abort();
		uint8_t *a = (uint8_t *)(((uintptr_t)p + CHUNK - 1) & ~(CHUNK - 1));
		if (a > p)
			munmap(p, a - p);
		munmap(a + CHUNK, p + CHUNK - a);
		madvise(a, CHUNK, MADV_HUGEPAGE);
		n->chunks[c] = a;
	}
	return n->chunks[c];
}

/* bytes of chunk c that are stored, from in on (the rest reads as zeros) */
static size_t chunk_len(struct node *n, size_t c, size_t in)
{
	size_t len = !n->chunks[c] ? 0 : c ? CHUNK : n->head_cap;

	return len > in ? len - in : 0;
}

static void free_data(struct node *n)
{
	for (size_t i = 0; i < n->nr_chunks; i++)
		chunk_free(n, i);
	free(n->chunks);
	n->chunks = NULL;
	n->nr_chunks = 0;
}

/* invariant (1) */
static void maybe_free(fuse_ino_t ino)
{
	struct node *n = get(ino);

	if (!n || n->nlookup || n->st.st_nlink || ino == FUSE_ROOT_ID)
		return;
	free_data(n);
	free(n->link);
	free(n->ents);
	for (struct xattr *x = n->xattrs, *nx; x; x = nx) {
		nx = x->next;
		free(x->name);
		free(x->val);
		free(x);
	}
	free(n);
	nodes[ino] = NULL;
}

static void add_dent(uint64_t parent, const char *name, uint64_t ino)
{
	struct node *p = get(parent);
	size_t len = strlen(name);
	struct dent *d = malloc(sizeof(*d) + len + 1);
	struct dent **slot = find(parent, name);

	memcpy(d->name, name, len + 1);
	d->parent = parent;
	d->ino = ino;
	d->next = NULL;
	*slot = d;
	if (p->nr_ents == p->cap_ents) {
		p->cap_ents = p->cap_ents ? p->cap_ents * 2 : 16;
		p->ents = xrealloc(p->ents, p->cap_ents * sizeof(*p->ents));
	}
	d->slot = p->nr_ents;
	p->ents[p->nr_ents++] = d;
}

static void del_dent(struct dent **dp)
{
	struct dent *d = *dp;
	struct node *p = get(d->parent);

	*dp = d->next;
	p->ents[d->slot] = NULL;
	free(d);
}

static void touch(struct node *n, bool mtime)
{
	struct timespec t = now();

	n->st.st_ctim = t;
	if (mtime)
		n->st.st_mtim = t;
}

/* an entry reply for ino (lock held): counts a lookup */
static void entry_of(fuse_ino_t ino, struct fuse_entry_param *e)
{
	struct node *n = get(ino);

	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr = n->st;
	e->attr.st_blocks = (n->st.st_size + 511) / 512;
	e->attr_timeout = timeout;
	e->entry_timeout = timeout;
	n->nlookup++;
}

/*
 * FUSE_HANDLE_KILLPRIV_V2 as fusemount_ops.c takes it (sess_read(),
 * sess_writev()): libfuse 3.14 cannot ask for it, so the session's own I/O
 * adds it to the INIT reply when the kernel offered it.
 */
static uint64_t init_unique;
static bool init_offers_v2;

static ssize_t floor_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t r = read(fd, buf, len);
	const struct fuse_in_header *in = buf;
	(void)userdata;

	if (r >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags2)) &&
	    in->opcode == FUSE_INIT) {
		init_unique = in->unique;
		init_offers_v2 = ((const struct fuse_init_in *)(in + 1))->flags & FUSE_HANDLE_KILLPRIV_V2;
	}
	return r;
}

static ssize_t floor_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	if (init_unique && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    ((struct fuse_out_header *)iov[0].iov_base)->unique == init_unique) {
		init_unique = 0;
		if (!((struct fuse_out_header *)iov[0].iov_base)->error && init_offers_v2 &&
		    !o_nokillpriv2 &&
		    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t))
			((struct fuse_init_out *)iov[1].iov_base)->flags |= FUSE_HANDLE_KILLPRIV_V2;
	}
	return writev(fd, iov, count);
}

static void fl_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* as fusemount_ops.c op_init, unless -o says otherwise */
	if (o_wbc && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~FUSE_CAP_ASYNC_DIO;
	if (!o_noexport && (conn->capable & FUSE_CAP_EXPORT_SUPPORT))
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	conn->want &= ~FUSE_CAP_SPLICE_READ;
	if (o_killpriv && (conn->capable & FUSE_CAP_HANDLE_KILLPRIV))
		conn->want |= FUSE_CAP_HANDLE_KILLPRIV;
	else
		conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	if (!o_noacl && (conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	conn->max_write = 1 << 20;
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA)
		conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
	/* the extra switches (cmd_fusemount.c leaves these at libfuse's defaults) */
	if (o_noplus)
		conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
	if (o_noplusauto)
		conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	if (o_cachesym && (conn->capable & FUSE_CAP_CACHE_SYMLINKS))
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (o_noparallel)
		conn->want &= ~FUSE_CAP_PARALLEL_DIROPS;
	fprintf(stderr, "fuse-floor: capable %#x want %#x\n", conn->capable, conn->want);
}

static void fl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int r = 0;

	count(OP_lookup);
	pthread_mutex_lock(&lock);
	if (!strcmp(name, ".")) {
		if (get(parent))
			entry_of(parent, &e);
		else
			r = ENOENT;
	} else {
		struct dent *d = *find(parent, name);
		if (d)
			entry_of(d->ino, &e);
		else
			r = ENOENT;
	}
	pthread_mutex_unlock(&lock);
	if (r == ENOENT && !o_noneg) {
		memset(&e, 0, sizeof(e));
		e.entry_timeout = timeout;
		fuse_reply_entry(req, &e);
	} else if (r) {
		fuse_reply_err(req, r);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	struct node *n = get(ino);

	if (!n)
		return;
	n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
	maybe_free(ino);
}

static void fl_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	count(OP_forget);
	pthread_mutex_lock(&lock);
	forget_one(ino, nlookup);
	pthread_mutex_unlock(&lock);
	fuse_reply_none(req);
}

static void fl_forget_multi(fuse_req_t req, size_t nr, struct fuse_forget_data *f)
{
	atomic_fetch_add_explicit(&counts[OP_forget], nr, memory_order_relaxed);
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nr; i++)
		forget_one(f[i].ino, f[i].nlookup);
	pthread_mutex_unlock(&lock);
	fuse_reply_none(req);
}

static void fl_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	struct node *n;

	(void)fi;
	count(OP_getattr);
	pthread_mutex_lock(&lock);
	if ((n = get(ino))) {
		st = n->st;
		st.st_blocks = (st.st_size + 511) / 512;
	}
	pthread_mutex_unlock(&lock);
	if (n)
		fuse_reply_attr(req, &st, timeout);
	else
		fuse_reply_err(req, ENOENT);
}

static void truncate_to(struct node *n, off_t size)
{
	size_t keep = (size + CHUNK - 1) >> CHUNK_SHIFT;

	for (size_t i = keep; i < n->nr_chunks; i++)
		chunk_free(n, i);
	if (keep < n->nr_chunks)
		n->nr_chunks = keep;
	size_t in = size & (CHUNK - 1);
	if (size < n->st.st_size && in && keep && n->chunks[keep - 1])
		memset(n->chunks[keep - 1] + in, 0, chunk_len(n, keep - 1, in));
	n->st.st_size = size;
}

static void fl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int to_set,
		       struct fuse_file_info *fi)
{
	struct stat st;
	struct node *n;

	(void)fi;
	count(OP_setattr);
	pthread_mutex_lock(&lock);
	if ((n = get(ino))) {
		struct timespec t = now();
		if (to_set & FUSE_SET_ATTR_MODE)
			n->st.st_mode = (n->st.st_mode & S_IFMT) | (a->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_UID)
			n->st.st_uid = a->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			n->st.st_gid = a->st_gid;
		if (to_set & FUSE_SET_ATTR_SIZE) {
			truncate_to(n, a->st_size);
			n->st.st_mtim = t;
		}
		if (to_set & FUSE_SET_ATTR_ATIME)
			n->st.st_atim = a->st_atim;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			n->st.st_atim = t;
		if (to_set & FUSE_SET_ATTR_MTIME)
			n->st.st_mtim = a->st_mtim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			n->st.st_mtim = t;
		n->st.st_ctim = (to_set & FUSE_SET_ATTR_CTIME) ? a->st_ctim : t;
		st = n->st;
		st.st_blocks = (st.st_size + 511) / 512;
	}
	pthread_mutex_unlock(&lock);
	if (n)
		fuse_reply_attr(req, &st, timeout);
	else
		fuse_reply_err(req, ENOENT);
}

static void fl_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[4096] = "";
	struct node *n;

	count(OP_readlink);
	pthread_mutex_lock(&lock);
	if ((n = get(ino)) && n->link)
		snprintf(buf, sizeof(buf), "%s", n->link);
	pthread_mutex_unlock(&lock);
	if (buf[0])
		fuse_reply_readlink(req, buf);
	else
		fuse_reply_err(req, EINVAL);
}

/* a new name in parent for a new node (lock held); 0 or an errno */
static int make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		const char *link, struct fuse_entry_param *e)
{
	struct node *p = get(parent);

	if (!p || !S_ISDIR(p->st.st_mode))
		return ENOENT;
	if (*find(parent, name))
		return EEXIST;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (!o_noacl && !S_ISLNK(mode))		/* DONT_MASK: the umask is ours (no default ACLs here) */
		mode &= ~(ctx->umask & 0777);
	uint64_t ino = new_node(mode, ctx, rdev);
	struct node *n = nodes[ino];
	if (link) {
		n->link = strdup(link);
		n->st.st_size = strlen(link);
	}
	if (S_ISDIR(mode))
		p->st.st_nlink++;
	add_dent(parent, name, ino);
	touch(p, true);
	entry_of(ino, e);
	return 0;
}

static void reply_make(fuse_req_t req, int r, struct fuse_entry_param *e)
{
	if (r)
		fuse_reply_err(req, r);
	else
		fuse_reply_entry(req, e);
}

static void fl_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct fuse_entry_param e;

	count(OP_mknod);
	pthread_mutex_lock(&lock);
	int r = make(req, parent, name, mode, rdev, NULL, &e);
	pthread_mutex_unlock(&lock);
	reply_make(req, r, &e);
}

static void fl_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fuse_entry_param e;

	count(OP_mkdir);
	pthread_mutex_lock(&lock);
	int r = make(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &e);
	pthread_mutex_unlock(&lock);
	reply_make(req, r, &e);
}

static void fl_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	count(OP_symlink);
	pthread_mutex_lock(&lock);
	int r = make(req, parent, name, S_IFLNK | 0777, 0, link, &e);
	pthread_mutex_unlock(&lock);
	reply_make(req, r, &e);
}

static void fl_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct node *n, *p;
	int r = 0;

	count(OP_link);
	pthread_mutex_lock(&lock);
	if (!(n = get(ino)) || !(p = get(parent)))
		r = ENOENT;
	else if (*find(parent, name))
		r = EEXIST;
	if (!r) {
		add_dent(parent, name, ino);
		n->st.st_nlink++;
		touch(n, false);
		touch(p, true);
		entry_of(ino, &e);
	}
	pthread_mutex_unlock(&lock);
	reply_make(req, r, &e);
}

static bool dir_empty(struct node *n)
{
	for (size_t i = 0; i < n->nr_ents; i++)
		if (n->ents[i])
			return false;
	return true;
}

/* remove parent/name (lock held); dir: rmdir's rules */
static int remove_name(fuse_ino_t parent, const char *name, bool dir)
{
	struct dent **dp = find(parent, name);

	if (!*dp)
		return ENOENT;
	fuse_ino_t ino = (*dp)->ino;
	struct node *n = get(ino), *p = get(parent);
	if (dir && !S_ISDIR(n->st.st_mode))
		return ENOTDIR;
	if (!dir && S_ISDIR(n->st.st_mode))
		return EISDIR;
	if (dir && !dir_empty(n))
		return ENOTEMPTY;
	del_dent(dp);
	if (dir) {
		n->st.st_nlink = 0;
		p->st.st_nlink--;
	} else {
		n->st.st_nlink--;
	}
	touch(n, false);
	touch(p, true);
	maybe_free(ino);
	return 0;
}

static void fl_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	count(OP_unlink);
	pthread_mutex_lock(&lock);
	int r = remove_name(parent, name, false);
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, r);
}

static void fl_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	count(OP_rmdir);
	pthread_mutex_lock(&lock);
	int r = remove_name(parent, name, true);
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, r);
}

static void fl_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	int r = 0;

	count(OP_rename);
	pthread_mutex_lock(&lock);
	struct dent **dp = find(parent, name);
	struct node *np = get(newparent);
	if (flags)
		r = EINVAL;		/* no RENAME_EXCHANGE / NOREPLACE: not in the workloads */
	else if (!*dp || !np)
		r = ENOENT;
	if (!r) {
		fuse_ino_t ino = (*dp)->ino;
		struct dent **tp = find(newparent, newname);
		if (*tp && (*tp)->ino == ino)
			goto out;
		if (*tp)
			r = remove_name(newparent, newname, S_ISDIR(get((*tp)->ino)->st.st_mode));
		if (!r) {
			bool isdir = S_ISDIR(get(ino)->st.st_mode);
			del_dent(find(parent, name));
			add_dent(newparent, newname, ino);
			if (isdir && parent != newparent) {
				get(parent)->st.st_nlink--;
				np->st.st_nlink++;
			}
			touch(get(parent), true);
			touch(np, true);
			touch(get(ino), false);
		}
	}
out:
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, r);
}

static void set_open(struct fuse_file_info *fi)
{
	fi->direct_io = !o_nodirect && ((fi->flags & O_ACCMODE) == O_WRONLY ||
					(o_rwdirect && (fi->flags & O_ACCMODE) == O_RDWR));
	fi->keep_cache = 1;
}

static void fl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n;

	count(OP_open);
	if (o_noopen) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pthread_mutex_lock(&lock);
	if ((n = get(ino))) {
		n->nlookup++;		/* held while open, as cmd_fusemount.c does */
		if ((fi->flags & O_TRUNC) && S_ISREG(n->st.st_mode) && n->st.st_size) {
			truncate_to(n, 0);
			touch(n, true);
		}
	}
	pthread_mutex_unlock(&lock);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	set_open(fi);
	fuse_reply_open(req, fi);
}

static void fl_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fuse_entry_param e;

	count(OP_create);
	if (o_nocreate) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pthread_mutex_lock(&lock);
	int r = make(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &e);
	if (!r)
		nodes[e.ino]->nlookup++;	/* the open file */
	pthread_mutex_unlock(&lock);
	if (r) {
		fuse_reply_err(req, r);
		return;
	}
	set_open(fi);
	fuse_reply_create(req, &e, fi);
}

static void fl_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	count(OP_release);
	pthread_mutex_lock(&lock);
	forget_one(ino, 1);
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, 0);
}

static void fl_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	count(OP_flush);
	fuse_reply_err(req, 0);
}

static void fl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct node *n;
	char *buf = NULL;
	size_t len = 0;

	(void)fi;
	count(OP_read);
	pthread_mutex_lock(&lock);
	if ((n = get(ino)) && off < n->st.st_size) {
		len = n->st.st_size - off < (off_t)size ? (size_t)(n->st.st_size - off) : size;
		buf = malloc(len);
		for (size_t done = 0; done < len;) {
			size_t c = (off + done) >> CHUNK_SHIFT, in = (off + done) & (CHUNK - 1);
			size_t k = CHUNK - in < len - done ? CHUNK - in : len - done;
			size_t have = c < n->nr_chunks ? chunk_len(n, c, in) : 0;
			if (have > k)
				have = k;
			if (have)
				memcpy(buf + done, n->chunks[c] + in, have);
			memset(buf + done + have, 0, k - have);
			done += k;
		}
	}
	pthread_mutex_unlock(&lock);
	if (!n)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_buf(req, buf, len);
	free(buf);
}

static void fl_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct node *n;

	(void)fi;
	count(OP_write);
	pthread_mutex_lock(&lock);
	if ((n = get(ino))) {
		size_t need = (off + size + CHUNK - 1) >> CHUNK_SHIFT;
		if (need > n->nr_chunks) {
			n->chunks = xrealloc(n->chunks, need * sizeof(*n->chunks));
			memset(n->chunks + n->nr_chunks, 0, (need - n->nr_chunks) * sizeof(*n->chunks));
			n->nr_chunks = need;
		}
		for (size_t done = 0; done < size;) {
			size_t c = (off + done) >> CHUNK_SHIFT, in = (off + done) & (CHUNK - 1);
			size_t k = CHUNK - in < size - done ? CHUNK - in : size - done;
			memcpy(chunk_get(n, c, in + k) + in, buf + done, k);
			done += k;
		}
		if (off + (off_t)size > n->st.st_size)
			n->st.st_size = off + size;
		touch(n, true);
	}
	pthread_mutex_unlock(&lock);
	if (n)
		fuse_reply_write(req, size);
	else
		fuse_reply_err(req, ENOENT);
}

static void fl_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	count(OP_fsync);
	fuse_reply_err(req, 0);
}

static void fl_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	count(OP_fsyncdir);
	fuse_reply_err(req, 0);
}

static void fl_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n;

	count(OP_opendir);
	if (o_noopen) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pthread_mutex_lock(&lock);
	n = get(ino);
	bool dir = n && S_ISDIR(n->st.st_mode);
	pthread_mutex_unlock(&lock);
	if (!dir) {
		fuse_reply_err(req, n ? ENOTDIR : ENOENT);
		return;
	}
	fi->cache_readdir = o_cachedir;
	fi->keep_cache = o_cachedir;
	fuse_reply_open(req, fi);
}

/* entries from offset off: "." is 1, ".." 2, ents[i] is i + 3 */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	char *buf = malloc(size);
	size_t used = 0;
	struct node *n;

	pthread_mutex_lock(&lock);
	if (!(n = get(ino)) || !buf)
		goto out;
	for (off_t pos = off; ; pos++) {
		struct fuse_entry_param e;
		const char *name;
		size_t k;

		memset(&e, 0, sizeof(e));
		if (pos < 2) {
			name = pos ? ".." : ".";
			e.attr.st_ino = ino;
			e.attr.st_mode = S_IFDIR;
		} else if ((size_t)pos - 2 < n->nr_ents) {
			struct dent *d = n->ents[pos - 2];
			if (!d)
				continue;
			name = d->name;
			if (plus) {
				entry_of(d->ino, &e);
			} else {
				e.attr.st_ino = d->ino;
				e.attr.st_mode = get(d->ino)->st.st_mode & S_IFMT;
			}
		} else {
			break;
		}
		if (plus)
			k = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, pos + 1);
		else
			k = fuse_add_direntry(req, buf + used, size - used, name, &e.attr, pos + 1);
		if (k > size - used) {
			if (plus && pos >= 2)
				get(e.ino)->nlookup--;	/* not sent */
			break;
		}
		used += k;
	}
out:
	pthread_mutex_unlock(&lock);
	if (!n)
		fuse_reply_err(req, ENOENT);
	else if (!buf)
		fuse_reply_err(req, ENOMEM);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void fl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	count(OP_readdir);
	do_readdir(req, ino, size, off, false);
}

static void fl_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	count(OP_readdirplus);
	do_readdir(req, ino, size, off, true);
}

static void fl_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	count(OP_releasedir);
	fuse_reply_err(req, 0);
}

static void fl_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st = {
		.f_bsize = 4096, .f_frsize = 4096, .f_blocks = 1 << 20, .f_bfree = 1 << 19,
		.f_bavail = 1 << 19, .f_files = 1 << 20, .f_ffree = 1 << 19, .f_namemax = 255,
	};

	(void)ino;
	count(OP_statfs);
	fuse_reply_statfs(req, &st);
}

/* the counts as text, "name count" a line, nonzero only */
static size_t counts_text(char *buf, size_t size)
{
	size_t l = 0;

	for (int i = 0; i < OP_NR; i++) {
		unsigned long c = atomic_load(&counts[i]);
		if (c && l < size)
			l += snprintf(buf + l, size - l, "%s %lu\n", op_names[i], c);
	}
	return l < size ? l : size;
}

static struct xattr **xattr_find(struct node *n, const char *name)
{
	struct xattr **x = &n->xattrs;

	for (; *x; x = &(*x)->next)
		if (!strcmp((*x)->name, name))
			break;
	return x;
}

static void fl_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char cbuf[2048];
	const void *val = NULL;
	size_t len = 0;
	struct node *n;
	int r = 0;

	count(OP_getxattr);
	if (ino == FUSE_ROOT_ID && !strcmp(name, "user.floor.counts")) {
		len = counts_text(cbuf, sizeof(cbuf));
		val = cbuf;
		goto reply;
	}
	pthread_mutex_lock(&lock);
	if (!(n = get(ino))) {
		r = ENOENT;
	} else {
		struct xattr *x = *xattr_find(n, name);
		if (!x)
			r = ENODATA;
		else if (size && size < x->len)
			r = ERANGE;
		else if (x->len > sizeof(cbuf))
			r = E2BIG;
		else
			memcpy(cbuf, x->val, len = x->len);
		val = cbuf;
	}
	pthread_mutex_unlock(&lock);
reply:
	if (r)
		fuse_reply_err(req, r);
	else if (!size)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

static void fl_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct node *n;
	int r = 0;

	count(OP_setxattr);
	if (ino == FUSE_ROOT_ID && !strcmp(name, "user.floor.reset")) {
		for (int i = 0; i < OP_NR; i++)
			atomic_store(&counts[i], 0);
		fuse_reply_err(req, 0);
		return;
	}
	pthread_mutex_lock(&lock);
	if (!(n = get(ino))) {
		r = ENOENT;
	} else {
		struct xattr **xp = xattr_find(n, name), *x = *xp;
		if (x && (flags & XATTR_CREATE))
			r = EEXIST;
		else if (!x && (flags & XATTR_REPLACE))
			r = ENODATA;
		else if (!x) {
			x = calloc(1, sizeof(*x));
			x->name = strdup(name);
			*xp = x;
		}
		if (!r) {
			free(x->val);
			x->val = malloc(size ? size : 1);
			memcpy(x->val, value, size);
			x->len = size;
			touch(n, false);
		}
	}
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, r);
}

static void fl_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char buf[4096];
	size_t len = 0;
	struct node *n;

	count(OP_listxattr);
	pthread_mutex_lock(&lock);
	if ((n = get(ino)))
		for (struct xattr *x = n->xattrs; x; x = x->next) {
			size_t l = strlen(x->name) + 1;
			if (len + l <= sizeof(buf))
				memcpy(buf + len, x->name, l);
			len += l;
		}
	pthread_mutex_unlock(&lock);
	if (!n)
		fuse_reply_err(req, ENOENT);
	else if (!size)
		fuse_reply_xattr(req, len);
	else if (size < len || len > sizeof(buf))
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, len);
}

static void fl_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct node *n;
	int r = ENODATA;

	count(OP_removexattr);
	pthread_mutex_lock(&lock);
	if ((n = get(ino))) {
		struct xattr **xp = xattr_find(n, name), *x = *xp;
		if (x) {
			*xp = x->next;
			free(x->name);
			free(x->val);
			free(x);
			touch(n, false);
			r = 0;
		}
	}
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, r);
}

static void fl_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct node *n;
	int r = 0;

	(void)fi;
	count(OP_fallocate);
	pthread_mutex_lock(&lock);
	if (!(n = get(ino)))
		r = ENOENT;
	else if (mode & ~FALLOC_FL_KEEP_SIZE)
		r = EOPNOTSUPP;
	else if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > n->st.st_size)
		n->st.st_size = off + len;	/* holes read as zeros */
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, r);
}

static struct fuse_lowlevel_ops ops = {
	.init		= fl_init,
	.lookup		= fl_lookup,
	.forget		= fl_forget,
	.forget_multi	= fl_forget_multi,
	.getattr	= fl_getattr,
	.setattr	= fl_setattr,
	.readlink	= fl_readlink,
	.mknod		= fl_mknod,
	.mkdir		= fl_mkdir,
	.symlink	= fl_symlink,
	.link		= fl_link,
	.unlink		= fl_unlink,
	.rmdir		= fl_rmdir,
	.rename		= fl_rename,
	.open		= fl_open,
	.create		= fl_create,
	.read		= fl_read,
	.write		= fl_write,
	.release	= fl_release,
	.fsync		= fl_fsync,
	.opendir	= fl_opendir,
	.readdir	= fl_readdir,
	.readdirplus	= fl_readdirplus,
	.releasedir	= fl_releasedir,
	.fsyncdir	= fl_fsyncdir,
	.statfs		= fl_statfs,
	.setxattr	= fl_setxattr,
	.getxattr	= fl_getxattr,
	.listxattr	= fl_listxattr,
	.removexattr	= fl_removexattr,
	.fallocate	= fl_fallocate,
};

/* one -o word of ours; false if it is not one */
static bool floor_opt(const char *o)
{
	static const struct { const char *name; bool *v; } sw[] = {
		{ "wbc", &o_wbc }, { "killpriv", &o_killpriv }, { "noacl", &o_noacl },
		{ "noexport", &o_noexport }, { "noplus", &o_noplus }, { "noplusauto", &o_noplusauto },
		{ "cachesym", &o_cachesym }, { "noparallel", &o_noparallel }, { "cachedir", &o_cachedir },
		{ "nodirect", &o_nodirect }, { "flush", &o_flush }, { "noneg", &o_noneg },
		{ "noxattr", &o_noxattr }, { "noopen", &o_noopen },
		{ "noperm", &o_noperm }, { "rwdirect", &o_rwdirect }, { "nocreate", &o_nocreate },
		{ "nokillpriv2", &o_nokillpriv2 },
	};

	for (size_t i = 0; i < sizeof(sw) / sizeof(sw[0]); i++)
		if (!strcmp(o, sw[i].name)) {
			*sw[i].v = true;
			return true;
		}
	if (!strncmp(o, "timeout=", 8)) {
		char *end;
		timeout = strtod(o + 8, &end);
		if (*end || timeout < 0) {
			fprintf(stderr, "fuse-floor: bad %s\n", o);
			exit(2);
		}
		return true;
	}
	return false;
}

static void usage(void)
{
	fprintf(stderr, "usage: fuse-floor [-f] [-d] [-o wbc,killpriv,nokillpriv2,noacl,noexport,noplus,noplusauto,"
		"cachesym,noparallel,cachedir,nodirect,flush,noneg,noxattr,noopen,noperm,rwdirect,nocreate,timeout=S] MOUNTPOINT\n"
		"A measuring instrument (bench/fuse_floor.sh), not a filesystem: all in memory.\n");
}

int main(int argc, char **argv)
{
	const char *mnt = NULL;
	bool debug = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			char *list = strdup(argv[++i]), *save, *o;
			for (o = strtok_r(list, ",", &save); o; o = strtok_r(NULL, ",", &save))
				if (!floor_opt(o)) {
					fprintf(stderr, "fuse-floor: unknown option %s\n", o);
					usage();
					return 2;
				}
			free(list);
		} else if (!strcmp(argv[i], "-d")) {
			debug = true;
		} else if (!strcmp(argv[i], "-f")) {
			continue;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage();
			return 0;
		} else if (!mnt && argv[i][0] != '-') {
			mnt = argv[i];
		} else {
			usage();
			return 2;
		}
	}
	if (!mnt) {
		usage();
		return 2;
	}
	if (!o_flush)
		ops.flush = NULL;
	else
		ops.flush = fl_flush;
	if (o_noxattr)
		ops.getxattr = NULL, ops.setxattr = NULL, ops.listxattr = NULL, ops.removexattr = NULL;

	new_node(0, NULL, 0);			/* number 0: unused */
	new_node(S_IFDIR | 0755, NULL, 0);	/* FUSE_ROOT_ID */
	nodes[FUSE_ROOT_ID]->nlookup = 1;

	char opts[256];
	snprintf(opts, sizeof(opts), "%sfsname=fuse-floor,subtype=floor%s",
		 o_noperm ? "" : "default_permissions,", geteuid() ? "" : ",suid,dev");
	char *fargv[] = { "fuse-floor", "-o", opts, debug ? "-d" : NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(debug ? 4 : 3, fargv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	int ret = 1;
	if (fuse_set_signal_handlers(se))
		goto destroy;
	if (fuse_session_mount(se, mnt)) {
		fprintf(stderr, "fuse-floor: could not mount on %s\n", mnt);
		goto signals;
	}
	static const struct fuse_custom_io io = { .read = floor_read, .writev = floor_writev };
	fuse_session_custom_io(se, &io, fuse_session_fd(se));
	/* as fusemount's loop (fusemount.h LOOP_IDLE_THREADS): idle workers kept */
	struct fuse_loop_config config = { .clone_fd = 0, .max_idle_threads = UINT_MAX };
	ret = fuse_session_loop_mt(se, &config) ? 1 : 0;
	fuse_session_unmount(se);
signals:
	fuse_remove_signal_handlers(se);
destroy:
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return ret;
}
