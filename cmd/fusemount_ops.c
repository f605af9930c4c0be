// SPDX-License-Identifier: GPL-2.0
/*
 * fusemount_ops.c - the FUSE low-level operations (fm_ops): each
 * names its request type, takes the engine lock through fusemount_req.c,
 * calls the library (fs_ops.h, fs_read.h) and replies.  Reads, and writes
 * that are large or of whole blocks, run their device I/O outside the lock
 * (cmd_fusemount.c's header); the ends of planned writes are combined
 * (end_write()).
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

/* ------------------------------------------------------------ requests */

/*
 * The kernel's killpriv handshake, FUSE_HANDLE_KILLPRIV_V2.  Without it the
 * kernel keeps no S_NOSEC for a FUSE inode: before every buffered write it
 * asks GETXATTR security.capability (16,385 of them for 16,384 random 4 KiB
 * writes: one request in two), and before every chown a GETATTR.  With it
 * the kernel asks once per inode and leaves the set-id rule to the daemon,
 * which applies all of it already (fm_kill_priv() on writes, truncates,
 * fallocate, open O_TRUNC and copies; chown_kill_bits() on chown); fm_kill_caps()
 * then runs on every write, not only on direct ones, so a capability set
 * through another mountpoint or a command still goes.  libfuse 3.14 of
 * Debian 12 neither offers nor passes the flag (3.16 does:
 * FUSE_CAP_HANDLE_KILLPRIV_V2), so the session's own I/O
 * (fuse_session_custom_io(): the same read(2) and writev(2) libfuse makes)
 * adds it to the INIT reply when the kernel offered it in INIT.  errno is
 * left as the call set it: libfuse reads it after.
 */
static ssize_t sess_read(int fd, void *buf, size_t len, void *userdata)
{
	struct fsess *s = userdata;
	ssize_t r = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	if (r >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags2)) &&
	    in->opcode == FUSE_INIT) {
		const struct fuse_init_in *init = (const void *)(in + 1);

		s->init_unique = in->unique;
		s->init_offers_v2 = init->flags & FUSE_HANDLE_KILLPRIV_V2;
	}
	return r;
}

static ssize_t sess_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fsess *s = userdata;

	if (s->init_unique && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    ((struct fuse_out_header *)iov[0].iov_base)->unique == s->init_unique) {
		struct fuse_out_header *out = iov[0].iov_base;

		s->init_unique = 0;
		if (!out->error && s->init_offers_v2 &&
		    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
			((struct fuse_init_out *)iov[1].iov_base)->flags |= FUSE_HANDLE_KILLPRIV_V2;
			s->killpriv_v2 = true;
		}
	}
	return writev(fd, iov, count);
}

/* Before session_mount()'s INIT is read: the session's I/O is sess_read()'s and sess_writev()'s. */
int fm_sess_own_io(struct fsess *s)
{
	static const struct fuse_custom_io io = { .read = sess_read, .writev = sess_writev };

	return fm_lf->session_custom_io(s->se, &io, fm_lf->session_fd(s->se));
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fmount *m = ((struct fsess *)userdata)->m;

	pthread_mutex_lock(&m->sess_mu);
	m->live++;
	pthread_mutex_unlock(&m->sess_mu);
	/*
	 * The root is never looked up, yet its kernel inode lives as long as
	 * the session (no forget comes for it): held, so what is kept per held
	 * inode is kept for it too (a change a replacement lost: fm_changed(),
	 * fm_lost_check(); the caches of struct held).  One hold a session.
	 */
	LOCK(m);
	fm_hold(m, BCH_ROOT_INO, 1);
	UNLOCK(m);
	/*
	 * No writeback cache: with it the kernel acknowledges write(2) from its
	 * page cache and our ENOSPC arrives at writeback, where only close or
	 * fsync may report it.  Every write reaches us while the caller waits.
	 */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/*
	 * No asynchronous direct I/O: the kernel turns a short reply to an
	 * async O_DIRECT write (what fits on a full filesystem) into EIO; the
	 * synchronous path returns the short count, as ext4 does.
	 */
	conn->want &= ~FUSE_CAP_ASYNC_DIO;
	/* file handles: the kernel may look up "." and ".." (op_lookup) */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want &= ~FUSE_CAP_SPLICE_READ;
	/*
	 * The kernel clears set-id bits on chown itself, and on writes,
	 * truncates and fallocate only S_ISUID and S_ISGID with group-execute
	 * (fuse_setattr()); fm_kill_priv() applies the whole rule on those, and
	 * chown_kill_bits() on chown.  FUSE_CAP_HANDLE_KILLPRIV would spare the
	 * GETATTR the kernel sends before every chown, but libfuse 3.14 of
	 * Debian 12 never passes it to the kernel (libfuse issue 884, fixed in
	 * 3.16), and it does not offer FUSE_CAP_HANDLE_KILLPRIV_V2: the
	 * session's own I/O takes that one (sess_read()).
	 */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/*
	 * POSIX ACLs: the kernel enforces them; we keep mode and ACL in step and
	 * give new files their directory's default ACL, so the umask is ours to
	 * apply (only when there is no default ACL).
	 */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	conn->max_write = 1 << 20;
	/*
	 * The kernel keeps cached pages when a file's mtime moves: this daemon
	 * is the only writer, the kernel's own writes update its pages, and a
	 * change made through another mountpoint is notified with its range
	 * (invariant 9).  With auto_inval_data the first stat after writing a
	 * large file dropped every cached page of it (130 ms for 1 GiB).
	 */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA)
		conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
}

