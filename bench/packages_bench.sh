#!/usr/bin/env bash
# What package deltas cost a capture: the same package installs captured by
# a daemon with AGENTENV_PACKAGES=off (no detection) and on (the default),
# side by side, several passes alternating, so drift hits both alike.
#
# The tree: FILES small files, a dpkg status file of DEBS packages (~0.5 KiB
# each, as dpkg writes them), a venv with 50 distributions and a project
# with 200 npm packages. Each round is one "install", written the way the
# tools write: the status file rewritten whole (temp file + rename) with
# one more package, 20 files of it under usr/share, a new dist-info
# directory with METADATA, and a new node_modules package. The daemon logs
# each capture's latency (debounce end to committed node, wall and CPU of
# the capturing thread) on its node line; medians of REPS rounds per pass.
# A second table times one-shot `agentenv snap` (a stat-cached walk) the
# same way. Target: on <= 1.10 x off.
#
# Usage: bench/packages_bench.sh [agentenv-binary]
# Env:   FILES (10000), DEBS (2000), REPS (10), PASSES (2),
#        WORK (scratch, default /var/tmp/agentenv-pkgbench, wiped), KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
FILES=${FILES:-10000}
DEBS=${DEBS:-2000}
REPS=${REPS:-10}
PASSES=${PASSES:-2}
WORK=${WORK:-/var/tmp/agentenv-pkgbench}

