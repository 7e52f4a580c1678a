#!/usr/bin/env bash
# Huge-history benchmark of agentenv, with peers on the same tree states.
#
#   1. read commands on a 100k-node history (log -n 20, head, branches, show,
#      tag): median wall per call (target <= 20 ms), and the ratio to the same
#      command on a 1k-node history (flat = cost independent of history size)
#   2. reference-counted gc on a 10k-node history: first `gc --full` (the
#      full recount every gc did before: the cost refcounting avoids), then
#      retention dropping 1 node + gc, then retention dropping 9k of the 10k
#      + gc: wall, CPU, peak RSS of each step (targets for the 9k drop,
#      retain + gc: <= 10 s, <= 200 MB) and store size before/after; then,
#      on PEER_STATES states (the same generator, so the same tree states),
#      the same thinning (keep the newest 10%) and space reclaim by agentenv
#      retain + gc (default, then --compact-above 10), `restic forget
#      --prune` and `ostree prune`
#   3. `agentenv fsck` data verify throughput in GB/s of logical data (>= 1),
#      median of 3 runs
#   4. `agentenv export` throughput vs `tar -c` of the materialized tree
#   5. histories at scale (SCALE_NODES, default "100000 1000000"): a month of
#      captures made by `history_gen bulk`, then wall and peak RSS of log -n
#      20, head, show, a time ref, log --grep (walks all), the digest of a
#      day, retain --dry-run, retain, gc, fsck --structure-only, and of
#      `serve` answering /api/timeline cold at three zooms (month, day,
#      hour) and warm; beside git log / git log --grep / git gc on a git
#      repository with as many commits (git fast-import). Target: every
#      command and serve < 256 MB peak RSS; log, head, show, a time ref and
#      a warm timeline <= 50 ms, a cold timeline <= 1 s, the digest <= 1 s.
#      SCALE_ONLY=1 runs this part only.
#
# Usage: bench/history_bench.sh [agentenv-binary]
# Env:   WORK (scratch, default /dev/shm/agentenv-historybench, wiped: tmpfs,
#        so fsync costs nothing and 100k commits take a minute, not an hour),
#        NODES (100000), GC_NODES (10000), PEER_STATES (200), REPS (7),
#        ROOTFS (default /var/tmp/agentenv-bench/rootfs; for 3 and 4),
#        SCALE_NODES ("100000 1000000"), SCALE_ONLY=1 (part 5 only),
#        KEEP=1 to keep WORK.
# Needs restic and ostree; root for the rootfs part (root-owned files).
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
GEN=${GEN:-$(dirname "$AE")/../bench/history_gen}
WORK=${WORK:-/dev/shm/agentenv-historybench}
NODES=${NODES:-100000}
GC_NODES=${GC_NODES:-10000}
PEER_STATES=${PEER_STATES:-200}
REPS=${REPS:-7}
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
SHAPE=(500 4 16384)  # base files (16 KiB each), files changed per state, bytes per changed file

die() { echo "history_bench: $*" >&2; exit 1; }
[ -x "$AE" ] || die "$AE: not an executable (build: ninja -C build agentenv)"
[ -x "$GEN" ] || die "$GEN: not an executable (build: ninja -C build history_gen)"
for t in restic ostree /usr/bin/time; do command -v $t >/dev/null || die "$t: not installed (scripts/install-deps.sh)"; done

