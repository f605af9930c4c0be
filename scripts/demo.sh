#!/bin/sh
# make demo: show the tool doing its job on a built-in example, in a temp dir.
set -eu
B="$(cd "$(dirname "$0")/.." && pwd)/bcachefs"
dir=$(mktemp -d "${TMPDIR:-/tmp}/bcachefs-demo.XXXXXX")
trap 'fusermount3 -uz "$dir/mnt" 2>/dev/null || true; rm -rf "$dir"' EXIT
cd "$dir"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

echo "bcachefs demo in $dir (removed afterwards)"
step "$B" version
echo
echo "# A two-tier filesystem in the 2015 spelling: a small fast device and a big slow one."
step "$B" format --fs-size=256M -C ssd.img --tier 1 --fs-size=1G -C hdd.img -L demo
step "$B" show-super hdd.img
echo
echo "# Damage the primary superblock copy of ssd.img: the backups still find the filesystem."
step dd if=/dev/zero of=ssd.img bs=512 seek=8 count=8 conv=notrunc status=none
step "$B" show-super ssd.img
echo
echo "# The btrees format created, one empty root node each:"
step "$B" list -m nodes -b test ssd.img:hdd.img
echo
echo "# Keys in, a power cut before the btree nodes were written, and out again (journal replay):"
step "$B" kv --no-clean-close ssd.img:hdd.img put 1:1 hello 1:2 world
step "$B" list -b test ssd.img:hdd.img
step "$B" list-journal ssd.img:hdd.img
echo
echo "# fsck replays the journal and checks every superblock copy and every node:"
step "$B" fsck -y ssd.img:hdd.img || true
step "$B" fsck -n ssd.img:hdd.img
echo
echo "# Files: build an image from a directory (no root, no kernel driver), look inside."
mkdir -p src/etc src/usr/share/doc
printf 'demo\n' > src/etc/hostname
seq 1 50000 > src/usr/share/doc/numbers.txt
ln -s ../etc/hostname src/usr/hostname-link
step "$B" format -q --fs-size=256M --compression=zstd --source src files.img
step "$B" image ls -lR files.img /usr
step "$B" image put files.img "$B" /usr/bcachefs
step "$B" image cat files.img /etc/hostname
step "$B" fs usage -h files.img
step "$B" fsck -f -n files.img
echo
echo "# Snapshots: instant, and a write afterwards lands on one side only"
step "$B" subvolume snapshot -r files.img / /before
printf 'changed\n' > hostname.new
step "$B" image rm files.img /etc/hostname
step "$B" image put files.img hostname.new /etc/hostname
step "$B" image cat files.img /etc/hostname /before/etc/hostname
step "$B" subvolume list files.img
step "$B" subvolume delete files.img /before
if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null && mkdir mnt &&
   "$B" fusemount files.img mnt 2>/dev/null; then
	echo
	echo "# And mounted through FUSE:"
	step ls -l mnt/usr
	step df -hT mnt
	fusermount3 -u mnt
fi
