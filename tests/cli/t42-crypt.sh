# Encryption commands: format --encrypted (passphrase from a file, from stdin,
# none), bad passphrase files, a wrong or missing key for every command that
# opens a filesystem (exit code, message, image byte-identical), unlock -c /
# -k user / -k session and later commands without a prompt, a key in the
# keyring that cannot be used, set-passphrase and remove-passphrase, and
# show-super printing no key material.  Every key added is unlinked at the end.
plain_only "it makes its own encrypted filesystems and passphrase files"
command -v keyctl >/dev/null || skip "no keyctl (package keyutils)"
# a container may forbid the keyring system calls (Docker's default seccomp profile)
probe=$(keyctl add user "bcachefs:t42-probe" x @u 2>/dev/null) || skip "the kernel keyring is not reachable here"
keyctl unlink "$probe" @u >/dev/null 2>&1
unset BCACHEFS_PASSPHRASE_FILE
keys=""
uuid=""
mnt=""
cleanup() {
	cd /
	[ -n "$mnt" ] && fusermount3 -u "$mnt" 2>/dev/null
	for k in $keys; do keyctl unlink "$k" >/dev/null 2>&1; done
	for r in @u @us; do
		for k in $(keyctl rlist $r 2>/dev/null); do
			d=$(keyctl rdescribe "$k" 2>/dev/null) || continue
			case $d in *";bcachefs:$uuid") keyctl unlink "$k" $r >/dev/null 2>&1 ;; esac
		done
	done
}
trap cleanup EXIT
printf 'correct horse\n' > pass
printf 'wrong horse\n' > wrong

# ---- format: from a file, from stdin; --source encrypted
expect_rc 0 $B format -q --encrypted --passphrase-file pass --fs-size=64M img
expect_rc 0 $B show-super img
uuid=$(field "External UUID")
expect_in out '^Features: +encryption'
mkdir -p src/d && echo distinctive-content > src/d/f
run sh -c "printf 'from stdin\n' | $B format -q --encrypted --source src --fs-size=64M img2"
[ "$rc" = 0 ] || fail "format from stdin: $(cat err)"
printf 'from stdin\n' > pass2
BCACHEFS_PASSPHRASE_FILE=pass2 expect_rc 0 $B image cat img2 /d/f
expect_in out '^distinctive-content$'
! grep -q distinctive-content img2 || fail "plaintext of a file in the image"
# stdin ended: nothing to format with
expect_rc 1 $B format -q --encrypted --fs-size=64M img3 </dev/null
expect_in err 'no passphrase given'
! $B show-super img3 >/dev/null 2>&1 || fail "img3 formatted without a passphrase"
expect_rc 16 $B format -q --passphrase-file pass --fs-size=64M img3
expect_in err 'needs --encrypted'
expect_rc 16 $B format -q --encrypted --no-passphrase --passphrase-file pass --fs-size=64M img3

# ---- bad passphrase files: empty, missing, a directory, too long, two lines
: > empty
head -c 4097 /dev/zero | tr '\0' x > long
{ head -c 4096 /dev/zero | tr '\0' y; echo; } > max
printf 'one\ntwo\n' > twolines
mkdir adir
for f in empty nonexistent adir long twolines; do
	expect_rc 1 $B format -q --encrypted --passphrase-file $f --fs-size=64M bad-$f.img
	case $f in
	empty)       expect_in err "passphrase file empty: empty passphrase" ;;
	nonexistent) expect_in err "cannot read passphrase file nonexistent: No such file" ;;
	adir)        expect_in err "cannot read passphrase file adir: Is a directory" ;;
	long)        expect_in err "longer than 4096 bytes" ;;
	twolines)    expect_in err "more than one line" ;;
	esac
	! $B show-super bad-$f.img >/dev/null 2>&1 || fail "bad-$f.img was formatted"
	BCACHEFS_PASSPHRASE_FILE=$f expect_rc 1 $B image ls img /
	expect_not_in err 'wrong passphrase'
done
expect_rc 0 $B format -q --encrypted --passphrase-file max --fs-size=64M max.img

