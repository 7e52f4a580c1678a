#!/bin/bash
# Rollback-to-relaunch latency of a supervised agent: an operator's
# `agentenv ctl rollback` of a 10-file change kills every process of the
# env, restores the tree and relaunches the agent; we time from sending the
# rollback to the relaunched agent's first sign of life (it writes to a fifo
# in the tree's /tmp, which is ignored: never versioned, never restored).
#
# usage: bench/relaunch_bench.sh [BUILD_DIR] [ROOTFS] [RUNS]
#   BUILD_DIR  default: build
#   ROOTFS     default: /var/tmp/agentenv-bench/rootfs (bench/make_rootfs.sh), else a busybox tree
#   RUNS       default: 20 rollbacks, alternating between the two nodes
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
rootfs=${2:-/var/tmp/agentenv-bench/rootfs}
runs=${3:-20}
bin="$build/cli/agentenv"
tmp=$(mktemp -d /var/tmp/agentenv-relaunch-XXXXXX)
sup_pid=
cleanup() {
  if [ -n "$sup_pid" ]; then kill -TERM "$sup_pid" 2>/dev/null || true; wait "$sup_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that a killed run still unmounts and detaches
repo="$tmp/repo"
work="$repo/work/current"

if [ -f "$rootfs/.agentenv-bench-complete" ]; then
  tree_desc="$(basename "$rootfs") ($(find "$rootfs" -xdev | wc -l) entries)"
  "$bin" init --root "$repo" --from "$rootfs" > /dev/null
else
  tree_desc="busybox tree (no complete $rootfs)"
  mkdir -p "$tmp/src"/{bin,proc,dev,sys,etc,tmp,run,usr/share/doc/bench}
  cp /bin/busybox "$tmp/src/bin/"
  for a in sh sleep echo cat; do ln -s busybox "$tmp/src/bin/$a"; done
  for i in $(seq 1 10); do head -c 65536 /dev/urandom > "$tmp/src/usr/share/doc/bench/f$i"; done
  : > "$tmp/src/etc/hosts"
  "$bin" init --root "$repo" --from "$tmp/src" > /dev/null
fi
"$bin" tag --root "$repo" a > /dev/null

# Node b: ten existing regular files (64 KiB and up) rewritten.
mapfile -t files < <(cd "$work" && find usr -xdev -type f -size +63k 2>/dev/null | sort | head -n 10)
[ "${#files[@]}" -eq 10 ] || { echo "need 10 files of >= 64 KiB in the tree" >&2; exit 1; }
for f in "${files[@]}"; do head -c 65536 /dev/urandom > "$work/$f"; done
"$bin" snap --root "$repo" -m "ten files changed" > /dev/null
"$bin" tag --root "$repo" b > /dev/null

mkdir -p "$work/tmp"
mkfifo "$work/tmp/agent-ping"
"$bin" supervise --root "$repo" -- /bin/sh -c 'echo up > /tmp/agent-ping; exec sleep 1000000' 2> "$tmp/supervise.log" &
sup_pid=$!
# The first launch's ping.
read -r _ < "$work/tmp/agent-ping"

cpu_ticks() {  # utime+stime+cutime+cstime of a pid
  awk '{print $14+$15+$16+$17}' "/proc/$1/stat"
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
walls=() ops=()
sup_cpu0=$(cpu_ticks "$sup_pid")
# The loop forks nothing but ctl ($EPOCHREALTIME, read are builtins): our
# reaped children's CPU is ctl's.
ctl_cpu0=$(awk '{print $16+$17}' /proc/$$/stat)
for i in $(seq 1 "$runs"); do
  if (( i % 2 )); then ref=a; else ref=b; fi
  t0=${EPOCHREALTIME/./}
  "$bin" ctl --root "$repo" rollback "ref=$ref" > /dev/null
  t1=${EPOCHREALTIME/./}
  read -r _ < "$work/tmp/agent-ping"
  t2=${EPOCHREALTIME/./}
  walls+=($(( t2 - t0 )))
  ops+=($(( t1 - t0 )))
done
# Clock ticks are 10 ms: CPU is summed over all rollbacks, then divided.
sup_cpu_ms=$(( ($(cpu_ticks "$sup_pid") - sup_cpu0) * 10 ))
ctl_cpu_ms=$(( ($(awk '{print $16+$17}' /proc/$$/stat) - ctl_cpu0) * 10 ))
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

stats() {  # median min max of microsecond values, printed in ms
  printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {printf "median %.1f ms (min %.1f, max %.1f)", v[int((NR+1)/2)]/1000, v[1]/1000, v[NR]/1000}'
}
line_wall=$(stats "${walls[@]}")
line_op=$(stats "${ops[@]}")
line_cpu=$(awk -v s="$sup_cpu_ms" -v c="$ctl_cpu_ms" -v n="$runs" \
  'BEGIN {printf "%.1f ms (supervisor incl. its reaped children %.1f ms, ctl process %.1f ms)", (s+c)/n, s/n, c/n}')
echo "tree: $tree_desc; change: 10 files of 64 KiB rewritten; $runs rollbacks alternating a/b"
echo "rollback sent -> relaunched agent's first sign of life: $line_wall"
echo "  of which ctl rollback (kill, restore, relaunch) returned after: $line_op"
echo "CPU (user+sys) per rollback: $line_cpu"
echo "load average before: $load_before, after: $load_after"
{
  printf '\n## rollback-to-relaunch latency (%s, %s, %s cores, load %s -> %s)\n' \
    "$(date -u '+%F %H:%M UTC')" "$(uname -r)" "$(nproc)" "$load_before" "$load_after"
  printf '`bench/relaunch_bench.sh %s %s %s`: tree %s; 10 files of 64 KiB rewritten; %s operator rollbacks alternating between the two nodes, agent `/bin/sh` pinging a fifo.\n\n' \
    "${1:-build}" "$rootfs" "$runs" "$tree_desc" "$runs"
  printf -- '- rollback sent -> relaunched agent alive: %s\n' "$line_wall"
  printf -- '- ctl rollback returned (kill + restore + relaunch): %s\n' "$line_op"
  printf -- '- CPU (user+sys) per rollback: %s\n' "$line_cpu"
} >> "$here/RESULTS.md"
