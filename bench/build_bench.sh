#!/usr/bin/env bash
# The CPU a clean build of the binary costs, file by file and in unity
# batches (CMakeLists.txt, AGENTENV_UNITY_BUILD), side by side: each
# configures a fresh build directory without ccache, builds only the
# `agentenv` target with -j2, and times every compile (user + system CPU of
# the compiler and its children). Prints the totals and the costliest
# translation units of each.
# Usage: bench/build_bench.sh [TOP]   (TOP: translation units listed, 15)
# Env:   DIR (/var/tmp/agentenv-build-bench): where the build directories go
set -euo pipefail
cd "$(dirname "$0")/.."
top=${1:-15}
dir=${DIR:-/var/tmp/agentenv-build-bench}
mkdir -p "$dir"
launcher="$dir/time-compile.sh"
cat >"$launcher" <<'EOF'
#!/usr/bin/env bash
# Runs a compile and appends "<CPU seconds> <object>" to $TU_LOG.
out=unknown prev=
for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done
t=$(mktemp)
/usr/bin/time -f "%U %S" -o "$t" "$@"
rc=$?
read -r u s <"$t"; rm -f "$t"
echo "$(echo "$u + $s" | bc) $out" >>"$TU_LOG"
exit $rc
EOF
chmod +x "$launcher"
for t in bc /usr/bin/time; do command -v $t >/dev/null || { echo "build_bench: $t not installed" >&2; exit 1; }; done

echo "clean build of agentenv: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for unity in OFF ON; do
  b="$dir/build-unity-$unity" log="$dir/tu-unity-$unity.log"
  rm -rf "$b" "$log"
  cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAGENTENV_TESTS=OFF -DAGENTENV_UNITY_BUILD=$unity \
    -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher" >/dev/null
  start=$(date +%s.%N)
  TU_LOG=$log /usr/bin/time -f "%U %S" -o "$dir/total" cmake --build "$b" --target agentenv -j2 >/dev/null
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  read -r u s <"$dir/total"
  printf '\nunity %s: %.0f s CPU (user %.0f + system %.0f), %.0f s wall, %d compiles (%.0f s of them); load after %s\n' \
    "$unity" "$(echo "$u + $s" | bc)" "$u" "$s" "$wall" "$(wc -l <"$log")" "$(awk '{s+=$1} END {print s}' "$log")" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
  sort -rn "$log" | head -n "$top" | sed -E 's|'"$b"'/||; s|CMakeFiles/[A-Za-z_]+\.dir/||' | awk '{printf "  %6.1f s  %s\n", $1, $2}'
done
