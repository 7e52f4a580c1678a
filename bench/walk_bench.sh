#!/usr/bin/env bash
# The no-daemon path on a filesystem that cannot say what changed (ext4 by
# default): a snapshot and a restore must walk the tree, so the floor is a
# bare walk. Against that floor and the named peers, on the same live tree
# in one run, warm page cache, medians of REPS rounds:
#
#   floor: find -printf of inode/size/mtime (one thread, what find does) and
#          bench/stat_walk (getdents + lstat of every entry with one worker
#          per core, the way agentenv walks, nothing else)
#   1. snap of 10 changed files (100 KiB each) vs git add -A && commit;
#      snap with no change
#   2. restore HEAD~1 (the 10 files back) vs rsync -a --delete of the same
#      tree state into the live tree
#   3. the floor of a durable snapshot: bench/commit_floor (three ordered
#      appends + fdatasync on the same filesystem: the 10 changed files' bytes
#      to a pack, then a block each to an index and a history) added to the
#      bare walk
#
# The live tree is the cached rootfs plus COPIES-1 copies of its /usr under
# /srv (COPIES=3: about 43k entries, the size of a dev rootfs), on a fresh
# loopback filesystem made with fallocate (ext4 slowed by earlier mass
# deletes, or first writes into a sparse image, make every tool slower).
#
# Usage: bench/walk_bench.sh [agentenv-binary]
# Env:   ROOTFS (/var/tmp/agentenv-bench/rootfs), REPS (7), FS (ext4|xfs),
#        SIZE_GB (8), COPIES (3), STAT_WALK (build/bench/stat_walk),
#        COMMIT_FLOOR (build/bench/commit_floor),
#        AGENTENV_URING (passed through).
# Needs root (loop device; the rootfs holds root-owned files), git, rsync.
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
REPS=${REPS:-7}
FS=${FS:-ext4}
SIZE_GB=${SIZE_GB:-8}
COPIES=${COPIES:-3}
STAT_WALK=${STAT_WALK:-$PWD/build/bench/stat_walk}
COMMIT_FLOOR=${COMMIT_FLOOR:-$PWD/build/bench/commit_floor}

die() { echo "walk_bench: $*" >&2; exit 1; }
note() { printf '%s\n' "$*" >&2; }
[ -x "$AE" ] || die "$AE: not an executable (build: scripts/build.sh)"
[ -x "$STAT_WALK" ] || die "$STAT_WALK: not built (scripts/build.sh builds bench/ too)"
[ -x "$COMMIT_FLOOR" ] || die "$COMMIT_FLOOR: not built (scripts/build.sh builds bench/ too)"
[ -d "$ROOTFS/usr" ] || die "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)"
[ "$(id -u)" = 0 ] || die "needs root (loop device, root-owned files)"
for t in git rsync "mkfs.$FS"; do command -v "$t" >/dev/null || die "$t: not installed"; done

IMG=/var/tmp/agentenv-walkbench.img
MNT=$(mktemp -d /tmp/agentenv-walkbench.XXXXXX)
LOOP=
cleanup() {
  mountpoint -q "$MNT" && umount "$MNT"
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  rm -f "$IMG"; rmdir "$MNT" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that a killed run still unmounts and detaches
rm -f "$IMG"
fallocate -l "${SIZE_GB}G" "$IMG"
LOOP=$(losetup --show -f "$IMG")
case $FS in
  ext4) mkfs.ext4 -q -F "$LOOP" ;;
  xfs) mkfs.xfs -q -f "$LOOP" ;;
  *) die "FS=$FS: ext4 or xfs" ;;
esac
mount "$LOOP" "$MNT"
LOG=$MNT/log

now() { date +%s%N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
msf() { awk -v n="$1" 'BEGIN {printf "%.1f", n / 1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
timed() {  # timed VAR cmd...: appends cmd's wall time (ns) to array VAR
  local -n _acc=$1; shift
  local t0; t0=$(now)
  "$@" >>"$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "failed: $*"; }
  _acc+=($(( $(now) - t0 )))
}
samples() { local x out=""; for x in "$@"; do out+="$(msf "$x") "; done; echo "${out% }"; }
ROWS=() SAMPLES=()
# row WHAT AGENTENV_NS PEER PEER_NS TARGET: TARGET ">=Nx" (peer/agentenv at
# least N) or "<=Nx" (agentenv/peer at most N)
# (the ratio column of a "<=" row is agentenv/peer, which its target bounds)
row() {
  local r v="-"
  r=$(ratio "$4" "$2")x
  case $5 in
    ">="*) v=$(awk -v r="${r%x}" -v t="${5#>=}" 'BEGIN {print (r >= t+0 ? "PASS" : "MISS")}') ;;
    "<="*) r="$(ratio "$2" "$4")x (agentenv/peer)"
           v=$(awk -v r="${r%%x*}" -v t="${5#<=}" 'BEGIN {print (r <= t+0 ? "PASS" : "MISS")}') ;;
  esac
  ROWS+=("| $1 | $(msf "$2") ms | $3 | $(msf "$4") ms | $r | $5 | $v |")
}

export AGENTENV_ROOT=$MNT/ae
T=$AGENTENV_ROOT/work/current
"$AE" init --from "$ROOTFS" >>"$LOG" 2>&1 || die "init failed (see $LOG)"
for c in $(seq 2 "$COPIES"); do mkdir -p "$T/srv"; cp -a "$T/usr" "$T/srv/usr-copy$c"; done
"$AE" snap -m copies >>"$LOG" 2>&1 || true
NENT=$(find "$T" | wc -l)
note "live tree: $NENT entries on $FS ($LOOP)"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

