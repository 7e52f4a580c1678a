#!/usr/bin/env bash
# Tarballs in and out, side by side with bsdtar and GNU tar, on a fresh
# loopback filesystem, the tree being the cached rootfs plus COPIES copies
# of its /usr under /srv (COPIES=3: R4 of bench/RESULTS.md, ~55k entries):
#   1. import of the tree's pax tarball (GNU tar --acls --xattrs) as a node
#      vs `bsdtar -xpf` and `tar -xpf` of it, each alone and followed by
#      `sync` (an import is durable when it returns);
#   2. export of that node vs `bsdtar -cf` and `tar -cf` of the tree the
#      tools extracted (pax, ACLs and xattrs), warm page cache;
#   3. a sparse file (512-byte regions 1 MiB apart, 1 GiB): the bytes its
#      export takes beside GNU tar --sparse and bsdtar -S of the file.
# Medians of REPS runs; MB/s are the tree's bytes (du --apparent-size) per
# second. Run as root (loop devices).
#
# Usage: bench/archive_bench.sh [agentenv-binary]
# Env:   ROOTFS (/var/tmp/agentenv-bench/rootfs), COPIES (3), FS (ext4|xfs,
#        default ext4), SIZE_GB (10), REPS (3), KEEP=1 keeps the image file.
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
COPIES=${COPIES:-3}
FS=${FS:-ext4}
SIZE_GB=${SIZE_GB:-10}
REPS=${REPS:-3}
die() { echo "archive_bench: $*" >&2; exit 1; }
note() { printf '%s\n' "$*" >&2; }
[ -x "$AE" ] || die "$AE: not an executable"
[ -d "$ROOTFS/usr" ] || die "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)"
[ "$(id -u)" = 0 ] || die "needs root (loop devices)"
for t in bsdtar tar; do command -v $t >/dev/null || die "$t: not installed (scripts/install-deps.sh)"; done

IMG=/var/tmp/agentenv-archivebench.img MNT=/var/tmp/agentenv-archivebench
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

