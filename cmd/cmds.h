/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMDS_H
#define _BCACHEFS_CMDS_H

/*
 * cmds.h - every subcommand's entry point and the helpers they share.
 *
 * Exit codes of every command except fsck (see man/bcachefs.8):
 *   0  success
 *   1  failure: I/O error, damaged or missing filesystem, refused to act
 *  16  usage error: bad command line; nothing was touched
 */

#include <stdbool.h>
#include <stdio.h>

#define EXIT_OK		0
#define EXIT_FAIL	1
#define EXIT_USAGE	16

int cmd_format(int argc, char *argv[]);
int cmd_show_super(int argc, char *argv[]);
int cmd_version(int argc, char *argv[]);
int cmd_help_opts(int argc, char *argv[]);
int cmd_fsck(int argc, char *argv[]);
int cmd_list(int argc, char *argv[]);
int cmd_list_journal(int argc, char *argv[]);
int cmd_kv(int argc, char *argv[]);
int cmd_image(int argc, char *argv[]);
int cmd_fs(int argc, char *argv[]);
int cmd_fusemount(int argc, char *argv[]);
int cmd_data(int argc, char *argv[]);
int cmd_data_scrub(int argc, char *argv[]);	/* cmd_scrub.c */
int cmd_set_fs_option(int argc, char *argv[]);
int cmd_device(int argc, char *argv[]);
int cmd_data_rereplicate(int argc, char *argv[]);	/* cmd_device.c */
int cmd_unlock(int argc, char *argv[]);			/* cmd_crypt.c */
int cmd_set_passphrase(int argc, char *argv[]);
int cmd_remove_passphrase(int argc, char *argv[]);
/*
 * Before a command changes anything (fsck's superblock repairs): when devs
 * hold an encrypted filesystem with a passphrase, find its key now (keyring,
 * BCACHEFS_PASSPHRASE_FILE, terminal, stdin) and remember it for the open.
 * 0 (also when nothing readable or not encrypted), or -BCH_ERR_key_wrong /
 * -BCH_ERR_key_missing / another error with a message in err.
 */
int cmd_crypt_key_early(const char *cmd, char **devs, unsigned nr, char *err, size_t errlen);

/*
 * What is on path already (format, device add)?  1 and a description in
 * what when a filesystem, partition table or (unless skip_ours) a bcachefs
 * superblock is found, 0 if none, <0 (printed) when libblkid is missing.
 */
int cmd_probe_existing(const char *path, bool skip_ours, char *what, size_t len);

/* Command bodies (cmd_ctx.h) in cmd_ctl_cmds.c's table. */
struct cmd_ctx;
int cmd_scrub_body(struct cmd_ctx *x, int argc, char **argv);

/* Command bodies (cmd_ctx.h, listed in cmd_ctl_cmds.c) */
struct cmd_ctx;
int cmd_data_rebalance_body(struct cmd_ctx *x, int argc, char **argv);
int cmd_set_fs_option_body(struct cmd_ctx *x, int argc, char **argv);

/* fs usage of an open filesystem (also served by fusemount to `fs usage MNT`). */
struct bch_fs;
int bch_fs_usage_print(FILE *f, struct bch_fs *c, bool json, bool human);

/* Print "bcachefs CMD: msg\n" on stderr. */
void cmd_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Opened with members missing (-o degraded): one line on stderr per missing
 * member, "bcachefs CMD: DEVS: member 1 (uuid ...) missing: opened degraded".
 */
void cmd_note_degraded(const char *cmd, struct bch_fs *c, char * const *devs, unsigned nr);

/*
 * Split device arguments: each argv entry may itself be a colon-separated
 * list ("ssd.img:hdd.img").  Returns a malloc'd NULL-terminated array of
 * strdup'd paths (free with free_devs), count in *nr.
 */
char **split_devs(char * const *args, unsigned nr_args, unsigned *nr);
void free_devs(char **devs);

/*
 * Is one of devs served by a fusemount daemon?  1 and its mount point in
 * mnt when /proc/self/mountinfo lists a fuse.bcachefs mount whose source
 * (the daemon's fsname: absolute device paths) names one of them, else 0.
 */
int cmd_mounted_at(char * const *devs, unsigned nr, char *mnt, size_t len);

/* Print s as a JSON string literal (with quotes). */
void json_str(FILE *f, const char *s);

#endif /* _BCACHEFS_CMDS_H */
