/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_DL_H
#define _BCACHEFS_DL_H

/*
 * dl.h - shared libraries loaded on first use instead of linked.
 *
 * A linked library is mapped into every command at startup: its pages,
 * relocations and constructors count in peak RSS whether or not the command
 * calls it.  A library that only some commands, or only some filesystems,
 * need (the compression libraries, libxxhash, libfuse3, libarchive) is
 * instead described by a struct bch_dl_lib and dlopen()ed (RTLD_NOW |
 * RTLD_LOCAL) the first time a caller asks for it with bch_dl_load().
 *
 * The module that uses a library owns its table: a struct whose members
 * point to the __typeof__ of the real prototypes (from the library's own
 * headers, so the compiler still checks every call), and the array of
 * struct bch_dl_sym that names each member's symbol, both expanded from one
 * X-macro list (see BCH_DL_SYM).
 *
 * Invariants
 *   (1) The table is filled completely or not at all: once bch_dl_load()
 *       returned 0, every member may be called, from any thread.
 *   (2) A library is opened at most once and never closed.  The outcome of
 *       the first attempt, success or the error with dlerror()'s reason in
 *       why[], stays for the life of the process: a failed load is not
 *       retried, so every caller sees the same answer.
 *   (3) A symbol with a version (libfuse3's) is resolved with dlvsym() at
 *       the version that a link against the same headers records (`nm -D
 *       --undefined-only` of such a link shows it); one without, with dlsym().
 *
 * Locking: the first bch_dl_load() of a library loads it under a
 * process-wide mutex and publishes the outcome with a release store; later
 * calls only do an acquire load, so a hot path (an extent decompressed)
 * pays one atomic read and no lock.
 */

#include <stdatomic.h>
#include <stddef.h>

/* Libraries the engine loads (Debian 12 package in the comment). */
#define BCH_SONAME_ZLIB		"libz.so.1"		/* zlib1g */
#define BCH_SONAME_LZ4		"liblz4.so.1"		/* liblz4-1 */
#define BCH_SONAME_ZSTD		"libzstd.so.1"		/* libzstd1 */
#define BCH_SONAME_XXHASH	"libxxhash.so.0"	/* libxxhash0 */
#define BCH_SONAME_ISAL		"libisal.so.2"		/* libisal2 */

struct bch_dl_sym {
	const char	*name;		/* symbol */
	const char	*version;	/* its version (dlvsym), or NULL: dlsym */
	size_t		offset;		/* of the table member that receives it */
};

struct bch_dl_lib {
	const char		*soname;	/* dlopen()ed by this name */
	int			err;		/* returned when it cannot be loaded */
	const struct bch_dl_sym	*syms;
	size_t			nr_syms;
	void			*table;		/* struct of function pointers */
	/* the outcome of the first bch_dl_load(): zero-initialized = not tried */
	atomic_bool		tried;		/* ret and why are set */
	int			ret;		/* 0, or err */
	char			why[256];	/* dlerror() of a failed load */
};

/*
 * Table entries, from a list of x(member, function, version): in the table
 * struct, BCH_DL_MEMBER; in its symbol array, BCH_DL_SYM with the table's
 * struct type.
 */
#define BCH_DL_MEMBER(member, func)		__typeof__(func) *member;
#define BCH_DL_SYM(type, member, func, ver)	{ #func, ver, offsetof(type, member) },

/* Static initializer of a struct bch_dl_lib. */
#define BCH_DL_LIB(_soname, _err, _syms, _table)				\
	{ .soname = _soname, .err = _err, .syms = _syms,			\
	  .nr_syms = sizeof(_syms) / sizeof((_syms)[0]), .table = _table }

/*
 * Load lib if that was not tried yet.  Returns 0 when its table is filled,
 * else lib->err, with the reason in lib->why (the same on every call).
 * Thread-safe; never prints.
 */
int bch_dl_load(struct bch_dl_lib *lib);

#endif /* _BCACHEFS_DL_H */
