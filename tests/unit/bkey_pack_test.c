// SPDX-License-Identifier: GPL-2.0
/*
 * bkey_pack_test.c - packed keys (bkey.h): a format chosen from keys holds
 * every one of them, each packs and unpacks to the same bytes and its parts
 * (position, length, each field) read alone agree; a key past a field's
 * range (below its base, or past its bits) does not pack and leaves the
 * buffer alone; every field at its limits, in the widest format and in one
 * fitted to them; the benchmark's keys' header in 16 bytes.  Fixed seeds,
 * printed.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "tests/lib/testfs.h"

static uint64_t rng_state;

static uint64_t rng(void)
{
	return testfs_xorshift(&rng_state);
}

static void seed(uint64_t s)
{
	rng_state = s;
	fprintf(stderr, "bkey_pack: seed %" PRIu64 "\n", s);
}

/* values of 0 to 12 words: every length bch_bkey_copy_words() tells apart */
#define VAL_U64S_MAX	12
#define KEY_U64S_MAX	(BCH_BKEY_U64s + VAL_U64S_MAX)

/* Each field's full width (bits) and its largest value. */
static const unsigned width[BKF_NR] = {
	[BKF_INODE] = 64, [BKF_OFFSET] = 64, [BKF_SNAPSHOT] = 32, [BKF_U64S] = 16,
	[BKF_TYPE] = 8, [BKF_SIZE] = 32, [BKF_VERSION] = 64, [BKF_FLAGS] = 8, [BKF_PAD] = 32,
};

static uint64_t field_max(unsigned f)
{
	return width[f] == 64 ? UINT64_MAX : (1ULL << width[f]) - 1;
}

static uint64_t get(const struct bch_bkey *k, unsigned f)
{
	switch (f) {
	case BKF_INODE:		return k->p.inode;
	case BKF_OFFSET:	return k->p.offset;
	case BKF_SNAPSHOT:	return k->p.snapshot;
	case BKF_U64S:		return k->u64s;
	case BKF_TYPE:		return k->type;
	case BKF_SIZE:		return k->size;
	case BKF_VERSION:	return k->version;
	case BKF_FLAGS:		return k->flags;
	default:		return k->p.pad;
	}
}

static void set(struct bch_bkey *k, unsigned f, uint64_t v)
{
	switch (f) {
	case BKF_INODE:		k->p.inode = v; break;
	case BKF_OFFSET:	k->p.offset = v; break;
	case BKF_SNAPSHOT:	k->p.snapshot = v; break;
	case BKF_U64S:		k->u64s = v; break;
	case BKF_TYPE:		k->type = v; break;
	case BKF_SIZE:		k->size = v; break;
	case BKF_VERSION:	k->version = v; break;
	case BKF_FLAGS:		k->flags = v; break;
	default:		k->p.pad = v; break;
	}
}

/*
 * A shape of keys: each field constant, in a small range, in a range of
 * random width at a random base, or anything.  u64s stays a key's length.
 */
struct shape {
	uint64_t	base[BKF_NR];
	unsigned	bits[BKF_NR];
};

static void shape_random(struct shape *s)
{
	for (unsigned f = 0; f < BKF_NR; f++) {
		unsigned w = width[f];

		switch (rng() % 4) {
		case 0: s->bits[f] = 0; break;
		case 1: s->bits[f] = 1 + rng() % 4; break;
		case 2: s->bits[f] = rng() % (w + 1); break;
		default: s->bits[f] = w; break;
		}
		uint64_t room = s->bits[f] >= w ? 0 : field_max(f) - ((1ULL << s->bits[f]) - 1);
		s->base[f] = room ? rng() % room : 0;
	}
}

static void key_random(const struct shape *s, uint64_t *buf)
{
	struct bch_bkey *k = (void *)buf;

	memset(buf, 0, KEY_U64S_MAX * 8);
	for (unsigned f = 0; f < BKF_NR; f++) {
		uint64_t span = s->bits[f] >= 64 ? rng() : rng() & ((1ULL << s->bits[f]) - 1);
		set(k, f, s->base[f] + span);
	}
	k->u64s = BCH_BKEY_U64s + rng() % (VAL_U64S_MAX + 1);
	for (unsigned i = 0; i < k->u64s - BCH_BKEY_U64s; i++)
		k->_data[i] = rng();
}

