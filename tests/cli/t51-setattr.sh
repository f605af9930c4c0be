# bcachefs setattr (through a fusemount) and image setattr (offline), and the
# read-only bcachefs_effective.<option> xattrs.  On a filesystem formatted
# with background_compression=gzip (a filesystem value the effective xattrs
# show when a file has none of its own):
#   - image setattr: set on a directory re-inherits below it (children that
#     held its old value take the new one, a child with its own keeps it), new
#     files inherit it and their extents are compressed as asked; --OPTION=-
#     and --OPTION= remove, --remove-all drops all;
#   - effective values: own / inherited / the filesystem's, listed only for
#     the options the file carries; setting or removing one is refused
#     (Operation not supported) and writes nothing;
#   - refusals: unknown option, not a per-file option, bad value (exit 16,
#     nothing written), unknown label, missing path (exit 1), a path not in a
#     bcachefs mount;
#   - through a fusemount: the same on files and directories, a new file in
#     the directory written zstd, getfattr/setfattr of the effective xattrs,
#     image setattr on the mounted devices refused.
# fsck -n clean after each part.  Data: a fixed text pattern.
need getfattr setfattr jq
expect_rc 0 $B format -q --background_compression=gzip --fs-size=64M --label=ssd a.img
I=a.img
seq -f 'line %08g of a compressible file' 1 20000 > data

inum() { $B image stat --json $I "$1" | jq -r ".files[0].inode"; }
list_ext() { $B list -b extents -s "$1:0" -e "$1:max" $I; }
# effective PATH OPTION: the effective value as image getfattr prints it
effective() { $B image getfattr $I -n "bcachefs_effective.$2" "$1" | sed -n "s/^bcachefs_effective.$2=\"\(.*\)\"$/\1/p"; }

# ---- offline: set on a directory, re-inherit, new files
expect_rc 0 $B image mkdir $I /d /d/sub /d/own /d/sub/deep
expect_rc 0 $B image put $I data /d/old
expect_rc 0 $B image setattr $I --compression=lz4 /d/own
expect_rc 0 $B image setattr $I --compression=zstd --data_replicas=1 /d
for p in /d /d/sub /d/sub/deep /d/old; do
	[ "$(effective $p compression)" = zstd ] || fail "$p: compression $(effective $p compression), not zstd"
done
[ "$(effective /d/own compression)" = lz4 ] || fail "/d/own lost its own value"
# the options before the device, as bcachefs-tools' order would put them
expect_rc 0 $B image setattr --promote-target=ssd $I /d/sub
expect_rc 0 $B image getfattr $I /d/sub
expect_in out '^bcachefs.promote_target="ssd"$'
expect_in out '^bcachefs_effective.promote_target="ssd"$'
# a new file takes the directory's; its data is zstd (comp 3)
expect_rc 0 $B image put $I data /d/sub/new
[ "$(effective /d/sub/new compression)" = zstd ] || fail "a new file did not inherit zstd"
run list_ext $(inum /d/sub/new)
grep -q 'comp 3' out || fail "the new file's extents are not zstd: $(head -3 out)"
expect_not_in out 'comp [^3]'
expect_rc 0 $B image cat $I /d/sub/new
cmp out data || fail "/d/sub/new reads back other data"

# ---- effective values: own, inherited, the filesystem's
expect_rc 0 $B image getfattr $I -n bcachefs_effective.compression /d/sub/new
expect_in out '^bcachefs_effective.compression="zstd"$'
[ "$(effective / compression)" = none ] || fail "root: compression not the filesystem's none"
[ "$(effective /d background_compression)" = gzip ] || fail "not the filesystem's gzip"
[ "$(effective /d/sub/new data_replicas)" = 1 ] || fail "data_replicas not inherited"
# listed only for the options a file carries: the root has none
expect_rc 0 $B image getfattr $I /
expect_not_in out bcachefs
expect_rc 0 $B image getfattr $I /d
expect_in out '^bcachefs_effective.compression="zstd"$'
expect_not_in out 'background_compression'
expect_rc 1 $B image getfattr $I -n bcachefs_effective.metadata_target /d
expect_in err 'No data available'
# read-only: refused, nothing written
sum=$(sha a.img)
expect_rc 1 $B image setfattr $I -n bcachefs_effective.compression -v lz4 /d
expect_in err 'setfattr: /d: Operation not supported'
expect_rc 1 $B image setfattr $I -x bcachefs_effective.compression /d
expect_in err 'Operation not supported'
[ "$(sha a.img)" = "$sum" ] || fail "a refused change wrote"

# ---- refusals
expect_rc 16 $B image setattr $I --nonsense=1 /d
expect_in err "image setattr: unknown option '--nonsense'"
expect_rc 16 $B image setattr $I --metadata_target=ssd /d
expect_in err "not a per-file option: '--metadata_target'"
expect_rc 16 $B image setattr $I --data_replicas=9 /d
expect_in err 'data_replicas: 9 out of range'
expect_rc 16 $B image setattr $I --compression=zstd:99 /d
expect_rc 16 $B image setattr $I --compression /d
expect_in err 'needs a value'
expect_rc 16 $B image setattr $I /d
expect_in err 'no option given'
expect_rc 1 $B image setattr $I --foreground_target=nvme /d
expect_in err "'nvme' is neither a label nor a device"
expect_rc 1 $B image setattr $I --compression=lz4 /nope
expect_in err '/nope: No such file or directory'
[ "$(sha a.img)" = "$sum" ] || fail "a refused setattr wrote"
expect_rc 16 $B setattr --nonsense=1 .
expect_in err "^bcachefs setattr: unknown option '--nonsense'"
expect_rc 1 $B setattr --compression=zstd .
expect_in err 'not in a bcachefs mount .*image setattr'
expect_rc 1 $B setattr --compression=zstd nowhere
expect_in err 'nowhere: No such file or directory'
expect_rc 0 $B setattr --help
expect_in out 'background_target'

