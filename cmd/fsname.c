// SPDX-License-Identifier: GPL-2.0
/*
 * fsname.c - naming a filesystem on the command line (fsname.h): member
 * devices (several arguments or joined by ':'), UUID=<uuid> (found by
 * scanning the machine's block devices for our superblock), or the
 * mountpoint of a `bcachefs fusemount`.
 *
 * The UUID scan reads /proc/partitions and opens each block device
 * read-only without the exclusive lock; what cannot be opened or holds no
 * valid superblock of ours is skipped without a message (most block devices
 * are not ours).  Image files are not scanned: they have to be named.
 *
 * A lone member (cmd_fs_resolve_member: `device remove /dev/sdX`, as
 * bcachefs-tools takes it) names its filesystem through its superblock:
 *   1. mounted: a fuse.bcachefs mount one of whose source devices holds a
 *      superblock with the same internal UUID (so a member the daemon lacks,
 *      for `device online`, finds its mount too);
 *   2. else the other members, each the holder of one of the member UUIDs
 *      the superblock lists: a block device's are looked for among the
 *      block devices (/proc/partitions), an image file's among the regular
 *      files of its directory.  The newest superblock found (seq) then says
 *      who the members are now, so a member a cut `device remove` left
 *      behind (still listing itself) is left out.  Members not found are
 *      named; the open then needs -o degraded, as with any missing member.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <uuid/uuid.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "cmds.h"
#include "fsname.h"
#include "super.h"

void cmd_fs_free(struct cmd_fs *fs)
{
	free_devs(fs->devs);
	fs->devs = NULL;
	fs->nr = 0;
	fs->mounted = false;
	fs->mnt[0] = 0;
}

static bool mount_point_is(const char *point, char *src, dev_t dev, void *dir)
{
	(void)src;
	(void)dev;
	return !strcmp(point, dir);
}

/* Is the canonical path dir the mount point of a fuse.bcachefs mount? */
static bool is_our_mount(const char *dir)
{
	return cmd_each_mount(mount_point_is, (void *)dir);
}

static int resolve_dir(const char *cmd, const char *path, struct cmd_fs *fs)
{
	char real[PATH_MAX];

	if (!realpath(path, real)) {
		cmd_err(cmd, "%s: %s", path, strerror(errno));
		return EXIT_FAIL;
	}
	if (!is_our_mount(real)) {
		cmd_err(cmd, "%s: not a bcachefs mount (name its member devices, UUID=..., "
			"or the directory a fusemount is mounted on)", path);
		return EXIT_FAIL;
	}
	fs->mounted = true;
	snprintf(fs->mnt, sizeof(fs->mnt), "%s", real);
	return 0;
}

struct found_dev {
	char		path[PATH_MAX];
	unsigned	idx;
};

