// SPDX-License-Identifier: GPL-2.0
/*
 * plain_readahead_test.c - crypt_readahead_test.c's cases on a filesystem
 * that does not encrypt: a sequential reader's checksummed extents are
 * read ahead uncached into the slots (fs_read.h), each verified against
 * its checksum before any read takes it, and replied from there; a
 * damaged one is never read ahead, and the read that wants it refuses.
 */
#define RA_SUITE	plain_readahead
#define RA_ENCRYPTED	false
#define RA_TAG		"plain_readahead"
#include "crypt_readahead_test.c"
