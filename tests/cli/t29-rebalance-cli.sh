# rebalance from the command line (issue 19): on ssd/hdd image files with
# --foreground-target ssd --background-target hdd, `fs usage --json` shows
# the pending target work, `data rebalance` moves it (the data ends on hdd,
# nothing pending, files equal); set-fs-option --background-compression
# schedules a recompression that data rebalance does; refusals (format-only
# option, unknown label, replicas, mounted) write nothing; a full target
# leaves work (exit 2) that finishes once space is freed.  With FUSE: the
# daemon's background thread moves what is written through the mount, a
# parked daemon (target full) uses ~no CPU, -o norebalance leaves the work.
# Data: python's random.Random with fixed seeds (29, 30, 300, 31), printed below.
need python3 setfattr
echo "seeds: 29 (rand.bin), 30 and 300 (full-a.bin, full-b.bin), 31 (mnt.bin)"

# gen FILE SEED BYTES...: deterministic incompressible bytes (one python run)
gen() {
	python3 -c 'import random, sys
a = sys.argv[1:]
for i in range(0, len(a), 3):
	open(a[i], "wb").write(random.Random(int(a[i + 1])).randbytes(int(a[i + 2])))' "$@" ||
		fail "gen $*"
}
# jget KEY: the first value of "KEY" in the one-line JSON in ./out (no
# python per lookup: the machine is shared)
jget() {
	v=$(grep -o "\"$1\": [^,}]*" out | head -1 | sed 's/^[^:]*: //')
	[ -n "$v" ] || fail "jget $1: $(head -c 1000 out)"
	echo "$v"
}
# dev_user IDX: live user bytes on device IDX, from fs usage --json in ./out
dev_user() {
	v=$(grep -o '"user": {"buckets": [0-9]*, "bytes": [0-9]*' out | sed -n "$(($1 + 1))s/.*bytes\": //p")
	[ -n "$v" ] || fail "dev_user $1: $(head -c 1000 out)"
	echo "$v"
}
# json_ok: ./out is one valid JSON object
json_ok() { python3 -c 'import json; json.load(open("out"))' || fail "not JSON: $(head -c 1000 out)"; }

gen rand.bin 29 $((3 << 20)) full-a.bin 30 $((10 << 20)) full-b.bin 300 $((10 << 20)) \
	mnt.bin 31 $((4 << 20))
seq 1 300000 > text.txt		# compressible, 1.9 MB
head -c 10000 text.txt > small.txt

expect_rc 0 $B format -q --fs-size=64M --label=ssd ssd.img --fs-size=256M --label=hdd hdd.img \
	--foreground-target=ssd --background-target=hdd
D=ssd.img:hdd.img
expect_rc 0 $B image put $D rand.bin /rand.bin
expect_rc 0 $B image put $D text.txt /text.txt
expect_rc 0 $B image mkdir $D /dir
expect_rc 0 $B image put $D small.txt /dir/small.txt

# ---- fs usage: the writes went to ssd, and the move to hdd is pending
expect_rc 0 $B fs usage --json $D
[ "$(jget target)" -ge $((4 << 20)) ] ||
	fail "pending target work too small: $(cat out)"
[ "$(dev_user 0)" -ge $((4 << 20)) ] || fail "the data is not on ssd: $(dev_user 0)"
[ "$(dev_user 1)" = 0 ] || fail "data on hdd before rebalance: $(dev_user 1)"
json_ok
for k in cached_data fragmented fragmented_percent; do
	jget $k >/dev/null
done
expect_rc 0 $B fs usage $D
expect_in out '^Rebalance pending: [0-9]+ off its target'
expect_in out 'cached data: 0; fragmented: [0-9]+ \([0-9.]+% of user-data buckets\)'

# ---- data rebalance moves it
expect_rc 0 $B data rebalance $D
expect_in out '^Moved: +[1-9][0-9]* extents'
expect_in out '^No space: +0 extents'
expect_not_in err .
expect_rc 0 $B fs usage --json $D
[ "$(jget target)" = 0 ] || fail "still pending: $(cat out)"
[ "$(jget scan)" = false ] || fail "scan still pending"
[ "$(dev_user 0)" = 0 ] || fail "data left on ssd: $(dev_user 0)"
[ "$(dev_user 1)" -ge $((4 << 20)) ] || fail "data not on hdd: $(dev_user 1)"
check_files() {
	for f in rand.bin text.txt; do
		expect_rc 0 $B image cat $D /$f
		cmp -s out $f || fail "$1: /$f differs"
	done
	expect_rc 0 $B image cat $D /dir/small.txt
	cmp -s out small.txt || fail "$1: /dir/small.txt differs"
}
check_files "after data rebalance"
# nothing left: a second run moves nothing; --wait is accepted
expect_rc 0 $B data rebalance --wait --json $D
json_ok
[ "$(jget extents_moved)" = 0 ] && [ "$(jget done)" = true ] || fail "second run: $(cat out)"
expect_rc 0 $B fsck -n -f $D