static int cmp_found(const void *a, const void *b)
{
	const struct found_dev *x = a, *y = b;

	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Does the block device at path hold a superblock of ours with user_uuid want? */
static bool dev_has_uuid(const char *path, const uint8_t *want, unsigned *idx)
{
	struct bch_blockdev *dev;
	struct bch_sb *sb = NULL;
	bool ret = false;

	if (bch_dev_open(path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &dev))
		return false;
	if (!bch_sb_read(dev, &sb, NULL) && !memcmp(sb->user_uuid, want, BCH_UUID_SIZE)) {
		*idx = sb->dev_idx;
		ret = true;
	}
	free(sb);
	bch_dev_close(dev);
	return ret;
}

static int resolve_uuid(const char *cmd, const char *arg, struct cmd_fs *fs)
{
	const char *text = arg + strlen("UUID=");
	uint8_t want[16];
	char line[512], name[256];
	struct found_dev *found = NULL;
	unsigned nr = 0, cap = 0;
	unsigned long long blocks;
	FILE *f;

	if (strlen(text) != 36 || uuid_parse(text, want)) {
		cmd_err(cmd, "%s: not a UUID (want UUID=xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", arg);
		return EXIT_USAGE;
	}
	f = fopen("/proc/partitions", "re");
	if (!f) {
		cmd_err(cmd, "%s: cannot list block devices: /proc/partitions: %s", arg,
			strerror(errno));
		return EXIT_FAIL;
	}
	while (fgets(line, sizeof(line), f)) {
		char path[PATH_MAX];
		unsigned idx;

		if (sscanf(line, " %*u %*u %llu %255s", &blocks, name) != 2 || !blocks)
			continue;
		/* floppies and optical drives: slow to open, never ours */
		if (!strncmp(name, "fd", 2) || !strncmp(name, "sr", 2))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", name);
		if (!dev_has_uuid(path, want, &idx))
			continue;
		if (nr == cap) {
			cap = cap ? cap * 2 : 4;
			found = realloc(found, cap * sizeof(*found));
			if (!found)
				abort();
		}
		snprintf(found[nr].path, sizeof(found[nr].path), "%s", path);
		found[nr++].idx = idx;
	}
	fclose(f);

	if (!nr) {
		cmd_err(cmd, "no device with filesystem %s found (image files are not scanned: "
			"name them)", arg);
		free(found);
		return EXIT_FAIL;
	}
	qsort(found, nr, sizeof(*found), cmp_found);
	for (unsigned i = 1; i < nr; i++)
		if (found[i].idx == found[i - 1].idx) {
			cmd_err(cmd, "%s: %s and %s both claim to be member %u: name the right "
				"devices instead", arg, found[i - 1].path, found[i].path,
				found[i].idx);
			free(found);
			return EXIT_FAIL;
		}

	fs->devs = calloc(nr + 1, sizeof(*fs->devs));
	if (!fs->devs)
		abort();
	for (unsigned i = 0; i < nr; i++)
		fs->devs[i] = strdup(found[i].path);
	fs->nr = nr;
	free(found);
	return 0;
}

/*
 * The loop devices (/dev/loopN) whose backing file is one of devs: a
 * fusemount given the loop device holds the image file too.
 */
static char **loops_of(char * const *devs, unsigned nr, unsigned *nr_loops)
{
	char **loops = calloc(nr + 1, sizeof(*loops));
	DIR *d = opendir("/sys/block");
	struct dirent *e;

	if (!loops)
		abort();
	*nr_loops = 0;
	while (d && (e = readdir(d)) && *nr_loops < nr) {
		char sys[PATH_MAX], backing[PATH_MAX];
		struct stat bst, st;
		FILE *f;

		if (strncmp(e->d_name, "loop", 4))
			continue;
		snprintf(sys, sizeof(sys), "/sys/block/%s/loop/backing_file", e->d_name);
		if (!(f = fopen(sys, "re")))
			continue;
		bool got = fgets(backing, sizeof(backing), f);
		fclose(f);
		backing[strcspn(backing, "\n")] = 0;
		if (!got || stat(backing, &bst) || !S_ISREG(bst.st_mode))
			continue;
		for (unsigned i = 0; i < nr; i++)
			if (!stat(devs[i], &st) && st.st_dev == bst.st_dev && st.st_ino == bst.st_ino) {
				snprintf(sys, sizeof(sys), "/dev/%s", e->d_name);
				loops[(*nr_loops)++] = strdup(sys);
				break;
			}
	}
	if (d)
		closedir(d);
	return loops;
}

/* ------------------------------------------------------- a lone member */

/* The superblock at path (read-only, no lock: a daemon may hold it), NULL if none. */
static struct bch_sb *sb_of(const char *path)
{
	struct bch_blockdev *dev;
	struct bch_sb *sb = NULL;

	if (bch_dev_open(path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &dev))
		return NULL;
	if (bch_sb_read(dev, &sb, NULL)) {
		free(sb);
		sb = NULL;
	}
	bch_dev_close(dev);
	return sb;
}

/* The mount point of the fuse.bcachefs mount of the filesystem with internal uuid. */
static bool mount_of_uuid(const uint8_t *uuid, char *mnt, size_t len)
{
	char line[16384], src[8192], point[8192];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - "), *save = NULL;

		if (!sep || strncmp(sep + 3, "fuse.bcachefs ", 14) ||
		    sscanf(line, "%*u %*u %*u:%*u %*s %8191s", point) != 1 ||
		    sscanf(sep + 17, "%8191s", src) != 1)
			continue;
		bch_mountinfo_unescape(point);
		bch_mountinfo_unescape(src);
		for (char *p = strtok_r(src, ":", &save); p && !found; p = strtok_r(NULL, ":", &save)) {
			struct bch_sb *sb = sb_of(p);
			bool read = sb;

			found = sb && !memcmp(sb->uuid, uuid, BCH_UUID_SIZE);
			free(sb);
			if (read)
				break;	/* one readable source says which filesystem it is */
		}
		if (found)
			snprintf(mnt, len, "%.*s", (int)len - 1, point);
	}
	fclose(f);
	return found;
}

/* A device's own member UUID, as its superblock records it. */
static const uint8_t *own_uuid(const struct bch_sb *sb)
{
	struct bch_member *m = bch_sb_member(sb, sb->dev_idx);

	return m ? m->uuid : NULL;
}

/*
 * candidate's superblock when it is of the filesystem of sb (same internal
 * UUID) and holds a member UUID sb lists, else NULL (caller frees).
 */
static struct bch_sb *member_of(const struct bch_sb *sb, const char *path)
{
	struct bch_sb *c = sb_of(path);
	struct bch_member *m = c ? bch_sb_member(sb, c->dev_idx) : NULL;