rm -rf "$WORK"; mkdir -p "$WORK"
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$WORK"' EXIT; fi
LOG=$WORK/log
note() { printf '%s\n' "$*" >&2; }
run() { "$@" >>"$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "failed: $*"; }; }
# Children's user+sys CPU so far, in ms (bash `times`, second line). `times`
# must run in this shell, not in a $(...) subshell, which has no children yet.
cpu_ms() {
  times >"$WORK/times"
  awk 'NR==2 { split($1,u,/[ms]/); split($2,s,/[ms]/); printf "%d", (u[1]*60+u[2]+s[1]*60+s[2])*1000 }' "$WORK/times"
}
# tm WALL CPU cmd...: one run; appends wall and CPU in microseconds / ms.
tm() {
  local -n _w=$1 _c=$2; shift 2
  local c0; cpu_ms >"$WORK/c0"; c0=$(<"$WORK/c0")
  local s=$EPOCHREALTIME
  run "$@"
  local e=$EPOCHREALTIME
  cpu_ms >"$WORK/c1"
  _w+=($(( ${e/./} - ${s/./} ))); _c+=($(( $(<"$WORK/c1") - c0 )))
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
pass() { awk -v v="$1" -v t="$2" -v dir="$3" 'BEGIN{ok = dir == "le" ? v <= t : v >= t; print ok ? "PASS" : "MISS"}'; }
du_b() { du -sb "$1" | cut -f1; }
# peak RSS (KB), wall (s), user+sys (s) of one command, from /usr/bin/time -v
timev() {
  /usr/bin/time -v "$@" >>"$LOG" 2>"$WORK/timev" || { cat "$WORK/timev" >&2; die "failed: $*"; }
  cat "$WORK/timev" >>"$LOG"
  awk -F': ' '/Maximum resident/ {rss=$2} /User time/ {u=$2} /System time/ {s=$2}
              /Elapsed \(wall/ {n=split($2,p,":"); w=0; for(i=1;i<=n;i++) w=w*60+p[i]}
              END {printf "%d %.2f %.2f\n", rss, w, u+s}' "$WORK/timev"
}

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "# history_bench $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) cores, load at start $(load)"
echo "command: WORK=$WORK NODES=$NODES GC_NODES=$GC_NODES PEER_STATES=$PEER_STATES bench/history_bench.sh"
echo

# ---- 5. histories at scale (part 5; run first when SCALE_ONLY=1) ----
scale() {
  local n=$1 H=$WORK/s$1 G=$WORK/git$1
  note "building a $n-node month with history_gen bulk ..."
  read -r gen_rss gen_wall gen_cpu < <(timev "$GEN" bulk "$H" "$n")
  export AGENTENV_ROOT=$H
  echo "## histories at scale: $n nodes over 30 days (history_gen bulk: built in ${gen_wall} s, $(( gen_rss / 1024 )) MB; tmpfs)"
  echo
  echo "| command | wall s | peak RSS MB | target |"
  echo "|---|---|---|---|"
  row() {  # label target cmd...
    local label=$1 target=$2; shift 2
    read -r rss wall cpu < <(timev "$@")
    local ok=$(( rss / 1024 < 256 ))
    if [ -n "$target" ]; then ok=$(( ok && $(awk -v w="$wall" -v t="$target" 'BEGIN{print (w <= t) ? 1 : 0}') )); fi
    echo "| $label | $wall | $(( rss / 1024 )) | < 256 MB${target:+, <= $target s} $([ $ok = 1 ] && echo PASS || echo MISS) |"
  }
  row '`log -n 20`' 0.05 "$AE" log -n 20
  row '`head`' 0.05 "$AE" head
  row '`show HEAD`' 0.05 "$AE" show HEAD
  row '`show @{3 days ago}` (a time ref)' 0.05 "$AE" show '@{3 days ago}'
  row '`log --grep` (no match: every record)' '' "$AE" log --grep 'no title holds these words'
  row '`log --digest` (the last day)' 1 "$AE" log --digest
  # The DVR: a fresh serve, its first timeline at three zooms, then warm.
  local port=$(( 20000 + RANDOM % 20000 ))
  "$AE" serve --no-capture --listen "127.0.0.1:$port" >>"$LOG" 2>&1 &
  local spid=$!
  for _ in $(seq 200); do curl -sf -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.05; done
  local now_ns=$(date +%s%N)
  t_of() { curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/api/timeline?from=$1&to=$2&buckets=600&max_nodes=200"; }
  local month day hour warm
  month=$(t_of 0 0); day=$(t_of $(( now_ns - 86400000000000 )) "$now_ns"); hour=$(t_of $(( now_ns - 3600000000000 )) "$now_ns")
  warm=$(for _ in 1 2 3 4 5; do t_of 0 0; echo; done | sort -n | sed -n 3p)
  local srss; srss=$(awk '/VmHWM/ {print int($2/1024)}' /proc/$spid/status)
  kill "$spid"; wait "$spid" 2>/dev/null || true
  cold_ok() { awk -v a="$1" 'BEGIN{print (a <= 1) ? "PASS" : "MISS"}'; }
  echo "| serve: first /api/timeline, the month (600 buckets) | $month | | <= 1 s $(cold_ok "$month") |"
  echo "| serve: then a day | $day | | <= 1 s $(cold_ok "$day") |"
  echo "| serve: then an hour | $hour | | <= 1 s $(cold_ok "$hour") |"
  echo "| serve: the month again (warm, median of 5) | $warm | | <= 0.05 s $(awk -v a="$warm" 'BEGIN{print (a <= 0.05) ? "PASS" : "MISS"}') |"
  echo "| serve: peak RSS after these | | $srss | < 256 MB $([ "$srss" -lt 256 ] && echo PASS || echo MISS) |"
  row '`fsck --structure-only` (the whole history)' '' "$AE" fsck --structure-only
  row '`retain --dry-run`' '' "$AE" retain --dry-run
  local before; before=$("$AE" status --json | sed -n 's/.*"nodes":\([0-9]*\).*/\1/p')
  row '`retain` (the DVR schedule)' '' "$AE" retain
  local after; after=$("$AE" status --json | sed -n 's/.*"nodes":\([0-9]*\).*/\1/p')
  row '`gc`' '' "$AE" gc
  echo
  echo "retain dropped $(( before - after )) of $before nodes."
  echo
  rm -rf "$H"
  # git with as many commits, each changing one file.
  note "git: $n commits with fast-import ..."
  git init -q -b main "$G"
  python3 - "$n" <<'PY' | (cd "$G" && git fast-import --quiet)
import sys
n = int(sys.argv[1]); t = 1700000000
out = sys.stdout.buffer
for i in range(n):
    data = b"state %d\n" % i
    out.write(b"commit refs/heads/main\ncommitter b <b@b> %d +0000\ndata 10\ncapture %d\n" % (t + i * 3, i % 10))
    out.write(b"M 100644 inline mod/d%02d/f%03d\ndata %d\n%s\n" % (i % 256 // 16, i % 256, len(data), data))
PY
  echo "| git, $n commits | wall s | peak RSS MB |"
  echo "|---|---|---|"
  for c in "log -n 20" "log --grep=nomatch" "gc"; do
    read -r rss wall cpu < <(timev git -C "$G" $c)
    echo "| \`git $c\` | $wall | $(( rss / 1024 )) |"
  done
  echo
  rm -rf "$G"
}
if [ "${SCALE_ONLY:-0}" = 1 ]; then
  for n in ${SCALE_NODES:-100000 1000000}; do scale "$n"; done
  echo "load at end $(load)"
  exit 0
fi

# ---- 1. read commands on a long history ----
declare -A WALL CPU
for n in 1000 "$NODES"; do
  note "building a $n-node history ..."
  s=$EPOCHREALTIME
  run "$GEN" build "$WORK/h$n" "$n" 100 1 1024
  e=$EPOCHREALTIME
  note "  built in $(( (${e/./} - ${s/./}) / 1000000 )) s"
  export AGENTENV_ROOT=$WORK/h$n
  for cmd in "log -n 20" head branches "show HEAD" tag; do
    w=(); c=()
    for ((i = 0; i < REPS; i++)); do
      if [ "$cmd" = tag ]; then tm w c "$AE" tag "t$i" "HEAD~$i"; else tm w c "$AE" $cmd; fi
    done
    WALL[$n,$cmd]=$(median "${w[@]}"); CPU[$n,$cmd]=$(median "${c[@]}")
  done
done
echo "## read commands: $NODES-node history vs 1000-node history (median of $REPS, tmpfs)"
echo
echo "| command | wall ms ($NODES) | CPU ms ($NODES) | wall ms (1000) | ratio | target <= 20 ms |"
echo "|---|---|---|---|---|---|"
for cmd in "log -n 20" head branches "show HEAD" tag; do
  big=${WALL[$NODES,$cmd]}; small=${WALL[1000,$cmd]}
  awk -v c="$cmd" -v b="$big" -v cb="${CPU[$NODES,$cmd]}" -v s="$small" -v r="$(pass "$big" 20000 le)" \
    'BEGIN{printf "| `%s` | %.1f | %d | %.1f | %.2f | %s |\n", c, b/1000, cb, s/1000, b/s, r}'
done
echo
rm -rf "$WORK/h1000" "$WORK/h$NODES"

# ---- 2. retention + gc, and peers on the same states ----
note "building a $GC_NODES-node history with real content ..."
run "$GEN" build "$WORK/g" "$GC_NODES" "${SHAPE[@]}"
export AGENTENV_ROOT=$WORK/g
keep=$(( GC_NODES / 10 ))
nodes() { "$AE" status --json | sed -n 's/.*"nodes":\([0-9]*\).*/\1/p'; }
# The full recount (what every gc cost before reference counts: a walk of
# every unique live tree); it drops nothing here.
read -r f_rss f_wall f_cpu < <(timev "$AE" gc --full)
# One node of GC_NODES: the root, the day's first node and the newest
# GC_NODES-3 stay.
n0=$(nodes)
read -r r1_rss r1_wall r1_cpu < <(timev "$AE" retain --keep-last $(( GC_NODES - 3 )) --keep-within 0)
n1=$(nodes)
read -r g1_rss g1_wall g1_cpu < <(timev "$AE" gc)
before=$(du_b "$WORK/g/store")
read -r r_rss r_wall r_cpu < <(timev "$AE" retain --keep-last "$keep" --keep-within 0)
left=$(nodes)
read -r rss wall cpu < <(timev "$AE" gc)
after=$(du_b "$WORK/g/store")
tot_wall=$(awk -v a="$r_wall" -v b="$wall" 'BEGIN{printf "%.2f", a+b}')
tot_rss=$(( r_rss > rss ? r_rss : rss ))
echo "## retention + reference-counted gc: $GC_NODES nodes (tmpfs)"
echo
echo "| step | wall s | CPU s | peak RSS MB |"
echo "|---|---|---|---|"
echo "| \`gc --full\` (full recount of $n0 nodes, drops nothing) | $f_wall | $f_cpu | $(( f_rss / 1024 )) |"
echo "| \`retain\` dropping $(( n0 - n1 )) node (releases its references) | $r1_wall | $r1_cpu | $(( r1_rss / 1024 )) |"
echo "| then \`gc\` | $g1_wall | $g1_cpu | $(( g1_rss / 1024 )) |"
echo "| \`retain\` dropping $(( n1 - left )) nodes | $r_wall | $r_cpu | $(( r_rss / 1024 )) |"
echo "| then \`gc\` | $wall | $cpu | $(( rss / 1024 )) |"
echo
echo "| measure (drop $(( n1 - left )) of $n1) | value | target | |"
echo "|---|---|---|---|"
echo "| retain + gc wall | ${tot_wall} s | <= 10 s | $(pass "$tot_wall" 10 le) |"
echo "| retain + gc peak RSS | $(( tot_rss / 1024 )) MB | <= 200 MB | $(pass $(( tot_rss / 1024 )) 200 le) |"
echo "| store before -> after | $(( before / 1000000 )) MB -> $(( after / 1000000 )) MB | goes down | $( [ "$after" -lt "$before" ] && echo PASS || echo MISS) |"
echo
rm -rf "$WORK/g"

note "peers: $PEER_STATES states each ..."
P=$PEER_STATES; PK=$(( P / 10 ))
run "$GEN" build "$WORK/pa" "$P" "${SHAPE[@]}"
export AGENTENV_ROOT=$WORK/pa
a_before=$(du_b "$WORK/pa/store")
# Releasing references happens in retain, dropping in gc: time both, as
# restic's forget --prune does both.
read -r a_rss a_wall a_cpu < <(timev sh -c '"$1" retain --keep-last "$2" --keep-within 0 && "$1" gc' sh "$AE" "$PK")
a_after=$(du_b "$WORK/pa/store")
# The same, then compacting packs that are at least 10% dead (default 50%).
read -r a10_rss a10_wall a10_cpu < <(timev "$AE" gc --compact-above 10)
a10_after=$(du_b "$WORK/pa/store")
rm -rf "$WORK/pa"

D=$WORK/states; mkdir -p "$D"
export RESTIC_PASSWORD=historybench RESTIC_CACHE_DIR=$WORK/restic-cache
R=(restic -r "$WORK/restic" -q)
O=(ostree --repo="$WORK/ostree")
run "${R[@]}" init
run "${O[@]}" init --mode=archive
for ((i = 0; i < P; i++)); do
  run "$GEN" apply "$D" "$i" "${SHAPE[@]}"
  run "${R[@]}" backup --host bench "$D"
  run "${O[@]}" commit -b main --tree=dir="$D" -s "state $i"
done
r_before=$(du_b "$WORK/restic"); o_before=$(du_b "$WORK/ostree")
read -r r_rss r_wall r_cpu < <(timev "${R[@]}" forget --keep-last "$PK" --prune)
read -r o_rss o_wall o_cpu < <(timev "${O[@]}" prune --refs-only --depth=$(( PK - 1 )))
r_after=$(du_b "$WORK/restic"); o_after=$(du_b "$WORK/ostree")
rm -rf "$WORK/restic" "$WORK/ostree" "$D" "$WORK/restic-cache"
echo "## thinning $P snapshots of the same tree states to the newest $PK, then reclaiming space"
echo
echo "| tool | wall s | CPU s | peak RSS MB | repo MB before -> after |"
echo "|---|---|---|---|---|"
echo "| agentenv retain + gc | $a_wall | $a_cpu | $(( a_rss / 1024 )) | $(( a_before / 1000000 )) -> $(( a_after / 1000000 )) |"
echo "| then agentenv gc --compact-above 10 | $a10_wall | $a10_cpu | $(( a10_rss / 1024 )) | $(( a_after / 1000000 )) -> $(( a10_after / 1000000 )) |"
echo "| restic 0.14 forget --prune | $r_wall | $r_cpu | $(( r_rss / 1024 )) | $(( r_before / 1000000 )) -> $(( r_after / 1000000 )) |"
echo "| ostree prune --refs-only --depth | $o_wall | $o_cpu | $(( o_rss / 1024 )) | $(( o_before / 1000000 )) -> $(( o_after / 1000000 )) |"
awk -v a="$a_wall" -v r="$r_wall" -v o="$o_wall" -v ar="$a_rss" -v rr="$r_rss" -v or="$o_rss" 'BEGIN{
  printf "\n- wall: restic/agentenv %.1fx, ostree/agentenv %.1fx; peak RSS: restic/agentenv %.1fx, ostree/agentenv %.1fx\n\n",
    r/(a>0?a:0.01), o/(a>0?a:0.01), rr/ar, or/ar }'

# ---- 3 and 4: fsck verify and export on a real rootfs ----
if [ -d "$ROOTFS/usr" ] && [ "$(id -u)" = 0 ]; then
  note "fsck and export on $ROOTFS ..."
  export AGENTENV_ROOT=$WORK/fs
  run "$AE" init --from "$ROOTFS"
  run "$AE" status   # fills the stat cache: fsck's live-tree comparison is then stat-only
  sync  # the init's writeback is not fsck's cost
  # Median of 3 runs (wall, with that run's CPU): the first run after init
  # is often the slowest on this host, whichever way the others go.
  : >"$WORK/fsck.runs"
  for _ in 1 2 3; do
    cpu_ms >"$WORK/c0"; c0=$(<"$WORK/c0"); s=$EPOCHREALTIME
    "$AE" fsck --json >"$WORK/fsck.json" 2>>"$LOG" || die "fsck failed: $(cat "$WORK/fsck.json")"
    e=$EPOCHREALTIME; cpu_ms >"$WORK/c1"
    echo "$(( ${e/./} - ${s/./} )) $(( $(<"$WORK/c1") - c0 ))" >>"$WORK/fsck.runs"
  done
  read -r fsck_us fsck_cpu < <(sort -n "$WORK/fsck.runs" | sed -n 2p)
  verified=$(sed -n 's/.*"bytes_verified":\([0-9]*\).*/\1/p' "$WORK/fsck.json")
  logical=$("$AE" show HEAD --json | sed -n 's/.*"logical_bytes":\([0-9]*\).*/\1/p')
  cpu_ms >"$WORK/c0"; c0=$(<"$WORK/c0"); s=$EPOCHREALTIME
  "$AE" export HEAD -o - | cat >/dev/null
  e=$EPOCHREALTIME; cpu_ms >"$WORK/c1"; ex_cpu=$(( $(<"$WORK/c1") - c0 )); ex_us=$(( ${e/./} - ${s/./} ))
  cpu_ms >"$WORK/c0"; c0=$(<"$WORK/c0"); s=$EPOCHREALTIME
  tar -cf - -C "$AGENTENV_ROOT/work/current" . | cat >/dev/null
  e=$EPOCHREALTIME; cpu_ms >"$WORK/c1"; tar_cpu=$(( $(<"$WORK/c1") - c0 )); tar_us=$(( ${e/./} - ${s/./} ))
  echo "## fsck and export: $ROOTFS ($(( logical / 1000000 )) MB of file data at HEAD)"
  echo
  echo "| measure | wall s | CPU s | GB/s (wall) | target | |"
  echo "|---|---|---|---|---|---|"
  awk -v us="$fsck_us" -v cpu="$fsck_cpu" -v b="$verified" -v r="$(pass "$(awk -v b="$verified" -v us="$fsck_us" 'BEGIN{print b/us/1000}')" 1 ge)" \
    'BEGIN{printf "| `agentenv fsck` (%.0f MB re-hashed, incl. history, refcount and live-tree checks; median of 3) | %.2f | %.2f | %.2f | >= 1 GB/s | %s |\n", b/1e6, us/1e6, cpu/1000, b/us/1000, r}'
  awk -v us="$ex_us" -v cpu="$ex_cpu" -v b="$logical" 'BEGIN{printf "| `agentenv export HEAD -o - \\| cat` | %.2f | %.2f | %.2f | | |\n", us/1e6, cpu/1000, b/us/1000}'
  awk -v us="$tar_us" -v cpu="$tar_cpu" -v b="$logical" 'BEGIN{printf "| `tar -c` of the live tree `\\| cat` | %.2f | %.2f | %.2f | | |\n", us/1e6, cpu/1000, b/us/1000}'
  awk -v a="$ex_us" -v t="$tar_us" 'BEGIN{printf "\n- export/tar wall %.2fx (export reads the store: decompress + reassemble; tar reads files from the page cache)\n\n", a/t}'
else
  note "skipping fsck/export: no $ROOTFS or not root"
fi
for n in ${SCALE_NODES:-100000 1000000}; do scale "$n"; done
echo "load at end $(load)"
