#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) into ./build-fuzz and
# runs them, one after the other.
#
#   fuzz/run.sh [TARGET|all] [SECONDS | RUNSruns]     default: all, 60 seconds each
#   fuzz/run.sh tar_import 600          ten minutes
#   fuzz/run.sh pack 1000000runs        a million executions
#   fuzz/run.sh merge TARGET            minimize what the runs found into fuzz/corpus/TARGET
#
# Each target starts from fuzz/corpus/TARGET and fuzz/regressions/TARGET; what
# it finds goes to build-fuzz/fuzz-corpus/TARGET (not committed until merged)
# and crash inputs to build-fuzz/fuzz-out/TARGET/. A crash input is reproduced
# with build-fuzz/fuzz/TARGET_fuzzer FILE, and kept as a regression by copying
# it into fuzz/regressions/TARGET/ (the normal build's ctest replays it).
# Scratch files go to /dev/shm when it exists. As root, each target runs in
# a mount namespace where only its scratch, corpus and output are writable.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
targets=(tar_import tar_filter oci_layer oci_layout pack tree node manifest meta_rows socket mcp ignore refs packages http_head provenance session_cookie patch init_message)

# Longest input per target: archives and layouts need room.
max_len() {
  case $1 in
    tar_import|oci_layer|tar_filter) echo 16384 ;;
    oci_layout) echo 32768 ;;
    socket) echo 1024 ;;
    mcp) echo 512 ;;
    http_head) echo 20000 ;;
    *) echo 4096 ;;
  esac
}

# The socket server's threads keep memory between inputs: libFuzzer would
# run a leak check after every input (most of the time); LeakSanitizer
# still checks at exit.
extra_flags() {
  case $1 in
    socket|mcp) echo -detect_leaks=0 ;;
  esac
}

build() {
  if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DAGENTENV_FUZZ=ON -DAGENTENV_TESTS=OFF >/dev/null
  fi
  cmake --build build-fuzz --target "${@/%/_fuzzer}"
}

if [ "${1:-}" = merge ]; then
  t=${2:?usage: fuzz/run.sh merge TARGET}
  build "$t"
  mkdir -p "fuzz/corpus/$t"
  tmp=$(mktemp -d)
  # -merge=1 keeps the smallest inputs that reach every feature of all of them.
  "build-fuzz/fuzz/${t}_fuzzer" -merge=1 -max_len="$(max_len "$t")" "$tmp" "fuzz/corpus/$t" "build-fuzz/fuzz-corpus/$t"
  rm -rf "fuzz/corpus/$t" && mv "$tmp" "fuzz/corpus/$t"
  du -sh "fuzz/corpus/$t"
  exit 0
fi

which=${1:-all}
budget=${2:-60}
if [ "$which" = all ]; then run=("${targets[@]}"); else run=("$which"); fi
case $budget in
  *runs) limit=(-runs="${budget%runs}") ;;
  *s) limit=(-max_total_time="${budget%s}") ;;
  *) limit=(-max_total_time="$budget") ;;
esac
build "${run[@]}"
[ -d /dev/shm ] && export TMPDIR=/dev/shm
for t in "${run[@]}"; do
  corpus=build-fuzz/fuzz-corpus/$t out=build-fuzz/fuzz-out/$t
  mkdir -p "$corpus" "$out"
  seeds=("fuzz/corpus/$t")
  [ -d "fuzz/regressions/$t" ] && seeds+=("fuzz/regressions/$t")
  dict=()
  [ -f "fuzz/dicts/$t.dict" ] && dict=(-dict="$src/fuzz/dicts/$t.dict")
  echo "== $t (${limit[*]})"
  (cd "$out" && "$src/build-fuzz/fuzz/${t}_fuzzer" "${limit[@]}" -max_len="$(max_len "$t")" $(extra_flags "$t") "${dict[@]}" \
     -print_final_stats=1 -artifact_prefix="$src/$out/" "$src/$corpus" "${seeds[@]/#/$src/}")
done
