#!/usr/bin/env bash
# The first snap after `init --from` on btrfs against a later snap and git,
# on a fresh loopback btrfs (image made with fallocate), warm page cache,
# medians of REPS rounds, no daemon. Each round makes new repositories
# from the same tree SRC:
#
#   a. init --from SRC; 10 files changed; snap: the first snap, nothing
#      else read since init
#   b. init --from SRC; git add -A && commit of the live tree (git reads
#      every file: under relatime the first read of each file init wrote
#      rewrites its inode item); 10 files changed; snap: the first snap,
#      every file read since init. Then 10 files changed and a snap (a
#      later snap), then 10 files changed and git add -A && commit (git,
#      the same changes).
#   c. init --from SRC; cp -a of the live tree (coreutils reflinks on
#      btrfs) and git add -A && commit, then 10 files changed and the
#      first snap with no sync between, as a user's tools leave it: the
#      snapshot's transaction commit also writes back what the copy and
#      the reads left dirty (the atime of every file init wrote).
#   floor: the same as c. in a new repository, then `btrfs subvolume
#      snapshot` of the live tree alone: the transaction commit any
#      snapshot of that state pays, whoever takes it.
#
# Every timed command of a. and b. starts after `sync`, with nothing of another
# command's left to write back (a btrfs snapshot commits the whole
# filesystem's transaction, the atime updates of b's reads included).
# With a baseline binary, a. and b. run with both binaries in each round
# (new repositories each), printed side by side. Each snap row gives the
# wall time and, in parentheses, the snap process's CPU time (user +
# system), which the load of a shared host disturbs less.
#
# SRC is the cached rootfs plus COPIES-1 reflinked copies of its /usr
# under /srv (COPIES=4: about 55k entries, more than a 48k-file rootfs).
#
# Usage: bench/first_snap_bench.sh [agentenv-binary [baseline-binary]]
# Env:   ROOTFS (/var/tmp/agentenv-bench/rootfs), REPS (3), SIZE_GB (12),
#        COPIES (4), KEEP=1 to keep the image, IMG_DIR (/var/tmp: where
#        the image is; /dev/shm leaves out the host disk, which builds and
#        tests beside the benchmark also wait on), NICE (0): the timed
#        commands' nice value (-20 on a host shared with builds: they then
#        get a core when they want one, as on a quiet host; the I/O and
#        the kernel's threads stay shared). Under autogroup scheduling
#        (kernel.sched_autogroup_enabled) a nice value counts only within
#        its session, so a NICE other than 0 is also given to the script's
#        session (run it with setsid to leave the caller's out).
# Needs root (loop devices; the rootfs holds root-owned files), git,
# mkfs.btrfs, perf (CPU times).
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
BASE=${2:-}
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
REPS=${REPS:-3}
SIZE_GB=${SIZE_GB:-12}
COPIES=${COPIES:-4}
NICE=${NICE:-0}

die() { echo "first_snap_bench: $*" >&2; exit 1; }
note() { printf '%s\n' "$*" >&2; }
[ -x "$AE" ] || die "$AE: not an executable (build: scripts/build.sh)"
[ -z "$BASE" ] || [ -x "$BASE" ] || die "$BASE: not an executable"
[ -d "$ROOTFS/usr" ] || die "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)"
[ "$(id -u)" = 0 ] || die "needs root (loop devices, root-owned files)"
for t in git mkfs.btrfs btrfs perf; do command -v $t >/dev/null || die "$t: not installed"; done

