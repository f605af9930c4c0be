// SPDX-License-Identifier: GPL-2.0
/*
 * btree_bench.c - our btree engine against LMDB on the same workload, in
 * the same folder: N random 16-byte keys (BENCH_SEQ=1: in order) with 32-byte values inserted in
 * transactions of 1000 (each committed durably), random point lookups, a
 * full ordered scan (best of SCAN_PASSES for each engine; BENCH_DEBUG=1
 * prints every pass), random deletes in transactions of 1000.  Each engine
 * runs in its own child process, so peak RSS is its own.
 *
 * On-disk size is what the files take (allocated blocks), with all N keys
 * in (before the deletes, every dirty node written) and after close (the
 * keys deleted).  Ours is formatted like for like with LMDB: one copy of
 * metadata (LMDB keeps one; format's default on one device is two, which
 * doubles the nodes and the journal: BENCH_DEFAULT_FORMAT=1 measures that)
 * and discard on, so space the filesystem freed is punched out of the image
 * as LMDB reuses its free pages; without it a sparse image keeps every block
 * the allocator's rotor ever wrote.  BENCH_DEBUG=1 also prints where our
 * bytes go (nodes, fill, journal, buckets).
 *
 *   build/btree-bench DIR [N]       (make bench runs it)
 *
 * BENCH_DEBUG=1 also prints our process's memory every tenth of the
 * inserts and every twentieth of the deletes (where the peak builds up),
 * and the leaves' arenas resident (mincore); with BENCH_SMAPS=1 each of its
 * mappings of 64 KiB or more, with BENCH_TRIM=1 what malloc_trim() would
 * hand back after the inserts (heap holes of whole pages), with
 * BENCH_MALLOC_INFO=1 malloc_info()'s free chunks, with BENCH_NODES=1 each
 * leaf's arena.  BENCH_INPROC=1 runs the engine in this process (heaptrack,
 * which does not follow forks).
 *
 * BENCH_ENGINE=ours (or lmdb) runs one engine only: A/B runs of two builds
 * of ours, alternated, on a machine whose load moves; BENCH_CPU=1 times
 * the phases by the process's CPU time (fsyncs' waits left out).
 *
 * Instructions (no hardware counters in a VM: callgrind), one of our
 * phases alone, each a function of its own:
 *   BENCH_ENGINE=ours BENCH_INPROC=1 valgrind --tool=callgrind \
 *     --toggle-collect=ours_scan build/btree-bench DIR 100000
 * (ours_insert, ours_lookup, ours_scan: one call a pass, ours_delete).
 * BENCH_SCAN_PASSES=N scans N times (a perf record of the scan).
 */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <lmdb.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bkey.h"
#include "btree.h"
#include "errcode.h"
#include "format.h"
#include "alloc.h"
#include "fs.h"

#define TXN	1000
/* A scan of 1M keys takes ~15 ms: each engine scans this often, best counts. */
#define SCAN_PASSES	5

/* BENCH_SCAN_PASSES=N: N instead (a profile of the scan loop). */
static int scan_passes(void)
{
	const char *s = getenv("BENCH_SCAN_PASSES");
	return s && atoi(s) > 0 ? atoi(s) : SCAN_PASSES;
}

struct result {
	double	ops[4];		/* insert, lookup, scan, delete: ops/s */
	uint64_t bytes;		/* on disk after close */
	uint64_t full_bytes;	/* on disk with all keys */
	long	rss_kib;
};

/* BENCH_CPU=1: the process's CPU time instead of the clock (A/B runs on a loaded machine) */
static double now(void)
{
	static int cpu = -1;
	struct timespec ts;

	if (cpu < 0)
		cpu = getenv("BENCH_CPU") != NULL;
	clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* BENCH_SEQ=1: keys inserted in order (appends) instead of at random. */
static bool seq_keys;
static uint64_t key_hi(uint64_t i) { return seq_keys ? 1 : (i * 0x9e3779b97f4a7c15ULL) >> 8; }
static uint64_t key_lo(uint64_t i) { return seq_keys ? i : i * 0xc2b2ae3d27d4eb4fULL; }

/* What a scan that reads every value's length and first byte adds up to. */
static uint64_t value_sum(uint64_t n)
{
	uint64_t s = 0;

	for (uint64_t i = 0; i < n; i++)
		s += 32 + (i & 255);
	return s;
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "btree-bench: %s: %s\n", what, msg);
	exit(1);
}

