// SPDX-License-Identifier: GPL-2.0
/*
 * lat4k.c - latency of random 4 KiB writes into one file (bench/, built by
 * `make bench`, not by `make`).
 *
 *   lat4k [-n N] [-s SEED] [-S SIZE] [-y] [-q] [-r RAWFILE] FILE
 *
 * Writes N blocks of 4 KiB (default 2000) with pwrite(2), each at a block-
 * aligned offset drawn from [0, SIZE) by a fixed-seed generator (xorshift64*,
 * default seed 1), each block new incompressible bytes from the same
 * generator; with -y every write is followed by fdatasync(2), and the time
 * of a write includes it.  SIZE defaults to the file's size; with -S a
 * missing or smaller file is created or extended (sparse) to SIZE first.
 * Prints one line:
 *
 *   lat4k: FILE: N writes of 4 KiB (seed S, SIZE bytes, fdatasync yes|no):
 *   p50 X us, p99 Y us, max Z us, W MB/s
 *
 * and with -q only "X Y Z W" (for scripts).  -r appends every write's time
 * in microseconds, one a line in the order done, to RAWFILE (scripts that
 * pool several runs compute their percentiles from it).  Percentiles are nearest-rank
 * over the sorted per-write times (CLOCK_MONOTONIC).  Exit 0, 1 on an I/O
 * error (named on stderr), 16 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BLOCK	4096

static uint64_t rng_state;

/* xorshift64*: fast, fixed sequence per seed (never 0). */
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile p (0-100] of the n sorted values v. */
static uint64_t pct(const uint64_t *v, size_t n, unsigned p)
{
	size_t rank = (n * p + 99) / 100;

	return v[rank ? rank - 1 : 0];
}

/* 1, 2k, 64M, 1G, 2T: a size in bytes; 0 on a bad string. */
static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	case 't': case 'T': v <<= 40; end++; break;
	}
	return *end ? 0 : v;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: lat4k [-n N] [-s SEED] [-S SIZE] [-y] [-q] FILE\n"
"Random 4 KiB pwrite(2)s into FILE (fixed seed), per-write latency percentiles.\n"
"  -n N      writes (default 2000)\n"
"  -s SEED   generator seed (default 1)\n"
"  -S SIZE   region written, from offset 0 (default: the file's size;\n"
"            a smaller file is extended to it); suffixes k M G T\n"
"  -y        fdatasync after every write (counted in its time)\n"
"  -q        print only \"p50_us p99_us max_us MB/s\"\n"
"  -r FILE   append each write's time (us, one a line) to FILE\n");
}

int main(int argc, char **argv)
{
	uint64_t n = 2000, seed = 1, size = 0;
	bool sync = false, quiet = false;
	const char *raw = NULL;
	int o, fd, ret = 1;

	while ((o = getopt(argc, argv, "n:s:S:yqr:h")) != -1)
		switch (o) {
		case 'n': n = strtoull(optarg, NULL, 10); break;
		case 's': seed = strtoull(optarg, NULL, 10); break;
		case 'S':
			if (!(size = parse_size(optarg))) {
				fprintf(stderr, "lat4k: bad size '%s'\n", optarg);
				return 16;
			}
			break;
		case 'y': sync = true; break;
		case 'q': quiet = true; break;
		case 'r': raw = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 16;
		}
	if (optind != argc - 1 || !n) {
		usage(stderr);
		return 16;
	}
	const char *path = argv[optind];
	struct stat st;

	/* a new file only when told how big */
	if ((fd = open(path, O_RDWR | O_CLOEXEC | (size ? O_CREAT : 0), 0644)) < 0 || fstat(fd, &st)) {
		fprintf(stderr, "lat4k: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (!size)
		size = st.st_size;
	size &= ~(uint64_t)(BLOCK - 1);
	if (size < BLOCK) {
		fprintf(stderr, "lat4k: %s: smaller than 4 KiB; give -S\n", path);
		goto out;
	}
	if ((uint64_t)st.st_size < size && ftruncate(fd, size)) {
		fprintf(stderr, "lat4k: %s: extending to %" PRIu64 ": %s\n", path, size, strerror(errno));
		goto out;
	}

	uint64_t *lat = malloc(n * sizeof(*lat)), buf[BLOCK / 8];
	if (!lat) {
		fprintf(stderr, "lat4k: out of memory\n");
		goto out;
	}
	rng_state = seed ? seed : 1;
	uint64_t t_start = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = rng() % (size / BLOCK) * BLOCK;

		for (unsigned w = 0; w < BLOCK / 8; w++)
			buf[w] = rng();
		uint64_t t0 = now_ns();
		ssize_t r = pwrite(fd, buf, BLOCK, off);
		if (r != BLOCK || (sync && fdatasync(fd))) {
			fprintf(stderr, "lat4k: %s: write %" PRIu64 " at %" PRIu64 ": %s\n", path, i, off,
				r < 0 || r == BLOCK ? strerror(errno) : "short write");
			free(lat);
			goto out;
		}
		lat[i] = now_ns() - t0;
	}
	double secs = (now_ns() - t_start) / 1e9;
	double mbs = secs > 0 ? n * (double)BLOCK / 1e6 / secs : 0;

	if (raw) {
		FILE *f = fopen(raw, "ae");
		bool ok = f;

		for (uint64_t i = 0; ok && i < n; i++)
			ok = fprintf(f, "%" PRIu64 "\n", lat[i] / 1000) > 0;
		if (f && fclose(f))
			ok = false;
		if (!ok) {
			fprintf(stderr, "lat4k: %s: %s\n", raw, strerror(errno));
			free(lat);
			goto out;
		}
	}

	qsort(lat, n, sizeof(*lat), cmp_u64);
	if (quiet)
		printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %.1f\n",
		       pct(lat, n, 50) / 1000, pct(lat, n, 99) / 1000, lat[n - 1] / 1000, mbs);
	else
		printf("lat4k: %s: %" PRIu64 " writes of 4 KiB (seed %" PRIu64 ", %" PRIu64
		       " bytes, fdatasync %s): p50 %" PRIu64 " us, p99 %" PRIu64 " us, max %" PRIu64
		       " us, %.1f MB/s\n", path, n, seed, size, sync ? "yes" : "no",
		       pct(lat, n, 50) / 1000, pct(lat, n, 99) / 1000, lat[n - 1] / 1000, mbs);
	free(lat);
	ret = 0;
out:
	if (close(fd) && !ret) {
		fprintf(stderr, "lat4k: %s: close: %s\n", path, strerror(errno));
		ret = 1;
	}
	return ret;
}
