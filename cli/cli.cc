#include "cli/cli.h"

#include <cstdlib>
#include <iostream>

#include "control/errors.h"

namespace agentenv::cli {

int ExitFor(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalid: return kExitUsage;
    case ErrorCode::kNotFound: return kExitNotFound;
    case ErrorCode::kCorrupt: return kExitCorrupt;
    case ErrorCode::kBusy: return kExitBusy;
    case ErrorCode::kExists: return kExitExists;
    case ErrorCode::kIo:
    case ErrorCode::kUnsupported: return kExitFailed;
    case ErrorCode::kNoProgram: return kExitNoProgram;
  }
  return kExitFailed;
}

std::vector<char*> GlobalsAfterName(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  size_t at = 1;
  std::vector<char*> globals;
  while (at < args.size()) {
    std::string_view a = args[at];
    if (a == "--json" || a == "-q" || a == "--quiet") {
      globals.push_back(args[at++]);
    } else if (a == "--root" && at + 1 < args.size()) {
      globals.push_back(args[at++]);
      globals.push_back(args[at++]);
    } else if (a.rfind("--root=", 0) == 0) {
      globals.push_back(args[at++]);
    } else {
      break;
    }
  }
  if (globals.empty()) return args;
  if (at == args.size()) return {};
  std::vector<char*> moved = {args[0], args[at]};
  moved.insert(moved.end(), globals.begin(), globals.end());
  moved.insert(moved.end(), args.begin() + at + 1, args.end());
  return moved;
}

void AddGlobals(CLI::App& app, Globals& g) {
  const char* env = std::getenv("AGENTENV_ROOT");
  g.root = env && *env ? env : "/agentfs";
  app.add_option("--root", g.root, "Repository root (default: $AGENTENV_ROOT or /agentfs)");
  app.add_flag("--json", g.json, "Print one JSON object on stdout");
  app.add_flag("-q,--quiet", g.quiet, "No progress and no summary on success; warnings and errors still go to stderr");
  app.add_option_function<double>(
         "--wait",
         [](double s) { ::setenv("AGENTENV_LOCK_WAIT", std::to_string(s).c_str(), 1); },
         "Seconds a writer waits for the repository lock another command holds before exiting 5 "
         "(default: $AGENTENV_LOCK_WAIT or 30; 0: fail at once)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(
          [](std::string& v) {
            char* end = nullptr;
            double s = std::strtod(v.c_str(), &end);
            return end && *end == 0 && s >= 0 ? std::string() : "expected seconds, 0 or more, got '" + v + "'";
          },
          "", "seconds"));
}

int Parse(CLI::App& app, int argc, char** argv, const Globals& g) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    Error err{app.get_name() + ": " + e.what() + " (see --help)", 0, ErrorCode::kInvalid};
    return ReportError(g, err);
  }
  return -1;
}

int ReportError(const Globals& g, const Error& e) {
  if (g.json) {
    json j = {{"ok", false}, {"error", control::ErrorJson(e)}};
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  } else {
    std::cerr << "agentenv: " << e.message << '\n';
  }
  return ExitFor(e.code);
}

int ReportOk(const Globals& g, json j, std::string_view text) {
  if (g.json) {
    j["ok"] = true;
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  } else if (g.quiet && !g.data) {
    if (j.contains("warnings") && j["warnings"].is_array())
      for (const json& w : j["warnings"]) std::cerr << "warning: " << w.get<std::string>() << '\n';
  } else if (!text.empty()) {
    std::cout << text;
    if (text.back() != '\n') std::cout << '\n';
  }
  return kExitOk;
}

std::string NodeLine(const control::NodeInfo& n) {
  return n.short_id + "  " + n.time + "  " + (n.damaged ? "[damaged] " : "") + n.title;
}

