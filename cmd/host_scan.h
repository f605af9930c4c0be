/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_HOST_SCAN_H
#define _BCH_HOST_SCAN_H

/*
 * host_scan.h - image update's reading of the host directory DIR
 * (cmd_image_update.c says what the update does with it): worker threads
 * read DIR a directory at a time, relative to its descriptor (getdents64
 * into one buffer per worker; fstatat, listxattrat, readlinkat: no path
 * walks), into listings in memory (struct hdir, struct hent) held in one
 * arena.  Also the small tools the update shares with the scan: GROW, the
 * arena, and the map of two u64 keys (pair_map: the image's ctimes here,
 * hard links and claims in the update).
 *
 * Threads.  One mutex and one condition variable (struct scan) guard the
 * queue of directories to read, the queue of those ready to match, the
 * count of readers busy, and each directory's scanned and placed flags.  A
 * directory's listing is written only by the thread that read it, before
 * scanned is set under the lock, and only read after; its matches (set by
 * the update's main thread) only by the main thread.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Grow array p of nr entries (cap allocated) so that one more fits. */
#define GROW(p, nr, cap) do {						\
	if ((nr) == (cap)) {						\
		(cap) = (cap) ? (cap) * 2 : 1024;			\
		if (!((p) = realloc((p), (cap) * sizeof(*(p)))))	\
			abort();					\
	}								\
} while (0)

/* Two u64 keys to two u64 values (hard links, claims), open addressing. */
struct pair_ent {
	uint64_t	k1, k2, v1, v2;
	bool		used;
	bool		done;		/* links: the kept inode was compared */
};

struct pair_map {
	struct pair_ent	*t;
	size_t		nr, cap;	/* cap: power of two */
};

/* The entry of (k1, k2): NULL when there is none, unless add (then a new one). */
struct pair_ent *pair_find(struct pair_map *m, uint64_t k1, uint64_t k2, bool add);

/* The memory of the host listing: chunks, freed together (not per name). */
#define ARENA_CHUNK	(1U << 20)

struct arena_chunk {
	struct arena_chunk	*next;
	size_t			used, cap;
	char			data[];
};

struct arena {
	struct arena_chunk	*head;
};

void *arena_alloc(struct arena *a, size_t n);
/* "dir/name" (name alone when dir is NULL) in a. */
char *arena_join(struct arena *a, const char *dir, const char *name);
/* Move b's chunks to a. */
void arena_splice(struct arena *a, struct arena *b);
void arena_free(struct arena *a);

struct imatch;	/* the update's: a name's image entry */

/* One name of DIR, as its worker found it: what the walk compares of its lstat. */
struct hent {
	char		*name;		/* first member: sorted with name_cmp */
	char		*target;	/* symlink target (NULL: unreadable) */
	struct hdir	*sub;		/* a directory: its listing */
	uint64_t	dev, ino, rdev, size;
	int64_t		atime, mtime, ctime;	/* ns */
	uint32_t	mode, uid, gid, nlink;
	int		err;		/* fstatat failed: -errno */
	bool		xattrs;		/* it has xattrs (of any kind); valid with xattrs_known */
	bool		xattrs_known;	/* false: not asked, as its ctime is some image
					 * inode's (struct scan's ctimes): asked at the compare if not its match's */
};

/* One directory of DIR: its entries in name order. */
struct hdir {
	char		*path;		/* host path */
	struct hent	*e;
	size_t		nr;
	int		err;		/* listing failed: -errno */
	/* set by the main thread as it matches ahead (match_ahead()) */
	struct imatch	*match;		/* of each name: its image entry */
	uint64_t	img;		/* the image directory it was matched with */
	/* under the scan lock */
	bool		scanned;	/* e and nr are set */
	bool		placed;		/* its image directory is known: img */
};

/*
 * DIR is read by worker threads and the main thread; the main thread
 * matches each directory read with the image's as soon as both it and its
 * parent's match are there.  One lock, one condition variable (any change
 * of the queues, or a worker done) guard q, ready, busy and each
 * directory's scanned and placed; a directory's listing is written by the
 * one thread that read it before scanned is set, and read-only after.
 */
struct scan {
	pthread_mutex_t	lock;
	pthread_cond_t	cond;
	struct arena	*mem;		/* where each worker's memory goes when it ends */
	struct hdir	**q;		/* directories waiting for a worker */
	size_t		nr, cap;
	struct hdir	**ready;	/* scanned and placed: for the main thread to match */
	size_t		nr_ready, cap_ready;
	unsigned	busy;		/* threads reading a directory */
	bool		links;		/* some non-directory has more than one link */
	struct pair_map	*ctimes;	/* the image inodes' ctimes (k1; 0 never put in),
					 * once read (atomic: set by the main thread,
					 * then only looked up, by the workers) */
};

/* A name as getdents64 gave it, while its directory is being read. */
struct slot {
	uint64_t	key;		/* its first 8 bytes, big-endian: most compares */
	char		*name;
	uint64_t	ino;
	size_t		idx;		/* its place in name order */
};

/* One worker's own: its memory, and the listing being read. */
struct scan_worker {
	struct scan	*s;
	struct arena	mem;
	struct slot	*tmp, *half;	/* the names; the sorts' room (cap / 2) */
	size_t		cap, half_cap;
	char		*dents;		/* DENTS_BUF bytes for getdents64 */
};

static inline int64_t ts_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* "a/b", malloc'd. */
char *host_join(const char *a, const char *b);
/* Under the lock: d waits for a worker. */
void host_scan_push(struct scan *s, struct hdir *d);
/* Under the lock: d is read and its image directory known, to be matched. */
void host_ready_push(struct scan *s, struct hdir *d);
/* With the lock held and s->nr > 0: read the next directory (unlocked). */
void host_scan_step(struct scan_worker *w);
void host_scan_worker_init(struct scan_worker *w, struct scan *s);
/* With the lock held, or alone: its memory to the listing's, the rest freed. */
void host_scan_worker_exit(struct scan_worker *w);
/* A worker thread (pthread_create's): reads directories until none is left. */
void *host_scan_worker(void *arg);

#endif
