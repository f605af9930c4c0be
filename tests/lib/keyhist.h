/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_TEST_KEYHIST_H
#define _BCH_TEST_KEYHIST_H

/*
 * keyhist.h - the history of a btree crash test's keys (btree_crash,
 * newnode_crash): keys 0..nkeys-1 at POS(1, i, 0) of the test btree, each
 * set to generation g (a raw value of val_bytes that starts "kIIIII-gGGGGG-",
 * the rest 'x') or deleted (gen 0) by numbered transactions.  Per key the
 * history keeps each state, the transaction that made it, the journal entry
 * that holds it, and the event count (iorec) at which that entry became
 * durable.  keyhist_check() says whether an image shows the state after
 * transactions 1..P for one P at least as large as the last transaction
 * durable at a cut: the journal is durable as a prefix, and a transaction
 * is never half there.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bch_fs;
struct bch_bkey;
struct btree_trans;

#define KEYHIST_MAX_GENS	256

struct key_hist {
	unsigned	nr;
	uint16_t	gen[KEYHIST_MAX_GENS];
	size_t		durable_at[KEYHIST_MAX_GENS];	/* event count; SIZE_MAX: not durable (yet) */
	uint64_t	seq[KEYHIST_MAX_GENS];		/* journal entry that holds the state */
	uint16_t	op[KEYHIST_MAX_GENS];		/* the transaction that made it */
};

struct keyhist {
	unsigned	nkeys, val_bytes;
	struct key_hist	*h;		/* [nkeys]; state 0 of each: absent, durable at event 0 */
	unsigned	*found;		/* keyhist_check()'s scratch */
};

void keyhist_init(struct keyhist *kh, unsigned nkeys, unsigned val_bytes);
void keyhist_exit(struct keyhist *kh);

/* Key i at generation gen (0: a deletion) with a val_bytes value, malloc'd. */
struct bch_bkey *keyhist_key(unsigned i, unsigned gen, unsigned val_bytes);
/* The generation key k (key i) holds; UINT32_MAX when no history wrote it so. */
unsigned keyhist_gen_of(const struct bch_bkey *k, unsigned i, unsigned val_bytes);

/* In transaction op (uncommitted in t): key i set to gen (0: deleted), recorded. */
void keyhist_update(struct keyhist *kh, struct btree_trans *t, unsigned op, unsigned i,
		    unsigned gen);
/* t committed (synchronously when sync): its states are in the entry that holds it. */
void keyhist_committed(struct keyhist *kh, struct bch_fs *c, bool sync);
/* States whose entry is durable on c now became so at event ev. */
void keyhist_note_durable(struct keyhist *kh, struct bch_fs *c, size_t ev);

/* The image c against the history at cut `at`: NULL, or msg saying what differs. */
const char *keyhist_check(struct keyhist *kh, struct bch_fs *c, size_t at, char *msg, size_t len);

#endif