/* k packs into f and comes back the same, whole and by its parts. */
static void round_trip(const struct bch_bkey_format *f, const struct bch_bkey *k)
{
	uint64_t packed[KEY_U64S_MAX + 1], back[KEY_U64S_MAX];
	struct bch_bkey *u = (void *)back;

	cr_assert(bch_bkey_format_fits(f, k));
	size_t n = bch_bkey_pack(f, k, packed);
	cr_assert_eq(n, bch_bkey_packed_u64s_of(f, k));
	cr_assert_eq(n, f->key_u64s + k->u64s - BCH_BKEY_U64s);
	cr_assert_eq(bch_bkey_packed_u64s(f, packed), n);
	cr_assert(bpos_eq(bch_bkey_packed_pos(f, packed), k->p));
	cr_assert_eq(bch_bkey_packed_pos(f, packed).pad, k->p.pad);
	for (unsigned i = 0; i < BKF_NR; i++)
		cr_assert_eq(bch_bkey_packed_field(f, packed, i), get(k, i),
			     "field %u: %" PRIx64 " != %" PRIx64, i,
			     bch_bkey_packed_field(f, packed, i), get(k, i));
	cr_assert_eq(memcmp(bch_bkey_packed_val(f, packed), k->_data, bkey_val_bytes(k)), 0);
	memset(back, 0xa5, sizeof(back));
	bch_bkey_unpack(f, packed, u);
	cr_assert_eq(memcmp(u, k, bkey_bytes(k)), 0, "unpacked key differs");
	for (unsigned i = k->u64s; i < KEY_U64S_MAX; i++)
		cr_assert_eq(back[i], 0xa5a5a5a5a5a5a5a5ULL, "unpack wrote past the key (word %u)", i);
}

static void format_of(const struct bch_bkey_format_state *st, struct bch_bkey_format *f)
{
	bch_bkey_format_done(st, f);
	unsigned bits = 0;
	for (unsigned i = 0; i < BKF_NR; i++) {
		cr_assert_leq(f->bits[i], width[i]);
		bits += f->bits[i];
	}
	cr_assert_eq(f->key_u64s, bits ? (bits + 63) / 64 : 1);
	cr_assert_leq(f->key_u64s, BCH_BKEY_U64s);
}

Test(bkey_pack, random_keys_round_trip)
{
	static uint64_t keys[64][KEY_U64S_MAX];

	seed(0x5eed36);
	for (unsigned round = 0; round < 400; round++) {
		struct bch_bkey_format_state st;
		struct bch_bkey_format f;
		struct shape s;
		unsigned nr = 1 + rng() % 64;

		shape_random(&s);
		bch_bkey_format_state_init(&st);
		for (unsigned i = 0; i < nr; i++) {
			key_random(&s, keys[i]);
			bch_bkey_format_add(&st, (void *)keys[i]);
		}
		format_of(&st, &f);
		for (unsigned i = 0; i < BKF_NR; i++)	/* no wider than the shape asks */
			cr_assert_leq(f.bits[i], i == BKF_U64S ? 4 : s.bits[i]);
		for (unsigned i = 0; i < nr; i++)
			round_trip(&f, (void *)keys[i]);
	}
}

Test(bkey_pack, widest_takes_every_key)
{
	struct bch_bkey_format f;
	uint64_t buf[KEY_U64S_MAX];

	seed(36);
	bch_bkey_format_widest(&f);
	cr_assert_eq(f.key_u64s, BCH_BKEY_U64s);
	for (unsigned round = 0; round < 2000; round++) {
		struct shape s;

		shape_random(&s);
		key_random(&s, buf);
		round_trip(&f, (void *)buf);
	}
}

/*
 * Each field one below its base and one past its bits (the others in
 * range): does not fit, does not pack, the buffer untouched.
 */