mapfile -t TEN < <(cd "$T" && find usr/share/doc -name copyright -type f -links 1 | sort |
                   awk '{f[NR] = $0} END {for (i = 0; i < 10 && NR >= 10; i++) print f[1 + int(i * NR / 10)]}')
[ ${#TEN[@]} = 10 ] || die "fewer than 10 usr/share/doc/*/copyright files"
change10() { local f; for f in "${TEN[@]}"; do head -c 102400 /dev/urandom >"$T/$f"; done; }
GIT=(git --git-dir="$MNT/git" --work-tree="$T" -c user.name=bench -c user.email=b@x
     -c core.excludesFile=/dev/null -c gc.auto=0)
"${GIT[@]}" init -q
"${GIT[@]}" add -A >>"$LOG" 2>&1 && "${GIT[@]}" commit -q -m init >>"$LOG" 2>&1
# The rsync peer restores the same tree state: a copy of the live tree as
# HEAD~1 will have it (made before the timed changes). Made once: each round
# ends with the live tree back in that state (rsync -a --delete from it), and
# a 1.5 GB copy in every round left the filesystem busy (journal, writeback)
# for whichever tool came next.
RS=$MNT/rsync-prev
cp -a "$T" "$RS"
sync

# Warm-up, not counted: every tool's metadata in the page cache.
warm=()
find "$T" -printf '%i %s %T@\n' >/dev/null; "$STAT_WALK" "$T" >/dev/null
change10; timed warm "$AE" snap -m warm; timed warm bash -c '"$@" add -A && "$@" commit -q -m warm' _ "${GIT[@]}"

fnd=() sw1=() swn=() snap=() gitc=() nochange=() rest=() rsd=()
for r in $(seq "$REPS"); do
  sync; timed fnd find "$T" -printf '%i %s %T@\n'
  sync; timed sw1 "$STAT_WALK" "$T" 1
  sync; timed swn "$STAT_WALK" "$T"
  sync; change10
  timed snap "$AE" snap -m "step $r"
  sync; timed gitc bash -c '"$@" add -A && "$@" commit -q -m step' _ "${GIT[@]}"
  sync; timed nochange "$AE" snap -m "no change"
  # Both restores put back the 10 files as they were before change10.
  sync; timed rest "$AE" restore HEAD~1
  change10; sync
  timed rsd rsync -a --delete "$RS/" "$T/"
  "$AE" snap -m "after rsync" >>"$LOG" 2>&1 || true
done
SAMPLES+=("find -printf: $(samples "${fnd[@]}")" "stat_walk 1 thread: $(samples "${sw1[@]}")"
          "stat_walk $(nproc) threads: $(samples "${swn[@]}")" "snap: $(samples "${snap[@]}")"
          "git: $(samples "${gitc[@]}")" "no-change snap: $(samples "${nochange[@]}")"
          "restore: $(samples "${rest[@]}")" "rsync -a --delete: $(samples "${rsd[@]}")")
S=$(median "${snap[@]}") N=$(median "${nochange[@]}") R=$(median "${rest[@]}")
FLOOR=$(median "${swn[@]}")
# Last: it rewrites the 10 files (untimed) before each round.
read -r CF CF_SAMPLES < <("$COMMIT_FLOOR" "$MNT" 15 "$T" "${TEN[@]}") || die "commit_floor failed"
CF_NS=$(awk -v m="$CF" 'BEGIN {printf "%d", m * 1e6}')
SAMPLES+=("commit floor: $CF_SAMPLES")
row "snap, 10 changed files" "$S" "git add -A && commit" "$(median "${gitc[@]}")" ">=3"
row "snap, 10 changed files" "$S" "stat_walk ($(nproc) threads)" "$FLOOR" "<=1.5"
row "snap, no change" "$N" "stat_walk ($(nproc) threads)" "$FLOOR" "<=1.5"
row "snap, no change" "$N" "find -printf" "$(median "${fnd[@]}")" ""
row "snap, no change" "$N" "stat_walk (1 thread)" "$(median "${sw1[@]}")" ""
row "restore HEAD~1 (10 files)" "$R" "rsync -a --delete" "$(median "${rsd[@]}")" ">=10"
row "restore HEAD~1 (10 files)" "$R" "stat_walk ($(nproc) threads)" "$FLOOR" ""
row "snap, 10 changed files" "$S" "floor: stat_walk + commit_floor" "$(awk -v a="$FLOOR" -v b="$CF_NS" 'BEGIN {printf "%d", a + b}')" ""

echo "no-daemon walk vs floor and peers: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) cores, load $LOAD0 -> $(cut -d' ' -f1-3 /proc/loadavg)"
echo "live tree: $NENT entries ($ROOTFS + $((COPIES - 1)) copies of its /usr); loopback $FS ${SIZE_GB} GB (fallocate); medians of $REPS; no daemon; AGENTENV_URING=${AGENTENV_URING:-default}"
echo
echo "| operation | agentenv | peer | peer time | peer/agentenv | target | verdict |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "commit_floor (the 10 files' 1 MB, then 2 blocks, each appended + fdatasync, in order): $(msf "$CF_NS") ms; 3x git needs a snap of at most $(awk -v g="$(median "${gitc[@]}")" 'BEGIN {printf "%.1f", g / 3e6}') ms"
echo
echo "samples (ms):"
printf '  %s\n' "${SAMPLES[@]}"
