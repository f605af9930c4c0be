// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_list.c - `bcachefs list`: print the keys or nodes of btrees, and
 * `bcachefs list-journal`: print the journal entries replay would use.
 *
 * Both open the filesystem read-only (nothing is written) and print a stable
 * text form: positions as inode:offset:snapshot, one key or node per line.
 * --json prints the same through the shared writer (cmds.h): a key is an
 * object with its position as numbers, its type and its value as the text
 * form; nodes and journal entries likewise.  An error after output began
 * ends the document with "error" (json_fail), so stdout stays valid JSON.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "cmds.h"
#include "errcode.h"
#include "fs.h"
#include "fsname.h"
#include "journal.h"

/* o: -o degraded / very_degraded as given (cmd_open_opts_parse) */
static int open_ro(const char *cmd, char **devs, unsigned nr, struct bch_opts *o, struct bch_fs **c)
{
	char err[512];

	bch_opt_set(o, Opt_read_only, 1);
	int r = bch_fs_open(devs, nr, o, c, err, sizeof(err));
	if (r)
		cmd_err(cmd, "%s", err);
	else
		cmd_note_degraded(cmd, *c, devs, nr);
	return r;
}

struct list_args {
	struct bch_bpos	start, end;
	int		level;		/* -1: leaves (keys mode) */
	bool		nodes;
	struct bch_json	*j;		/* --json, else NULL */
};

static void json_pos(struct bch_json *j, const char *key, struct bch_bpos p)
{
	json_open(j, key, false);
	json_u64(j, "inode", p.inode);
	json_u64(j, "offset", p.offset);
	json_u64(j, "snapshot", p.snapshot);
	json_close(j);
}

/* A key: {"pos", "type", "size" (bytes an extent covers, else 0), "value" (text)}. */
static void json_bkey(struct bch_json *j, const struct bch_bkey *k)
{
	char buf[512], pos[80];
	const char *val = buf;

	bch_bkey_to_text(k, buf, sizeof(buf));
	/* the text is "pos type value": keep the value */
	bch_bpos_to_text(k->p, pos, sizeof(pos));
	size_t n = strlen(pos), t = strlen(bch_bkey_type_name(k->type));
	if (!strncmp(val, pos, n) && val[n] == ' ')
		val += n + 1;
	if (!strncmp(val, bch_bkey_type_name(k->type), t) && (val[t] == ' ' || !val[t]))
		val += t + !!val[t];
	json_open(j, NULL, false);
	json_pos(j, "pos", k->p);
	json_string(j, "type", bch_bkey_type_name(k->type));
	json_u64(j, "size", (uint64_t)k->size << 9);
	json_string(j, "value", val);
	json_close(j);
}

static void json_ptrs(struct bch_json *j, const struct bch_extent_ptr *ptrs, unsigned nr)
{
	json_open(j, "ptrs", true);
	for (unsigned i = 0; i < nr; i++) {
		json_open(j, NULL, false);
		json_u64(j, "dev", ptrs[i].dev);
		json_u64(j, "sector", ptrs[i].offset);
		json_u64(j, "gen", ptrs[i].gen);
		json_close(j);
	}
	json_close(j);
}