Test(bkey_pack, keys_that_do_not_fit)
{
	uint64_t buf[KEY_U64S_MAX], packed[KEY_U64S_MAX + 1], before[KEY_U64S_MAX + 1];
	uint64_t fitted[8][KEY_U64S_MAX];
	struct bch_bkey *k = (void *)buf;

	seed(0xf17);
	for (unsigned round = 0; round < 200; round++) {
		struct bch_bkey_format_state st;
		struct bch_bkey_format f;
		struct shape s;

		shape_random(&s);
		bch_bkey_format_state_init(&st);
		for (unsigned i = 0; i < 8; i++) {
			key_random(&s, fitted[i]);
			bch_bkey_format_add(&st, (void *)fitted[i]);
		}
		format_of(&st, &f);
		for (unsigned fld = 0; fld < BKF_NR; fld++) {
			/* the range's top (a format's bits may reach past the field's largest) */
			uint64_t span = f.bits[fld] >= 64 ? UINT64_MAX : (1ULL << f.bits[fld]) - 1;
			uint64_t top = f.base[fld] + (span < field_max(fld) - f.base[fld] ? span :
						      field_max(fld) - f.base[fld]);
			uint64_t out[2];
			unsigned nr_out = 0;

			if (f.base[fld])
				out[nr_out++] = f.base[fld] - 1;
			if (top < field_max(fld))
				out[nr_out++] = top + 1;
			for (unsigned o = 0; o < nr_out; o++) {
				memcpy(buf, fitted[rng() % 8], sizeof(buf));	/* the others in range */
				set(k, fld, out[o]);	/* (a u64s past the buffer: not read) */
				cr_assert(!bch_bkey_format_fits(&f, k), "field %u value %" PRIx64, fld, out[o]);
				memset(packed, 0x5a, sizeof(packed));
				memcpy(before, packed, sizeof(packed));
				cr_assert_eq(bch_bkey_pack(&f, k, packed), 0);
				cr_assert_eq(memcmp(packed, before, sizeof(packed)), 0);
			}
			/* the field at both ends of its range still fits */
			memcpy(buf, fitted[rng() % 8], sizeof(buf));
			if (fld != BKF_U64S) {
				set(k, fld, f.base[fld]);
				round_trip(&f, k);
				set(k, fld, top);
				round_trip(&f, k);
			}
		}
	}
}

/* A header shorter than bch_bkey (a damaged key): never packed. */
Test(bkey_pack, malformed_u64s_refused)
{
	struct bch_bkey_format f;
	uint64_t buf[KEY_U64S_MAX] = { 0 }, packed[KEY_U64S_MAX];
	struct bch_bkey *k = (void *)buf;

	bch_bkey_format_widest(&f);
	k->u64s = BCH_BKEY_U64s - 1;
	cr_assert_eq(bch_bkey_pack(&f, k, packed), 0);
}

/* Every field at 0 and at its largest: a format fitted to them is the widest. */
Test(bkey_pack, every_field_at_its_limits)
{
	uint64_t lo[KEY_U64S_MAX] = { 0 }, hi[KEY_U64S_MAX] = { 0 };
	struct bch_bkey *kl = (void *)lo, *kh = (void *)hi;
	struct bch_bkey_format_state st;
	struct bch_bkey_format f, w;

	for (unsigned fld = 0; fld < BKF_NR; fld++) {
		set(kl, fld, 0);
		set(kh, fld, field_max(fld));
	}
	kl->u64s = BCH_BKEY_U64s;	/* (u64s is a length: its largest is below) */
	kh->u64s = KEY_U64S_MAX;
	for (unsigned i = 0; i < VAL_U64S_MAX; i++)
		kh->_data[i] = UINT64_MAX;

	bch_bkey_format_widest(&w);
	round_trip(&w, kl);
	round_trip(&w, kh);

	bch_bkey_format_state_init(&st);
	bch_bkey_format_add(&st, kl);
	bch_bkey_format_add(&st, kh);
	format_of(&st, &f);
	for (unsigned fld = 0; fld < BKF_NR; fld++)
		if (fld != BKF_U64S)
			cr_assert_eq(f.bits[fld], width[fld], "field %u", fld);
	round_trip(&f, kl);
	round_trip(&f, kh);

	/* each field alone at its largest, at a base just under it */
	for (unsigned fld = 0; fld < BKF_NR; fld++) {
		if (fld == BKF_U64S)
			continue;
		uint64_t a[KEY_U64S_MAX] = { 0 }, b[KEY_U64S_MAX] = { 0 };
		struct bch_bkey *ka = (void *)a, *kb = (void *)b;

		ka->u64s = kb->u64s = BCH_BKEY_U64s;
		set(ka, fld, field_max(fld) - 1);
		set(kb, fld, field_max(fld));
		bch_bkey_format_state_init(&st);
		bch_bkey_format_add(&st, ka);
		bch_bkey_format_add(&st, kb);
		format_of(&st, &f);
		cr_assert_eq(f.bits[fld], 1);
		cr_assert_eq(f.key_u64s, 1);
		round_trip(&f, ka);
		round_trip(&f, kb);
	}
}

