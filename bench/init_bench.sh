#!/usr/bin/env bash
# init --from and a bulk restore against cp -a, with plain syscalls (the
# default) and with io_uring (AGENTENV_URING=on), on fresh loopback
# filesystems (images made with fallocate: first writes into a sparse image
# cost double).
#
# For each filesystem in FSES:
#   1. init --from SRC vs cp -a SRC (SRC on the host disk, page cache warm,
#      so neither can reflink from it); each timed alone and followed by
#      `sync` (agentenv's init is durable when it returns; cp's copy is
#      not until written back)
#   2. bulk restore (in place: on btrfs a restore may otherwise swap
#      subvolumes): from a node without SRC's /usr copies under /srv to
#      one with them (~2/3 of the files written) vs cp -a of those dirs
# Both agentenv rows run twice, default (plain syscalls) and with
# AGENTENV_URING=on (io_uring), alternating, medians of REPS.
#
# SRC is the cached rootfs plus COPIES-1 copies of its /usr under /srv
# (COPIES=3: about 43k entries, the size of a dev rootfs), built once
# under /var/tmp/agentenv-bench.
#
# Usage: bench/init_bench.sh [agentenv-binary]
# Env:   ROOTFS (/var/tmp/agentenv-bench/rootfs), FSES ("ext4 xfs btrfs"),
#        REPS (3), SIZE_GB (8), COPIES (3).
# Needs root (loop devices; the rootfs holds root-owned files).
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
FSES=${FSES:-ext4 xfs btrfs}
REPS=${REPS:-3}
SIZE_GB=${SIZE_GB:-8}
COPIES=${COPIES:-3}

die() { echo "init_bench: $*" >&2; exit 1; }
note() { printf '%s\n' "$*" >&2; }
[ -x "$AE" ] || die "$AE: not an executable (build: scripts/build.sh)"
[ -d "$ROOTFS/usr" ] || die "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)"
[ "$(id -u)" = 0 ] || die "needs root (loop devices, root-owned files)"

SRC=$ROOTFS-x$COPIES
if [ "$COPIES" -gt 1 ] && [ ! -f "$SRC/.complete" ]; then
  rm -rf "$SRC"; cp -a "$ROOTFS" "$SRC"
  for c in $(seq 2 "$COPIES"); do mkdir -p "$SRC/srv"; cp -a "$ROOTFS/usr" "$SRC/srv/usr-copy$c"; done
  touch "$SRC/.complete"
fi
[ "$COPIES" -gt 1 ] || SRC=$ROOTFS

IMG=/var/tmp/agentenv-initbench.img
MNT=$(mktemp -d /tmp/agentenv-initbench.XXXXXX)
LOOP=
unmount() {
  mountpoint -q "$MNT" && umount "$MNT"
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  LOOP=
  rm -f "$IMG"
}
trap 'unmount; rmdir "$MNT" 2>/dev/null || true' EXIT
trap 'exit 143' TERM INT  # so that a killed run still unmounts and detaches
fresh_fs() {  # FS: a new filesystem on a new image, mounted on $MNT
  unmount
  fallocate -l "${SIZE_GB}G" "$IMG"
  LOOP=$(losetup --show -f "$IMG")
  case $1 in
    ext4) mkfs.ext4 -q -F "$LOOP" ;;
    xfs) mkfs.xfs -q -f "$LOOP" ;;
    btrfs) mkfs.btrfs -q -f "$LOOP" >/dev/null ;;
  esac
  mount "$LOOP" "$MNT"
}