static uint64_t file_bytes(const char *path)
{
	struct stat st;
	return stat(path, &st) ? 0 : (uint64_t)st.st_blocks * 512;
}

struct tree_stats {
	uint64_t nodes[4], keys, u64s, sectors_written, node_bytes;
	uint64_t arena, arena_used, index, pending, nr;
	uint64_t arena_resident;	/* pages of the arenas in memory (mincore) */
};

/* Bytes of [p, p + len) resident (mmap'd arenas; heap ones count as their length). */
static uint64_t resident_bytes(const void *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)p & ~(page - 1), hi = ((uintptr_t)p + len + page - 1) & ~(page - 1);
	size_t n = (hi - lo) / page;
	unsigned char *v = malloc(n ? n : 1);
	uint64_t r = 0;

	if (!v || mincore((void *)lo, hi - lo, v)) {
		free(v);
		return len;
	}
	for (size_t i = 0; i < n; i++)
		r += (v[i] & 1) ? page : 0;
	free(v);
	return r;
}

static int count_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct tree_stats *st = priv;

	(void)c;
	st->nodes[b->level < 3 ? b->level : 3]++;
	if (!b->level) {
		st->keys += b->nr;
		st->u64s += b->u64s;
	}
	st->sectors_written += b->sectors_written;
	st->node_bytes += bch_btree_node_bytes(b);
	st->arena += b->arena_bytes;
	st->arena_used += b->arena_used;
	if (b->arena) {
		/* with the index when it lies after the keys' space, in the same allocation */
		size_t ib = b->index_in_arena ? (size_t)b->cap * 2 * (b->index_wide ? 4 : 2) : 0;
		uint64_t r = resident_bytes(b->arena, b->arena_bytes + ib);
		st->arena_resident += r;
		if (getenv("BENCH_NODES") && !b->level)
			fprintf(stderr, "node nr %u cap %u used %zu bytes %zu index %zu resident %" PRIu64
				" over %" PRId64 "\n", b->nr, b->cap, b->arena_used, b->arena_bytes, ib, r,
				(int64_t)r - (int64_t)((b->arena_used + ib + 4095) & ~4095UL));
	}
	st->index += bch_btree_node_bytes(b) - sizeof(*b) - b->u64s * 8 - bch_btree_node_pending_bytes(b);
	st->pending += bch_btree_node_pending_bytes(b);
	st->nr += b->nr;
	return 0;
}

/* BENCH_DEBUG: the process's memory now (anonymous, files, heap's peak). */
static void rss_status(const char *indent)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];

	if (!f)
		return;
	fprintf(stderr, "%s", indent);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM", 5) || !strncmp(line, "VmRSS", 5) ||
		    !strncmp(line, "RssAnon", 7) || !strncmp(line, "RssFile", 7)) {
			line[strcspn(line, "\n")] = 0;
			fprintf(stderr, " %s;", line);
		}
	struct mallinfo2 mi = mallinfo2();
	fprintf(stderr, " malloc: heap %.1fM (in use %.1fM, free %.1fM), mmapped %.1fM\n",
		mi.arena / 1048576.0, mi.uordblks / 1048576.0, mi.fordblks / 1048576.0,
		mi.hblkhd / 1048576.0);
	fclose(f);
	if (getenv("BENCH_SMAPS")) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "awk '/^[0-9a-f]+-/{m=$0} /^Rss:/{if ($2>=64) print $2, m}' /proc/%d/smaps >&2", getpid());
		if (system(cmd)) {}
	}
}

