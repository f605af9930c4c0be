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
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define EXIT_OK		0
#define EXIT_FAIL	1
#define EXIT_USAGE	16

int cmd_format(int argc, char *argv[]);
int cmd_show_super(int argc, char *argv[]);
int cmd_version(int argc, char *argv[]);
int cmd_help_opts(int argc, char *argv[]);
int cmd_fsck(int argc, char *argv[]);
int cmd_list(int argc, char *argv[]);
int cmd_dump(int argc, char *argv[]);
int cmd_undump(int argc, char *argv[]);
int cmd_list_journal(int argc, char *argv[]);
int cmd_kv(int argc, char *argv[]);
int cmd_image(int argc, char *argv[]);
int cmd_subvolume(int argc, char *argv[]);
/* The table of `subvolume list` (text or --json; tree: -t) of an open filesystem; 0 or -errno. */
struct bch_fs;
int cmd_subvolume_list_print(FILE *f, struct bch_fs *c, bool json, bool tree);
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
int cmd_setattr(int argc, char *argv[]);
/*
 * image setattr (cmd_setattr.c): argv as `setattr [--OPTION=VALUE]... PATH...`
 * on the open filesystem c (NULL: check the arguments only; check_only: a
 * read-only open, check the PATHs and values, change nothing).  Exit code.
 */
struct bch_fs;
int cmd_setattr_image(struct bch_fs *c, bool check_only, int argc, char **argv);
/*
 * image update (cmd_image_update.c): argv as `update [OPTS] DIR [PATH]`,
 * with c as for cmd_setattr_image.  Exit code, or EXIT_IMAGE_DONE from
 * the check pass when nothing is left for a read-write one (--dry-run).
 * *priv (NULL at first) carries what the check pass found to the
 * read-write pass, which frees it.
 */
#define EXIT_IMAGE_DONE	0x100
int cmd_image_update(struct bch_fs *c, bool check_only, bool json, void **priv, int argc,
		     char **argv);
/* The check pass's findings (*priv) when the read-write pass never ran. */
void cmd_image_update_priv_free(void *priv);
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

/*
 * -o ARG of a command that reads (fs usage, list, list-journal, show-super,
 * kv) or whose open is refused for a missing member with "-o degraded opens
 * it" (set-fs-option, data rebalance): the open options degraded and
 * very_degraded, comma-separated, into *o.  0, or EXIT_USAGE after a message
 * naming cmd (any other option: "CMD takes only degraded and very_degraded").
 */
struct bch_opts;
int cmd_open_opts_parse(const char *cmd, struct bch_opts *o, const char *arg);

/* Print "bcachefs CMD: msg\n" on stderr. */
void cmd_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * The one report of a getopt error, called where getopt returned '?'
 * (main() sets opterr to 0: getopt prints nothing itself).  Names the word:
 * "bcachefs CMD: unknown option '--bogus' (see bcachefs CMD --help)", or
 * "option '-o' needs a value", or "option '--json' takes no value".
 * optstring: the command's short options, as given to getopt (to tell an
 * option that lacks its value from an unknown one; NULL: unknown).  Returns
 * EXIT_USAGE.
 */
int cmd_opt_err(const char *cmd, char * const *argv, const char *optstring);
/* The last message cmd_err printed (without "bcachefs CMD: "), NULL if none: for a JSON "error". */
const char *cmd_err_last(void);

/*
 * Opened with members missing (-o degraded): one line on stderr per missing
 * member, "bcachefs CMD: DEVS: member 1 (uuid ...) missing: opened degraded".
 */
/*
 * A path inside a fusemount (any directory or file in it, as btrfs takes):
 * the mountpoint of the fuse.bcachefs mount holding it into mnt; false when
 * none does (cmd_fs_usage.c).
 */
bool cmd_mount_holding(const char *path, char *mnt, size_t len);
/* `bcachefs device stats` (cmd_device_stats.c) */
int cmd_device_stats(int argc, char **argv);
/* `bcachefs fs timestats` (cmd_fs_timestats.c) */
int cmd_fs_timestats(int argc, char **argv);
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
/*
 * fn for each fuse.bcachefs mount of /proc/self/mountinfo (its mountpoint
 * and source, the daemon's fsname, unescaped; src may be changed; its device
 * number) until fn returns true.  Returns whether it did.  The one reader
 * of the mount table for the commands.
 */
bool cmd_each_mount(bool (*fn)(const char *point, char *src, dev_t dev, void *priv), void *priv);

/* Print s as a JSON string literal (with quotes). */
void json_str(FILE *f, const char *s);

/*
 * The JSON writer every --json goes through (the convention is in
 * man/bcachefs.8, JSON OUTPUT): one top-level object whose first member is
 * "version" (BCH_JSON_VERSION), snake_case keys, sizes in bytes and counts as
 * numbers, UUIDs as strings, times as RFC 3339 strings (UTC).
 *
 * json_begin() opens the top-level object and writes "version"; every value
 * call takes the member's key (NULL inside an array); json_end() closes what
 * is still open and ends the line.  json_fail() is for an error found after
 * output has begun: it closes the open arrays and objects down to the top
 * level, adds "error": msg and ends, so stdout still holds one valid JSON
 * document (the message itself goes to stderr through cmd_err as always).
 * pretty: one member per line, indented; else one line.
 */
#define BCH_JSON_VERSION	1
#define BCH_JSON_DEPTH_MAX	16

struct bch_json {
	FILE	*f;
	bool	pretty;
	int	depth;				/* open containers */
	bool	first[BCH_JSON_DEPTH_MAX];	/* nothing written yet at this depth */
	bool	array[BCH_JSON_DEPTH_MAX];	/* the container at this depth is an array */
};

void json_begin(struct bch_json *j, FILE *f, bool pretty);
void json_end(struct bch_json *j);
void json_fail(struct bch_json *j, const char *msg);
void json_open(struct bch_json *j, const char *key, bool array);
void json_close(struct bch_json *j);
void json_u64(struct bch_json *j, const char *key, uint64_t v);
void json_s64(struct bch_json *j, const char *key, int64_t v);
void json_double(struct bch_json *j, const char *key, double v, int decimals);
void json_bool(struct bch_json *j, const char *key, bool v);
void json_null(struct bch_json *j, const char *key);
/* A string; NULL writes null. */
void json_string(struct bch_json *j, const char *key, const char *s);
/* A 16-byte UUID as its lower-case string form. */
void json_uuid(struct bch_json *j, const char *key, const unsigned char *uuid);
/* secs + nsec since the epoch as RFC 3339 UTC: "2026-12-05T13:30:08Z", ".5Z" style fraction when nsec */
void json_time(struct bch_json *j, const char *key, int64_t secs, long nsec);

#endif /* _BCACHEFS_CMDS_H */
