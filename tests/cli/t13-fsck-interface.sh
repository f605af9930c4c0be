# fsck: usage errors, operational errors, modes, fsck.bcachefs and fsck -t
expect_rc 0 $B format -q --fs-size=64M a.img
expect_rc 16 $B fsck
expect_rc 16 $B fsck -n -y a.img
expect_in err 'only one of'
expect_rc 16 $B fsck --bogus a.img
# no terminal and no mode: refuses rather than guessing
expect_rc 16 $B fsck a.img </dev/null
expect_in err 'terminal'
expect_rc 8 $B fsck -n missing.img
expect_in err 'missing\.img'
expect_rc 0 $B fsck -n a.img
expect_rc 0 $B fsck -p a.img
expect_rc 0 $B fsck -fy a.img
# -p repairs what is safe (a damaged copy), exit 1
dd if=/dev/zero of=a.img bs=512 seek=8 count=1 conv=notrunc status=none
expect_rc 1 $B fsck -p a.img
expect_rc 0 $B fsck -n a.img
# --json summary
dd if=/dev/zero of=a.img bs=512 seek=7 count=1 conv=notrunc status=none
expect_rc 4 $B fsck -n --json a.img
jq -e '.found == 1 and .left == 1 and .problems.sb_layout_bad.code == 259 and .exit_code == 4' out >/dev/null ||
	fail "json: $(cat out)"
expect_rc 1 $B fsck -y --json a.img
jq -e '.fixed == 1 and .left == 0 and .exit_code == 1' out >/dev/null || fail "json -y: $(cat out)"
# -v reports peak memory
expect_rc 0 $B fsck -nv a.img
expect_in out 'peak memory: [0-9]+ KiB'
# argv[0] and fsck -t
ln -s "$B" fsck.bcachefs
expect_rc 0 ./fsck.bcachefs -n a.img
if command -v fsck >/dev/null; then
	expect_rc 0 env PATH="$PWD:$PATH" fsck -t bcachefs -n a.img
fi
# no valid superblock copy: every copy's reason, however long the line
expect_rc 0 $B format -q -f --fs-size=64M c.img
expect_rc 0 $B show-super c.img
for sec in $(sed -n 's/^ *sector \([0-9]*\): .*/\1/p' out); do
	printf '\377\377\377\377\377\377\377\377' | dd of=c.img bs=1 seek=$((sec * 512 + 24)) conv=notrunc status=none
done
expect_rc 12 $B fsck -n c.img
expect_in out '^c\.img: sector 8: format version 65535 .*; sector 136: .*; sector [0-9]+: format version 65535 \(min [0-9]+\); this tool reads [0-9.]+$'
