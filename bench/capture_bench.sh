#!/usr/bin/env bash
# Capture latency: how long after a burst of changes a durable node exists.
#
# For each tree size (synthetic trees of small files) and each change count
# (1, 10, 100 modified files):
#   journal  a running `agentenv daemon`: from the end of its debounce (the
#            change set is handed over) to the committed node. The daemon
#            measures this itself and logs it on the node line
#            ("wall_ms=... cpu_ms=..."), so the quiet period does not count.
#   scan     `agentenv snap`: a full (stat-cached) walk of the tree.
#   rsync    `rsync -a --link-dest=<previous>`: a new hard-linked snapshot.
# Medians of REPS samples; CPU time is user+sys of the process (for the
# daemon: of the capturing thread).
# Target: journal with 10 changes <= 1/50 of rsync --link-dest, and
# independent of tree size (largest / smallest tree <= 2).
#
# Usage: bench/capture_bench.sh [agentenv-binary]
# Env:   SIZES ("10000 100000" files), CHANGES ("1 10 100"), REPS (5),
#        WORK (scratch dir, default /var/tmp/agentenv-capturebench, wiped),
#        KEEP=1 to keep WORK.
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
SIZES=${SIZES:-10000 100000}
CHANGES=${CHANGES:-1 10 100}
REPS=${REPS:-5}
WORK=${WORK:-/var/tmp/agentenv-capturebench}

die() { echo "capture_bench: $*" >&2; exit 1; }
[ -x "$AE" ] || die "$AE: not an executable (build: cmake --build build --target agentenv)"
command -v rsync >/dev/null || die "rsync: not installed (scripts/install-deps.sh)"

