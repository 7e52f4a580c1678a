#!/bin/sh
# exec round trip (`true`) in a runner env vs bubblewrap with the same namespaces,
# and `true` spawned into one running env (Env::Spawn) vs a fresh env each time.
# usage: bench/exec_bench.sh BUILD_DIR
set -eu
build=${1:-build-runner}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/proc" "$root/dev" "$root/sys" "$root/etc"
cp /bin/busybox "$root/bin/busybox"; ln -s busybox "$root/bin/true"; ln -s busybox "$root/bin/sh"
hyperfine -N -w 20 -r 200 --export-json "$root/h.json" \
  "$build/bench/exec_run $root /bin/true" \
  "bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts --proc /proc --dev /dev --bind $root / /bin/true"
ratio=$(python3 -c "import json;r=json.load(open('$root/h.json'))['results'];print('%.2f'%(r[0]['mean']/r[1]['mean']))")
a=$(python3 -c "import json;r=json.load(open('$root/h.json'))['results'];print('%.2f ms vs %.2f ms'%(r[0]['mean']*1e3,r[1]['mean']*1e3))")
echo "runner/bwrap ratio: $ratio ($a)"
spawn=$("$build/bench/exec_run" --spawn 200 "$root" /bin/true)
fresh=$(python3 -c "import json;r=json.load(open('$root/h.json'))['results'];print('%.1f'%(r[0]['mean']*1e6))")
echo "spawn into a running env: $spawn us vs fresh env $fresh us"
printf '\n## exec round trip (%s, %s, load %s)\n`bench/exec_bench.sh`: runner `true` %s, ratio %s (target <= 1.5); Env::Spawn of `true` into a running env %s us vs fresh env %s us\n' \
  "$(date -u +%F)" "$(uname -r), $(nproc) cores" "$(cut -d' ' -f1 /proc/loadavg)" "$a" "$ratio" "$spawn" "$fresh" >> "$(dirname "$0")/RESULTS.md"
