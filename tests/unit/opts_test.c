// SPDX-License-Identifier: GPL-2.0
/*
 * opts_test.c - the option table: size parsing, human sizes, value parsing
 * per type, validation (ranges, powers of two), -o lists, and the round trip
 * through the superblock's option slots.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "bcachefs_format.h"
#include "opts.h"

Test(opts, parse_size)
{
	static const struct { const char *s; uint64_t v; } ok[] = {
		{ "0", 0 }, { "512", 512 }, { "4k", 4096 }, { "4K", 4096 }, { "4KiB", 4096 },
		{ "4kB", 4096 }, { "1M", 1 << 20 }, { "1.5G", 3ULL << 29 }, { "2T", 2ULL << 40 },
		{ "16777216", 16777216 },
	};
	static const char * const bad[] = { "", "k", "-1", "4x", "4kk", "4 k", "1e5", "0x10", "1..5k",
					     "99999999999999999999", "17000000T" };
	uint64_t v;

	for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_assert_eq(bch_parse_size(ok[i].s, &v), 0, "%s", ok[i].s);
		cr_assert_eq(v, ok[i].v, "%s: %llu", ok[i].s, (unsigned long long)v);
	}
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_neq(bch_parse_size(bad[i], &v), 0, "accepted '%s'", bad[i]);
}

Test(opts, human_size_round_trip)
{
	char buf[32];
	uint64_t v;

	bch_human_size(4096, buf, sizeof(buf));
	cr_assert_str_eq(buf, "4k");
	bch_human_size(256 << 10, buf, sizeof(buf));
	cr_assert_str_eq(buf, "256k");
	bch_human_size(1ULL << 30, buf, sizeof(buf));
	cr_assert_str_eq(buf, "1G");
	bch_human_size(1000, buf, sizeof(buf));
	cr_assert_str_eq(buf, "1000");
	/* every exact power-of-two multiple prints and parses back to itself */
	for (unsigned shift = 10; shift < 60; shift++)
		for (uint64_t m = 1; m < 1024; m = m * 3 + 1) {
			uint64_t x = m << shift;
			if (x >> shift != m)
				continue;
			bch_human_size(x, buf, sizeof(buf));
			if (strchr(buf, '.'))
				continue;	/* inexact form, by design */
			cr_assert_eq(bch_parse_size(buf, &v), 0, "%s", buf);
			cr_assert_eq(v, x, "%s: %llu != %llu", buf, (unsigned long long)v,
				     (unsigned long long)x);
		}
}

Test(opts, lookup_names)
{
	cr_assert_eq(bch_opt_lookup("data_checksum"), Opt_data_checksum);
	cr_assert_eq(bch_opt_lookup("data-checksum"), Opt_data_checksum);
	cr_assert_eq(bch_opt_lookup("ro"), Opt_read_only);
	cr_assert_eq(bch_opt_lookup("nonsense"), -1);
	cr_assert_eq(bch_opt_lookup(""), -1);
}

Test(opts, parse_each_type)
{
	char err[128];
	uint64_t v;

	cr_assert_eq(bch_opt_parse(Opt_inodes_32bit, "yes", &v, err, sizeof(err)), 0);
	cr_assert_eq(v, 1);
	cr_assert_eq(bch_opt_parse(Opt_inodes_32bit, "off", &v, err, sizeof(err)), 0);
	cr_assert_eq(v, 0);
	cr_assert_neq(bch_opt_parse(Opt_inodes_32bit, "maybe", &v, err, sizeof(err)), 0);

	cr_assert_eq(bch_opt_parse(Opt_data_checksum, "xxhash64", &v, err, sizeof(err)), 0);
	cr_assert_eq(v, BCH_CSUM_xxhash64);
	cr_assert_neq(bch_opt_parse(Opt_data_checksum, "md5", &v, err, sizeof(err)), 0);
	cr_assert(strstr(err, "crc32c"), "error lists choices: %s", err);

	cr_assert_eq(bch_opt_parse(Opt_compression, "zstd:3", &v, err, sizeof(err)), 0);
	cr_assert_eq(v & 0xff, BCH_COMPRESSION_zstd);
	cr_assert_eq(v >> 8, 3);
	char buf[32];
	bch_opt_to_text(Opt_compression, v, buf, sizeof(buf));
	cr_assert_str_eq(buf, "zstd:3");

	cr_assert_eq(bch_opt_parse(Opt_block_size, "4k", &v, err, sizeof(err)), 0);
	cr_assert_eq(v, 4096);
	cr_assert_neq(bch_opt_parse(Opt_block_size, "3000", &v, err, sizeof(err)), 0,
		      "not a power of two");
	cr_assert_neq(bch_opt_parse(Opt_block_size, "128k", &v, err, sizeof(err)), 0, "above max");
	cr_assert_neq(bch_opt_parse(Opt_metadata_replicas, "5", &v, err, sizeof(err)), 0);
	cr_assert_neq(bch_opt_parse(Opt_metadata_replicas, "0", &v, err, sizeof(err)), 0);
	cr_assert_eq(bch_opt_parse(Opt_metadata_replicas, "4", &v, err, sizeof(err)), 0);
}