# ---- removal: children holding the old value lose it, one with its own keeps it
expect_rc 0 $B image setattr $I --compression=- /d
expect_rc 0 $B image setattr $I --data_replicas= /d
expect_rc 0 $B image getfattr $I /d /d/sub /d/sub/new /d/old
expect_not_in out 'compression=|data_replicas'
[ "$(effective /d/own compression)" = lz4 ] || fail "/d/own lost its own value on removal"
expect_rc 0 $B image setattr $I --remove-all /d/sub
expect_rc 0 $B image getfattr $I /d/sub
expect_not_in out bcachefs
# --remove-all with a new value: everything else goes, the one given stays;
# image shell runs the verb too
printf 'setattr --data-checksum=xxhash64 /d/own\nsetattr --remove-all --compression=gzip /d/own\n' |
	$B image shell $I || fail "image shell setattr"
expect_rc 0 $B image getfattr $I /d/own
expect_in out '^bcachefs.compression="gzip"$'
expect_not_in out 'data_checksum'
expect_rc 0 $B fsck -n $I

# ---- through a fusemount
fuse_part "the fusemount part" || exit 0
root_part "the fusemount part" || exit 0
mkdir mnt
mnt=$PWD/mnt
$B fusemount -f $I mnt 2>mount.err &
fpid=$!
trap 'cd /; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
for i in $(seq 1 100); do mountpoint -q mnt && break; sleep 0.1; done
mountpoint -q mnt || fail "fusemount: $(cat mount.err)"
mkdir -p mnt/t/sub mnt/t/own
echo old > mnt/t/old
setfattr -n bcachefs.compression -v lz4 mnt/t/own || fail "setfattr lz4"
ln -s t mnt/tl
# through a symlink to the directory: the directory itself (background zstd
# too: the daemon's rebalance would otherwise recompress with the gzip of
# the filesystem)
run $B setattr --compression=zstd --background_compression=zstd mnt/tl
[ "$rc" = 0 ] || fail "setattr on the mount: $(cat err)"
for p in t t/sub t/old; do
	[ "$(getfattr --only-values -n bcachefs.compression mnt/$p)" = zstd ] || fail "$p not zstd"
	[ "$(getfattr --only-values -n bcachefs_effective.compression mnt/$p)" = zstd ] ||
		fail "$p: effective not zstd"
done
[ "$(getfattr --only-values -n bcachefs_effective.compression mnt/t/own)" = lz4 ] || fail "own value lost"
cp data mnt/t/sub/new
[ "$(getfattr --only-values -n bcachefs_effective.compression mnt/t/sub/new)" = zstd ] ||
	fail "a new file did not inherit zstd"
# the filesystem's, unlisted; listed where the file has a value
[ "$(getfattr --only-values -n bcachefs_effective.background_compression mnt)" = gzip ] ||
	fail "effective background_compression is not the filesystem's"
[ "$(getfattr --only-values -n bcachefs_effective.compression mnt)" = none ] || fail "root's effective"
run getfattr -d -m - mnt/t/own
expect_in out '^bcachefs_effective.compression="lz4"$'
expect_in out '^bcachefs_effective.background_compression="zstd"$'
run getfattr -d -m - mnt
expect_not_in out 'bcachefs_effective'
# read-only
run setfattr -n bcachefs_effective.compression -v lz4 mnt/t
[ "$rc" != 0 ] && grep -q 'Operation not supported' err || fail "an effective xattr was set: $(cat err)"
run setfattr -x bcachefs_effective.compression mnt/t
[ "$rc" != 0 ] && grep -q 'Operation not supported' err || fail "an effective xattr was removed"
# a file, and errors through the mount
expect_rc 0 $B setattr --background_compression=lz4 mnt/t/old
[ "$(getfattr --only-values -n bcachefs.background_compression mnt/t/old)" = lz4 ] || fail "file"
expect_rc 1 $B setattr --foreground_target=nvme mnt/t
expect_in err 'mnt/t: bcachefs.foreground_target=nvme: Invalid argument'
expect_rc 1 $B setattr --compression=lz4 mnt/t/nope
expect_rc 16 $B setattr --data_replicas=0 mnt/t
# the offline form refuses mounted devices
expect_rc 1 $B image setattr $I --compression=lz4 /t
expect_in err 'mounted'
fusermount3 -u mnt && wait $fpid || fail "unmount"
trap - EXIT
# the data written through the mount: zstd (also after the daemon's rebalance)
run list_ext $(inum /t/sub/new)
grep -q 'comp 3' out || fail "no zstd extents for /t/sub/new"
expect_not_in out 'comp [^3]'
expect_rc 0 $B fsck -n $I
