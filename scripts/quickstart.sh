#!/usr/bin/env bash
# Quick start: install what is needed, build, and run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
./scripts/demo.sh
