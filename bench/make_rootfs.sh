#!/bin/bash
# Builds the benchmark rootfs (Debian bookworm minbase + build-essential +
# python3, tens of thousands of files) once and reuses it afterwards.
# Usage: bench/make_rootfs.sh [dir]   (default /var/tmp/agentenv-bench/rootfs)
# Env:   INCLUDE: the packages besides minbase (default build-essential,python3);
#        bench/make_rootfs.sh /var/tmp/agentenv-bench/rootfs-dev with
#        INCLUDE=build-essential,python3,python3-pip,git,nodejs,cmake,libboost1.74-dev is
#        the larger dev tree (38k entries, 923 MB; debootstrap cannot resolve npm's
#        dependencies) bench/envs_bench.sh takes
#        with ROOTFS=.
# Prints the rootfs path on stdout. Needs root (debootstrap).
set -euo pipefail

dir=${1:-/var/tmp/agentenv-bench/rootfs}
mirror=http://deb.debian.org/debian

# A completed build leaves this marker; a half-built tree (interrupted
# debootstrap) is rebuilt from scratch.
if [[ -f "$dir/.agentenv-bench-complete" ]]; then
  echo "$dir"
  exit 0
fi
if [[ $EUID -ne 0 ]]; then
  echo "make_rootfs: $dir: debootstrap needs root" >&2
  exit 1
fi
# Callers at the same time (tests run in parallel) build it once: the
# others wait for the lock and find the marker.
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if [[ -f "$dir/.agentenv-bench-complete" ]]; then
  echo "$dir"
  exit 0
fi

rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
debootstrap --variant=minbase --include="${INCLUDE:-build-essential,python3}" bookworm "$dir" "$mirror" >&2
# The apt archive cache is download debris, not part of a rootfs an agent uses.
rm -f "$dir"/var/cache/apt/archives/*.deb
touch "$dir/.agentenv-bench-complete"
echo "$dir"
