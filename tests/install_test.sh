#!/usr/bin/env bash
# `cmake --install` gives a stripped binary, a man page naming every
# command, and bash/zsh completion that completes commands and flags.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
ae=$prefix/bin/agentenv
[ -x "$ae" ] || fail "no $ae"
"$ae" --version | grep -q '^agentenv [0-9]' || fail "--version"
readelf -S "$ae" | grep -q '\.symtab' && fail "$ae is not stripped"
readelf -S "$build/cli/agentenv" | grep -q '\.symtab' || fail "the build's own binary should keep its symbols"

man1=$prefix/share/man/man1/agentenv.1
head -1 "$man1" | grep -q '^\.TH AGENTENV 1' || fail "$man1 is no man page"
for cmd in $("$ae" --help | awk '/^  [a-z]/ {print $1}'); do
  "$ae" --help | grep -q "^  $cmd  *Alias" && continue
  grep -q "^\.SS $cmd\$" "$man1" || fail "$man1 lacks command $cmd"
done
grep -q -- '--workspace' "$man1" || fail "$man1 lacks the commands' flags"

comp=$prefix/share/bash-completion/completions/agentenv
[ -f "$prefix/share/zsh/vendor-completions/_agentenv" ] || fail "no zsh completion"
got=$(PATH=$prefix/bin:$PATH bash -c "source '$comp'; COMP_WORDS=(agentenv tourn); COMP_CWORD=1; _agentenv; echo \${COMPREPLY[*]}")
[ "$got" = tournament ] || fail "bash completion of 'tourn': '$got'"
got=$(PATH=$prefix/bin:$PATH bash -c "source '$comp'; COMP_WORDS=(agentenv restore --a); COMP_CWORD=2; _agentenv; echo \${COMPREPLY[*]}")
[ "$got" = --at ] || fail "bash completion of 'restore --a': '$got'"
echo "install: binary, man page and completion in $prefix: ok"
