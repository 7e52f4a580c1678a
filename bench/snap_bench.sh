#!/usr/bin/env bash
# Snapshot / restore / disk benchmark of agentenv against named peers, all on
# the same live tree in one run, warm page cache, medians of REPS samples.
#
#   1. snapshot after 10 changed files: agentenv snap (full walk; and with the
#      changed paths, as the daemon does) vs rsync --link-dest, git commit,
#      ostree commit, restic backup (with parent)
#   2. restore of 10 changed files: agentenv restore (CLI, and rollback via a
#      running daemon) vs rsync -a --delete
#   3. restore of ~3000 files / 100 MB: agentenv restore vs cp -a of them
#   4. disk growth over STEPS snapshots of 10 files / 1 MB each:
#      agentenv repository vs the rsync --link-dest snapshot set
#
# Usage: bench/snap_bench.sh [agentenv-binary]
# Env:   ROOTFS (default /var/tmp/agentenv-bench/rootfs), WORK (scratch dir,
#        default /var/tmp/agentenv-snapbench/run, wiped), REPS (5), STEPS (100),
#        PEERS ("rsync git ostree restic"), KEEP=1 to keep WORK,
#        DELETE_SETTLE (11: seconds between a mass delete and a timed mass
#        create in 3., see there).
# Needs root (the rootfs holds root-owned files), rsync, git, ostree, restic.
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
WORK=${WORK:-/var/tmp/agentenv-snapbench/run}
REPS=${REPS:-5}
STEPS=${STEPS:-100}
PEERS=${PEERS:-rsync git ostree restic}
DELETE_SETTLE=${DELETE_SETTLE:-11}

die() { echo "snap_bench: $*" >&2; exit 1; }
[ -x "$AE" ] || die "$AE: not an executable (build: ninja -C build agentenv)"
[ -d "$ROOTFS/usr" ] || die "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)"
[ "$(id -u)" = 0 ] || die "needs root (the rootfs holds root-owned files)"
for t in rsync git ostree restic; do command -v $t >/dev/null || die "$t: not installed"; done
has_peer() { [[ " $PEERS " == *" $1 "* ]]; }

rm -rf "$WORK"; mkdir -p "$WORK"
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$WORK"' EXIT; fi
LOG=$WORK/log
export AGENTENV_ROOT=$WORK/ae
T=$AGENTENV_ROOT/work/current   # the one live tree every tool snapshots
RS=$WORK/rsync                  # rsync --link-dest snapshot set: s1, s2, ...
RW=$WORK/rsync-work             # live tree the rsync peer restores into
GIT=(git --git-dir="$WORK/git" --work-tree="$T" -c user.name=bench -c user.email=b@x
     -c core.excludesFile=/dev/null -c gc.auto=0)
OST=(ostree --repo="$WORK/ostree")
export RESTIC_PASSWORD=snapbench RESTIC_CACHE_DIR=$WORK/restic-cache
RESTIC=(restic -r "$WORK/restic" -q)