/* BENCH_DEBUG: where the bytes go (the tree's nodes, the image's blocks). */
static void debug_stats(struct bch_fs *c, const char *path, const char *when)
{
	struct tree_stats st = { 0 };
	struct bch_fs_space sp;

	if (!getenv("BENCH_DEBUG"))
		return;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr, "%s: before flush: cache %.1fM, peak RSS so far %.1fM\n", when,
		bch_btree_cache_bytes(c) / 1048576.0, ru.ru_maxrss / 1024.0);
	bch_btree_walk_nodes(c, BCH_BTREE_ID_test, count_node, &st);
	fprintf(stderr, "  test btree: keys %.1fM (%" PRIu64 "), arenas %.1fM (used %.1fM,"
		" resident %.2fM), index %.1fM, pending %.1fM\n",
		st.u64s * 8 / 1048576.0, st.nr, st.arena / 1048576.0, st.arena_used / 1048576.0,
		st.arena_resident / 1048576.0,
		st.index / 1048576.0, st.pending / 1048576.0);
	rss_status("  ");
	if (getenv("BENCH_MALLOC_INFO"))
		malloc_info(0, stderr);
	if (getenv("BENCH_TRIM")) {
		malloc_trim(0);
		rss_status("  trimmed:");
	}
	memset(&st, 0, sizeof(st));
	if (bch_btree_flush_all(c))
		die("flush", c->err_msg);
	bch_btree_walk_nodes(c, BCH_BTREE_ID_test, count_node, &st);
	uint64_t all = 0;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++) {
		struct tree_stats o = { 0 };
		bch_btree_walk_nodes(c, id, count_node, &o);
		all += o.nodes[0] + o.nodes[1] + o.nodes[2] + o.nodes[3];
	}
	fprintf(stderr, "  nodes in all btrees: %" PRIu64 "\n", all);
	bch_fs_space(c, &sp);
	fprintf(stderr, "%s: image %.1fM; nodes leaf %" PRIu64 " interior %" PRIu64 "+%" PRIu64
		"; leaf keys %" PRIu64 ", live %.1fM (%.1f%% of leaves' space); written %.1fM;"
		" space used %.1fM; cache %.1fM (nodes %.1fM)\n",
		when, file_bytes(path) / 1048576.0, st.nodes[0], st.nodes[1], st.nodes[2] + st.nodes[3],
		st.keys, st.u64s * 8 / 1048576.0,
		st.nodes[0] ? 100.0 * st.u64s * 8 / (st.nodes[0] * (double)c->sb->btree_node_size * 512) : 0,
		st.sectors_written * 512 / 1048576.0, sp.used / 1048576.0,
		bch_btree_cache_bytes(c) / 1048576.0, st.node_bytes / 1048576.0);
	struct bch_dev_usage u;
	bch_dev_usage_get(c, 0, &u);
	fprintf(stderr, "  buckets %" PRIu64 " free %" PRIu64 ":", u.nbuckets, u.free_buckets);
	for (unsigned i = 0; i < BCH_DATA_NR; i++)
		if (u.buckets[i])
			fprintf(stderr, " type%u %" PRIu64 " (%.1fM live)", i, u.buckets[i],
				u.sectors[i] / 2048.0);
	fprintf(stderr, "\n");
}

/*
 * Our phases, each a function of its own (noinline): callgrind counts one
 * alone (--toggle-collect=ours_scan), the machine's load moving nothing.
 */
static __attribute__((noinline)) void ours_insert(struct bch_fs *c, struct btree_trans *t, uint64_t n)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS_MIN, sizeof(struct bch_raw) + 32);
	struct bch_raw *v = bkey_val(k);

	/* asked once: getenv() a key was 600M of the run's 16G instructions */
	bool debug = getenv("BENCH_DEBUG") != NULL;

	v->len = 32;
	for (uint64_t i = 0; i < n; i++) {
		k->p = POS(key_hi(i), key_lo(i), 0);
		memset(v->data, (int)i, 32);
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		if ((i + 1) % TXN == 0 || i + 1 == n)
			if (bch_trans_commit(t, BCH_TRANS_SYNC))
				die("commit", c->err_msg);
		if (debug && (i + 1) % (n / 10 ? n / 10 : 1) == 0) {
			fprintf(stderr, "%" PRIu64 " keys: cache %.1fM;", i + 1,
				bch_btree_cache_bytes(c) / 1048576.0);
			rss_status("");
		}
	}
	free(k);
}

