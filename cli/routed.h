// Commands that need the repository lock, run where the lock is.
//
// A running daemon (or supervisor) holds the lock for its whole life and
// serves every writer itself. A command that needs the lock therefore asks
// the daemon on <root>/agentenv.sock to run it when one answers there, and
// runs it here otherwise; either way it prints the same text, the same
// --json object and exits with the same code. Readers (log, show, ...) run
// here always: they never take the lock.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "cli/cli.h"
#include "cli/ops.h"

namespace agentenv::cli {

// What a command prints on success: the --json object (without "ok") and
// the text form.
struct Reply {
  nlohmann::json json;
  std::string text;
};

// The part of a command that needs the lock. `args` is what the command
// parsed, as JSON; paths in it must already be absolute.
using LockedFn = Result<Reply> (*)(snap::Repo& repo, const nlohmann::json& args);

// The locked parts of the commands, defined in cmd_<verb>.cc.
Result<Reply> SnapLocked(snap::Repo& repo, const nlohmann::json& args);     // snap
Result<Reply> RestoreLocked(snap::Repo& repo, const nlohmann::json& args);  // restore
Result<Reply> TagLocked(snap::Repo& repo, const nlohmann::json& args);      // tag NAME, tag -d
Result<Reply> RetainLocked(snap::Repo& repo, const nlohmann::json& args);   // retain
Result<Reply> GcLocked(snap::Repo& repo, const nlohmann::json& args);       // gc
Result<Reply> StatusLocked(snap::Repo& repo, const nlohmann::json& args);   // status
Result<Reply> DiffLocked(snap::Repo& repo, const nlohmann::json& args);     // diff
Result<Reply> ImportLocked(snap::Repo& repo, const nlohmann::json& args);   // import

// Runs `verb` through the daemon serving g.root, or here when no daemon
// answers: on `open` when the caller has the repository open already (LMDB
// must not be opened twice in one process), else on a repository opened
// for the call. Errors: the command's own, or the socket's (I/O) when a
// daemon answered but the exchange failed.
Result<Reply> CallLocked(const Globals& g, const std::string& verb, const nlohmann::json& args,
                         snap::Repo* open = nullptr);

// CallLocked, then prints the reply (ReportOk) or the error (ReportError)
// and returns the exit code.
int RunLocked(const Globals& g, const std::string& verb, const nlohmann::json& args);

// A control-plane op (cli/ops.h) through the daemon serving `root`, or on
// `repo` when no daemon answers: for `agentenv mcp`.
Result<nlohmann::json> RunOpAnywhere(const std::string& root, snap::Repo& repo, const std::string& op,
                                     const nlohmann::json& args);

// The daemon side: answers "cli.<verb>" requests with {"json":..., "text":...}
// (under WriterMutex()) and every other op with RunOpStream, frames going to
// `emit`. Logs each served command. Thread-safe.
Result<nlohmann::json> ServeRequest(snap::Repo& repo, const std::string& op, const nlohmann::json& args,
                                    const OpFrameSink& emit);

// The error a daemon response carries ({"code","message"}), as an Error.
Error ErrorFromResponse(const nlohmann::json& error);

}  // namespace agentenv::cli
