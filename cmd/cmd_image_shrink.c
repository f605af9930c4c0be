// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_image_shrink.c - the smallest image: `bcachefs image shrink IMG`, and
 * the shrink that ends `format --source DIR IMG` without --fs-size.
 *
 * The smallest size a one-member image can reach is what resize allows
 * (device.c bch_dev_resize_check): its buckets in use now, the reserve of
 * 1/32 of the buckets kept empty for btree nodes, and the superblock area
 * at the end.  The headroom (a percentage of the bytes in use, or a size)
 * is added as empty buckets on top, with their own share of the reserve
 * and two buckets for the open data and node buckets, so that a write of
 * that many bytes of file data fits.
 *
 * The shrink itself is `device resize`'s: allocation past the new end
 * stops, the evacuate job moves extents and nodes down (bch_data_job with
 * first_bucket), the member is resized and the file truncated.  Nothing is
 * written when the checks fail (a mounted image does not open; a damaged
 * one fails its read-only fsck first).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "bcachefs.h"
#include "cmds.h"
#include "data_job.h"
#include "device.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "super.h"
#include "opts.h"
#include "progress.h"
#include "image_shrink.h"

#define SHRINK_STEP_BYTES	(64ULL << 20)

int image_headroom_parse(const char *s, struct image_headroom *h)
{
	char *end;

	memset(h, 0, sizeof(*h));
	if (!s || !*s)
		return -1;
	size_t n = strlen(s);
	if (s[n - 1] == '%') {
		double v = strtod(s, &end);
		if (end != s + n - 1 || end == s || !(v >= 0) || v > IMAGE_HEADROOM_MAX_PCT)
			return -1;
		h->pct_x100 = (uint64_t)(v * 100 + 0.5);
		h->is_pct = true;
		return 0;
	}
	if (bch_parse_size(s, &h->bytes) || h->bytes > IMAGE_HEADROOM_MAX_BYTES)
		return -1;
	return 0;
}

/* Buckets a member needs to hold `used` buckets: resize's rule (reserve of 1/32). */
static uint64_t buckets_for(uint64_t used)
{
	uint64_t a = used + 5, b = ((used + 1) * 32 + 30) / 31;

	return a > b ? a : b;
}

static uint64_t bytes_of(uint64_t nbuckets, unsigned bucket_sectors)
{
	return (nbuckets * bucket_sectors + (1ULL << BCH_SB_MAX_SIZE_BITS)) << BCH_SECTOR_SHIFT;
}

int image_shrink_plan(struct bch_fs *c, const struct image_headroom *h, struct image_shrink_plan *p,
		      char *err, size_t errlen)
{
	struct bch_member *m = bch_sb_member(c->sb, 0);
	struct bch_alloc_space sp;

	memset(p, 0, sizeof(*p));
	if (c->nr_devs != 1 || !m || !bch_member_exists(m))
		return bch_errf(err, errlen, -EINVAL, "only an image of one member can be shrunk "
				"(this filesystem has %u)", c->nr_devs);
	bch_alloc_dev_space(c, 0, &sp);
	uint64_t bucket = (uint64_t)m->bucket_size << BCH_SECTOR_SHIFT;
	uint64_t used = sp.nbuckets - sp.nr_empty;
	uint64_t floor = m->first_bucket + BCH_MIN_NR_BUCKETS;
	struct bch_sb_field_journal *jf = bch_sb_get_journal(c->sb);
	unsigned runs = jf ? (jf->field.u64s * 8 - sizeof(jf->field)) / sizeof(jf->runs[0]) : 0;

	for (unsigned i = 0; i < runs; i++)
		if (jf->runs[i].dev == 0 && jf->runs[i].start + jf->runs[i].nr + BCH_MIN_NR_BUCKETS > floor)
			floor = jf->runs[i].start + jf->runs[i].nr + BCH_MIN_NR_BUCKETS;

	p->bucket_bytes = bucket;
	p->used_bytes = used * bucket;
	p->nbuckets = m->nbuckets;
	p->size_bytes = bytes_of(m->nbuckets, m->bucket_size);
	p->headroom_bytes = h->is_pct ? (p->used_bytes * h->pct_x100 + 9999) / 10000 : h->bytes;

	uint64_t nb = buckets_for(used);
	p->min_nbuckets = nb > floor ? nb : floor;
	p->min_bytes = bytes_of(p->min_nbuckets, m->bucket_size);
	/* the headroom: whole buckets of data, their reserve, the open data and node buckets */
	uint64_t extra = (p->headroom_bytes + bucket - 1) / bucket;
	nb = buckets_for(used + extra + (p->headroom_bytes ? 2 : 0));
	p->target_nbuckets = nb > floor ? nb : floor;
	p->target_bytes = bytes_of(p->target_nbuckets, m->bucket_size);
	return 0;
}