static __attribute__((noinline)) void ours_lookup(struct bch_fs *c, uint64_t n, uint64_t lookups)
{
	srandom(1);
	for (uint64_t i = 0; i < lookups; i++) {
		uint64_t j = random() % n;
		struct bch_bkey *got;
		if (bch_btree_lookup(c, BCH_BTREE_ID_test, POS(key_hi(j), key_lo(j), 0), &got))
			die("lookup", c->err_msg[0] ? c->err_msg : "missing key");
		free(got);
	}
}

static __attribute__((noinline)) void ours_scan(struct bch_fs *c, uint64_t n)
{
	uint64_t seen = 0;
	struct btree_iter it;
	int ierr;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_test, POS_MIN, POS_MAX);
	const struct bch_bkey *sk;
	uint64_t sum = 0;	/* a scan reads what it visits: a byte of every value */
	while ((sk = bch_btree_iter_next(&it, &ierr))) {
		const struct bch_raw *rv = bkey_val(sk);
		sum += rv->len + rv->data[0];
		seen++;
	}
	bch_btree_iter_exit(&it);
	if (sum != value_sum(n))
		die("scan", "wrong values");
	if (ierr)
		die("scan", c->err_msg);
	if (seen != n)
		die("scan", "wrong number of keys");
}

static __attribute__((noinline)) void ours_delete(struct bch_fs *c, struct btree_trans *t, uint64_t n)
{
	struct bch_bkey *del = bch_bkey_alloc(BCH_BKEY_deleted, POS_MIN, 0);
	bool debug = getenv("BENCH_DEBUG") != NULL;

	for (uint64_t i = 0; i < n; i++) {
		del->p = POS(key_hi(i), key_lo(i), 0);
		bch_trans_update(t, BCH_BTREE_ID_test, del);
		if ((i + 1) % TXN == 0 || i + 1 == n)
			if (bch_trans_commit(t, BCH_TRANS_SYNC))
				die("delete", c->err_msg);
		if (debug && (i + 1) % (n / 20 ? n / 20 : 1) == 0) {
			fprintf(stderr, "%" PRIu64 " deleted: cache %.1fM;", i + 1,
				bch_btree_cache_bytes(c) / 1048576.0);
			rss_status("");
		}
	}
	free(del);
}

static void run_ours(const char *dir, uint64_t n, struct result *res)
{
	char path[512], err[512];
	struct bch_format_dev d = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	struct bch_fs *c;

	snprintf(path, sizeof(path), "%s/ours.img", dir);
	unlink(path);
	d.path = path;
	d.size = 4ULL << 30;
	d.durability = 1;
	bool like_lmdb = !getenv("BENCH_DEFAULT_FORMAT");
	d.discard = like_lmdb;
	bch_opts_default(&o);
	if (like_lmdb)
		bch_opt_set(&o, Opt_metadata_replicas, 1);
	if (bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)))
		die("format", err);
	char *paths[] = { path };
	if (bch_fs_open(paths, 1, NULL, &c, err, sizeof(err)))
		die("open", err);

	if (getenv("BENCH_DEBUG"))
		rss_status("after open:");
	struct btree_trans *t;
	bch_trans_init(c, &t);

	double t0 = now();
	ours_insert(c, t, n);
	res->ops[0] = n / (now() - t0);

	uint64_t lookups = n < 200000 ? n : 200000;
	t0 = now();
	ours_lookup(c, n, lookups);
	res->ops[1] = lookups / (now() - t0);

	res->ops[2] = 0;
	for (int pass = 0, passes = scan_passes(); pass < passes; pass++) {
		t0 = now();
		ours_scan(c, n);
		double rate = n / (now() - t0);
		if (getenv("BENCH_DEBUG"))
			fprintf(stderr, "scan pass %d: %.0f keys/s\n", pass, rate);
		if (rate > res->ops[2])
			res->ops[2] = rate;
	}

	/* with all keys in: every dirty node written (untimed, as a close would) */
	debug_stats(c, path, "after insert");
	if (bch_btree_flush_all(c) || bch_journal_flush(c))
		die("flush", c->err_msg);
	res->full_bytes = file_bytes(path);

	t0 = now();
	ours_delete(c, t, n);
	res->ops[3] = n / (now() - t0);
	debug_stats(c, path, "after delete");
	bch_trans_exit(t);
	if (bch_fs_close(c))
		die("close", "failed");
	res->bytes = file_bytes(path);
}

