// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_dump.c - `bcachefs dump`: the metadata of a filesystem in one file,
 * for bug reports; `bcachefs undump`: sparse images back from it.
 *
 * What is metadata is the library's (dump.h).  The container is this
 * command's; man/bcachefs-format.5 "DUMP FILES" is its spec:
 *
 *   OFFSET SIZE  header (64 bytes)
 *   0      8     magic "bchDUMP1"
 *   8      4     version (2; undump reads 1, which has no REF records)
 *   12     4     flags (0)
 *   16     4     nr_devs: entries of the device table that follows
 *   20     4     chunk: largest uncompressed record (bytes)
 *   24     16    the filesystem's user UUID
 *   40     20    reserved, zero
 *   60     4     crc32c of bytes 0..60 and the device table
 *   then nr_devs devices (32 bytes): u32 member index, u32 zero, u64 size
 *   in bytes, 16 bytes member UUID; then records (32-byte header, then
 *   stored bytes): u32 magic "REC1", u16 table index, u8 compression (0
 *   none, 3 zstd), u8 zero, u64 byte offset on the device, u32 length,
 *   u32 stored length, u32 crc32c of the uncompressed bytes, u32 crc32c of
 *   the header's first 28 bytes; a REF record (magic "REF1", compression
 *   0, stored 16) repeats an earlier REC record of exactly its length and
 *   data crc, named by its stored bytes: u64 offset, u16 table index, 6
 *   zero bytes (the metadata_replicas copies of a node are written once);
 *   last, one record with magic "END1": offset
 *   = the number of records, lengths zero, crc = crc32c of the whole file
 *   before it.  Nothing may follow it.  Zero bytes need no record: a
 *   record's leading and trailing all-zero 4 KiB blocks are left out, and a
 *   chunk of zeros has none.
 *
 * Invariants: (1) undump checks the whole dump (every crc, every range
 * inside its device, the end record) before it creates any file, so a
 * damaged or truncated dump writes nothing; (2) undump never overwrites an
 * existing file; (3) records are in (device, offset) order and disjoint;
 * (4) a REF record's source comes before it in the file, so undump copies
 * it from the image it is writing.
 *
 * Speed: the records are read and deduplicated in order by the main thread,
 * compressed meanwhile by one worker per CPU (each with its own zstd
 * context), and written in order (the job ring below).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "checksum.h"
#include "cmds.h"
#include "compress.h"
#include "dl.h"
#include "dump.h"
#include "errcode.h"
#include "fs.h"
#include "fsname.h"
#include "progress.h"
#include "super.h"

#define DUMP_MAGIC	"bchDUMP1"
#define DUMP_VERSION	2	/* 2: REF records; undump reads 1 and 2 */
#define DUMP_ZSTD_LEVEL	(-1)	/* zstd "fast 1": at 1M files 6% smaller than level 1 and 1.3x faster */
#define DUMP_CHUNK	(1U << 20)
#define DUMP_ZERO_BLOCK	4096	/* all-zero blocks at a record's ends are left out */
#define REC_MAGIC	0x31434552U	/* "REC1" */
#define END_MAGIC	0x31444e45U	/* "END1" */
#define REF_MAGIC	0x31464552U	/* "REF1" */

struct dump_hdr {
	char		magic[8];
	uint32_t	version, flags, nr_devs, chunk;
	uint8_t		uuid[16];
	uint8_t		reserved[20];
	uint32_t	crc;
};
_Static_assert(sizeof(struct dump_hdr) == 64, "dump_hdr size");

struct dump_dev {
	uint32_t	idx, zero;
	uint64_t	size;
	uint8_t		uuid[16];
};
_Static_assert(sizeof(struct dump_dev) == 32, "dump_dev size");

struct dump_rec {
	uint32_t	magic;
	uint16_t	dev;
	uint8_t		compression, zero;
	uint64_t	offset;
	uint32_t	len, stored, data_crc, hdr_crc;
};
_Static_assert(sizeof(struct dump_rec) == 32, "dump_rec size");

/* A REF record's payload: the record whose bytes it repeats. */
struct dump_ref {
	uint64_t	offset;		/* of that record, on its device */
	uint16_t	dev;		/* its device table index */
	uint8_t		zero[6];
};
_Static_assert(sizeof(struct dump_ref) == 16, "dump_ref size");

static uint32_t crc32c(const void *p, size_t len)
{
	return ~bch_crc32c(~0U, p, len);
}

/* ------------------------------------------------------------------ dump */

struct writer {
	FILE		*f;
	uint32_t	crc;		/* running, raw */
	uint64_t	bytes;
};

static int w_put(struct writer *w, const void *p, size_t len)
{
	w->crc = bch_crc32c(w->crc, p, len);
	w->bytes += len;
	return fwrite(p, 1, len, w->f) == len ? 0 : -errno;
}

static void dump_usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs dump [OPTION]... FS OUT\n"
"Write the metadata of an unmounted filesystem (every superblock copy, the\n"
"journal buckets, every btree node, reachable or not) into OUT, a dump file\n"
"(man bcachefs-format, DUMP FILES), for bug reports.  File data is never\n"
"included; `bcachefs undump` makes sparse images of it.  FS: the member\n"
"devices (as arguments or joined by ':') or UUID=<uuid>; a mounted\n"
"filesystem is refused (unmount it first: its daemon changes the metadata\n"
"as it would be read).  OUT must not exist.\n"
"\n"
"      --no-compress   store the ranges plain (default: zstd where smaller)\n"
"      --scramble-names  rename every file and directory (lost+found in the\n"
"                      root kept) to a random name of the same length, and\n"
"                      user.* and trusted.* xattrs (names and values), in a\n"
"                      private copy of the metadata (in memory if it fits,\n"
"                      else in TMPDIR, default /tmp) that is then\n"
"                      dumped: with the nodes the btrees reach and no journal\n"
"                      (they hold the old names); the filesystem must open\n"
"                      read-write (its journal is replayed in the copy)\n"
"      --json          a summary as one JSON document: {\"version\", \"devices\",\n"
"                      \"records\", \"copy_records\", \"copy_bytes\",\n"
"                      \"metadata_bytes\", \"superblock_bytes\", \"journal_bytes\",\n"
"                      \"btree_bytes\", \"free_bucket_nodes\", \"dump_bytes\"; with\n"
"                      --scramble-names \"scrambled_names\", \"scrambled_xattrs\"}\n"
"  -o degraded         members may be missing (their metadata is not dumped)\n"
"  -h, --help          this text\n"
"\n"
"Exit: 0 written, 1 the filesystem could not be read or OUT not written,\n"
"16 usage error.\n");
}

