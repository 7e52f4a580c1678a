#!/usr/bin/env bash
# The btrfs backend against its peers, on a fresh loopback btrfs (image made
# with fallocate), warm page cache, medians of REPS rounds, no daemon.
#
#   1. init --from the cached rootfs vs cp -a of it (same filesystem)
#   2. snap of 10 changed files (100 KiB each) vs git add -A && commit and
#      rsync --link-dest of the same live tree, same changes; a no-change snap;
#      the floor (bench/commit_floor: a read-only snapshot of the live
#      subvolume, the 10 files read back from it, three ordered appends
#      with fdatasync)
#   3. fork of a node (materialized by a subvolume snapshot); restore after
#      10 changed files, --in-place and in the default mode (which also
#      stays in place: fewer paths differ than the swap threshold);
#      restore of HEAD~1 across a large change (BIG removed) by swap, in
#      place, and rsync -a --delete from a copy of that tree
#   4. snap of 10 changed files in synthetic trees of 10k and 100k files
#      (the same 10 directories changed in both): the cost must not grow
#      with the tree
#
# Usage: bench/btrfs_bench.sh [agentenv-binary]
# Env:   ROOTFS (default /var/tmp/agentenv-bench/rootfs), REPS (5), BIG (usr:
#        the directory whose removal HEAD~1 undoes in the restore rows),
#        SIZE_GB (6), SIZES ("10000 100000"), KEEP=1 to keep the image,
#        COPIES (1): the live tree of 2.-3. is the rootfs plus COPIES-1
#        copies of its /usr under /srv (a bigger tree of the same kind: 3
#        gives about 40k entries, the size of a dev rootfs).
# Needs root (loop devices; the rootfs holds root-owned files), git, rsync,
# python3, mkfs.btrfs.
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
COMMIT_FLOOR=${COMMIT_FLOOR:-$PWD/build/bench/commit_floor}
NEED=()
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
REPS=${REPS:-5}
SIZE_GB=${SIZE_GB:-6}
SIZES=${SIZES:-10000 100000}
COPIES=${COPIES:-1}
BIG=${BIG:-usr}

die() { echo "btrfs_bench: $*" >&2; exit 1; }
note() { printf '%s\n' "$*" >&2; }
[ -x "$AE" ] || die "$AE: not an executable (build: ninja -C build agentenv)"
[ -d "$ROOTFS/usr" ] || die "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)"
[ "$(id -u)" = 0 ] || die "needs root (loop devices, root-owned files)"
for t in git rsync python3 mkfs.btrfs; do command -v $t >/dev/null || die "$t: not installed"; done

