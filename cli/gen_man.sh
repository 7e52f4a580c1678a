#!/usr/bin/env bash
# Writes the agentenv(1) man page (roff) to stdout from the binary's own
# --help texts, so the page never disagrees with the program.
# Usage: cli/gen_man.sh path/to/agentenv > agentenv.1
set -euo pipefail
ae=$1
version=$("$ae" --version | awk '{print $2}')
# roff: backslashes doubled as \e, lines starting with . or ' protected.
esc() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

cat <<HEAD
.TH AGENTENV 1 "" "agentenv $version" "User Commands"
.SH NAME
agentenv \- a rewindable, versioned root filesystem for AI agents
.SH SYNOPSIS
.B agentenv
[\fB\-\-root\fR \fIDIR\fR] [\fB\-\-json\fR] \fICOMMAND\fR [\fIoptions\fR]
.SH DESCRIPTION
agentenv versions a whole root filesystem (the live tree \fIROOT\fR/work/current) as a history of
content-addressed snapshots, puts it back to any of them by rewriting only what differs, forks
any snapshot into overlay workspaces, and runs commands and agents inside it.
Every command takes \fB\-\-root\fR \fIDIR\fR (default: \fB\$AGENTENV_ROOT\fR or /agentfs) and
\fB\-\-json\fR (one JSON object on stdout).
.SH COMMANDS
HEAD
"$ae" --help | awk '/^  [a-z]/ {print $1}' | while read -r cmd; do
  help=$("$ae" --help | awk -v c="$cmd" '$1 == c {sub(/^  [a-z-]+ +/, ""); print}')
  case $help in Alias*) continue ;; esac
  printf '.SS %s\n%s\n.PP\n.nf\n' "$cmd" "$(printf '%s\n' "$help" | esc)"
  "$ae" "$cmd" --help 2>&1 | esc
  printf '.fi\n'
done
cat <<'TAIL'
.SH EXIT STATUS
0 success; 1 the operation failed; 2 bad arguments or input (nothing was changed); 3 unknown
ref, object or path; 4 fsck found damage; 5 another process holds the repository lock; 6
refused to overwrite. \fBexec\fR returns the command's own status (127: command not found).
.SH ENVIRONMENT
.TP
.B AGENTENV_ROOT
the repository when \fB\-\-root\fR is not given.
.TP
.B AGENTENV_BACKEND
\fBcopy\fR or \fBreflink\fR: how trees are written (default: probed).
.SH FILES
.TP
.I ROOT/work/current
the live tree.
.TP
.I ROOT/ignore
extra ignore patterns (gitignore syntax).
TAIL