static bool zero_block(const char *p, size_t len)
{
	static const char zero[DUMP_ZERO_BLOCK];

	return !memcmp(p, zero, len);
}

/*
 * The part of buf[0..len) from its first to past its last block that is not
 * all zero (blocks of DUMP_ZERO_BLOCK bytes from buf); false if all is zero.
 */
static bool nonzero_span(const char *buf, uint32_t len, uint32_t *first, uint32_t *last)
{
	uint32_t a = 0, b = len;

	while (a < len && zero_block(buf + a, len - a < DUMP_ZERO_BLOCK ? len - a : DUMP_ZERO_BLOCK))
		a += DUMP_ZERO_BLOCK;
	if (a >= len)
		return false;
	while (b > a) {
		uint32_t bs = (b - a) % DUMP_ZERO_BLOCK ? (b - a) % DUMP_ZERO_BLOCK : DUMP_ZERO_BLOCK;
		if (!zero_block(buf + b - bs, bs))
			break;
		b -= bs;
	}
	*first = a;
	*last = b;
	return true;
}

/*
 * zstd with one context per thread, kept for the whole dump: the library's
 * bch_compress() makes and frees a context on every call, which for 1 MiB
 * records costs as much as compressing.  Loaded as the engine loads it (dl.h).
 */
#define DUMP_ZSTD_FUNCS()					\
	x(createCCtx,	ZSTD_createCCtx)			\
	x(freeCCtx,	ZSTD_freeCCtx)				\
	x(compressCCtx,	ZSTD_compressCCtx)			\
	x(isError,	ZSTD_isError)

static struct dump_zstd {
#define x(m, f)	BCH_DL_MEMBER(m, f)
	DUMP_ZSTD_FUNCS()
#undef x
} zs;

static const struct bch_dl_sym zstd_syms[] = {
#define x(m, f)	BCH_DL_SYM(struct dump_zstd, m, f, NULL)
	DUMP_ZSTD_FUNCS()
#undef x
};

static struct bch_dl_lib zstd_lib = BCH_DL_LIB(BCH_SONAME_ZSTD, -ELIBACC, zstd_syms, &zs);

/*
 * The records being made, through a ring of jobs: cut to their non-zero
 * span and deduplicated in order by the main thread, checksummed and
 * compressed by one worker per CPU (each with its zstd context) meanwhile,
 * written in order by the main thread.  Job states: FREE (written) ->
 * filled by main -> READY (a REC record) or DONE (a REF record) -> BUSY (a
 * worker: crc, zstd) -> DONE -> written -> FREE.  head, ctail and wtail count jobs filled,
 * taken by workers and written; a job's fields belong to whoever moved it
 * to its state, under lock.
 */
#define DUMP_RING	32	/* jobs (of at most DUMP_CHUNK) in flight */
#define DUMP_THREADS	4	/* workers at most; one per online CPU */

enum job_state { JOB_FREE, JOB_READY, JOB_BUSY, JOB_DONE };

struct job {
	struct dump_rec	h;
	char		*buf, *zbuf;	/* DUMP_CHUNK and its compress bound */
	const char	*data;		/* what follows the header: h.stored bytes */
	struct dump_ref	ref;		/* a REF record's payload */
	size_t		src;		/* a REF record: its source in dp->recs */
	size_t		rec;		/* a REC record: its entry in dp->recs */
	enum job_state	state;
};

/*
 * REC records made so far, by (len, crc32c of their first DEDUP_PREFIX
 * bytes): the candidates a REF record may copy (confirmed byte for byte).
 * A prefix keeps the main thread from reading every byte: the header of a
 * node (its seq, its checksum) is in it.  The full crc of each record is
 * computed by the worker that compresses it and kept in recs[] for the REF
 * records that copy it, which are written after it.
 */
#define DEDUP_PREFIX	512

struct seen {
	uint64_t	key;		/* len << 32 | prefix crc; 0: empty slot */
	size_t		rec;		/* index in dp->recs */
};

struct rec_info {
	uint64_t	offset;
	uint32_t	dev;		/* member index */
	uint32_t	crc;		/* data crc, once its job is compressed */
};

struct dumper {
	struct bch_fs	*c;
	const char	*out;
	const unsigned	*tab;
	bool		compress;
	struct writer	*w;
	struct job	jobs[DUMP_RING];
	uint64_t	head, ctail, wtail;
	bool		stop;		/* workers: leave when nothing is READY */
	pthread_mutex_t	lock;
	pthread_cond_t	cond;		/* a job changed state, or stop */
	ZSTD_CCtx	*cctx[DUMP_THREADS];
	pthread_t	th[DUMP_THREADS];
	unsigned	threads, started;
	char		*cmp;		/* DUMP_CHUNK: a REF candidate's source, read back */
	const char	*map[BCH_SB_MEMBERS_MAX];	/* each member mapped, or NULL: pread */
	uint64_t	map_len[BCH_SB_MEMBERS_MAX];
	struct seen	*seen;
	size_t		seen_nr, seen_cap;	/* cap: a power of two */
	struct rec_info	*recs;
	size_t		recs_nr, recs_cap;
	uint64_t	nr_rec, nr_ref, ref_bytes;
};

static size_t seen_slot(uint64_t key, size_t cap)
{
	key *= 0x9e3779b97f4a7c15ULL;
	return (key ^ (key >> 29)) & (cap - 1);
}