AUTOGROUP=unchanged
if [ "$NICE" != 0 ] && [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
  echo "$NICE" >/proc/$$/autogroup || die "/proc/$$/autogroup: cannot set its nice value"
  AUTOGROUP="nice $NICE"
fi

IMG=${IMG_DIR:-/var/tmp}/agentenv-firstsnap.img MNT=/var/tmp/agentenv-firstsnap
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
mount "$LOOP" "$MNT"  # relatime, the kernel's default
LOG=$MNT/log

now() { date +%s%N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
msf() { awk -v n="$1" 'BEGIN {printf "%.1f", n / 1e6}'; }
samples() { local x out=""; for x in "$@"; do out+="$(msf "$x") "; done; echo "${out% }"; }
# timed VAR cmd...: appends cmd's wall time (ns) to array VAR; output to the log.
timed() {
  local -n _acc=$1; shift
  local t0; t0=$(now)
  "$@" >>"$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "failed: $*"; }
  _acc+=($(( $(now) - t0 )))
}
quiet() { "$@" >>"$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "failed: $*"; }; }
# snap_timed NAME KEY BINARY ROOT: a snap, its wall and CPU (task-clock:
# user + system, all threads) times in ns appended to the strings
# WALL[NAME/KEY] and CPU[NAME/KEY]. The CPU time says what the load of a
# shared host hides in the wall time.
declare -A WALL=() CPU=()
snap_timed() {
  local t0 t1
  t0=$(now)
  nice -n "$NICE" perf stat -x, -e task-clock -o "$MNT/cpu" -- "$3" snap --root "$4" -m "$2" >>"$LOG" 2>&1 ||
    { tail -20 "$LOG" >&2; die "failed: $3 snap --root $4"; }
  t1=$(now)
  WALL[$1/$2]+="$((t1 - t0)) "
  CPU[$1/$2]+="$(awk -F, '$3 == "task-clock" {printf "%.0f", $1 * 1e6}' "$MNT/cpu") "
}

SRC=$MNT/src
cp -a "$ROOTFS" "$SRC"
for c in $(seq 2 "$COPIES"); do mkdir -p "$SRC/srv"; cp -a --reflink=always "$SRC/usr" "$SRC/srv/usr-copy$c"; done
NENT=$(find "$SRC" | wc -l)
mapfile -t TEN < <(cd "$SRC" && find usr/share/doc -name copyright -type f -links 1 | sort |
                   awk '{f[NR] = $0} END {for (i = 0; i < 10 && NR >= 10; i++) print f[1 + int(i * NR / 10)]}')
[ ${#TEN[@]} = 10 ] || die "fewer than 10 usr/share/doc/*/copyright files"
sync
note "tree: $SRC, $NENT entries; btrfs on $LOOP ($SIZE_GB GB)"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

change10() { local f; for f in "${TEN[@]}"; do head -c 102400 /dev/urandom >"$1/$f"; done; }
git_commit() {  # WORKTREE GITDIR MESSAGE
  local g=(nice -n "$NICE" git --git-dir="$2" --work-tree="$1" -c user.name=bench -c user.email=b@x -c core.excludesFile=/dev/null
           -c gc.auto=0)
  [ -d "$2" ] || "${g[@]}" init -q
  "${g[@]}" add -A && "${g[@]}" commit -q -m "$3"
}

# copied_state BINARY: a new repository (n, root, w set) whose live tree
# the user's tools copied (cp -a) and read (git add -A), then 10 files
# changed, with nothing synced since: case c. and its floor.
copied_state() {
  n=$((n + 1)); root=$MNT/r$n; w=$root/work/current
  quiet "$1" init --root "$root" --from "$SRC"
  sync
  quiet cp -a "$w" "$MNT/copy$n"
  quiet git_commit "$w" "$root.git" init
  change10 "$w"
}

BINS=("$AE"); NAMES=(new)
if [ -n "$BASE" ]; then BINS+=("$BASE"); NAMES+=(baseline); fi
declare -A INIT=()
gitc=() floor=()
n=0
for _ in $(seq "$REPS"); do
  for i in "${!BINS[@]}"; do
    bin=${BINS[$i]} name=${NAMES[$i]}
    # a. nothing read since init
    n=$((n + 1)); root=$MNT/r$n; w=$root/work/current
    t0=$(now); quiet "$bin" init --root "$root" --from "$SRC"; INIT[$name]+="$(( $(now) - t0 )) "
    sync; change10 "$w"; sync
    snap_timed "$name" first "$bin" "$root"
    # b. every file read since init (by git), then a later snap
    n=$((n + 1)); root=$MNT/r$n; w=$root/work/current
    quiet "$bin" init --root "$root" --from "$SRC"
    sync
    quiet git_commit "$w" "$root.git" init
    sync; change10 "$w"; sync
    snap_timed "$name" first-read "$bin" "$root"
    sync; change10 "$w"; sync
    snap_timed "$name" later "$bin" "$root"
    if [ "$i" = 0 ]; then
      sync; change10 "$w"; sync
      timed gitc git_commit "$w" "$root.git" later
    fi
    # c. the tree copied and read by the user's tools, no sync before the snap
    copied_state "$bin"
    snap_timed "$name" first-copied "$bin" "$root"
    if [ "$i" = 0 ]; then
      # floor: the same state, a subvolume snapshot alone
      copied_state "$bin"
      timed floor btrfs subvolume snapshot -r "$w" "$MNT/floor$n"
    fi
  done
done

echo "first snap after init on btrfs: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) cores, load $LOAD0 -> $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tree: $ROOTFS + $((COPIES - 1)) copies of its /usr = $NENT entries; loopback btrfs ${SIZE_GB} GB ($IMG, fallocate, relatime); medians of $REPS; no daemon; timed commands at nice $NICE (session autogroup: $AUTOGROUP)"
echo "binaries: ${BINS[*]}"
echo
hdr="| 10 changed files: wall (CPU) |"; sep="|---|"
for name in "${NAMES[@]}"; do hdr+=" $name |"; sep+="---|"; done
echo "$hdr"; echo "$sep"
row() {  # LABEL KEY
  local out="| $1 |" name
  for name in "${NAMES[@]}"; do
    # shellcheck disable=SC2086
    out+=" $(msf "$(median ${WALL[$name/$2]})") ms ($(msf "$(median ${CPU[$name/$2]})") ms) |"
  done
  echo "$out"
}
row "first snap after init, nothing read since" first
row "first snap after init, every file read since (git add -A)" first-read
row "first snap after init, tree copied (cp -a) and read (git add -A), no sync" first-copied
row "later snap" later
echo "| git add -A && commit (a later commit) | $(msf "$(median "${gitc[@]}")") ms |"
echo "| floor of c: btrfs subvolume snapshot alone, same state | $(msf "$(median "${floor[@]}")") ms |"
echo
echo "samples, wall (CPU) ms:"
for name in "${NAMES[@]}"; do
  # shellcheck disable=SC2086
  echo "  $name: init --from: $(samples ${INIT[$name]})"
  for key in first first-read first-copied later; do
    # shellcheck disable=SC2086
    echo "  $name: $key: $(samples ${WALL[$name/$key]}) ($(samples ${CPU[$name/$key]}))"
  done
done
echo "  git add -A && commit: $(samples "${gitc[@]}")"
echo "  floor (subvolume snapshot): $(samples "${floor[@]}")"
