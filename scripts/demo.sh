#!/usr/bin/env bash
# The main job on a built-in default: build a small busybox rootfs, version
# it, break it, roll it back, and show that it is repaired.
# Usage: scripts/demo.sh [agentenv-binary]   (repository in a fresh temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
ae=${1:-$PWD/build/cli/agentenv}
demo=$(mktemp -d /tmp/agentenv-demo.XXXXXX)
export AGENTENV_ROOT=$demo/repo
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "build a busybox rootfs in $demo/rootfs"
rootfs=$demo/rootfs
mkdir -p "$rootfs"/{bin,etc,usr/bin,usr/local/bin,var/log,root,tmp}
cp /bin/busybox "$rootfs/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ "$applet" = busybox ] || ln -s busybox "$rootfs/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$rootfs/etc/passwd"
printf 'welcome to the demo rootfs\n' >"$rootfs/etc/motd"
echo "$(find "$rootfs" | wc -l) entries"

step "agentenv init --from rootfs"
"$ae" init --from "$rootfs"
work=$AGENTENV_ROOT/work/current

step "change the tree like an agent would, then snapshot"
printf '#!/bin/sh\necho "jq 1.7 (demo)"\n' >"$work/usr/local/bin/jq"
chmod 755 "$work/usr/local/bin/jq"
echo 'nameserver 127.0.0.1' >"$work/etc/resolv.conf"
"$ae" snap -m "installed jq"
"$ae" tag good HEAD

step "break it: delete every binary and clobber /etc/passwd"
rm -rf "$work/bin" "$work/usr/local/bin/jq"
echo 'garbage' >"$work/etc/passwd"
"$ae" status
[ ! -e "$work/bin/sh" ] && echo "bin/sh is gone"

step "agentenv restore good"
"$ae" restore good

step "agentenv log"
"$ae" log

step "repaired?"
"$work/bin/busybox" sh -c "$work/usr/local/bin/jq" | grep -q 'jq 1.7' && echo "usr/local/bin/jq runs again"
[ -x "$work/bin/sh" ] && echo "bin/sh is back ($(readlink "$work/bin/sh"))"
grep -q '^root:x:0:0' "$work/etc/passwd" && echo "etc/passwd is intact"
"$ae" diff good
"$ae" status
echo
echo "demo repository left at $AGENTENV_ROOT (remove with: rm -rf $demo)"