/* A session ends; the last one frees what the kernels no longer hold. */
static void op_destroy(void *userdata)
{
	struct fmount *m = ((struct fsess *)userdata)->m;

	/*
	 * A session that goes while others stay drops its lookups and opens
	 * without forgets: what it held is kept until the last one goes.
	 */
	pthread_mutex_lock(&m->sess_mu);
	bool last = !--m->live;
	pthread_mutex_unlock(&m->sess_mu);
	if (!last)
		return;
	LOCK(m);
	fm_lazy_flush_all(m);
	fm_frees_run(m);
	/* inodes unlinked while open: nothing holds them any more */
	for (size_t i = 0; i < m->cap_held; i++) {
		struct stat st;
		uint64_t inum = m->held[i].inum;
		if (inum && !m->read_only && !bch_fs_getattr(m->c, inum, &st) && !st.st_nlink)
			bch_fs_inode_free(m->c, inum);
	}
	UNLOCK(m);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fm_req_type(REQ_lookup);
	struct fmount *m = fm_mount(req);
	struct fuse_entry_param e;
	uint64_t inum;

	LOCK(m);
	/*
	 * "." of any inode: how the kernel finds an inode by number alone, for
	 * open_by_handle_at and NFS export of an inode it does not hold (EXPORT_SUPPORT)
	 */
	int r = 0;
	if (!strcmp(name, "."))
		inum = fm_from_fuse(parent);
	else
		r = bch_fs_lookup(m->c, fm_from_fuse(parent), name, &inum);
	if (!r)
		r = fm_make_entry(m, inum, &e);
	UNLOCK(m);
	if (r == -ENOENT) {
		/* a negative entry the kernel may cache */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fm_cache_timeout(m);
		fm_lf->reply_entry(req, &e);
	} else if (r) {
		fm_lf->reply_err(req, -r);
	} else {
		fm_lf->reply_entry(req, &e);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fm_req_type(REQ_forget);
	struct fmount *m = fm_mount(req);

	LOCK(m);
	fm_unhold(m, fm_from_fuse(ino), nlookup);
	UNLOCK(m);
	fm_lf->reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	fm_req_type(REQ_forget_multi);
	struct fmount *m = fm_mount(req);

	LOCK(m);
	for (size_t i = 0; i < count; i++)
		fm_unhold(m, fm_from_fuse(forgets[i].ino), forgets[i].nlookup);
	UNLOCK(m);
	fm_lf->reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fm_req_type(REQ_getattr);
	struct fmount *m = fm_mount(req);
	struct stat st;
	(void)fi;

	LOCK(m);
	int r = fm_getattr(m, fm_from_fuse(ino), &st);
	UNLOCK(m);
	if (r)
		fm_lf->reply_err(req, -r);
	else {
		fm_fix_st(&st);
		fm_lf->reply_attr(req, &st, fm_cache_timeout(m));
	}
}

/*
 * Linux's setattr_prepare(): a mode keeps S_ISGID only for a member of the
 * file's (new) group or with CAP_FSETID.  The kernel checks it too, but not
 * on the mode it sends itself to drop S_ISUID before a write (6766 written
 * by a non-member must become 0766).  Lock held.
 */
static int chmod_strip_sgid(fuse_req_t req, struct fmount *m, uint64_t inum, int to_set,
			    const struct stat *attr, mode_t *mode)
{
	struct stat st;
	int r = bch_fs_getattr(m->c, inum, &st);

	if (r)
		return r;
	struct bch_caller *cr = fm_caller_new(req);
	if (!cr)
		return -ENOMEM;
	if (!cr->cap_fsetid &&
	    !bch_caller_in_group(cr, (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : st.st_gid))
		*mode &= ~S_ISGID;
	free(cr);
	return 0;
}

/*
 * chown or chgrp of a non-directory (chown_common(), setattr_should_drop_sgid()):
 * S_ISUID goes whoever the caller is; S_ISGID goes with group-execute, or
 * when the caller is neither in the file's group (the one before the change)
 * nor has CAP_FSETID.  The kernel's fuse_setattr() sends the first two
 * and recomputes the mode without the last (a chgrp by an owner outside
 * the file's group kept S_ISGID).  The set-id bits to clear; lock held.
 */
static mode_t chown_kill_bits(fuse_req_t req, const struct stat *st)
{
	mode_t kill = 0;

	if (S_ISDIR(st->st_mode))
		return 0;
	if (st->st_mode & S_ISUID)
		kill |= S_ISUID;
	if ((st->st_mode & S_ISGID) && (st->st_mode & S_IXGRP)) {
		kill |= S_ISGID;
	} else if (st->st_mode & S_ISGID) {
		struct bch_caller *cr = fm_caller_new(req);
		if (!cr || (!cr->cap_fsetid && !bch_caller_in_group(cr, st->st_gid)))
			kill |= S_ISGID;	/* no memory: the safe side */
		free(cr);
	}
	return kill;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	fm_req_type(REQ_setattr);
	struct fsess *se = fm_session(req);
	struct fmount *m = se->m;
	struct bch_setattr sa = { 0 };
	struct stat st;
	(void)fi;

	if (to_set & FUSE_SET_ATTR_MODE) {
		sa.valid |= BCH_SETATTR_MODE;
		sa.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		sa.valid |= BCH_SETATTR_UID;
		sa.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		sa.valid |= BCH_SETATTR_GID;
		sa.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		sa.valid |= BCH_SETATTR_SIZE;
		sa.size = attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME) {
		sa.valid |= BCH_SETATTR_ATIME;
		sa.atime = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? BCH_TIME_NOW : fm_ts_ns(attr->st_atim);
	}
	if (to_set & FUSE_SET_ATTR_MTIME) {
		sa.valid |= BCH_SETATTR_MTIME;
		sa.mtime = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? BCH_TIME_NOW : fm_ts_ns(attr->st_mtim);
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		sa.valid |= BCH_SETATTR_CTIME;
		sa.ctime = fm_ts_ns(attr->st_ctim);
	}
	LOCK(m);
	int r = 0;
	bool chown_rule = to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID);
	/*
	 * Under KILLPRIV_V2 chown(f, -1, -1) reaches us as nothing to set, with
	 * no flag to tell it (the kernel sends FATTR_KILL_SUIDGID only with an
	 * owner or group), right after its need-killpriv GETXATTR
	 * security.capability from the same caller: that pair takes the chown
	 * rule, as Linux clears the bits of any chown of a file.
	 */
	bool probed = se->caps_probe_ino == ino && se->caps_probe_pid == fm_lf->req_ctx(req)->pid;
	se->caps_probe_ino = 0;
	if ((to_set & FUSE_SET_ATTR_MODE) && (sa.mode & S_ISGID))
		r = chmod_strip_sgid(req, m, fm_from_fuse(ino), to_set, attr, &sa.mode);
	if (r) {
		/* nothing more */
	} else if (!(to_set & ~FUSE_SET_ATTR_CTIME) && probed) {
		chown_rule = true;
	} else if (!(to_set & ~FUSE_SET_ATTR_CTIME)) {
		/*
		 * Nothing to set: the kernel's file_remove_privs() before a write
		 * through its cache (writeback), from the writer.  Its fuse_setattr()
		 * drops the mode it would not change itself (S_ISGID without
		 * group-execute); the rule is ours.
		 */
		r = fm_kill_priv(req, m, fm_from_fuse(ino));
	} else if (to_set & FUSE_SET_ATTR_SIZE) {
		/* truncate clears set-id bits as a write does; a mode set with it wins */
		r = fm_kill_priv(req, m, fm_from_fuse(ino));
		if (!r && (to_set & FUSE_SET_ATTR_MODE) && !bch_fs_getattr(m->c, fm_from_fuse(ino), &st))
			sa.mode &= ~(S_ISUID | S_ISGID) | st.st_mode;
	}
	/* no set-id bit to kill when known plain (fm_sec_plain()): no inode read */
	if (!r && chown_rule && !fm_sec_plain(m, fm_from_fuse(ino)) &&
	    !(r = bch_fs_getattr(m->c, fm_from_fuse(ino), &st))) {
		mode_t kill = chown_kill_bits(req, &st);
		if (kill) {
			if (!(sa.valid & BCH_SETATTR_MODE))
				sa.mode = st.st_mode;
			sa.valid |= BCH_SETATTR_MODE;
			sa.mode &= ~kill;
		}
	}
	if (!r && (sa.valid & BCH_SETATTR_MODE))
		fm_sec_mode(m, fm_from_fuse(ino), sa.mode);	/* setattr keeps sec_gen */
	/* chmod: the access ACL's owner, mask and other entries follow the mode */
	char acl[4096];
	ssize_t n = 0;
	bool have_st = false;
	if (!r && (to_set & FUSE_SET_ATTR_MODE) && !fm_acl_none(m, fm_from_fuse(ino)) &&
	    (n = bch_fs_getxattr(m->c, fm_from_fuse(ino), BCH_ACL_XATTR_ACCESS, acl, sizeof(acl))) > 0 &&
	    bch_acl_valid(acl, n))
		bch_acl_chmod(acl, n, sa.mode);
	else {
		if (n == -ENODATA)
			fm_acl_none_set(m, fm_from_fuse(ino));
		n = 0;
	}
	if (r) {
		/* nothing more */
	} else if (n && !(to_set & ~(FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_CTIME))) {
		r = bch_fs_set_acl(m->c, fm_from_fuse(ino), acl, n, sa.mode);	/* one transaction */
	} else if (!n) {
		/* the reply's attributes from the update itself: one inode read less */
		r = bch_fs_setattr_stat(m->c, fm_from_fuse(ino), &sa, &st);
		have_st = !r;
	} else if (!(r = bch_fs_setattr(m->c, fm_from_fuse(ino), &sa))) {
		fm_changed(m, fm_from_fuse(ino));	/* committed, whatever the ACL's fate */
		r = bch_fs_setxattr(m->c, fm_from_fuse(ino), BCH_ACL_XATTR_ACCESS, acl, n, 0);
	}
	if (!r)
		fm_changed(m, fm_from_fuse(ino));
	if (!r && (to_set & FUSE_SET_ATTR_ATIME))
		fm_lazy_drop(m, fm_from_fuse(ino));
	if (have_st)
		fm_lazy_stat(m, fm_from_fuse(ino), &st);
	else if (!r)
		r = fm_getattr(m, fm_from_fuse(ino), &st);
	UNLOCK(m);
	if (r) {
		fm_lf->reply_err(req, -r);
		return;
	}
	/*
	 * The others told before the reply (fm_notify_sessions()): a reader
	 * through another mountpoint read a truncated file's old bytes from its
	 * page cache after truncate(2) had returned (t117, 59 of 100).
	 */
	bool told = true;

	if (to_set & FUSE_SET_ATTR_SIZE)
		told = fm_others_pages(se, ino, 0, 0);
	else
		fm_others_attrs(se, ino);
	fm_fix_st(&st);
	fm_lf->reply_attr(req, &st, fm_cache_timeout(m));
	if (!told)
		fm_others_pages_after(se, ino, 0, 0);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	fm_req_type(REQ_readlink);
	struct fmount *m = fm_mount(req);
	char buf[4096];

	LOCK(m);
	ssize_t n = bch_fs_readlink(m->c, fm_from_fuse(ino), buf, sizeof(buf));
	if (n >= 0)
		fm_read_atime(m, fm_session(req), fm_from_fuse(ino));
	UNLOCK(m);
	if (n < 0)
		fm_lf->reply_err(req, (int)-n);
	else
		fm_lf->reply_readlink(req, buf);
}

/*
 * What create_acl() made: the inode, and its attributes as the create
 * wrote them (st_ok: no inherited ACL changed them after), so the reply's
 * entry needs no inode read.
 */
struct made {
	uint64_t	inum;
	struct stat	st;
	int64_t		btime;
	bool		st_ok;
};

static void reply_new(fuse_req_t req, struct fmount *m, int r, const struct made *mk, fuse_ino_t parent,
		      const char *name)
{
	struct fsess *se = fm_session(req);
	struct fuse_entry_param e;
	uint64_t inum = mk->inum;

	if (!r)
		r = fm_make_entry_from(m, inum, mk->st_ok ? &mk->st : NULL, mk->btime, &e);
	if (!r) {
		fm_changed(m, inum);
		fm_changed(m, fm_from_fuse(parent));
	}
	UNLOCK(m);
	if (r) {
		fm_lf->reply_err(req, -r);
		return;
	}
	fm_others_attrs(se, fm_to_fuse(inum));		/* a link: its count */
	fm_lf->reply_entry(req, &e);
	fm_others_entry(se, parent, name);
}

/*
 * Create with what a kernel filesystem does to the mode: the parent's
 * default ACL, when it has one, becomes the new file's access ACL (limited by
 * the requested mode) and, for directories, its default ACL too; otherwise
 * the umask applies.  *no_acl (when not NULL): made without an access ACL.
 * Lock held.
 */
static int create_acl(struct fmount *m, fuse_req_t req, uint64_t parent, const char *name, mode_t mode,
		      dev_t rdev, const char *symlink_target, struct made *mk, bool *no_acl)
{
	const struct fuse_ctx *ctx = fm_lf->req_ctx(req);
	char def[4096], acc[4096];
	struct stat dir;
	gid_t gid = ctx->gid;
	ssize_t n = symlink_target ? -ENODATA : fm_default_acl(m, parent, def, sizeof(def));
	bool inherit = n > 0 && bch_acl_valid(def, n);
	int r;

	if (no_acl)
		*no_acl = !inherit;

	/* known without S_ISGID: nothing of it is needed (one inode read less a create) */
	if (fm_dir_nosgid(m, parent)) {
		dir = (struct stat){ .st_mode = S_IFDIR };
	} else if ((r = bch_fs_getattr(m->c, parent, &dir))) {
		return r;
	} else if (!(dir.st_mode & S_ISGID)) {
		fm_dir_nosgid_set(m, parent);
	}
	/* a setgid directory: as Linux's vfs_prepare_mode() and inode_init_owner() */
	if ((dir.st_mode & S_ISGID) && (mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) {
		struct bch_caller *cr = fm_caller_new(req);
		if (!cr)
			return -ENOMEM;
		mode = bch_mode_strip_sgid(dir.st_mode, dir.st_gid, cr, mode);
		free(cr);
	}
	if (inherit)
		bch_acl_create_masq(def, n, acc, &mode);
	else if (!symlink_target)
		mode &= ~(ctx->umask & 0777);
	bch_inode_init_owner(dir.st_mode, dir.st_gid, &mode, &gid);
	r = bch_fs_create_stat(m->c, parent, name, mode, rdev, ctx->uid, gid, symlink_target, &mk->inum,
			       &mk->st, &mk->btime);
	mk->st_ok = !r && !inherit;
	if (r || !inherit)
		return r;
	if (!bch_acl_is_equiv_mode(acc, n))
		r = fm_test_gate(m, "acl-fail") ? -EIO
			: bch_fs_setxattr(m->c, mk->inum, BCH_ACL_XATTR_ACCESS, acc, n, 0);
	if (!r && S_ISDIR(mode))
		r = bch_fs_setxattr(m->c, mk->inum, BCH_ACL_XATTR_DEFAULT, def, n, 0);
	if (!r)
		return 0;
	/*
	 * The ACL failed after the name was made: the create fails whole, as
	 * a kernel filesystem's does (the name removed, the inode freed: the
	 * kernel never knew it), and the directory changed all the same: an
	 * fsync of it after a replacement that lost the change reports it
	 * (fm_changed(); t118: it answered 0, and the name stayed, hidden
	 * behind the kernel's negative entry).
	 */
	fm_changed(m, parent);
	if (!(S_ISDIR(mode) ? bch_fs_rmdir : bch_fs_unlink)(m->c, parent, name))
		bch_fs_inode_free(m->c, mk->inum);
	return r;
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct fmount *m = fm_mount(req);
	struct made mk = { 0 };

	LOCK(m);
	int r = create_acl(m, req, fm_from_fuse(parent), name, mode, rdev, NULL, &mk, NULL);
	reply_new(req, m, r, &mk, parent, name);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	fm_req_type(REQ_mknod);
	make_node(req, parent, name, mode, rdev);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	fm_req_type(REQ_mkdir);
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fm_req_type(REQ_symlink);
	struct fmount *m = fm_mount(req);
	struct made mk = { 0 };

	LOCK(m);
	int r = create_acl(m, req, fm_from_fuse(parent), name, S_IFLNK | 0777, 0, link, &mk, NULL);
	reply_new(req, m, r, &mk, parent, name);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fm_req_type(REQ_link);
	struct fmount *m = fm_mount(req);

	LOCK(m);
	int r = bch_fs_link(m->c, fm_from_fuse(ino), fm_from_fuse(newparent), newname);
	struct made mk = { .inum = fm_from_fuse(ino) };	/* its link count changed: read */
	reply_new(req, m, r, &mk, newparent, newname);
}

/* The inode a name stands for, when other sessions are to hear of it; 0 if none.  Lock held. */
static uint64_t name_inum(struct fmount *m, fuse_ino_t parent, const char *name)
{
	uint64_t inum = 0;

	if (atomic_load(&m->nr_sess) < 2 || bch_fs_lookup(m->c, fm_from_fuse(parent), name, &inum))
		return 0;
	return inum;
}

/*
 * A name went (unlink, rmdir, a rename's target): the others forget its
 * inode's link count before the reply, the name after (fm_notify_sessions()).
 */
static void others_gone_inode(struct fsess *se, uint64_t inum)
{
	if (inum)
		fm_others_attrs(se, fm_to_fuse(inum));
}

/* unlink or rmdir: the space of the queued frees first if it runs short (fm_frees_run()) */
static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	fm_req_type(dir ? REQ_rmdir : REQ_unlink);
	struct fsess *se = fm_session(req);
	struct fmount *m = se->m;
	int (*remove)(struct bch_fs *, uint64_t, const char *) = dir ? bch_fs_rmdir : bch_fs_unlink;

	LOCK(m);
	uint64_t inum = name_inum(m, parent, name);
	int r = remove(m->c, fm_from_fuse(parent), name);
	if (r == -ENOSPC && m->nr_free_pending) {
		fm_frees_run(m);
		r = remove(m->c, fm_from_fuse(parent), name);
	}
	if (!r)
		fm_changed(m, fm_from_fuse(parent));
	UNLOCK(m);
	if (!r)
		others_gone_inode(se, inum);
	fm_lf->reply_err(req, -r);
	if (!r)
		fm_others_entry(se, parent, name);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, true);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	fm_req_type(REQ_rename);
	struct fsess *se = fm_session(req);
	struct fmount *m = se->m;
	unsigned f = 0;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
		fm_lf->reply_err(req, EINVAL);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		f |= BCH_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		f |= BCH_RENAME_EXCHANGE;
	LOCK(m);
	uint64_t target = name_inum(m, newparent, newname);
	/* RENAME_WHITEOUT (overlayfs): the kernel checked who may; the whiteout is the caller's */
	const struct fuse_ctx *ctx = fm_lf->req_ctx(req);
	int r = (flags & RENAME_WHITEOUT)
		? bch_fs_rename_whiteout(m->c, fm_from_fuse(parent), name, fm_from_fuse(newparent), newname, f,
					 ctx->uid, ctx->gid)
		: bch_fs_rename(m->c, fm_from_fuse(parent), name, fm_from_fuse(newparent), newname, f);
	if (!r) {
		fm_changed(m, fm_from_fuse(parent));
		fm_changed(m, fm_from_fuse(newparent));
	}
	UNLOCK(m);
	if (!r)
		others_gone_inode(se, target);
	fm_lf->reply_err(req, -r);
	if (!r) {
		fm_others_entry(se, parent, name);
		fm_others_entry(se, newparent, newname);
	}
}

