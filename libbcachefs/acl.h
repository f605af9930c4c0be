/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_ACL_H
#define _BCACHEFS_ACL_H

/*
 * acl.h - POSIX ACLs in their xattr form (system.posix_acl_access and
 * system.posix_acl_default: a 4-byte version 2 header, then 8-byte entries
 * {tag, perm, id}, little-endian).  The filesystem stores them as opaque
 * xattrs; these helpers keep an inode's mode and its access ACL in step
 * and build the ACLs a new file inherits, as a kernel filesystem does.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BCH_ACL_XATTR_ACCESS	"system.posix_acl_access"
#define BCH_ACL_XATTR_DEFAULT	"system.posix_acl_default"

/* Is v a well-formed ACL xattr (version, entry sizes, tags, required entries)? */
bool bch_acl_valid(const void *v, size_t len);

/* Mode permission bits an access ACL implies (owner, mask or group, other). */
mode_t bch_acl_to_mode(const void *v, size_t len);

/* Does the ACL say no more than the mode bits (only owner, group, other)? */
bool bch_acl_is_equiv_mode(const void *v, size_t len);

/* chmod: rewrite the owner, mask (or group) and other entries from mode, in place. */
void bch_acl_chmod(void *v, size_t len, mode_t mode);

/*
 * A new file under a directory with default ACL def: its access ACL is def
 * with owner, mask (or group) and other limited by *mode, written to out
 * (len bytes, same as def); *mode gets the resulting permission bits.
 */
void bch_acl_create_masq(const void *def, size_t len, void *out, mode_t *mode);

/*
 * posix_acl_update_mode(): setting the access ACL of a file (mode, group
 * gid) gives it the permission bits the ACL implies; S_ISGID goes unless
 * the caller is in gid or has CAP_FSETID (the rule chmod follows).  Store
 * both with bch_fs_set_acl(), the ACL left out when bch_acl_is_equiv_mode().
 */
struct bch_caller;
mode_t bch_acl_update_mode(mode_t mode, gid_t gid, const struct bch_caller *cr,
			   const void *v, size_t len);

#endif /* _BCACHEFS_ACL_H */
