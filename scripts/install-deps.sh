#!/usr/bin/env bash
# Installs every Debian package that agentenv's build, tests and benchmarks
# need. Idempotent; run as root on Debian 12.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config
  libzstd-dev liblmdb-dev liburing-dev libbtrfsutil-dev libssl-dev
  libarchive-dev nlohmann-json3-dev libcli11-dev catch2
  # tests: loopback filesystems, unprivileged runs, the demo rootfs, peers
  xfsprogs btrfs-progs util-linux attr busybox-static zstd tar
  iproute2 procps dpkg
  # benchmarks: the peers we compare with
  rsync restic borgbackup ostree git bubblewrap debootstrap hyperfine time
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run this script as root" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