# ---- set-fs-option: background_compression schedules a recompression
expect_rc 0 $B set-fs-option --background-compression=zstd $D
expect_in out '^background_compression: none -> zstd \(existing data: rebalance scheduled\)'
expect_rc 0 $B show-super hdd.img
expect_in out 'background_compression: +zstd'
expect_rc 0 $B show-super ssd.img
expect_in out 'background_compression: +zstd'
expect_rc 0 $B fs usage --json $D
[ "$(jget scan)" = true ] ||
	[ "$(jget compression)" -gt 0 ] ||
	fail "no recompression pending after set-fs-option: $(cat out)"
before=$(jget data_disk_bytes)
expect_rc 0 $B data rebalance --json $D
[ "$(jget extents_moved)" -gt 0 ] || fail "nothing recompressed: $(cat out)"
expect_rc 0 $B fs usage --json $D
after=$(jget data_disk_bytes)
[ "$after" -lt $((before - 2048 * 512)) ] || fail "recompression saved too little: $before -> $after bytes"
[ "$(jget compression)" = 0 ] || fail "compression still pending"
echo "background_compression=zstd: $before -> $after bytes on disk"
check_files "after recompression"
# an option that does not concern data already written: no scan
expect_rc 0 $B set-fs-option --data-checksum crc64 --inodes_32bit=yes $D
expect_in out '^data_checksum: crc32c -> crc64 \(applies to what is written from now on\)'
expect_in out '^inodes_32bit: no -> yes'
expect_rc 0 $B fs usage --json $D
[ "$(jget scan)" = false ] || fail "a scan scheduled for data_checksum"

# ---- refusals: nothing written
s1=$(sha ssd.img) s2=$(sha hdd.img)
expect_rc 1 $B set-fs-option --block-size=8k $D
expect_in err '^bcachefs set-fs-option: block_size cannot be changed: fixed at format'
expect_rc 1 $B set-fs-option --compression=lz4 --encoded-extent-max=64k $D
expect_in err 'encoded_extent_max cannot be changed'
expect_rc 1 $B set-fs-option --str-hash=siphash $D
expect_in err 'str_hash cannot be changed'
expect_rc 1 $B set-fs-option --data-replicas-required=1 $D
expect_in err 'data_replicas_required cannot be changed'
expect_rc 1 $B set-fs-option --label=x $D
expect_in err 'label cannot be changed: a per-device option'
expect_rc 1 $B set-fs-option --compression=lz4 --background-target=nvme $D
expect_in err "^bcachefs set-fs-option: ssd.img:hdd.img: background_target: no label or device 'nvme' \(nothing written\)"
expect_rc 1 $B set-fs-option --data-replicas=3 $D
expect_in err 'data_replicas=3 needs 3 read-write devices'
expect_rc 16 $B set-fs-option --no-such-option=1 $D
expect_in err "unknown option 'no-such-option'"
expect_rc 16 $B set-fs-option --compression=bogus $D
expect_in err "compression: unknown value 'bogus'"
expect_rc 16 $B set-fs-option $D
expect_rc 16 $B set-fs-option --compression=lz4
expect_rc 16 $B data rebalance
expect_rc 16 $B data no-such-job $D
expect_rc 0 $B data --help
expect_in out 'rebalance'
expect_rc 0 $B data rebalance --help
expect_in out 'Exit: 0 nothing left'
[ "$(sha ssd.img)" = "$s1" ] && [ "$(sha hdd.img)" = "$s2" ] || fail "a refused command wrote to the images"
expect_rc 1 $B data rebalance nosuch.img
expect_in err '^bcachefs data rebalance: .*nosuch.img'

# ---- target full: the work waits (exit 2), and finishes once space is freed
expect_rc 0 $B format -q --fs-size=64M --label=ssd fs.img --fs-size=20M --label=hdd fh.img \
	--foreground-target=ssd --background-target=hdd
F=fs.img:fh.img
expect_rc 0 $B image put $F full-a.bin /a.bin
expect_rc 0 $B image put $F full-b.bin /b.bin
expect_rc 2 $B data rebalance $F
expect_in out '^No space: +[1-9][0-9]* extents'
expect_in out 'waiting for space'
expect_rc 0 $B fs usage --json $F
[ "$(jget waiting_for_space)" -gt 0 ] ||
	fail "nothing waits for space: $(cat out)"
