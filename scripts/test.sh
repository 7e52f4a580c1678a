#!/usr/bin/env bash
# Installs what is needed, builds, and runs the test suite.
#   scripts/test.sh            every test (CI); extra arguments go to ctest
#   scripts/test.sh --fast     the fast tier only (`ctest -L fast`): needs
#                              only the build's packages and a few tools
#                              (scripts/install-deps.sh --fast): no node,
#                              npm package, browser, clang or registry
# Packages are checked only when scripts/install-deps.sh changed since the
# last run that installed them (a --fast run's check does not count for a
# full one); the build is incremental (ninja) and always includes the
# tests, whatever configured build/ before. No test run is a failure.
# Tests that need root say so when they skip; run as root to run them all.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=() mode=full
if [ "${1:-}" = --fast ]; then
  tier=(-L fast) mode=fast
  shift
fi
stamp=build/.install-deps.sha256
want=$(sha256sum scripts/install-deps.sh | cut -d' ' -f1)
have=$(cat "$stamp" 2>/dev/null || true)
if [ "$have" != "$want full" ] && [ "$have" != "$want $mode" ]; then
  if [ $mode = fast ]; then ./scripts/install-deps.sh --fast; else ./scripts/install-deps.sh; fi
  mkdir -p build
  echo "$want $mode" > "$stamp"
fi
./scripts/build.sh
cd build
ctest --output-on-failure --no-tests=error -j"$(nproc)" "${tier[@]}" "$@"