/* No key: the widest; one key: every field its base, one word of header. */
Test(bkey_pack, empty_and_single)
{
	struct bch_bkey_format_state st;
	struct bch_bkey_format f;
	uint64_t buf[KEY_U64S_MAX];

	seed(1);
	bch_bkey_format_state_init(&st);
	format_of(&st, &f);
	cr_assert_eq(f.key_u64s, BCH_BKEY_U64s);

	struct shape s;
	shape_random(&s);
	key_random(&s, buf);
	bch_bkey_format_add(&st, (void *)buf);
	format_of(&st, &f);
	for (unsigned fld = 0; fld < BKF_NR; fld++)
		cr_assert_eq(f.bits[fld], 0);
	cr_assert_eq(f.key_u64s, 1);
	round_trip(&f, (void *)buf);
}

/*
 * A range added by position (a node's min and max key) widens the
 * position's fields only: keys inside it that come later fit.
 */
Test(bkey_pack, node_range_covers_later_keys)
{
	struct bch_bkey_format_state st;
	struct bch_bkey_format f;
	uint64_t buf[KEY_U64S_MAX];
	struct bch_bkey *k = (void *)buf;

	seed(0x4a4e);
	bch_bkey_format_state_init(&st);
	bch_bkey_format_add_pos(&st, POS(1000, 0, 0));
	bch_bkey_format_add_pos(&st, POS(2000, UINT64_MAX, 0));
	memset(buf, 0, sizeof(buf));
	k->u64s = BCH_BKEY_U64s + 2;
	k->type = BCH_BKEY_raw;
	k->p = POS(1500, 7, 0);
	bch_bkey_format_add(&st, k);
	format_of(&st, &f);
	cr_assert_eq(f.bits[BKF_TYPE], 0);
	cr_assert_eq(f.bits[BKF_SNAPSHOT], 0);
	for (unsigned i = 0; i < 1000; i++) {
		k->p = POS(1000 + rng() % 1001, rng(), 0);
		k->_data[0] = rng();
		round_trip(&f, k);
	}
	k->p = POS(999, 0, 0);
	cr_assert(!bch_bkey_format_fits(&f, k));
	k->p = POS(1500, 0, 1);
	cr_assert(!bch_bkey_format_fits(&f, k));
}

/*
 * The btree benchmark's keys (bench/btree_bench.c: random 16-byte keys as
 * inode and offset, one type and length) in one of 512 leaves: 55 + 64 bits,
 * a header of 16 bytes instead of 40.
 */
Test(bkey_pack, bench_keys_pack_to_16_bytes)
{
	struct bch_bkey_format_state st;
	struct bch_bkey_format f;
	static uint64_t keys[2000][BCH_BKEY_U64s + 5];
	uint64_t leaf = 77;

	seed(0xbe4c);
	bch_bkey_format_state_init(&st);
	for (unsigned i = 0; i < 2000; i++) {
		struct bch_bkey *k = (void *)keys[i];

		memset(k, 0, sizeof(keys[i]));
		k->u64s = BCH_BKEY_U64s + 5;
		k->type = BCH_BKEY_raw;
		k->p = POS(leaf << 55 | (rng() >> 9), rng(), 0);
		for (unsigned j = 0; j < 5; j++)
			k->_data[j] = rng();
		bch_bkey_format_add(&st, k);
	}
	format_of(&st, &f);
	cr_assert_eq(f.key_u64s, 2, "header words %u", f.key_u64s);
	for (unsigned i = 0; i < 2000; i++)
		round_trip(&f, (void *)keys[i]);
}
