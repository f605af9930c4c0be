// SPDX-License-Identifier: GPL-2.0
/*
 * sb_fuzz.c - libFuzzer target: superblock validation and field access on
 * arbitrary bytes.  The first input byte chooses whether the checksum is
 * recomputed first ("bypass"), so mutations reach the field checks behind
 * it.  Whatever the input: no crash, no sanitizer report, and a superblock
 * that validates can be walked field by field without reading out of bounds.
 *
 * Built and run by `make fuzz` (clang -fsanitize=fuzzer); not part of check
 * (tests/unit/sb_mutate_test.c is the fixed-seed corpus run in check).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"
#include "super.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t buf_bytes = BCH_SB_BUF_BYTES(BCH_SB_MAX_SIZE_BITS);
	struct bch_sb *sb;
	char err[256], name[64];

	if (size < 1)
		return 0;
	bool bypass = data[0] & 1;
	data++;
	size--;
	if (size > buf_bytes)
		size = buf_bytes;
	sb = calloc(1, buf_bytes);
	memcpy(sb, data, size);
	if (bypass && size >= sizeof(*sb) && sb->csum_type < BCH_CSUM_NR &&
	    sizeof(*sb) + (size_t)sb->u64s * 8 <= buf_bytes)
		bch_sb_set_csum(sb);

	if (!bch_sb_validate(sb, buf_bytes, err, sizeof(err))) {
		struct bch_opts o;
		bch_opts_from_sb(&o, sb);
		for (unsigned i = 0; i < bch_sb_nr_members(sb); i++) {
			struct bch_member *m = bch_sb_member(sb, i);
			if (m->label)
				bch_sb_label_name(sb, m->label - 1, name, sizeof(name));
		}
		for (unsigned t = 0; t < BCH_OPT_NR; t++)
			if (bch_opt_table[t].type == BCH_OPT_TARGET)
				bch_target_to_text(sb, o.v[t], name, sizeof(name));
		for (unsigned f = 0; f < BCH_SB_FIELD_NR; f++)
			bch_sb_field_get(sb, f);
	}
	free(sb);
	return 0;
}