die() { echo "packages_bench: $*" >&2; exit 1; }
[ -x "$AE" ] || die "$AE: not an executable (build: cmake --build build --target agentenv)"
rm -rf "$WORK"; mkdir -p "$WORK"
DAEMON_PID=
cleanup() {
  if [ -n "$DAEMON_PID" ]; then kill "$DAEMON_PID" 2>/dev/null || true; wait "$DAEMON_PID" 2>/dev/null || true; fi
  if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT
note() { printf '%s\n' "$*" >&2; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }

deb() {  # deb NAME VERSION: one status paragraph
  printf 'Package: %s\nStatus: install ok installed\nPriority: optional\nSection: misc\nInstalled-Size: 1234\n' "$1"
  printf 'Maintainer: Someone <someone@example.org>\nArchitecture: amd64\nVersion: %s\n' "$2"
  printf 'Depends: libc6 (>= 2.34), zlib1g (>= 1:1.2.0)\nDescription: package %s\n' "$1"
  printf ' A description of several lines, as most packages have.\n .\n It goes on for a while.\n\n'
}
src=$WORK/src
mkdir -p "$src/var/lib/dpkg" "$src/var/lib/apt"
for ((i = 0; i < DEBS; i++)); do deb "pkg$i" "1.$i-1"; done >"$src/var/lib/dpkg/status"
body=$(head -c 3000 /dev/urandom | base64 -w 76)
for ((i = 0; i < FILES; i++)); do
  d=$src/data/d$((i / 100))
  ((i % 100 == 0)) && mkdir -p "$d"
  printf '%s %d\n' "${body:0:$((1024 + (i * 37) % 2048))}" "$i" >"$d/f$i"
done
site=$src/root/proj/.venv/lib/python3.11/site-packages
for ((i = 0; i < 50; i++)); do
  mkdir -p "$site/dist$i-1.0.dist-info" "$site/dist$i"
  printf 'Metadata-Version: 2.1\nName: dist%d\nVersion: 1.0\n' "$i" >"$site/dist$i-1.0.dist-info/METADATA"
  echo "x" >"$site/dist$i/__init__.py"
done
mods=$src/root/app/node_modules
mkdir -p "$mods"
printf '{"name":"app","dependencies":{"m0":"1"}}\n' >"$src/root/app/package.json"
for ((i = 0; i < 200; i++)); do
  mkdir -p "$mods/m$i"
  printf '{"name":"m%d","version":"1.0.%d"}\n' "$i" "$i" >"$mods/m$i/package.json"
  echo "module.exports = $i;" >"$mods/m$i/index.js"
done
root=$WORK/ae
"$AE" init --root "$root" --from "$src" >>"$WORK/log" 2>&1 || die "init failed (see $WORK/log)"
rm -rf "$src"
tree=$root/work/current
round=0
sync

install_one() {  # one package install into the live tree
  local n=$((++round)) st=$tree/var/lib/dpkg/status
  { cat "$st"; deb "new$n" "2.$n-1"; } >"$st-new" && mv "$st-new" "$st"
  mkdir -p "$tree/usr/share/new$n"
  for ((k = 0; k < 20; k++)); do echo "file $k of $n" >"$tree/usr/share/new$n/f$k"; done
  local s=$tree/root/proj/.venv/lib/python3.11/site-packages
  mkdir -p "$s/new$n-2.0.dist-info" "$s/new$n"
  printf 'Metadata-Version: 2.1\nName: new%d\nVersion: 2.0\n' "$n" >"$s/new$n-2.0.dist-info/METADATA"
  : >"$s/new$n-2.0.dist-info/REQUESTED"
  echo x >"$s/new$n/__init__.py"
  mkdir -p "$tree/root/app/node_modules/new$n"
  printf '{"name":"new%d","version":"3.0.0"}\n' "$n" >"$tree/root/app/node_modules/new$n/package.json"
}
next_node() {  # next_node LOG SKIP: "wall_ms cpu_ms" of the node line after SKIP
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
# The passes run in this shell (not in $(...)): `round` must keep counting.
capture_pass() {  # capture_pass MODE(off|on): OUT = medians "wall cpu" of REPS captures
  local mode=$1 dlog=$WORK/daemon-$1-$round.log walls=() cpus=() seen w c
  AGENTENV_PACKAGES=$mode "$AE" daemon --root "$root" --quiet-ms 50 --max-delay-ms 2000 2>"$dlog" &
  DAEMON_PID=$!
  until grep -q 'serving' "$dlog"; do sleep 0.05; kill -0 $DAEMON_PID || die "daemon died: $(cat "$dlog")"; done
  for ((r = 0; r < REPS; r++)); do
    seen=$(grep -c ': node ' "$dlog" || true)
    install_one
    read -r w c < <(next_node "$dlog" "$seen")
    walls+=("$w") cpus+=("$c")
  done
  kill "$DAEMON_PID"; wait "$DAEMON_PID" || true; DAEMON_PID=
  if [ "$mode" = on ]; then grep -q ': node .*apt +new' "$dlog" || die "no package label in $dlog"; fi
  OUT="$(median "${walls[@]}") $(median "${cpus[@]}")"
}
snap_pass() {  # snap_pass MODE: OUT = medians "wall cpu" of REPS `agentenv snap`
  local mode=$1 walls=() cpus=() tf=$WORK/time.out TIMEFORMAT='%3R %3U %3S' w c
  for ((r = 0; r < REPS; r++)); do
    install_one
    { time AGENTENV_PACKAGES=$mode "$AE" snap --root "$root" >>"$WORK/log" 2>&1 || die "snap failed"; } 2>"$tf"
    read -r w c < <(awk '{printf "%.1f %.1f\n", $1 * 1000, ($2 + $3) * 1000}' "$tf")
    walls+=("$w") cpus+=("$c")
  done
  OUT="$(median "${walls[@]}") $(median "${cpus[@]}")"
}

declare -A RES
for ((p = 0; p < PASSES; p++)); do
  for mode in off on; do
    note "== pass $p: capture, AGENTENV_PACKAGES=$mode"
    capture_pass $mode
    RES[capture,$mode,$p]=$OUT
    note "== pass $p: snap, AGENTENV_PACKAGES=$mode"
    snap_pass $mode
    RES[snap,$mode,$p]=$OUT
  done
done

printf '\nmachine: %s, %s CPUs; load average: %s\n' "$(uname -r)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'tree: %s files, dpkg status of %s packages (%s KiB), 50 dists, 200 npm packages; %s installs per pass\n' \
  "$FILES" "$DEBS" "$(($(stat -c %s "$tree/var/lib/dpkg/status") / 1024))" "$REPS"
printf '%-8s %-5s %-24s %-24s %-10s\n' what pass "off wall/cpu ms" "on wall/cpu ms" "on/off wall"
for what in capture snap; do
  ons=() offs=()
  for ((p = 0; p < PASSES; p++)); do
    read -r ow oc <<<"${RES[$what,off,$p]}"
    read -r nw nc <<<"${RES[$what,on,$p]}"
    offs+=("$ow") ons+=("$nw")
    printf '%-8s %-5s %-24s %-24s %-10s\n' "$what" "$p" "$ow / $oc" "$nw / $nc" "$(awk -v a="$nw" -v b="$ow" 'BEGIN{printf "%.2f", a / b}')"
  done
  mo=$(median "${offs[@]}") mn=$(median "${ons[@]}")
  if awk -v a="$mn" -v b="$mo" 'BEGIN{exit !(a <= 1.10 * b)}'; then
    echo "PASS  $what with package deltas within 10% of without (median wall $mn ms vs $mo ms)"
  else
    echo "MISS  $what with package deltas within 10% of without (median wall $mn ms vs $mo ms)"
  fi
done
