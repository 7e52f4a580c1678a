// agentenv daemon (and serve, which is the daemon with --listen): capture every change of the
// live tree automatically and serve the control socket.
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
  int command_nice = -1;
  app.add_option("--command-nice", command_nice,
                 "Run exec'd commands this much nicer than the writer that starts them (--writer-nice), 0-19 "
                 "(default 5 with --listen: reads keep a core while agents keep the CPU busy; else 0)")
      ->check(CLI::Range(0, 19));
  int writer_nice = 0;
  app.add_option("--writer-nice", writer_nice,
                 "Run writers' work (exec, snapshot, fork, rollback: hashing, an env's setup) this much nicer than "
                 "reads, 0-19 (default 0; 10 favours reads when agents keep the CPU busy); the commands exec "
                 "starts run --command-nice nicer still")
      ->check(CLI::Range(0, 19));
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = control::OpenRepo(g.root);
  if (!repo) return ReportError(g, repo.error());
  control::Server server(std::move(*repo));
  server.set_command_nice(command_nice >= 0 ? command_nice : listen.empty() ? 0 : 5);
  server.set_writer_nice(writer_nice);
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
    serve::Log("serving MCP at " + http->base_url() + "/mcp" + " (workspace NAME at " + http->base_url() +
                 "/w/NAME/mcp)" + (token_file.empty() ? " (loopback, no token)" : " (bearer token in " + token_file + ")"));
    // On loopback the token rides in the fragment, which a browser never
    // sends: the page reads it, keeps it for the tab (sessionStorage) and
    // trades it for a session cookie (web/session.h). Any other bind's log
    // may be read by others: the token stays in its file; the page asks
    // for it once, then its session cookie carries its reads.
    if (serve::IsLoopbackHost(listen_host))
      serve::Log("web DVR at " + http->base_url() + "/" + (web_token.empty() ? "" : "#token=" + web_token));
    else
      serve::Log("web DVR at " + http->base_url() + "/ (the page asks once for the token in " + token_file +
                   ", then keeps a session cookie)");
  }
  int sig = (*serving)->WaitSignal();
  serve::Log(std::string("stopping on ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
  if (dvr) dvr->Stop();  // its event streams end: the listener need not wait for them
  (*serving)->Stop(true);  // the last changes still become a node
  return kExitOk;
}

int CmdDaemon(int argc, char** argv) {
  return RunDaemon(argc, argv, "daemon",
                   "Capture every change of the live tree automatically and serve the control socket "
                   "(<root>/agentenv.sock, newline-delimited JSON) until SIGINT/SIGTERM. Holds the repository "
                   "lock while it runs: CLI writers (snap, restore, tag, ...) run through it. With --listen, "
                   "also MCP over HTTP (as `serve`)");
}

}  // namespace agentenv::cli
