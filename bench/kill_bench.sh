#!/usr/bin/env bash
# SIGKILLs init, import and restore at random moments and counts what they
# leave behind once the next command has run: half-made repositories that
# a command accepts, scratch directories, restore temp files in the live
# tree or in history, fsck failures, lost nodes.
#   bench/kill_bench.sh [KILLS=210] [FILES=3000]
# Uses build/cli/agentenv; works in a temp dir it removes.
set -euo pipefail
KILLS=${1:-210}
FILES=${2:-3000}
BIN=${AGENTENV_BIN:-$(cd "$(dirname "$0")/.." && pwd)/build/cli/agentenv}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
SRC=$T/src
for ((i = 0; i < FILES; i++)); do
  d=$SRC/d$((i % 40)); mkdir -p "$d"
  head -c $((2000 + i % 700)) /dev/urandom > "$d/f$i"
done
tar -C "$SRC" -cf "$T/src.tar" .
ae() { "$BIN" "$@" --root "$T/repo"; }
# Kills "$@" after a random 0..max_ms; prints 1 if it was killed.
kill_after() {
  local max_ms=$1; shift
  "$BIN" "$@" --root "$T/repo" >/dev/null 2>&1 & local pid=$!
  sleep "$(awk -v m="$max_ms" 'BEGIN{srand(); printf "%.3f", rand()*m/1000}')"
  if kill -9 "$pid" 2>/dev/null; then wait "$pid" 2>/dev/null || true; echo 1; else wait "$pid" 2>/dev/null || true; echo 0; fi
}
temps() { find "$T/repo/work/current" -name '.agentenv-tmp-*' 2>/dev/null | wc -l; }
scratch() { find "$T/repo/work" -mindepth 1 -maxdepth 1 ! -name current | tee -a "$T/left" | wc -l; }
nodes() { ae status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"])'; }

killed=0; half_accepted=0; left_scratch=0; left_temps=0; temps_in_history=0; fsck_failed=0; lost=0
ae init -q --from "$SRC"
first=$(ae head --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["id"])')
for ((k = 0; killed < KILLS; k++)); do
  case $((k % 3)) in
  0)  # init into a fresh root, then the next command and a retry
      rm -rf "$T/repo2"; mv "$T/repo" "$T/repo2"
      if [[ $(kill_after 400 init -q --from "$SRC") == 1 ]]; then
        killed=$((killed + 1))
        if [[ -e $T/repo/meta ]] && ae snap -q >/dev/null 2>&1 && [[ -e $T/repo/initializing ]]; then
          half_accepted=$((half_accepted + 1))
        fi
      fi
      rm -rf "$T/repo"; mv "$T/repo2" "$T/repo" ;;
  1)  # import, then the next import
      before=$(nodes)
      if [[ $(kill_after 300 import "$T/src.tar") == 1 ]]; then killed=$((killed + 1)); fi
      ae import -q "$T/src.tar" >/dev/null
      left_scratch=$((left_scratch + $(scratch)))
      [[ $(nodes) -gt $before ]] || lost=$((lost + 1)) ;;
  2)  # restore to the first node after changing every file, then status and snap
      for f in "$T"/repo/work/current/d1/*; do echo changed >> "$f"; done
      ae snap -q
      before=$(nodes)
      if [[ $(kill_after 300 restore "$first") == 1 ]]; then killed=$((killed + 1)); fi
      ae status >/dev/null
      left_temps=$((left_temps + $(temps)))
      ae snap -q --allow-empty >/dev/null 2>&1 || ae snap -q >/dev/null
      ae export HEAD -q -o "$T/h.tar"
      temps_in_history=$((temps_in_history + $(tar -tf "$T/h.tar" | grep -c '\.agentenv-tmp-[0-9]*-[0-9]*$' || true)))
      [[ $(nodes) -ge $before ]] || lost=$((lost + 1)) ;;
  esac
  if (( k % 15 == 14 )); then ae fsck -q >/dev/null 2>&1 || fsck_failed=$((fsck_failed + 1)); fi
done
ae fsck -q >/dev/null 2>&1 || fsck_failed=$((fsck_failed + 1))
[[ -s $T/left ]] && { echo "left in work/:"; sort -u "$T/left"; }
echo "kills=$killed attempts=$k files=$FILES"
echo "half-made repositories accepted=$half_accepted scratch dirs left=$left_scratch temp files left=$left_temps" \
     "temp names in history=$temps_in_history fsck failures=$fsck_failed lost nodes=$lost"