LOG=/tmp/agentenv-initbench.log; : >"$LOG"
now() { date +%s%N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
msf() { awk -v n="$1" 'BEGIN {printf "%.0f", n / 1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
# timed2 VAR VARSYNC cmd...: cmd's wall time (ns) into VAR, and with the
# `sync` after it into VARSYNC.
timed2() {
  local -n _a=$1 _b=$2; shift 2
  local t0 t1; t0=$(now)
  "$@" >>"$LOG" 2>&1 || { tail -20 "$LOG" >&2; die "failed: $*"; }
  t1=$(now); sync
  _a+=($(( t1 - t0 ))); _b+=($(( $(now) - t0 )))
}
samples() { local x out=""; for x in "$@"; do out+="$(msf "$x") "; done; echo "${out% }"; }

NSRC=$(find "$SRC" | wc -l)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
ROWS=() SAMPLES=()
find "$SRC" -type f -exec cat {} + >/dev/null  # warm: both read from the page cache
for fs in $FSES; do
  cp_=() cps=() iu=() ius=() pl=() pls=() rcp=() rcps=() riu=() rius=() rpl=() rpls=()
  for r in $(seq "$REPS"); do
    fresh_fs "$fs"
    timed2 cp_ cps cp -a "$SRC" "$MNT/cp"
    rm -rf "$MNT/cp"; sync
    fresh_fs "$fs"
    timed2 iu ius env AGENTENV_URING=on "$AE" init --root "$MNT/ae" --from "$SRC"
    fresh_fs "$fs"
    timed2 pl pls "$AE" init --root "$MNT/ae" --from "$SRC"
    # Bulk restore: back to a node without the copies, then forward again.
    if [ "$COPIES" -gt 1 ]; then
      export AGENTENV_ROOT=$MNT/ae
      "$AE" tag full HEAD >>"$LOG" 2>&1
      rm -rf "$MNT/ae/work/current/srv"; "$AE" snap -m "no copies" >>"$LOG" 2>&1
      "$AE" tag nocopies HEAD >>"$LOG" 2>&1; sync
      timed2 riu rius env AGENTENV_URING=on "$AE" restore --in-place full
      "$AE" restore nocopies >>"$LOG" 2>&1; sync
      timed2 rpl rpls "$AE" restore --in-place full
      timed2 rcp rcps cp -a "$SRC/srv" "$MNT/cp-srv"
      unset AGENTENV_ROOT
    fi
  done
  C=$(median "${cp_[@]}") CS=$(median "${cps[@]}")
  for v in iu pl; do
    local_n=$v; local_s=${v}s
    declare -n a=$local_n b=$local_s
    label="init --from, AGENTENV_URING=on"; [ $v = pl ] && label="init --from (plain syscalls)"
    ROWS+=("| $fs | $label | $(msf "$(median "${a[@]}")") / $(msf "$(median "${b[@]}")") ms | cp -a | $(msf "$C") / $(msf "$CS") ms | $(ratio "$(median "${a[@]}")" "$C") / $(ratio "$(median "${b[@]}")" "$CS") | <= 1.2 |")
    unset -n a b
  done
  if [ "$COPIES" -gt 1 ]; then
    RC=$(median "${rcp[@]}") RCS=$(median "${rcps[@]}")
    for v in riu rpl; do
      declare -n a=$v b=${v}s
      label="bulk restore (/srv copies), AGENTENV_URING=on"; [ $v = rpl ] && label="bulk restore (/srv copies, plain syscalls)"
      ROWS+=("| $fs | $label | $(msf "$(median "${a[@]}")") / $(msf "$(median "${b[@]}")") ms | cp -a of /srv | $(msf "$RC") / $(msf "$RCS") ms | $(ratio "$(median "${a[@]}")" "$RC") / $(ratio "$(median "${b[@]}")" "$RCS") | |")
      unset -n a b
    done
  fi
  SAMPLES+=("$fs cp -a: $(samples "${cp_[@]}") (+sync: $(samples "${cps[@]}"))"
            "$fs init io_uring: $(samples "${iu[@]}") (+sync: $(samples "${ius[@]}"))"
            "$fs init plain: $(samples "${pl[@]}") (+sync: $(samples "${pls[@]}"))")
  [ "$COPIES" -gt 1 ] && SAMPLES+=("$fs restore io_uring: $(samples "${riu[@]}"); plain: $(samples "${rpl[@]}"); cp -a /srv: $(samples "${rcp[@]}")")
done

echo "init --from and bulk restore vs cp -a: $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) cores, load $LOAD0 -> $(cut -d' ' -f1-3 /proc/loadavg)"
echo "source: $SRC ($NSRC entries, $(du -sh "$SRC" | cut -f1)) on the host disk, page cache warm; fresh loopback image (fallocate, ${SIZE_GB} GB) per run; medians of $REPS"
echo "times: command alone / command then sync; ratio agentenv/peer for both"
echo
echo "| fs | operation | agentenv | peer | peer time | agentenv/peer | target |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "samples (ms):"
printf '  %s\n' "${SAMPLES[@]}"