/*
 * may_open(): an immutable file opens for reading only; an append-only one
 * for writing only with O_APPEND, never with O_TRUNC.  (The kernel knows no
 * FUSE file's flags, so the open is refused here.)  Lock held.
 */
static int open_flags_check(unsigned fl, int oflags)
{
	bool write = (oflags & O_ACCMODE) != O_RDONLY || (oflags & O_TRUNC);

	if (!write)
		return 0;
	if (fl & FS_IMMUTABLE_FL)
		return -EPERM;
	if ((fl & FS_APPEND_FL) && (!(oflags & O_APPEND) || (oflags & O_TRUNC)))
		return -EPERM;
	return 0;
}

/*
 * A file opened write-only bypasses the kernel's page cache (direct_io).
 * Its pages would be of no use: write-through already sends every write
 * here, and the first read after a write drops them anyway while atime is
 * due (op_open), which for a large file costs more than writing it (76 ms
 * a GiB).  It also spares the kernel's security.capability lookup before
 * every buffered write (file_remove_privs): the daemon kills privileges
 * itself on a direct write (op_write).  An O_WRONLY descriptor cannot be
 * mapped or executed, so nothing else changes for its user; pages another
 * descriptor holds are dropped by the kernel over the written range.
 */
#define FH_DIRECT	1	/* fi->fh: opened direct_io (the kernel does not send the flag back) */
#define FH_SHIFT	1	/* above it, the handle's number (fm_fh_new(), fm_lost_check()) */

