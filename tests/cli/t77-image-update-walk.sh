# image update's walk of DIR (read by several threads, matched with the
# image ahead of the comparison): what threading could break.
#  - many small directories and a deep chain: the changes printed are
#    exactly those made, in walk order, the same on every run; the update
#    makes the image equal to DIR;
#  - an unreadable directory: refused with its name, nothing written (an
#    existing one and a new one: the check pass reports both);
#  - DIR changing during the walk (directories and files made, removed,
#    renamed by another process): every run exits 0 or 1 with a message,
#    never a crash; once DIR is still, an update makes the image equal.
need python3
T="python3 $ROOT/tests/cli/treetool.py"

python3 - src <<'PY' || fail "tree"
import os, sys
root = sys.argv[1]
for i in range(1500):                   # many small directories
    d = os.path.join(root, 'd%04d' % i)
    os.makedirs(d)
    open(os.path.join(d, 'f'), 'w').write('%d\n' % i)
d = os.path.join(root, 'deep')          # a chain 300 deep
for i in range(300):
    d = os.path.join(d, 'x')
os.makedirs(d)
open(os.path.join(d, 'bottom'), 'w').write('bottom\n')
PY
expect_rc 0 $B format -q --fs-size=256M --source src img

# changes: two files written, a directory gone, one new, the bottom of the chain
touch -r src t.root && touch -r src/deep t.deep
echo more >> src/d0007/f
echo more >> src/d1234/f
rm -r src/d0500
mkdir src/d1500 && echo new > src/d1500/f
deep=deep$(printf '/x%.0s' $(seq 300))
echo more >> "src/$deep/bottom"
touch -r t.root src && touch -r t.deep src/deep	# so that neither shows as M
cat > want <<EOF
- /d0500
W /d0007/f
W /d1234/f
+ /d1500
W /$deep/bottom
EOF
for i in 1 2 3; do
	expect_rc 0 $B image update --dry-run img src
	cmp -s out want || fail "dry run $i printed:
$(cut -c1-80 out)"
done
# the read-write pass also puts back the root's mtime that its own changes
# of the root's entries moved (the dry run cannot see that one)
{ cat want; echo 'M /'; } > want.rw
expect_rc 0 $B image update img src
cmp -s out want.rw || fail "update printed: $(cut -c1-80 out)"
expect_rc 0 $B image extract img xd
expect_rc 0 $T compare src xd
expect_rc 0 $B image update img src
[ ! -s out ] || fail "a second update printed: $(head -5 out)"

# unreadable directories: as nobody (root reads everything)
if root_part "unreadable directories"; then
	u="setpriv --reuid=65534 --regid=65534 --clear-groups"
	# ENCRYPTED=1: the passphrase file is root's (0600); nobody reads a copy
	if [ -n "${PF:-}" ]; then
		cp "$PF" pass.all && chmod 644 pass.all
		u="$u env BCACHEFS_PASSPHRASE_FILE=$PWD/pass.all"
	fi
	chmod 755 . && chmod 666 img
	chmod -R a+rwX src
	chmod 000 src/d0100
	s0=$(sha img)
	run $u $B image update img src
	[ "$rc" = 1 ] || fail "unreadable directory: exit $rc: $(cat err)"
	expect_in err '^bcachefs image update: listing src/d0100: Permission denied$'
	[ "$(sha img)" = "$s0" ] || fail "an update refused for an unreadable directory wrote"
	chmod 755 src/d0100
	# a new one: found on the check pass too, before anything is written
	mkdir src/new && echo x > src/new/f && chmod 000 src/new
	run $u $B image update img src
	[ "$rc" = 1 ] || fail "unreadable new directory: exit $rc: $(cat err)"
	expect_in err '^bcachefs image update: listing src/new: Permission denied$'
	[ "$(sha img)" = "$s0" ] || fail "an update refused for an unreadable new directory wrote"
	chmod 755 src/new
fi

# DIR changing while it is walked
cat > churn.py <<'PY'
import os, random, shutil, sys
root, stop = sys.argv[1], sys.argv[2]
rnd = random.Random(77)
n = 0
while not os.path.exists(stop):
    d = os.path.join(root, 'd%04d' % rnd.randrange(1500))
    k = rnd.randrange(5)
    try:
        if k == 0:
            os.makedirs(os.path.join(d, 'sub%d' % n, 'deeper'))
        elif k == 1:
            shutil.rmtree(d)
            os.makedirs(d)
        elif k == 2:
            open(os.path.join(d, 'g%d' % n), 'w').write('x' * rnd.randrange(9000))
        elif k == 3:
            os.rename(d, d + '.moved')
            os.rename(d + '.moved', d)
        else:
            for e in os.listdir(d):
                p = os.path.join(d, e)
                (shutil.rmtree if os.path.isdir(p) and not os.path.islink(p) else os.unlink)(p)
    except OSError:
        pass
    n += 1
PY
python3 churn.py src stop &
churn=$!
stop_fail() { touch stop; wait $churn; fail "$@"; }
for i in 1 2 3 4 5 6; do
	case $i in 1|3|5) args=--dry-run ;; *) args= ;; esac
	run $B image update $args img src
	[ "$rc" = 0 ] || [ "$rc" = 1 ] || stop_fail "update $args, DIR changing: exit $rc: $(head -5 err)"
	[ "$rc" = 0 ] || grep -q '^bcachefs image update: ' err ||
		stop_fail "update $args, DIR changing: exit 1 without a message: $(head -5 err)"
done
touch stop
wait $churn || fail "churn"
expect_rc 0 $B fsck -n img
expect_rc 0 $B image update img src
rm -rf xd
expect_rc 0 $B image extract img xd
expect_rc 0 $T compare src xd