	if (c && (memcmp(c->uuid, sb->uuid, BCH_UUID_SIZE) || !m || !bch_member_exists(m) ||
		  !own_uuid(c) || memcmp(m->uuid, own_uuid(c), BCH_UUID_SIZE))) {
		free(c);
		c = NULL;
	}
	return c;
}

/* The candidates for the other members: block devices, or the files beside an image. */
static char **candidates(const char *member, bool blockdev, unsigned *nr)
{
	unsigned cap = 16, n = 0;
	char **v = malloc(cap * sizeof(*v)), path[PATH_MAX];

	if (!v)
		abort();
	if (blockdev) {
		char line[512], name[256];
		unsigned long long blocks;
		FILE *f = fopen("/proc/partitions", "re");

		while (f && fgets(line, sizeof(line), f)) {
			if (sscanf(line, " %*u %*u %llu %255s", &blocks, name) != 2 || !blocks ||
			    !strncmp(name, "fd", 2) || !strncmp(name, "sr", 2))
				continue;
			snprintf(path, sizeof(path), "/dev/%s", name);
			if (n + 2 > cap && !(v = realloc(v, (cap *= 2) * sizeof(*v))))
				abort();
			v[n++] = strdup(path);
		}
		if (f)
			fclose(f);
	} else {
		char dir[PATH_MAX];
		struct dirent *e;
		struct stat st;
		DIR *d;

		snprintf(dir, sizeof(dir), "%s", member);
		*strrchr(dir, '/') = 0;		/* member is absolute */
		d = opendir(*dir ? dir : "/");
		while (d && (e = readdir(d))) {
			if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path) ||
			    stat(path, &st) || !S_ISREG(st.st_mode) || st.st_size < 64 << 10)
				continue;
			if (n + 2 > cap && !(v = realloc(v, (cap *= 2) * sizeof(*v))))
				abort();
			v[n++] = strdup(path);
		}
		if (d)
			closedir(d);
	}
	v[n] = NULL;
	*nr = n;
	return v;
}

int cmd_fs_resolve_member(const char *cmd, const char *member, unsigned flags, struct cmd_fs *fs)
{
	bool degraded = flags & CMD_FS_DEGRADED;
	char real[PATH_MAX], who[160];
	struct stat st;
	struct bch_sb *sb;
	int ret = 0;

	memset(fs, 0, sizeof(*fs));
	if (!realpath(member, real) || stat(real, &st)) {
		cmd_err(cmd, "%s: %s", member, strerror(errno));
		return EXIT_FAIL;
	}
	if (S_ISDIR(st.st_mode) || !(sb = sb_of(real))) {
		cmd_err(cmd, "%s: %s: name the filesystem first (FS MEMBER: its devices, "
			"UUID=..., or its mountpoint)", member,
			S_ISDIR(st.st_mode) ? "a directory, not a member" : "no bcachefs superblock here");
		return EXIT_USAGE;
	}
	if (mount_of_uuid(sb->uuid, fs->mnt, sizeof(fs->mnt))) {
		fs->mounted = true;
		free(sb);
		return 0;
	}
	if (flags & CMD_FS_MOUNTED_ONLY) {
		free(sb);
		return 0;
	}

	/*
	 * by_idx: the device holding each member the given superblock lists.
	 * The newest superblock among them (ref) says who the members are now:
	 * a member removed by a cut `device remove` still lists itself, and is
	 * then left out (the body wipes what is left of it).
	 */
	unsigned nr_cand, nr_members = BCH_SB_MEMBERS_MAX;
	char **cand = candidates(real, S_ISBLK(st.st_mode), &nr_cand);
	char *by_idx[BCH_SB_MEMBERS_MAX] = { NULL };
	struct bch_sb *sbs[BCH_SB_MEMBERS_MAX] = { NULL }, *ref = sb;

	for (unsigned i = 0; i < nr_cand && !ret; i++) {
		struct bch_sb *c = member_of(sb, cand[i]);
		char ri[PATH_MAX], rc[PATH_MAX];
		unsigned idx = c ? c->dev_idx : 0;

		if (!c || idx >= BCH_SB_MEMBERS_MAX) {
			free(c);
			continue;
		}
		if (by_idx[idx] && realpath(by_idx[idx], ri) && realpath(cand[i], rc) && !strcmp(ri, rc)) {
			free(c);
			continue;	/* the same device by two names */
		}
		if (by_idx[idx]) {
			cmd_err(cmd, "%s: %s and %s both hold member %u: name the filesystem's devices "
				"first (FS MEMBER)", member, by_idx[idx], cand[i], idx);
			ret = EXIT_FAIL;
		}
		free(by_idx[idx]);
		free(sbs[idx]);
		by_idx[idx] = strdup(cand[i]);
		sbs[idx] = c;
		if (c->seq > ref->seq)
			ref = c;
	}
	/* the member as named, not as found: the body looks it up by that path */
	if (!ret && sb->dev_idx < BCH_SB_MEMBERS_MAX) {
		free(by_idx[sb->dev_idx]);
		by_idx[sb->dev_idx] = strdup(real);
	}
	nr_members = bch_sb_nr_members(ref);
	unsigned n = 0, missing = 0;
	fs->devs = calloc(BCH_SB_MEMBERS_MAX + 1, sizeof(*fs->devs));
	if (!fs->devs)
		abort();
	for (unsigned i = 0; i < nr_members && !ret; i++) {
		struct bch_member *m = bch_sb_member(ref, i);
		const uint8_t *u = i == sb->dev_idx ? own_uuid(sb) : sbs[i] ? own_uuid(sbs[i]) : NULL;

		if (!m || !bch_member_exists(m))
			continue;
		if (by_idx[i] && u && !memcmp(u, m->uuid, BCH_UUID_SIZE))
			fs->devs[n++] = strdup(by_idx[i]);
		else {
			cmd_err(cmd, "%s: %s of its filesystem not found (looked at %s)%s", member,
				bch_sb_member_text(ref, i, who, sizeof(who)),
				S_ISBLK(st.st_mode) ? "the block devices" : "the files beside it",
				degraded ? "" : ": name the filesystem's devices first (FS MEMBER), "
				"or -o degraded to go on without it");
			missing++;
		}
	}
	fs->nr = n;
	if (!ret && missing && !degraded)
		ret = EXIT_FAIL;
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++) {
		free(by_idx[i]);
		free(sbs[i]);
	}
	free_devs(cand);
	free(sb);
	if (ret)
		cmd_fs_free(fs);
	return ret;
}

