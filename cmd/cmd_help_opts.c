// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_help_opts.c - `bcachefs help-opts`: the option table, for people and
 * for the man page.
 *
 * The plain form lists every option with its type, default, range and where
 * it applies.  --man prints the same list as roff; man/bcachefs.8 holds that
 * output between the "OPTIONS TABLE" markers, and a CLI test fails when the
 * man page and the table disagree (regenerate with `make man`).  --json
 * prints the table for scripts (completion, front ends), typed.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "opts.h"

static void where(unsigned flags, char *buf, size_t len)
{
	static const struct { unsigned flag; const char *name; } f[] = {
		{ OPT_FORMAT, "format" }, { OPT_DEVICE, "per-device" }, { OPT_MOUNT, "open" },
		{ OPT_RUNTIME, "runtime" }, { OPT_INODE, "per-file" },
	};
	buf[0] = 0;
	for (unsigned i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (flags & f[i].flag) {
			if (buf[0])
				strncat(buf, ", ", len - strlen(buf) - 1);
			strncat(buf, f[i].name, len - strlen(buf) - 1);
		}
}

static void value_text(const struct bch_option *opt, unsigned id, char *buf, size_t len)
{
	char lo[32], hi[32];

	switch (opt->type) {
	case BCH_OPT_BOOL:
		snprintf(buf, len, "yes|no, default %s", opt->def ? "yes" : "no");
		break;
	case BCH_OPT_UINT:
		snprintf(buf, len, "%" PRIu64 "..%" PRIu64 ", default %" PRIu64,
			 opt->min, opt->max, opt->def);
		break;
	case BCH_OPT_SIZE:
		bch_human_size(opt->min, lo, sizeof(lo));
		if (opt->max == UINT64_MAX)
			snprintf(hi, sizeof(hi), "any");
		else
			bch_human_size(opt->max, hi, sizeof(hi));
		if (opt->def) {
			char d[32];
			bch_human_size(opt->def, d, sizeof(d));
			snprintf(buf, len, "size %s..%s%s, default %s", lo, hi,
				 opt->flags & OPT_POW2 ? " (power of 2)" : "", d);
		} else {
			snprintf(buf, len, "size %s..%s%s, default from the device", lo, hi,
				 opt->flags & OPT_POW2 ? " (power of 2)" : "");
		}
		break;
	case BCH_OPT_ENUM: {
		size_t n = 0;
		for (unsigned i = 0; opt->choices[i]; i++)
			n += snprintf(buf + n, len - n, "%s%s", i ? "|" : "", opt->choices[i]);
		char d[32];
		bch_opt_to_text(id, opt->def, d, sizeof(d));
		snprintf(buf + n, len - n, ", default %s", d);
		break;
	}
	case BCH_OPT_TARGET:
		snprintf(buf, len, "label or device, default none");
		break;
	case BCH_OPT_STR:
		snprintf(buf, len, "string");
		break;
	}
}

/* help-opts --json: one element of "options", defaults typed as the option is. */
static void json_option(struct bch_json *j, const struct bch_option *o, unsigned id)
{
	static const char * const types[] = {
		[BCH_OPT_BOOL] = "bool", [BCH_OPT_UINT] = "uint", [BCH_OPT_SIZE] = "size",
		[BCH_OPT_ENUM] = "enum", [BCH_OPT_TARGET] = "target", [BCH_OPT_STR] = "string",
	};
	static const struct { unsigned flag; const char *name; } f[] = {
		{ OPT_FORMAT, "format" }, { OPT_DEVICE, "per_device" }, { OPT_MOUNT, "open" },
		{ OPT_RUNTIME, "runtime" }, { OPT_INODE, "per_file" },
	};
	char d[32];

	json_open(j, NULL, false);
	json_string(j, "name", o->name);
	json_string(j, "type", types[o->type]);
	switch (o->type) {
	case BCH_OPT_BOOL:
		json_bool(j, "default", o->def);
		break;
	case BCH_OPT_UINT:
	case BCH_OPT_SIZE:
		if (o->type == BCH_OPT_SIZE && !o->def)
			json_null(j, "default");	/* chosen from the device */
		else
			json_u64(j, "default", o->def);
		json_u64(j, "min", o->min);
		json_u64(j, "max", o->max);
		json_bool(j, "power_of_2", o->flags & OPT_POW2);
		break;
	case BCH_OPT_ENUM:
		bch_opt_to_text(id, o->def, d, sizeof(d));
		json_string(j, "default", d);
		json_open(j, "choices", true);
		for (unsigned i = 0; o->choices[i]; i++)
			json_string(j, NULL, o->choices[i]);
		json_close(j);
		break;
	case BCH_OPT_TARGET:
		json_string(j, "default", "none");
		break;
	case BCH_OPT_STR:
		json_null(j, "default");
		break;
	}
	json_open(j, "applies", true);
	for (unsigned i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (o->flags & f[i].flag)
			json_string(j, NULL, f[i].name);
	json_close(j);
	json_string(j, "help", o->help);
	json_close(j);
}

/* roff needs "-" escaped and a leading "." or "'" avoided. */
static void roff(const char *s)
{
	for (; *s; s++) {
		if (*s == '-' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs help-opts [--man | --json]\n"
"List every filesystem option: name, values, default, where it applies.\n"
"Options are given as --name=value to format (before a device for\n"
"per-device ones) and as -o name=value when opening.\n"
"\n"
"      --man    print the list as roff, as in man/bcachefs.8\n"
"      --json   print it as one JSON document: {\"version\", \"options\": [{\"name\",\n"
"               \"type\", \"default\", ...}]} (man bcachefs, JSON OUTPUT)\n"
"  -h, --help   this text\n");
}

int cmd_help_opts(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "man",  no_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL }
	};
	bool man = false, json = false;
	struct bch_json j;
	int opt;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1)
		switch (opt) {
		case 'm':
			man = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			return cmd_opt_err("help-opts", argv, "h");
		}
	if (optind != argc) {
		cmd_err("help-opts", "unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (man && json) {
		cmd_err("help-opts", "--man or --json, not both");
		return EXIT_USAGE;
	}
	if (json) {
		json_begin(&j, stdout, true);
		json_open(&j, "options", true);
		for (unsigned i = 0; i < BCH_OPT_NR; i++)
			if (bch_opt_table[i].flags)	/* internal: no command line sets it */
				json_option(&j, &bch_opt_table[i], i);
		json_end(&j);
		return EXIT_OK;
	}

	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *o = &bch_opt_table[i];
		char vals[160], wh[80];

		if (!o->flags)
			continue;	/* internal: no command line sets it */
		value_text(o, i, vals, sizeof(vals));
		where(o->flags, wh, sizeof(wh));
		if (man) {
			char dashed[64];
			snprintf(dashed, sizeof(dashed), "%s", o->name);
			for (char *p = dashed; *p; p++)
				if (*p == '_')
					*p = '-';
			printf(".TP\n\\fB\\-\\-");
			roff(dashed);
			printf("\\fR=\\fI%s\\fR\n", o->type == BCH_OPT_BOOL ? "yes|no" : "value");
			roff(o->help);
			printf(".\n.br\nValues: ");
			roff(vals);
			printf(".\nApplies: %s.\n", wh);
		} else {
			printf("  --%-28s %s\n  %-30s %s; %s\n", o->name, o->help, "", vals, wh);
		}
	}
	return EXIT_OK;
}