ns() { date +%s%N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.0f", (b - a) / 1e6}'; }
rate() { awk -v bytes="$BYTES" -v m="$1" 'BEGIN {printf "%.1f", bytes / 1e6 / (m / 1e3)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
ROWS=()
row() { ROWS+=("$(printf '| %s | %s | %s | %s |' "$@")"); }

# The tree: the rootfs and copies of its /usr.
SRC=$W/src
cp -a "$ROOTFS" "$SRC"
for i in $(seq "$COPIES"); do mkdir -p "$SRC/srv/copy$i" && cp -a "$ROOTFS/usr" "$SRC/srv/copy$i/usr"; done
ENTRIES=$(find "$SRC" | wc -l)
BYTES=$(du -sb --apparent-size "$SRC" | cut -f1)
TARBALL=$W/tree.tar
tar --format=pax --acls --xattrs --xattrs-include='*' --numeric-owner -C "$SRC" -cf "$TARBALL" .
sync
note "archive_bench: $(nproc) cpus, $FS on loop, $ENTRIES entries, $((BYTES / 1000000)) MB, tarball $(($(stat -c %s "$TARBALL") / 1000000)) MB"

# --- 1. import vs extraction ---
I_AE=() I_BSD=() I_BSD_SYNC=() I_GNU=() I_GNU_SYNC=()
R=$W/repo
for i in $(seq "$REPS"); do
  rm -rf "$R"; "$AE" init --root "$R" >/dev/null; sync
  t0=$(ns); out=$("$AE" import "$TARBALL" --root "$R" --json); t1=$(ns)
  I_AE+=("$(ms "$t0" "$t1")")
  IMPORTED=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["node"])')
  for tool in bsdtar gnu; do
    rm -rf "$W/x"; mkdir "$W/x"; sync
    t0=$(ns)
    if [ $tool = bsdtar ]; then bsdtar -xpf "$TARBALL" --numeric-owner -C "$W/x"; else
      tar -xpf "$TARBALL" --numeric-owner --acls --xattrs --xattrs-include='*' -C "$W/x"; fi
    t1=$(ns); sync; t2=$(ns)
    if [ $tool = bsdtar ]; then I_BSD+=("$(ms "$t0" "$t1")"); I_BSD_SYNC+=("$(ms "$t0" "$t2")"); else
      I_GNU+=("$(ms "$t0" "$t1")"); I_GNU_SYNC+=("$(ms "$t0" "$t2")"); fi
  done
done
ia=$(median "${I_AE[@]}") ib=$(median "${I_BSD[@]}") ibs=$(median "${I_BSD_SYNC[@]}")
ig=$(median "${I_GNU[@]}") igs=$(median "${I_GNU_SYNC[@]}")
row "import (unpack, record, durable)" "$ia ms, $(rate "$ia") MB/s" \
    "bsdtar -xpf $ib ms ($(rate "$ib") MB/s), +sync $ibs ms" "$(ratio "$ia" "$ib") / $(ratio "$ia" "$ibs")"
row "" "" "tar -xpf $ig ms ($(rate "$ig") MB/s), +sync $igs ms" "$(ratio "$ia" "$ig") / $(ratio "$ia" "$igs")"

# --- 2. export vs archiving the extracted tree ---
E_AE=() E_BSD=() E_GNU=()
for i in $(seq "$REPS"); do
  rm -f "$W/out.tar"
  t0=$(ns); "$AE" export "$IMPORTED" -o "$W/out.tar" --root "$R" -q; t1=$(ns)
  E_AE+=("$(ms "$t0" "$t1")")
  EXPORTED=$(stat -c %s "$W/out.tar")
  rm -f "$W/out.tar"
  t0=$(ns); bsdtar --format=pax --acls --xattrs --numeric-owner -C "$W/x" -cf "$W/out.tar" .; t1=$(ns)
  E_BSD+=("$(ms "$t0" "$t1")")
  rm -f "$W/out.tar"
  t0=$(ns); tar --format=pax --acls --xattrs --xattrs-include='*' --numeric-owner -C "$W/x" -cf "$W/out.tar" .; t1=$(ns)
  E_GNU+=("$(ms "$t0" "$t1")")
done
ea=$(median "${E_AE[@]}") eb=$(median "${E_BSD[@]}") eg=$(median "${E_GNU[@]}")
row "export (from the store)" "$ea ms, $(rate "$ea") MB/s" "bsdtar -cf $eb ms ($(rate "$eb") MB/s)" "$(ratio "$ea" "$eb")"
row "" "" "tar -cf $eg ms ($(rate "$eg") MB/s)" "$(ratio "$ea" "$eg")"
note "imported as $IMPORTED; its export $((EXPORTED / 1000000)) MB"

# --- 3. a sparse file's export ---
S=$W/sparse-src; rm -rf "$S"; mkdir -p "$S"
python3 - "$S/sparse" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for mib in range(1024):
    os.pwrite(fd, b"s" * 512, mib << 20)
os.ftruncate(fd, 1 << 30)
os.close(fd)
EOF
"$AE" init --from "$S" --root "$W/sparse-repo" >/dev/null
"$AE" export HEAD -o "$W/sparse-ae.tar" --root "$W/sparse-repo" -q
tar --sparse -C "$S" -cf "$W/sparse-gnu.tar" .
bsdtar -S -C "$S" -cf "$W/sparse-bsd.tar" .
disk=$(($(stat -c %b "$S/sparse") * 512))
row "sparse file, 1 GiB, 1024 x 512 B" "export $(stat -c %s "$W/sparse-ae.tar") B" \
    "tar --sparse $(stat -c %s "$W/sparse-gnu.tar") B; bsdtar -S $(stat -c %s "$W/sparse-bsd.tar") B" \
    "on disk $disk B"

echo "| measurement | agentenv | peer | ratio (agentenv / peer; / peer + sync) |"
echo "|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "samples (ms): import ${I_AE[*]}; bsdtar -x ${I_BSD[*]} (+sync ${I_BSD_SYNC[*]}); tar -x ${I_GNU[*]} (+sync ${I_GNU_SYNC[*]})"
echo "  export ${E_AE[*]}; bsdtar -c ${E_BSD[*]}; tar -c ${E_GNU[*]}"
