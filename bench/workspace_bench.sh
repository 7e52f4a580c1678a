#!/usr/bin/env bash
# Workspaces and tournaments against their peers, on a freshly made loopback
# filesystem (fallocate'd image, so first writes cost what they cost; ext4
# by default, FS=xfs for XFS with reflink), all in one run:
#
#   1. fork of a node: the first one (materializes the node: agentenv's
#      restore path) vs `cp -a` of the same tree; a second fork of the same
#      node (the lower exists: O(1))
#   1b. fork of a node 10 changed files away from a materialized one
#      (hardlinks to the materialized lower)
#   1c. restore of usr/lib/python3.11 + usr/lib/gcc deleted from the live
#      tree, with HEAD's tree materialized (clones from the lower on XFS)
#      and without
#   2. snapshot of a workspace with 10 changed files (reads only the upper),
#      on synthetic trees of 10k and 100k files: the cost must not follow the
#      tree; peer: `agentenv snap` of the same change in the live tree (a
#      stat-cached full walk)
#   3. tournament of 4 candidates that each change 10 files, test `true`,
#      --jobs 4: overhead = wall minus the slowest candidate's own run; peer:
#      4 sequential `cp -a` of the tree plus the same candidate run
#
# Usage: bench/workspace_bench.sh [agentenv-binary]
# Env:   ROOTFS (default /var/tmp/agentenv-bench/rootfs, bench/make_rootfs.sh),
#        FS (ext4|xfs), SIZE_GB (image size, 8), REPS (5), KEEP=1 keeps the image.
# Needs root (loop devices, mount).
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
FS=${FS:-ext4}
SIZE_GB=${SIZE_GB:-8}
REPS=${REPS:-5}
die() { echo "workspace_bench: $*" >&2; exit 1; }
note() { printf '%s\n' "$*" >&2; }
[ -x "$AE" ] || die "$AE: not an executable"
[ -d "$ROOTFS/usr" ] || die "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)"
[ "$(id -u)" = 0 ] || die "needs root (loop devices)"

IMG=/var/tmp/agentenv-wsbench.img MNT=/var/tmp/agentenv-wsbench
LOOP=
cleanup() {
  mountpoint -q "$MNT" && umount "$MNT"
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  [ "${KEEP:-0}" = 1 ] || rm -f "$IMG"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that a killed run still unmounts and detaches
rm -f "$IMG"; mkdir -p "$MNT"
fallocate -l "${SIZE_GB}G" "$IMG"
LOOP=$(losetup --show -f "$IMG")
case $FS in
  ext4) mkfs.ext4 -q -F "$LOOP" ;;
  xfs) mkfs.xfs -q -f -m reflink=1 "$LOOP" ;;
  *) die "FS must be ext4 or xfs" ;;
esac
mount "$LOOP" "$MNT"
W=$MNT/w; mkdir -p "$W"

ms() { date +%s%N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b - a) / 1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
ROWS=()
row() { ROWS+=("$(printf '| %s | %s | %s | %s | %s | %s |' "$@")"); }

# --- 1. fork: first materialization vs cp -a; second fork ---
note "1. fork of the rootfs node ($(du -sh "$ROOTFS" | cut -f1)), $REPS rounds"
export AGENTENV_ROOT=$W/ae
"$AE" init --from "$ROOTFS" >/dev/null
sync
first=() cpa=() again=()
for ((r = 0; r < REPS; r++)); do
  rm -rf "$AGENTENV_ROOT/lowers" "$AGENTENV_ROOT/workspaces" "$W/cp"; sync
  t0=$(ms); "$AE" fork --name f$r >/dev/null; t1=$(ms)
  first+=("$(elapsed "$t0" "$t1")")
  t0=$(ms); "$AE" fork --name g$r >/dev/null; t1=$(ms)
  again+=("$(elapsed "$t0" "$t1")")
  sync
  t0=$(ms); cp -a "$AGENTENV_ROOT/work/current" "$W/cp"; t1=$(ms)
  cpa+=("$(elapsed "$t0" "$t1")")
done
f=$(median "${first[@]}") c=$(median "${cpa[@]}") a=$(median "${again[@]}")
row "first fork (materialize, $FS)" "$f ms" "cp -a" "$c ms" "$(ratio "$f" "$c")" "<= 1.2 (ext4), <= 0.3 (xfs)"
row "second fork of the same node" "$a ms" "" "" "" "<= 20 ms"
rm -rf "$W/cp"

# --- 1b. fork of a node 10 files away from a materialized one (hardlinks) ---
note "1b. fork of a node 10 changed files away from a materialized node"
near=()
for ((r = 0; r < REPS; r++)); do
  for i in 0 1 2 3 4 5 6 7 8 9; do head -c 100000 /dev/urandom >"$AGENTENV_ROOT/work/current/etc/near-$i"; done
  "$AE" snap -m "near $r" >/dev/null
  sync
  t0=$(ms); "$AE" fork --name n$r >/dev/null; t1=$(ms)
  near+=("$(elapsed "$t0" "$t1")")
done
n=$(median "${near[@]}")
row "fork of a node 10 files from a materialized one" "$n ms" "cp -a" "$c ms" "$(ratio "$c" "$n")x faster" "<= 1000 ms"

