// SPDX-License-Identifier: GPL-2.0
/*
 * opts.c - parsing, validation, display and superblock storage of the
 * options in BCH_OPTS() (opts.h).  Nothing here knows about argv or output.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs_format.h"
#include "errcode.h"
#include "opts.h"

const char * const bch_csum_opt_names[] = { "none", "crc32c", "crc64", "xxhash64", NULL };
const char * const bch_compression_opt_names[] = { "none", "lz4", "gzip", "zstd", NULL };
const char * const bch_error_action_names[] = { "continue", "ro", "panic", NULL };
const char * const bch_str_hash_names[] = { "siphash", NULL };
const char * const bch_member_state_names[] = { "rw", "ro", "failed", "spare", NULL };

const struct bch_option bch_opt_table[BCH_OPT_NR] = {
#define x(_name, _type, _flags, _slot, _def, _min, _max, _choices, _help)	\
	[Opt_##_name] = {							\
		.name = #_name, .type = _type, .flags = _flags,			\
		.sb_slot = _slot, .def = _def, .min = _min, .max = _max,	\
		.choices = _choices, .help = _help,				\
	},
	BCH_OPTS()
#undef x
};

/* Slots must be unique and in range: checked once, at compile time where possible. */
#define x(_name, _type, _flags, _slot, ...)	\
	_Static_assert(_slot < BCH_SB_OPTS_MAX, "sb slot of " #_name " out of range");
BCH_OPTS()
#undef x

void bch_opts_default(struct bch_opts *o)
{
	memset(o, 0, sizeof(*o));
	for (unsigned i = 0; i < BCH_OPT_NR; i++)
		o->v[i] = bch_opt_table[i].def;
}

int bch_opt_lookup(const char *name)
{
	char buf[64];
	size_t n = strlen(name);

	if (n >= sizeof(buf))
		return -1;
	for (size_t i = 0; i <= n; i++)
		buf[i] = name[i] == '-' ? '_' : name[i];

	for (unsigned i = 0; i < BCH_OPT_NR; i++)
		if (!strcmp(buf, bch_opt_table[i].name))
			return i;
	/* common spellings */
	if (!strcmp(buf, "ro"))
		return Opt_read_only;
	return -1;
}

int bch_parse_size(const char *s, uint64_t *res)
{
	char *end;
	unsigned shift = 0;

	if (!*s || !isdigit((unsigned char)*s))
		return -EINVAL;
	/* decimal digits and at most one '.': strtod would also take hex and exponents */
	size_t digits = strspn(s, "0123456789."), dots = 0;
	for (size_t i = 0; i < digits; i++)
		dots += s[i] == '.';
	if (dots > 1)
		return -EINVAL;
	errno = 0;
	double f = strtod(s, NULL);
	end = (char *)s + digits;
	uint64_t whole = strtoull(s, NULL, 10);
	if (errno)
		return -EINVAL;

	switch (tolower((unsigned char)*end)) {
	case '\0':			break;
	case 'k': shift = 10;		end++; break;
	case 'm': shift = 20;		end++; break;
	case 'g': shift = 30;		end++; break;
	case 't': shift = 40;		end++; break;
	case 'p': shift = 50;		end++; break;
	case 'e': shift = 60;		end++; break;
	default:
		return -EINVAL;
	}
	/* Accept "4k", "4K", "4KiB", "4kB"; nothing else after the suffix. */
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (shift && (*end == 'b' || *end == 'B'))
		end++;
	if (*end)
		return -EINVAL;

	if (strchr(s, '.')) {
		double v = f * (double)(1ULL << shift);
		if (v < 0 || v >= 18446744073709551615.0)
			return -ERANGE;
		*res = (uint64_t)v;
	} else {
		if (shift && whole > (UINT64_MAX >> shift))
			return -ERANGE;
		*res = whole << shift;
	}
	return 0;
}

void bch_human_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "kMGTPE";
	unsigned u = 0;

	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64, bytes);
		return;
	}
	/* exact when possible: 256k rather than 0.25M */
	uint64_t v = bytes;
	while (v >= 1024 && !(v & 1023) && u < 6) {
		v >>= 10;
		u++;
	}
	if (v < 1024 && u) {
		snprintf(buf, len, "%" PRIu64 "%c", v, units[u - 1]);
		return;
	}
	double d = bytes;
	u = 0;
	while (d >= 1024 && u < 6) {
		d /= 1024;
		u++;
	}
	/* inexact: always one decimal, so it never looks exact */
	snprintf(buf, len, "%.1f%c", d, units[u - 1]);
}

