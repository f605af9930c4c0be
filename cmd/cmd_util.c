// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_util.c - small helpers shared by the commands: messages (and the one
 * report of a getopt error, cmd_opt_err), device lists,
 * the JSON writer (cmds.h: every --json goes through it), finding the
 * fusemount that holds a device.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <uuid/uuid.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "cmds.h"
#include "opts.h"
#include "super.h"

static char last_err[1024];

void cmd_err(const char *cmd, const char *fmt, ...)
{
	va_list args;

	fflush(stdout);		/* keep the order of what was printed before */
	fprintf(stderr, "bcachefs %s: ", cmd);
	va_start(args, fmt);
	vfprintf(stderr, fmt, args);
	va_end(args);
	fputc('\n', stderr);
	va_start(args, fmt);
	vsnprintf(last_err, sizeof(last_err), fmt, args);
	va_end(args);
}

const char *cmd_err_last(void)
{
	return last_err[0] ? last_err : NULL;
}

int cmd_opt_err(const char *cmd, char * const *argv, const char *optstring)
{
	const char *word = optind > 0 ? argv[optind - 1] : "";
	int len = strcspn(word, "=");

	if (!strncmp(word, "--", 2) && optopt && word[len])
		cmd_err(cmd, "option '%.*s' takes no value (see bcachefs %s --help)", len, word, cmd);
	else if (!strncmp(word, "--", 2) && optopt)
		cmd_err(cmd, "option '%s' needs a value (see bcachefs %s --help)", word, cmd);
	else if (!optopt)	/* a long option getopt does not know (or a prefix of two) */
		cmd_err(cmd, "unknown option '%.*s' (see bcachefs %s --help)", len, word, cmd);
	else {
		/* a short option: the last of the line lacks its value, or is unknown */
		const char *o = optopt < 128 && optstring ? strchr(optstring + strspn(optstring, "+-:"), optopt) : NULL;

		if (o && o[1] == ':')
			cmd_err(cmd, "option '-%c' needs a value (see bcachefs %s --help)", optopt, cmd);
		else
			cmd_err(cmd, "unknown option '-%c' (see bcachefs %s --help)", optopt, cmd);
	}
	return EXIT_USAGE;
}

int cmd_open_opts_parse(const char *cmd, struct bch_opts *o, const char *arg)
{
	uint64_t allowed = (1ULL << Opt_degraded) | (1ULL << Opt_very_degraded);
	char err[256];

	if (bch_opts_parse_list(o, arg, OPT_MOUNT, err, sizeof(err))) {
		cmd_err(cmd, "-o %s: %s (%s takes degraded and very_degraded)", arg, err, cmd);
		return EXIT_USAGE;
	}
	if (o->set & ~allowed) {
		cmd_err(cmd, "-o %s: %s takes only degraded and very_degraded", arg, cmd);
		return EXIT_USAGE;
	}
	return 0;
}

void cmd_note_degraded(const char *cmd, struct bch_fs *c, char * const *devs, unsigned nr)
{
	char names[512], who[160];
	int n = 0;

	if (!c->devs_missing)
		return;
	names[0] = 0;
	for (unsigned i = 0; i < nr && n < (int)sizeof(names); i++)
		n += snprintf(names + n, sizeof(names) - n, "%s%s", i ? ":" : "", devs[i]);
	for (unsigned i = 0; i < c->nr_devs; i++)
		if (bch_dev_missing(c, i))
			cmd_err(cmd, "%s: %s missing: opened %s%s", names,
				bch_sb_member_text(c->sb, i, who, sizeof(who)),
				c->opts.v[Opt_very_degraded] ? "very_degraded" : "degraded",
				c->read_only ? " (read-only)" : "");
}

char **split_devs(char * const *args, unsigned nr_args, unsigned *nr)
{
	unsigned cap = 8, n = 0;
	char **devs = malloc(cap * sizeof(*devs));

	if (!devs)
		abort();
	for (unsigned i = 0; i < nr_args; i++) {
		char *copy = strdup(args[i]), *save = NULL, *tok;

		for (tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
			if (n + 2 > cap) {
				cap *= 2;
				devs = realloc(devs, cap * sizeof(*devs));
				if (!devs)
					abort();
			}
			devs[n++] = strdup(tok);
		}
		free(copy);
	}
	devs[n] = NULL;
	*nr = n;
	return devs;
}

void free_devs(char **devs)
{
	for (char **d = devs; d && *d; d++)
		free(*d);
	free(devs);
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629), 0 if it is not one. */
static unsigned utf8_len(const unsigned char *s)
{
	unsigned n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
	uint32_t cp = s[0] & (0x7f >> n);

	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	for (unsigned i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/*
 * JSON text is UTF-8: a byte that does not start a well-formed sequence (a
 * file name in another encoding) is written as U+FFFD, so the document
 * stays valid whatever the names hold.
 */
void json_str(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		unsigned char c = *p;
		unsigned n;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else if (c < 0x80)
			fputc(c, f);
		else if ((n = utf8_len(p))) {
			fwrite(p, 1, n, f);
			p += n;
			continue;
		} else
			fputs("\\ufffd", f);
		p++;
	}
	fputc('"', f);
}

/* ------------------------------------------------------- JSON writer */

/* Separator and indentation before the next member or element; then its key. */
static void json_key(struct bch_json *j, const char *key)
{
	if (!j->first[j->depth])
		fputs(j->pretty ? "," : ", ", j->f);
	j->first[j->depth] = false;
	if (j->pretty)
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	if (key && !j->array[j->depth]) {
		json_str(j->f, key);
		fputs(": ", j->f);
	}
}

void json_begin(struct bch_json *j, FILE *f, bool pretty)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->pretty = pretty;
	j->first[0] = true;
	json_open(j, NULL, false);
	json_u64(j, "version", BCH_JSON_VERSION);
}

