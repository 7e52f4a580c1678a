// Persistent shell sessions for the exec op: a named session carries the
// working directory and the exported environment from one command to the
// next. The state lives on the host under <root>/jobs/session-<id>/ (cwd,
// env as `export -p` wrote it), bound into the env at kSessionDir; the
// command runs under /bin/sh, which restores the state first and saves it
// again when the command's shell exits (an EXIT trap, so `exit 3` saves
// too; a command that replaces the shell with `exec` keeps the old state).
// Shell functions and unexported variables are not carried.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/text.h"
#include "runner/runner.h"

namespace agentenv::run {

inline constexpr const char* kSessionDir = "/run/agentenv-session";

struct SessionState {
  std::string cwd = "/";
  std::map<std::string, std::string> env;  // exported variables after the last command
};

inline Result<void> CheckSessionId(const std::string& id) { return CheckName("session", id); }

// The host directory of session `id` under repo root `root`, created
// (0700) if missing. Errors: I/O with the path.
Result<std::string> SessionDir(const std::string& root, const std::string& id);

// Rewrites spec (argv, cwd, binds) so the command runs inside the session:
// `command` is a shell command line (eval'd), else `argv` runs as is; the
// session's cwd (or `cwd` if not empty) is entered, or "/" with a note on
// stderr if it is gone.
void WrapInSession(const std::string& session_dir, const std::string& command,
                   const std::vector<std::string>& argv, const std::string& cwd, runner::EnvSpec* spec);

// Reads the state the last command left. A session never used is cwd "/"
// and no variables. Errors: I/O with the path.
Result<SessionState> LoadSession(const std::string& session_dir);

// Parses `export -p` output of dash, bash or busybox sh ("export N='v'",
// "declare -x N=\"v\""): the variables with a value.
std::map<std::string, std::string> ParseExports(const std::string& text);

}  // namespace agentenv::run
