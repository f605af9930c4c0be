# Messages that lead somewhere: a --replicas=2 filesystem with one member
# missing.  Every read-only command a degraded filesystem can answer takes
# -o degraded (fs usage, list, list-journal, show-super, kv get, image, fsck
# -n) and works, writing nothing; without it each refusal says "-o degraded"
# and the same command line with the option added works (the suggestion is
# followed, not only printed); the commands that write and make the same
# suggestion (set-fs-option, data rebalance, kv put) work with it too.  -o
# with anything else is a usage error naming what it takes.
plain_only "the images are hashed before and after; the key prompt is t42's"
mkdir -p src/d
echo one > src/f
echo two > src/d/g
expect_rc 0 $B format -q --replicas=2 --fs-size=32M --source=src d0.img d1.img
mv d1.img gone.img
sum=$(sha d0.img)

# each: the command line with @O where -o degraded goes
while IFS='|' read -r what cmd; do
	case $what in ''|'#'*) continue ;; esac
	without=$(echo "$cmd" | sed 's/@O //')
	with=$(echo "$cmd" | sed 's/@O/-o degraded/')
	run sh -c "$without"
	# fsck's operational error is 8, the others' refusal 1
	[ "$rc" = 1 ] || { [ "$what" = fsck ] && [ "$rc" = 8 ]; } ||
		fail "$what without -o degraded: exit $rc, want 1: $(cat err)"
	grep -Eq -- '-o degraded' err || fail "$what: the refusal does not say -o degraded: $(cat err)"
	run sh -c "$with"
	[ "$rc" = 0 ] || fail "$what with -o degraded (as the refusal says): exit $rc: $(cat err)"
	grep -Eq "member 1 \(uuid [0-9a-f-]+\) missing: opened degraded" err ||
		fail "$what: the missing member is not named: $(cat err)"
	[ "$(sha d0.img)" = "$sum" ] || fail "$what: a read-only command wrote to d0.img"
	cp out "out.$what"
done <<'EOF'
fs-usage|          $B fs usage @O d0.img
fs-usage-json|     $B fs usage --json @O d0.img
fs-usage-h|        $B fs usage -h @O d0.img
list|              $B list @O d0.img
list-nodes|        $B list -m nodes @O d0.img
list-json|         $B list --json @O d0.img
list-journal|      $B list-journal @O d0.img
list-journal-json| $B list-journal --json @O d0.img
image-ls|          $B image ls @O d0.img /d
image-cat|         $B image cat @O d0.img /f
fsck|              $B fsck -n -f @O d0.img
EOF
expect_in out.fs-usage 'Size:'
expect_in out.fs-usage-json '"devices"'
python3 -c 'import json, sys; [json.load(open(f)) for f in sys.argv[1:]]' \
	out.fs-usage-json out.list-json out.list-journal-json || fail "a --json output is not JSON"
expect_in out.list-json '"btrees"'
expect_in out.list-journal-json '"entries"'
expect_in out.list 'btree inodes'
expect_in out.image-ls 'g'
expect_in out.image-cat '^one$'
expect_in out.fsck '0 problems found'

# show-super reads each device on its own: a member missing never stops it,
# and -o degraded is accepted (nothing to change)
expect_rc 0 $B show-super d0.img
expect_rc 0 $B show-super -o degraded d0.img
expect_in out 'Device index: +0'
expect_rc 0 $B show-super --json -o degraded d0.img
expect_in out '"version"'
[ "$(sha d0.img)" = "$sum" ] || fail "show-super wrote to d0.img"

# very_degraded: accepted by the same commands (what has no copy left fails)
expect_rc 0 $B fs usage -o very_degraded d0.img
expect_in err 'opened very_degraded'
expect_rc 0 $B list -b inodes -o very_degraded d0.img
expect_rc 0 $B list-journal -o very_degraded d0.img

# any other -o: a usage error naming what these commands take
for c in "fs usage" "list" "list-journal" "show-super" "data rebalance" "kv"; do
	expect_rc 16 $B $c -o read_only d0.img
	expect_in err "takes only degraded and very_degraded"
	expect_rc 16 $B $c -o nosuch d0.img
	expect_in err "takes degraded and very_degraded"
done
[ "$(sha d0.img)" = "$sum" ] || fail "a usage error wrote to d0.img"

# data rebalance with nothing to do: opened degraded, read-only, nothing written
expect_rc 1 $B data rebalance d0.img
expect_in err '-o degraded opens it'
expect_rc 0 $B data rebalance -o degraded d0.img
expect_in out 'Pending: +0 off target'
[ "$(sha d0.img)" = "$sum" ] || fail "data rebalance with nothing to do wrote to d0.img"

# the commands that write and suggest -o degraded: followed, they write
expect_rc 1 $B set-fs-option --compression=lz4 d0.img
expect_in err '-o degraded opens it'
expect_rc 0 $B set-fs-option -o degraded --compression=lz4 d0.img
expect_in out 'compression: none -> lz4'
expect_in err 'member 1 .* missing: opened degraded'
expect_rc 0 $B show-super d0.img
expect_in out 'compression: +lz4|Compression: +lz4'
expect_rc 1 $B kv d0.img put 1:1 hello
expect_in err '-o degraded opens it'
expect_rc 0 $B kv -o degraded d0.img put 1:1 hello
expect_rc 0 $B kv -o degraded d0.img get 1:1
expect_in out '^hello$'
# background_compression: a rebalance scan is scheduled; run it degraded
expect_rc 0 $B set-fs-option -o degraded --background_compression=zstd d0.img
run $B data rebalance -o degraded d0.img
[ "$rc" = 0 ] || [ "$rc" = 2 ] || fail "data rebalance -o degraded: exit $rc: $(cat err)"
expect_rc 0 $B fsck -n -f -o degraded d0.img

# the member comes back: both open, and the newest superblock (with the new
# options) wins; fsck -y rewrites the stale member's superblock
mv gone.img d1.img
expect_rc 0 $B image cat d0.img:d1.img /f
expect_in out '^one$'
run $B fsck -y -f d0.img d1.img
[ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "fsck -y with the member back: exit $rc: $(cat out err)"
expect_rc 0 $B fsck -n -f d0.img d1.img
expect_rc 0 $B show-super d1.img
expect_in out 'compression: +lz4|Compression: +lz4'

# set-passphrase and remove-passphrase rewrite every member's superblock: with
# a member missing they say to give every member, not "-o degraded" (which
# they do not take); unlock -c only reads and answers
printf 'pw\n' > pass
expect_rc 0 $B format -q --encrypted --passphrase-file pass --replicas=2 --fs-size=32M e0.img e1.img
mv e1.img e1.away
esum=$(sha e0.img)
for c in "set-passphrase --passphrase-file pass" "remove-passphrase"; do
	BCACHEFS_PASSPHRASE_FILE=pass expect_rc 1 $B $c e0.img
	expect_in err 'member 1 .*was not given.*give every member device'
	expect_not_in err '-o degraded'
done
BCACHEFS_PASSPHRASE_FILE=pass expect_rc 0 $B unlock -c e0.img
[ "$(sha e0.img)" = "$esum" ] || fail "a refused passphrase change wrote to e0.img"
