#!/usr/bin/env python3
# sb_replicas.py IMG OP...: edit the superblock of a (crc32c-checksummed)
# image in every copy its layout lists, for fsck cases of the replicas table.
#   drop TYPE DEVS   remove the replicas entry (TYPE: journal, btree, user;
#                    DEVS: member indices joined by ',')
#   add TYPE DEVS    add one
#   add-slot         one more member slot, unused (zero UUID), as a removed
#                    device leaves
# Each copy keeps its own offset and seq; fields are rewritten whole.
import struct, sys

TYPES = {'free': 0, 'sb': 1, 'journal': 2, 'btree': 3, 'user': 4, 'cached': 5}
FIELD_MEMBERS, FIELD_REPLICAS = 1, 4

def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xffffffff

def parse_entries(body):
    out, p = [], 0
    while p + 4 <= len(body):
        t, n = body[p], body[p + 1]
        if n == 0:
            break
        out.append((t, tuple(body[p + 4:p + 4 + n])))
        p += 4 + n
    return out

def entries_body(entries):
    b = b''.join(bytes([t, len(d), 1, 0]) + bytes(d) for t, d in entries)
    return b + b'\0' * (-(8 + len(b)) % 8)

def edit(sb, ops):
    u64s = struct.unpack_from('<I', sb, 160)[0]
    fields, p, end = [], 512, 512 + u64s * 8
    while p < end:
        fu, ft = struct.unpack_from('<II', sb, p)
        fields.append([ft, bytearray(sb[p + 8:p + fu * 8])])
        p += fu * 8
    rep = next((f for f in fields if f[0] == FIELD_REPLICAS), None)
    entries = parse_entries(rep[1]) if rep else []
    hdr = bytearray(sb[:512])
    i = 0
    while i < len(ops):
        op = ops[i]
        if op == 'add-slot':
            hdr[30] += 1
            mem = next(f for f in fields if f[0] == FIELD_MEMBERS)
            mem[1] += b'\0' * 64
            i += 1
            continue
        e = (TYPES[ops[i + 1]], tuple(sorted(int(x) for x in ops[i + 2].split(','))))
        if op == 'drop':
            if e not in entries:
                sys.exit('sb_replicas: no entry %s' % (e,))
            entries.remove(e)
        elif op == 'add':
            entries.append(e)
        else:
            sys.exit('sb_replicas: unknown op ' + op)
        i += 3
    if rep:
        rep[1] = bytearray(entries_body(entries))
    body = b''.join(struct.pack('<II', (8 + len(f)) // 8, t) + bytes(f) for t, f in fields)
    struct.pack_into('<I', hdr, 160, len(body) // 8)
    out = bytes(hdr) + body
    assert out[28] == 1, 'superblock checksum is not crc32c'
    return struct.pack('<QQ', crc32c(out[16:]), 0) + out[16:]

def main():
    img, ops = sys.argv[1], sys.argv[2:]
    with open(img, 'r+b') as f:
        f.seek(7 * 512)
        lay = f.read(64)
        nr = lay[26]
        for off in struct.unpack_from('<4Q', lay, 32)[:nr]:
            f.seek(off * 512)
            sb = f.read(512)
            u64s = struct.unpack_from('<I', sb, 160)[0]
            f.seek(off * 512)
            sb = f.read(512 + u64s * 8)
            new = edit(sb, ops)
            f.seek(off * 512)
            f.write(new + b'\0' * max(0, len(sb) - len(new)))

main()
