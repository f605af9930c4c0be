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

/* Is the canonical path dir the mount point of a fuse.bcachefs mount? */
static bool is_our_mount(const char *dir)
{
	char line[16384], point[8192];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");

		if (!sep || strncmp(sep + 3, "fuse.bcachefs ", 14) ||
		    sscanf(line, "%*u %*u %*u:%*u %*s %8191s", point) != 1)
			continue;
		bch_mountinfo_unescape(point);
		found = !strcmp(point, dir);
	}
	fclose(f);
	return found;
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
