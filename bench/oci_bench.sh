#!/usr/bin/env bash
# Nodes through a registry, side by side with skopeo and umoci on the same
# image, on a fresh loopback filesystem and a fresh local registry
# (Debian's docker-registry, started here on a free port, storage on the
# loopback filesystem):
#   1. push of the rootfs node (one squashed layer) to an empty registry
#      vs `skopeo copy oci:LAYOUT docker://...` of the same image, exported
#      once by `agentenv export --oci` (skopeo compresses the layer, as it
#      does by default for a registry);                  target <= 1.5x
#   2. push of a child node with 10 changed files after its parent was
#      pushed (one small layer sent);                      target <= 0.5 s
#   3. pull + init (`init --from-image`) vs `skopeo copy docker://...
#      oci:DIR` + `umoci unpack`;                          target <= 1.5x
# Medians of REPS runs; each push run gets an empty registry.
#
# Usage: bench/oci_bench.sh [agentenv-binary]
# Env:   ROOTFS (/var/tmp/agentenv-bench/rootfs), FS (xfs|ext4, default
#        xfs), SIZE_GB (8), REPS (3), KEEP=1 keeps the image file.
# Needs root (loop devices, mount, umoci unpack).
set -euo pipefail
cd "$(dirname "$0")/.."
AE=${1:-$PWD/build/cli/agentenv}
ROOTFS=${ROOTFS:-/var/tmp/agentenv-bench/rootfs}
FS=${FS:-xfs}
SIZE_GB=${SIZE_GB:-8}
REPS=${REPS:-3}
die() { echo "oci_bench: $*" >&2; exit 1; }
note() { printf '%s\n' "$*" >&2; }
[ -x "$AE" ] || die "$AE: not an executable"
[ -d "$ROOTFS/usr" ] || die "$ROOTFS: no rootfs (bench/make_rootfs.sh builds one)"
[ "$(id -u)" = 0 ] || die "needs root (loop devices)"
for t in skopeo umoci docker-registry curl; do
  command -v $t >/dev/null || die "$t: not installed (scripts/install-deps.sh)"
done

IMG=/var/tmp/agentenv-ocibench.img MNT=/var/tmp/agentenv-ocibench
LOOP= REG_PID=
stop_registry() {
  if [ -n "$REG_PID" ]; then kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; fi
  REG_PID=
}
cleanup() {
  stop_registry
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

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
       echo 45000)
REG=127.0.0.1:$PORT
# start_registry: an empty registry of our own on $REG.
start_registry() {
  stop_registry
  rm -rf "$W/registry"; mkdir -p "$W/registry/storage"
  cat >"$W/registry/config.yml" <<EOF
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $W/registry/storage
http:
  addr: $REG
EOF
  docker-registry serve "$W/registry/config.yml" >"$W/registry/log" 2>&1 &
  REG_PID=$!
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://$REG/v2/" && return 0
    sleep 0.1
  done
  die "the registry did not start (see $W/registry/log)"
}

note "oci_bench: $(nproc) cpus, $FS on loop, rootfs $ROOTFS ($(find "$ROOTFS" | wc -l) entries, $(du -sh "$ROOTFS" | cut -f1))"
R=$W/repo
"$AE" init --from "$ROOTFS" --root "$R" >/dev/null
"$AE" export HEAD --oci "$W/peer-layout" --layers squash --root "$R" >/dev/null
sync

# --- 1. push of the rootfs node ---
P_AE=() P_SK=()
for i in $(seq "$REPS"); do
  start_registry
  rm -rf "$R/oci-layers"  # nothing remembered: the layer is written and sent
  t0=$(ms); "$AE" push HEAD "$REG/ae/rootfs:$i" --insecure --layers squash --root "$R" >/dev/null; t1=$(ms)
  P_AE+=("$(elapsed "$t0" "$t1")")
  start_registry
  t0=$(ms); skopeo copy -q --dest-tls-verify=false "oci:$W/peer-layout:latest" "docker://$REG/sk/rootfs:$i" >/dev/null; t1=$(ms)
  P_SK+=("$(elapsed "$t0" "$t1")")
done
pa=$(median "${P_AE[@]}") ps=$(median "${P_SK[@]}")
r=$(ratio "$pa" "$ps")
row "1. push rootfs node (squash)" "$pa ms" "skopeo copy oci: -> docker://" "$ps ms" "$r" \
    "agentenv/peer <= 1.5: $(awk -v r="$r" 'BEGIN {print (r <= 1.5 ? "PASS" : "MISS")}')"

# --- 2. push of a child with 10 changed files (parent pushed, path layers) ---
start_registry
"$AE" push HEAD "$REG/ae/rootfs:base" --insecure --root "$R" >/dev/null
C_AE=()
for i in $(seq "$REPS"); do
  for k in $(seq 10); do echo "change $i $k" >"$R/work/current/etc/bench-change-$k"; done
  "$AE" snap -m "ten changes $i" --root "$R" >/dev/null
  t0=$(ms); out=$("$AE" push HEAD "$REG/ae/rootfs:child$i" --insecure --root "$R" --json); t1=$(ms)
  C_AE+=("$(elapsed "$t0" "$t1")")
  note "child push $i: $out"
done
ca=$(median "${C_AE[@]}")
row "2. push child, 10 changed files" "$ca ms" "(absolute)" "500 ms" "$(ratio "$ca" 500)" \
    "<= 500 ms: $(awk -v a="$ca" 'BEGIN {print (a <= 500 ? "PASS" : "MISS")}')"

# --- 3. pull + init vs skopeo copy + umoci unpack (same squashed image) ---
start_registry
"$AE" push HEAD~$REPS "$REG/ae/rootfs:pull" --insecure --layers squash --root "$R" >/dev/null
L_AE=() L_PEER=()
for i in $(seq "$REPS"); do
  rm -rf "$W/pulled" "$W/sk-layout" "$W/bundle"
  t0=$(ms); "$AE" init --from-image "$REG/ae/rootfs:pull" --insecure --root "$W/pulled" >/dev/null; t1=$(ms)
  L_AE+=("$(elapsed "$t0" "$t1")")
  t0=$(ms)
  skopeo copy -q --src-tls-verify=false "docker://$REG/ae/rootfs:pull" "oci:$W/sk-layout:t" >/dev/null
  umoci unpack --image "$W/sk-layout:t" "$W/bundle" >/dev/null
  t1=$(ms)
  L_PEER+=("$(elapsed "$t0" "$t1")")
done
la=$(median "${L_AE[@]}") lp=$(median "${L_PEER[@]}")
r=$(ratio "$la" "$lp")
row "3. pull + init (init --from-image)" "$la ms" "skopeo copy + umoci unpack" "$lp ms" "$r" \
    "agentenv/peer <= 1.5: $(awk -v r="$r" 'BEGIN {print (r <= 1.5 ? "PASS" : "MISS")}')"
diff <(cd "$W/pulled/work/current" && find . | sort) <(cd "$W/bundle/rootfs" && find . | sort) >/dev/null &&
  note "pulled tree and umoci's unpack list the same paths" || note "WARNING: pulled tree and umoci's unpack differ"

echo "| measurement | agentenv | peer | peer value | ratio | target |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "samples (ms): push ${P_AE[*]}; skopeo push ${P_SK[*]}; child push ${C_AE[*]}"
echo "  pull+init ${L_AE[*]}; skopeo+umoci ${L_PEER[*]}"