Test(opts, validate_ranges)
{
	char err[128];

	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *o = &bch_opt_table[i];

		if (o->type == BCH_OPT_STR || o->type == BCH_OPT_TARGET)
			continue;
		if (o->def)
			cr_assert_eq(bch_opt_validate(i, o->def, err, sizeof(err)), 0,
				     "%s default invalid: %s", o->name, err);
		if (o->min > 0 && o->type != BCH_OPT_ENUM)
			cr_assert_neq(bch_opt_validate(i, o->min - 1, err, sizeof(err)), 0,
				      "%s below min accepted", o->name);
		if (o->max < UINT64_MAX && o->type != BCH_OPT_ENUM)
			cr_assert_neq(bch_opt_validate(i, o->max + 1, err, sizeof(err)), 0,
				      "%s above max accepted", o->name);
	}
}

Test(opts, parse_list)
{
	struct bch_opts o;
	char err[128];

	bch_opts_default(&o);
	cr_assert_eq(bch_opts_parse_list(&o, "compression=lz4,ro,degraded=no", OPT_MOUNT | OPT_RUNTIME,
					 err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(o.v[Opt_compression], BCH_COMPRESSION_lz4);
	cr_assert(bch_opt_is_set(&o, Opt_compression));
	cr_assert_eq(o.v[Opt_read_only], 1);
	cr_assert_eq(o.v[Opt_degraded], 0);
	cr_assert_neq(bch_opts_parse_list(&o, "bogus=1", OPT_MOUNT, err, sizeof(err)), 0);
	cr_assert(strstr(err, "bogus"), "%s", err);
	/* block_size is format-only: not settable at open */
	cr_assert_neq(bch_opts_parse_list(&o, "block_size=4k", OPT_MOUNT | OPT_RUNTIME,
					  err, sizeof(err)), 0);
}

Test(opts, sb_slots_round_trip)
{
	struct bch_sb sb;
	struct bch_opts a, b;

	/* slots are unique and in range */
	for (unsigned i = 0; i < BCH_OPT_NR; i++)
		for (unsigned j = i + 1; j < BCH_OPT_NR; j++)
			if (bch_opt_table[i].sb_slot >= 0)
				cr_assert_neq(bch_opt_table[i].sb_slot, bch_opt_table[j].sb_slot,
					      "%s and %s share a slot", bch_opt_table[i].name,
					      bch_opt_table[j].name);
	srandom(42);
	for (unsigned iter = 0; iter < 200; iter++) {
		memset(&sb, 0, sizeof(sb));
		bch_opts_default(&a);
		for (unsigned i = 0; i < BCH_OPT_NR; i++) {
			const struct bch_option *o = &bch_opt_table[i];
			if (!(o->flags & OPT_FS))
				continue;
			uint64_t span = o->max - o->min;
			a.v[i] = o->min + (span ? (uint64_t)random() % (span + 1) : 0);
			if (o->flags & OPT_POW2) {
				a.v[i] = o->min;
				while (a.v[i] * 2 <= o->max && random() % 2)
					a.v[i] *= 2;
			}
		}
		bch_opts_to_sb(&a, &sb);
		bch_opts_default(&b);
		bch_opts_from_sb(&b, &sb);
		for (unsigned i = 0; i < BCH_OPT_NR; i++)
			if (bch_opt_table[i].flags & OPT_FS)
				cr_assert_eq(a.v[i], b.v[i], "seed 42 iter %u: %s %llu != %llu", iter,
					     bch_opt_table[i].name, (unsigned long long)a.v[i],
					     (unsigned long long)b.v[i]);
	}
}
