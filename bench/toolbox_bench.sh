#!/usr/bin/env bash
# The toolbox a model pays for: 17 agent tasks replayed through `agentenv
# mcp` by a JSON-RPC client (bench/toolbox_bench.py), on an older binary's
# tools (files through exec and resources) and on this one's (file tools,
# short text results). Prints tokens (characters / 4 of each call's request
# and of the text it reads back) and calls per task, and the tool list's
# tokens. Runs as root (exec's namespaces) on a busybox tree.
# Usage: bench/toolbox_bench.sh OLD_AGENTENV NEW_AGENTENV
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
old="${1:?usage: toolbox_bench.sh OLD_AGENTENV NEW_AGENTENV}"
new="${2:?usage: toolbox_bench.sh OLD_AGENTENV NEW_AGENTENV}"
[ -x /bin/busybox ] || { echo "needs /bin/busybox (apt-get install busybox-static)"; exit 1; }
exec python3 "$here/toolbox_bench.py" "$old" "$new"