IMG=/var/tmp/agentenv-btrfsbench.img MNT=/var/tmp/agentenv-btrfsbench
LOOP=
cleanup() {
  mountpoint -q "$MNT" && umount "$MNT"
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  [ "${KEEP:-0}" = 1 ] || rm -f "$IMG"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that a killed run still unmounts and detaches
mountpoint -q "$MNT" && die "$MNT: already mounted (an earlier run?)"
rm -f "$IMG"; mkdir -p "$MNT"
fallocate -l "${SIZE_GB}G" "$IMG"
LOOP=$(losetup --show -f "$IMG")
mkfs.btrfs -q -f "$LOOP" >/dev/null 2>&1
mount "$LOOP" "$MNT"
LOG=$MNT/log

now() { date +%s%N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
msf() { awk -v n="$1" 'BEGIN {printf "%.1f", n / 1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
# timed VAR cmd...: appends cmd's wall time (ns) to array VAR; output to the log.
timed() {
  local -n _acc=$1; shift
  local t0; t0=$(now)
  "$@" >>"$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "failed: $*"; }
  _acc+=($(( $(now) - t0 )))
}
ROWS=()
# row WHAT AGENTENV_NS PEER PEER_NS TARGET_X: verdict PASS when peer/agentenv >= TARGET_X
row() {
  local r="" p="" v="-"
  if [ -n "$4" ]; then r="$(ratio "$4" "$2")x"; p="$(msf "$4") ms"; fi
  if [ -n "$5" ]; then v=$(awk -v r="${r%x}" -v t="$5" 'BEGIN {print (r >= t ? "PASS" : "MISS")}'); fi
  ROWS+=("| $1 | $(msf "$2") ms | $3 | $p | $r | ${5:+>= ${5}x} | $v |")
}

note "tree: $ROOTFS, $(find "$ROOTFS" | wc -l) entries, $(du -sh "$ROOTFS" | cut -f1); btrfs on $LOOP ($SIZE_GB GB)"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

# --- 1. init --from vs cp -a ---
export AGENTENV_ROOT=$MNT/ae
T=$AGENTENV_ROOT/work/current
init=() cpa=()
timed cpa cp -a "$ROOTFS" "$MNT/cp"
sync  # the copy stays: deleting it would leave the btrfs cleaner busy during the timings
timed init "$AE" init --from "$ROOTFS"
sync
"$AE" status --json | grep -q '"backend": *"btrfs"' || die "the repository did not choose the btrfs backend"
row "init --from (btrfs)" "${init[0]}" "cp -a" "${cpa[0]}" ""
for c in $(seq 2 "$COPIES"); do
  mkdir -p "$T/srv"; cp -a --reflink=always "$T/usr" "$T/srv/usr-copy$c"
done
if [ "$COPIES" -gt 1 ]; then "$AE" snap -m copies >>"$LOG" 2>&1; sync; fi
NENT=$(find "$T" | wc -l)

# --- 2. snap of 10 changed files vs git and rsync --link-dest ---
mapfile -t TEN < <(cd "$T" && find usr/share/doc -name copyright -type f -links 1 | sort |
                   awk '{f[NR] = $0} END {for (i = 0; i < 10 && NR >= 10; i++) print f[1 + int(i * NR / 10)]}')
[ ${#TEN[@]} = 10 ] || die "fewer than 10 usr/share/doc/*/copyright files"
change10() { local f; for f in "${TEN[@]}"; do head -c 102400 /dev/urandom >"$T/$f"; done; }
GIT=(git --git-dir="$MNT/git" --work-tree="$T" -c user.name=bench -c user.email=b@x
     -c core.excludesFile=/dev/null -c gc.auto=0)
"${GIT[@]}" init -q
"${GIT[@]}" add -A >>"$LOG" 2>&1 && "${GIT[@]}" commit -q -m init >>"$LOG" 2>&1
RS=$MNT/rsync; mkdir -p "$RS"; rsync -a "$T/" "$RS/s0/"; PREV=$RS/s0; nsnap=0
rsync_snap() { nsnap=$((nsnap + 1)); timed "$1" rsync -a --link-dest="$PREV" "$T/" "$RS/s$nsnap/"; PREV=$RS/s$nsnap; }
# Warm-up round, not counted.
change10; declare -a warm=()
timed warm "$AE" snap -m warm; timed warm bash -c '"$@" add -A && "$@" commit -q -m warm' _ "${GIT[@]}"; rsync_snap warm
snap=() gitc=() rsy=() nochange=()
# Each timed command starts with nothing of another tool's left to write
# back (sync before it): a btrfs snapshot commits the whole filesystem's
# transaction, so rsync's thousands of new links would otherwise be charged
# to the next snap. The snap right after change10 still writes back the
# changed files' data itself.
for r in $(seq "$REPS"); do
  sync; change10
  timed snap "$AE" snap -m "step $r"
  sync; timed gitc bash -c '"$@" add -A && "$@" commit -q -m step' _ "${GIT[@]}"
  sync; rsync_snap rsy
  sync; timed nochange "$AE" snap -m "no change"
done
samples() { local x out=""; for x in "$@"; do out+="$(msf "$x") "; done; echo "${out% }"; }
SAMPLES=("snap: $(samples "${snap[@]}")" "git: $(samples "${gitc[@]}")" "rsync: $(samples "${rsy[@]}")"
         "no-change snap: $(samples "${nochange[@]}")")
S=$(median "${snap[@]}")
row "snap, 10 changed files" "$S" "git add -A && commit" "$(median "${gitc[@]}")" 20
row "snap, 10 changed files" "$S" "rsync --link-dest" "$(median "${rsy[@]}")" 100
row "snap, no change" "$(median "${nochange[@]}")" "" "" ""
# The floor of a durable snapshot here: a read-only snapshot of the live
# subvolume, the 10 changed files read back from it (cold) and appended to
# a pack, then three ordered fdatasyncs (pack, index, history); no hashing,
# no compression, no process start (exec of /bin/true: ~0.7 ms).
read -r CF CF_SAMPLES < <("$COMMIT_FLOOR" "$MNT" 15 "$T" "${TEN[@]}") || die "commit_floor failed"
"$AE" snap -m "after the floor's changes" >>"$LOG" 2>&1  # the live tree equals HEAD again
CF_NS=$(awk -v m="$CF" 'BEGIN {printf "%d", m * 1e6}')
SAMPLES+=("floor (snapshot + read 10 files + 3 ordered fdatasyncs): $CF_SAMPLES")
row "snap, 10 changed files" "$S" "floor: snapshot, read the 10 files, 3 ordered fdatasyncs" "$CF_NS" ""
NEED+=("20x git needs a snap of at most $(awk -v g="$(median "${gitc[@]}")" 'BEGIN {printf "%.1f", g / 20e6}') ms, 100x rsync at most $(awk -v g="$(median "${rsy[@]}")" 'BEGIN {printf "%.1f", g / 100e6}') ms; the floor is $(msf "$CF_NS") ms")

# --- 3. fork (materialize by snapshot) and restore ---
fork=() rest=()
for r in $(seq "$REPS"); do
  rm -rf "$AGENTENV_ROOT/lowers" "$AGENTENV_ROOT/workspaces"
  sync; timed fork "$AE" fork HEAD~1 --name f$r
  "$AE" workspace rm f$r >>"$LOG" 2>&1 || true
done
grep -q "(snapshot," "$LOG" || note "warning: forks did not materialize by snapshot"
F=$(median "${fork[@]}")
SAMPLES+=("fork: $(samples "${fork[@]}")")
ROWS+=("| fork of HEAD~1 (materialize: subvolume snapshot) | $(msf "$F") ms | | | | <= 50 ms | $(awk -v f="$F" 'BEGIN {print (f <= 50e6 ? "PASS" : "MISS")}') |")
rd=() swp=()
swapped_last() { tail -1 "$LOG" | grep -q "swapped in its snapshot"; }
why_not() { tail -3 "$LOG" | tr '\n' ' '; }
for r in $(seq "$REPS"); do
  sync; change10
  timed rest "$AE" restore --in-place HEAD
  sync; change10
  # Ten paths differ: below the swap threshold (256), so the default
  # restore stays in place too (a swap's fixed cost is tens of ms).
  timed swp "$AE" restore HEAD
  swapped_last && die "restore HEAD of 10 changed files swapped (the threshold is 256 paths)"
  sync; change10; sync
  timed rd rsync -a --delete "$RS/s$nsnap/" "$T/"
done
SAMPLES+=("restore HEAD in place: $(samples "${rest[@]}")" "restore HEAD, default mode: $(samples "${swp[@]}")"
          "rsync -a --delete: $(samples "${rd[@]}")")
row "restore HEAD after 10 changed files (in place)" "$(median "${rest[@]}")" "rsync -a --delete" "$(median "${rd[@]}")" ""
row "restore HEAD after 10 changed files (default: in place, under the swap threshold)" "$(median "${swp[@]}")" "rsync -a --delete" "$(median "${rd[@]}")" ""

# Restore of HEAD~1 across a large change: HEAD~1 has $BIG, HEAD has not.
# By swap (O(1)), in place (writes every file of $BIG back) and rsync from
# a plain copy of HEAD~1's tree.
head_id() { "$AE" head --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["node"]["id"])'; }
NDOC=$(find "$T/$BIG" | wc -l)
bswap=() binp=() brs=()
for r in $(seq "$REPS"); do
  # A new node each round: only HEAD's and the newest 16 nodes keep a
  # subvolume snapshot, so an old node would be restored in place.
  echo "$r" >"$T/etc/bench-round"
  "$AE" snap -m "before the large change $r" >>"$LOG" 2>&1
  B=$(head_id)
  rsync -a --delete "$T/" "$MNT/rs-before/"
  rm -rf "${T:?}/$BIG"
  "$AE" snap -m "without $BIG $r" >>"$LOG" 2>&1
  D=$(head_id)
  sync; timed bswap "$AE" restore HEAD~1
  swapped_last || die "restore HEAD~1 did not swap: $(why_not)"
  "$AE" restore "$D" >>"$LOG" 2>&1
  sync; timed binp "$AE" restore --in-place "$B"
  rm -rf "${T:?}/$BIG"; sync
  timed brs rsync -a --delete "$MNT/rs-before/" "$T/"
done
SAMPLES+=("restore HEAD~1 (+$NDOC entries in $BIG) by swap: $(samples "${bswap[@]}")"
          "in place: $(samples "${binp[@]}")" "rsync -a --delete: $(samples "${brs[@]}")")
row "restore HEAD~1, +$NDOC entries ($BIG), swap" "$(median "${bswap[@]}")" "restore --in-place" "$(median "${binp[@]}")" ""
row "restore HEAD~1, +$NDOC entries ($BIG), swap" "$(median "${bswap[@]}")" "rsync -a --delete" "$(median "${brs[@]}")" ""

# --- 4. flat cost: synthetic trees of 10k and 100k files ---
make_tree() {  # DIR FILES: 100 files of 1-4 KiB per directory
  python3 - "$1" "$2" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for d in range(n // 100):
    dd = os.path.join(root, "d%d" % (d // 100), "e%d" % d)
    os.makedirs(dd, exist_ok=True)
    for i in range(100):
        with open(os.path.join(dd, "f%d" % i), "wb") as f:
            f.write(os.urandom(1024 + (i * 37) % 3072))
PY
}
declare -A FLAT=()
for size in $SIZES; do
  root=$MNT/flat-$size src=$MNT/src-$size
  make_tree "$src" "$size"
  "$AE" init --root "$root" --from "$src" >>"$LOG" 2>&1
  sync  # $src stays: deleting it would keep the btrfs cleaner busy during the timings
  "$AE" snap --root "$root" -m base >>"$LOG" 2>&1 || true
  s=()
  for r in $(seq "$REPS"); do
    sync
    # The same shape in every size: one file in each of e0, e10, ..., e90
    # (10 directories of 100 files under d0), so the trees a snap rewrites
    # are the same and only the size of the rest differs. (Spreading the
    # files over the tree, as this did before, touched one top directory
    # in the 10k tree and ten in the 100k one.)
    for i in $(seq 0 9); do j=$((i * 10)); head -c 102400 /dev/urandom >"$root/work/current/d0/e$j/f$r"; done

    timed s "$AE" snap --root "$root" -m "step $r"
  done
  FLAT[$size]=$(median "${s[@]}")
  SAMPLES+=("snap in the $size-file tree: $(samples "${s[@]}")")
  ROWS+=("| snap, 10 changed files, $size-file tree | $(msf "${FLAT[$size]}") ms | | | | flat | |")
done

echo "btrfs backend vs peers: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) cores, load $LOAD0 -> $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tree: $ROOTFS ($(find "$ROOTFS" | wc -l) entries; live tree of the snap rows: $NENT entries); loopback btrfs ${SIZE_GB} GB (fallocate); medians of $REPS; no daemon"
echo
echo "| operation | agentenv | peer | peer time | peer/agentenv | target | verdict |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
printf '%s\n' "${NEED[@]}"
echo
echo "samples (ms):"
printf '  %s\n' "${SAMPLES[@]}"
