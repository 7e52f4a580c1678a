#!/usr/bin/env bash
# Configures and builds agentenv and its tests into ./build (pass
# -DAGENTENV_SANITIZE=ON etc.). An existing build is configured again when
# options are given or when it was configured without the tests
# (scripts/quickstart.sh builds only the binary); otherwise not: ninja
# reruns cmake by itself when a CMakeLists.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ] || [ $# -gt 0 ] || ! grep -qx 'AGENTENV_TESTS:BOOL=ON' build/CMakeCache.txt; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTENV_TESTS=ON "$@" >/dev/null
fi
cmake --build build -j"$(nproc)"