static int seen_add(struct dumper *dp, uint64_t key, unsigned dev, uint64_t offset, size_t *rec)
{
	if (dp->recs_nr == dp->recs_cap) {
		size_t cap = dp->recs_cap ? 2 * dp->recs_cap : 4096;
		struct rec_info *n = realloc(dp->recs, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		dp->recs = n;
		dp->recs_cap = cap;
	}
	*rec = dp->recs_nr;
	dp->recs[dp->recs_nr++] = (struct rec_info) { offset, dev, 0 };

	if (2 * (dp->seen_nr + 1) > dp->seen_cap) {
		size_t cap = dp->seen_cap ? 2 * dp->seen_cap : 4096;
		struct seen *n = calloc(cap, sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (size_t i = 0; i < dp->seen_cap; i++) {
			if (!dp->seen[i].key)
				continue;
			size_t j = seen_slot(dp->seen[i].key, cap);
			while (n[j].key)
				j = (j + 1) & (cap - 1);
			n[j] = dp->seen[i];
		}
		free(dp->seen);
		dp->seen = n;
		dp->seen_cap = cap;
	}
	size_t j = seen_slot(key, dp->seen_cap);
	while (dp->seen[j].key)
		j = (j + 1) & (dp->seen_cap - 1);
	dp->seen[j] = (struct seen) { key, *rec };
	dp->seen_nr++;
	return 0;
}

/*
 * Is the record in j (its bytes in j->data) a copy of one written before?
 * Then make it a REF record to it (btree nodes are written in
 * metadata_replicas copies, byte for byte the same).  Equal (len, crc) is
 * only a candidate: the source is read back and compared.
 */
static int dedup(struct dumper *dp, struct job *j, unsigned dev, bool *ref)
{
	uint32_t pre = crc32c(j->data, j->h.len < DEDUP_PREFIX ? j->h.len : DEDUP_PREFIX);
	uint64_t key = (uint64_t)j->h.len << 32 | pre;	/* len > 0: never the empty 0 */
	int r;

	*ref = false;
	for (size_t i = dp->seen_cap ? seen_slot(key, dp->seen_cap) : 0;
	     dp->seen_cap && dp->seen[i].key; i = (i + 1) & (dp->seen_cap - 1)) {
		const struct seen *s = &dp->seen[i];
		const struct rec_info *ri = &dp->recs[s->rec];
		if (s->key != key)
			continue;
		const char *src = dp->map[ri->dev] ? dp->map[ri->dev] + ri->offset : NULL;
		if (!src) {
			if ((r = bch_dev_read(dp->c->devs[ri->dev]->bdev, dp->cmp, j->h.len, ri->offset)))
				return r;
			src = dp->cmp;
		}
		if (memcmp(src, j->data, j->h.len))
			continue;
		j->h.magic = REF_MAGIC;
		j->h.stored = sizeof(j->ref);
		j->ref = (struct dump_ref) { .offset = ri->offset, .dev = dp->tab[ri->dev] };
		j->data = (const char *)&j->ref;
		j->src = s->rec;
		*ref = true;
		return 0;
	}
	return seen_add(dp, key, dev, j->h.offset, &j->rec);
}

/* A worker's part of a REC record: its data crc, and with compress its zstd frame. */
static void compress_one(struct job *j, ZSTD_CCtx *cctx)
{
	j->h.data_crc = crc32c(j->data, j->h.len);
	if (!cctx)
		return;
	size_t z = zs.compressCCtx(cctx, j->zbuf, bch_compress_bound(DUMP_CHUNK), j->data,
				   j->h.len, DUMP_ZSTD_LEVEL);

	if (!zs.isError(z) && z < j->h.len) {
		j->h.compression = BCH_COMPRESSION_zstd;
		j->h.stored = z;
		j->data = j->zbuf;
	}
}

struct worker {
	struct dumper	*dp;
	ZSTD_CCtx	*cctx;
};

static void *worker(void *arg)
{
	struct dumper *dp = ((struct worker *)arg)->dp;
	ZSTD_CCtx *cctx = ((struct worker *)arg)->cctx;

	free(arg);
	pthread_mutex_lock(&dp->lock);
	for (;;) {
		if (dp->ctail < dp->head) {
			struct job *j = &dp->jobs[dp->ctail++ % DUMP_RING];
			if (j->state != JOB_READY)
				continue;
			j->state = JOB_BUSY;
			pthread_mutex_unlock(&dp->lock);
			compress_one(j, dp->compress ? cctx : NULL);
			pthread_mutex_lock(&dp->lock);
			j->state = JOB_DONE;
			pthread_cond_broadcast(&dp->cond);
		} else if (dp->stop) {
			break;
		} else {
			pthread_cond_wait(&dp->cond, &dp->lock);
		}
	}
	pthread_mutex_unlock(&dp->lock);
	return NULL;
}

/*
 * Write the jobs that are DONE, in order; with wait, wait for each until
 * all filled ones are written (or, with room, only until a slot is free).
 */
static int write_jobs(struct dumper *dp, bool wait, bool all)
{
	int r;

	for (;;) {
		pthread_mutex_lock(&dp->lock);
		struct job *j = &dp->jobs[dp->wtail % DUMP_RING];
		bool more = all ? dp->wtail < dp->head : dp->head - dp->wtail >= DUMP_RING;
		if (!all && !more && wait) {
			pthread_mutex_unlock(&dp->lock);
			return 0;
		}
		if (dp->wtail == dp->head) {
			pthread_mutex_unlock(&dp->lock);
			return 0;
		}
		while (wait && more && j->state != JOB_DONE)
			pthread_cond_wait(&dp->cond, &dp->lock);
		bool done = j->state == JOB_DONE;
		pthread_mutex_unlock(&dp->lock);
		if (!done)
			return 0;
		/* a REF record's source is written before it, its crc known */
		if (j->h.magic == REF_MAGIC)
			j->h.data_crc = dp->recs[j->src].crc;
		else
			dp->recs[j->rec].crc = j->h.data_crc;
		j->h.hdr_crc = crc32c(&j->h, offsetof(struct dump_rec, hdr_crc));
		if ((r = w_put(dp->w, &j->h, sizeof(j->h))) || (r = w_put(dp->w, j->data, j->h.stored))) {
			cmd_err("dump", "%s: %s", dp->out, strerror(-r));
			return r;
		}
		dp->nr_rec++;
		pthread_mutex_lock(&dp->lock);
		j->state = JOB_FREE;
		dp->wtail++;
		pthread_mutex_unlock(&dp->lock);
	}
}

/*
 * Read one chunk (dev, offset, len) into the next job; leave out its zero
 * ends, and make it a REF record when it copies one before.
 */
static int add_chunk(struct dumper *dp, unsigned dev, uint64_t offset, uint32_t len)
{
	struct job *j = &dp->jobs[dp->head % DUMP_RING];
	uint32_t first, last;
	bool ref;
	int r;

	/* the slot must be written first */
	if (dp->head - dp->wtail >= DUMP_RING && (r = write_jobs(dp, true, false)))
		return r;

	const char *buf = dp->map[dev] ? dp->map[dev] + offset : NULL;
	if (!buf) {
		if ((r = bch_dev_read(dp->c->devs[dev]->bdev, j->buf, len, offset))) {
			cmd_err("dump", "%s: reading %" PRIu64 "+%u: %s",
				bch_dev_path(dp->c->devs[dev]->bdev), offset, len, bch_err_str(r));
			return r;
		}
		buf = j->buf;
	}
	/* zeros need no record: undump's images are zero where none is */
	if (!nonzero_span(buf, len, &first, &last))
		return 0;
	j->h = (struct dump_rec) {
		.magic = REC_MAGIC, .dev = dp->tab[dev],
		.offset = offset + first, .len = last - first, .stored = last - first,
	};
	j->data = buf + first;
	if ((r = dedup(dp, j, dev, &ref))) {
		cmd_err("dump", "%s", bch_err_str(r));
		return r;
	}
	dp->nr_ref += ref;
	dp->ref_bytes += ref ? j->h.len : 0;
	if (!ref && !dp->started)	/* no worker could be started */
		compress_one(j, dp->compress ? dp->cctx[0] : NULL);
	pthread_mutex_lock(&dp->lock);
	j->state = !ref && dp->started ? JOB_READY : JOB_DONE;
	dp->head++;
	pthread_cond_broadcast(&dp->cond);
	pthread_mutex_unlock(&dp->lock);
	return write_jobs(dp, false, true);
}

/* Stop the workers (the jobs not taken yet are dropped). */
static void workers_stop(struct dumper *dp)
{
	pthread_mutex_lock(&dp->lock);
	dp->stop = true;
	dp->ctail = dp->head;
	pthread_cond_broadcast(&dp->cond);
	pthread_mutex_unlock(&dp->lock);
	for (unsigned t = 0; t < dp->started; t++)
		pthread_join(dp->th[t], NULL);
	dp->started = 0;
}

static void dumper_exit(struct dumper *dp)
{
	if (dp->threads) {
		workers_stop(dp);
		pthread_mutex_destroy(&dp->lock);
		pthread_cond_destroy(&dp->cond);
	}
	for (unsigned i = 0; i < DUMP_RING; i++) {
		free(dp->jobs[i].buf);
		free(dp->jobs[i].zbuf);
	}
	for (unsigned t = 0; t < dp->threads; t++)
		if (dp->cctx[t])
			zs.freeCCtx(dp->cctx[t]);
	free(dp->cmp);
	free(dp->seen);
	free(dp->recs);
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++)
		if (dp->map[i])
			munmap((void *)dp->map[i], dp->map_len[i]);
}

static int dumper_init(struct dumper *dp)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int r;

	dp->threads = cpus < 1 ? 1 : cpus > DUMP_THREADS ? DUMP_THREADS : cpus;
	pthread_mutex_init(&dp->lock, NULL);
	pthread_cond_init(&dp->cond, NULL);
	if (dp->compress && (r = bch_dl_load(&zstd_lib))) {
		cmd_err("dump", "cannot load %s: %s (or give --no-compress)", zstd_lib.soname,
			zstd_lib.why);
		return r;
	}
	for (unsigned i = 0; i < DUMP_RING; i++)
		if (!(dp->jobs[i].buf = malloc(DUMP_CHUNK)) ||
		    !(dp->jobs[i].zbuf = malloc(bch_compress_bound(DUMP_CHUNK))))
			goto nomem;
	for (unsigned t = 0; dp->compress && t < dp->threads; t++)
		if (!(dp->cctx[t] = zs.createCCtx()))
			goto nomem;
	if (!(dp->cmp = malloc(DUMP_CHUNK)))
		goto nomem;
	/*
	 * Each member mapped read-only: the records are compressed and compared
	 * straight from the page cache (pread copied every byte once more, half
	 * of the main thread's time at 1M files).  The filesystem is not mounted
	 * and not written meanwhile.  A member that cannot be mapped is read.
	 */
	for (unsigned i = 0; i < dp->c->nr_devs; i++) {
		struct bch_dev *ca = dp->c->devs[i];
		uint64_t len = ca && ca->bdev ? bch_dev_size(ca->bdev) : 0;
		void *m = len ? mmap(NULL, len, PROT_READ, MAP_SHARED, bch_dev_fd(ca->bdev), 0)
			      : MAP_FAILED;
		if (m != MAP_FAILED) {
			dp->map[i] = m;
			dp->map_len[i] = len;
		}
	}
	for (unsigned t = 0; t < dp->threads; t++) {
		struct worker *w = malloc(sizeof(*w));
		if (!w)
			goto nomem;
		*w = (struct worker) { dp, dp->cctx[t] };
		if (pthread_create(&dp->th[t], NULL, worker, w)) {
			free(w);
			break;	/* fewer workers (none: the main thread compresses) */
		}
		dp->started++;
	}
	return 0;
nomem:
	cmd_err("dump", "out of memory");
	return -ENOMEM;
}

