# make demo's script runs to the end and shows what it says it shows
"$ROOT/scripts/demo.sh" >out 2>err || fail "demo failed: $(tail -5 err)"
expect_in out 'Label: +tier1'
expect_in out 'sector 8: +BAD'
expect_in out 'valid, seq [0-9]+ \(used\)'
expect_in out '1:2:0 raw len 5 "world"'
expect_in out 'journal entr(y|ies) replayed'
expect_in out ': 0 problems found, 0 fixed, 0 left'