rm -rf "$WORK"; mkdir -p "$WORK"
DAEMON_PID=
cleanup() {
  if [ -n "$DAEMON_PID" ]; then kill "$DAEMON_PID" 2>/dev/null || true; wait "$DAEMON_PID" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that a killed run still unmounts and detaches
note() { printf '%s\n' "$*" >&2; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }

# make_tree DIR N: N files of 1-4 KiB, 100 per directory, two levels deep.
make_tree() {
  local dir=$1 n=$2 i d
  local body; body=$(head -c 4096 /dev/urandom | base64 -w 76)
  for ((i = 0; i < n; i++)); do
    d=$dir/d$((i / 10000))/e$((i / 100 % 100))
    ((i % 100 == 0)) && mkdir -p "$d"
    printf '%s %d\n' "${body:0:$((1024 + (i * 37) % 3072))}" "$i" >"$d/f$i"
  done
}
# change TREE N ROUND: rewrites N files spread over the tree.
change() {
  local tree=$1 n=$2 round=$3 total=$4 i k
  for ((k = 0; k < n; k++)); do
    i=$(( (k * 7919 + round * 104729) % total ))
    printf 'round %d change %d\n' "$round" "$k" >>"$tree/d$((i / 10000))/e$((i / 100 % 100))/f$i"
  done
}
# timed OUTVAR cmd...: runs cmd; OUTVAR gets "wall_ms cpu_ms".
timed() {
  local -n _out=$1; shift
  local tf=$WORK/time.out TIMEFORMAT='%3R %3U %3S'
  { time "$@" >>"$WORK/log" 2>&1 || { tail -5 "$WORK/log" >&2; die "failed: $*"; }; } 2>"$tf"
  _out=$(awk '{printf "%.1f %.1f", $1 * 1000, ($2 + $3) * 1000}' "$tf")
}
# next_node LOG SKIP: waits for the node line after the first SKIP ones and
# prints its "wall_ms cpu_ms".
next_node() {
  local log=$1 skip=$2 deadline=$((SECONDS + 120)) line
  while ((SECONDS < deadline)); do
    line=$(grep ': node ' "$log" | sed -n "$((skip + 1))p" || true)
    if [ -n "$line" ]; then
      sed -E 's/.*wall_ms=([0-9.]+) cpu_ms=([0-9.]+).*/\1 \2/' <<<"$line"
      return
    fi
    sleep 0.02
  done
  die "no node line in $log after 120 s"
}

declare -A RES  # RES[size,changes,mode] = "wall cpu"
for size in $SIZES; do
  note "== tree of $size files"
  src=$WORK/src-$size
  make_tree "$src" "$size"
  root=$WORK/ae-$size
  "$AE" init --root "$root" --from "$src" >>"$WORK/log" 2>&1 || die "init failed (see $WORK/log)"
  tree=$root/work/current
  round=0
  # Setup writes must not be flushed inside the first measured fsyncs.
  sync

  # journal: one daemon for every sample of this size.
  dlog=$WORK/daemon-$size.log
  "$AE" daemon --root "$root" --quiet-ms 50 --max-delay-ms 2000 2>"$dlog" &
  DAEMON_PID=$!
  until grep -q 'serving' "$dlog"; do sleep 0.05; kill -0 $DAEMON_PID || die "daemon died: $(cat "$dlog")"; done
  for n in $CHANGES; do
    walls=() cpus=()
    for ((r = 0; r < REPS; r++)); do
      seen=$(grep -c ': node ' "$dlog" || true)
      change "$tree" "$n" $((++round)) "$size"
      read -r w c < <(next_node "$dlog" "$seen")
      walls+=("$w") cpus+=("$c")
    done
    RES[$size,$n,journal]="$(printf '%.1f %.1f' "$(median "${walls[@]}")" "$(median "${cpus[@]}")")"
  done
  kill "$DAEMON_PID"; wait "$DAEMON_PID" || true; DAEMON_PID=

  # scan: a full walk per snapshot.
  for n in $CHANGES; do
    walls=() cpus=()
    for ((r = 0; r < REPS; r++)); do
      change "$tree" "$n" $((++round)) "$size"
      timed t "$AE" snap --root "$root" -m "scan $n"
      walls+=("${t% *}") cpus+=("${t#* }")
    done
    RES[$size,$n,scan]="$(median "${walls[@]}") $(median "${cpus[@]}")"
  done

  # rsync --link-dest: each snapshot hard-links what did not change.
  rs=$WORK/rsync-$size
  mkdir -p "$rs"
  rsync -a "$tree/" "$rs/s0/"
  prev=$rs/s0 k=0
  for n in $CHANGES; do
    walls=() cpus=()
    for ((r = 0; r < REPS; r++)); do
      change "$tree" "$n" $((++round)) "$size"
      k=$((k + 1))
      timed t rsync -a --link-dest="$prev" "$tree/" "$rs/s$k/"
      walls+=("${t% *}") cpus+=("${t#* }")
      prev=$rs/s$k
    done
    RES[$size,$n,rsync]="$(median "${walls[@]}") $(median "${cpus[@]}")"
  done
  rm -rf "$rs" "$src"
done

sizes=($SIZES)
small=${sizes[0]} large=${sizes[-1]}
printf '\nmachine: %s, %s CPUs; load average: %s\n' "$(uname -r)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-7s %-22s %-22s %-22s %-14s\n' files changes "journal wall/cpu ms" "scan wall/cpu ms" "rsync wall/cpu ms" "rsync/journal"
for size in $SIZES; do
  for n in $CHANGES; do
    read -r jw jc <<<"${RES[$size,$n,journal]}"
    read -r sw sc <<<"${RES[$size,$n,scan]}"
    read -r rw rc <<<"${RES[$size,$n,rsync]}"
    printf '%-8s %-7s %-22s %-22s %-22s %-14s\n' "$size" "$n" "$jw / $jc" "$sw / $sc" "$rw / $rc" \
      "$(awk -v r="$rw" -v j="$jw" 'BEGIN{printf "%.0fx", r / (j > 0.001 ? j : 0.001)}')"
  done
done
echo
verdict() { if awk "BEGIN{exit !($2)}"; then echo "PASS  $1"; else echo "MISS  $1"; fi; }
for size in $SIZES; do
  read -r jw _ <<<"${RES[$size,10,journal]:-0 0}"
  read -r rw _ <<<"${RES[$size,10,rsync]:-0 0}"
  verdict "journal 10 changes <= rsync --link-dest / 50 at $size files ($jw ms vs $rw ms)" "$jw * 50 <= $rw"
done
read -r js _ <<<"${RES[$small,10,journal]:-0 0}"
read -r jl _ <<<"${RES[$large,10,journal]:-0 0}"
read -r _ jsc <<<"${RES[$small,10,journal]:-0 0}"
read -r _ jlc <<<"${RES[$large,10,journal]:-0 0}"
verdict "journal 10 changes, CPU independent of tree size ($small: $jsc ms, $large: $jlc ms; at most 2x or +1 ms)" "$jlc <= 2 * $jsc || $jlc <= $jsc + 1"
verdict "journal 10 changes, wall independent of tree size ($small: $js ms, $large: $jl ms; at most 2x or +1 ms)" "$jl <= 2 * $js || $jl <= $js + 1"
