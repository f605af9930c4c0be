# every command has --help (exit 0); bad invocations exit 16; argv[0] selects
expect_rc 16 $B
expect_in err 'usage: bcachefs'
expect_rc 16 $B no-such-command
expect_in err "unknown command 'no-such-command'"
# The commands come from the command table itself (bcachefs.c: one row
# { "name", cmd_fn, "summary", "group" } per command), so a new command is
# checked without editing this list; `help` must list every row that has a
# group (mkfs, the alias, has none) and nothing else.  (A name as long as the
# help column, remove-passphrase, once slipped past a regex over `help`.)
sed -n 's/^[[:space:]]*{[[:space:]]*"\([a-z][a-z0-9-]*\)",[[:space:]]*cmd_[a-z_]*,[[:space:]]*"[^"]*",[[:space:]]*"\([^"]*\)"[[:space:]]*},.*/\1 \2/p' \
	"$ROOT/bcachefs.c" > table
rows=$(sed -n '/^static const struct command commands\[\] = {/,/^};/p' "$ROOT/bcachefs.c" | grep -c '^[[:space:]]*{')
[ "$rows" -ge 15 ] && [ "$(wc -l < table)" = "$rows" ] ||
	fail "read $(wc -l < table) of the $rows rows of the command table in bcachefs.c: $(cat table)"
expect_rc 0 $B help
sed -n 's/^  \([a-z][a-z0-9-]*\) .*/\1/p' out | sort > listed
awk '$2 != "" { print $1 }' table | sort > grouped
cmp -s listed grouped || fail "help does not list the table's commands (< help, > table):
$(diff listed grouped)"
for c in $(cut -d' ' -f1 table); do
	expect_rc 0 $B $c --help
	[ -s out ] || fail "$c --help printed nothing"
done
expect_rc 0 $B version
expect_in out '^bcachefs-tools [0-9]'
expect_rc 0 $B --version
expect_rc 16 $B show-super
expect_rc 16 $B show-super --bogus a.img
# argv[0]: mkfs.bcachefs runs format, so mkfs -t bcachefs works
ln -s "$B" mkfs.bcachefs
expect_rc 0 ./mkfs.bcachefs --fs-size=32M a.img
expect_rc 0 $B show-super a.img
need mkfs	# util-linux, which make check installs
expect_rc 0 env PATH="$PWD:$PATH" mkfs -t bcachefs --fs-size=32M m.img
expect_rc 0 $B show-super m.img
# the man page's option list is the option table's
$B help-opts --man > opts.roff
sed -n '/^\.\\" BEGIN OPTIONS TABLE/,/^\.\\" END OPTIONS TABLE/p' "$ROOT/man/bcachefs.8" |
	sed '1d;$d' > man.roff
cmp -s opts.roff man.roff || fail "man/bcachefs.8 options differ from the table; run make man
$(diff opts.roff man.roff | head -20)"
# and the rest of it is man/bcachefs.8.in's (make man writes bcachefs.8 from
# it: a paragraph written into bcachefs.8 alone is lost at the next make man)
sed -e '/^\.\\" BEGIN OPTIONS TABLE/r opts.roff' "$ROOT/man/bcachefs.8.in" > man.gen
cmp -s man.gen "$ROOT/man/bcachefs.8" || fail "man/bcachefs.8 is not man/bcachefs.8.in with the option table: edit the .in, run make man
$(diff man.gen "$ROOT/man/bcachefs.8" | head -20)"