note() { printf '%s\n' "$*" >&2; }
# run: a command with its output in the log; failure stops the bench.
run() { "$@" >>"$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "failed: $*"; }; }
# cpu_ticks PID: user+sys clock ticks of PID and its reaped children, in
# CPU_T (no fork, so the shell's own measuring costs nothing).
cpu_ticks() {
  local line; read -r line <"/proc/$1/stat"; line=${line##*) }
  local -a f=($line)
  CPU_T=$(( f[11] + f[12] + f[13] + f[14] ))
}
TICK_US=$(( 1000000 / $(getconf CLK_TCK) ))
declare -A CPU_US=() CPU_N=()   # per measurement: summed CPU time, op count
# tm ARRAY cmd...: runs cmd, appends its wall time in microseconds to ARRAY
# and adds its CPU time (user+sys) to CPU_US[ARRAY].
tm() {
  local name=$1; local -n _acc=$1; shift
  cpu_ticks $$; local c0=$CPU_T
  local s=$EPOCHREALTIME
  run "$@"
  local e=$EPOCHREALTIME
  cpu_ticks $$
  _acc+=($(( (${e/./} - ${s/./}) )))
  CPU_US[$name]=$(( ${CPU_US[$name]:-0} + (CPU_T - c0) * TICK_US ))
  CPU_N[$name]=$(( ${CPU_N[$name]:-0} + 1 ))
}
cpu_mean() { awk -v u="${CPU_US[$1]:-0}" -v n="${CPU_N[$1]:-1}" 'BEGIN{printf "%.1f", u/n/1000}'; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
ms() { awk -v u="$1" 'BEGIN{printf "%.1f ms", u/1000}'; }
mb() { awk -v b="$1" 'BEGIN{printf "%.1f MB", b/1e6}'; }
samples() { local x out=""; for x in "$@"; do out+="$(awk -v u="$x" 'BEGIN{printf "%.0f", u/1000}') "; done; echo "${out% }"; }

ROWS=()   # markdown table rows
# row NAME AE_US PEER_NAME PEER_US MODE TARGET: MODE faster = peer/ae >= target,
# within = ae/peer <= target.
row() {
  local name=$1 a=$2 pname=$3 p=$4 mode=$5 target=$6 ratio verdict
  if [ "$mode" = faster ]; then
    ratio=$(awk -v a="$a" -v p="$p" 'BEGIN{printf "%.2f", p/a}')
    verdict=$(awk -v r="$ratio" -v t="$target" 'BEGIN{print (r>=t)?"PASS":"MISS"}')
    target=">= ${target}x faster"
  elif [ "$mode" = within ]; then
    ratio=$(awk -v a="$a" -v p="$p" 'BEGIN{printf "%.2f", a/p}')
    verdict=$(awk -v r="$ratio" -v t="$target" 'BEGIN{print (r<=t)?"PASS":"MISS"}')
    target="agentenv/peer <= $target"
  else
    ratio=$(awk -v a="$a" -v p="$p" 'BEGIN{printf "%.2f", p/a}'); verdict="-"; target="(info)"
  fi
  ROWS+=("| $name | $(ms "$a") | $pname | $(ms "$p") | $ratio | $target | $verdict |")
}

# --- the changes ------------------------------------------------------------
# Ten files in ten different directories, each rewritten with 100 KiB of fresh
# random bytes per step (1 MiB per step, incompressible: the worst case for a
# compressing store). Only single-link files, so no tool meets a hardlink.
mapfile -t TEN < <(cd "$ROOTFS" && find usr/share/doc -name copyright -type f -links 1 | sort |
                   awk '{f[NR] = $0} END {for (i = 0; i < 10 && NR >= 10; i++) print f[1 + int(i * NR / 10)]}')
[ ${#TEN[@]} = 10 ] || die "$ROOTFS: fewer than 10 usr/share/doc/*/copyright files"
change10() { local f; for f in "${TEN[@]}"; do head -c 102400 /dev/urandom >"$T/$f"; done; }
sum10() { (cd "$1" && md5sum "${TEN[@]}"); }

nsnap=0; PREV=""
rsync_snap() {  # the next rsync --link-dest snapshot of the live tree
  nsnap=$((nsnap + 1))
  local dst=$RS/s$nsnap
  if [ -n "$PREV" ]; then tm "$1" rsync -a --link-dest="$PREV" "$T/" "$dst/"
  else tm "$1" rsync -a "$T/" "$dst/"; fi
  PREV=$dst
}
store_bytes() { du -sb --exclude=./work "$AGENTENV_ROOT" | cut -f1; }

# --- setup: first full snapshot by every tool ---------------------------------
FS=$(df -T "$WORK" | awk 'NR==2{print $2}'); LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
note "tree: $ROOTFS -> $T ($FS), $(find "$ROOTFS" | wc -l) entries, $(du -sh "$ROOTFS" | cut -f1)"
INIT=()
declare -a i_ae=() i_rs=() i_git=() i_ost=() i_res=()
tm i_ae "$AE" init --from "$ROOTFS"
NENT=$(find "$T" | wc -l); TSIZE=$(du -sb "$T" | cut -f1)
mkdir -p "$RS"; rsync_snap i_rs
INIT+=("agentenv init $(ms "${i_ae[0]}")" "rsync copy $(ms "${i_rs[0]}")")
if has_peer git; then
  run "${GIT[@]}" init -q
  tm i_git bash -c '"$@" add -A && "$@" commit -q -m init' _ "${GIT[@]}"
  INIT+=("git add+commit $(ms "${i_git[0]}")")
fi
if has_peer ostree; then
  run "${OST[@]}" init --mode=bare
  # ostree refuses device nodes and sockets: skip them (for ostree only).
  (cd "$T" && find . \( -type b -o -type c -o -type s -o -type p \) | sed 's|^\.||') >"$WORK/ostree-skip"
  OSTC=("${OST[@]}" commit -b bench --skip-list="$WORK/ostree-skip" --tree=dir="$T" -s step)
  tm i_ost "${OSTC[@]}"
  INIT+=("ostree commit $(ms "${i_ost[0]}") (skipped $(wc -l <"$WORK/ostree-skip") special files)")
fi
if has_peer restic; then
  run "${RESTIC[@]}" init
  tm i_res "${RESTIC[@]}" backup "$T"
  INIT+=("restic backup $(ms "${i_res[0]}")")
fi
# Warm-up round (not counted): every tool snapshots one change once.
change10; declare -a warm=()
run "$AE" snap -m warm; rsync_snap warm
has_peer git && run bash -c '"$@" add -A && "$@" commit -q -m warm' _ "${GIT[@]}"
has_peer ostree && run "${OSTC[@]}"
has_peer restic && run "${RESTIC[@]}" backup "$T"

# --- 1. snapshot after 10 changed files ---------------------------------------
note "1. snapshot after 10 changed files, $REPS rounds"
declare -a s_ae=() s_aep=() s_rs=() s_git=() s_ost=() s_res=()
for ((r = 0; r < REPS; r++)); do
  change10
  tm s_ae "$AE" snap -m "step $r"
  rsync_snap s_rs
  has_peer git && tm s_git bash -c '"$@" add -A && "$@" commit -q -m step' _ "${GIT[@]}"
  has_peer ostree && tm s_ost "${OSTC[@]}"
  has_peer restic && tm s_res "${RESTIC[@]}" backup "$T"
done
# The daemon's path: it knows the changed paths from its journal. (Only
# agentenv sees these changes; the peers are done with this tree state.)
for ((r = 0; r < REPS; r++)); do change10; tm s_aep "$AE" snap -m "paths $r" "${TEN[@]}"; done
run "$AE" snap -m "settle"   # full walk: the paths scan missed nothing
[ "$("$AE" snap --json | grep -c '"created":false')" = 1 ] || die "path snapshots missed a change"
A1=$(median "${s_ae[@]}")
row "1. snap 10 files (full walk)" "$A1" "rsync --link-dest" "$(median "${s_rs[@]}")" faster 10
has_peer git && row "1. snap 10 files (full walk)" "$A1" "git add -A && commit" "$(median "${s_git[@]}")" faster 5
has_peer ostree && row "1. snap 10 files (full walk)" "$A1" "ostree commit (no devino cache)" "$(median "${s_ost[@]}")" info 0
has_peer restic && row "1. snap 10 files (full walk)" "$A1" "restic backup (parent)" "$(median "${s_res[@]}")" info 0
A1P=$(median "${s_aep[@]}")
row "1. snap 10 files (given paths)" "$A1P" "rsync --link-dest" "$(median "${s_rs[@]}")" faster 10
has_peer git && row "1. snap 10 files (given paths)" "$A1P" "git add -A && commit" "$(median "${s_git[@]}")" faster 5

# --- 2. restore of 10 changed files -------------------------------------------
note "2. restore of 10 changed files, $REPS rounds each way"
declare -a x=() r_ae=() r_rs=()
run "$AE" tag A HEAD; rsync_snap x; NA=$PREV; SUM_A=$(sum10 "$T")
change10; run "$AE" snap -m B; run "$AE" tag B HEAD; rsync_snap x; NB=$PREV; SUM_B=$(sum10 "$T")
run rsync -a "$T/" "$RW/"
tm r_ae "$AE" restore HEAD~1   # == A
[ "$(sum10 "$T")" = "$SUM_A" ] || die "restore HEAD~1 did not bring back A"
tm r_ae "$AE" restore B
for ((r = 1; r < REPS; r++)); do tm r_ae "$AE" restore A; tm r_ae "$AE" restore B; done
[ "$(sum10 "$T")" = "$SUM_B" ] || die "restore B did not bring back B"
for ((r = 0; r < REPS; r++)); do
  tm r_rs rsync -a --delete "$NA/" "$RW/"; tm r_rs rsync -a --delete "$NB/" "$RW/"
done
[ "$(sum10 "$RW")" = "$SUM_B" ] || die "rsync peer did not bring back B"
# How the product restores: a running daemon knows the changed paths from
# its journal, so the rollback saves uncommitted changes without a walk.
declare -a r_aed=()
"$AE" daemon --quiet-ms 300 --max-delay-ms 3000 >>"$LOG" 2>&1 & DPID=$!
for ((i = 0; i < 300; i++)); do "$AE" ctl head >/dev/null 2>&1 && break; sleep 0.1; done
"$AE" ctl head >/dev/null 2>&1 || die "daemon did not start (log: $LOG)"
cpu_ticks $DPID; D0=$CPU_T
for ((r = 0; r < REPS; r++)); do
  tm r_aed "$AE" ctl rollback ref=A; tm r_aed "$AE" ctl rollback ref=B
done
cpu_ticks $DPID   # the work is the daemon's: add its CPU time
CPU_US[r_aed]=$(( CPU_US[r_aed] + (CPU_T - D0) * TICK_US ))
[ "$(sum10 "$T")" = "$SUM_B" ] || die "daemon rollback B did not bring back B"
kill -TERM $DPID; wait $DPID || die "daemon exited with $?"
row "2. restore 10 files (CLI, full walk)" "$(median "${r_ae[@]}")" "rsync -a --delete node/ work/" "$(median "${r_rs[@]}")" faster 20
row "2. restore 10 files (daemon rollback)" "$(median "${r_aed[@]}")" "rsync -a --delete node/ work/" "$(median "${r_rs[@]}")" faster 20

# --- 3. restore of ~3000 files / 100 MB -----------------------------------------
note "3. restore of 3000 files / 100 MB, $REPS rounds"
BIG=opt/snapbench-big
mkdir -p "$WORK/big/$BIG"
head -c 100000000 /dev/urandom >"$WORK/big/blob"
(cd "$WORK/big/$BIG" && split -n 3000 -a 4 -d "$WORK/big/blob" f && for d in $(seq -w 0 29); do
   mkdir "d$d"; mv $(ls f* | head -100) "d$d/"; done)
rm "$WORK/big/blob"
NBIG=$(find "$WORK/big/$BIG" -type f | wc -l); BBIG=$(du -sb "$WORK/big/$BIG" | cut -f1)
run cp -a "$WORK/big/$BIG" "$T/opt/"; run "$AE" snap -m big; run "$AE" tag C HEAD
rm -rf "${T:?}/$BIG"; run "$AE" snap -m unbig; run "$AE" tag D HEAD
declare -a b_ae=() b_del=() b_cp=() b_rm=()
# ext4 without a journal skips inodes deleted in the last 5-10 s when it
# allocates new ones (recently_deleted() reads each one's inode block):
# creating 3000 files right after deleting 3000 is quadratic, for every
# tool alike, and the timing then measures how long `sync` took. Let the
# deletions age before each timed creation.
settle() { sync; sleep "$DELETE_SETTLE"; }
for ((r = 0; r < REPS; r++)); do
  settle; tm b_ae "$AE" restore C
  sync; tm b_del "$AE" restore D
done
run "$AE" restore C; cmp -s "$T/$BIG/d29/f2999" "$WORK/big/$BIG/d29/f2999" || die "restore C differs"
run diff -r "$T/$BIG" "$WORK/big/$BIG"; run "$AE" restore D
for ((r = 0; r < REPS; r++)); do
  settle; tm b_cp cp -a "$WORK/big/$BIG" "$RW/opt/"
  sync; tm b_rm rm -rf "${RW:?}/$BIG"
done
row "3. restore $NBIG files / $(mb "$BBIG")" "$(median "${b_ae[@]}")" "cp -a of those files" "$(median "${b_cp[@]}")" within 1.5
row "3. restore back (delete them)" "$(median "${b_del[@]}")" "rm -rf of those files" "$(median "${b_rm[@]}")" info 0

# --- 4. disk growth over STEPS snapshots of 10 files / 1 MB ---------------------
note "4. disk: $STEPS snapshots of 10 files (1 MiB) each"
AE0=$(store_bytes); AE0K=$(du -s --exclude=./work "$AGENTENV_ROOT" | cut -f1)
RS0=$(du -sb "$RS" | cut -f1); RS0K=$(du -s "$RS" | cut -f1)
declare -a d_ae=() d_rs=()
for ((r = 0; r < STEPS; r++)); do change10; tm d_ae "$AE" snap -m "disk $r"; rsync_snap d_rs; done
AE1=$(store_bytes); AE1K=$(du -s --exclude=./work "$AGENTENV_ROOT" | cut -f1)
RS1=$(du -sb "$RS" | cut -f1); RS1K=$(du -s "$RS" | cut -f1)
DAE=$((AE1 - AE0)); DRS=$((RS1 - RS0))
DISKR=$(awk -v a=$DAE -v p=$DRS 'BEGIN{printf "%.2f", p/a}')
DISKV=$(awk -v r="$DISKR" 'BEGIN{print (r>=5)?"PASS":"MISS"}')
ROWS+=("| 4. disk, $STEPS snaps x 10 files/1 MiB (du -sb growth) | $(mb $DAE) | rsync --link-dest set | $(mb $DRS) | $DISKR | >= 5x less | $DISKV |")
ROWS+=("| 4. same, allocated (du -s) | $(mb $(((AE1K - AE0K) * 1024))) | rsync --link-dest set | $(mb $(((RS1K - RS0K) * 1024))) | $(awk -v a=$((AE1K - AE0K)) -v p=$((RS1K - RS0K)) 'BEGIN{printf "%.2f", p/a}') | (info) | - |")
row "4. snap time over $STEPS steps (median)" "$(median "${d_ae[@]}")" "rsync --link-dest" "$(median "${d_rs[@]}")" info 0

# Fixed cost of one CLI call (process start, dynamic linking, opening the repo).
declare -a h_ae=() h_true=()
for ((r = 0; r < 10; r++)); do tm h_ae "$AE" head; tm h_true /bin/true; done
row "floor: agentenv head (one CLI call)" "$(median "${h_ae[@]}")" "/bin/true" "$(median "${h_true[@]}")" info 0

# --- report ------------------------------------------------------------------
DIRS=$(find "$T" -type d | wc -l)
echo
echo "machine: $(uname -r), $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/{print $2}') GB RAM; $WORK on $FS; load average at start $LOAD0, at end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tree: $NENT entries ($DIRS dirs), $(mb "$TSIZE"); medians of $REPS (restore: $((2 * REPS)) one-way restores), warm cache"
echo "initial full snapshot: ${INIT[*]}"
echo
echo "| measurement | agentenv | peer | peer time | ratio | target | |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "samples (ms): snap full $(samples "${s_ae[@]}"); snap paths $(samples "${s_aep[@]}"); rsync $(samples "${s_rs[@]}")"
has_peer git && echo "  git $(samples "${s_git[@]}")"
has_peer ostree && echo "  ostree $(samples "${s_ost[@]}")"
has_peer restic && echo "  restic $(samples "${s_res[@]}")"
echo "  restore10 agentenv $(samples "${r_ae[@]}"); daemon rollback $(samples "${r_aed[@]}"); rsync $(samples "${r_rs[@]}")"
echo "  restore big agentenv $(samples "${b_ae[@]}"); cp -a $(samples "${b_cp[@]}"); agentenv restore back (delete them) $(samples "${b_del[@]}"); rm -rf $(samples "${b_rm[@]}")"
cpu=""; for k in s_ae s_aep s_rs s_git s_ost s_res r_ae r_aed r_rs b_ae b_cp b_del b_rm d_ae d_rs h_ae h_true; do
  [ -n "${CPU_N[$k]:-}" ] && cpu+="$k $(cpu_mean $k); "
done
echo "CPU time, user+sys of the process and its children, mean per op (ms; 10 ms ticks): ${cpu%; }"
echo "  (s_ae snap full walk, s_aep snap given paths, r_ae CLI restore, r_aed daemon rollback incl. the daemon's"
echo "  CPU, b_* 3000-file restore/cp/delete/rm, d_* disk steps, h_ head/true; others: the peers)"
echo "notes: ostree commit rehashes every file (a plain dir is no ostree checkout, so neither"
echo "  --link-checkout-speedup nor the devino cache apply); rsync -a keeps no hardlinks/xattrs; git keeps"
echo "  no owners/xattrs/empty dirs; agentenv snap fsyncs its pack, git/rsync do not."
grep -qw discard <(awk -v m="$(df --output=target "$WORK" | tail -1)" '$2==m{print $4}' /proc/mounts) &&
  echo "  $FS is mounted with online discard: every unlink waits for a discard (deletes are slow for all tools)"
true