static void set_direct(struct fuse_file_info *fi, uint64_t fh)
{
	fi->direct_io = (fi->flags & O_ACCMODE) == O_WRONLY;
	fi->fh = fh << FH_SHIFT | (fi->direct_io ? FH_DIRECT : 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fm_req_type(REQ_open);
	struct fmount *m = fm_mount(req);
	struct stat st;
	unsigned fl;

	LOCK(m);
	/* one inode read for the open: its type, its flags and (below) its atime */
	int r = bch_fs_getattr_flags(m->c, fm_from_fuse(ino), &st, &fl);
	if (!r)
		r = open_flags_check(fl, fi->flags);
	if (!r && (fi->flags & O_TRUNC) && S_ISREG(st.st_mode))
		r = fm_kill_priv(req, m, fm_from_fuse(ino));
	/* POSIX open(): O_TRUNC of a file that existed moves mtime and ctime, empty or not */
	if (!r && (fi->flags & O_TRUNC) && S_ISREG(st.st_mode)) {
		struct bch_setattr sa = { .valid = BCH_SETATTR_SIZE, .size = 0 };
		r = bch_fs_setattr(m->c, fm_from_fuse(ino), &sa);
	}
	/*
	 * Reads the kernel answers from its cache never reach us: when the next
	 * read is to update atime, the cache goes (keep_cache 0), so it does.
	 * An empty file's reads never come (nothing to read): atime at open.
	 */
	bool due = false;
	uint64_t fh = 0;
	if (!r && (fi->flags & O_ACCMODE) != O_WRONLY && !(fi->flags & O_NOATIME) &&
	    !(fi->flags & O_TRUNC)) {
		struct stat now = st;	/* unchanged since: no O_TRUNC */
		fm_lazy_stat(m, fm_from_fuse(ino), &now);
		due = fm_atime_due(m, fm_session(req), &now, fm_ts_ns(now.st_atim), bch_now_ns()) &&
		      !(fl & FS_NOATIME_FL);
		if (due && !now.st_size)
			fm_read_atime(m, fm_session(req), fm_from_fuse(ino));
	}
	if (!r) {
		fm_hold(m, fm_from_fuse(ino), 1);
		fm_open_count(m, ino, 1);
		fh = fm_fh_new(m);
		if ((fi->flags & O_TRUNC) && S_ISREG(st.st_mode))
			fm_changed(m, fm_from_fuse(ino));
	}
	UNLOCK(m);
	if (r) {
		fm_lf->reply_err(req, -r);
		return;
	}
	/* the kernel forgets a cached atime after a read, not after an open */
	if (due)
		fm_lf->lowlevel_notify_inval_inode(fm_session(req)->se, ino, -1, 0);
	/*
	 * O_TRUNC truncated: the others drop the file's pages and size before
	 * open(2) returns, as after truncate(2) (op_setattr()); a reader
	 * through another mountpoint read the old bytes from its page cache
	 * with no notice at all (t117, 100 of 100).
	 */
	bool told = !(fi->flags & O_TRUNC) || !S_ISREG(st.st_mode) ||
		    fm_others_pages(fm_session(req), ino, 0, 0);

	fi->keep_cache = !due;
	set_direct(fi, fh);
	fm_lf->reply_open(req, fi);
	if (!told)
		fm_others_pages_after(fm_session(req), ino, 0, 0);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	fm_req_type(REQ_create);
	struct fsess *se = fm_session(req);
	struct fmount *m = se->m;
	struct fuse_entry_param e;
	struct made mk = { 0 };
	uint64_t fh = 0;
	bool no_acl;

	LOCK(m);
	int r = create_acl(m, req, fm_from_fuse(parent), name, S_IFREG | (mode & 07777), 0, NULL, &mk,
			   &no_acl);
	uint64_t inum = mk.inum;
	if (!r)
		r = fm_make_entry_from(m, inum, mk.st_ok ? &mk.st : NULL, mk.btime, &e);
	if (!r) {
		fm_hold(m, inum, 1);	/* the open file */
		fm_open_count(m, fm_to_fuse(inum), 1);
		fh = fm_fh_new(m);
		fm_changed(m, inum);
		fm_changed(m, fm_from_fuse(parent));
		fm_sec_new(m, inum, e.attr.st_mode);	/* its first write looks up nothing */
		if (no_acl)
			fm_acl_none_set(m, inum);	/* nor its chmod */
	}
	UNLOCK(m);
	if (r) {
		fm_lf->reply_err(req, -r);
		return;
	}
	set_direct(fi, fh);
	fm_lf->reply_create(req, &e, fi);
	fm_others_entry(se, parent, name);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fm_req_type(REQ_release);
	struct fmount *m = fm_mount(req);
	(void)fi;

	LOCK(m);
	fm_unhold(m, fm_from_fuse(ino), 1);
	fm_open_count(m, ino, -1);
	UNLOCK(m);
	fm_lf->reply_err(req, 0);
}

/*
 * A read that starts near where the last one ended (the kernel's readahead
 * may send a few out of order) is sequential: plan the reading of the
 * file's next RA_WINDOW into ra, so the disk works while we reply.  Random
 * reads plan nothing.  Called under m->lock; the caller issues ra after it
 * replies, outside the lock, as asking the kernel to read is the slow part.
 */
static void readahead_hint(struct fmount *m, uint64_t inum, uint64_t off, uint64_t n,
			   struct bch_readahead *ra)
{
	uint64_t end = off + n;

	ra->nr = 0;
	if (inum == m->ra_inum && off + RA_NEAR >= m->ra_end && off <= m->ra_end + RA_NEAR) {
		uint64_t from = m->ra_hinted > end ? m->ra_hinted : end;
		if (from < end + RA_WINDOW) {
			uint64_t to = bch_data_readahead_plan(m->c, inum, from >> BCH_SECTOR_SHIFT,
							      (end + RA_WINDOW - from) >> BCH_SECTOR_SHIFT, ra);
			m->ra_hinted = to << BCH_SECTOR_SHIFT;
		}
	} else {
		m->ra_hinted = 0;
	}
	m->ra_inum = inum;
	m->ra_end = end;
}

/*
 * Each worker thread's read buffer, kept between requests: a buffer of a
 * read's size (128 KiB and up) would be a fresh mmap() per request, and
 * faulting in and zeroing its pages cost a quarter of a sequential read.
 */
struct thread_buf {
	void		*p;	/* aligned: whole extents are read straight into it */
	size_t		cap;
};
static pthread_key_t thread_buf_key;
static pthread_once_t thread_buf_once = PTHREAD_ONCE_INIT;

static void thread_buf_free(void *v)
{
	struct thread_buf *t = v;

	free(t->p);
	free(t);
}

static void thread_buf_init(void)
{
	if (pthread_key_create(&thread_buf_key, thread_buf_free))
		abort();
}

static void *thread_buf(size_t size)
{
	pthread_once(&thread_buf_once, thread_buf_init);
	struct thread_buf *t = pthread_getspecific(thread_buf_key);
	if (!t) {
		if (!(t = calloc(1, sizeof(*t))))
			return NULL;
		if (pthread_setspecific(thread_buf_key, t)) {
			free(t);
			return NULL;
		}
	}
	if (t->cap < size) {
		void *p;
		if (posix_memalign(&p, 4096, size))
			return NULL;
		free(t->p);
		t->p = p;
		t->cap = size;
	}
	return t->p;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	fm_req_type(REQ_read);
	struct fmount *m = fm_mount(req);
	struct bch_readahead ra = { 0 };
	struct bch_read_plan pl;
	struct bch_fs_read_reply rep = { 0 };	/* pieces replied from the read-ahead's slots */
	char *buf = thread_buf(size ? size : 1);

	if (!buf) {
		fm_lf->reply_err(req, ENOMEM);
		return;
	}
	/*
	 * Under the lock the plan (BCH_READ_PLAN_NEEDS), atime and readahead;
	 * the reads and checks without it (BCH_READ_RUN_NEEDS: fs_read.h).
	 * What the plan or the run cannot do is read the old way, locked.
	 */
	LOCK(m);
	bool planned = !bch_fs_read_plan(m->c, fm_from_fuse(ino), off, size, &pl), ahead = false;
	ssize_t n = planned ? (ssize_t)pl.len : bch_fs_read(m->c, fm_from_fuse(ino), off, buf, size);
	struct bch_read_plan pl_ahead;
	if (n > 0) {
		readahead_hint(m, fm_from_fuse(ino), (uint64_t)off, (uint64_t)n, &ra);
		ahead = planned && !bch_fs_read_ahead_plan(m->c, m->rac, fm_from_fuse(ino), off, n, &pl_ahead);
	}
	if (n >= 0 && !(fi->flags & O_NOATIME))
		fm_read_atime(m, fm_session(req), fm_from_fuse(ino));
	fm_need_handover(m);	/* the devices stay open until the reads and readahead are done */
	if (planned) {
		n = bch_fs_read_run_reply(m->rac, &pl, buf, &rep);
		bch_data_read_plan_free(&pl);
		atomic_fetch_add_explicit(n == -EAGAIN ? &fm_reads_redone : &fm_reads_unlocked, 1,
					  memory_order_relaxed);
		if (n == -EAGAIN) {
			fm_need_back(m);
			ra.nr = 0;	/* planned on devices that may have been reopened since */
			if (ahead)
				bch_data_read_plan_free(&pl_ahead);
			ahead = false;
			n = bch_fs_read(m->c, fm_from_fuse(ino), off, buf, size);
			fm_need_handover(m);
		}
	}
	if (n < 0)
		fm_lf->reply_err(req, (int)-n);
	else if (rep.nr)
		fm_lf->reply_iov(req, rep.iov, (int)rep.nr);
	else
		fm_lf->reply_buf(req, buf, n);
	bch_fs_read_reply_done(&rep);
	bch_data_readahead_issue(&ra);
	if (ahead)
		bch_fs_read_ahead_run(m->rac, &pl_ahead);
	fm_need_drop_devices(m);
}

/*
 * Writes of at most this many bytes that do not cover whole blocks are not
 * planned (plan_write()): their plan reads the old bytes of the partial
 * blocks and checks them again at the end, under the lock either way.
 * A 1 MiB write holds it 23 us planned against 530 us (64 MiB: 1.5 against
 * 34.1 ms), 128 KiB 6 against 68 us.
 */
#define WRITE_UNLOCKED_MIN	4096

/*
 * Whether op_write() plans a write of size bytes at off (lock held).  A
 * write of whole blocks is planned however small: the old way holds the
 * lock across the device write, a system call that the scheduler preempts
 * at its return whenever another thread woke meanwhile (and that may sleep
 * on the image file's lock), and every request then waits for the holder to
 * run again.  4 clients' 4 KiB random writes, old way: 377 of 2087 lock
 * waits' holders were preempted inside that pwrite (perf sched_switch, load
 * 6); planned, the lock is held 4-5 us twice per write instead of 12-17 us
 * once (fs timestats).  Not while a command body blocks them (writes_blocked).
 */
static bool plan_write(struct fmount *m, size_t size, off_t off)
{
	uint64_t bs = (uint64_t)m->c->sb->block_size << BCH_SECTOR_SHIFT;

	return !m->writes_blocked &&
	       (size > WRITE_UNLOCKED_MIN || (size && !(off % bs) && !(size % bs)));
}

static bool write_turn(struct fmount *m, const void *op)
{
	return bch_fs_write_turn(&m->writes, op);
}

struct writes_mark {
	uint64_t	handle, mark;
};

static bool writes_ended(struct fmount *m, const void *arg)
{
	const struct writes_mark *w = arg;

	return !bch_fs_writes_before(&m->writes, w->handle, w->mark);
}

bool fm_no_planned_writes(struct fmount *m, const void *arg)
{
	(void)arg;
	return !m->writes.planned;
}

/*
 * With ENGINE held, before an op that allocates file space beside the
 * writes (fallocate, copy_file_range): the planned writes in flight hold
 * new space until their ends free what they replace, so they end first,
 * and none is planned meanwhile; its ENOSPC is then the serial answer, as
 * a write not planned gets it (fs_ops.h, bch_fs_write_begin()).
 */
static void wait_planned_writes(struct fmount *m)
{
	m->writes_blocked++;
	fm_need_wait(m, fm_no_planned_writes, NULL);
	m->writes_blocked--;
}

/*
 * Write ends combined.  A planned write comes back from its run (the device
 * writes, without lock) to end: to add its extents under lock.  Taking lock
 * for that, while another write holds it, costs a sleep on it, and its
 * holder's unlock a wakeup: between the two, lock is held by no one while
 * the woken thread is scheduled.  So instead, when the holder has said it
 * will (ends_open: it holds lock for a write of its own), the write queues
 * itself on m->ends and sleeps until the holder has ended it (ends_run())
 * along with its own, one after the other in the same hold: one wakeup, with
 * the result, and lock never idle in between.
 *   (1) While ends_open is set, its setter holds lock and runs ends_run()
 *       before letting lock go; it clears ends_open (ends_run(close)) under
 *       ends_mu in the same hold that found no queued write to end, so a
 *       write either is queued while a holder will still look, or finds
 *       ends_open clear and takes lock itself.
 *   (2) A queued write is ended only when its turn has come
 *       (bch_fs_write_turn()); one whose turn has not waits for an earlier
 *       write of its file, and every end, here or in a thread of its own
 *       (end_turn()), is followed by ends_run() under the same hold.  So
 *       writes of one file end in the order of issue, as before.
 *   (3) Every end signals write_cond (fsync, command bodies and old-way
 *       writes wait on it), counts in the timestats, kicks background
 *       work: end_one(), whoever runs it.
 */
struct end_wait {
	struct bch_fs_write_op	*op;
	ssize_t			n;	/* bch_fs_write_end()'s result */
	bool			done;	/* under ends_mu */
	pthread_cond_t		cond;	/* done was set */
	struct end_wait		*next;
};

/* End op, whose turn has come (lock held). */
static ssize_t end_one(struct fmount *m, struct bch_fs_write_op *op)
{
	ssize_t n = bch_fs_write_end(m->c, &m->writes, op);

	pthread_cond_broadcast(&m->write_cond);
	if (op->planned)
		atomic_fetch_add_explicit(op->redone ? &fm_writes_redone : &fm_writes_unlocked, 1,
					  memory_order_relaxed);
	if (n > 0) {
		fm_changed(m, op->handle);
		m->last_write_ns = fm_mono_ns();
		fm_bg_wake(m, false);
	}
	return n;
}

/*
 * Lock held: queued writes are ended before it is let go (1).  Without
 * ends_mu: a write that reads ends_open under it a moment before takes
 * lock itself, as when it was clear.
 */
static void ends_open(struct fmount *m)
{
	__atomic_store_n(&m->ends_open, true, __ATOMIC_SEQ_CST);
}

/*
 * Lock held: end every queued write whose turn has come, until none has;
 * with close, clear ends_open once none has (1).  Without close, an empty
 * queue is seen without ends_mu: a write queued after the look is ended by
 * the close that comes before lock is let go (1), so the uncontended write
 * takes ends_mu once a hold, for the close (callgrind: ~0.2k instructions a
 * write less than three round trips).
 */
static void ends_run(struct fmount *m, bool close)
{
	if (!close && !__atomic_load_n(&m->ends, __ATOMIC_SEQ_CST))
		return;
	for (;;) {
		pthread_mutex_lock(&m->ends_mu);
		struct end_wait **pp = &m->ends, *w;
		while ((w = *pp) && !write_turn(m, w->op))
			pp = &w->next;
		if (!w) {
			if (close)
				__atomic_store_n(&m->ends_open, false, __ATOMIC_SEQ_CST);
			pthread_mutex_unlock(&m->ends_mu);
			return;
		}
		__atomic_store_n(pp, w->next, __ATOMIC_SEQ_CST);
		pthread_mutex_unlock(&m->ends_mu);

		ssize_t n = end_one(m, w->op);
		atomic_fetch_add_explicit(&fm_writes_combined, 1, memory_order_relaxed);
		pthread_mutex_lock(&m->ends_mu);
		w->n = n;
		w->done = true;
		pthread_cond_signal(&w->cond);
		pthread_mutex_unlock(&m->ends_mu);
	}
}

/*
 * Lock held: end op once its turn has come (it waits with lock released
 * meanwhile, as fm_need_wait()), ending queued writes too (2).  Lock still
 * held on return, ends_open clear.
 */
static ssize_t end_turn(struct fmount *m, struct bch_fs_write_op *op)
{
	for (;;) {
		ends_open(m);
		ends_run(m, false);
		if (write_turn(m, op))
			break;
		ends_run(m, true);	/* none left to end: its turn waits for another thread */
		/*
		 * Unless the close just ended the write it waited for (one
		 * queued after the look above): that end's broadcast came
		 * before this thread waited, so look again first.
		 */
		if (write_turn(m, op))
			continue;
		int64_t t0 = fm_mono_ns();
		pthread_cond_wait(&m->write_cond, &m->lock);
		fm_req_lock_t0 += fm_mono_ns() - t0;
	}
	ssize_t n = end_one(m, op);
	ends_run(m, true);
	return n;
}

/*
 * A planned write back from its run (DEVICES held, ENGINE not): ended by
 * the holder of lock when one has ends_open set, else under lock taken here
 * (end_turn()).  Returns with neither held.  ends_open found clear without
 * ends_mu: lock taken here, as when found clear under it.
 */
static ssize_t end_write(struct fmount *m, struct bch_fs_write_op *op)
{
	struct end_wait w = { .op = op };

	fm_need_drop_devices(m);
	if (__atomic_load_n(&m->ends_open, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&m->ends_mu);
		if (__atomic_load_n(&m->ends_open, __ATOMIC_SEQ_CST)) {
			struct end_wait **pp = &m->ends;
			while (*pp)
				pp = &(*pp)->next;
			pthread_cond_init(&w.cond, NULL);
			__atomic_store_n(pp, &w, __ATOMIC_SEQ_CST);
			while (!w.done)
				pthread_cond_wait(&w.cond, &m->ends_mu);
			pthread_mutex_unlock(&m->ends_mu);
			pthread_cond_destroy(&w.cond);
			return w.n;
		}
		pthread_mutex_unlock(&m->ends_mu);
	}
	LOCK(m);
	ssize_t n = end_turn(m, op);
	UNLOCK(m);
	return n;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	fm_req_type(REQ_write);
	struct fsess *se = fm_session(req);
	struct fmount *m = se->m;

	struct bch_fs_write_op op;

	/*
	 * Begin (BCH_WRITE_PLAN_NEEDS), run (BCH_WRITE_RUN_NEEDS: the
	 * checksum, cipher and device writes without the engine lock), then,
	 * every earlier write of the file ended, end (BCH_WRITE_INDEX_NEEDS).
	 * Small writes of partial blocks go the old way at once (plan_write()).
	 */
	LOCK(m);
	ends_open(m);	/* writes back from their runs meanwhile: ended here (end_write()) */
	if (m->test_write_hold_us)
		usleep(m->test_write_hold_us);
	bool caps_gone;
	ssize_t n = fm_write_kill(req, m, fm_from_fuse(ino), (fi->fh & FH_DIRECT) || se->killpriv_v2,
				  &caps_gone);
	if (!n)
		n = bch_fs_write_begin(m->c, &m->writes, &op, fm_from_fuse(ino), off, buf, size,
				       plan_write(m, size, off));
	if (!n && op.planned) {
		ends_run(m, true);
		fm_need_handover(m);
		bch_fs_write_run(&op);
		n = end_write(m, &op);
	} else {
		if (!n)
			n = end_turn(m, &op);
		else
			ends_run(m, true);
		UNLOCK(m);
	}
	if (n < 0) {
		fm_lf->reply_err(req, (int)-n);
		return;
	}
	/*
	 * Before the reply, unlike the namespace changes: once write(2)
	 * returns, a read through another mountpoint must not find the old
	 * bytes in its page cache (t70 saw them when the notice came after).
	 */
	bool told = !n || fm_others_pages(se, ino, off, n);	/* false: see there */

	if (caps_gone)
		fm_others_attrs(se, ino);
	fm_lf->reply_write(req, n);
	if (!told)
		fm_others_pages_after(se, ino, off, n);
}

/*
 * No flush op: every write is stored before it returns, so close(2) has
 * nothing to report, and libfuse's ENOSYS to the first FLUSH makes the
 * kernel stop sending them (one request less per close; dirty pages of a
 * shared mapping are still written back before close returns: the kernel
 * does that before it would send FLUSH).
 */

/*
 * An fsync slept across a replacement of m->c (a command body closed the
 * filesystem and opened it again: remount, device add, remove, online):
 * the first replacement after gen decides.  Its seq is durable if the old
 * filesystem had it durable when the body began, or the new open proves
 * it (bch_fs_open_durable(): journal seqs continue across an open, and a
 * seq the old one never wrote is reused only after open_seq).  seq 0 (the
 * replacement came before the fsync's first step): everything the old one
 * held when the body began, which the file's ended writes are part of.
 * The old close's own result is not needed, nor can an old filesystem's
 * address, which a new open may get again, fool it.
 */
static int fm_fsync_across(struct fmount *m, uint64_t gen, uint64_t seq)
{
	if (m->fs_gen - gen > FM_REPL_RING)
		return -EIO;	/* its record is gone: not known */
	const struct fm_repl *p = &m->repl[(gen + 1) % FM_REPL_RING];
	uint64_t want = seq ? seq : p->old_need;

	return p->old_durable >= want || p->new_durable >= want ? 0 : -EIO;
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fm_req_type(REQ_fsync);
	struct fmount *m = fm_mount(req);
	(void)datasync;

	LOCK(m);
	uint64_t gen = m->fs_gen;
	/* the writes of the file issued before: ended (their index updates in the journal) */
	struct writes_mark w = { fm_from_fuse(ino), bch_fs_writes_mark(&m->writes) };
	fm_need_wait(m, writes_ended, &w);
	fm_lazy_flush_all(m);
	/*
	 * The journal entry is written and flushed without the engine lock
	 * (DEVICES held: m->c stays open), so other requests run meanwhile,
	 * and fsyncs that come during it go out together in the next entry.
	 * A command body waiting for the lock goes first when it ends, and
	 * may replace m->c (invariant 6): then fm_fsync_across() decides.
	 */
	uint64_t seq = 0;
	int r = 0;
	while (m->fs_gen == gen && !m->read_only && (r = bch_fs_fsync_step(m->c, &seq)) > 0) {
		struct bch_fs *c = m->c;
		fm_need_handover(m);
		bch_fs_fsync_wait(c);
		fm_test_park(m);
		fm_need_back(m);
	}
	if (m->fs_gen != gen)
		r = fm_fsync_across(m, gen, seq);
	/* a change lost by an earlier replacement, this handle not yet told (errseq_t) */
	int lost = fm_lost_check(m, fm_from_fuse(ino), fi ? fi->fh >> FH_SHIFT : 0);
	if (!r)
		r = lost;
	UNLOCK(m);
	fm_lf->reply_err(req, r < 0 ? -r : 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fm_req_type(REQ_opendir);
	struct fmount *m = fm_mount(req);
	struct stat st;

	LOCK(m);
	int r = bch_fs_getattr(m->c, fm_from_fuse(ino), &st);
	if (!r && !S_ISDIR(st.st_mode))
		r = -ENOTDIR;
	if (!r) {
		fm_open_count(m, ino, 1);
		fi->fh = fm_fh_new(m) << FH_SHIFT;
	}
	UNLOCK(m);
	if (r)
		fm_lf->reply_err(req, -r);
	else
		fm_lf->reply_open(req, fi);
}

struct dir_fill {
	fuse_req_t	req;
	struct fmount	*m;
	char		*buf;
	size_t		size, used;
	bool		plus;
};

static int fill_one(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type,
		    uint64_t next_pos)
{
	struct dir_fill *f = priv;
	char nm[256];
	size_t n;

	memcpy(nm, name, len);
	nm[len] = 0;
	if (f->plus) {
		struct fuse_entry_param e;
		bool dots = !strcmp(nm, ".") || !strcmp(nm, "..");
		if (dots) {
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = fm_to_fuse(inum);
			e.attr.st_mode = d_type << 12;
		} else if (fm_make_entry(f->m, inum, &e)) {
			return 0;	/* vanished: skip */
		}
		n = fm_lf->add_direntry_plus(f->req, f->buf + f->used, f->size - f->used, nm, &e, next_pos);
		if (n > f->size - f->used) {
			if (!dots)
				fm_unhold(f->m, inum, 1);	/* not sent: no lookup counted */
			return 1;
		}
	} else {
		struct stat st = { .st_ino = fm_to_fuse(inum), .st_mode = d_type << 12 };
		n = fm_lf->add_direntry(f->req, f->buf + f->used, f->size - f->used, nm, &st, next_pos);
		if (n > f->size - f->used)
			return 1;
	}
	f->used += n;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct fmount *m = fm_mount(req);
	struct dir_fill f = { .req = req, .m = m, .buf = malloc(size), .size = size, .plus = plus };

	if (!f.buf) {
		fm_lf->reply_err(req, ENOMEM);
		return;
	}
	LOCK(m);
	int r = bch_fs_readdir(m->c, fm_from_fuse(ino), off, fill_one, &f);
	if (r >= 0)
		fm_read_atime(m, fm_session(req), fm_from_fuse(ino));
	UNLOCK(m);
	if (r < 0)
		fm_lf->reply_err(req, -r);
	else
		fm_lf->reply_buf(req, f.buf, f.used);
	free(f.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	fm_req_type(REQ_readdir);
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	fm_req_type(REQ_readdirplus);
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fm_req_type(REQ_releasedir);
	struct fmount *m = fm_mount(req);

	(void)fi;
	fm_open_count(m, ino, -1);	/* no engine state: without the lock */
	fm_lf->reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	fm_req_type(REQ_statfs);
	struct fmount *m = fm_mount(req);
	struct statvfs st;
	(void)ino;

	LOCK(m);
	bch_fs_statfs(m->c, &st);
	UNLOCK(m);
	fm_lf->reply_statfs(req, &st);
}

/*
 * The per-file options ("bcachefs.<option>", fs_ops.h) are changed by the
 * file's owner or root only, as chattr(1) attributes; the kernel has
 * checked write permission already (default_permissions).  Lock held.
 */
static int inode_opt_xattr_perm(fuse_req_t req, struct fmount *m, fuse_ino_t ino, const char *name)
{
	const struct fuse_ctx *ctx = fm_lf->req_ctx(req);
	struct stat st;

	if (strncmp(name, "bcachefs.", strlen("bcachefs.")) || !ctx->uid)
		return 0;
	int r = bch_fs_getattr(m->c, fm_from_fuse(ino), &st);
	return r ? r : st.st_uid == ctx->uid ? 0 : -EPERM;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	fm_req_type(REQ_setxattr);
	struct fsess *se = fm_session(req);
	struct fmount *m = se->m;
	bool access = !strcmp(name, BCH_ACL_XATTR_ACCESS);
	int r;

	if ((access || !strcmp(name, BCH_ACL_XATTR_DEFAULT)) && !bch_acl_valid(value, size)) {
		fm_lf->reply_err(req, EINVAL);
		return;
	}
	LOCK(m);
	if (access) {
		/*
		 * The mode follows the ACL, and loses S_ISGID as chmod's would (the
		 * kernel leaves that to us); an ACL the mode says all of is not
		 * kept.  Both in one transaction: a refusal changes neither.
		 */
		struct stat st;
		struct bch_caller *cr = NULL;
		r = bch_fs_getattr(m->c, fm_from_fuse(ino), &st);
		if (!r && !(cr = fm_caller_new(req)))
			r = -ENOMEM;
		if (!r) {
			mode_t mode = bch_acl_update_mode(st.st_mode, st.st_gid, cr, value, size);
			r = bch_fs_set_acl(m->c, fm_from_fuse(ino),
					   bch_acl_is_equiv_mode(value, size) ? NULL : value, size, mode);
		}
		free(cr);
	} else if (!(r = inode_opt_xattr_perm(req, m, ino, name))) {
		r = bch_fs_setxattr(m->c, fm_from_fuse(ino), name, value, size, flags);
	}
	if (!r)
		fm_changed(m, fm_from_fuse(ino));
	if (!r && !strncmp(name, "bcachefs.", 9))
		fm_bg_wake(m, true);	/* per-file options: parked work may now go elsewhere */
	UNLOCK(m);
	if (!r)
		fm_others_attrs(se, ino);	/* ctime, and the mode and ACL the kernel caches */
	fm_lf->reply_err(req, -r);
}

/* A virtual xattr's value: its length for a size query, ERANGE if it does not fit. */
static void reply_xattr_text(fuse_req_t req, const char *text, size_t len, size_t size)
{
	if (!size)
		fm_lf->reply_xattr(req, len);
	else if (size < len)
		fm_lf->reply_err(req, ERANGE);
	else
		fm_lf->reply_buf(req, text, len);
}

/* `bcachefs fs usage MOUNTPOINT` asks the daemon through a virtual xattr of the root. */
static bool usage_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fmount *m = fm_mount(req);
	bool json = !strcmp(name, "bcachefs.usage.json"), human = !strcmp(name, "bcachefs.usage.h");
	char *text = NULL;
	size_t len = 0;

	if (ino != FUSE_ROOT_ID || (!json && !human && strcmp(name, "bcachefs.usage")))
		return false;
	FILE *f = open_memstream(&text, &len);
	if (!f) {
		fm_lf->reply_err(req, ENOMEM);
		return true;
	}
	LOCK(m);
	int r = bch_fs_usage_print(f, m->c, json, human);
	UNLOCK(m);
	fclose(f);
	if (r)
		fm_lf->reply_err(req, EIO);
	else
		reply_xattr_text(req, text, len, size);
	free(text);
	return true;
}

/* Commands find the control channel's socket through a virtual xattr of the root. */
static bool ctl_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fmount *m = fm_mount(req);

	if (ino != FUSE_ROOT_ID || strcmp(name, CTL_XATTR))
		return false;
	if (!m->ctl) {
		fm_lf->reply_err(req, ENODATA);
		return true;
	}
	const char *path = ctl_server_path(m->ctl);
	reply_xattr_text(req, path, strlen(path), size);
	return true;
}

/*
 * The member devices the daemon holds now (absolute paths joined by ':'):
 * the mount's source names those it was mounted with, and device add,
 * remove and offline change them.
 */
static bool devs_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fmount *m = fm_mount(req);
	char *text = NULL;
	size_t len = 0;

	if (ino != FUSE_ROOT_ID || strcmp(name, "bcachefs.devs"))
		return false;
	FILE *f = open_memstream(&text, &len);
	if (!f) {
		fm_lf->reply_err(req, ENOMEM);
		return true;
	}
	LOCK(m);
	for (unsigned i = 0; i < m->nr_devs; i++)
		fprintf(f, "%s%s", i ? ":" : "", m->devs[i]);
	UNLOCK(m);
	fclose(f);
	reply_xattr_text(req, text, len, size);
	free(text);
	return true;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	fm_req_type(REQ_getxattr);
	struct fmount *m = fm_mount(req);
	if (usage_xattr(req, ino, name, size) || ctl_xattr(req, ino, name, size) ||
	    devs_xattr(req, ino, name, size))
		return;
	/* the kernel's probes ask the size (0) or a small value: no allocation for them */
	char small[256], *buf = size <= sizeof(small) ? small : malloc(size);
	if (!buf) {
		fm_lf->reply_err(req, ENOMEM);
		return;
	}

	LOCK(m);
	if (fm_session(req)->killpriv_v2 && !strcmp(name, "security.capability")) {
		fm_session(req)->caps_probe_ino = ino;
		fm_session(req)->caps_probe_pid = fm_lf->req_ctx(req)->pid;
	}
	/*
	 * The kernel's need-killpriv probe before every chown (untar: one a
	 * file), and its ACL reads (a chmod's, a create's in a directory):
	 * answered from the held entry when it knows (fm_sec_plain(),
	 * fm_acl_none(), fm_default_acl()'s held.nodefacl).
	 */
	uint64_t inum = fm_from_fuse(ino);
	ssize_t n = (!strcmp(name, "security.capability") && fm_sec_plain(m, inum)) ||
		    (!strcmp(name, BCH_ACL_XATTR_ACCESS) && fm_acl_none(m, inum))
		? -ENODATA
		: !strcmp(name, BCH_ACL_XATTR_DEFAULT) ? fm_default_acl(m, inum, buf, size)
		: bch_fs_getxattr(m->c, inum, name, buf, size);
	if (n == -ENODATA && !strcmp(name, BCH_ACL_XATTR_ACCESS))
		fm_acl_none_set(m, inum);
	UNLOCK(m);
	if (n < 0)
		fm_lf->reply_err(req, (int)-n);
	else if (!size)
		fm_lf->reply_xattr(req, n);
	else
		fm_lf->reply_buf(req, buf, n);
	if (buf != small)
		free(buf);
}