expect_rc 0 $B image rm $F /a.bin
expect_rc 0 $B data rebalance $F
expect_rc 0 $B fs usage --json $F
[ "$(jget target)" = 0 ] || fail "full target: still pending after space was freed"
[ "$(dev_user 0)" = 0 ] || fail "full target: data left on ssd after space was freed"
expect_rc 0 $B image cat $F /b.bin
cmp -s out full-b.bin || fail "full target: /b.bin differs"
expect_rc 0 $B fsck -n -f $F

# ---- fusemount: the background thread
fuse_part "the fusemount steps (background thread)" || exit 0
root_part "the fusemount steps (background thread)" || exit 0
mkdir mnt
mnt=$PWD/mnt
pid=
trap 'cd /; [ -n "$pid" ] && kill $pid 2>/dev/null; fusermount3 -uz "$mnt" 2>/dev/null' EXIT
# mount DEVS [OPTS]: fusemount -f in the background, $pid its process
mount_fs() {
	$B fusemount -f ${2:+-o $2} "$1" mnt 2>fuse.err & pid=$!
	for i in $(seq 100); do mountpoint -q mnt && return; sleep 0.1; done
	fail "fusemount $1: $(cat fuse.err)"
}
umount_fs() {
	fusermount3 -u mnt || fail "unmount"
	wait $pid || fail "fusemount exited $?: $(cat fuse.err)"
	pid=
}
# pending KEY: the daemon's rebalance_pending[KEY] (fs usage MOUNTPOINT)
pending() {
	expect_rc 0 $B fs usage --json mnt
	jget "$1"
}
# cpu_ticks: utime + stime of the daemon
cpu_ticks() { awk '{ print $14 + $15 }' /proc/$pid/stat; }

expect_rc 0 $B format -q --fs-size=64M --label=ssd m1.img --fs-size=128M --label=hdd m2.img \
	--foreground-target=ssd --background-target=hdd
M=m1.img:m2.img
mount_fs $M
cp mnt.bin mnt/a.bin && cp text.txt mnt/t.txt || fail "write through the mount"
# the devices of a mount reach its daemon (control channel: t31); a refusal there changes nothing
expect_rc 1 $B set-fs-option --background-target=nvme $M
expect_in err "^bcachefs set-fs-option: .*m1.img:.*m2.img: background_target: no label or device 'nvme' \(nothing written\)"
# the daemon moves it (it was woken by the writes; a few seconds at most)
for i in $(seq 100); do [ "$(pending target)" = 0 ] && break; sleep 0.2; done
[ "$(pending target)" = 0 ] || fail "the daemon did not rebalance: $(cat out)"
cmp -s mnt/a.bin mnt.bin && cmp -s mnt/t.txt text.txt || fail "files differ through the mount after rebalance"
# a file's own option (xattr bcachefs.background_compression): the daemon recompresses it
expect_rc 0 $B fs usage --json mnt
before=$(jget data_disk_bytes)
setfattr -n bcachefs.background_compression -v zstd mnt/t.txt || fail "setfattr"
for i in $(seq 100); do
	expect_rc 0 $B fs usage --json mnt
	[ "$(jget data_disk_bytes)" -lt $((before - 1024 * 512)) ] && break
	sleep 0.2
done
[ "$(jget data_disk_bytes)" -lt $((before - 1024 * 512)) ] ||
	fail "the daemon did not recompress t.txt: $before -> $(jget data_disk_bytes) bytes"
echo "per-file background_compression through the mount: $before -> $(jget data_disk_bytes) bytes"
cmp -s mnt/t.txt text.txt || fail "t.txt differs after recompression"
umount_fs
expect_not_in fuse.err .
expect_rc 0 $B fs usage --json $M
[ "$(jget target)" = 0 ] || fail "pending after unmount"
[ "$(dev_user 0)" = 0 ] || fail "data left on ssd after the daemon's rebalance: $(dev_user 0)"
[ "$(dev_user 1)" -ge $((4 << 20)) ] || fail "data not on hdd: $(dev_user 1)"
expect_rc 0 $B image cat $M /a.bin
cmp -s out mnt.bin || fail "/a.bin differs after unmount"
expect_rc 0 $B fsck -n -f $M

# -o norebalance: the work stays pending
mount_fs $M norebalance
cp mnt.bin mnt/b.bin || fail "write through the mount (norebalance)"
sleep 2
[ "$(pending target)" -ge $((4 << 20)) ] || fail "-o norebalance: the work was done: $(cat out)"
umount_fs
# read-only: no thread (nothing written: the images are unchanged)
s1=$(sha m1.img) s2=$(sha m2.img)
mount_fs $M ro
sleep 1.5
umount_fs
[ "$(sha m1.img)" = "$s1" ] && [ "$(sha m2.img)" = "$s2" ] || fail "a read-only mount wrote"

