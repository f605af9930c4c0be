// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_kv.c - `bcachefs kv`: put, get and delete raw keys, a debugging tool
 * for tests and for building damaged images for fsck cases.
 *
 * put/get of string values work on the test btree (raw keys); gethex and
 * puthex read and write a key of any type in any btree as hex bytes of its
 * value, so a script can change one field of an inode or a dirent; del
 * deletes keys in any btree.  --unchecked skips key validation (to build
 * images with invalid keys).  Every command is one transaction, committed
 * durably, and the filesystem is closed cleanly afterwards (get and gethex
 * open read-only).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "cmds.h"
#include "errcode.h"
#include "fs.h"
#include "fsname.h"

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs kv [OPTIONS] DEVICE[:DEVICE...] put POS VALUE [POS VALUE]...\n"
"       bcachefs kv [OPTIONS] DEVICE[:DEVICE...] get POS\n"
"       bcachefs kv [OPTIONS] DEVICE[:DEVICE...] del POS [POS]...\n"
"       bcachefs kv [OPTIONS] DEVICE[:DEVICE...] gethex POS\n"
"       bcachefs kv [OPTIONS] DEVICE[:DEVICE...] puthex POS TYPE SIZE HEX [POS TYPE SIZE HEX]...\n"
"Put, get or delete keys (a debugging tool).  POS is inode:offset[:snapshot].\n"
"DEVICE may also be UUID=<uuid>; a mounted filesystem is refused (as by list).\n"
"put/get: string values (up to 1024 bytes) as raw keys of the test btree; get\n"
"on another btree prints the key as text.  gethex prints \"TYPE SIZE HEX\" (the\n"
"key's type name, its size field and its value in hex); puthex writes such a\n"
"key back.  Several keys given to one put, puthex or del are one atomic\n"
"transaction.\n"
"\n"
"  -o degraded          members may be missing when the others hold a copy of\n"
"                       everything (each missing one is named on stderr)\n"
"  -b, --btree=NAME     btree (extents, inodes, dirents, xattrs, alloc, test;\n"
"                       default test)\n"
"      --unchecked      do not validate keys (to build images with invalid keys)\n"
"      --no-clean-close leave the filesystem as a power cut right after the\n"
"                       commit would (durable in the journal, btree nodes not\n"
"                       written, not marked clean): for testing replay and fsck\n"
"\n"
"Exit: 0 done, 1 error or (get) no such key, 16 usage error.\n");
}

static int parse_hex(const char *s, uint8_t *out, size_t cap, size_t *len)
{
	size_t n = strlen(s);

	if (n % 2 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = v;
	}
	*len = n / 2;
	return 0;
}

static int type_parse(const char *s)
{
	for (unsigned t = 0; t < BCH_BKEY_TYPE_NR; t++)
		if (!strcmp(bch_bkey_type_name(t), s))
			return t;
	return -1;
}