static void run_lmdb(const char *dir, uint64_t n, struct result *res)
{
	char path[512];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val key, val;
	uint64_t kb[2];
	unsigned char vb[32];

	snprintf(path, sizeof(path), "%s/lmdb", dir);
	mkdir(path, 0755);
	char f[600];
	snprintf(f, sizeof(f), "%s/data.mdb", path);
	unlink(f);
	snprintf(f, sizeof(f), "%s/lock.mdb", path);
	unlink(f);
	if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 8ULL << 30) || mdb_env_open(env, path, 0, 0644))
		die("lmdb", "open");
	key.mv_size = 16;
	key.mv_data = kb;
	val.mv_size = 32;
	val.mv_data = vb;

	double t0 = now();
	for (uint64_t i = 0; i < n; ) {
		mdb_txn_begin(env, NULL, 0, &txn);
		if (!i)
			mdb_dbi_open(txn, NULL, 0, &dbi);
		for (unsigned j = 0; j < TXN && i < n; j++, i++) {
			kb[0] = __builtin_bswap64(key_hi(i));	/* big-endian: same order as ours */
			kb[1] = __builtin_bswap64(key_lo(i));
			memset(vb, (int)i, 32);
			if (mdb_put(txn, dbi, &key, &val, 0))
				die("lmdb", "put");
		}
		if (mdb_txn_commit(txn))
			die("lmdb", "commit");
	}
	res->ops[0] = n / (now() - t0);
	snprintf(f, sizeof(f), "%s/data.mdb", path);
	res->full_bytes = file_bytes(f);

	uint64_t lookups = n < 200000 ? n : 200000;
	srandom(1);
	t0 = now();
	mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	for (uint64_t i = 0; i < lookups; i++) {
		uint64_t j = random() % n;
		kb[0] = __builtin_bswap64(key_hi(j));
		kb[1] = __builtin_bswap64(key_lo(j));
		MDB_val out;
		if (mdb_get(txn, dbi, &key, &out))
			die("lmdb", "get");
	}
	res->ops[1] = lookups / (now() - t0);

	res->ops[2] = 0;
	for (int pass = 0, passes = scan_passes(); pass < passes; pass++) {
		t0 = now();
		MDB_cursor *cur;
		uint64_t seen = 0;
		mdb_cursor_open(txn, dbi, &cur);
		MDB_val ck, cv;
		uint64_t sum = 0;	/* the same reading of every value as ours */
		while (!mdb_cursor_get(cur, &ck, &cv, seen ? MDB_NEXT : MDB_FIRST)) {
			sum += cv.mv_size + ((const unsigned char *)cv.mv_data)[0];
			seen++;
		}
		mdb_cursor_close(cur);
		if (sum != value_sum(n))
			die("lmdb", "scan values");
		if (seen != n)
			die("lmdb", "scan count");
		double rate = n / (now() - t0);
		if (getenv("BENCH_DEBUG"))
			fprintf(stderr, "scan pass %d: %.0f keys/s\n", pass, rate);
		if (rate > res->ops[2])
			res->ops[2] = rate;
	}
	mdb_txn_abort(txn);

	t0 = now();
	for (uint64_t i = 0; i < n; ) {
		mdb_txn_begin(env, NULL, 0, &txn);
		for (unsigned j = 0; j < TXN && i < n; j++, i++) {
			kb[0] = __builtin_bswap64(key_hi(i));
			kb[1] = __builtin_bswap64(key_lo(i));
			mdb_del(txn, dbi, &key, NULL);
		}
		if (mdb_txn_commit(txn))
			die("lmdb", "commit");
	}
	res->ops[3] = n / (now() - t0);
	mdb_env_close(env);
	snprintf(f, sizeof(f), "%s/data.mdb", path);
	res->bytes = file_bytes(f);
}

