// agentenv daemon: automatic capture plus the control socket; ctl: one
// operation sent to it.
#include <signal.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "capture/capture.h"
#include "control/client.h"
#include "control/open_repo.h"
#include "control/ops.h"
#include "serve/http.h"
#include "serve/log.h"
#include "serve/serving.h"
#include "snap/layout.h"
#include "web/dvr_routes.h"

namespace agentenv::cli {
namespace {

// daemon and serve: one command; serve's help leads with the listener.
int RunDaemon(int argc, char** argv, const char* name, const char* about) {
  Globals g;
  int quiet_ms = 300, max_delay_ms = 3000;
  bool no_capture = false;
  std::string listen, token_file;
  std::vector<std::string> origins;
  CLI::App app{about, name};
  AddGlobals(app, g);
  app.add_option("--quiet-ms", quiet_ms, "Snapshot after this long without changes (default 300)")->check(CLI::Range(10, 600000));
  app.add_option("--max-delay-ms", max_delay_ms, "...but never later than this after the first change (default 3000)")->check(CLI::Range(10, 3600000));
  app.add_flag("--no-capture", no_capture, "Serve the socket only; no automatic snapshots");
  app.add_option("--listen", listen, "Also serve MCP over Streamable HTTP at http://HOST:PORT/mcp and the web DVR (a browser UI "
                                     "for the history) at http://HOST:PORT/ (PORT 0: any free port). "
                                     "A loopback HOST needs no token; any other requires one (see --token-file)");
  app.add_option("--token-file", token_file, "Require 'Authorization: Bearer <token>' with the token in this file, made "
                                             "(0600) when missing; default for a non-loopback --listen: <root>/http-token");
  app.add_option("--allow-origin", origins, "Also accept browser requests from this Origin (e.g. https://ui.example.com); "
                                            "loopback origins always are");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = control::OpenRepo(g.root);
  if (!repo) return ReportError(g, repo.error());
  control::Server server(std::move(*repo));
  serve::ServeOptions so;
  std::unique_ptr<web::Dvr> dvr;  // outlives the listener its routes are on
  std::string web_token, listen_host;
  so.signals = {SIGINT, SIGTERM};
  so.sockets.push_back({snap::layout::Socket(g.root), [&server](const std::string& op, const json& args,
                                                               const control::CallContext& call) {
                          const control::OpSpec* spec = control::FindOp(op);
                          serve::Log("client: " + (spec ? spec->name : op));
                          return control::CallJson(server, op, args, call);
                        }});
  if (!no_capture) so.capture = capture::CaptureOptions{quiet_ms, max_delay_ms};
  if (!listen.empty()) {
    auto hp = serve::ParseListen(listen);
    if (!hp) return ReportError(g, hp.error());
    serve::HttpOptions http;
    http.host = listen_host = hp->first;
    http.port = hp->second;
    http.allowed_origins = origins;
    if (token_file.empty() && !serve::IsLoopbackHost(http.host)) token_file = snap::layout::HttpToken(g.root);
    if (!token_file.empty()) {
      auto token = serve::LoadOrCreateToken(token_file);
      if (!token) return ReportError(g, token.error());
      http.token = *token;
    }
    so.http = http;
    // The web DVR's actions always need a token, also on loopback: the
    // listener's, or <root>/http-token.
    // Without one (a root this process cannot write) the DVR only reads.
    auto dvr_token = token_file.empty() ? serve::LoadOrCreateToken(snap::layout::HttpToken(g.root)) : http.token;
    if (dvr_token) web_token = *dvr_token;
    else serve::Log("web DVR: read-only, no action token: " + dvr_token.error().message);
    dvr = std::make_unique<web::Dvr>(server, web::DvrOptions{g.root, web_token});
    so.http_routes.push_back(dvr->Routes());
  }
  auto serving = serve::Serving::Start(server, std::move(so));
  if (!serving) return ReportError(g, serving.error());
  serve::Log("serving " + snap::layout::Socket(g.root) + (no_capture ? "" : ", capturing " + server.repo().work_dir()));
  if (const serve::HttpServer* http = (*serving)->http()) {
    serve::Log("serving MCP at " + http->base_url() + "/mcp" +
                 (token_file.empty() ? " (loopback, no token)" : " (bearer token in " + token_file + ")"));
    // On loopback the token rides in the fragment, which a browser never
    // sends: the page reads it and keeps it for the tab (sessionStorage).
    // Any other bind's log may be read by others: the token stays in its
    // file (and a browser could not send it with each request anyway).
    if (serve::IsLoopbackHost(listen_host))
      serve::Log("web DVR at " + http->base_url() + "/" + (web_token.empty() ? "" : "#token=" + web_token));
    else
      serve::Log("web DVR at " + http->base_url() + "/ (every request needs the bearer token in " + token_file +
                   "; for a browser, reach a loopback bind through a tunnel, e.g. ssh -L)");
  }
  int sig = (*serving)->WaitSignal();
  serve::Log(std::string("stopping on ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
  if (dvr) dvr->Stop();  // its event streams end: the listener need not wait for them
  (*serving)->Stop(true);  // the last changes still become a node
  return kExitOk;
}

}  // namespace

int CmdDaemon(int argc, char** argv) {
  return RunDaemon(argc, argv, "daemon",
                   "Capture every change of the live tree automatically and serve the control socket "
                   "(<root>/agentenv.sock, newline-delimited JSON) until SIGINT/SIGTERM. Holds the repository "
                   "lock while it runs: CLI writers (snap, restore, tag, ...) run through it. With --listen, "
                   "also MCP over HTTP (as `serve`)");
}

int CmdServe(int argc, char** argv) {
  return RunDaemon(argc, argv, "serve",
                   "The daemon (automatic capture, the control socket) plus MCP over Streamable HTTP with "
                   "--listen HOST:PORT, for an agent host on another machine: POST http://HOST:PORT/mcp (DELETE ends a "
                   "session), Mcp-Session-Id, a bearer token for any non-loopback bind; and the web DVR, a browser UI for "
                   "the history, at http://HOST:PORT/ (its URL with the action token is logged at start). One "
                   "process serves them all");
}

int CmdCtl(int argc, char** argv) {
  // `ctl --root R exec ...`: the options go behind the op too, so that exec
  // is seen and its own parser gets them.
  std::vector<char*> lifted = GlobalsAfterName(argc, argv);
  if (!lifted.empty()) {
    argc = int(lifted.size());
    argv = lifted.data();
  }
  // exec streams its output and takes its command after "--".
  if (argc >= 2 && std::string_view(argv[1]) == "exec") return CmdCtlExec(argc - 1, argv + 1);
  Globals g;
  std::string op, args_json;
  std::vector<std::string> kv;
  std::string names;
  for (const control::OpSpec& spec : control::Ops()) names += (names.empty() ? "" : ", ") + spec.name;
  CLI::App app{"Send one operation to a running daemon: ctl <op> [key=value ...] (ops: " + names +
                   "; `ctl exec -- CMD...` streams)",
               "ctl"};
  AddGlobals(app, g);
  app.add_option("op", op, "Operation")->required();
  app.add_option("args", kv, "Arguments as key=value (values parsed as JSON when they are JSON)");
  app.add_option("--args", args_json, "Arguments as one JSON object");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  json args = json::object();
  if (!args_json.empty()) {
    args = json::parse(args_json, nullptr, false);
    if (args.is_discarded() || !args.is_object())
      return ReportError(g, Error{"ctl: --args must be a JSON object", 0, ErrorCode::kInvalid});
  }
  for (const auto& a : kv) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return ReportError(g, Error{"ctl: argument '" + a + "': expected key=value", 0, ErrorCode::kInvalid});
    auto v = json::parse(a.substr(eq + 1), nullptr, false);
    args[a.substr(0, eq)] = v.is_discarded() ? json(a.substr(eq + 1)) : v;
  }
  control::Client client(g.root);
  auto resp = client.AskDaemon(op, args);
  if (!resp) return ReportError(g, resp.error());
  if (!*resp)
    return ReportError(g, Error{snap::layout::Socket(g.root) + ": no daemon is running (start one with `agentenv daemon`)",
                                0, ErrorCode::kNotFound});
  json result = std::move(**resp);
  return ReportOk(g, result, result.dump(2, ' ', false, json::error_handler_t::replace));
}

}  // namespace agentenv::cli
