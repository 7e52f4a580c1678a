#!/usr/bin/env bash
# An environment per agent, side by side in one run: N = 1, 2, 4, 8 agents
# over HTTP (`serve --listen`, the operator's token), each in its own
# workspace of the dev rootfs (bench/make_rootfs.sh), each looping: edit a
# file, exec a short command, snapshot, read a diff (bench/envs_load.py).
# Prints aggregate operations per second and p50/p99 per operation, each
# against N = 1; then the server's RSS per idle workspace (with an MCP
# session on it; at most 32 sessions per peer address) and the disk of an
# idle workspace.
# Usage: bench/envs_bench.sh [BUILD_DIR] [SECONDS] [IDLE]
# Env:   ROOTFS (default /var/tmp/agentenv-bench/rootfs)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
seconds="${2:-20}"
idle="${3:-16}"
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
[ -d "$ROOTFS/usr" ] || { echo "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)" >&2; exit 1; }
bin="$build/cli/agentenv"
tmp="$(mktemp -d /var/tmp/envs-bench.XXXXXX)"
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
echo "init from $ROOTFS ($(find "$ROOTFS" -xdev | wc -l) entries)"
"$bin" init --root "$tmp/repo" --from "$ROOTFS" >/dev/null
"$bin" serve --root "$tmp/repo" --listen 127.0.0.1:0 --token-file "$tmp/token" --no-capture 2>"$tmp/log" &
pid=$!
port=""
for _ in $(seq 100); do
  port="$(sed -n 's|.*serving MCP at http://127.0.0.1:\([0-9]*\)/mcp.*|\1|p' "$tmp/log")"
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/log"; exit 1; }
token="$(cat "$tmp/token")"
echo "serve on 127.0.0.1:$port, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); ${seconds} s per N"
for n in 1 2 4 8; do
  python3 "$here/bench/envs_load.py" "$port" "$token" run "$n" "$seconds" | tee -a "$tmp/runs"
done
python3 - "$tmp/runs" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
one = runs[0]
print("| N | ops/s | x N=1 | edit p50/p99 ms | exec p50/p99 ms | snapshot p50/p99 ms | diff p50/p99 ms |")
print("|---|---|---|---|---|---|---|")
for r in runs:
    cells = [f"{r[o]['p50_ms']}/{r[o]['p99_ms']} ({r[o]['p99_ms'] / max(one[o]['p99_ms'], 0.1):.1f}x)" for o in ("edit", "exec", "snapshot", "diff")]
    print(f"| {r['n']} | {r['ops_per_s']:.1f} | {r['ops_per_s'] / one['ops_per_s']:.2f} | " + " | ".join(cells) + " |")
    if r["errors"]:
        print("errors:", r["errors"])
PY
python3 "$here/bench/envs_load.py" "$port" "$token" idle "$idle" "$pid"
ws="$(ls -d "$tmp"/repo/workspaces/idle* | head -1)"
echo "disk of an idle workspace: $(du -sk "$ws" | cut -f1) KiB (its upper: $(du -sk "$ws/upper" | cut -f1) KiB)"
