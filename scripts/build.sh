#!/usr/bin/env bash
# Configures and builds agentenv into ./build (pass -DAGENTENV_SANITIZE=ON etc.).
# An existing build is not configured again unless options are given: ninja
# reruns cmake by itself when a CMakeLists.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ] || [ $# -gt 0 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTENV_TESTS=ON "$@" >/dev/null
fi
cmake --build build -j"$(nproc)"