/* Write the records of ranges d from c into dp's writer; progress on p. */
static int dump_records(struct dumper *dp, const struct bch_dump_ranges *d,
			struct cmd_progress *p, uint64_t total)
{
	uint64_t done = 0;
	int r;

	for (size_t i = 0; i < d->nr; i++) {
		const struct bch_dump_range *rg = &d->r[i];
		for (uint64_t o = 0; o < rg->len; o += DUMP_CHUNK) {
			uint32_t len = rg->len - o < DUMP_CHUNK ? rg->len - o : DUMP_CHUNK;
			if ((r = add_chunk(dp, rg->dev, rg->offset + o, len)))
				return r;
			done += len;
			cmd_progress_update(p, done, total, false);
		}
	}
	return write_jobs(dp, true, true);
}

/* What --scramble-names did, for the summary (NULL: not asked). */
struct scrambled {
	uint64_t	names, xattrs;
};

static int dump_fs(struct bch_fs *c, const char *out, bool compress, bool json,
		   const struct scrambled *sc)
{
	struct bch_dump_ranges d;
	struct writer w = { .crc = ~0U };
	struct dump_hdr h = { .version = DUMP_VERSION, .chunk = DUMP_CHUNK };
	struct dump_dev devs[BCH_SB_MEMBERS_MAX];
	unsigned tab[BCH_SB_MEMBERS_MAX] = { 0 };
	struct cmd_progress p;
	uint64_t total = 0;
	int fd = -1, r, ret = EXIT_FAIL;
	struct dumper dp = { .c = c, .out = out, .tab = tab, .compress = compress, .w = &w };

	if ((r = bch_dump_ranges(c, sc ? BCH_DUMP_REACHABLE | BCH_DUMP_NO_JOURNAL : 0, &d))) {
		cmd_err("dump", "finding the metadata: %s", bch_err_str(r));
		goto out;
	}
	if (dumper_init(&dp))
		goto out;
	memcpy(h.magic, DUMP_MAGIC, 8);
	memcpy(h.uuid, c->sb->user_uuid, 16);
	for (unsigned i = 0; i < c->nr_devs; i++)
		if (c->devs[i] && c->devs[i]->bdev) {
			tab[i] = h.nr_devs;
			devs[h.nr_devs++] = (struct dump_dev) {
				.idx = i, .size = bch_dev_size(c->devs[i]->bdev),
			};
			memcpy(devs[h.nr_devs - 1].uuid, bch_sb_member(c->sb, i)->uuid, 16);
		}
	uint32_t hc = bch_crc32c(~0U, &h, offsetof(struct dump_hdr, crc));
	h.crc = ~bch_crc32c(hc, devs, h.nr_devs * sizeof(devs[0]));
	for (size_t i = 0; i < d.nr; i++)
		total += d.r[i].len;

	if ((fd = open(out, O_WRONLY | O_CREAT | O_EXCL, 0644)) < 0 || !(w.f = fdopen(fd, "w"))) {
		cmd_err("dump", "%s: %s", out, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	cmd_progress_init(&p, stderr, isatty(2), "dump: read");
	if ((r = w_put(&w, &h, sizeof(h))) ||
	    (r = w_put(&w, devs, h.nr_devs * sizeof(devs[0])))) {
		cmd_err("dump", "%s: %s", out, strerror(-r));
		goto unlink;
	}
	if (dump_records(&dp, &d, &p, total))
		goto unlink;
	struct dump_rec e = { .magic = END_MAGIC, .offset = dp.nr_rec, .data_crc = ~w.crc };
	e.hdr_crc = crc32c(&e, offsetof(struct dump_rec, hdr_crc));
	if ((r = w_put(&w, &e, sizeof(e))) || fflush(w.f) || fsync(fileno(w.f))) {
		cmd_err("dump", "%s: %s", out, strerror(r ? -r : errno));
		goto unlink;
	}
	cmd_progress_done(&p);
	fclose(w.f);
	w.f = NULL;

	if (json) {
		struct bch_json j;
		json_begin(&j, stdout, true);
		json_u64(&j, "devices", h.nr_devs);
		json_u64(&j, "records", dp.nr_rec);
		json_u64(&j, "copy_records", dp.nr_ref);
		json_u64(&j, "copy_bytes", dp.ref_bytes);
		json_u64(&j, "metadata_bytes", total);
		json_u64(&j, "superblock_bytes", d.sb_bytes);
		json_u64(&j, "journal_bytes", d.journal_bytes);
		json_u64(&j, "btree_bytes", d.btree_bytes);
		json_u64(&j, "free_bucket_nodes", d.nodes);
		json_u64(&j, "dump_bytes", w.bytes);
		if (sc) {
			json_u64(&j, "scrambled_names", sc->names);
			json_u64(&j, "scrambled_xattrs", sc->xattrs);
		}
		json_end(&j);
	} else {
		char a[32], b[32];
		bch_human_size(total, a, sizeof(a));
		bch_human_size(w.bytes, b, sizeof(b));
		printf("%s: %u devices, %s of metadata in %" PRIu64 " records (%" PRIu64
		       " nodes in free buckets), %s written\n", out, h.nr_devs, a, dp.nr_rec, d.nodes, b);
		if (sc)
			printf("%s: %" PRIu64 " names and %" PRIu64 " xattrs scrambled; no journal, "
			       "reachable nodes only\n", out, sc->names, sc->xattrs);
	}
	ret = EXIT_OK;
	goto out;
unlink:
	cmd_progress_done(&p);
	fclose(w.f);
	unlink(out);
out:
	dumper_exit(&dp);
	bch_dump_ranges_exit(&d);
	return ret;
}

/*
 * --scramble-names.  Names are keyed hash positions in the btrees, so they
 * cannot be changed in the dumped bytes: the metadata is copied into private
 * sparse files (in memory, or made in TMPDIR and unlinked at once; opened
 * through /proc/self/fd, so nothing is left behind whatever happens), that copy is
 * opened read-write (the journal replayed) and every name renamed through
 * the engine (bch_dump_scramble()), closed clean, and dumped with only the
 * nodes it reaches and no journal: old nodes and journal entries still hold
 * the original names.  The original is only read.
 */
struct scratch {
	int		fd[BCH_SB_MEMBERS_MAX];
	char		*paths[BCH_SB_MEMBERS_MAX + 1];
	unsigned	nr;
};

static void scratch_exit(struct scratch *t)
{
	for (unsigned i = 0; i < t->nr; i++) {
		close(t->fd[i]);
		free(t->paths[i]);
	}
	t->nr = 0;
}

/* Memory that can be had without swapping (MemAvailable), in bytes; 0 if unknown. */
static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	unsigned long long kb = 0;
	char line[128];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* Copy the metadata of c (ranges d) into a new private sparse file per member. */
static int scratch_make(struct bch_fs *c, const struct bch_dump_ranges *d, struct scratch *t)
{
	const char *tmp = getenv("TMPDIR");
	unsigned idx[BCH_SB_MEMBERS_MAX];
	char *buf = malloc(DUMP_CHUNK);
	uint64_t bytes = 0;
	int r = -ENOMEM;

	/*
	 * Where: without TMPDIR, in memory (memfd) when the metadata takes at
	 * most a quarter of the available memory, for the renames flush the journal
	 * often and each flush of a file on disk waits for it (100k names: 11 s
	 * on a disk, 1.5 s in memory); else in TMPDIR (default /tmp).
	 */
	for (size_t i = 0; i < d->nr; i++)
		bytes += d->r[i].len;
	bool in_memory = !(tmp && *tmp) && bytes < mem_available() / 4;

	memset(t, 0, sizeof(*t));
	if (!buf)
		goto out;
	for (unsigned i = 0; i < c->nr_devs; i++) {
		if (!c->devs[i] || !c->devs[i]->bdev)
			continue;
		char tmpl[PATH_MAX];
		snprintf(tmpl, sizeof(tmpl), "%s/bcachefs-dump.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		int fd = in_memory ? memfd_create("bcachefs-dump", MFD_CLOEXEC) : mkstemp(tmpl);
		if (in_memory)
			snprintf(tmpl, sizeof(tmpl), "memfd");
		if (fd < 0 || (!in_memory && unlink(tmpl)) ||
		    ftruncate(fd, bch_dev_size(c->devs[i]->bdev))) {
			r = -errno;
			cmd_err("dump", "%s: %s (TMPDIR: where the scrambled copy is made)", tmpl,
				strerror(errno));
			if (fd >= 0)
				close(fd);
			goto out;
		}
		idx[i] = t->nr;
		t->fd[t->nr] = fd;
		if (asprintf(&t->paths[t->nr], "/proc/self/fd/%d", fd) < 0) {
			close(fd);
			goto out;
		}
		t->nr++;
	}
	for (size_t i = 0; i < d->nr; i++) {
		const struct bch_dump_range *rg = &d->r[i];
		for (uint64_t o = 0; o < rg->len; o += DUMP_CHUNK) {
			uint32_t len = rg->len - o < DUMP_CHUNK ? rg->len - o : DUMP_CHUNK;
			if ((r = bch_dev_read(c->devs[rg->dev]->bdev, buf, len, rg->offset + o))) {
				cmd_err("dump", "%s: reading %" PRIu64 "+%u: %s",
					bch_dev_path(c->devs[rg->dev]->bdev), rg->offset + o, len,
					bch_err_str(r));
				goto out;
			}
			uint32_t first, last;
			if (nonzero_span(buf, len, &first, &last) &&
			    pwrite(t->fd[idx[rg->dev]], buf + first, last - first,
				   rg->offset + o + first) != (ssize_t)(last - first)) {
				r = -errno;
				cmd_err("dump", "writing the scrambled copy in %s: %s",
					tmp && *tmp ? tmp : "/tmp", strerror(errno));
				goto out;
			}
		}
	}
	r = 0;
out:
	if (r == -ENOMEM)
		cmd_err("dump", "out of memory");
	free(buf);
	return r;
}

/* Copy, scramble, close: the copy in t is then a clean filesystem with the names scrambled. */
static int scramble_copy(struct bch_fs *c, const struct bch_opts *oo, struct scratch *t,
			 struct scrambled *sc)
{
	struct bch_dump_ranges d;
	uint8_t key[BCH_DUMP_KEY_BYTES];
	char err[512];
	int r;

	if ((r = bch_dump_ranges(c, 0, &d))) {
		cmd_err("dump", "finding the metadata: %s", bch_err_str(r));
		bch_dump_ranges_exit(&d);
		return r;
	}
	r = scratch_make(c, &d, t);
	bch_dump_ranges_exit(&d);
	if (r)
		return r;

	struct bch_opts o = *oo;
	struct bch_fs *s;
	bch_opt_set(&o, Opt_read_only, 0);
	bch_opt_set(&o, Opt_fsck, 0);
	if ((r = bch_fs_open(t->paths, t->nr, &o, &s, err, sizeof(err)))) {
		cmd_err("dump", "--scramble-names: opening the copy read-write: %s "
			"(a filesystem that does not open read-write can only be dumped as it is)", err);
		return r;
	}
	if (getrandom(key, sizeof(key), 0) != sizeof(key)) {
		r = -errno;
		cmd_err("dump", "getrandom: %s", strerror(errno));
		bch_fs_close(s);
		return r;
	}
	r = bch_dump_scramble(s, key, &sc->names, &sc->xattrs);
	explicit_bzero(key, sizeof(key));
	if (r) {
		cmd_err("dump", "%s", s->err_msg[0] ? s->err_msg : bch_err_str(r));
		bch_fs_close(s);
		return r;
	}
	if ((r = bch_fs_close(s)))
		cmd_err("dump", "--scramble-names: closing the copy: %s", bch_err_str(r));
	return r;
}

int cmd_dump(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "no-compress", no_argument, NULL, 'z' },
		{ "scramble-names", no_argument, NULL, 's' },
		{ "json",  no_argument, NULL, 'j' },
		{ "help",  no_argument, NULL, 'h' },
		{ NULL }
	};
	struct bch_opts oo;
	bool json = false, compress = true, scramble = false;
	int opt;

	memset(&oo, 0, sizeof(oo));
	while ((opt = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1)
		switch (opt) {
		case 'o':
			if (cmd_open_opts_parse("dump", &oo, optarg))
				return EXIT_USAGE;
			break;
		case 'z': compress = false; break;
		case 's': scramble = true; break;
		case 'j': json = true; break;
		case 'h': dump_usage(stdout); return EXIT_OK;
		default: return cmd_opt_err("dump", argv, "o:h");
		}
	if (argc - optind < 2) {
		cmd_err("dump", "need FS and OUT (see bcachefs dump --help)");
		return EXIT_USAGE;
	}
	const char *out = argv[argc - 1];
	struct cmd_fs fs;
	int r = cmd_fs_resolve("dump", argv + optind, argc - optind - 1, &fs);
	if (r)
		return r;
	if (fs.mounted) {
		cmd_err("dump", "%s: mounted (fusemount): unmount it first", fs.mnt);
		cmd_fs_free(&fs);
		return EXIT_FAIL;
	}
	if (!access(out, F_OK)) {
		cmd_err("dump", "%s: exists (dump never overwrites)", out);
		cmd_fs_free(&fs);
		return EXIT_FAIL;
	}

	struct bch_fs *c;
	struct bch_opts ro = oo;
	struct scratch t = { .nr = 0 };
	struct scrambled sc = { 0 };
	char err[512];
	/* opened as fsck -n opens: a damaged node does not stop the dump */
	bch_opt_set(&ro, Opt_read_only, 1);
	bch_opt_set(&ro, Opt_fsck, 1);
	if ((r = bch_fs_open(fs.devs, fs.nr, &ro, &c, err, sizeof(err)))) {
		cmd_err("dump", "%s", err);
		cmd_fs_free(&fs);
		return EXIT_FAIL;
	}
	cmd_note_degraded("dump", c, fs.devs, fs.nr);
	if (scramble) {
		r = scramble_copy(c, &oo, &t, &sc);
		bch_fs_close(c);
		if (!r && (r = bch_fs_open(t.paths, t.nr, &ro, &c, err, sizeof(err))))
			cmd_err("dump", "--scramble-names: reopening the copy: %s", err);
		if (r) {
			scratch_exit(&t);
			cmd_fs_free(&fs);
			return EXIT_FAIL;
		}
	}
	r = dump_fs(c, out, compress, json, scramble ? &sc : NULL);
	bch_fs_close(c);
	scratch_exit(&t);
	cmd_fs_free(&fs);
	return r;
}

/* ---------------------------------------------------------------- undump */

static void undump_usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs undump DUMP OUT-IMG[:OUT-IMG...]\n"
"Make sparse images from a dump file of `bcachefs dump`: one per device of\n"
"the dump, in its order (as `dump` listed the members), each of the\n"
"device's size with the metadata at its place and zeros elsewhere: the\n"
"images open and fsck like the original, with file data zeroed (fsck -c\n"
"reports the zeroed data as checksum errors).  The whole dump is checked\n"
"first: a damaged or truncated dump writes nothing.  Existing files are\n"
"never overwritten.\n"
"\n"
"      --json          a summary: {\"version\", \"devices\", \"records\", \"metadata_bytes\"}\n"
"  -h, --help          this text\n"
"\n"
"Exit: 0 written, 1 the dump is damaged or an image could not be written,\n"
"16 usage error.\n");
}

