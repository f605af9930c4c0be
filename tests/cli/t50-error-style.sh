# One error style (issue 35): every command of the command table (read from
# `bcachefs help`, so a new command is checked too) and every subcommand of
# each group (read from the group's --help) answers an unknown option with
# exit 16 and one line "bcachefs CMD: unknown option 'WORD' ..." naming the
# word, long and short, and never getopt's own "CMD: invalid option";
# an option without its value, or with one it does not take, says so; every
# group names an unknown subcommand.  Nothing is opened: the arguments are
# refused first, so the image given is not touched.
expect_rc 0 $B format -q --fs-size=32M x.img
s0=$(sha x.img)

# bad CMD WORD WANT ARGS...: `bcachefs CMD ARGS` exits 16, its first stderr
# line is "bcachefs CMD: " and matches WANT, getopt said nothing of its own
bad() {
	cmd=$1 want=$2; shift 2
	run $B $cmd "$@"
	[ "$rc" = 16 ] || fail "'bcachefs $cmd $*' exited $rc, want 16: $(head -c 1000 err)"
	first=$(head -1 err)
	case $first in
	"bcachefs $cmd: "*) ;;
	*) fail "'bcachefs $cmd $*': first line of stderr is not 'bcachefs $cmd: ...': $(head -c 1000 err)" ;;
	esac
	echo "$first" | grep -Eq -- "$want" || fail "'bcachefs $cmd $*': want /$want/: $first"
	expect_not_in err 'invalid option --|unrecognized option'
}

cmds=$($B help | sed -n 's/^  \([a-z][a-z0-9-]*\) .*/\1/p')
[ -n "$cmds" ] && echo "$cmds" | grep -qx fsck || fail "no command list from bcachefs help: $($B help)"
n=0
for c in $cmds; do
	help=$($B $c --help 2>&1)
	subs=
	case $c in
	fs|data|device|image|subvolume) subs=$(echo "$help" | sed -n 's/^  \([a-z][a-z0-9-]*\)\( .*\)\{0,1\}$/\1/p') ;;
	esac
	if [ -z "$subs" ]; then
		# set-fs-option names a filesystem option without its dashes
		bad $c "unknown option '(--)?no-such-opt'" --no-such-opt x.img
		bad $c "unknown option '-Z'" -Z x.img
		n=$((n + 2))
		continue
	fi
	# the group itself: an option where the subcommand goes, and a word
	[ "$c" = image ] && w=verb || w=subcommand
	bad $c "unknown (option|$w) '--no-such-opt'" --no-such-opt
	bad $c "unknown $w 'show'" show
	n=$((n + 2))
	for s in $subs; do
		if [ "$c" = image ]; then
			# image takes its verb's short options before the device (after
			# it too, for a verb that has options: ls below)
			bad "$c $s" "unknown option '-Z'" -Z x.img
		else
			bad "$c $s" "unknown option '--no-such-opt'" --no-such-opt x.img
			bad "$c $s" "unknown option '-Z'" -Z x.img
		fi
		n=$((n + 2))
	done
done
bad "image ls" "unknown option '-Z'" x.img -Z /
# mkfs: format under another name (the table's alias)
bad format "unknown option '--no-such-opt'" --no-such-opt x.img
run $B mkfs --no-such-opt x.img
[ "$rc" = 16 ] && head -1 err | grep -q "^bcachefs format: unknown option '--no-such-opt'" ||
	fail "mkfs --no-such-opt: $rc $(cat err)"
# kv's verb comes after the device
bad kv "unknown verb 'frob'" x.img frob 1:0
# a value missing, or given to an option that takes none
bad fsck "option '-o' needs a value" x.img -o
bad list "option '--json' takes no value" --json=1 x.img
bad "device add" "option '--label' needs a value" x.img --label
bad "fs usage" "option '-o' needs a value" x.img -o
# help CMD is CMD --help; help with an unknown word names it
expect_rc 0 $B help fsck
expect_in out '^Usage: bcachefs fsck'
bad help "unknown command 'frob'" frob
bad version "unknown argument 'frob'" frob
echo "$n unknown options and subcommands refused"
[ "$(sha x.img)" = "$s0" ] || fail "a refused command wrote to x.img"

# the top-level help says what each command does, mounted or not
expect_rc 0 $B help
expect_not_in out 'unmounted filesystem.*set-fs|set-fs-option +Change options of an unmounted'
expect_in out 'set-fs-option +Change filesystem options \(mounted: through its daemon\)'
expect_in out 'remove-passphrase +Store'
