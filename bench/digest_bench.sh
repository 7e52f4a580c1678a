#!/usr/bin/env bash
# The digest's size and time for a scripted day and a week of such days
# (bench/day_gen.h through history_gen: apt/pip/npm installs, failing
# tests, a failed build, an uninstall and `rm -rf` rolled back, a fork, a
# tournament of three, a tag; ~2,400 nodes a day), beside what reading the
# same history as `log` lines would cost a model.
#
#   1. `log --digest` of the day and of the week at the default budget
#      (2,000 tokens): tokens (characters / 4) and wall time
#   2. the same with no budget to speak of (--max-tokens 1000000): what
#      the page holds before anything is cut
#   3. `log -n ALL` of the day as text: the tokens a model would read
#      without the digest (the ratio is the digest's saving)
#
# Usage: bench/digest_bench.sh [agentenv-binary]
# Env:   WORK (scratch, default /dev/shm/agentenv-digestbench, wiped),
#        NODES (per day, 2400), KEEP=1 to keep WORK.
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
GEN=${GEN:-$(dirname "$AE")/../bench/history_gen}
WORK=${WORK:-/dev/shm/agentenv-digestbench}
NODES=${NODES:-2400}

die() { echo "digest_bench: $*" >&2; exit 1; }
[ -x "$AE" ] || die "$AE: not an executable (build: ninja -C build agentenv)"
[ -x "$GEN" ] || die "$GEN: not an executable (build: ninja -C build history_gen)"
command -v jq >/dev/null || die "jq: not installed"
rm -rf "$WORK"
mkdir -p "$WORK"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

ms() { local a b; a=$(date +%s%N); "$@" >/dev/null; b=$(date +%s%N); echo $(( (b - a) / 1000000 )); }
tokens() { jq -r '.tokens' "$1"; }

"$GEN" day "$WORK/day" "$NODES" >/dev/null
"$GEN" week "$WORK/week" "$NODES" >/dev/null
echo "history_gen: day $("$AE" --root "$WORK/day" log -n 1000000 --json | jq '.nodes | length') nodes," \
     "week $("$AE" --root "$WORK/week" log -n 1000000 --json | jq '.nodes | length') nodes"

printf '%-34s %10s %10s\n' "digest" "tokens" "wall ms"
for span in day week; do
  since="2 days ago"
  [ $span = week ] && since="8 days ago"
  for budget in 2000 1000000; do
    out="$WORK/$span-$budget.json"
    "$AE" --root "$WORK/$span" log --digest --since "$since" --max-tokens "$budget" --json >"$out"
    wall=$(ms "$AE" --root "$WORK/$span" log --digest --since "$since" --max-tokens "$budget" --json)
    label="$span, budget $budget"
    [ "$budget" = 1000000 ] && label="$span, no budget"
    printf '%-34s %10s %10s\n' "$label" "$(tokens "$out")" "$wall"
  done
done
log_chars=$("$AE" --root "$WORK/day" log -n 1000000 | wc -c)
day_tokens=$(tokens "$WORK/day-2000.json")
echo "log of the day as text: $(( log_chars / 4 )) tokens; the digest is $(( log_chars / 4 / day_tokens ))x smaller"
echo
echo "--- the day's digest (budget 2000)"
jq -r '.text' "$WORK/day-2000.json"
