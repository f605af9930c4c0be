// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_fsck.c - `bcachefs fsck` (also `fsck.bcachefs`, so `fsck -t bcachefs`
 * works): run the check passes, print each problem and what was done about
 * it, and exit with fsck(8)'s codes (a bitmask):
 *   0 clean, 1 errors corrected, 4 errors left uncorrected,
 *   8 operational error, 16 usage error, 32 cancelled by the user.
 *
 * Output is deterministic (golden tests compare it): problems in the order
 * the passes find them, no times or addresses of memory, paths as given.
 */
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "btree.h"
#include "btree_prefetch.h"
#include "cmds.h"
#include "snapshot.h"
#include "errcode.h"
#include "fs.h"
#include "fsck.h"
#include "fsname.h"
#include "opts.h"
#include "super.h"

#define FSCK_EXIT_OK		0
#define FSCK_EXIT_CORRECTED	1
#define FSCK_EXIT_UNCORRECTED	4
#define FSCK_EXIT_ERROR		8
#define FSCK_EXIT_USAGE		16
#define FSCK_EXIT_CANCELLED	32

struct fsck_out {
	bool				json;
	bool				tty;		/* progress shown on stdout */
	bool				ticked;		/* a percentage is on the line */
	struct bch_fsck_file_stats	files;
	bool				files_checked;
	char				fatal[512];	/* the first problem that stops fsck */
	/* $BCACHEFS_FSCK_TIMES set: each pass's wall and CPU time on stderr */
	bool				times;
	char				phase[64];	/* the pass being timed */
	double				wall0, cpu0, main0;	/* when it began (ms) */
};

