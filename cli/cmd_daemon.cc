// agentenv daemon: automatic capture plus the control socket.
#include <signal.h>

#include <cstdio>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/control_socket.h"
#include "cli/ops.h"
#include "snap/fsops.h"
#include "watch/debounce.h"

namespace agentenv::cli {
namespace {

void Log(const std::string& line) {
  std::fprintf(stderr, "%s agentenv daemon: %s\n", FormatTime(snap::NowNs()).c_str(), line.c_str());
}

// Turns one debounced change set into a snapshot (no node if nothing
// really changed: the stat cache and tree ids decide).
void Capture(snap::Repo& repo, const watch::ChangeSet& cs) {
  snap::SnapOptions opt;
  if (!cs.rescan_all) {
    std::vector<std::string> paths;
    for (const auto& [path, scope] : cs.paths) paths.push_back(path);
    opt.paths = std::move(paths);
  }
  auto r = repo.Snapshot(opt);
  if (!r) return Log("snapshot failed: " + r.error().message);
  if (!r->node) return;
  Log("node " + Short(*r->node) + ": " + r->label);
  // Thin history now and then; nodes are cheap to keep for a while.
  static int since_retain = 0;
  if (++since_retain < 64) return;
  since_retain = 0;
  auto kept = repo.Retain(snap::RetentionPolicy{}, false, snap::NowNs());
  if (!kept) return Log("retention failed: " + kept.error().message);
  if (!kept->dropped.empty()) Log("retention dropped " + std::to_string(kept->dropped.size()) + " old nodes");
}

}  // namespace

int CmdDaemon(int argc, char** argv) {
  Globals g;
  int quiet_ms = 300, max_delay_ms = 3000;
  bool no_capture = false;
  CLI::App app{"Capture every change of the live tree automatically and serve the control socket "
               "(<root>/agentenv.sock, newline-delimited JSON) until SIGINT/SIGTERM", "daemon"};
  AddGlobals(app, g);
  app.add_option("--quiet-ms", quiet_ms, "Snapshot after this long without changes (default 300)")->check(CLI::Range(10, 600000));
  app.add_option("--max-delay-ms", max_delay_ms, "...but never later than this after the first change (default 3000)")->check(CLI::Range(10, 3600000));
  app.add_flag("--no-capture", no_capture, "Serve the socket only; no automatic snapshots");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto rules = RepoIgnoreRules(g.root);
  if (!rules) return ReportError(g, rules.error());

  // Signals are taken synchronously by this thread; block them before any
  // other thread starts so that none of those receives them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  snap::Repo& r = **repo;
  auto server = ControlServer::Start(SocketPath(g.root), [&r](const std::string& op, const nlohmann::json& args) {
    return RunOp(r, op, args);
  });
  if (!server) return ReportError(g, server.error());
  std::unique_ptr<watch::Watcher> watcher;
  if (!no_capture) {
    watch::WatcherOptions wo;
    wo.timing.quiet = std::chrono::milliseconds(quiet_ms);
    wo.timing.max_delay = std::chrono::milliseconds(max_delay_ms);
    wo.journal.ignore = *rules;
    wo.journal.on_warning = [](const std::string& w) { Log("warning: " + w); };
    // The watch starts before the baseline scan, so nothing falls between.
    auto w = watch::Watcher::Start(r.work_dir(), wo, [&r](watch::ChangeSet cs) { Capture(r, cs); });
    if (!w) return ReportError(g, w.error());
    watcher = std::move(*w);
    Capture(r, watch::ChangeSet{{}, true});
  }
  Log("serving " + SocketPath(g.root) + (no_capture ? "" : ", capturing " + r.work_dir()));
  int sig = 0;
  sigwait(&sigs, &sig);
  Log(std::string("stopping on ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
  if (watcher) watcher->Stop(true);  // the last changes still become a node
  (*server)->Stop();
  return kExitOk;
}

int CmdCtl(int argc, char** argv) {
  Globals g;
  std::string op, args_json;
  std::vector<std::string> kv;
  CLI::App app{"Send one operation to a running daemon: ctl <op> [key=value ...] (ops: snapshot, rollback, "
               "log, diff, show, head, branches, tag, status)", "ctl"};
  AddGlobals(app, g);
  app.add_option("op", op, "Operation")->required();
  app.add_option("args", kv, "Arguments as key=value (values parsed as JSON when they are JSON)");
  app.add_option("--args", args_json, "Arguments as one JSON object");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  nlohmann::json args = nlohmann::json::object();
  if (!args_json.empty()) {
    args = nlohmann::json::parse(args_json, nullptr, false);
    if (args.is_discarded() || !args.is_object())
      return ReportError(g, Error{"ctl: --args must be a JSON object", 0, ErrorCode::kInvalid});
  }
  for (const auto& a : kv) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return ReportError(g, Error{"ctl: argument '" + a + "': expected key=value", 0, ErrorCode::kInvalid});
    auto v = nlohmann::json::parse(a.substr(eq + 1), nullptr, false);
    args[a.substr(0, eq)] = v.is_discarded() ? nlohmann::json(a.substr(eq + 1)) : v;
  }
  auto resp = CallDaemon(SocketPath(g.root), op, args);
  if (!resp) return ReportError(g, resp.error());
  if (!resp->value("ok", false)) {
    const auto& e = (*resp)["error"];
    std::string code = e.value("code", "io");
    ErrorCode c = code == "invalid" ? ErrorCode::kInvalid : code == "not_found" ? ErrorCode::kNotFound
                : code == "busy" ? ErrorCode::kBusy : code == "corrupt" ? ErrorCode::kCorrupt
                : code == "exists" ? ErrorCode::kExists : ErrorCode::kIo;
    return ReportError(g, Error{e.value("message", "daemon error"), 0, c});
  }
  nlohmann::json result = (*resp)["result"];
  return ReportOk(g, result, result.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace agentenv::cli
