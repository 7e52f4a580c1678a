#!/usr/bin/env bash
# The HTTP listener of `agentenv serve --listen` under hostile load: a good
# request's p50/p99 on an idle server, then with SLOW connections sending
# a head a byte a second and IDLE connections sending nothing held open
# (200 in all by default, over four loopback source addresses) and 16
# unread event streams of the DVR, then from the slow ones' own address; the ratios to the idle server; and the
# round trip of a kept-alive connection. The request is /api/timeline of
# the web DVR (a read of the history index) with the bearer token: the
# server is bound to 127.0.0.1 with --token-file, so that every request
# needs the token, as on a bind that is not loopback.
# Usage: bench/listener_bench.sh [BUILD_DIR] [SLOW] [IDLE] [REQUESTS]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
slow="${2:-100}"
idle="${3:-100}"
requests="${4:-400}"
tmp="$(mktemp -d /var/tmp/listener-bench.XXXXXX)"
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/src/etc"
echo hello > "$tmp/src/etc/hello"
"$build/cli/agentenv" init --root "$tmp/repo" --from "$tmp/src" >/dev/null
"$build/cli/agentenv" serve --root "$tmp/repo" --listen 127.0.0.1:0 --token-file "$tmp/token" --no-capture \
  2>"$tmp/log" &
pid=$!
port=""
for _ in $(seq 100); do
  port="$(sed -n 's|.*serving MCP at http://127.0.0.1:\([0-9]*\)/mcp.*|\1|p' "$tmp/log")"
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/log"; exit 1; }
token="$(cat "$tmp/token")"
echo "agentenv serve on 127.0.0.1:$port; $slow slow + $idle idle connections; $requests requests a phase"
"$build/bench/listener_load" "$port" "/api/timeline?from=0&to=9223372036854775807" "$token" "$slow" "$idle" "$requests"
