# Refusing writes nothing: every command line below is refused (or has
# nothing to do) and must leave every image byte-identical.  A table: one
# line per case, "EXIT | STDERR FRAGMENT (grep -E, may be empty) | COMMAND"
# (the command runs under sh -c in this directory, $B the binary).  Every
# image file's CRC (cksum) is taken at the start and after each case; one changed
# byte fails the test, naming the case and the file.
#
# Images: one.img (one device, files /f and /d/g), p.img:q.img (two devices,
# --replicas=2; q.img left out is "a member missing"), enc.img (encrypted,
# passphrase in pass; wrong holds another), blank.img (zeros: no filesystem),
# m.img (mounted at mnt for the cases that need a mount: an idle daemon
# writes nothing, so it is hashed too).
plain_only "enc.img needs its own passphrase file"
command -v fusermount3 >/dev/null || fail "no fusermount3 (make check installs fuse3)"
[ -c /dev/fuse ] || skip "no /dev/fuse"

mkdir -p src/d mnt
echo f-data > src/f
echo g-data > src/d/g
printf 'hello\n' > hello
expect_rc 0 $B format -q --fs-size=24M --source=src one.img
expect_rc 0 $B format -q --replicas=2 --fs-size=24M --source=src p.img q.img
expect_rc 0 $B format -q --fs-size=24M --source=src m.img
printf 'correct horse\n' > pass
printf 'wrong horse\n' > wrong
expect_rc 0 $B format -q --encrypted --passphrase-file pass --fs-size=24M --source=src enc.img
truncate -s 4M blank.img
tar -cf t.tar hello
cleanup() {
	cd /
	fusermount3 -u "$OLDPWD/mnt" 2>/dev/null
	[ -n "${pid:-}" ] && wait "$pid" 2>/dev/null
}
trap cleanup EXIT
$B fusemount -f m.img mnt 2>fuse.err & pid=$!
for i in $(seq 50); do mountpoint -q mnt && break; sleep 0.1; done
mountpoint -q mnt || fail "fusemount m.img: $(cat fuse.err)"

hashes() { cksum *.img; }	# a CRC: 16x as fast as sha256sum, and any change shows
# T44_ALL=1: report every failing case, not only the first
bad=0
bad() {
	[ -n "${T44_ALL:-}" ] || fail "$*"
	printf 'FAIL: %s\n' "$*" >&2
	bad=$((bad + 1))
}

# the hashes after each case are those before the next: nothing may change
hashes > before
cases=0
while IFS='|' read -r want frag cmd; do
	want=$(echo $want)
	case $want in ''|'#'*) continue ;; esac
	frag=$(echo "$frag" | sed 's/^ *//; s/ *$//')
	cmd=$(echo "$cmd" | sed 's/^ *//')
	cases=$((cases + 1))
	run sh -c "$cmd" </dev/null
	[ "$rc" = "$want" ] || bad "'$cmd' exited $rc, want $want
--- stdout:
$(head -c 1500 out)
--- stderr:
$(head -c 1500 err)"
	# fsck reports problems on stdout: a fragment may be there
	[ -z "$frag" ] || grep -Eq -- "$frag" err || { case $cmd in *fsck*) grep -Eq -- "$frag" out ;; *) false ;; esac; } ||
		bad "'$cmd': expected /$frag/ on stderr:
