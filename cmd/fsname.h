/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FSNAME_H
#define _BCACHEFS_FSNAME_H

/*
 * fsname.h - naming a filesystem on the command line.
 *
 * Wherever a command takes FS it accepts:
 *   - member devices: several arguments, or one joined by ':' (a.img:b.img);
 *   - UUID=<uuid>: the filesystem's user-visible UUID, found by scanning the
 *     block devices of the machine (/proc/partitions, loop devices
 *     included) for our superblock; every member found is used;
 *   - the mountpoint of a `bcachefs fusemount`: the command then talks to
 *     the daemon over the control channel (ctl.h).  A directory that is not
 *     the root of one of our mounts is refused ("not a bcachefs mount").
 * Devices that a fusemount daemon holds (cmd_mounted_at) resolve to its
 * mountpoint, so `device add a.img b.img` works mounted or not.
 */

#include <limits.h>
#include <stdbool.h>

struct cmd_fs {
	bool		mounted;	/* mnt is set; devs empty */
	char		mnt[PATH_MAX];
	char		**devs;		/* NULL-terminated, malloc'd (free_devs) */
	unsigned	nr;
};

/*
 * Resolve args[0..nr) into fs.  On error prints "bcachefs CMD: ..." on
 * stderr and returns the exit code (EXIT_FAIL: not found / not ours;
 * EXIT_USAGE: malformed); 0 on success.
 */
int  cmd_fs_resolve(const char *cmd, char * const *args, unsigned nr, struct cmd_fs *fs);
void cmd_fs_free(struct cmd_fs *fs);

/*
 * A lone member (`device remove /dev/sdX`): its filesystem, found from the
 * member's superblock (fsname.c says how: the mount table first, then the
 * holders of the member UUIDs it lists).  Members not found are named on
 * stderr; with CMD_FS_DEGRADED the others are used, else EXIT_FAIL.
 * CMD_FS_MOUNTED_ONLY: only the mount table (device online/offline: 0 and
 * fs->mounted false when unmounted).  EXIT_USAGE when member holds no
 * superblock of ours (or is a directory).
 */
#define CMD_FS_DEGRADED		(1U << 0)
#define CMD_FS_MOUNTED_ONLY	(1U << 1)
int cmd_fs_resolve_member(const char *cmd, const char *member, unsigned flags, struct cmd_fs *fs);

#endif /* _BCACHEFS_FSNAME_H */