static void in_child(void (*fn)(const char *, uint64_t, struct result *), const char *dir,
		     uint64_t n, struct result *res)
{
	int fds[2];

	if (getenv("BENCH_INPROC")) {	/* a memory profiler that does not follow forks */
		struct rusage ru;
		fn(dir, n, res);
		getrusage(RUSAGE_SELF, &ru);
		res->rss_kib = ru.ru_maxrss;
		return;
	}
	if (pipe(fds))
		die("pipe", strerror(errno));
	pid_t pid = fork();
	if (!pid) {
		struct rusage ru;
		close(fds[0]);
		fn(dir, n, res);
		getrusage(RUSAGE_SELF, &ru);
		res->rss_kib = ru.ru_maxrss;
		if (write(fds[1], res, sizeof(*res)) != sizeof(*res))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], res, sizeof(*res)) != sizeof(*res))
		die("child", "failed");
	close(fds[0]);
	waitpid(pid, NULL, 0);
}

int main(int argc, char *argv[])
{
	struct result ours = { 0 }, lmdb = { 0 };
	static const char * const phase[] = { "insert (txn 1000, durable)", "random lookup",
					      "ordered scan", "delete (txn 1000, durable)" };

	if (argc < 2)
		die("usage", "btree-bench DIR [N]");
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000000;
	seq_keys = getenv("BENCH_SEQ") != NULL;
	/* BENCH_ENGINE=ours|lmdb: only that one (A/B runs of our engine); the other's row is 0 */
	const char *only = getenv("BENCH_ENGINE");
	if (!only || !strcmp(only, "ours"))
		in_child(run_ours, argv[1], n, &ours);
	if (!only || !strcmp(only, "lmdb"))
		in_child(run_lmdb, argv[1], n, &lmdb);

	printf("btree: %" PRIu64 " %s keys (16-byte keys, 32-byte values)\n", n,
	       seq_keys ? "sequential" : "random");
	printf("%-30s %14s %14s %8s\n", "phase", "ours ops/s", "LMDB ops/s", "ours/LMDB");
	for (unsigned i = 0; i < 4; i++)
		printf("%-30s %14.0f %14.0f %8.2f\n", phase[i], ours.ops[i], lmdb.ops[i],
		       ours.ops[i] / lmdb.ops[i]);
	printf("%-30s %13.1fM %13.1fM %8.2f\n", "on-disk size with all keys",
	       ours.full_bytes / 1048576.0, lmdb.full_bytes / 1048576.0,
	       (double)ours.full_bytes / lmdb.full_bytes);
	printf("%-30s %13.1fM %13.1fM %8.2f\n", "on-disk size after close", ours.bytes / 1048576.0,
	       lmdb.bytes / 1048576.0, (double)ours.bytes / lmdb.bytes);
	printf("%-30s %13.1fM %13.1fM %8.2f\n", "peak RSS", ours.rss_kib / 1024.0,
	       lmdb.rss_kib / 1024.0, (double)ours.rss_kib / lmdb.rss_kib);
	printf("(ours: %s)\n", getenv("BENCH_DEFAULT_FORMAT") ? "format's defaults" :
	       "metadata_replicas=1, discard: like for like with LMDB");
	return 0;
}
