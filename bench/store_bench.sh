#!/bin/bash
# Ingest of a real rootfs: agentenv store vs restic, borg and tar|zstd on the
# same tree in the same run, plus the 2-core SHA-256 bound.
#
# Usage: bench/store_bench.sh [--record] [build_dir]
#   build_dir defaults to build-benchstore (needs store_ingest, sha256_bound).
#   --record appends the result table to bench/RESULTS.md.
#   RUNS=n (default 3) rounds; each tool runs once per round, interleaved,
#   and the table shows the best round (the host may be shared).
# Every tool runs with the tree in the page cache (a warm-up tar read
# first); repos live in /var/tmp/agentenv-bench and are removed before each
# run and at exit. Needs root for the first run (debootstrap in make_rootfs.sh).
#
# What each tool stores differs: restic/borg/tar also keep metadata and
# symlinks, the store only file contents (metadata is snap/'s job, small).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
record=0
if [[ ${1:-} == --record ]]; then record=1; shift; fi
build=${1:-$here/../build-benchstore}
runs=${RUNS:-3}
work=/var/tmp/agentenv-bench
root=$("$here/make_rootfs.sh")

export RESTIC_PASSWORD=agentenv-bench
export RESTIC_CACHE_DIR=$work/restic-cache
export BORG_BASE_DIR=$work/borg-base
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes

clean() {
  rm -rf "$work/agentenv-store" "$work/restic-repo" "$work/restic-cache" "$work/borg-repo" \
    "$work/borg-base" "$work/tar.zst"
}
trap clean EXIT
clean

# now() in seconds with ns resolution; elapsed since $1.
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc -l; }
# CPU seconds (user+sys) of all finished children of this shell. The host
# may be shared, so the table shows CPU time next to wall time. `times` must
# run in this shell (a subshell's children counters start at zero).
# cpu_mark sets $cpu to that number.
cpu_mark() {
  times >"$work/times.txt"
  cpu=$(tail -1 "$work/times.txt" | awk '{ split($1, a, "m"); split($2, b, "m"); print a[1]*60 + a[2] + b[1]*60 + b[2] }')
}

# measure <name> <command...>: runs the command (with the repos cleaned
# first), keeps the lowest wall and CPU seconds over the rounds in
# ${name}_s / ${name}_c. The minimum is the run least disturbed by others.
measure() {
  local name=$1 c t w u
  shift
  clean
  prepare_$name
  sync  # no tool pays for the writeback of the one before it
  cpu_mark; c=$cpu; t=$(now)
  "$@"
  w=$(since "$t"); cpu_mark; u=$(echo "$cpu - $c" | bc -l)
  stored_$name
  local ws=${name}_s uc=${name}_c
  if [[ -z ${!ws:-} ]] || (($(echo "$w < ${!ws}" | bc))); then printf -v "$ws" '%s' "$w"; fi
  if [[ -z ${!uc:-} ]] || (($(echo "$u < ${!uc}" | bc))); then printf -v "$uc" '%s' "$u"; fi
}
prepare_ae() { :; }
run_ae() { "$build/bench/store_ingest" "$root" "$work/agentenv-store" >"$work/ingest.out"; }
stored_ae() {
  ae_stored=$(du -sb "$work/agentenv-store" | cut -f1)
  cat "$work/ingest.out" >&2
}
prepare_tz1() { :; }
run_tz1() { tar -cf - -C "$root" . | zstd -1 -T0 -q >/dev/null; }
stored_tz1() { tz1_stored=$(tar -cf - -C "$root" . | zstd -1 -T0 -q | wc -c); }
prepare_tz3() { :; }
run_tz3() { tar -cf - -C "$root" . | zstd -T0 -q >"$work/tar.zst"; }
stored_tz3() { tz3_stored=$(stat -c %s "$work/tar.zst"); }
prepare_restic() { restic init -q --repo "$work/restic-repo"; }
run_restic() { restic backup -q --repo "$work/restic-repo" "$root" >&2; }
stored_restic() { restic_stored=$(du -sb "$work/restic-repo" | cut -f1); }
prepare_borg() { borg init -e none "$work/borg-repo"; }
run_borg() { borg create "$work/borg-repo::bench" "$root" >&2; }
stored_borg() { borg_stored=$(du -sb "$work/borg-repo" | cut -f1); }

