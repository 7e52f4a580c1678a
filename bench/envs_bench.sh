#!/usr/bin/env bash
# An environment per agent, side by side in one run: N = 1, 2, 4, 8 agents
# over HTTP (`serve --listen`, the operator's token), each in its own
# workspace of the dev rootfs (bench/make_rootfs.sh), each looping: edit a
# file, exec a short command, snapshot, read a diff (bench/envs_load.py).
# Beside them a probe reads (a diff every 5 ms in a workspace of its own):
# its latency is compared with the same probe's on the idle server (N = 0).
# Prints aggregate operations per second and p50/p99 per operation, each
# against N = 1, and the probe's against idle; then the floor of that
# path at N = 4: the probe sending a request that does nothing (MCP ping),
# against the same on the idle server. Then the server's RSS per idle
# workspace (with an MCP session on it; at most 32 sessions per peer
# address) and the disk of an idle workspace.
# As root the repository is on a fresh loopback ext4 (an ext4 that has
# seen mass deletes spends the inode allocator's time on every create), or
# with FS=tmpfs on a fresh tmpfs (no disk flushes: what the CPU allows).
# Usage: bench/envs_bench.sh [BUILD_DIR] [SECONDS] [IDLE]
# Env:   ROOTFS (default /var/tmp/agentenv-bench/rootfs), FS (ext4|tmpfs), SIZE_GB (8)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
seconds="${2:-20}"
idle="${3:-16}"
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
[ -d "$ROOTFS/usr" ] || { echo "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)" >&2; exit 1; }
bin="$build/cli/agentenv"
tmp="$(mktemp -d /var/tmp/envs-bench.XXXXXX)"
pid="" loop=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  mountpoint -q "$tmp/fs" && umount "$tmp/fs"
  [ -n "$loop" ] && losetup -d "$loop"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that a killed run still unmounts and detaches
repo="$tmp/repo"
if [ "$(id -u)" = 0 ] && [ "${FS:-ext4}" = tmpfs ]; then
  mkdir "$tmp/fs" && mount -t tmpfs -o "size=${SIZE_GB:-8}G" tmpfs "$tmp/fs"
  repo="$tmp/fs/repo"
  echo "repository on a fresh tmpfs"
elif [ "$(id -u)" = 0 ]; then
  fallocate -l "${SIZE_GB:-8}G" "$tmp/img"
  loop="$(losetup --show -f "$tmp/img")"
  mkfs.ext4 -q -F "$loop"
  mkdir "$tmp/fs" && mount "$loop" "$tmp/fs"
  repo="$tmp/fs/repo"
  echo "repository on a fresh loopback ext4 ($loop)"
fi
echo "init from $ROOTFS ($(find "$ROOTFS" -xdev | wc -l) entries)"
"$bin" init --root "$repo" --from "$ROOTFS" >/dev/null
"$bin" serve --root "$repo" --listen 127.0.0.1:0 --token-file "$tmp/token" --no-capture --writer-nice 10 \
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
echo "serve on 127.0.0.1:$port, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); ${seconds} s per N"
load() { python3 "$here/bench/envs_load.py" "$port" "$token" run "$@"; }
PROBE=ping load 0 "$seconds" >"$tmp/idle-ping"
for n in 0 1 2 4 8; do
  load "$n" "$seconds" | tee -a "$tmp/runs"
done
PROBE=ping load 4 "$seconds" >"$tmp/floor"
python3 - "$tmp/runs" "$tmp/idle-ping" "$tmp/floor" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
idle, runs = runs[0], runs[1:]
ping_idle, floor = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
one = runs[0]
def cell(r, base, op):
    return f"{r[op]['p50_ms']}/{r[op]['p99_ms']} ({r[op]['p99_ms'] / max(base[op]['p99_ms'], 0.01):.1f}x)"
print(f"idle server: probe read p50/p99 {idle['probe']['p50_ms']}/{idle['probe']['p99_ms']} ms, "
      f"ping {ping_idle['probe']['p50_ms']}/{ping_idle['probe']['p99_ms']} ms")
print("| N | ops/s | x N=1 | edit p50/p99 ms | exec p50/p99 ms | snapshot p50/p99 ms | diff p50/p99 ms | probe read p50/p99 ms (x idle) |")
print("|---|---|---|---|---|---|---|---|")
for r in runs:
    cells = [cell(r, one, o) for o in ("edit", "exec", "snapshot", "diff")] + [cell(r, idle, "probe")]
    print(f"| {r['n']} | {r['ops_per_s']:.1f} | {r['ops_per_s'] / one['ops_per_s']:.2f} | " + " | ".join(cells) + " |")
    if r["errors"]:
        print("errors:", r["errors"])
print(f"floor at N = 4, a request that does nothing (ping): {cell(floor, ping_idle, 'probe')} against idle")
PY
python3 "$here/bench/envs_load.py" "$port" "$token" idle "$idle" "$pid"
ws="$(ls -d "$repo"/workspaces/idle* | head -1)"
echo "disk of an idle workspace: $(du -sk "$ws" | cut -f1) KiB (its upper: $(du -sk "$ws/upper" | cut -f1) KiB)"
