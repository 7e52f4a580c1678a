#!/usr/bin/env bash
# Installs what is needed, builds, and runs the test suite.
#   scripts/test.sh            every test (CI); extra arguments go to ctest
#   scripts/test.sh --fast     the fast tier only (`ctest -L fast`: no kill
#                              sweeps, stress, power cuts or apt in a rootfs)
# Packages are checked only when scripts/install-deps.sh changed since the
# last run that installed them; the build is incremental (ninja).
# Tests that need root say so when they skip; run as root to run them all.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=()
if [ "${1:-}" = --fast ]; then
  tier=(-L fast)
  shift
fi
stamp=build/.install-deps.sha256
want=$(sha256sum scripts/install-deps.sh | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  ./scripts/install-deps.sh
  mkdir -p build
  echo "$want" > "$stamp"
fi
./scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" "${tier[@]}" "$@"
