#!/bin/sh
# redis-callgrind.sh runs redis-server under callgrind, for
# BenchmarkScriptInstructions: REDIS_SERVER=$PWD/runtime/redislimit/testdata/redis-callgrind.sh
# CALLGRIND_ARGS adds callgrind options, such as
# "--collect-atstart=no --toggle-collect=evalShaCommand" to count only the
# scripts' own work, without the event loop and the server's timers, whose
# share grows with wall time on a loaded machine.
exec valgrind --tool=callgrind --callgrind-out-file="${CALLGRIND_OUT:-/tmp/ratelimit-callgrind}/out.%p" $CALLGRIND_ARGS -q "${REDIS_BIN:-redis-server}" "$@"
