# `fs timestats` (issue 32): a fusemount's per-request statistics over the
# control channel: after an untar every request type it made has calls and
# times (text and --json: valid, snake_case, times in ns, p50 <= p99 <=
# max bucket); --reset zeroes them; offline, or given a path outside any
# mount, it says there is nothing to show.  A reset is a change: a client
# that sends `device stats` or `fs timestats` with --reset under the
# read-only name (a hand-made request, as python speaks the protocol
# below) is refused, and the counters stay.
need_fuse
need python3 getfattr
python3 -c "import jsonschema" 2>/dev/null || fail "no python3-jsonschema: make check installs it"
mkdir m src
for i in $(seq 1 40); do echo "file $i" > src/f$i; done
mkdir src/d && echo deep > src/d/x
tar -cf src.tar src || fail "tar"
expect_rc 0 $B format -q --fs-size=128M img
trap 'cd /; fusermount3 -uz "$OLDPWD/m" 2>/dev/null' EXIT
expect_rc 0 $B fusemount "$PWD/img" m
tar -C m -xf src.tar || fail "untar"
expect_rc 0 $B fs timestats m/src
expect_in out '^type +calls +total ms +mean us +p50 us +p99 us +max us +wait%$'
expect_in out '^create +41 '
expect_in out '^mkdir +2 '
expect_in out '^write +'
expect_rc 0 $B fs timestats --json m
python3 - "$ROOT/docs/json/fs-timestats.schema.json" <<'PY' || fail "fs timestats --json: $(cat out)"
import json, sys, jsonschema
j = json.load(open("out"))
jsonschema.validate(j, json.load(open(sys.argv[1])))
assert j["version"] == 1 and j["since"].endswith("Z")
t = {r["type"]: r for r in j["requests"]}
assert t["create"]["calls"] == 41, t["create"]
for r in j["requests"]:
    assert set(r) == {"type", "calls", "wait_ns", "hold_ns", "max_ns", "p50_ns", "p99_ns"}, r
    assert r["calls"] > 0 and r["p50_ns"] <= r["p99_ns"], r
    assert r["wait_ns"] + r["hold_ns"] <= r["calls"] * max(r["max_ns"], 1), r
PY

# a reset sent under the read-only name is refused, by either body
sock=$(getfattr --absolute-names --only-values -n bcachefs.ctl m) || fail "no control socket"
ctl() {
	python3 - "$sock" "$@" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
args = [a.encode() + b"\0" for a in sys.argv[2:]]
p = struct.pack("<III", 1, 0, len(args)) + b"".join(args)
s.sendall(struct.pack("<II", 1, len(p)) + p)
code, buf = None, b""
while True:
    h = s.recv(8, socket.MSG_WAITALL)
    if len(h) < 8: break
    t, n = struct.unpack("<II", h)
    d = s.recv(n, socket.MSG_WAITALL) if n else b""
    if t == 5: code = struct.unpack("<I", d)[0] & 0xff; break
    buf += d
sys.stdout.write(buf.decode(errors="replace"))
sys.exit(code if code is not None else 99)
PY
}
ctl "fs timestats" --reset > raw.out 2>&1; rc=$?
[ $rc = 16 ] || fail "fs timestats --reset under the read-only name: exit $rc: $(cat raw.out)"
grep -q "read-only request" raw.out || fail "refusal: $(cat raw.out)"
ctl "device stats" --reset > raw.out 2>&1; rc=$?
[ $rc = 16 ] || fail "device stats --reset under the read-only name: exit $rc: $(cat raw.out)"
expect_rc 0 $B fs timestats m
expect_in out '^create +41 '

# --reset: printed, then zero
expect_rc 0 $B fs timestats --reset m
expect_in out '^create +41 '
expect_rc 0 $B fs timestats --json m
python3 -c 'import json; j = json.load(open("out")); assert all(r["type"] == "command" for r in j["requests"]), j' ||
	fail "after --reset: $(cat out)"
fusermount3 -u m || fail "fusermount3 -u"

# nothing to show offline
expect_rc 1 $B fs timestats img
expect_in err 'not in a mounted bcachefs filesystem'
expect_rc 16 $B fs timestats
expect_rc 0 $B fs timestats --help
expect_in out '^Usage: bcachefs fs timestats'