int cmd_fs_resolve(const char *cmd, char * const *args, unsigned nr, struct cmd_fs *fs)
{
	memset(fs, 0, sizeof(*fs));
	if (!nr) {
		cmd_err(cmd, "no filesystem given (member devices, UUID=..., or a mountpoint)");
		return EXIT_USAGE;
	}
	for (unsigned i = 0; i < nr; i++)
		if (!strncmp(args[i], "UUID=", 5) && nr > 1) {
			cmd_err(cmd, "%s names the whole filesystem: give nothing else with it",
				args[i]);
			return EXIT_USAGE;
		}

	int ret;
	if (!strncmp(args[0], "UUID=", 5)) {
		ret = resolve_uuid(cmd, args[0], fs);
	} else {
		fs->devs = split_devs(args, nr, &fs->nr);
		if (!fs->nr) {
			cmd_err(cmd, "no device given");
			cmd_fs_free(fs);
			return EXIT_USAGE;
		}
		ret = 0;
		for (unsigned i = 0; i < fs->nr && !ret; i++) {
			struct stat st;

			if (stat(fs->devs[i], &st)) {
				char abs[PATH_MAX], cwd[PATH_MAX];
				bool private = errno == EACCES && fs->nr == 1 &&
					(fs->devs[i][0] == '/' || getcwd(cwd, sizeof(cwd))) &&
					(size_t)snprintf(abs, sizeof(abs), "%s%s%s",
						 fs->devs[i][0] == '/' ? "" : cwd,
						 fs->devs[i][0] == '/' ? "" : "/", fs->devs[i]) < sizeof(abs) &&
					is_our_mount(abs);
				/* a FUSE mount of another user without allow_other refuses even root's stat */
				if (private)
					cmd_err(cmd, "%s: a bcachefs mount private to the user who mounted it "
						"(no -o allow_other): run the command as that user", fs->devs[i]);
				else
					cmd_err(cmd, "%s: %s", fs->devs[i], strerror(errno));
				ret = EXIT_FAIL;
			} else if (S_ISDIR(st.st_mode) && fs->nr > 1) {
				cmd_err(cmd, "%s: is a directory (a mountpoint names the filesystem "
					"alone)", fs->devs[i]);
				ret = EXIT_USAGE;
			} else if (S_ISDIR(st.st_mode)) {
				char *dir = fs->devs[0];

				fs->devs[0] = NULL;
				cmd_fs_free(fs);
				ret = resolve_dir(cmd, dir, fs);
				free(dir);
				return ret;
			}
		}
	}
	if (ret) {
		cmd_fs_free(fs);
		return ret;
	}
	unsigned nr_loops;
	char **loops = loops_of(fs->devs, fs->nr, &nr_loops);
	bool mounted = cmd_mounted_at(fs->devs, fs->nr, fs->mnt, sizeof(fs->mnt)) ||
		(nr_loops && cmd_mounted_at(loops, nr_loops, fs->mnt, sizeof(fs->mnt)));

	free_devs(loops);
	if (mounted) {
		free_devs(fs->devs);
		fs->devs = NULL;
		fs->nr = 0;
		fs->mounted = true;
	}
	return 0;
}