static int parse_bool(const char *val, uint64_t *res)
{
	static const char * const yes[] = { "", "1", "yes", "true", "on", "y", NULL };
	static const char * const no[]  = { "0", "no", "false", "off", "n", NULL };

	for (unsigned i = 0; yes[i]; i++)
		if (!strcasecmp(val, yes[i]))
			return *res = 1, 0;
	for (unsigned i = 0; no[i]; i++)
		if (!strcasecmp(val, no[i]))
			return *res = 0, 0;
	return -EINVAL;
}

static void list_choices(const struct bch_option *opt, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	for (unsigned i = 0; opt->choices[i] && o < len; i++)
		o += snprintf(buf + o, len - o, "%s%s", i ? ", " : "", opt->choices[i]);
}

int bch_opt_parse(enum bch_opt_id id, const char *val, uint64_t *res,
		  char *err, size_t errlen)
{
	const struct bch_option *opt = &bch_opt_table[id];
	char choices[128];
	int ret;

	switch (opt->type) {
	case BCH_OPT_BOOL:
		if (parse_bool(val, res)) {
			snprintf(err, errlen, "%s: '%s' is not a boolean (yes/no)", opt->name, val);
			return -BCH_ERR_opt_invalid;
		}
		return 0;
	case BCH_OPT_UINT: {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(val, &end, 10);
		if (!*val || *end || errno || val[0] == '-') {
			snprintf(err, errlen, "%s: '%s' is not a number", opt->name, val);
			return -BCH_ERR_opt_invalid;
		}
		*res = v;
		break;
	}
	case BCH_OPT_SIZE:
		ret = bch_parse_size(val, res);
		if (ret) {
			snprintf(err, errlen, "%s: '%s' is not a size (e.g. 4k, 1M, 10G)", opt->name, val);
			return -BCH_ERR_opt_invalid;
		}
		break;
	case BCH_OPT_ENUM: {
		char name[32];
		const char *colon = strchr(val, ':');
		size_t n = colon ? (size_t)(colon - val) : strlen(val);
		unsigned level = 0;

		if (n >= sizeof(name))
			n = sizeof(name) - 1;
		memcpy(name, val, n);
		name[n] = '\0';

		for (unsigned i = 0; opt->choices[i]; i++) {
			if (strcmp(name, opt->choices[i]))
				continue;
			if (colon) {
				char *end;
				unsigned long l = strtoul(colon + 1, &end, 10);
				if (opt->choices != bch_compression_opt_names || !i ||
				    !colon[1] || *end || l < 1 || l > 15) {
					snprintf(err, errlen, "%s: bad level in '%s' (1..15, e.g. zstd:3)",
						 opt->name, val);
					return -BCH_ERR_opt_invalid;
				}
				level = l;
			}
			*res = i | (level << 8);
			return 0;
		}
		list_choices(opt, choices, sizeof(choices));
		snprintf(err, errlen, "%s: unknown value '%s' (one of: %s)", opt->name, val, choices);
		return -BCH_ERR_opt_invalid;
	}
	case BCH_OPT_TARGET:
	case BCH_OPT_STR:
		snprintf(err, errlen, "%s: needs the filesystem's labels to parse", opt->name);
		return -BCH_ERR_opt_invalid;
	}
	return bch_opt_validate(id, *res, err, errlen);
}