static double now_ms(clockid_t clk)
{
	struct timespec t;

	clock_gettime(clk, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/*
 * A debugging aid (not output golden tests see: stderr, and only when
 * asked): the pass just ended, its wall time and the CPU time of every
 * thread, then next begins (NULL: the end).
 */
static void times_mark(struct fsck_out *o, const char *next)
{
	if (!o->times)
		return;
	double wall = now_ms(CLOCK_MONOTONIC), cpu = now_ms(CLOCK_PROCESS_CPUTIME_ID);
	double main_cpu = now_ms(CLOCK_THREAD_CPUTIME_ID);

	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	if (o->phase[0])
		fprintf(stderr, "fsck time: %-36s %8.1f ms wall %8.1f ms cpu (%.1f this thread), "
			"peak %ld KiB\n", o->phase, wall - o->wall0, cpu - o->cpu0,
			main_cpu - o->main0, ru.ru_maxrss);
	snprintf(o->phase, sizeof(o->phase), "%s", next ? next : "");
	o->wall0 = wall;
	o->cpu0 = cpu;
	o->main0 = main_cpu;
}

static void progress(struct bch_fsck_ctx *ctx, unsigned pass, const char *what)
{
	struct fsck_out *o = ctx->priv;

	if (o->ticked)
		printf("\r     \r");
	o->ticked = false;
#ifdef __GLIBC__
	/*
	 * What the last pass freed goes back (free pages inside the heap and
	 * its top): the next pass's peak then starts from what is live.
	 */
	malloc_trim(0);
#endif
	if (o->times) {
		char label[64];
		snprintf(label, sizeof(label), "pass %u: %s", pass, what);
		times_mark(o, label);
	}
	if (!o->json)
		printf("pass %u: %s\n", pass, what);
	fflush(stdout);
}

/* On a terminal: the current pass's percentage, rewritten in place. */
static void tick(struct bch_fsck_ctx *ctx, unsigned percent)
{
	struct fsck_out *o = ctx->priv;

	if (!o->tty || o->json)
		return;
	printf("\r%3u%%", percent);
	fflush(stdout);
	o->ticked = true;
}

static enum bch_fsck_answer ask(void)
{
	char line[32];

	for (;;) {
		printf("  fix? [y]es, [n]o, [a]ll of this kind, [s]kip all of this kind, [q]uit: ");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return BCH_FSCK_ANSWER_QUIT;
		switch (line[0]) {
		case 'y': case 'Y': return BCH_FSCK_ANSWER_YES;
		case 'n': case 'N': return BCH_FSCK_ANSWER_NO;
		case 'a': case 'A': return BCH_FSCK_ANSWER_ALL;
		case 's': case 'S': return BCH_FSCK_ANSWER_NONE;
		case 'q': case 'Q': return BCH_FSCK_ANSWER_QUIT;
		}
	}
}

static enum bch_fsck_answer report(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
				   const char *where, const char *detail, int fix)
{
	const struct bch_fsck_problem_info *info = &bch_fsck_problems[p];
	struct fsck_out *o = ctx->priv;
	FILE *f = o->json ? stderr : stdout;

	fprintf(f, "%s%s%s%s\n  %s (0x%04x): %s", where, detail ? ": " : "", detail ? detail : "",
		"", info->name, info->number, info->msg);
	if (fix == -1) {
		fputc('\n', f);
		return ask();
	}
	fprintf(f, ": %s\n", fix > 0 ? "fixing" : fix == BCH_FSCK_CANNOT_FIX ||
		(info->flags & (FSCK_FATAL | FSCK_NOFIX)) ? "cannot fix" : "not fixed");
	if ((info->flags & FSCK_FATAL) && !o->fatal[0])
		snprintf(o->fatal, sizeof(o->fatal), "%s%s%s: %s (%s): cannot fix", where,
			 detail ? ": " : "", detail ? detail : "", info->msg, info->name);
	return BCH_FSCK_ANSWER_NO;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs fsck [OPTION]... FS\n"
"Check a bcachefs filesystem and repair what is wrong.  FS is every member\n"
"device (as arguments or joined by ':') or UUID=<uuid> (block devices are\n"
"scanned for its members); a member missing is an operational error (exit 8)\n"
"naming it, unless -o degraded.  A mounted filesystem (fusemount) is refused.\n"
"\n"
"  -n, --no          check only: open read-only, change nothing\n"
"  -y, --yes         repair every problem without asking\n"
"  -p, --preen       repair only what is safe without asking; report the rest\n"
"                    (without -n/-y/-p, fsck asks per problem on a terminal)\n"
"  -f, --force       check even if the filesystem was closed cleanly\n"
"  -v, --verbose     more detail, and peak memory in the summary\n"
"  -c, --data        pass 11: read every copy of all file data and verify its\n"
"                    checksum (bad copies are rewritten from good ones)\n"
"  -o degraded      check with member devices missing (say which on stderr):\n"
"                    their copies are skipped, not repaired away (--degraded)\n"
"  -o very_degraded  check (with -n only) even if some data has no copy left\n"
"                    (reported as extent_no_copy, never dropped)\n"
"      --json        the summary as JSON on stdout (problems on stderr; man\n"
"                    bcachefs, JSON OUTPUT)\n"
"  -h, --help        this text\n"
"\n"
"Passes: 1 superblocks (every copy on every device); 2 journal (replayed when not\n"
"closed cleanly; missing entries reported); 3-4 btree topology and\n"
"keys (every node read and validated; damaged btrees rebuilt from readable\n"
"leaves), then the snapshot tree and subvolumes (with snapshots; keys of\n"
"deleted snapshots freed); 5 extent pointers (cached copies too) and bucket counts; 6 extents\n"
"and pending rebalance work; 7 inodes; 8 directory entries and xattrs;\n"
"9 directory structure (lost+found); 10 link counts; 11 data (-c); 12 the\n"
"superblock's replicas table against the keys (shown only when it finds\n"
"something; an entry nothing uses is minor: dropped, not counted).\n"
"With several subvolumes, passes 5-10 run once in each one's view (repairs\n"
"land in that subvolume's snapshot).\n"
"A filesystem that was closed cleanly gets pass 1 only, unless -f.  On a\n"
"terminal each pass shows how far it is (percent).\n"
"Encrypted: the key comes from the keyring (bcachefs unlock),\n"
"$BCACHEFS_PASSPHRASE_FILE, the terminal or one line of stdin, before pass 1;\n"
"a wrong or missing key is an operational error (8): nothing is repaired.\n"
"Exit status (bits, as fsck(8)): 0 clean, 1 errors corrected, 4 errors left\n"
"uncorrected, 8 operational error, 16 usage error, 32 cancelled.\n");
}

static void summary(struct bch_fsck_ctx *ctx, struct fsck_out *o, char * const *devs, unsigned nr,
		    int exit_code)
{
	uint64_t found = bch_fsck_nr_found(ctx), fixed = bch_fsck_nr_fixed(ctx);
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	if (o->json) {
		struct bch_json j;

		json_begin(&j, stdout, true);
		json_open(&j, "devices", true);
		for (unsigned i = 0; i < nr; i++)
			json_string(&j, NULL, devs[i]);
		json_close(&j);
		json_open(&j, "problems", false);
		for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
			if (ctx->found[p]) {
				json_open(&j, bch_fsck_problems[p].name, false);
				json_u64(&j, "code", bch_fsck_problems[p].number);
				json_u64(&j, "found", ctx->found[p]);
				json_u64(&j, "fixed", ctx->fixed[p]);
				json_close(&j);
			}
		json_close(&j);
		json_u64(&j, "found", found);
		json_u64(&j, "fixed", fixed);
		json_u64(&j, "left", found - fixed);
		json_bool(&j, "files_checked", o->files_checked);
		json_u64(&j, "inodes", o->files.inodes);
		json_u64(&j, "directories", o->files.dirs);
		json_u64(&j, "files", o->files.files);
		json_u64(&j, "extents", o->files.extents);
		json_u64(&j, "dirents", o->files.dirents);
		json_u64(&j, "data_bytes_verified", o->files.data_bytes);
		json_u64(&j, "peak_rss", (uint64_t)ru.ru_maxrss * 1024);
		json_u64(&j, "exit_code", exit_code);
		/*
		 * an operational error (8), a usage error (16) or a cancel (32):
		 * what stopped fsck, also on stderr; null only when fsck ran to its end
		 */
		const char *err = NULL;
		if (exit_code & (FSCK_EXIT_ERROR | FSCK_EXIT_USAGE))
			err = ctx->err_msg[0] ? ctx->err_msg : o->fatal[0] ? o->fatal :
			      cmd_err_last() ? cmd_err_last() :
			      exit_code & FSCK_EXIT_USAGE ? "usage error (see bcachefs fsck --help)"
							  : "operational error (see stderr)";
		else if (exit_code & FSCK_EXIT_CANCELLED)
			err = "cancelled: the user answered quit";
		json_string(&j, "error", err);
		json_end(&j);
		return;
	}
	if (o->files_checked)
		printf("%" PRIu64 " inodes checked: %" PRIu64 " directories, %" PRIu64 " files, %" PRIu64
		       " extents, %" PRIu64 " directory entries\n", o->files.inodes, o->files.dirs,
		       o->files.files, o->files.extents, o->files.dirents);
	for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
		if (ctx->found[p])
			printf("  %-20s %" PRIu64 " found, %" PRIu64 " fixed\n",
			       bch_fsck_problems[p].name, ctx->found[p], ctx->fixed[p]);
	for (unsigned i = 0; i < nr; i++)
		printf("%s%s", i ? ":" : "", devs[i]);
	printf(": %" PRIu64 " problem%s found, %" PRIu64 " fixed, %" PRIu64 " left\n",
	       found, found == 1 ? "" : "s", fixed, found - fixed);
	if (ctx->verbose)
		printf("peak memory: %ld KiB\n", ru.ru_maxrss);
}

/* A usage error (exit 16, message printed): with --json, the summary says it too. */
static int usage_fail(struct bch_fsck_ctx *ctx, struct fsck_out *o)
{
	if (o->json)
		summary(ctx, o, NULL, 0, FSCK_EXIT_USAGE);
	free(ctx);
	return FSCK_EXIT_USAGE;
}

int cmd_fsck(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "no",		no_argument, NULL, 'n' },
		{ "yes",	no_argument, NULL, 'y' },
		{ "preen",	no_argument, NULL, 'p' },
		{ "force",	no_argument, NULL, 'f' },
		{ "verbose",	no_argument, NULL, 'v' },
		{ "json",	no_argument, NULL, 'j' },
		{ "data",	no_argument, NULL, 'c' },
		{ "degraded",	no_argument, NULL, 'D' },
		{ "help",	no_argument, NULL, 'h' },
		{ NULL }
	};
	struct fsck_out o = { 0 };
	struct bch_opts dopts = { 0 };	/* -o: degraded, very_degraded */
	char oerr[256];
	struct bch_fsck_ctx *ctx = calloc(1, sizeof(*ctx));
	int opt, modes = 0, exit_code = FSCK_EXIT_OK;
	bool data = false;

	if (!ctx)
		abort();
	/* --json anywhere: a usage error found before getopt reaches it still ends in JSON */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		o.json |= !strcmp(argv[i], "--json");
	ctx->mode = BCH_FSCK_ASK;
	ctx->report = report;
	ctx->progress = progress;
	ctx->tick = tick;
	ctx->priv = &o;
	o.tty = isatty(STDOUT_FILENO);
	o.times = getenv("BCACHEFS_FSCK_TIMES") != NULL;
	/* "a" is e2fsck's old spelling of -p */
	while ((opt = getopt_long(argc, argv, "nypafvhco:", longopts, NULL)) != -1)
		switch (opt) {
		case 'n': ctx->mode = BCH_FSCK_NO;	modes++; break;
		case 'y': ctx->mode = BCH_FSCK_YES;	modes++; break;
		case 'a':
		case 'p': ctx->mode = BCH_FSCK_PREEN;	modes++; break;
		case 'f': ctx->force = true;		break;
		case 'v': ctx->verbose = true;		break;
		case 'j': o.json = true;		break;
		case 'c': data = true;			break;
		case 'D': bch_opt_set(&dopts, Opt_degraded, 1); break;
		case 'o':
			if (bch_opts_parse_list(&dopts, optarg, OPT_MOUNT, oerr, sizeof(oerr)) ||
			    (dopts.set & ~((1ULL << Opt_degraded) | (1ULL << Opt_very_degraded)))) {
				cmd_err("fsck", "-o %s: %s", optarg, dopts.set ? "fsck takes only "
					"degraded and very_degraded" : oerr);
				return usage_fail(ctx, &o);
			}
			break;
		case 'h':
			usage(stdout);
			free(ctx);
			return FSCK_EXIT_OK;
		default:
			cmd_opt_err("fsck", argv, "nypafvhco:");
			return usage_fail(ctx, &o);
		}
	if (modes > 1) {
		cmd_err("fsck", "only one of -n, -y and -p");
		return usage_fail(ctx, &o);
	}
	ctx->degraded = dopts.v[Opt_degraded] || dopts.v[Opt_very_degraded];
	if (dopts.v[Opt_very_degraded] && ctx->mode != BCH_FSCK_NO) {
		/* a btree node with no copy left would be "repaired" away */
		cmd_err("fsck", "-o very_degraded checks only: use it with -n");
		return usage_fail(ctx, &o);
	}
	if (optind == argc) {
		usage(stderr);
		cmd_err("fsck", "no devices given");
		return usage_fail(ctx, &o);
	}
	if (ctx->mode == BCH_FSCK_ASK && (!isatty(STDIN_FILENO) || o.json)) {
		cmd_err("fsck", "need a terminal to ask about repairs; use -n, -p or -y");
		return usage_fail(ctx, &o);
	}

	struct cmd_fs fs;
	int rr = cmd_fs_resolve("fsck", argv + optind, argc - optind, &fs);
	if (rr) {
		int code = rr == EXIT_USAGE ? FSCK_EXIT_USAGE : FSCK_EXIT_ERROR;
		if (o.json)
			summary(ctx, &o, argv + optind, argc - optind, code);
		free(ctx);
		return code;
	}
	if (fs.mounted) {
		/* the daemon holds the devices and changes them under us */
		cmd_err("fsck", "%s: mounted (fusemount): unmount it first", fs.mnt);
		if (o.json)
			summary(ctx, &o, argv + optind, argc - optind, FSCK_EXIT_ERROR);
		cmd_fs_free(&fs);
		free(ctx);
		return FSCK_EXIT_ERROR;
	}
	unsigned nr = fs.nr;
	char **devs = fs.devs;
	struct bch_sb *sb = NULL;

	/* encrypted: a wrong or missing key stops here, before any repair (exit 8) */
	char kerr[512];
	if (cmd_crypt_key_early("fsck", devs, nr, kerr, sizeof(kerr))) {
		cmd_err("fsck", "%s", kerr);
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s", kerr);	/* the JSON's "error" */
		if (o.json)
			summary(ctx, &o, devs, nr, FSCK_EXIT_ERROR);
		cmd_fs_free(&fs);
		free(ctx);
		return FSCK_EXIT_ERROR;
	}
	times_mark(&o, "pass 1: superblocks");
	if (!o.json)
		printf("pass 1: superblocks\n");
	int ret = bch_fsck_superblocks(ctx, devs, nr, &sb);
	if (ret && ctx->err_msg[0]) {
		cmd_err("fsck", "%s", ctx->err_msg);
		exit_code |= FSCK_EXIT_ERROR;
	} else if (ret || ctx->fatal) {
		if (ret && !ctx->fatal && o.json)	/* the JSON's "error"; text as it was */
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "reading the superblocks: %s",
				 bch_err_str(ret));
		exit_code |= FSCK_EXIT_ERROR;
	}
	free(sb);

	/* passes 3-4: open the filesystem (replaying the journal) and walk the btrees */
	if (!ret && ctx->stop && !o.json)
		printf("passes 2-12 skipped: they need every member's superblock (fsck -y "
		       "rewrites it)\n");
	if (!ret && !ctx->fatal && !ctx->stop && !ctx->cancelled) {
		struct bch_opts oo;
		struct bch_fs *c;
		char err[512];

		/*
		 * Where fsck -f -n's memory goes (1M files, session 27: peak
		 * 3.0-3.35 MB, median ~3.16; e2fsck -f -n 3.5-3.8).  Mapped
		 * files 2.1 MB: libc 1.35-1.45 MB and ld.so 0.2 MB (the kernel
		 * maps 64 KiB or a whole large folio around each page run, so
		 * little depends on us), our binary 0.54-0.6 MB: the functions
		 * fsck -n runs are linked first and together (Makefile,
		 * scripts/fsck-text-order.sh; spread over the text they put 1 MB
		 * of it in memory).  B's exit waits until the table is freed:
		 * glibc's thread cleanup maps 192 KB of libc nothing else uses
		 * (fsck_files_run.c).  Anonymous memory 1.2 MB at the peak, the
		 * end of pass 5 with pass 8 beside it: the heap 0.39 MB (the
		 * directories' side table 66 KB, key cursors' 32 KB streams, the
		 * read-ahead's slots), the inode table (two bits a number: 248
		 * KB), the roots the passes look up through (inodes 112 KB
		 * packed, dirents 88, extents 68: an interior node's raw arena
		 * is unmapped once packed, btree_cache.c), bucket state 84 KB,
		 * stacks 0.11 MB, our bss 36 KB.  The open peaks lower (the
		 * journal read through a 64 KiB window, journal.c; under -n the
		 * alloc keys leave only their generations, alloc_btree.c; the
		 * 64 KiB leaf limit is set by the open, fs.c).  No pass holds a
		 * leaf whole: pass 3 and the cursors of passes 5-10 stream them
		 * (btree_prefetch.h); only a leaf that does not stream (damage,
		 * encrypted, snapshots' filtered views) is read whole.  Each
		 * pass drops the roots the last one walked, and the heap is
		 * trimmed as each pass begins (progress()).
		 */
#ifdef __GLIBC__
		/*
		 * Buffers of a node's size come and go with every node read (the
		 * copy compared, key arrays): above 128 KiB they get pages of their
		 * own, handed back when freed.  glibc raises that threshold as large
		 * blocks are freed, and they then land in the heap, whose holes stay
		 * resident: at 100k files the peak varied from 4.4 MB to 6.3 MB
		 * with the read-ahead thread's timing, now 4.5-4.7 MB.
		 */
		mallopt(M_MMAP_THRESHOLD, 128 << 10);
		/*
		 * The read-ahead thread (fsck -n) allocates the key arrays of the
		 * nodes it parses, which this thread frees: in an arena of its own
		 * they would leave a second heap's holes resident.  One arena.
		 */
		mallopt(M_ARENA_MAX, 1);
#endif
		memset(&oo, 0, sizeof(oo));
		bch_opt_set(&oo, Opt_fsck, 1);
		if (dopts.v[Opt_degraded])
			bch_opt_set(&oo, Opt_degraded, 1);
		if (dopts.v[Opt_very_degraded])
			bch_opt_set(&oo, Opt_very_degraded, 1);
		/*
		 * Passes scan in key order, so a small node cache does: 512 KiB
		 * when only reading (1M files: as many reads as with 1 MiB, and
		 * 0.5 MB less at pass 3's peak; 256 KiB reads 14% more), of which leaves get
		 * 64 KiB (the open sets it, fs.c, before it reads the alloc
		 * leaves): a pass holds the leaves it scans and reads
		 * each once, while the nodes above them serve every lookup; 8 MiB
		 * when repairing, so changed nodes are not written out again and
		 * again.
		 */
		bch_opt_set(&oo, Opt_btree_cache_size, ctx->mode == BCH_FSCK_NO ? 512 << 10 : 8 << 20);
		if (ctx->mode == BCH_FSCK_NO) {
			bch_opt_set(&oo, Opt_read_only, 1);
			bch_opt_set(&oo, Opt_fsck_defer_recount, 1);	/* pass 3 counts the buckets */
		}
		times_mark(&o, "pass 2: journal (the open)");
		if (!o.json)
			printf("pass 2: journal\n");
		ret = bch_fs_open(devs, nr, &oo, &c, err, sizeof(err));
#ifdef __GLIBC__
		malloc_trim(0);	/* what the open read and freed (journal, superblocks) */
#endif
		if (ret) {
			cmd_err("fsck", "opening the filesystem: %s", err);
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s", err);
			exit_code |= FSCK_EXIT_ERROR;
		} else {
			uint64_t nodes;
			cmd_note_degraded("fsck", c, devs, nr);
			if (ctx->mode == BCH_FSCK_NO) {
				/*
				 * the second core reads and parses the nodes the
				 * passes read next (only read-only: nothing writes
				 * them meanwhile); without it they read them themselves
				 */
				bch_prefetch_start(c);
			}
			if (c->journal_replayed && !o.json)
				printf("not closed cleanly: %" PRIu64 " journal entr%s replayed\n",
				       c->journal_replayed, c->journal_replayed == 1 ? "y" : "ies");
			if (c->journal_torn && !o.json)
				printf("journal: entry %" PRIu64 " unreadable, the last one written: "
				       "torn by the crash (or damaged); its changes were not replayed\n",
				       c->journal_torn);
			bch_fsck_journal(ctx, c);
			if (!ctx->force && !c->journal_replayed && !data && !bch_fsck_nr_found(ctx)) {
				if (!o.json)
					printf("clean: passes 3-12 skipped (-f checks anyway)\n");
			} else {
				times_mark(&o, "pass 3: btree topology and keys");
				if (!o.json)
					printf("pass 3: btree topology and keys\n");
				ret = bch_fsck_btrees(ctx, c, &nodes);
				if (ret) {
					cmd_err("fsck", "%s", ctx->err_msg);
					exit_code |= FSCK_EXIT_ERROR;
				} else if (ctx->verbose && !o.json) {
					printf("btree nodes checked: %" PRIu64 "\n", nodes);
				}
				/* the files passes need sound btrees: after a rebuild, or when none was needed */
				bool btrees_bad = bch_fsck_nr_found(ctx) > bch_fsck_nr_fixed(ctx);
				/* pass 4's second half: the snapshot tree the files passes read through */
				if (!ret && !btrees_bad && !ctx->cancelled) {
					times_mark(&o, "pass 4: snapshots");
					ret = bch_fsck_snapshots(ctx, c);
					if (ret) {
						cmd_err("fsck", "%s", ctx->err_msg);
						exit_code |= FSCK_EXIT_ERROR;
					}
				}
				if (!ret && !btrees_bad && !ctx->cancelled) {
					ret = bch_fsck_files(ctx, c, data, &o.files);
					o.files_checked = !ret;
					if (!ret && !ctx->cancelled)
						ret = bch_fsck_replicas(ctx, c);
					if (ret) {
						cmd_err("fsck", "%s", ctx->err_msg);
						exit_code |= FSCK_EXIT_ERROR;
					}
				}
			}
			times_mark(&o, "the close");
			bch_prefetch_stop(c);
			int cr = bch_fs_close(c);
			if (cr && !ret) {
				cmd_err("fsck", "closing the filesystem: %s", bch_err_str(cr));
				snprintf(ctx->err_msg, sizeof(ctx->err_msg), "closing: %s", bch_err_str(cr));
				ret = cr;
				exit_code |= FSCK_EXIT_ERROR;
			}
		}
	}

	times_mark(&o, NULL);
	if (o.ticked)
		printf("\r     \r");
	uint64_t found = bch_fsck_nr_found(ctx), fixed = bch_fsck_nr_fixed(ctx);
	if (fixed)
		exit_code |= FSCK_EXIT_CORRECTED;
	if (found > fixed)
		exit_code |= FSCK_EXIT_UNCORRECTED;
	if (ctx->cancelled)
		exit_code |= FSCK_EXIT_CANCELLED;
	/* an operational error was reported on stderr; a count would only mislead */
	if (o.json || !(ret && ctx->err_msg[0]))
		summary(ctx, &o, devs, nr, exit_code);
	free_devs(devs);
	free(ctx);
	return exit_code;
}
