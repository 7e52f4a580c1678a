#!/usr/bin/env bash
# The real-rootfs acceptance scenario, end to end through the binary, on a
# debootstrap bookworm rootfs: init from a tarball, apt-get install inside,
# break python and remove make, roll back to a tag and to a time, put back
# one file, export, extract with GNU tar and bsdtar without a warning, and
# compare the extracted tree field by field with the live tree.
# Usage: acceptance.sh AGENTENV_BIN SOURCE_DIR [--rootless]
# Exit 77 (skipped) when the rootfs or the Debian mirror cannot be had.
set -euo pipefail
ae=$1 src=$2 mode=${3:-root}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (to build the rootfs, and to drop to uid 65534 for --rootless)"; exit 77; }
rootfs=${AGENTENV_TEST_ROOTFS:-/var/tmp/agentenv-bench/rootfs}
if [ ! -e "$rootfs/.agentenv-bench-complete" ]; then
  bash "$src/bench/make_rootfs.sh" "$rootfs" >/dev/null 2>/tmp/acceptance-rootfs.err ||
    { echo "SKIP: no debootstrap rootfs (no Debian mirror?): $(tail -1 /tmp/acceptance-rootfs.err)"; exit 77; }
fi
tmp=$(mktemp -d /var/tmp/agentenv-acceptance.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
as=()
if [ "$mode" = --rootless ]; then
  chown 65534:65534 "$tmp"
  as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
root=$tmp/repo work=$tmp/repo/work/current
a() { "${as[@]}" "$ae" "$1" --root "$root" "${@:2}"; }
inside() { "${as[@]}" "$ae" exec --root "$root" -- /bin/sh -c "$1"; }
step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

step "init from a tarball ($mode)"
tar -C "$rootfs" --numeric-owner --exclude=./.agentenv-bench-complete -cf "$tmp/rootfs.tar" .
chmod 644 "$tmp/rootfs.tar"
a init --tarball "$tmp/rootfs.tar" -q
a tag base -q
[ "$(a ls HEAD etc/shadow --json | python3 -c 'import json,sys; e=json.load(sys.stdin)["entries"][0]; print(e["uid"], e["gid"], oct(e["mode"]))')" = "0 42 0o640" ] ||
  fail "etc/shadow lost its owner or mode"

step "apt-get install jq inside"
if ! out=$(inside 'apt-get update -qq && apt-get install -y -qq jq >/dev/null && jq --version' 2>&1); then
  case $out in *"Temporary failure resolving"*|*"Could not resolve"*) echo "SKIP: no Debian mirror from inside"; exit 77 ;; esac
  fail "apt-get inside: $out"
fi
case $out in *jq-1.6*) ;; *) fail "jq --version said: $out" ;; esac
a tag with-jq -q
sleep 2
before_break=$(date +%s)
sleep 2

step "break python, remove make"
inside 'rm -rf /usr/lib/python3.11 && rm /usr/bin/make' >/dev/null
inside 'python3 -c 1' >/dev/null 2>&1 && fail "python3 still works after breaking it"

step "roll back to a time: @{N seconds ago}, before the break"
a restore "@{$(( $(date +%s) - before_break )) seconds ago}" -q
inside 'python3 -c "import json; print(json.dumps(1))" && make --version >/dev/null && jq --version' >/dev/null ||
  fail "the time rollback did not bring python, make and jq back"
[ "$(a head --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["id"])')" = \
  "$(a show with-jq --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["node"]["id"])')" ] ||
  fail "the time rollback did not land on the jq node"

step "break again, roll back to the tag"
inside 'rm -rf /usr/lib/python3.11' >/dev/null
a restore with-jq -q
inside 'python3 -c 1 && jq --version' >/dev/null || fail "the tag rollback did not bring python back"

step "partial restore of one file"
inside 'echo changed > /etc/motd && echo changed > /etc/hostname' >/dev/null
a restore base -q -- etc/motd
cmp -s "$work/etc/motd" "$rootfs/etc/motd" || fail "etc/motd is not as at base"
[ "$(cat "$work/etc/hostname")" = changed ] || fail "the partial restore touched etc/hostname"
a status --json | grep -q '"dirty":false' || fail "status is dirty after the partial restore"

step "export; GNU tar and bsdtar extract it without a word"
a export HEAD -o "$tmp/out.tar" -q
# Field by field: type, mode, owner, size, mtime (ns), link target, content.
# Ignored by default (contents not versioned: exports hold them empty).
ignored=(./proc ./sys ./dev ./run ./tmp ./var/tmp ./var/cache/apt ./var/lib/apt/lists)
prune=()
for d in "${ignored[@]}"; do prune+=(-path "$d" -o); done
listing() {  # DIR
  (cd "$1" && find . -mindepth 1 \( "${prune[@]}" -false \) -prune -o -printf '%p %y %#m %U:%G %s %T@ %l\n' |
     awk '$2 == "d" {$5 = "-"} {print}' | sort)  # a directory's size is the filesystem's business
}
for x in tar bsdtar; do
  mkdir "$tmp/x-$x"
  if [ $x = tar ]; then err=$(tar --numeric-owner --xattrs --xattrs-include='*' -xpf "$tmp/out.tar" -C "$tmp/x-$x" 2>&1)
  else err=$(bsdtar --numeric-owner -xpf "$tmp/out.tar" -C "$tmp/x-$x" 2>&1); fi
  [ -z "$err" ] || fail "$x warned: $(echo "$err" | head -3)"
  if [ "$mode" = --rootless ]; then
    # The live tree belongs to uid 65534 (owners in user.agentenv.owner):
    # compare all but owners, then the owners agentenv recorded.
    diff <(listing "$work" | awk '{$4=""; print}') <(listing "$tmp/x-$x" | awk '{$4=""; print}') >"$tmp/diff" ||
      fail "$x: the extracted tree differs from the live tree: $(head -6 "$tmp/diff")"
    [ "$(stat -c %u:%g "$tmp/x-$x/etc/shadow")" = 0:42 ] || fail "$x: etc/shadow is not 0:42"
    [ "$(stat -c %a "$tmp/x-$x/usr/bin/passwd")" = 4755 ] || fail "$x: usr/bin/passwd lost its setuid bit"
  else
    diff <(listing "$work") <(listing "$tmp/x-$x") >"$tmp/diff" ||
      fail "$x: the extracted tree differs from the live tree: $(head -6 "$tmp/diff")"
  fi
  (cd "$work" && find . \( "${prune[@]}" -false \) -prune -o -type f -print0 | sort -z | xargs -0 sha256sum) >"$tmp/live.sum"
  (cd "$tmp/x-$x" && sha256sum -c --quiet "$tmp/live.sum") || fail "$x: file contents differ"
done
a fsck -q
echo "acceptance ($mode): ok"
