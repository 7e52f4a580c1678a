// Shared pieces of the agentenv command line: exit codes, global flags,
// and printing a reply as text or --json. Each command lives in
// cmd_<verb>.cc: parse flags → request → control:: call → print.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/fields.h"
#include "history/node_view.h"
#include "control/push.h"
#include "control/types.h"

namespace agentenv::cli {

using control::json;
using control::FormatTime;
using control::HumanBytes;
using control::Short;

// Exit codes, documented in the README: a function of the error's code.
enum Exit : int {
  kExitOk = 0,
  kExitFailed = 1,    // the operation failed (I/O, unsupported, ...)
  kExitUsage = 2,     // bad arguments or input; nothing was changed
  kExitNotFound = 3,  // unknown ref, object or path
  kExitCorrupt = 4,   // fsck found damage
  kExitBusy = 5,      // another process holds the repository lock
  kExitExists = 6,    // refused to overwrite (e.g. init on a repo)
  kExitNoProgram = 127,  // the command to run does not exist, as a shell says
};
int ExitFor(ErrorCode c);

// Options every command takes.
struct Globals {
  std::string root;   // --root, else $AGENTENV_ROOT, else /agentfs
  bool json = false;  // --json: one JSON object on stdout
  bool quiet = false;  // -q: no progress, no summary on success (warnings still on stderr)
  bool data = false;   // set by commands whose output is the data asked for: -q keeps it
};

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  std::string_view name;
  std::string_view help;
  CommandFn fn;
};

// Global options given before a command's name move behind it (the README
// promises them before or after it): argv[0] is what came before, then
// the options, then the name; returns argv with the name right after
// argv[0] and the options after the name. Empty when options end the line
// without a name.
std::vector<char*> GlobalsAfterName(int argc, char** argv);

// Adds --root and --json to a command's parser.
void AddGlobals(CLI::App& app, Globals& g);

// Parses argv with app; on --help or a usage error prints and returns the
// exit code to use, else returns -1 and the caller goes on.
int Parse(CLI::App& app, int argc, char** argv, const Globals& g);

// Prints an error (text on stderr, or {"ok":false,"error":{code,message}} on
// stdout with --json) and returns the exit code for it.
int ReportError(const Globals& g, const Error& e);

// Prints a success object: with --json `j` plus "ok":true, else `text`.
int ReportOk(const Globals& g, json j, std::string_view text);

// Prints a reply: its JSON form with --json, else render(reply).
template <class Reply, class Render>
int Print(const Globals& g, const Result<Reply>& r, Render render) {
  if (!r) return ReportError(g, r.error());
  return ReportOk(g, control::ToJson(*r), g.json ? std::string() : render(*r));
}

// One line per node: "<short>  <time>  <title>" ("[damaged] " before the
// title of a damaged node).
std::string NodeLine(const control::NodeInfo& n);
// log's outcome column, 9 wide: "exit 2", "signal 9", "timed out",
// "cancelled", "3 failed" (in a thinned span); blanks when all went well.
std::string OutcomeColumn(const control::NodeInfo& n);
// A HEAD move as log lists it among the nodes ("rollback" in the outcome
// column, from -> to, who asked).
std::string OperationLine(const control::OperationInfo& op);
// "+ path" / "- dir/" / "M path".
// "apt ~libc6 2.36-9 -> 2.36-9+deb12u4", "pip +requests 2.31.0 (dependency)  in usr/local/lib/...".
std::string PackageLine(const control::PackageInfo& p);
std::string ChangeLine(const control::ChangeInfo& c);


// Lines the commands of one kind share.
std::string Warnings(const std::vector<std::string>& ws);          // "warning: ..." lines
std::string MountLine(const control::MountInfo& m);                // a view, as mount lists it
std::string WorkspaceLine(const control::WorkspaceInfo& w);        // a workspace, as workspace ls lists it
// push and pull: a transfer's progress on a terminal (none with --json or off a terminal),
// and the registry options they share.
control::TransferProgress TtyProgress(const Globals& g, const char* verb);
void AddRegistryOptions(CLI::App& app, bool& insecure, std::string& auth_file);

}  // namespace agentenv::cli