struct reader {
	const char	*path;
	FILE		*f;
	uint64_t	pos;
	uint32_t	crc;
};

/* Read exactly len bytes; -1 (after a message) on a short read. */
static int r_get(struct reader *r, void *p, size_t len, const char *what)
{
	if (fread(p, 1, len, r->f) != len) {
		cmd_err("undump", "%s: truncated at byte %" PRIu64 " (reading %s): not a complete dump",
			r->path, r->pos, what);
		return -1;
	}
	r->crc = bch_crc32c(r->crc, p, len);
	r->pos += len;
	return 0;
}

static int read_head(struct reader *rd, struct dump_hdr *h, struct dump_dev *devs)
{
	if (r_get(rd, h, sizeof(*h), "the header"))
		return -1;
	if (memcmp(h->magic, DUMP_MAGIC, 8)) {
		cmd_err("undump", "%s: not a dump file (bad magic)", rd->path);
		return -1;
	}
	if (h->version < 1 || h->version > DUMP_VERSION || h->nr_devs == 0 || h->nr_devs > BCH_SB_MEMBERS_MAX ||
	    h->chunk == 0 || h->chunk > (64U << 20)) {
		cmd_err("undump", "%s: unsupported dump version %u or bad header", rd->path, h->version);
		return -1;
	}
	if (r_get(rd, devs, h->nr_devs * sizeof(devs[0]), "the device table"))
		return -1;
	uint32_t c = bch_crc32c(~0U, h, offsetof(struct dump_hdr, crc));
	if (~bch_crc32c(c, devs, h->nr_devs * sizeof(devs[0])) != h->crc) {
		cmd_err("undump", "%s: header checksum mismatch: damaged dump", rd->path);
		return -1;
	}
	return 0;
}