# ---- a wrong passphrase: refused, message, image byte-identical
h=$(sha img)
BCACHEFS_PASSPHRASE_FILE=wrong expect_rc 8 $B fsck -y img
expect_in err "bcachefs fsck: .*$uuid: wrong passphrase"
expect_not_in out 'fixing|damage|mismatch'
run sh -c "$B fsck -n img < wrong"
[ "$rc" = 8 ] || fail "fsck with a wrong passphrase on stdin exited $rc"
expect_in err 'wrong passphrase'
BCACHEFS_PASSPHRASE_FILE=wrong expect_rc 1 $B image ls img /
expect_in err "bcachefs image: .*wrong passphrase"
expect_rc 1 $B unlock --passphrase-file wrong img
expect_in err "bcachefs unlock: img: filesystem $uuid: wrong passphrase"
[ "$(sha img)" = "$h" ] || fail "image changed by a wrong passphrase"
# fsck -y with a wrong key repairs nothing, not even a damaged superblock copy
cp img sbdamaged.img
printf 'garbage' | dd of=sbdamaged.img bs=1 seek=$((136 * 512 + 200)) conv=notrunc 2>/dev/null
h2=$(sha sbdamaged.img)
BCACHEFS_PASSPHRASE_FILE=wrong expect_rc 8 $B fsck -y sbdamaged.img
expect_not_in out 'fixing|sb_copy_bad'
BCACHEFS_PASSPHRASE_FILE=wrong expect_rc 8 $B fsck -y --json sbdamaged.img
expect_in out '"exit_code": 8'
expect_in out '"error": "'
[ "$(sha sbdamaged.img)" = "$h2" ] || fail "fsck -y with a wrong key changed the image"

# ---- no key at all: a clear message, exit 8 for fsck, 1 for the rest
expect_rc 8 $B fsck -y img </dev/null
expect_in err "no key was given: run .bcachefs unlock"
expect_in err 'BCACHEFS_PASSPHRASE_FILE'
for c in "image ls img /" "list img" "fs usage img" "data scrub img" "device set-label img 0 x"; do
	expect_rc 1 $B $c </dev/null
	expect_in err "is encrypted and no key was given"
done
[ "$(sha img)" = "$h" ] || fail "image changed by opens without a key"
# ... and each of them with the passphrase from BCACHEFS_PASSPHRASE_FILE
for c in "image ls img /" "list img" "fs usage img" "data scrub img" "device set-label img 0 x" "fsck -n img"; do
	BCACHEFS_PASSPHRASE_FILE=pass expect_rc 0 $B $c </dev/null
done

# ---- unlock -c checks and leaves the keyring as it was
before=$(keyctl show @s; keyctl show @u; keyctl show @us)
expect_rc 0 $B unlock -c --passphrase-file pass img
expect_in out 'passphrase correct'
[ "$(keyctl show @s; keyctl show @u; keyctl show @us)" = "$before" ] || fail "unlock -c changed the keyring"
expect_rc 16 $B unlock -k nowhere img
expect_rc 1 $B unlock img </dev/null
expect_in err 'no passphrase on stdin'

# ---- unlock -k user: later commands need no passphrase (stdin is /dev/null)
run sh -c "$B unlock -k user img < pass"
[ "$rc" = 0 ] || fail "unlock -k user: $(cat err)"
expect_in out "added bcachefs:$uuid to the user keyring \\(key [0-9]+\\)"
keys="$keys $(sed -n 's/.*(key \([0-9]*\)).*/\1/p' out)"
[ "$(keyctl search @u user "bcachefs:$uuid")" -gt 0 ] || fail "key not in @u"
# the user's other processes may read it whatever their session: user view, read, search
keyctl rdescribe $keys | grep -q ";3f0b0000;bcachefs:$uuid\$" || fail "key permissions: $(keyctl rdescribe $keys)"
expect_rc 0 $B fsck -n img </dev/null
expect_rc 0 $B image ls img / </dev/null
expect_in out "lost.found"
if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
	mkdir mnt && mnt=$PWD/mnt
	if $B fusemount img mnt </dev/null 2>fuse.err; then
		[ -d mnt/lost+found ] || fail "mounted without lost+found"
		echo via-fuse > mnt/new || fail "write through fusemount"
		# mounted: set-passphrase refuses, naming the mountpoint
		expect_rc 1 $B set-passphrase --passphrase-file wrong img
		expect_in err "$mnt: mounted"
		fusermount3 -u mnt || fail "unmount"
		mnt=""
		for i in $(seq 50); do $B image cat img /new >/dev/null 2>&1 </dev/null && break; sleep 0.1; done
		expect_rc 0 $B image cat img /new </dev/null
		expect_in out via-fuse
	else
		grep -q 'no key' fuse.err && fail "fusemount asked for a key: $(cat fuse.err)"
		echo "fusemount not possible here: $(cat fuse.err)"
		mnt=""
	fi
