#!/usr/bin/env bash
# Builds agentenv and its Catch2 tests with a sanitizer, runs the tests, and
# fails on any sanitizer report (the agentenv binary's and the daemons' the
# tests start included: every process writes its reports to one directory).
#   scripts/sanitize.sh thread  [CTEST_REGEX]   ThreadSanitizer, in build-tsan
#   scripts/sanitize.sh address [CTEST_REGEX]   AddressSanitizer + UBSan, in build-asan
# Without a regex: every unit and cli test (not MCP conformance, install or
# the acceptance scenario, which test packaging rather than memory or
# threads). Extra arguments after the regex go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
case "$kind" in
  thread) dir=build-tsan ;;
  address) dir=build-asan ;;
  *) echo "usage: $0 thread|address [CTEST_REGEX [CTEST_ARGS...]]" >&2; exit 2 ;;
esac
shift
regex=${1:-}
[ $# -gt 0 ] && shift
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTENV_TESTS=ON -DAGENTENV_SANITIZE="$kind" >/dev/null
# Every target: a list here would go stale, and a test whose binary is not
# built is "Not Run" (the fuzz replays were, until this built them all).
cmake --build "$dir" -j"$(nproc)"

logs=$(mktemp -d /tmp/agentenv-sanitize.XXXXXX)
chmod 1777 "$logs"  # tests run the binary as uid 65534 too
src=$PWD
# Reports go to $logs/<kind>.<pid>; a test that fails for a report also says so.
export TSAN_OPTIONS="log_path=$logs/tsan suppressions=$src/tests/tsan.supp second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="log_path=$logs/asan detect_leaks=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="log_path=$logs/ubsan print_stacktrace=1 halt_on_error=1 ${UBSAN_OPTIONS:-}"
status=0
(cd "$dir" && ctest --output-on-failure -E '^(mcp|install|acceptance):' ${regex:+-R "$regex"} "$@") || status=$?
if compgen -G "$logs/*" >/dev/null; then
  echo "== sanitizer reports ($logs) ==" >&2
  cat "$logs"/* >&2
  status=1
else
  rmdir "$logs"
fi
exit "$status"
