// Shared pieces of the agentenv command line: the command table, exit
// codes, and output in text or --json form. Commands live in cmd_<verb>.cc;
// each parses its arguments, calls a library, and formats the result.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "common/result.h"

namespace agentenv::cli {

// Exit codes, documented in the README.
enum Exit : int {
  kExitOk = 0,
  kExitFailed = 1,    // the operation failed (I/O, unsupported, ...)
  kExitUsage = 2,     // bad arguments or input; nothing was changed
  kExitNotFound = 3,  // unknown ref, object or path
  kExitCorrupt = 4,   // fsck found damage
  kExitBusy = 5,      // another process holds the repository lock
  kExitExists = 6,    // refused to overwrite (e.g. init on a repo)
};

// Options every command takes.
struct Globals {
  std::string root;   // --root, else $AGENTENV_ROOT, else /agentfs
  bool json = false;  // --json: one JSON object on stdout
};

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  std::string_view name;
  std::string_view help;
  CommandFn fn;
};

// Adds --root and --json to a command's parser.
void AddGlobals(CLI::App& app, Globals& g);

// Parses argv with app; on --help or a usage error prints and returns the
// exit code to use, else returns -1 and the caller goes on.
int Parse(CLI::App& app, int argc, char** argv, const Globals& g);

// Prints an error (text on stderr, or {"ok":false,"error":{code,message}} on
// stdout with --json) and returns the exit code for it.
int ReportError(const Globals& g, const Error& e);

// Prints a success object: with --json `j` plus "ok":true, else `text`.
int ReportOk(const Globals& g, nlohmann::json j, std::string_view text);

// "not_found", "busy", ...: the error code as JSON output names it.
std::string_view ErrorCodeName(ErrorCode c);

// Human-readable byte count ("12.3 MiB").
std::string HumanBytes(uint64_t n);

// "2026-11-22 15:47:03" in local time from nanoseconds since the epoch.
std::string FormatTime(int64_t ns);

}  // namespace agentenv::cli

// --- shared by the repository commands ---
#include <memory>

#include "snap/repo.h"
#include "watch/ignore.h"

namespace agentenv::cli {

// Built-in defaults plus <root>/ignore (gitignore syntax). Errors: the
// file's path and line on a bad pattern.
Result<watch::IgnoreRules> RepoIgnoreRules(const std::string& root);

// The same rules as a filter for snap/.
Result<snap::PathFilter> LoadIgnoreRules(const std::string& root);

// Opens the repository at g.root with its ignore rules.
Result<std::unique_ptr<snap::Repo>> OpenRepo(const Globals& g);

// The first 12 hex digits of an id: what humans and models see.
std::string Short(const store::ObjectId& id);

// A node as JSON: id, short, seq, time, parent, title, changes, damaged
// (and damage: what is missing, when damaged).
nlohmann::json NodeJson(const snap::NodeRecord& r);
nlohmann::json ChangeJson(const snap::Change& c);

// One line per node: "<short>  <time>  <title>" ("[damaged] " before the
// title of a damaged node).
std::string NodeLine(const snap::NodeRecord& r);

}  // namespace agentenv::cli