void json_open(struct bch_json *j, const char *key, bool array)
{
	if (j->depth)
		json_key(j, key);
	fputc(array ? '[' : '{', j->f);
	if (j->depth + 1 >= BCH_JSON_DEPTH_MAX)
		abort();	/* a printer nests deeper than any schema: a bug */
	j->depth++;
	j->first[j->depth] = true;
	j->array[j->depth] = array;
}

void json_close(struct bch_json *j)
{
	bool empty = j->first[j->depth], array = j->array[j->depth];

	j->depth--;
	if (j->pretty && !empty)
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	fputc(array ? ']' : '}', j->f);
}

void json_end(struct bch_json *j)
{
	while (j->depth)
		json_close(j);
	fputc('\n', j->f);
	fflush(j->f);
}

void json_fail(struct bch_json *j, const char *msg)
{
	while (j->depth > 1)
		json_close(j);
	if (j->depth == 1)
		json_string(j, "error", msg);
	json_end(j);
}

void json_u64(struct bch_json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void json_s64(struct bch_json *j, const char *key, int64_t v)
{
	json_key(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void json_double(struct bch_json *j, const char *key, double v, int decimals)
{
	json_key(j, key);
	if (v != v || v > 1e300 || v < -1e300)
		fputs("null", j->f);	/* JSON has no NaN or infinity */
	else
		fprintf(j->f, "%.*f", decimals, v);
}

void json_bool(struct bch_json *j, const char *key, bool v)
{
	json_key(j, key);
	fputs(v ? "true" : "false", j->f);
}

void json_null(struct bch_json *j, const char *key)
{
	json_key(j, key);
	fputs("null", j->f);
}

void json_string(struct bch_json *j, const char *key, const char *s)
{
	json_key(j, key);
	if (s)
		json_str(j->f, s);
	else
		fputs("null", j->f);
}

void json_uuid(struct bch_json *j, const char *key, const unsigned char *uuid)
{
	char buf[37];

	uuid_unparse_lower(uuid, buf);
	json_string(j, key, buf);
}

void json_time(struct bch_json *j, const char *key, int64_t secs, long nsec)
{
	time_t t = secs;
	struct tm tm;
	char buf[64];

	/* RFC 3339 has four-digit years */
	if (!gmtime_r(&t, &tm) || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
		return json_null(j, key);
	size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	if (nsec > 0 && nsec < 1000000000L) {
		n += snprintf(buf + n, sizeof(buf) - n, ".%09ld", nsec);
		while (buf[n - 1] == '0')	/* shortest exact fraction */
			buf[--n] = 0;
	}
	snprintf(buf + n, sizeof(buf) - n, "Z");
	json_string(j, key, buf);
}

bool cmd_each_mount(bool (*fn)(const char *point, char *src, dev_t dev, void *priv), void *priv)
{
	char line[16384], src[8192], point[8192];
	unsigned maj, min;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool stop = false;

	if (!f)
		return false;
	while (!stop && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		if (!sep || strncmp(sep + 3, "fuse.bcachefs ", 14) ||
		    sscanf(line, "%*u %*u %u:%u %*s %8191s", &maj, &min, point) != 3 ||
		    sscanf(sep + 17, "%8191s", src) != 1)
			continue;
		bch_mountinfo_unescape(point);
		bch_mountinfo_unescape(src);
		stop = fn(point, src, makedev(maj, min), priv);
	}
	fclose(f);
	return stop;
}

struct mounted_at {
	char * const	*devs;
	unsigned	nr;
	char		*mnt;
	size_t		len;
};

/* the source is the daemon's fsname: absolute device paths joined by ':' */
static bool mount_has_dev(const char *point, char *src, dev_t dev, void *priv)
{
	struct mounted_at *m = priv;
	char want[PATH_MAX], *save = NULL;

	(void)dev;
	for (char *p = strtok_r(src, ":", &save); p; p = strtok_r(NULL, ":", &save))
		for (unsigned i = 0; i < m->nr; i++)
			if (realpath(m->devs[i], want) && !strcmp(p, want)) {
				snprintf(m->mnt, m->len, "%s", point);
				return true;
			}
	return false;
}

int cmd_mounted_at(char * const *devs, unsigned nr, char *mnt, size_t len)
{
	struct mounted_at m = { devs, nr, mnt, len };

	return cmd_each_mount(mount_has_dev, &m);
}
