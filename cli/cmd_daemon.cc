// agentenv daemon: automatic capture plus the control socket.
#include <signal.h>

#include <cstdio>

#include "cli/capture.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/control_socket.h"
#include "cli/ops.h"
#include "cli/routed.h"

namespace agentenv::cli {
int CmdDaemon(int argc, char** argv) {
  Globals g;
  int quiet_ms = 300, max_delay_ms = 3000;
  bool no_capture = false;
  CLI::App app{"Capture every change of the live tree automatically and serve the control socket "
               "(<root>/agentenv.sock, newline-delimited JSON) until SIGINT/SIGTERM. Holds the repository "
               "lock while it runs: CLI writers (snap, restore, tag, ...) run through it", "daemon"};
  AddGlobals(app, g);
  app.add_option("--quiet-ms", quiet_ms, "Snapshot after this long without changes (default 300)")->check(CLI::Range(10, 600000));
  app.add_option("--max-delay-ms", max_delay_ms, "...but never later than this after the first change (default 3000)")->check(CLI::Range(10, 3600000));
  app.add_flag("--no-capture", no_capture, "Serve the socket only; no automatic snapshots");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());

  // Signals are taken synchronously by this thread; block them before any
  // other thread starts so that none of those receives them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  snap::Repo& r = **repo;
  // The socket first: it refuses at once when another daemon serves this
  // root. Then the lock, for good: from now on every writer runs here.
  auto server = ControlServer::Start(SocketPath(g.root), [&r](const std::string& op, const nlohmann::json& args,
                                                               const FrameSink& emit) {
    return ServeRequest(r, op, args, emit);
  });
  if (!server) return ReportError(g, server.error());
  if (auto held = r.HoldLock(); !held) return ReportError(g, held.error());
  std::unique_ptr<Capture> capture;
  if (!no_capture) {
    auto c = Capture::Start(r, {quiet_ms, max_delay_ms});
    if (!c) return ReportError(g, c.error());
    capture = std::move(*c);
  }
  DaemonLog("serving " + SocketPath(g.root) + (no_capture ? "" : ", capturing " + r.work_dir()));
  int sig = 0;
  sigwait(&sigs, &sig);
  DaemonLog(std::string("stopping on ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
  if (capture) capture->Stop(true);  // the last changes still become a node
  (*server)->Stop();
  return kExitOk;
}

int CmdCtl(int argc, char** argv) {
  // exec streams its output and takes its command after "--".
  if (argc >= 2 && std::string_view(argv[1]) == "exec") return CmdCtlExec(argc - 1, argv + 1);
  Globals g;
  std::string op, args_json;
  std::vector<std::string> kv;
  CLI::App app{"Send one operation to a running daemon: ctl <op> [key=value ...] (ops: snapshot, rollback, "
               "log, diff, show, head, branches, tag, status, exec, spawn, ps, kill; `ctl exec -- CMD...` streams)", "ctl"};
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
  if (!resp->value("ok", false)) return ReportError(g, ErrorFromResponse((*resp)["error"]));
  nlohmann::json result = (*resp)["result"];
  return ReportOk(g, result, result.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace agentenv::cli
