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
fi
exit "$status"