# parked: the target is full; the daemon waits without CPU, and goes on once space is freed
expect_rc 0 $B format -q --fs-size=64M --label=ssd p1.img --fs-size=20M --label=hdd p2.img \
	--foreground-target=ssd --background-target=hdd
P=p1.img:p2.img
mount_fs $P
cp full-a.bin mnt/a.bin && cp full-b.bin mnt/b.bin || fail "write through the mount (full target)"
for i in $(seq 100); do [ "$(pending waiting_for_space)" -gt 0 ] && break; sleep 0.2; done
[ "$(pending waiting_for_space)" -gt 0 ] || fail "nothing waits for space: $(cat out)"
sleep 1
t0=$(cpu_ticks)
sleep 4
t1=$(cpu_ticks)
echo "parked daemon: $((t1 - t0)) ticks of CPU in 4 s (CLK_TCK $(getconf CLK_TCK))"
[ $((t1 - t0)) -le 8 ] || fail "a parked daemon used $((t1 - t0)) ticks in 4 s"
rm mnt/a.bin
for i in $(seq 150); do [ "$(pending target)" = 0 ] && break; sleep 0.2; done
[ "$(pending target)" = 0 ] || fail "parked work did not resume after space was freed: $(cat out)"
cmp -s mnt/b.bin full-b.bin || fail "b.bin differs after the parked rebalance"
umount_fs
expect_not_in fuse.err .
expect_rc 0 $B fs usage --json $P
[ "$(dev_user 0)" = 0 ] || fail "parked: data left on ssd after unmount"
expect_rc 0 $B fsck -n -f $P

# copygc in the background: random 4k overwrites (seed 5) leave dead space;
# once idle, the daemon's copygc brings the free buckets back over its
# low-water mark (a 16th of the buckets), which -o nocopygc does not
cat > ow.py <<'PY'
import os, sys, random
p, size, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
r = random.Random(seed); buf = r.randbytes(4096)
fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(0, size, 1 << 20): os.pwrite(fd, r.randbytes(1 << 20), i)
for i in range(n): os.pwrite(fd, buf, r.randrange(0, size // 4096) * 4096)
os.close(fd)
PY
python3 ow.py ow.model $((40 << 20)) 20000 5 || fail "ow.py model"
for opt in nocopygc copygc; do
	rm -f g.img
	expect_rc 0 $B format -q --fs-size=64M g.img
	# the overwrites without copygc in both runs: the same layout for it to
	# start from (copygc racing the writes moves data they overwrite next)
	mount_fs g.img nocopygc
	python3 ow.py mnt/f $((40 << 20)) 20000 5 || fail "overwrites through the mount ($opt)"
	# what mount -o remount,copygc runs (mount.fuse finds bcachefs on PATH)
	[ $opt = nocopygc ] || expect_rc 0 $B fusemount -o remount,copygc g.img mnt
	# background copygc runs in steps: wait until it has stopped (the free
	# count unchanged for 5 s, up to 90 s on a loaded machine)
	last=-1 same=0
	for t in $(seq 90); do
		sleep 1
		expect_rc 0 $B fs usage --json mnt
		free=$(jget free_buckets)
		[ $opt = copygc ] && [ "$free" -lt 15 ] || break
		if [ "$free" = "$last" ]; then same=$((same + 1)); else same=0 last=$free; fi
		[ $same -lt 5 ] || break
	done
	frag=$(jget fragmented)
	echo "after the overwrites, $opt: $free free buckets, $frag bytes fragmented"
	eval frag_$opt=$frag
	cmp -s mnt/f ow.model || fail "overwritten file differs ($opt)"
	umount_fs
	expect_not_in fuse.err .
	expect_rc 0 $B fsck -n -f g.img
	eval free_$opt=$free
done
# 64M in 256k buckets: 255, a 16th is 15.  Background copygc also stops when
# the best victim is more than half live (bch_copygc_needed): with this seed's
# layout that comes first, at 14 free buckets (9 without copygc; the same on
# a loaded machine since copygc starts after the writes).  Either the mark is
# reached, or copygc freed at least 5 buckets more and left less fragmented.
[ "$free_copygc" -ge 15 ] ||
	{ [ "$free_copygc" -ge $((free_nocopygc + 5)) ] && [ "$frag_copygc" -lt "$frag_nocopygc" ]; } ||
	fail "background copygc left $free_copygc free buckets, $frag_copygc bytes fragmented (without it: $free_nocopygc, $frag_nocopygc)"
[ "$free_nocopygc" -lt 15 ] || fail "the workload leaves $free_nocopygc free buckets without copygc: the check above proves nothing"
trap - EXIT