int image_shrink_run(struct bch_fs **cp, char ***paths, unsigned *nr, const struct bch_opts *open_opts,
		     const struct image_shrink_plan *p, bool progress, struct image_shrink_result *res,
		     char *err, size_t errlen)
{
	struct bch_fs *c = *cp;
	struct bch_member *m = bch_sb_member(c->sb, 0);
	struct cmd_progress pr;
	uint64_t nbuckets, target = p->target_nbuckets;
	int r;

	memset(res, 0, sizeof(*res));
	res->old_bytes = p->size_bytes;
	/*
	 * What lies past the end must fit below it beside the reserve kept
	 * empty there: when the plan's end leaves too little room for that (a
	 * tree of a few thousand small files), the end moves up a little at a
	 * time, never past the file's size.
	 */
	for (;;) {
		if (target >= m->nbuckets) {
			res->new_bytes = p->size_bytes;
			return 0;
		}
		r = bch_dev_resize_check(c, 0, bytes_of(target, m->bucket_size), &nbuckets, err, errlen);
		if (r != -ENOSPC)
			break;
		target += target / 16 > 4 ? target / 16 : 4;
	}
	if (r)
		return r;
	struct bch_data_job j = { .kind = BCH_DATA_JOB_evacuate, .dev = 0, .first_bucket = target };
	bch_alloc_dev_set_limit(c, 0, nbuckets);
	if ((r = bch_data_job_init(c, &j, err, errlen)))
		goto unlimit;
	cmd_progress_init(&pr, stderr, progress, "image shrink: moved");
	do {
		r = bch_data_job_step(c, &j, SHRINK_STEP_BYTES);
		cmd_progress_update(&pr, j.bytes_done, j.bytes_total, false);
	} while (r > 0);
	cmd_progress_update(&pr, j.bytes_done, j.bytes_total, true);
	cmd_progress_done(&pr);
	res->moved_bytes = j.bytes_done;
	if (r < 0) {
		bch_errf(err, errlen, r, "moving data down: %s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
		goto unlimit;
	}
	if (j.stuck) {
		r = bch_errf(err, errlen, -ENOSPC, "%" PRIu64 " extents or nodes could not be moved "
			     "below the new end (last: %s)", j.stuck, j.problem);
		goto unlimit;
	}
	if ((r = bch_dev_resize(cp, paths, nr, open_opts, 0, bytes_of(target, m->bucket_size), err, errlen)))
		goto unlimit;
	m = bch_sb_member((*cp)->sb, 0);
	res->new_bytes = bytes_of(m->nbuckets, m->bucket_size);
	return 0;
unlimit:
	if (*cp)
		bch_alloc_dev_set_limit(*cp, 0, UINT64_MAX);
	return r;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs image shrink [OPTION]... IMAGE\n"
"Shrink an image file of one member to what it holds plus a headroom: print\n"
"the smallest size it can reach, move data down and cut the file.\n"
"\n"
"      --headroom=PCT%%|SIZE  empty space to keep for file data: a percentage of\n"
"                            the bytes in use, or a size (k, M, G, T); default %s\n"
"  -n, --dry-run             print the sizes, change nothing\n"
"      --json                a summary for scripts (sizes in bytes)\n"
"  -h, --help                this text\n"
"\n"
"The image is checked first (a read-only fsck): a damaged image, or one that\n"
"is mounted, is refused with nothing written. Grow it again with\n"
"`bcachefs device resize IMAGE 0 SIZE`.\n"
"Exit codes: 0 success, 1 failure (refused, damaged, no space), 16 usage error.\n",
		IMAGE_HEADROOM_DEFAULT);
}