/*
 * Drop the trusted.* names from list (n bytes of NUL-ended names) unless
 * the caller of req has CAP_SYS_ADMIN, as the kernel's filesystems list them
 * (the VFS filters getxattr of them, not listxattr).  Returns the new length.
 */
static ssize_t listxattr_filter(fuse_req_t req, char *list, ssize_t n)
{
	bool any = false;

	for (char *p = list; p < list + n; p += strlen(p) + 1)
		any |= !strncmp(p, "trusted.", 8);
	if (!any)
		return n;
	struct bch_caller *cr = fm_caller_new(req);
	bool admin = cr && cr->cap_sys_admin;
	free(cr);
	if (admin)
		return n;
	char *to = list;
	for (char *p = list; p < list + n;) {
		size_t l = strlen(p) + 1;
		if (strncmp(p, "trusted.", 8)) {
			memmove(to, p, l);
			to += l;
		}
		p += l;
	}
	return to - list;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	fm_req_type(REQ_listxattr);
	struct fmount *m = fm_mount(req);
	char *buf = NULL;
	ssize_t n;

	/* the whole list, filtered, then measured against size */
	LOCK(m);
	n = bch_fs_listxattr(m->c, fm_from_fuse(ino), NULL, 0);
	if (n > 0 && !(buf = malloc(n)))
		n = -ENOMEM;
	if (n > 0)
		n = bch_fs_listxattr(m->c, fm_from_fuse(ino), buf, n);
	UNLOCK(m);
	if (n > 0)
		n = listxattr_filter(req, buf, n);
	if (n < 0)
		fm_lf->reply_err(req, (int)-n);
	else if (!size)
		fm_lf->reply_xattr(req, n);
	else if ((size_t)n > size)
		fm_lf->reply_err(req, ERANGE);
	else
		fm_lf->reply_buf(req, buf, n);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fm_req_type(REQ_removexattr);
	struct fsess *se = fm_session(req);
	struct fmount *m = se->m;

	LOCK(m);
	int r = inode_opt_xattr_perm(req, m, ino, name);
	if (!r)
		r = bch_fs_removexattr(m->c, fm_from_fuse(ino), name);
	if (!r)
		fm_changed(m, fm_from_fuse(ino));
	if (!r && !strncmp(name, "bcachefs.", 9))
		fm_bg_wake(m, true);
	UNLOCK(m);
	if (!r)
		fm_others_attrs(se, ino);
	fm_lf->reply_err(req, -r);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	fm_req_type(REQ_fallocate);
	struct fsess *se = fm_session(req);
	struct fmount *m = se->m;
	(void)fi;

	LOCK(m);
	wait_planned_writes(m);
	int r = fm_kill_priv(req, m, fm_from_fuse(ino));
	if (!r)
		r = bch_fs_fallocate(m->c, fm_from_fuse(ino), mode, offset, length);
	if (!r)
		fm_changed(m, fm_from_fuse(ino));
	UNLOCK(m);
	/*
	 * The other sessions told before the reply, as op_write() does: once
	 * fallocate(2) returns, a read through another mountpoint must not
	 * find the punched bytes in its page cache (t112 read them about one
	 * run in four).  Collapse
	 * and insert move what follows: all of it.
	 */
	bool told = r || fm_others_pages(se, ino, 0, 0);

	fm_lf->reply_err(req, -r);
	if (!told)
		fm_others_pages_after(se, ino, 0, 0);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	fm_req_type(REQ_lseek);
	struct fmount *m = fm_mount(req);
	(void)fi;

	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fm_lf->reply_err(req, EINVAL);
		return;
	}
	LOCK(m);
	int64_t r = bch_fs_seek(m->c, fm_from_fuse(ino), off, whence);
	UNLOCK(m);
	/* ENOSYS would make the kernel stop sending FUSE_LSEEK for the mount's life */
	if (r == -ENOSYS)
		r = -EIO;
	if (r < 0)
		fm_lf->reply_err(req, (int)-r);
	else
		fm_lf->reply_lseek(req, r);
}

