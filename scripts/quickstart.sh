#!/usr/bin/env bash
# Quick start: install what the binary and the demo need, build only the
# binary, and run the demo (scripts/test.sh builds and runs everything).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --demo
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTENV_TESTS=OFF >/dev/null
cmake --build build --target agentenv -j"$(nproc)"
./scripts/demo.sh