static int print_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct list_args *a = priv;
	char lo[80], hi[80];

	(void)c;
	if (a->level >= 0 && b->level != a->level)
		return 0;
	if (bpos_cmp(b->max_key, a->start) < 0 || bpos_cmp(b->min_key, a->end) > 0)
		return 0;
	if (a->nodes && a->j) {
		char seq[20];

		snprintf(seq, sizeof(seq), "%016" PRIx64, b->seq);
		json_open(a->j, NULL, false);
		json_u64(a->j, "level", b->level);
		json_pos(a->j, "min", b->min_key);
		json_pos(a->j, "max", b->max_key);
		json_string(a->j, "seq", seq);
		json_u64(a->j, "keys", b->nr);
		json_u64(a->j, "written", (uint64_t)b->sectors_written << 9);
		json_ptrs(a->j, b->ptrs, b->nr_ptrs);
		json_close(a->j);
		return 0;
	}
	if (a->nodes) {
		bch_bpos_to_text(b->min_key, lo, sizeof(lo));
		bch_bpos_to_text(b->max_key, hi, sizeof(hi));
		printf("node level %u %s..%s seq %016" PRIx64 " keys %u written %u sectors", b->level,
		       lo, hi, b->seq, b->nr, b->sectors_written);
		for (unsigned i = 0; i < b->nr_ptrs; i++)
			printf(" ptr %u:%" PRIu64 " gen %u", b->ptrs[i].dev, (uint64_t)b->ptrs[i].offset,
			       b->ptrs[i].gen);
		putchar('\n');
		return 0;
	}
	for (unsigned i = 0; i < b->nr; i++) {
		char buf[512];
		struct bch_bkey_buf kb;
		if (bpos_cmp(bch_btree_key_pos(b, i), a->start) < 0 || bpos_cmp(bch_btree_key_pos(b, i), a->end) > 0)
			continue;
		const struct bch_bkey *k = bch_btree_key(b, i, &kb);
		if (a->j) {
			json_bkey(a->j, k);
			continue;
		}
		bch_bkey_to_text(k, buf, sizeof(buf));
		printf("%s\n", buf);
	}
	return 0;
}

static int list_keys(struct bch_fs *c, unsigned id, struct list_args *a)
{
	if (!c->roots->r[id].key)
		return 0;	/* a btree not made yet (snapshots: with the first subvolume) */
	struct btree_iter it;
	const struct bch_bkey *k;
	char buf[512];
	int r;

	bch_btree_iter_init(&it, c, id, a->start, a->end);
	while ((k = bch_btree_iter_next(&it, &r))) {
		if (a->j) {
			json_bkey(a->j, k);
		} else {
			bch_bkey_to_text(k, buf, sizeof(buf));
			printf("%s\n", buf);
		}
		if (bpos_eq(k->p, POS_MAX))
			break;
	}
	bch_btree_iter_exit(&it);
	return r;
}

/*
 * FS named on the command line (fsname.h), as devices: a mounted filesystem
 * is refused (its daemon holds the devices and changes them as we read).
 */
static int fs_devs(const char *cmd, char * const *args, unsigned nr, struct cmd_fs *fs)
{
	int r = cmd_fs_resolve(cmd, args, nr, fs);

	if (!r && fs->mounted) {
		cmd_err(cmd, "%s: mounted (fusemount): unmount it first", fs->mnt);
		return EXIT_FAIL;
	}
	return r;
}

static void list_usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs list [OPTION]... [-o degraded] FS\n"
"Print the keys (or nodes) of btrees, read-only.  FS: the member devices (as\n"
"arguments or joined by ':') or UUID=<uuid>; a mounted filesystem is refused.\n"
"\n"
"  -b, --btree=NAME    only this btree (extents, inodes, dirents, xattrs, alloc,\n"
"                      test, rebalance_work, snapshots, reflink, stripes);\n"
"                      default: every btree, each after a header line\n"
"  -s, --start=POS     first position (inode:offset[:snapshot]); default 0:0:0\n"
"  -e, --end=POS       last position; default max\n"
"  -l, --level=N       keys of the nodes at level N (0: leaves)\n"
"  -m, --mode=MODE     keys (default) or nodes\n"
"  -o degraded         members may be missing when the others hold a copy of\n"
"                      everything (each missing one is named on stderr);\n"
"     very_degraded    even when some data has no copy left (its nodes fail)\n"
"      --json          one JSON document: {\"version\", \"btrees\": [{\"btree\",\n"
"                      \"keys\" or \"nodes\": [...]}]} (man bcachefs, JSON OUTPUT)\n"
"  -h, --help          this text\n"
"\n"
"Exit: 0 listed, 1 the filesystem could not be read, 16 usage error.\n");
}