/*
 * copy_file_range: whole blocks are shared (reflink: no data is read or
 * written, the extents are counted once for both files); an unaligned head
 * and tail are copied inside the daemon (bch_fs_remap_range).  In steps of
 * REMAP_STEP so that other requests get the lock between them.
 */
#define REMAP_STEP	(64ULL << 20)
static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	fm_req_type(REQ_copy_file_range);
	struct fsess *se = fm_session(req);
	struct fmount *m = se->m;
	size_t done = 0;
	ssize_t r = 0;
	(void)fi_in;
	(void)fi_out;

	if (flags) {
		fm_lf->reply_err(req, EINVAL);
		return;
	}
	while (done < len) {
		uint64_t want = len - done < REMAP_STEP ? len - done : REMAP_STEP;
		LOCK(m);
		wait_planned_writes(m);
		r = done ? 0 : fm_kill_priv(req, m, fm_from_fuse(ino_out));
		if (!r)
			r = bch_fs_remap_range(m->c, fm_from_fuse(ino_in), off_in + done, fm_from_fuse(ino_out),
					       off_out + done, want);
		if (r > 0) {
			fm_changed(m, fm_from_fuse(ino_out));
			fm_bg_wake(m, false);
		}
		UNLOCK(m);
		if (r <= 0)
			break;
		done += r;
		if ((uint64_t)r < want)
			break;		/* the source's end */
	}
	if (r < 0 && !done) {
		fm_lf->reply_err(req, (int)-r);
		return;
	}
	bool told = !done || fm_others_pages(se, ino_out, off_out, done);	/* as op_write() */

	fm_lf->reply_write(req, done);
	if (!told)
		fm_others_pages_after(se, ino_out, off_out, done);
}

