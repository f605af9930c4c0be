// SPDX-License-Identifier: GPL-2.0
/*
 * keyhist.c - the history of a btree crash test's keys (keyhist.h).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "bkey.h"
#include "btree.h"
#include "errcode.h"
#include "fs.h"
#include "journal.h"
#include "tests/lib/keyhist.h"

void keyhist_init(struct keyhist *kh, unsigned nkeys, unsigned val_bytes)
{
	kh->nkeys = nkeys;
	kh->val_bytes = val_bytes;
	kh->h = calloc(nkeys, sizeof(*kh->h));
	kh->found = calloc(nkeys, sizeof(*kh->found));
	cr_assert(kh->h && kh->found);
	for (unsigned i = 0; i < nkeys; i++)
		kh->h[i].nr = 1;	/* gen 0, op 0, durable at event 0 */
}

void keyhist_exit(struct keyhist *kh)
{
	free(kh->h);
	free(kh->found);
	kh->h = NULL;
	kh->found = NULL;
}

struct bch_bkey *keyhist_key(unsigned i, unsigned gen, unsigned val_bytes)
{
	if (!gen)
		return bch_bkey_alloc(BCH_BKEY_deleted, POS(1, i, 0), 0);
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(1, i, 0),
					    sizeof(struct bch_raw) + val_bytes);
	struct bch_raw *r = bkey_val(k);
	char name[32];

	cr_assert_geq(val_bytes, 16, "a value holds at least its name");
	int n = snprintf(name, sizeof(name), "k%05u-g%05u-", i, gen);

	r->len = val_bytes;
	memset(r->data, 'x', val_bytes);
	memcpy(r->data, name, n);
	return k;
}

unsigned keyhist_gen_of(const struct bch_bkey *k, unsigned i, unsigned val_bytes)
{
	const struct bch_raw *r = bkey_val(k);
	char name[16];
	unsigned ki, g;

	if (k->type != BCH_BKEY_raw || r->len != val_bytes)
		return UINT32_MAX;
	memcpy(name, r->data, 15);
	name[15] = 0;
	if (sscanf(name, "k%05u-g%05u-", &ki, &g) != 2 || ki != i)
		return UINT32_MAX;
	return g;
}

void keyhist_update(struct keyhist *kh, struct btree_trans *t, unsigned op, unsigned i,
		    unsigned gen)
{
	struct bch_bkey *k = keyhist_key(i, gen, kh->val_bytes);
	struct key_hist *h = &kh->h[i];

	bch_trans_update(t, BCH_BTREE_ID_test, k);
	free(k);
	cr_assert_lt(h->nr, KEYHIST_MAX_GENS);
	h->gen[h->nr] = gen;
	h->op[h->nr] = op;
	h->seq[h->nr] = 0;
	h->durable_at[h->nr++] = SIZE_MAX;
}

void keyhist_committed(struct keyhist *kh, struct bch_fs *c, bool sync)
{
	/* the keys went into the open entry; a sync commit wrote it */
	uint64_t seq = sync ? bch_journal_seq_durable(c) : bch_journal_cur_seq(c);

	for (unsigned i = 0; i < kh->nkeys; i++) {
		struct key_hist *h = &kh->h[i];
		for (unsigned g = 1; g < h->nr; g++)
			if (h->durable_at[g] == SIZE_MAX && !h->seq[g])
				h->seq[g] = seq;
	}
}

void keyhist_note_durable(struct keyhist *kh, struct bch_fs *c, size_t ev)
{
	uint64_t durable = bch_journal_seq_durable(c);

	for (unsigned i = 0; i < kh->nkeys; i++) {
		struct key_hist *h = &kh->h[i];
		for (unsigned j = 0; j < h->nr; j++)
			if (h->durable_at[j] == SIZE_MAX && h->seq[j] && h->seq[j] <= durable)
				h->durable_at[j] = ev;
	}
}

static unsigned state_at(const struct key_hist *h, unsigned p)
{
	unsigned g = 0;

	for (unsigned j = 0; j < h->nr && h->op[j] <= p; j++)
		g = h->gen[j];
	return g;
}

const char *keyhist_check(struct keyhist *kh, struct bch_fs *c, size_t at, char *msg, size_t len)
{
	unsigned durable_op = 0;

	for (unsigned i = 0; i < kh->nkeys; i++) {
		struct key_hist *h = &kh->h[i];
		struct bch_bkey *k = NULL;

		for (unsigned j = 0; j < h->nr; j++)
			if (h->durable_at[j] <= at && h->op[j] > durable_op)
				durable_op = h->op[j];
		int r = bch_btree_lookup(c, BCH_BTREE_ID_test, POS(1, i, 0), &k);
		if (r && r != -BCH_ERR_key_not_found)
			return snprintf(msg, len, "key %u: lookup: %s", i, c->err_msg), msg;
		kh->found[i] = r ? 0 : keyhist_gen_of(k, i, kh->val_bytes);
		free(k);
	}
	unsigned last_op = 0;
	for (unsigned i = 0; i < kh->nkeys; i++)
		if (kh->h[i].op[kh->h[i].nr - 1] > last_op)
			last_op = kh->h[i].op[kh->h[i].nr - 1];
	for (unsigned p = durable_op; p <= last_op; p++) {
		unsigned i;
		for (i = 0; i < kh->nkeys; i++)
			if (state_at(&kh->h[i], p) != kh->found[i])
				break;
		if (i == kh->nkeys)
			return NULL;
	}
	/* name the first key that differs from the durable prefix */
	for (unsigned i = 0; i < kh->nkeys; i++)
		if (state_at(&kh->h[i], durable_op) != kh->found[i])
			return snprintf(msg, len, "no prefix of the transactions from %u on matches "
					"(key %u is %u, was %u after transaction %u)", durable_op, i,
					kh->found[i], state_at(&kh->h[i], durable_op), durable_op), msg;
	return snprintf(msg, len, "no prefix of the transactions matches"), msg;
}
