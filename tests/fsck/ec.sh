# Helpers for the erasure-coding fsck cases (sourced after lib.sh).

# mkfs_ec: four devices a..d.img, --erasure-code --replicas=2, files /a and
# /b (from seq) gathered by data rebalance into one RS(3,1) stripe; devs
# written.  Fixed UUID and time: the same layout every run.
mkfs_ec() {
	SOURCE_DATE_EPOCH=1700000000 $B format -q -U 6e2a3c1d-5b4f-4e8a-9c7d-2f1e0a9b8c7d \
		--erasure-code --replicas=2 --fs-size=32M a.img --fs-size=32M b.img \
		--fs-size=32M c.img --fs-size=32M d.img || exit 1
	echo a.img b.img c.img d.img > devs
	F=a.img:b.img:c.img:d.img
	seq 1 30000 > f_a
	seq 7 7 300000 > f_b
	$B image put $F f_a /a || exit 1
	$B image put $F f_b /b || exit 1
	$B data rebalance --wait $F >/dev/null || exit 1
}

# stripe_block N: "MEMBER SECTOR" of block N of stripe 1; stripe_sectors: its block size
stripe_block() {
	$B list -b stripes $F | head -1 | tr ' ' '\n' | grep ':.*[0-9]$' | sed -n "$(($1 + 2))p" | tr : ' '
}
stripe_sectors() { $B list -b stripes $F | head -1 | sed -n 's/.* block \([0-9]*\) .*/\1/p'; }

# xor_range IMG SECTOR START LEN: flip every bit of LEN bytes at byte START of the block at SECTOR
xor_range() {
	python3 -c 'import sys
f = open(sys.argv[1], "r+b"); o = int(sys.argv[2]) * 512 + int(sys.argv[3]); n = int(sys.argv[4])
f.seek(o); b = f.read(n); f.seek(o); f.write(bytes(x ^ 0xff for x in b))' "$@"
}

# crc32c_of IMG SECTOR SECTORS: the crc32c (Castagnoli) of those sectors, in decimal
crc32c_of() {
	python3 -c 'import sys
t = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82f63b78 if c & 1 else c >> 1
    t.append(c)
f = open(sys.argv[1], "rb"); f.seek(int(sys.argv[2]) * 512)
c = 0xffffffff
for x in f.read(int(sys.argv[3]) * 512):
    c = t[(c ^ x) & 0xff] ^ (c >> 8)
print(c ^ 0xffffffff)' "$@"
}
