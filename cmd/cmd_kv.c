// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_kv.c - `bcachefs kv`: put, get and delete raw keys in the test btree.
 *
 * A debugging tool for tests (and later for building damaged images for
 * fsck cases): every command is one transaction, committed durably, and the
 * filesystem is closed cleanly afterwards (get opens read-only).
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

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs kv [--no-clean-close] DEVICE[:DEVICE...] put POS VALUE [POS VALUE]...\n"
"       bcachefs kv DEVICE[:DEVICE...] get POS\n"
"       bcachefs kv DEVICE[:DEVICE...] del POS [POS]...\n"
"Put, get or delete raw keys in the test btree (a debugging tool).\n"
"POS is inode:offset[:snapshot]; VALUE is a string of up to 1024 bytes.\n"
"Several keys given to one put or del are one atomic transaction.\n"
"--no-clean-close leaves the filesystem as a power cut right after the commit\n"
"would (durable in the journal, btree nodes not written, not marked clean):\n"
"for testing journal replay and fsck.\n"
"\n"
"Exit: 0 done, 1 error or (get) no such key, 16 usage error.\n");
}

int cmd_kv(int argc, char *argv[])
{
	bool no_clean_close = false;

	if (argc > 1 && !strcmp(argv[1], "--no-clean-close")) {
		no_clean_close = true;
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return EXIT_OK;
	}
	if (argc < 4) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *verb = argv[2];
	bool put = !strcmp(verb, "put"), get = !strcmp(verb, "get"), del = !strcmp(verb, "del");
	if (!put && !get && !del) {
		cmd_err("kv", "unknown verb '%s' (put, get, del)", verb);
		return EXIT_USAGE;
	}
	if ((put && (argc - 3) % 2) || (get && argc != 4)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	unsigned step = put ? 2 : 1;
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

	unsigned nr;
	char *dev_arg[1] = { argv[1] };
	char **devs = split_devs(dev_arg, 1, &nr);
	struct bch_opts o;
	struct bch_fs *c;
	char err[512];
	int r;

	memset(&o, 0, sizeof(o));
	if (get)
		bch_opt_set(&o, Opt_read_only, 1);
	if ((r = bch_fs_open(devs, nr, &o, &c, err, sizeof(err)))) {
		cmd_err("kv", "%s", err);
		free_devs(devs);
		return EXIT_FAIL;
	}
	if (get) {
		struct bch_bpos p;
		struct bch_bkey *k;
		bch_bpos_parse(argv[3], &p);
		r = bch_btree_lookup(c, BCH_BTREE_ID_test, p, &k);
		if (!r) {
			const struct bch_raw *v = bkey_val(k);
			fwrite(v->data, 1, v->len, stdout);
			putchar('\n');
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
			} else {
				k = bch_bkey_alloc(BCH_BKEY_deleted, p, 0);
			}
			bch_trans_update(t, BCH_BTREE_ID_test, k);
			free(k);
		}
		r = bch_trans_commit(t, BCH_TRANS_SYNC);
		bch_trans_exit(t);
	}
	if (r && r != -BCH_ERR_key_not_found)
		cmd_err("kv", "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
	if (no_clean_close && !get)
		c->read_only = true;	/* close writes nothing more: as after a power cut */
	int cr = bch_fs_close(c);
	if (cr && !r) {
		cmd_err("kv", "closing: %s", bch_err_str(cr));
		r = cr;
	}
	free_devs(devs);
	return r ? EXIT_FAIL : EXIT_OK;
}
