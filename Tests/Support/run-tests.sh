#!/usr/bin/env bash
# `make test`'s test run: the whole output goes to the terminal and to
# .build/test.log; when the run fails, its failures and the crashed thread's
# first frames are printed again at the end, where a CI log that keeps only
# the head and the tail of the output still shows them.
set -uo pipefail
log=.build/test.log
"${SWIFT:-swift}" test --skip-build "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo
    echo "==== test run failed (exit $status); summary of $log ===="
    grep -E "✘|Fatal error|fatal error|ERROR:|Program crashed|exited with unexpected signal" "$log" | cut -c1-400 | head -40
    awk '/ crashed:$/ { on = 1; n = 0 } on { print substr($0, 1, 300); if (++n >= 14) on = 0 }' "$log"
    # Tests that started and never ended: the ones running when the process died.
    awk '/^◇ Test .* started\.$/ && !/^◇ Test (run|case) / { name = $0; sub(/^◇ Test /, "", name); sub(/ started\.$/, "", name); open[name] = 1 }
         /^(✔|✘) Test .* (passed|failed)/ { name = $0; sub(/^(✔|✘) Test /, "", name); sub(/ (with [0-9]+ test cases? )?(passed|failed).*$/, "", name); delete open[name] }
         END { n = 0; for (name in open) n++; if (n) print n " test(s) started and never ended (running when it stopped), such as:";
               shown = 0; for (name in open) if (shown++ < 10) print "  " name }' "$log"
fi
exit "$status"
