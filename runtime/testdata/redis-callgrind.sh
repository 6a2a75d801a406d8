#!/bin/sh
# redis-callgrind.sh runs redis-server under callgrind, for
# BenchmarkScriptInstructions: REDIS_SERVER=$PWD/runtime/testdata/redis-callgrind.sh
exec valgrind --tool=callgrind --callgrind-out-file="${CALLGRIND_OUT:-/tmp/ratelimit-callgrind}/out.%p" -q "${REDIS_BIN:-redis-server}" "$@"