/* ------------------------------------------------------------ file flags */

/* FS_XFLAG_* of FS_IOC_FSGETXATTR and the FS_*_FL they stand for */
static const struct { unsigned x, fl; } xflags[] = {
	{ FS_XFLAG_IMMUTABLE,	FS_IMMUTABLE_FL },
	{ FS_XFLAG_APPEND,	FS_APPEND_FL },
	{ FS_XFLAG_SYNC,	FS_SYNC_FL },
	{ FS_XFLAG_NOATIME,	FS_NOATIME_FL },
	{ FS_XFLAG_NODUMP,	FS_NODUMP_FL },
};

static unsigned fl_to_xflags(unsigned fl)
{
	unsigned x = 0;

	for (size_t i = 0; i < sizeof(xflags) / sizeof(xflags[0]); i++)
		if (fl & xflags[i].fl)
			x |= xflags[i].x;
	return x;
}

/* -EOPNOTSUPP for an xflag not kept here */
static int xflags_to_fl(unsigned x, unsigned *fl)
{
	*fl = 0;
	for (size_t i = 0; i < sizeof(xflags) / sizeof(xflags[0]); i++)
		if (x & xflags[i].x) {
			*fl |= xflags[i].fl;
			x &= ~xflags[i].x;
		}
	return x ? -EOPNOTSUPP : 0;
}