/* The REC records read so far, in file order (which is (dev, offset) order). */
struct recs {
	struct rec_seen { uint64_t offset; uint32_t len, crc; uint16_t dev; } *r;
	size_t	nr, cap;
};

static int recs_add(struct recs *rs, const struct dump_rec *rc)
{
	if (rs->nr == rs->cap) {
		size_t cap = rs->cap ? 2 * rs->cap : 1024;
		struct rec_seen *n = realloc(rs->r, cap * sizeof(*n));
		if (!n)
			return -1;
		rs->r = n;
		rs->cap = cap;
	}
	rs->r[rs->nr++] = (struct rec_seen) { rc->offset, rc->len, rc->data_crc, rc->dev };
	return 0;
}

/* Does a REC record before hold exactly the bytes REF record rc (payload f) repeats? */
static bool ref_valid(const struct recs *rs, const struct dump_rec *rc, const struct dump_ref *f)
{
	size_t lo = 0, hi = rs->nr;

	for (unsigned i = 0; i < sizeof(f->zero); i++)
		if (f->zero[i])
			return false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct rec_seen *x = &rs->r[mid];
		if (x->dev < f->dev || (x->dev == f->dev && x->offset < f->offset))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < rs->nr && rs->r[lo].dev == f->dev && rs->r[lo].offset == f->offset &&
	       rs->r[lo].len == rc->len && rs->r[lo].crc == rc->data_crc;
}