fi

# ---- a key in the keyring that is not ours / not readable: clear messages
for k in $keys; do keyctl unlink "$k" >/dev/null 2>&1; done
keys=""
bogus=$(keyctl add user "bcachefs:$uuid" short @u)
keys="$keys $bogus"
expect_rc 1 $B image ls img / </dev/null
expect_in err "cannot read it"
keyctl unlink "$bogus" @u >/dev/null

# ---- unlock -k session: in a session keyring of its own (keyctl session),
# and outside one (then "session" is the user-session keyring)
run keyctl session - sh -c "$B unlock -k session img < pass && $B image ls img / </dev/null"
[ "$rc" = 0 ] || fail "unlock -k session in a new session: $(cat err)"
expect_in out "to the session keyring \\(key [0-9]+\\)"
expect_in out "lost.found"
run sh -c "$B unlock -k session img < pass"
[ "$rc" = 0 ] || fail "unlock -k session: $(cat err)"
keys="$keys $(sed -n 's/.*(key \([0-9]*\)).*/\1/p' out)"
if grep -q 'no login session' out; then
	expect_rc 0 $B image ls img / </dev/null
fi
for k in $keys; do keyctl unlink "$k" >/dev/null 2>&1; done
keys=""
run sh -c "$B unlock img < pass"		# default: user_session
[ "$rc" = 0 ] || fail "unlock: $(cat err)"
expect_in out "user-session keyring"
keys="$keys $(sed -n 's/.*(key \([0-9]*\)).*/\1/p' out)"
expect_rc 0 $B image ls img / </dev/null

# ---- set-passphrase: the old one is refused, the new one works; the keyring's key is stale
printf 'battery staple\n' > new
expect_rc 0 $B set-passphrase --passphrase-file new img </dev/null
expect_in out 'passphrase changed'
expect_in out 'keyring still holds the key of the old passphrase'
for k in $keys; do keyctl unlink "$k" >/dev/null 2>&1; done
keys=""
expect_rc 1 $B unlock -c --passphrase-file pass img
expect_in err 'wrong passphrase'
expect_rc 0 $B unlock -c --passphrase-file new img
# current and new passphrase as two lines of stdin
run sh -c "printf 'battery staple\nthird one\n' | $B set-passphrase img"
[ "$rc" = 0 ] || fail "set-passphrase from stdin: $(cat err)"
printf 'third one\n' > third
expect_rc 0 $B unlock -c --passphrase-file third img
# a wrong current passphrase: nothing written
h=$(sha img)
BCACHEFS_PASSPHRASE_FILE=wrong expect_rc 1 $B set-passphrase --passphrase-file new img
expect_in err 'wrong passphrase'
[ "$(sha img)" = "$h" ] || fail "image changed by set-passphrase with a wrong passphrase"