int bch_opt_validate(enum bch_opt_id id, uint64_t v, char *err, size_t errlen)
{
	const struct bch_option *opt = &bch_opt_table[id];
	char a[32], b[32], c[32];

	if (opt->type == BCH_OPT_ENUM) {
		if ((v & 0xff) > opt->max || (v >> 16)) {
			snprintf(err, errlen, "%s: value %llu out of range", opt->name,
				 (unsigned long long)v);
			return -BCH_ERR_opt_invalid;
		}
		return 0;
	}
	if (opt->type != BCH_OPT_UINT && opt->type != BCH_OPT_SIZE && opt->type != BCH_OPT_BOOL)
		return 0;

	/* 0 for a device size or bucket size means "choose for me" */
	if (v == 0 && (id == Opt_fs_size || id == Opt_bucket_size))
		return 0;

	if (v < opt->min || v > opt->max) {
		if (opt->type == BCH_OPT_SIZE) {
			bch_human_size(v, a, sizeof(a));
			bch_human_size(opt->min, b, sizeof(b));
			bch_human_size(opt->max, c, sizeof(c));
		} else {
			snprintf(a, sizeof(a), "%llu", (unsigned long long)v);
			snprintf(b, sizeof(b), "%llu", (unsigned long long)opt->min);
			snprintf(c, sizeof(c), "%llu", (unsigned long long)opt->max);
		}
		snprintf(err, errlen, "%s: %s out of range (%s..%s)", opt->name, a, b, c);
		return -BCH_ERR_opt_invalid;
	}
	if ((opt->flags & OPT_POW2) && (v & (v - 1))) {
		bch_human_size(v, a, sizeof(a));
		snprintf(err, errlen, "%s: %s is not a power of two", opt->name, a);
		return -BCH_ERR_opt_invalid;
	}
	if ((opt->flags & OPT_SECTORS) && (v & (BCH_SECTOR_SIZE - 1))) {
		snprintf(err, errlen, "%s: %llu is not a multiple of 512", opt->name,
			 (unsigned long long)v);
		return -BCH_ERR_opt_invalid;
	}
	return 0;
}

void bch_opt_to_text(enum bch_opt_id id, uint64_t v, char *buf, size_t len)
{
	const struct bch_option *opt = &bch_opt_table[id];

	switch (opt->type) {
	case BCH_OPT_BOOL:
		snprintf(buf, len, "%s", v ? "yes" : "no");
		break;
	case BCH_OPT_UINT:
		snprintf(buf, len, "%llu", (unsigned long long)v);
		break;
	case BCH_OPT_SIZE:
		bch_human_size(v, buf, len);
		break;
	case BCH_OPT_ENUM:
		if ((v & 0xff) > opt->max)
			snprintf(buf, len, "invalid(%llu)", (unsigned long long)v);
		else if (v >> 8)
			snprintf(buf, len, "%s:%u", opt->choices[v & 0xff], (unsigned)(v >> 8));
		else
			snprintf(buf, len, "%s", opt->choices[v & 0xff]);
		break;
	case BCH_OPT_TARGET:
		/* needs the superblock for names: see bch_target_to_text() */
		snprintf(buf, len, "%llu", (unsigned long long)v);
		break;
	case BCH_OPT_STR:
		snprintf(buf, len, "-");
		break;
	}
}

int bch_opts_parse_list(struct bch_opts *o, const char *list, unsigned allowed_flags,
			char *err, size_t errlen)
{
	char *copy = strdup(list), *save = NULL, *tok;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		const char *val = eq ? eq + 1 : "";
		uint64_t v;
		int id;

		if (eq)
			*eq = '\0';
		if (!strcmp(tok, "rw")) {
			bch_opt_set(o, Opt_read_only, 0);
			continue;
		}
		id = bch_opt_lookup(tok);
		if (id < 0 || !(bch_opt_table[id].flags & allowed_flags)) {
			snprintf(err, errlen, "unknown option '%s'", tok);
			ret = -BCH_ERR_opt_unknown;
			break;
		}
		if (!eq && bch_opt_table[id].type != BCH_OPT_BOOL) {
			snprintf(err, errlen, "%s: needs a value (%s=...)", tok, tok);
			ret = -BCH_ERR_opt_invalid;
			break;
		}
		ret = bch_opt_parse(id, val, &v, err, errlen);
		if (ret)
			break;
		bch_opt_set(o, id, v);
	}
	free(copy);
	return ret;
}

void bch_opts_from_sb(struct bch_opts *o, const struct bch_sb *sb)
{
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *opt = &bch_opt_table[i];
		if (opt->sb_slot >= 0)
			o->v[i] = sb->opts[opt->sb_slot];
	}
	o->v[Opt_block_size] = (uint64_t)sb->block_size << BCH_SECTOR_SHIFT;
	o->v[Opt_btree_node_size] = (uint64_t)sb->btree_node_size << BCH_SECTOR_SHIFT;
	o->v[Opt_encrypted] = !!(sb->features & BCH_FEATURE_ENCRYPTION);
}

void bch_opts_to_sb(const struct bch_opts *o, struct bch_sb *sb)
{
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *opt = &bch_opt_table[i];
		if (opt->sb_slot >= 0)
			sb->opts[opt->sb_slot] = o->v[i];
	}
	sb->block_size = o->v[Opt_block_size] >> BCH_SECTOR_SHIFT;
	sb->btree_node_size = o->v[Opt_btree_node_size] >> BCH_SECTOR_SHIFT;
}