static void print_plan(FILE *f, const char *img, const struct image_shrink_plan *p)
{
	char a[32], b[32], d[32], e[32];

	bch_human_size(p->size_bytes, a, sizeof(a));
	bch_human_size(p->used_bytes, b, sizeof(b));
	bch_human_size(p->min_bytes, d, sizeof(d));
	bch_human_size(p->target_bytes, e, sizeof(e));
	fprintf(f, "%s: %s, %s in use; smallest possible size %s (%" PRIu64 " bytes); "
		"with the headroom %s (%" PRIu64 " bytes)\n", img, a, b, d, p->min_bytes, e,
		p->target_bytes);
}

/*
 * The image checked whole before anything moves: `bcachefs fsck -n -f` in a
 * child (its output to /dev/null), so that a damaged image is refused with
 * nothing written.  0 clean; else err says what.
 */
static int check_clean(const char *img, char *err, size_t errlen)
{
	char *argv[] = { "fsck", "-n", "-f", (char *)img, NULL };
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0)
		return bch_errf(err, errlen, -errno, "fork: %s", strerror(errno));
	if (!pid) {
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		optind = 0;	/* a fresh getopt for fsck */
		_exit(cmd_fsck(4, argv));
	}
	if (waitpid(pid, &status, 0) < 0)
		return bch_errf(err, errlen, -errno, "waitpid: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	return bch_errf(err, errlen, -EIO, "fsck -n -f does not find it clean (exit %d): "
			"run bcachefs fsck first", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

int cmd_image_shrink(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "headroom",	required_argument, NULL, 'H' },
		{ "dry-run",	no_argument,	   NULL, 'n' },
		{ "json",	no_argument,	   NULL, 'j' },
		{ "help",	no_argument,	   NULL, 'h' },
		{ NULL }
	};
	struct image_headroom h;
	const char *hs = IMAGE_HEADROOM_DEFAULT;
	bool dry = false, json = false;
	char err[512];
	int c_, r;

	optind = 1;
	while ((c_ = getopt_long(argc, argv, "no:h", longopts, NULL)) != -1) {
		switch (c_) {
		case 'o': {
			/* image verbs take -o; a shrink moves data: every member, read-write */
			struct bch_opts open;
			bch_opts_default(&open);
			if (cmd_open_opts_parse("image shrink", &open, optarg))
				return EXIT_USAGE;
			cmd_err("image shrink", "-o %s: a shrink moves data and needs its member "
				"present and writable", optarg);
			return EXIT_USAGE;
		}
		case 'H': hs = optarg;		break;
		case 'n': dry = true;		break;
		case 'j': json = true;		break;
		case 'h': usage(stdout);	return EXIT_OK;
		default:
			return cmd_opt_err("image shrink", argv, "no:h");
		}
	}
	if (optind + 1 != argc) {
		cmd_err("image shrink", "give one image file");
		fprintf(stderr, "Try 'bcachefs image shrink --help'.\n");
		return EXIT_USAGE;
	}
	if (image_headroom_parse(hs, &h)) {
		cmd_err("image shrink", "--headroom '%s': not a percentage (0..%u%%) or a size "
			"(at most 1T)", hs, IMAGE_HEADROOM_MAX_PCT);
		return EXIT_USAGE;
	}
	const char *img = argv[optind];
	if (access(img, R_OK | W_OK)) {
		cmd_err("image shrink", "%s: %s", img, strerror(errno));
		return EXIT_FAIL;
	}
	if ((r = check_clean(img, err, sizeof(err)))) {
		cmd_err("image shrink", "%s: %s (nothing written)", img, err);
		return EXIT_FAIL;
	}

	char **paths = calloc(1, sizeof(*paths));
	unsigned nr = 1;
	struct bch_opts o;
	struct bch_fs *c = NULL;
	struct image_shrink_plan p;
	struct image_shrink_result res = { 0 };
	double t0 = cmd_now();

	paths[0] = strdup(img);
	/* the sizes from a read-only open: a refusal writes nothing */
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_read_only, 1);
	if ((r = bch_fs_open(paths, nr, &o, &c, err, sizeof(err)))) {
		cmd_err("image shrink", "%s: %s (nothing written)", img, err);
		r = EXIT_FAIL;
		goto out;
	}
	r = image_shrink_plan(c, &h, &p, err, sizeof(err));
	bch_fs_close(c);
	c = NULL;
	if (r) {
		cmd_err("image shrink", "%s: %s (nothing written)", img, err);
		r = EXIT_USAGE;
		goto out;
	}
	if (!json)
		print_plan(stdout, img, &p);
	fflush(stdout);
	if (p.target_bytes > p.size_bytes) {
		char a[32], b[32];
		bch_human_size(p.headroom_bytes, a, sizeof(a));
		bch_human_size(p.size_bytes, b, sizeof(b));
		cmd_err("image shrink", "%s: a headroom of %s does not fit: the image would grow "
			"past its %s (nothing written; grow it with device resize)", img, a, b);
		r = EXIT_USAGE;
		goto out;
	}
	res.old_bytes = res.new_bytes = p.size_bytes;
	if (!dry && p.target_nbuckets < p.nbuckets) {
		bch_opts_default(&o);
		if ((r = bch_fs_open(paths, nr, &o, &c, err, sizeof(err)))) {
			cmd_err("image shrink", "%s: %s (nothing written)", img, err);
			r = EXIT_FAIL;
			goto out;
		}
		if (!(r = image_shrink_plan(c, &h, &p, err, sizeof(err))))
			r = image_shrink_run(&c, &paths, &nr, &o, &p, isatty(2) && !json, &res,
					     err, sizeof(err));
	}
	int cr = c ? bch_fs_close(c) : 0;
	if (r || cr) {
		cmd_err("image shrink", "%s: %s", img, r ? err : bch_err_str(cr));
		r = EXIT_FAIL;
		goto out;
	}
	if (json) {
		printf("{\"version\":%d,\"image\":", BCH_JSON_VERSION);
		json_str(stdout, img);
		printf(",\"old_size\":%" PRIu64 ",\"min_size\":%" PRIu64
		       ",\"size\":%" PRIu64 ",\"used_bytes\":%" PRIu64 ",\"headroom_bytes\":%" PRIu64
		       ",\"bucket_size\":%" PRIu64 ",\"moved_bytes\":%" PRIu64 ",\"dry_run\":%s"
		       ",\"seconds\":%.3f}\n", res.old_bytes, p.min_bytes,
		       res.new_bytes, p.used_bytes, p.headroom_bytes, p.bucket_bytes, res.moved_bytes,
		       dry ? "true" : "false", cmd_now() - t0);
	} else if (!dry) {
		char a[32], b[32];
		bch_human_size(res.old_bytes, a, sizeof(a));
		bch_human_size(res.new_bytes, b, sizeof(b));
		printf("%s: %s -> %s\n", img, a, b);
	}
	r = EXIT_OK;
out:
	for (unsigned i = 0; i < nr; i++)
		free(paths[i]);
	free(paths);
	return r;
}