# ---- show-super never prints the wrapped key
wk=$(python3 -c '
import struct, sys
d = open(sys.argv[1], "rb").read(4096 + 65536)
sb = 4096
u64s = struct.unpack_from("<I", d, sb + 160)[0]
off, end = sb + 512, sb + 512 + u64s * 8
while off < end:
    n, t = struct.unpack_from("<II", d, off)
    if t == 6:
        print(d[off + 64: off + 112].hex()); break
    off += n * 8
' img)
[ ${#wk} = 96 ] || fail "wrapped key not found in the image"
expect_rc 0 $B show-super -l img
for part in $(echo "$wk" | cut -c1-16) $(echo "$wk" | cut -c17-32) $(echo "$wk" | cut -c65-80); do
	tr -d ' \n:' < out | tr A-F a-f | grep -q "$part" && fail "show-super printed key bytes ($part)"
done
expect_rc 0 $B show-super --json img
tr -d ' \n:' < out | grep -qi "$(echo "$wk" | cut -c1-16)" && fail "show-super --json printed key bytes"

# ---- remove-passphrase: opens with no key; refusals on an unencrypted filesystem
BCACHEFS_PASSPHRASE_FILE=third expect_rc 0 $B remove-passphrase img </dev/null
expect_in out 'stored in the clear'
expect_rc 0 $B image cat img /new </dev/null
expect_rc 0 $B fsck -n img </dev/null
expect_rc 1 $B unlock img </dev/null
expect_in err 'has no passphrase'
expect_rc 0 $B set-passphrase --passphrase-file pass img </dev/null
expect_rc 0 $B unlock -c --passphrase-file pass img
expect_rc 0 $B format -q --fs-size=32M plain.img
for c in unlock set-passphrase remove-passphrase; do
	expect_rc 1 $B $c plain.img </dev/null
	expect_in err "bcachefs $c: plain.img: filesystem .* is not encrypted"
done
# format --no-passphrase: encrypted, opens without a key
expect_rc 0 $B format -q --encrypted --no-passphrase --fs-size=64M nopass.img
expect_rc 0 $B image ls nopass.img / </dev/null
expect_rc 0 $B show-super nopass.img
expect_in out '^Features: +encryption'

# ---- the keyring not reachable (libkeyutils missing: a stand-in without its
# functions, as t20 does): unlock says so and stores nothing; opens fall back
# to the passphrase; unlock -c needs no keyring
if command -v cc >/dev/null; then
	mkdir stub && echo 'int not_the_library;' > stub/s.c &&
		cc -shared -fPIC -o stub/libkeyutils.so.1 stub/s.c || fail "cc stub"
	expect_rc 1 env LD_LIBRARY_PATH="$PWD/stub" $B unlock --passphrase-file pass img
	expect_in err "bcachefs unlock: img: cannot load libkeyutils.so.1"
	expect_rc 0 env LD_LIBRARY_PATH="$PWD/stub" $B unlock -c --passphrase-file pass img
	expect_rc 0 env LD_LIBRARY_PATH="$PWD/stub" BCACHEFS_PASSPHRASE_FILE=pass $B image ls img /
	expect_rc 1 env LD_LIBRARY_PATH="$PWD/stub" $B image ls img / </dev/null
	expect_in err "no key was given"
fi

# ---- the terminal: echo off, asked twice for a new passphrase, must match
# (a pseudo-terminal driven by python3's pty module)
cat > drive_pty.py <<'PY'
# drive_pty.py "LINE1,LINE2" CMD...: run CMD on a new pseudo-terminal, typing
# each line after the next "passphrase" prompt; print what the terminal
# showed; exit with CMD's status (124 after 30 s).
import os, pty, signal, sys
def drive(lines, argv):
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    def timeout(*_):
        os.kill(pid, signal.SIGKILL)
        sys.stdout.write(out.decode(errors="replace") + "\nTIMEOUT\n")
        os._exit(124)
    signal.signal(signal.SIGALRM, timeout)
    signal.alarm(30)
    out, seen = b"", 0
    for l in lines:
        while out.lower().count(b"passphrase") <= seen:
            out += os.read(fd, 1024)
        seen = out.lower().count(b"passphrase")
        os.write(fd, l.encode() + b"\n")
    while True:
        try:
            b = os.read(fd, 1024)
        except OSError:
            break
        if not b:
            break
        out += b
    _, st = os.waitpid(pid, 0)
    sys.stdout.write(out.decode(errors="replace"))
    sys.exit(os.waitstatus_to_exitcode(st))
drive(sys.argv[1].split(","), sys.argv[2:])
PY
run python3 drive_pty.py "tty secret,tty secret" $B format -q --encrypted --fs-size=64M tty.img
[ "$rc" = 0 ] || fail "format on a terminal: $(cat out err)"
expect_in out 'Enter passphrase:'
expect_in out 'Enter the same passphrase again:'
expect_not_in out 'tty secret'		# not echoed
printf 'tty secret\n' > ttypass
expect_rc 0 $B unlock -c --passphrase-file ttypass tty.img
run python3 drive_pty.py "one,two" $B format -q --encrypted --fs-size=64M tty2.img
[ "$rc" = 1 ] || fail "mismatch on a terminal exited $rc"
expect_in out 'do not match'
! $B show-super tty2.img >/dev/null 2>&1 || fail "tty2.img formatted after a mismatch"
run python3 drive_pty.py "wrong one" $B image ls tty.img /
[ "$rc" = 1 ] || fail "wrong passphrase on a terminal exited $rc"
expect_in out "Enter passphrase for .*:"
expect_in out 'wrong passphrase'
run python3 drive_pty.py "tty secret" $B image ls tty.img /
[ "$rc" = 0 ] || fail "right passphrase on a terminal exited $rc: $(cat out)"
