# image verbs one by one, their errors, shell, extraction safety, fs usage
expect_rc 0 $B format -q --fs-size=128M a.img

expect_rc 0 $B image mkdir a.img /etc
expect_rc 0 $B image mkdir -p a.img /usr/share/doc
expect_rc 0 $B image mkdir -m 700 a.img /root
expect_rc 1 $B image mkdir a.img /etc
expect_in err 'mkdir: /etc: File exists'
expect_rc 1 $B image mkdir a.img /nope/sub
expect_in err 'No such file or directory'
printf 'hello\n' > hello.txt
expect_rc 0 $B image put a.img hello.txt /etc/hello
expect_rc 0 $B image put a.img hello.txt /etc            # into a directory
# a failing put names the destination at fault and writes nothing (it is
# checked on a read-only open before the read-write one)
before=$(sha a.img)
expect_rc 1 $B image put a.img hello.txt /etc/hello/x
expect_in err '^bcachefs image: put: /etc/hello/x: Not a directory$'
expect_not_in err 'hello\.txt'
expect_rc 1 $B image put a.img hello.txt /etc/hello
expect_in err 'put: /etc/hello: File exists'
expect_rc 1 $B image put a.img hello.txt /nope/x
expect_in err 'put: /nope/x: No such file or directory'
expect_rc 1 $B image put a.img no-such-host-file /etc/y
expect_in err 'put: no-such-host-file: No such file or directory'
[ "$(sha a.img)" = "$before" ] || fail "a failed image put wrote to the image"
# so does a bad FUSE option: libfuse refuses it before the filesystem is opened
mkdir mnt
expect_rc 1 $B fusemount -o nosuchopt a.img mnt
[ "$(sha a.img)" = "$before" ] || fail "fusemount -o nosuchopt wrote to the image"
expect_rc 0 $B image cat a.img /etc/hello /etc/hello.txt
[ "$(cat out)" = "hello
hello" ] || fail "cat: $(cat out)"
expect_rc 1 $B image cat a.img /etc
expect_in err 'Is a directory'
expect_rc 0 $B image ln -s a.img hello /etc/link
expect_rc 0 $B image ln a.img /etc/hello /etc/hard
expect_rc 0 $B image cat a.img /etc/link               # followed inside the image
[ "$(cat out)" = hello ] || fail "symlink cat"
expect_rc 0 $B image stat a.img /etc/hard
expect_in out 'Links: 2'
expect_rc 0 $B image chmod a.img 4755 /etc/hello
expect_rc 0 $B image chown a.img 1000:100 /etc/hello
expect_rc 0 $B image touch -d @1234567890.5 a.img /etc/hello /etc/new
expect_rc 0 $B image stat --json a.img /etc/hello
expect_rc 0 jq -e '.files[0] | .mode == 2541 and .uid == 1000 and .gid == 100 and .mtime_ns == 1234567890500000000 and .mtime == "2009-02-13T23:31:30.5Z" and .nlink == 2' out
expect_rc 0 $B image ls -l a.img /etc
expect_in out '^-rwsr-xr-x +2 +1000 +100 +6 2009-02-13 23:31 hello$'
expect_in out '^lrwxrwxrwx .* link -> hello$'
expect_in out ' new$'
expect_rc 0 $B image setfattr -n user.color -v blue a.img /etc/hello
expect_rc 0 $B image setfattr -n user.bin -v 0x00ff a.img /etc/hello
expect_rc 0 $B image getfattr a.img /etc/hello
expect_in out '^user.color="blue"$'
expect_in out '^user.bin=0x00ff$'
expect_rc 0 $B image setfattr -x user.color a.img /etc/hello
expect_rc 1 $B image setfattr -x user.color a.img /etc/hello
expect_in err 'No data available'
expect_rc 0 $B image mv a.img /etc/new /usr/share/doc
expect_rc 0 $B image mv a.img /usr/share/doc/new /usr/share/doc/renamed
expect_rc 0 $B image ls a.img /usr/share/doc
[ "$(cat out)" = renamed ] || fail "mv: $(cat out)"
expect_rc 1 $B image mv a.img /usr /usr/share/inside
expect_in err 'Invalid argument'
expect_rc 1 $B image rm a.img /usr
expect_in err 'Is a directory'
expect_rc 0 $B image rm -r a.img /usr
expect_rc 1 $B image ls a.img /usr
expect_rc 0 $B image rm -f a.img /nope
expect_rc 0 $B image setopt a.img compression=zstd /root
seq 1 20000 > seq.txt
expect_rc 0 $B image put a.img seq.txt /root/seq
expect_rc 0 $B list -b extents a.img
expect_in out 'comp 3'                                 # zstd, inherited from /root

# a name of 256 bytes is refused, 255 works
long=$(printf 'x%.0s' $(seq 1 255))
expect_rc 0 $B image touch a.img "/$long"
expect_rc 1 $B image touch a.img "/${long}y"
expect_in err 'File name too long'

# usage errors: exit 16, nothing written
before=$(sha a.img)
expect_rc 16 $B image
expect_rc 16 $B image bogus a.img
expect_rc 16 $B image chmod a.img 99x /etc
expect_rc 16 $B image ls -Z a.img
expect_rc 16 $B image mv a.img /only-one
expect_rc 0 $B image ls a.img /
expect_rc 0 $B image cat a.img /etc/hello
expect_rc 0 $B image get a.img /etc/hello got.txt
[ "$(sha a.img)" = "$before" ] || fail "a read-only verb or a usage error wrote to the image"
cmp -s got.txt hello.txt || fail "get"
expect_rc 1 $B image ls missing.img /
expect_in err 'missing.img'

# shell: many verbs in one open; stops at the first failure with its line number
printf 'mkdir /a\nput hello.txt "/a/with space"\n# a comment\nls -l /a\ncat "/a/with space"\n' > script
$B image shell a.img < script > out 2> err || fail "shell: $(cat err)"
expect_in out 'with space'
expect_in out '^hello$'
printf 'mkdir /b\nmkdir /b\nmkdir /c\n' > script
$B image shell a.img < script > out 2> err && fail "shell ignored a failure"
expect_in err 'line 2'
expect_rc 1 $B image ls a.img /c

# extraction never writes outside the destination
expect_rc 0 $B image ln -s a.img ../../outside /escape
expect_rc 0 $B image ln -s a.img /tmp /abs
expect_rc 0 $B image mkdir a.img /escape2
mkdir dest
expect_rc 0 $B image extract a.img dest
[ -L dest/escape ] && [ -L dest/abs ] || fail "symlinks not kept as links"
[ ! -e outside ] || fail "wrote outside the destination"
# an existing symlink in the destination is not followed either
mkdir dest2 victim && ln -s ../victim dest2/etc
expect_rc 1 $B image extract a.img dest2
[ -z "$(ls victim)" ] || fail "followed a symlink in the destination"

# fs usage
expect_rc 0 $B fs usage a.img
expect_in out '^Size: +[0-9]+$'
expect_rc 0 $B fs usage -h a.img
expect_in out '^Size: +127'
expect_rc 0 $B fs usage --json a.img
expect_rc 0 jq -e '.size > 0 and .used > 0 and (.devices | length) == 1 and .devices[0].user.bytes > 0' out
expect_rc 16 $B fs usage
expect_rc 16 $B fs bogus
expect_rc 0 $B fsck -n a.img