echo "tree: $root" >&2
tar -cf - -C "$root" . >/dev/null   # warm the page cache
files=$(find "$root" -type f | wc -l)
sha=$("$build/bench/sha256_bound" 2 2 | sed -n 's/.*sha256_mbps=\([0-9.]*\).*/\1/p')
load_before=$(cut -d' ' -f1 /proc/loadavg)
for ((round = 1; round <= runs; round++)); do
  echo "round $round/$runs" >&2
  for tool in ae tz1 tz3 restic borg; do measure $tool run_$tool; done
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
kv() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p;s/^$1=\([0-9.]*\).*/\1/p" "$work/ingest.out" | head -1; }
bytes=$(kv bytes)
ae_objects=$(kv objects)

row() {  # name seconds cpu_seconds stored objects
  printf '| %s | %.2f | %.2f | %.0f | %s | %.1f |\n' "$1" "$2" "$3" "$(echo "$bytes / 1000000 / $2" | bc -l)" \
    "$5" "$(echo "$4 / 1000000" | bc -l)"
}
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }
table=$(
  echo "tree: debootstrap bookworm minbase+build-essential+python3, $files files, $(printf '%.1f' "$(echo "$bytes/1000000" | bc -l)") MB of file data; 2-thread SHA-256 bound: ${sha} MB/s"
  echo
  echo "| tool | wall s | CPU s | MB/s (wall) | objects | stored MB |"
  echo "|---|---|---|---|---|---|"
  row "agentenv store_ingest ($(nproc) threads)" "$ae_s" "$ae_c" "$ae_stored" "$ae_objects"
  row "restic 0.14 backup" "$restic_s" "$restic_c" "$restic_stored" "-"
  row "borg 1.2 create (lz4)" "$borg_s" "$borg_c" "$borg_stored" "-"
  row "tar -c \| zstd -1 -T0 >/dev/null" "$tz1_s" "$tz1_c" "$tz1_stored" "-"
  row "tar -c \| zstd -T0 (level 3)" "$tz3_s" "$tz3_c" "$tz3_stored" "-"
  echo
  echo "- speed: restic/agentenv $(ratio "$restic_s" "$ae_s")x (target >= 3), borg/agentenv $(ratio "$borg_s" "$ae_s")x (target >= 3), agentenv/(tar|zstd -1) $(ratio "$ae_s" "$tz1_s")x (target <= 1.5); agentenv at $(ratio "$(echo "$bytes/1000000/$ae_s" | bc -l)" "$sha") of the SHA-256 bound"
  echo "- CPU: restic/agentenv $(ratio "$restic_c" "$ae_c")x, borg/agentenv $(ratio "$borg_c" "$ae_c")x, agentenv/(tar|zstd -1) $(ratio "$ae_c" "$tz1_c")x"
  echo "- stored: agentenv/restic $(ratio "$ae_stored" "$restic_stored"), agentenv/borg $(ratio "$ae_stored" "$borg_stored"), agentenv/(tar|zstd -1) $(ratio "$ae_stored" "$tz1_stored") (target <= 1 vs restic and borg)"
  echo "- best of $runs rounds (wall and CPU minimum separately); load average $load_before before, $load_after after"
)
echo "$table"
if [[ $record == 1 ]]; then
  {
    echo
    echo "## store ingest vs restic/borg/tar ($(date +%F), $(uname -r), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
    echo "\`bench/store_bench.sh\`:"
    echo
    echo "$table"
  } >>"$here/RESULTS.md"
fi
