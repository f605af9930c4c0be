/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMD_TAR_H
#define _BCACHEFS_CMD_TAR_H

/*
 * tar.h - tar archives into and out of a filesystem, through libarchive:
 * `image import-tar` reads any format libarchive knows (pax, gnu, ustar,
 * compressed or not); `image export-tar` writes pax with xattrs, hard
 * links and sparse maps.  "-" is stdin / stdout.
 *
 * libarchive is not linked: it is loaded on first use (archive_dl.h), and
 * when it cannot be, these return -ELIBACC with a message naming it.
 */

#include <stdint.h>

struct bch_fs;

/*
 * Load libarchive if it is not loaded yet: 0, or -ELIBACC (message printed,
 * naming verb).  Import and export call it themselves; the image verbs call
 * it first so that a missing library stops them before the filesystem opens.
 */
int tar_load(const char *verb);
#define TAR_NO_WHITEOUTS	(1U << 0)	/* import ".wh." files as files */

/*
 * Unpack archive path into directory dir, applying OCI layer whiteouts
 * (see tar.c) unless flags has TAR_NO_WHITEOUTS.  0 or -errno (message
 * printed); an entry refused stops the import where it is.
 */
int tar_import(struct bch_fs *c, const char *path, uint64_t dir, unsigned flags);
/*
 * Read archive path's headers only and refuse it as import would (absolute
 * names, "..", hard links out, bad whiteouts): 0 or -EINVAL, naming the
 * entry.  For a file, before anything is opened for writing.
 */
int tar_check(const char *path, unsigned flags);
/* The same with owners and times mapped as spec says (spec.h). */
struct bch_spec;
int tar_import_spec(struct bch_fs *c, const char *path, uint64_t dir, const struct bch_spec *spec,
		    unsigned flags);
/* Pack the tree under directory dir into archive path. */
int tar_export(struct bch_fs *c, const char *path, uint64_t dir);
/*
 * The change from subvolume old_subvol to new_subvol (same snapshot tree) as
 * an OCI layer (tar.c, "export --since"): NEW's files that differ from OLD's,
 * whole trees for what was added or renamed, a whiteout ".wh.NAME" for each
 * name OLD has and NEW does not (a rename: whiteout + add).  Unpacked by
 * tar_import() onto a copy of OLD, it gives NEW.  0 or -errno (message printed).
 */
int tar_export_since(struct bch_fs *c, const char *path, uint32_t old_subvol, uint32_t new_subvol);

#endif /* _BCACHEFS_CMD_TAR_H */
