#!/usr/bin/env bash
# bisect against restoring nodes one by one: a 1,000-node history (a
# busybox tree, node i rewrites etc/state, a breakage planted at node
# BROKEN), then
#   1. `agentenv bisect --test T --good ROOT --jobs K` for K = 1, 2, 4:
#      rounds and wall time (each tested node forked into a workspace)
#   2. the manual way: `agentenv restore NODE` then `agentenv exec --no-snap
#      -- sh -c T`, node after node from the good one, until T fails
# and prints the ratios. Every run finds the same node.
#
# Usage: bench/bisect_bench.sh [agentenv-binary]
# Env:   NODES (1000), BROKEN (637), WORK (scratch, default
#        /var/tmp/agentenv-bisectbench, wiped), KEEP=1 keeps it.
# Needs root (the tests run in overlay workspaces).
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
NODES=${NODES:-1000}
BROKEN=${BROKEN:-637}
WORK=${WORK:-/var/tmp/agentenv-bisectbench}
die() { echo "bisect_bench: $*" >&2; exit 1; }
[ -x "$AE" ] || die "$AE: not an executable"
[ "$(id -u)" = 0 ] || die "needs root (overlay workspaces)"
command -v jq >/dev/null || die "needs jq"
rm -rf "$WORK"; mkdir -p "$WORK/src"
cleanup() { if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; fi; }
trap cleanup EXIT
now() { date +%s.%N; }

src=$WORK/src
mkdir -p "$src"/{bin,proc,dev,sys,etc,tmp,root,run}
cp /bin/busybox "$src/bin/"
for a in sh test cat true; do ln -s busybox "$src/bin/$a"; done
echo 0 > "$src/etc/state"
R=$WORK/repo
"$AE" init --root "$R" --from "$src" -q >/dev/null
live=$R/work/current
t0=$(now)
for ((i = 1; i < NODES; i++)); do
  echo "$i" > "$live/etc/state"
  [ "$i" = "$BROKEN" ] && echo x > "$live/etc/broken"
  "$AE" snap --root "$R" -q >/dev/null
done
printf 'history: %d nodes in %.1f s\n' "$NODES" "$(echo "$(now) - $t0" | bc)" >&2
ids=$("$AE" log --root "$R" -n "$NODES" --json | jq -r '.nodes[].id' | tac)
good=$(echo "$ids" | head -1)
want=$(echo "$ids" | sed -n "$((BROKEN + 1))p")
TEST='test ! -e /etc/broken'

printf '%-28s %7s %7s %9s\n' method rounds tested wall_s
declare -A wall
for k in 1 2 4; do
  t0=$(now)
  out=$("$AE" bisect --root "$R" --test "$TEST" --good "$good" --jobs "$k" --json)
  wall[$k]=$(echo "$(now) - $t0" | bc)
  [ "$(echo "$out" | jq -r .first_bad.id)" = "$want" ] || die "K=$k found $(echo "$out" | jq -r .first_bad.short)"
  printf '%-28s %7d %7d %9.2f\n' "bisect --jobs $k" "$(echo "$out" | jq '.rounds | length')" \
    "$(echo "$out" | jq '[.rounds[].tried | length] | add')" "${wall[$k]}"
done

# The manual way, from the good node forward.
t0=$(now)
n=0
for id in $(echo "$ids" | tail -n +2); do
  n=$((n + 1))
  "$AE" restore --root "$R" -q "$id" >/dev/null
  if ! "$AE" exec --root "$R" --no-snap -q -- /bin/sh -c "$TEST" >/dev/null 2>&1; then
    [ "$id" = "$want" ] || die "restore one by one stopped at $id"
    break
  fi
done
linear=$(echo "$(now) - $t0" | bc)
printf '%-28s %7s %7d %9.2f\n' "restore + exec one by one" - "$n" "$linear"
for k in 1 2 4; do
  printf 'one by one / bisect --jobs %d: %.1fx\n' "$k" "$(echo "$linear / ${wall[$k]}" | bc -l)"
done