std::string OutcomeColumn(const control::NodeInfo& n) {
  std::string mark;
  if (n.provenance) {
    const auto& p = *n.provenance;
    if (p.cancelled) mark = "cancelled";
    else if (p.timed_out) mark = "timed out";
    else if (p.signal) mark = "signal " + std::to_string(p.signal);
    else if (p.exit_code && *p.exit_code != 0) mark = "exit " + std::to_string(*p.exit_code);
    else if (p.thinned && p.thinned->failed) mark = std::to_string(p.thinned->failed) + " failed";
  }
  mark.resize(std::max<size_t>(mark.size(), 9), ' ');
  return mark;
}

std::string OperationLine(const control::OperationInfo& op) {
  std::string what = op.kind == "tournament_apply" ? "tournament " + op.tournament + " applied" : op.kind;
  std::string line = "  " + std::string(12, '-') + "  " + op.time + "  rollback   " + what + ": HEAD " +
                     (op.from.empty() ? "(none)" : op.from.substr(0, 12)) + " -> " + op.to.substr(0, 12) + " (" +
                     op.who.origin + (op.who.client.empty() ? "" : " " + op.who.client) + ")";
  if (!op.saved.empty()) line += "; unsaved changes saved as " + op.saved.substr(0, 12);
  return line;
}

std::string PackageLine(const control::PackageInfo& p) {
  std::string version = p.op == "~" ? p.old_version + " -> " + p.new_version
                        : p.op == "-" ? p.old_version
                                      : p.new_version;
  std::string text = p.ecosystem + " " + p.op + p.name;
  if (!version.empty()) text += " " + version;
  if (p.dependency) text += " (dependency)";
  if (!p.where.empty()) text += "  in " + p.where;
  return text;
}

std::string ChangeLine(const control::ChangeInfo& c) { return c.op + " " + c.path + (c.dir ? "/" : ""); }


// One line per blob on stderr, redrawn as bytes move, when stderr is a
// terminal and the output is not --json.
control::TransferProgress TtyProgress(const Globals& g, const char* verb) {
  if (g.json || !::isatty(STDERR_FILENO)) return nullptr;
  return [verb, last = std::string()](const registry::Progress& p) mutable {
    std::string head = (p.count ? std::to_string(p.index) + "/" + std::to_string(p.count) + " " : "") + p.what + " " +
                       p.digest.substr(7, 12);
    std::string now = head + " " + std::to_string(p.done) + (p.finished ? " done" : "");
    if (now == last) return;  // libcurl reports often; redraw only on news
    last = now;
    if (p.skipped) {
      std::fprintf(stderr, "\r\033[K%s: already there, skipped\n", head.c_str());
    } else if (p.finished) {
      std::fprintf(stderr, "\r\033[K%s: %s %s\n", head.c_str(), verb, HumanBytes(p.total).c_str());
    } else {
      std::fprintf(stderr, "\r\033[K%s: %s / %s", head.c_str(), HumanBytes(p.done).c_str(), HumanBytes(p.total).c_str());
    }
    std::fflush(stderr);
  };
}

void AddRegistryOptions(CLI::App& app, bool& insecure, std::string& auth_file) {
  app.add_flag("--insecure", insecure, "Plain HTTP (and no TLS verification)");
  app.add_option("--auth-file", auth_file,
                 "docker/podman config.json with credentials (default: $XDG_RUNTIME_DIR/containers/auth.json, "
                 "then ~/.docker/config.json)");
}

std::string Warnings(const std::vector<std::string>& ws) {
  std::string text;
  for (const auto& w : ws) text += "warning: " + w + "\n";
  return text;
}

std::string MountLine(const control::MountInfo& m) {
  return m.dir + "  " + m.node.substr(0, 12) + "  " + m.created + "  uid " + std::to_string(m.uid) +
         (m.mounted ? "" : "  [stale: no longer mounted; gc removes the record]");
}

std::string WorkspaceLine(const control::WorkspaceInfo& w) {
  return w.name + "  from " + w.base.substr(0, 12) + (w.head != w.base ? "  at " + w.head.substr(0, 12) : "") +
         "  " + w.created + (w.busy ? "  [busy]" : "");
}

}  // namespace agentenv::cli
