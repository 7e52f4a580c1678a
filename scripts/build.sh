#!/usr/bin/env bash
# Configures and builds agentenv into ./build (pass -DAGENTENV_SANITIZE=ON etc.).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTENV_TESTS=ON "$@" >/dev/null
cmake --build build -j"$(nproc)"