/* Set the flags (and project) as the caller of req; lock held. */
static int ioctl_set(fuse_req_t req, struct fmount *m, uint64_t inum, unsigned fl, uint32_t project)
{
	struct bch_caller *cr = fm_caller_new(req);

	if (!cr)
		return -ENOMEM;
	int r = bch_fs_set_flags(m->c, inum, fl, project, cr);
	free(cr);
	if (!r)
		fm_changed(m, inum);
	return r;
}

/*
 * chattr(1) and lsattr(1): FS_IOC_GETFLAGS / SETFLAGS (an int, whatever the
 * command's encoded size says: the kernel's fileattr code sends 4 bytes) and
 * FS_IOC_FSGETXATTR / FSSETXATTR (struct fsxattr: the same flags and the
 * project ID; extent size hints are not kept, so nonzero ones are refused).
 * The kernel sends these for regular files and directories only (fs/fuse
 * fileattr), after its own owner and CAP_LINUX_IMMUTABLE checks; the engine
 * checks again with the caller's credentials.  Anything else: ENOTTY.
 */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		     size_t out_bufsz)
{
	fm_req_type(REQ_ioctl);
	struct fmount *m = fm_mount(req);
	uint64_t inum = fm_from_fuse(ino);
	unsigned fl = 0;
	uint32_t project = 0;
	struct fsxattr fa;
	int r, v;
	(void)arg;
	(void)fi;

	/*
	 * 32-bit callers: the kernel turns their FS_IOC32_[GS]ETFLAGS into
	 * FS_IOC_[GS]ETFLAGS (fileattr) before they come; the 32-bit numbers
	 * themselves (a 64-bit caller may use them too) take an int as well,
	 * and struct fsxattr is the same size either way, so FUSE_IOCTL_COMPAT
	 * changes nothing here.
	 */
	(void)flags;
	if (cmd == FS_IOC32_GETFLAGS)
		cmd = FS_IOC_GETFLAGS;
	else if (cmd == FS_IOC32_SETFLAGS)
		cmd = FS_IOC_SETFLAGS;
	LOCK(m);
	switch (cmd) {
	case FS_IOC_GETFLAGS:
		r = out_bufsz < sizeof(int) ? -EINVAL : bch_fs_get_flags(m->c, inum, &fl, &project);
		UNLOCK(m);
		v = fl;
		if (r)
			fm_lf->reply_err(req, -r);
		else
			fm_lf->reply_ioctl(req, 0, &v, sizeof(v));
		return;
	case FS_IOC_FSGETXATTR:
		r = out_bufsz < sizeof(fa) ? -EINVAL : bch_fs_get_flags(m->c, inum, &fl, &project);
		UNLOCK(m);
		memset(&fa, 0, sizeof(fa));
		fa.fsx_xflags = fl_to_xflags(fl);
		fa.fsx_projid = project;
		if (r)
			fm_lf->reply_err(req, -r);
		else
			fm_lf->reply_ioctl(req, 0, &fa, sizeof(fa));
		return;
	case FS_IOC_SETFLAGS:
		if (in_bufsz < sizeof(int)) {
			r = -EINVAL;
			break;
		}
		memcpy(&v, in_buf, sizeof(v));
		r = bch_fs_get_flags(m->c, inum, &fl, &project);
		if (!r)
			r = ioctl_set(req, m, inum, (unsigned)v, project);
		break;
	case FS_IOC_FSSETXATTR:
		if (in_bufsz < sizeof(fa)) {
			r = -EINVAL;
			break;
		}
		memcpy(&fa, in_buf, sizeof(fa));
		r = fa.fsx_extsize || fa.fsx_cowextsize ? -EINVAL : xflags_to_fl(fa.fsx_xflags, &fl);
		if (!r)		/* every flag kept here has its xflag: all are set */
			r = ioctl_set(req, m, inum, fl, fa.fsx_projid);
		break;
	default:
		r = -ENOTTY;
		break;
	}
	UNLOCK(m);
	/* ctime changed: the kernel's cached attributes go */
	if (!r)
		fm_lf->lowlevel_notify_inval_inode(fm_session(req)->se, ino, -1, 0);
	if (r) {
		fm_lf->reply_err(req, -r);
		return;
	}
	fm_others_attrs(fm_session(req), ino);
	fm_lf->reply_ioctl(req, 0, NULL, 0);
}

const struct fuse_lowlevel_ops fm_ops = {
	.init		= op_init,
	.destroy	= op_destroy,
	.lookup		= op_lookup,
	.forget		= op_forget,
	.forget_multi	= op_forget_multi,
	.getattr	= op_getattr,
	.setattr	= op_setattr,
	.readlink	= op_readlink,
	.mknod		= op_mknod,
	.mkdir		= op_mkdir,
	.symlink	= op_symlink,
	.link		= op_link,
	.unlink		= op_unlink,
	.rmdir		= op_rmdir,
	.rename		= op_rename,
	.open		= op_open,
	.create		= op_create,
	.read		= op_read,
	.write		= op_write,
	.release	= op_release,
	.fsync		= op_fsync,
	.opendir	= op_opendir,
	.readdir	= op_readdir,
	.readdirplus	= op_readdirplus,
	.releasedir	= op_releasedir,
	.fsyncdir	= op_fsync,
	.statfs		= op_statfs,
	.setxattr	= op_setxattr,
	.getxattr	= op_getxattr,
	.listxattr	= op_listxattr,
	.removexattr	= op_removexattr,
	.fallocate	= op_fallocate,
	.lseek		= op_lseek,
	.copy_file_range = op_copy_file_range,
	.ioctl		= op_ioctl,
};
