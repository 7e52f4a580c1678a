#!/usr/bin/env bash
# Peak memory (RSS) of every agentenv command and the daemon as the tree
# grows, beside git on the same tree: memory must not grow with the tree.
#
# For each size N in SIZES (files; 20 files per directory, 1 KiB each,
# distinct contents) on a freshly made loopback ext4 (a filesystem slowed by
# earlier mass deletes makes every tool slower):
#   init --from, no-change snap, snap of 10 changed files, status,
#   restore HEAD~1 (10 files), restore of a node that differs in every
#   file (a whole-tree restore), fsck, and the daemon after it has
#   captured a change (its high-water mark includes its start-up walk);
#   peers: `git add -A` + `git commit` into a fresh repository of the tree.
# Peak RSS by bench/peak_rss (wall time beside it): the total (getrusage),
# and its anonymous part (heap: what the process owns) and file-backed part (mapped LMDB pages:
# page cache, shared, dropped under pressure without I/O) sampled every 2 ms.
# The repository's size on disk after init and after the restores: the
# LMDB files keep their high-water mark, so pages that could not be reused
# show there.
#
# Usage: bench/memory_bench.sh [agentenv-binary]
# Env:   SIZES ("100000 1000000"), IMG_DIR (/var/tmp: where the loopback
#        image goes), PEERS ("git"; empty: none).
# Needs root (loop device).
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
SIZES=${SIZES:-100000 1000000}
IMG_DIR=${IMG_DIR:-/var/tmp}
PEERS=${PEERS-git}  # empty: no peers

die() { echo "memory_bench: $*" >&2; exit 1; }
[ -x "$AE" ] || die "$AE: not an executable (build: scripts/build.sh)"
[ "$(id -u)" = 0 ] || die "needs root (loop device)"
PEAK=${PEAK:-$PWD/build/bench/peak_rss}
[ -x "$PEAK" ] || die "$PEAK: not built (scripts/build.sh builds bench/ too)"

IMG=$IMG_DIR/agentenv-membench.img
MNT=$(mktemp -d /tmp/agentenv-membench.XXXXXX)
LOOP=""
cleanup() {
  [ -n "${DAEMON:-}" ] && pkill -P "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null
  mountpoint -q "$MNT" && umount "$MNT"
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
  rm -f "$IMG"; rmdir "$MNT" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# fresh_fs GB: a new ext4 on a loopback image made with fallocate (first
# writes into a sparse image cost double), mounted on $MNT.
fresh_fs() {
  cleanup
  mkdir -p "$MNT"
  fallocate -l "${1}G" "$IMG"
  LOOP=$(losetup -f --show "$IMG")
  mkfs.ext4 -q -F -N $(( $2 * 3 + 200000 )) "$LOOP"
  mount "$LOOP" "$MNT"
}

# make_tree DIR N: N files of 1 KiB in dirs of 20, contents distinct.
make_tree() {
  python3 - "$1" "$2" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
pad = b"x" * 1000
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 20000), "s%04d" % (i // 20))
    if i % 20 == 0: os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%02d" % (i % 20)), "wb") as f:
        f.write(b"%d\n" % i + pad)
PY
}

# show LABEL FILE: prints LABEL and the peaks peak_rss wrote at the end of FILE.
show() {
  local line; line=$(grep maxrss_kb= "$2" | tail -1)
  [ -n "$line" ] || { cat "$2" >&2; die "$1: no measurement"; }
  eval "local ${line}"
  printf '  %-30s %6d MB   (anon %5d MB, file-backed %5d MB)\n' "$1" $(( maxrss_kb / 1024 )) \
    $(( anon_kb / 1024 )) $(( file_kb / 1024 ))
}
# rss LABEL cmd...: runs cmd, prints LABEL, its peak RSS and wall time.
rss() {
  local label=$1; shift
  local out; out=$(mktemp)
  local t0; t0=$(date +%s%N)
  "$PEAK" "$@" >/dev/null 2>"$out" || { cat "$out" >&2; die "failed: $*"; }
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  show "$label" "$out" | tr -d '\n'
  printf '   %6d ms\n' "$ms"
  rm -f "$out"
}

# disk LABEL: the repository's metadata and store files on disk (LMDB
# files grow to their high-water mark; a read transaction held across
# commits makes that grow with every commit).
disk() {
  printf '  %-30s metadata %5d MB, store index %4d MB, packs %5d MB\n' "$1" \
    $(( $(stat -c %s "$AGENTENV_ROOT/meta/data.mdb") >> 20 )) \
    $(( $(stat -c %s "$AGENTENV_ROOT/store/index/data.mdb") >> 20 )) \
    $(( $(du -sk "$AGENTENV_ROOT/store/packs" | cut -f1) >> 10 ))
}

change10() {  # 10 files of the tree rewritten
  for i in 0 1 2 3 4 5 6 7 8 9; do echo "change $1 $i" >"$T/d000/s000$i/f00"; done
}

echo "memory_bench: $(uname -r), $(nproc) cores, $(date -u '+%F %H:%M UTC'), $("$AE" --version 2>/dev/null | head -1)"
for N in $SIZES; do
  GB=$(( N * 12 / 1000000 + 3 ))   # three copies of 4 KiB blocks, plus slack
  fresh_fs "$GB" "$N"
  SRC=$MNT/src
  echo "$N files ($(( N / 20 )) directories), ext4 loopback ${GB} GB:"
  make_tree "$SRC" "$N"
  sync
  export AGENTENV_ROOT=$MNT/repo
  T=$AGENTENV_ROOT/work/current
  rss "init --from" "$AE" init --from "$SRC"
  disk "repository after init"
  rss "snap (no change)" "$AE" snap -m same
  change10 1
  rss "snap (10 changed)" "$AE" snap -m ten
  change10 2
  rss "status (10 changed)" "$AE" status
  rss "restore HEAD~1 (10 files)" "$AE" restore HEAD~1
  # Every file different: rewrite the first byte of each, snapshot, and
  # restore the node before (a whole-tree restore).
  python3 - "$T" <<'PY'
import os, sys
for d, _, files in os.walk(sys.argv[1]):
    for f in files:
        with open(os.path.join(d, f), "r+b") as fh: fh.write(b"y")
PY
  "$AE" snap -m all >/dev/null
  rss "restore HEAD~1 (every file)" "$AE" restore HEAD~1
  rss "fsck" "$AE" fsck
  disk "repository after the restores"
  dlog=$MNT/daemon.log
  "$PEAK" "$AE" daemon --quiet-ms 50 2>"$dlog" &
  DAEMON=$!
  until grep -q serving "$dlog"; do sleep 0.1; kill -0 "$DAEMON" || die "daemon died: $(cat "$dlog")"; done
  change10 3
  sleep 2
  "$AE" snap -m via-daemon >/dev/null
  pkill -TERM -P "$DAEMON"; wait "$DAEMON" 2>/dev/null || true; DAEMON=""
  show "daemon (start-up + a capture)" "$dlog"
  if [[ " $PEERS " == *" git "* ]]; then
    G=(git --git-dir="$MNT/git" --work-tree="$SRC" -c user.name=b -c user.email=b@x -c gc.auto=0)
    "${G[@]}" init -q
    rss "peer: git add -A" "${G[@]}" add -A
    rss "peer: git commit" "${G[@]}" commit -q -m all
    rss "peer: git status" "${G[@]}" status --porcelain
  fi
done