$(head -c 1500 err)"
	[ "$want" = 0 ] || [ -s err ] || { case $cmd in *fsck*) [ -s out ] ;; *) false ;; esac; } || bad "'$cmd' exited $want without a message"
	hashes > after
	cmp -s before after || { bad "'$cmd' (exit $rc) changed an image:
$(diff before after)
--- stderr:
$(head -c 1500 err)"; mv after before; }
done <<'EOF'
# ---- format
16 | unknown option '--no-such-option'|      $B format --no-such-option one.img
1  | one.img.*-f|                            $B format one.img
1  | p.img.*-f|                              $B format --replicas=2 p.img q.img
16 | |                                       $B format --block-size=3000 one.img
# ---- fsck (arguments, and a check of what is not a filesystem)
16 | |                                       $B fsck --bogus one.img
16 | only one of|                            $B fsck -n -y one.img
16 | no devices|                             $B fsck -n
16 | terminal|                               $B fsck one.img
16 | very_degraded checks only|              $B fsck -y -o very_degraded p.img
16 | fsck takes only|                        $B fsck -n -o read_only one.img
8  | member 1 .*not given|                   $B fsck -y p.img
12 | no valid superblock|                    $B fsck -y blank.img
8  | mounted|                                $B fsck -y m.img
# ---- show-super, list, list-journal, fs usage, kv (read-only, or refused)
16 | |                                       $B show-super --bogus one.img
16 | takes (only )?degraded|                 $B show-super -o compression=lz4 one.img
16 | unknown btree|                          $B list -b nosuch one.img
16 | takes only degraded|                    $B list -o read_only one.img
1  | -o degraded opens it|                   $B list p.img
1  | mounted|                                $B list m.img
1  | -o degraded|                            $B list-journal p.img
16 | takes (only )?degraded|                 $B list-journal -o nosuch one.img
1  | -o degraded opens it|                   $B fs usage p.img
16 | takes only degraded|                    $B fs usage -o ro p.img
16 | unknown verb|                           $B kv one.img frob 1:1
16 | |                                       $B kv one.img put 1:1
16 | test btree|                             $B kv -b extents one.img put 1:1 x
16 | bad position|                           $B kv one.img del nowhere
1  | -o degraded opens it|                   $B kv p.img put 1:1 x
1  | no such key|                            $B kv one.img get 9:9
# ---- set-fs-option
16 | unknown option|                         $B set-fs-option --nosuch=1 one.img
16 | |                                       $B set-fs-option --compression=rar one.img
16 | no option given|                        $B set-fs-option one.img
1  | block_size cannot be changed|           $B set-fs-option --block_size=8k one.img
1  | degraded cannot be changed.*-o|         $B set-fs-option --degraded one.img
1  | no label or device 'nolabel'|           $B set-fs-option --background_target=nolabel one.img
1  | data_replicas=2 needs 2|                $B set-fs-option --data_replicas=2 one.img
1  | -o degraded opens it|                   $B set-fs-option --compression=lz4 p.img
16 | takes only degraded|                    $B set-fs-option -o ro --compression=lz4 one.img
0  | |                                       $B set-fs-option --compression=none one.img
# ---- device
16 | unknown subcommand|                     $B device frob one.img
16 | unknown subcommand|                     $B device resize-journal one.img 0 8M
16 | too few arguments|                      $B device add one.img
16 | durability|                             $B device add --durability=9 one.img new.img
16 | does not apply|                         $B device remove --label=x one.img 0
1  | holds .*-f to overwrite|                $B device add p.img:q.img one.img
1  | -o degraded opens it|                   $B device add p.img blank.img
1  | |                                       $B device remove one.img 0
1  | |                                       $B device remove one.img 5
1  | |                                       $B device remove p.img:q.img nosuch.img
1  | |                                       $B device evacuate one.img 0
1  | |                                       $B device evacuate one.img 7
16 | not a state|                            $B device set-state bogus one.img 0
1  | |                                       $B device set-state failed one.img 0
1  | |                                       $B device set-state rw one.img 3
1  | |                                       $B device set-label one.img 4 x
16 | give a member and its new size|         $B device resize one.img 0 notasize
16 | '-5G': not a size.*shrink|              $B device resize p.img:q.img q.img -5G
16 | '-1': a negative number|                $B device remove p.img:q.img -1
16 | unknown option '-x'|                    $B device resize -x p.img:q.img q.img 5G
1  | |                                       $B device resize one.img 0 1k
1  | |                                       $B device resize one.img 9 1G
1  | not mounted|                            $B device online one.img blank.img
1  | not mounted|                            $B device online p.img q.img
1  | not mounted|                            $B device online -o degraded p.img q.img
1  | not mounted|                            $B device offline one.img 0
1  | not mounted|                            $B device offline p.img:q.img 1
1  | online already|                         $B device online mnt m.img
1  | another filesystem|                     $B device online mnt one.img
1  | |                                       $B device online mnt blank.img
1  | |                                       $B device offline mnt 3
# ---- data
16 | unknown subcommand|                     $B data frob one.img
16 | unknown subcommand|                     $B data migrate --target=ssd one.img
16 | |                                       $B data rereplicate --bogus one.img
1  | -o degraded opens it|                   $B data rereplicate p.img
16 | |                                       $B data rebalance --bogus one.img
16 | no device given|                        $B data rebalance
1  | -o degraded opens it|                   $B data rebalance p.img
16 | takes only degraded|                    $B data rebalance -o ro one.img
16 | |                                       $B data scrub --bogus one.img
1  | |                                       $B data scrub p.img
# nothing to do: done without a read-write open
0  | |                                       $B data rebalance one.img
0  | |                                       $B data rebalance --json p.img:q.img
0  | |                                       $B data rebalance -o degraded p.img
0  | |                                       $B device set-state rw one.img 0
0  | |                                       $B device set-state rw p.img:q.img 1
0  | |                                       $B device resize one.img 0 24M
# ---- image verbs: bad paths and arguments
16 | unknown verb|                           $B image frob one.img
16 | |                                       $B image cat
1  | |                                       $B image cat one.img /nope
1  | |                                       $B image ls one.img /nope
1  | mounted|                                $B image put m.img hello /x
1  | File exists|                            $B image mkdir one.img /d
1  | No such file|                           $B image mkdir one.img /nope/x
1  | No such file|                           $B image mkdir one.img /new /nope/x
1  | No such file|                           $B image rm one.img /nope
1  | No such file|                           $B image rm one.img /f /nope
1  | |                                       $B image rm one.img /d
1  | No such file|                           $B image mv one.img /nope /x
1  | No such file|                           $B image mv one.img /f /nope/x
1  | No such file|                           $B image ln one.img /nope /x
1  | File exists|                            $B image ln one.img /f /d/g
1  | No such file|                           $B image ln -s one.img t /nope/x
1  | No such file|                           $B image chmod one.img 644 /f /nope
16 | bad mode|                               $B image chmod one.img 999 /f
1  | No such file|                           $B image chown one.img 0:0 /nope
16 | unknown user|                           $B image chown one.img nosuchuser /f
1  | No such file|                           $B image touch one.img /f /nope/x
16 | bad time|                               $B image touch -d @x one.img /f
1  | No such file|                           $B image put one.img missing /x
1  | File exists|                            $B image put one.img hello /f
1  | No such file|                           $B image setfattr -n user.a -v b one.img /nope
1  | No such file|                           $B image setopt one.img compression=lz4 /nope
16 | setopt|                                 $B image setopt one.img nosuch=1 /f
1  | |                                       $B image import-tar one.img missing.tar
1  | No such file|                           $B image import-tar one.img t.tar /nope
16 | |                                       $B image ls -o nosuch one.img /
1  | -o degraded opens it|                   $B image put p.img hello /x
16 | line 1: unknown verb|                   echo 'frob /x' | $B image shell one.img
16 | line 2 .chmod.: nothing done|           printf 'mkdir /new\nchmod 999 /new\n' | $B image shell one.img
16 | line 2: unbalanced quotes|              printf 'mkdir /new\nmkdir "/x\n' | $B image shell one.img
# ---- crypt commands with a wrong passphrase
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B image cat enc.img /f
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B image put enc.img hello /x
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B unlock -c enc.img
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B set-passphrase --passphrase-file pass enc.img
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B remove-passphrase enc.img
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B set-fs-option --compression=lz4 enc.img
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B data rebalance enc.img
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B data rereplicate enc.img
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B device add enc.img blank.img
8  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B fsck -y enc.img
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B kv enc.img put 1:1 x
1  | not encrypted|                          BCACHEFS_PASSPHRASE_FILE=pass $B set-passphrase --passphrase-file pass one.img
# ---- fusemount
16 | |                                       $B fusemount -o nosuch=1 one.img mnt2
16 | |                                       $B fusemount one.img
16 | not a directory|                        $B fusemount one.img /nonexistent-dir
1  | -o degraded opens it|                   mkdir -p mnt2 && $B fusemount p.img mnt2
16 | |                                       mkdir -p mnt2 && $B fusemount -o compression=rar one.img mnt2
32 | already mounted on|                   $B fusemount m.img mnt
1  | |                                       BCACHEFS_PASSPHRASE_FILE=wrong $B fusemount enc.img mnt2
EOF
echo "refusal cases: $cases"
[ "$bad" = 0 ] || fail "$bad failures"
[ "$cases" -ge 100 ] || fail "only $cases cases read from the table"

# the check pass before a read-write open must not refuse what works: verbs
# whose later arguments depend on earlier ones, and a shell whose lines do
cp one.img w.img
expect_rc 0 $B image mkdir w.img /a /a/b /a/b/c
expect_rc 0 $B image mkdir -p w.img /x/y/z
expect_rc 0 $B image touch w.img /a/t /x/y/z/t
expect_rc 0 $B image ln w.img /f /hard
expect_rc 0 $B image ln -s w.img f /sym
expect_rc 0 $B image mv w.img /hard /a/b
expect_rc 0 $B image chmod w.img 600 /f /a
expect_rc 0 $B image chown w.img 1:1 /f
expect_rc 0 $B image import-tar w.img t.tar /a
expect_rc 0 $B image rm -r w.img /x
expect_rc 0 $B image rm w.img /sym
run sh -c "printf 'mkdir /s\nput hello /s/h\nchmod 700 /s\n' | $B image shell w.img"
[ "$rc" = 0 ] || fail "image shell with dependent lines: exit $rc: $(cat err)"
for p in /a/b/c /a/b/hard /a/hello /a/t /s/h; do
	expect_rc 0 $B image stat w.img "$p"
done
expect_rc 1 $B image stat w.img /x
expect_rc 1 $B image stat w.img /sym
expect_rc 0 $B fsck -n -f w.img