# --- 1c. restore of two deleted library trees, with and without a lower ---
libs="usr/lib/python3.11 usr/lib/gcc"
nlib=$(cd "$AGENTENV_ROOT/work/current" && find $libs -type f | wc -l)
note "1c. restore of $libs ($nlib files) deleted from the live tree"
with=() without=()
for ((r = 0; r < REPS; r++)); do
  for mode in with without; do
    if [ $mode = without ]; then rm -rf "$AGENTENV_ROOT/workspaces" "$AGENTENV_ROOT/lowers"
    else "$AE" fork --name lib$r >/dev/null; fi   # HEAD's tree materialized (lowers/<tree>)
    (cd "$AGENTENV_ROOT/work/current" && rm -rf $libs)
    "$AE" snap -m "libs gone" >/dev/null
    sync
    t0=$(ms); "$AE" restore HEAD~1 >/dev/null; t1=$(ms)
    if [ $mode = with ]; then with+=("$(elapsed "$t0" "$t1")"); else without+=("$(elapsed "$t0" "$t1")"); fi
  done
done
wl=$(median "${with[@]}") wo=$(median "${without[@]}")
row "restore $nlib deleted files, a lower present ($FS)" "$wl ms" "the same without a lower" "$wo ms" "$(ratio "$wo" "$wl")x faster" "<= 300 ms (xfs)"

# --- 2. snapshot of a workspace with 10 changed files, 10k and 100k files ---
make_tree() {  # DIR FILES: 100 files of 1-4 KiB per directory, plus busybox as /bin/sh
  python3 - "$1" "$2" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for d in range(n // 100):
    dd = os.path.join(root, "d%d" % (d // 100), "e%d" % d)
    os.makedirs(dd, exist_ok=True)
    for i in range(100):
        with open(os.path.join(dd, "f%d" % i), "wb") as f:
            f.write(os.urandom(1024 + (i * 37) % 3072))
for d in ("bin", "tmp", "run", "proc", "dev", "sys", "etc"):
    os.makedirs(os.path.join(root, d), exist_ok=True)
PY
  cp /bin/busybox "$1/bin/busybox"
  ln -s busybox "$1/bin/sh"
}
for size in 10000 100000; do
  note "2. workspace snapshot, tree of $size files"
  root=$W/ae-$size src=$W/src-$size
  make_tree "$src" "$size"
  "$AE" init --root "$root" --from "$src" >/dev/null
  rm -rf "$src"
  "$AE" fork --root "$root" --name w >/dev/null
  wsn=() live=()
  for ((r = 0; r < REPS; r++)); do
    "$AE" exec --root "$root" --workspace w --no-snap -- /bin/sh -c \
      "for i in 0 1 2 3 4 5 6 7 8 9; do echo r$r > /d0/e\$i/f$r; done" >/dev/null 2>&1 ||
      die "exec in the workspace failed (the synthetic tree has no /bin/sh: bench copies busybox)"
    sync
    t0=$(ms); "$AE" snap --root "$root" --workspace w -m "ws $r" >/dev/null; t1=$(ms)
    wsn+=("$(elapsed "$t0" "$t1")")
    for i in 0 1 2 3 4 5 6 7 8 9; do echo "r$r" >"$root/work/current/d0/e$i/f$r"; done
    sync
    t0=$(ms); "$AE" snap --root "$root" -m "live $r" >/dev/null; t1=$(ms)
    live+=("$(elapsed "$t0" "$t1")")
  done
  s=$(median "${wsn[@]}") l=$(median "${live[@]}")
  row "workspace snap, 10 files, $size-file tree" "$s ms" "snap of the live tree (full walk)" "$l ms" "$(ratio "$l" "$s")x faster" "<= 20 ms, flat"
  rm -rf "$root"
done

# --- 3. tournament of 4 candidates, 10 files each, test true ---
note "3. tournament of 4 candidates, --jobs 4"
cand() { echo "for i in 0 1 2 3 4 5 6 7 8 9; do echo $1 > /etc/cand-$1-\$i; done"; }
tw=() seq=() slow=()
for ((r = 0; r < REPS; r++)); do
  t0=$(ms)
  out=$("$AE" tournament --json --test true --jobs 4 --no-apply --keep all -- "$(cand a)" "$(cand b)" "$(cand c)" "$(cand d)")
  t1=$(ms)
  tw+=("$(elapsed "$t0" "$t1")")
  slow+=("$(python3 -c 'import json,sys; print(max(c["duration_ms"] for c in json.load(sys.stdin)["candidates"]))' <<<"$out")")
  for ws in $("$AE" workspace ls --json | python3 -c 'import json,sys; print(" ".join(w["name"] for w in json.load(sys.stdin)["workspaces"]))'); do
    "$AE" workspace rm "$ws" >/dev/null
  done
  sync
  t0=$(ms)
  for c in a b c d; do
    rm -rf "$W/seq"; cp -a "$AGENTENV_ROOT/work/current" "$W/seq"
    (cd "$W/seq" && for i in 0 1 2 3 4 5 6 7 8 9; do echo "$c" >"etc/cand-$c-$i"; done; true)
  done
  t1=$(ms)
  seq+=("$(elapsed "$t0" "$t1")")
done
t=$(median "${tw[@]}") s=$(median "${slow[@]}") q=$(median "${seq[@]}")
over=$(awk -v a="$t" -v b="$s" 'BEGIN {printf "%.1f", a - b}')
row "tournament 4 x 10 files, test true (wall)" "$t ms" "4 sequential cp -a + run" "$q ms" "$(ratio "$q" "$t")x faster" ""
row "tournament overhead (wall - slowest candidate $s ms)" "$over ms" "" "" "" "<= 1000 ms"

echo
echo "machine: $(uname -r), $(nproc) CPUs, $FS on a fresh ${SIZE_GB} GB loopback image; $(date -u '+%F %H:%M UTC'); medians of $REPS"
echo "| measurement | agentenv | peer | peer time | ratio | target |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