int cmd_list(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "btree", required_argument, NULL, 'b' },
		{ "start", required_argument, NULL, 's' },
		{ "end",   required_argument, NULL, 'e' },
		{ "level", required_argument, NULL, 'l' },
		{ "mode",  required_argument, NULL, 'm' },
		{ "json",  no_argument,       NULL, 'j' },
		{ "help",  no_argument,       NULL, 'h' },
		{ NULL }
	};
	struct list_args a = { POS_MIN, POS_MAX, -1, false, NULL };
	struct bch_opts oo;
	struct bch_json j;
	bool json = false;
	int btree = -1, opt;
	char *end;

	memset(&oo, 0, sizeof(oo));
	while ((opt = getopt_long(argc, argv, "b:s:e:l:m:o:h", longopts, NULL)) != -1)
		switch (opt) {
		case 'o':
			if (cmd_open_opts_parse("list", &oo, optarg))
				return EXIT_USAGE;
			break;
		case 'b':
			if ((btree = bch_btree_id_parse(optarg)) < 0) {
				cmd_err("list", "unknown btree '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 's':
		case 'e':
			if (bch_bpos_parse(optarg, opt == 's' ? &a.start : &a.end)) {
				cmd_err("list", "bad position '%s' (want inode:offset[:snapshot])", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'l':
			a.level = strtol(optarg, &end, 10);
			if (*end || a.level < 0 || a.level > 15) {
				cmd_err("list", "bad level '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'm':
			if (!strcmp(optarg, "nodes"))
				a.nodes = true;
			else if (strcmp(optarg, "keys")) {
				cmd_err("list", "mode is keys or nodes, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			list_usage(stdout);
			return EXIT_OK;
		default:
			return cmd_opt_err("list", argv, "b:s:e:l:m:o:h");
		}
	if (optind == argc) {
		cmd_err("list", "no devices given");
		return EXIT_USAGE;
	}

	struct cmd_fs fs;
	int r = fs_devs("list", argv + optind, argc - optind, &fs);
	if (r)
		return r;

	unsigned nr = fs.nr;
	char **devs = fs.devs;
	struct bch_fs *c;
	r = open_ro("list", devs, nr, &oo, &c);
	if (r) {
		free_devs(devs);
		return EXIT_FAIL;
	}
	if (json) {
		a.j = &j;
		json_begin(&j, stdout, true);
		json_open(&j, "btrees", true);
	}
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r; id++) {
		if (btree >= 0 && id != (unsigned)btree)
			continue;
		if (json) {
			json_open(&j, NULL, false);
			json_string(&j, "btree", bch_btree_id_name(id));
			json_open(&j, a.nodes ? "nodes" : "keys", true);
		} else if (btree < 0) {
			printf("btree %s:\n", bch_btree_id_name(id));
		}
		r = a.nodes || a.level > 0 ? bch_btree_walk_nodes(c, id, print_node, &a)
					   : list_keys(c, id, &a);
		if (json && !r) {
			json_close(&j);
			json_close(&j);
		}
	}
	const char *msg = r ? (c->err_msg[0] ? c->err_msg : bch_err_str(r)) : NULL;
	if (r)
		cmd_err("list", "%s", msg);
	if (json && r)
		json_fail(&j, msg);
	else if (json)
		json_end(&j);
	bch_fs_close(c);
	free_devs(devs);
	return r ? EXIT_FAIL : EXIT_OK;
}

/* ------------------------------------------------------------ list-journal */

static const char *jset_entry_type_name(unsigned t)
{
	static const char * const types[] = {
#define x(n, id)	[id] = #n,
		BCH_JSET_ENTRY_TYPES()
#undef x
	};
	return t < BCH_JSET_ENTRY_NR && types[t] ? types[t] : "unknown";
}

static int print_jset(struct bch_fs *c, struct bch_jset *j, void *priv)
{
	struct bch_json *js = priv;
	struct bch_jset_entry *e;

	(void)c;
	if (js) {
		json_open(js, NULL, false);
		json_u64(js, "seq", j->seq);
		json_u64(js, "last_seq", j->last_seq);
		json_u64(js, "bytes", (uint64_t)j->u64s * 8);	/* of its items */
		json_open(js, "items", true);
	} else {
		printf("entry seq %" PRIu64 " last_seq %" PRIu64 " u64s %u\n", (uint64_t)j->seq,
		       (uint64_t)j->last_seq, j->u64s);
	}
	for_each_jset_entry(e, j) {
		if (js) {
			json_open(js, NULL, false);
			json_string(js, "type", jset_entry_type_name(e->type));
			json_string(js, "btree", bch_btree_id_name(e->btree_id));
			json_u64(js, "level", e->level);
			json_open(js, "keys", true);
		} else {
			printf("  %s %s level %u\n", jset_entry_type_name(e->type),
			       bch_btree_id_name(e->btree_id), e->level);
		}
		const __le64 *p = e->_data, *end = e->_data + e->u64s;
		while (p + BCH_BKEY_U64s <= end) {
			const struct bch_bkey *k = (const void *)p;
			char buf[512];
			if (k->u64s < BCH_BKEY_U64s || p + k->u64s > end)
				break;
			if (js) {
				json_bkey(js, k);
			} else {
				bch_bkey_to_text(k, buf, sizeof(buf));
				printf("    %s\n", buf);
			}
			p += k->u64s;
		}
		if (js) {
			json_close(js);
			json_close(js);
		}
	}
	if (js) {
		json_close(js);
		json_close(js);
	}
	return 0;
}

static void list_journal_usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs list-journal [--json] [-o degraded] FS\n"
"Print the journal entries that replay would use (from the newest entry's\n"
"last_seq to it), with their keys and roots.  Read-only.  FS: the member\n"
"devices (as arguments or joined by ':') or UUID=<uuid>; a mounted\n"
"filesystem is refused.\n"
"\n"
"      --json   one JSON document: {\"version\", \"entries\": [{\"seq\", \"last_seq\",\n"
"               \"bytes\", \"items\": [...]}]} (man bcachefs, JSON OUTPUT)\n"
"  -o degraded  read the journal of the members given with others missing\n"
"               (very_degraded: the same; each missing one is named on stderr)\n"
"  -h, --help   this text\n"
"\n"
"Exit: 0 printed, 1 the journal could not be read, 16 usage error.\n");
}

int cmd_list_journal(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "json",  no_argument, NULL, 'j' },
		{ "help",  no_argument, NULL, 'h' },
		{ NULL }
	};
	struct bch_opts oo;
	struct bch_json js;
	bool json = false;
	int opt;

	memset(&oo, 0, sizeof(oo));
	while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1)
		switch (opt) {
		case 'o':
			if (cmd_open_opts_parse("list-journal", &oo, optarg))
				return EXIT_USAGE;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			list_journal_usage(stdout);
			return EXIT_OK;
		default:
			return cmd_opt_err("list-journal", argv, "ho:");
		}
	if (optind == argc) {
		cmd_err("list-journal", "no devices given");
		return EXIT_USAGE;
	}
	struct cmd_fs fs;
	int r = fs_devs("list-journal", argv + optind, argc - optind, &fs);
	if (r)
		return r;

	unsigned nr = fs.nr;
	char **devs = fs.devs;
	struct bch_fs *c;
	uint64_t newest;
	char err[512];
	/* no replay: the journal of a filesystem that cannot be opened can be read */
	r = bch_fs_open_journal_only(devs, nr, &oo, &c, err, sizeof(err));

	if (r)
		cmd_err("list-journal", "%s", err);
	if (!r) {
		cmd_note_degraded("list-journal", c, devs, nr);
		if (json) {
			json_begin(&js, stdout, true);
			json_open(&js, "entries", true);
		}
		r = bch_journal_read(c, print_jset, json ? &js : NULL, &newest);
		const char *msg = r ? (c->err_msg[0] ? c->err_msg : bch_err_str(r)) : NULL;
		if (r)
			cmd_err("list-journal", "%s", msg);
		if (json && r)
			json_fail(&js, msg);
		else if (json)
			json_end(&js);
		bch_fs_close(c);
	}
	free_devs(devs);
	return r ? EXIT_FAIL : EXIT_OK;
}