/*
 * One pass over the records: check each (fds NULL) or write each to its
 * image.  A REF record (version 2) copies the bytes of an earlier REC
 * record, which pass 1 finds and checks (same length and crc), and pass 2
 * reads back from the image it wrote.  Returns the number of records, or
 * -1 after a message.
 */
static int64_t records(struct reader *rd, const struct dump_hdr *h, const struct dump_dev *devs,
		       const int *fds, uint64_t *bytes)
{
	size_t cap = bch_compress_bound(h->chunk);
	char *buf = malloc(h->chunk), *zbuf = malloc(cap);
	struct recs rs = { 0 };
	int64_t n = 0, ret = -1;
	uint16_t last_dev = 0;
	uint64_t last_end = 0;

	*bytes = 0;
	if (!buf || !zbuf) {
		cmd_err("undump", "out of memory");
		goto out;
	}
	for (;; n++) {
		struct dump_rec rc;
		uint64_t at = rd->pos;
		uint32_t before = ~rd->crc;
		if (r_get(rd, &rc, sizeof(rc), "a record header"))
			goto out;
		if (crc32c(&rc, offsetof(struct dump_rec, hdr_crc)) != rc.hdr_crc ||
		    (rc.magic != REC_MAGIC && rc.magic != END_MAGIC &&
		     (rc.magic != REF_MAGIC || h->version < 2))) {
			cmd_err("undump", "%s: record %" PRId64 " at byte %" PRIu64
				": bad header (checksum or magic): damaged dump", rd->path, n, at);
			goto out;
		}
		if (rc.magic == END_MAGIC) {
			char extra;
			if (rc.offset != (uint64_t)n || rc.data_crc != before) {
				cmd_err("undump", "%s: end record: %s: damaged dump", rd->path,
					rc.offset != (uint64_t)n ? "wrong record count" : "file checksum mismatch");
				goto out;
			}
			if (fread(&extra, 1, 1, rd->f) == 1) {
				cmd_err("undump", "%s: bytes after the end record: damaged dump", rd->path);
				goto out;
			}
			ret = n;
			goto out;
		}
		bool ref = rc.magic == REF_MAGIC;
		if (rc.dev >= h->nr_devs || rc.len == 0 || rc.len > h->chunk ||
		    rc.stored > cap || rc.offset > devs[rc.dev].size ||
		    rc.len > devs[rc.dev].size - rc.offset ||
		    (rc.compression != 0 && (ref || rc.compression != BCH_COMPRESSION_zstd)) ||
		    (ref && rc.stored != sizeof(struct dump_ref)) ||
		    (!ref && !rc.compression && rc.stored != rc.len) ||
		    rc.dev < last_dev || (rc.dev == last_dev && n && rc.offset < last_end)) {
			cmd_err("undump", "%s: record %" PRId64 " at byte %" PRIu64
				": range outside its device or out of order: damaged dump", rd->path, n, at);
			goto out;
		}
		last_dev = rc.dev;
		last_end = rc.offset + rc.len;
		if (ref) {
			struct dump_ref f;
			if (r_get(rd, &f, sizeof(f), "record data"))
				goto out;
			if (!ref_valid(&rs, &rc, &f)) {
				cmd_err("undump", "%s: record %" PRId64 " at byte %" PRIu64
					": copies no record before it: damaged dump", rd->path, n, at);
				goto out;
			}
			*bytes += rc.len;
			if (!fds)
				continue;
			errno = 0;
			if (pread(fds[f.dev], buf, rc.len, f.offset) != (ssize_t)rc.len ||
			    crc32c(buf, rc.len) != rc.data_crc) {
				cmd_err("undump", "reading back image %u at %" PRIu64 ": %s", f.dev,
					f.offset, errno ? strerror(errno) : "changed under us");
				goto out;
			}
		} else {
			if (r_get(rd, rc.compression ? zbuf : buf, rc.stored, "record data"))
				goto out;
			int e = rc.compression ? bch_decompress(rc.compression, zbuf, rc.stored, buf, rc.len) : 0;
			if (e) {
				cmd_err("undump", "%s: record %" PRId64 " at byte %" PRIu64 ": %s", rd->path, n,
					at, bch_err_str(e));
				goto out;
			}
			if (crc32c(buf, rc.len) != rc.data_crc) {
				cmd_err("undump", "%s: record %" PRId64 " at byte %" PRIu64
					": data checksum mismatch: damaged dump", rd->path, n, at);
				goto out;
			}
			if (recs_add(&rs, &rc)) {
				cmd_err("undump", "out of memory");
				goto out;
			}
			*bytes += rc.len;
		}
		if (fds && pwrite(fds[rc.dev], buf, rc.len, rc.offset) != (ssize_t)rc.len) {
			cmd_err("undump", "writing image %u: %s", rc.dev, strerror(errno));
			goto out;
		}
	}
out:
	free(rs.r);
	free(buf);
	free(zbuf);
	return ret;
}