int cmd_kv(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "btree",		required_argument, NULL, 'b' },
		{ "unchecked",		no_argument,	   NULL, 'u' },
		{ "no-clean-close",	no_argument,	   NULL, 'N' },
		{ "help",		no_argument,	   NULL, 'h' },
		{ NULL }
	};
	bool no_clean_close = false, unchecked = false;
	int btree = BCH_BTREE_ID_test, o;
	struct bch_opts opts;

	memset(&opts, 0, sizeof(opts));
	while ((o = getopt_long(argc, argv, "+b:o:h", longopts, NULL)) != -1)
		switch (o) {
		case 'o':
			if (cmd_open_opts_parse("kv", &opts, optarg))
				return EXIT_USAGE;
			break;
		case 'b':
			if ((btree = bch_btree_id_parse(optarg)) < 0) {
				cmd_err("kv", "unknown btree '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'u': unchecked = true; break;
		case 'N': no_clean_close = true; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cmd_opt_err("kv", argv, "+b:o:h");
		}
	argc -= optind - 1;
	argv += optind - 1;
	if (argc < 4) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *verb = argv[2];
	bool put = !strcmp(verb, "put"), get = !strcmp(verb, "get"), del = !strcmp(verb, "del");
	bool gethex = !strcmp(verb, "gethex"), puthex = !strcmp(verb, "puthex");
	if (!put && !get && !del && !gethex && !puthex) {
		cmd_err("kv", "unknown verb '%s' (put, get, del, gethex, puthex)", verb);
		return EXIT_USAGE;
	}
	if ((put && (argc - 3) % 2) || ((get || gethex) && argc != 4) || (puthex && (argc - 3) % 4)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (put && btree != BCH_BTREE_ID_test) {
		cmd_err("kv", "put writes raw keys of the test btree; use puthex for other btrees");
		return EXIT_USAGE;
	}
	unsigned step = put ? 2 : puthex ? 4 : 1;
	for (int i = 3; i < argc; i += step) {
		struct bch_bpos p;
		if (bch_bpos_parse(argv[i], &p)) {
			cmd_err("kv", "bad position '%s' (want inode:offset[:snapshot])", argv[i]);
			return EXIT_USAGE;
		}
		if (put && strlen(argv[i + 1]) > 1024) {
			cmd_err("kv", "value longer than 1024 bytes");
			return EXIT_USAGE;
		}
	}
	uint8_t hex[2048];
	size_t hexlen = 0;
	int hextype = 0;
	unsigned long hexsize = 0;
	for (int i = 3; puthex && i < argc; i += 4) {
		char *end;
		hextype = type_parse(argv[i + 1]);
		hexsize = strtoul(argv[i + 2], &end, 10);
		if (hextype < 0 || *end || parse_hex(argv[i + 3], hex, sizeof(hex), &hexlen)) {
			cmd_err("kv", "puthex: want TYPE (a key type name) SIZE (a number) HEX (bytes)");
			return EXIT_USAGE;
		}
	}

	/*
	 * FS as list and fsck take it (fsname.h); a mounted filesystem is
	 * refused for every verb, as list refuses it: its daemon holds the
	 * devices and changes them as we read.
	 */
	struct cmd_fs fs;
	int r = cmd_fs_resolve("kv", argv + 1, 1, &fs);
	if (r)
		return r;
	if (fs.mounted) {
		cmd_err("kv", "%s: mounted (fusemount): unmount it first", fs.mnt);
		cmd_fs_free(&fs);
		return EXIT_FAIL;
	}
	unsigned nr = fs.nr;
	char **devs = fs.devs;
	struct bch_fs *c;
	char err[512];

	if (get || gethex)
		bch_opt_set(&opts, Opt_read_only, 1);
	if ((r = bch_fs_open(devs, nr, &opts, &c, err, sizeof(err)))) {
		cmd_err("kv", "%s", err);
		free_devs(devs);
		return EXIT_FAIL;
	}
	cmd_note_degraded("kv", c, devs, nr);
	if (get || gethex) {
		struct bch_bpos p;
		struct bch_bkey *k;
		bch_bpos_parse(argv[3], &p);
		r = bch_btree_lookup(c, btree, p, &k);
		if (!r) {
			if (gethex) {
				printf("%s %u ", bch_bkey_type_name(k->type), (unsigned)k->size);
				const uint8_t *v = bkey_val(k);
				for (size_t i = 0; i < bkey_val_bytes(k); i++)
					printf("%02x", v[i]);
				putchar('\n');
			} else if (btree == BCH_BTREE_ID_test && k->type == BCH_BKEY_raw) {
				const struct bch_raw *v = bkey_val(k);
				fwrite(v->data, 1, v->len, stdout);
				putchar('\n');
			} else {
				char buf[1024];
				bch_bkey_to_text(k, buf, sizeof(buf));
				printf("%s\n", buf);
			}
			free(k);
		} else if (r == -BCH_ERR_key_not_found) {
			cmd_err("kv", "%s: no such key", argv[3]);
		}
	} else {
		struct btree_trans *t;
		bch_trans_init(c, &t);
		for (int i = 3; i < argc; i += step) {
			struct bch_bpos p;
			struct bch_bkey *k;
			bch_bpos_parse(argv[i], &p);
			if (put) {
				size_t len = strlen(argv[i + 1]);
				k = bch_bkey_alloc(BCH_BKEY_raw, p, sizeof(struct bch_raw) + len);
				struct bch_raw *v = bkey_val(k);
				v->len = len;
				memcpy(v->data, argv[i + 1], len);
			} else if (puthex) {
				hextype = type_parse(argv[i + 1]);
				hexsize = strtoul(argv[i + 2], NULL, 10);
				parse_hex(argv[i + 3], hex, sizeof(hex), &hexlen);
				k = bch_bkey_alloc(hextype, p, hexlen);
				k->size = hexsize;
				memcpy(bkey_val(k), hex, hexlen);
			} else {
				k = bch_bkey_alloc(BCH_BKEY_deleted, p, 0);
			}
			bch_trans_update(t, btree, k);
			free(k);
		}
		bch_trans_unchecked = unchecked;
		r = bch_trans_commit(t, BCH_TRANS_SYNC);
		bch_trans_unchecked = false;
		bch_trans_exit(t);
	}
	if (r && r != -BCH_ERR_key_not_found)
		cmd_err("kv", "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
	if (no_clean_close && !get && !gethex)
		c->read_only = true;	/* close writes nothing more: as after a power cut */
	int cr = bch_fs_close(c);
	if (cr && !r) {
		cmd_err("kv", "closing: %s", bch_err_str(cr));
		r = cr;
	}
	free_devs(devs);
	return r ? EXIT_FAIL : EXIT_OK;
}
