#!/usr/bin/env bash
# Installs what is needed, builds, and runs the whole test suite.
# Tests that need root say so when they skip; run as root to run them all.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