static int undump_open(struct reader *rd, const char *path)
{
	memset(rd, 0, sizeof(*rd));
	rd->path = path;
	rd->crc = ~0U;
	if (!(rd->f = fopen(path, "r"))) {
		cmd_err("undump", "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int cmd_undump(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "json",  no_argument, NULL, 'j' },
		{ "help",  no_argument, NULL, 'h' },
		{ NULL }
	};
	struct dump_dev devs[BCH_SB_MEMBERS_MAX];
	int fds[BCH_SB_MEMBERS_MAX];
	struct dump_hdr h;
	struct reader rd;
	bool json = false;
	unsigned nr = 0, made = 0;
	uint64_t bytes;
	int64_t n;
	char **outs = NULL;
	int opt, ret = EXIT_FAIL;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1)
		switch (opt) {
		case 'j': json = true; break;
		case 'h': undump_usage(stdout); return EXIT_OK;
		default: return cmd_opt_err("undump", argv, "h");
		}
	if (argc - optind < 2) {
		cmd_err("undump", "need DUMP and OUT-IMG (see bcachefs undump --help)");
		return EXIT_USAGE;
	}
	outs = split_devs(argv + optind + 1, argc - optind - 1, &nr);

	/* pass 1: check everything, write nothing */
	if (undump_open(&rd, argv[optind]))
		goto out;
	if (read_head(&rd, &h, devs) || (n = records(&rd, &h, devs, NULL, &bytes)) < 0) {
		fclose(rd.f);
		goto out;
	}
	fclose(rd.f);
	if (nr != h.nr_devs) {
		cmd_err("undump", "%s holds %u devices: give as many OUT-IMG (got %u)",
			argv[optind], h.nr_devs, nr);
		ret = EXIT_USAGE;
		goto out;
	}
	for (unsigned i = 0; i < nr; i++)
		if (!access(outs[i], F_OK)) {
			cmd_err("undump", "%s: exists (undump never overwrites)", outs[i]);
			goto out;
		}

	/* pass 2: write */
	for (made = 0; made < nr; made++) {
		fds[made] = open(outs[made], O_RDWR | O_CREAT | O_EXCL, 0644);
		if (fds[made] < 0 || ftruncate(fds[made], devs[made].size)) {
			cmd_err("undump", "%s: %s", outs[made], strerror(errno));
			if (fds[made] >= 0)
				made++;
			goto fail;
		}
	}
	if (undump_open(&rd, argv[optind]))
		goto fail;
	if (read_head(&rd, &h, devs) || records(&rd, &h, devs, fds, &bytes) != n) {
		fclose(rd.f);
		goto fail;
	}
	fclose(rd.f);
	for (unsigned i = 0; i < nr; i++)
		if (fsync(fds[i]) || close(fds[i])) {
			cmd_err("undump", "%s: %s", outs[i], strerror(errno));
			made = nr;
			goto fail_closed;
		}
	if (json) {
		struct bch_json j;
		json_begin(&j, stdout, true);
		json_u64(&j, "devices", nr);
		json_u64(&j, "records", n);
		json_u64(&j, "metadata_bytes", bytes);
		json_end(&j);
	} else {
		printf("%s: %u images, %" PRId64 " records restored\n", argv[optind], nr, n);
	}
	ret = EXIT_OK;
	goto out;
fail:
	for (unsigned i = 0; i < made; i++)
		close(fds[i]);
fail_closed:
	for (unsigned i = 0; i < made; i++)
		unlink(outs[i]);
out:
	if (outs)
		free_devs(outs);
	return ret;
}
