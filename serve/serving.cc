#include "serve/serving.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "control/browse.h"
#include "capture/capture.h"
#include "control/ops.h"
#include "serve/log.h"
#include "workspace/workspace.h"

namespace agentenv::serve {

Result<std::unique_ptr<Serving>> Serving::Signals(control::Server& server, const std::vector<int>& signals) {
  std::unique_ptr<Serving> s(new Serving(server));
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  s->signals_.reset(::signalfd(-1, &set, SFD_CLOEXEC));
  if (!s->signals_) return FailErrno("signalfd", errno);
  return s;
}

Result<std::unique_ptr<Serving>> Serving::Start(control::Server& server, ServeOptions opt) {
  AE_ASSIGN(auto s, Signals(server, opt.signals));
  for (auto& [path, handler] : opt.sockets) {
    AE_ASSIGN(auto sock, SocketServer::Listen(path, std::move(handler)));
    s->sockets_.push_back(std::move(sock));
  }
  AE_TRY(server.repo().HoldLock());
  if (opt.capture) {
    if (!opt.capture->log) opt.capture->log = Log;
    AE_TRY(server.StartCapture(*opt.capture));
  }
  // HTTP serves as soon as it listens: it starts once the capture has, as
  // the sockets accept only now (no request sees a half-set-up server).
  if (opt.http) {
    ToolRunner run = [&server](const std::string& op, const nlohmann::json& args, const control::CallContext& call) {
      const control::OpSpec* spec = control::FindOp(op);
      serve::Log("mcp: " + (spec ? spec->name : op));
      return control::CallJson(server, op, args, call);
    };
    FileReader read = NodeFileReader(server);
    // Scoped tokens (serve/grants.h): the guard lets them through to their
    // own endpoint only, MCP gives each session its grant.
    s->grants_ = std::make_unique<Grants>(server.repo().root(), opt.http->token);
    const Grants* grants = s->grants_.get();
    opt.http->scoped_tokens = [grants](std::string_view authorization, std::string_view path) {
      return grants->Refuses(authorization, path);
    };
    McpHttpOptions mcp_opt;
    mcp_opt.authorize = [grants](std::string_view authorization) { return grants->Authorize(authorization); };
    mcp_opt.check_environment = [&server](const std::string& env) -> Result<void> {
      AE_TRY(workspace::LoadWorkspace(server.repo().root(), env));
      return {};
    };
    s->mcp_http_ = std::make_unique<McpHttpEndpoint>(std::move(run), std::move(read), std::move(mcp_opt));
    std::vector<HttpRoutes> routes = {s->mcp_http_->Routes("/mcp")};
    routes.insert(routes.end(), opt.http_routes.begin(), opt.http_routes.end());
    AE_ASSIGN(s->http_, HttpServer::Start(*opt.http, routes));
  }
  for (auto& sock : s->sockets_) sock->Accept();
  return s;
}

Serving::~Serving() { Stop(false); }

int Serving::WaitSignal() {
  signalfd_siginfo si{};
  for (;;) {
    ssize_t n = ::read(signals_.get(), &si, sizeof si);
    if (n == sizeof si) return int(si.ssi_signo);
    if (n < 0 && errno != EINTR) return SIGTERM;
  }
}

void Serving::Stop(bool deliver_pending) {
  if (stopped_) return;
  stopped_ = true;
  server_.StopCapture(deliver_pending);
  if (mcp_http_) mcp_http_->Stop();  // requests in flight end: the listener need not wait for them
  if (http_) http_->Stop();
  for (auto& s : sockets_) s->Stop();
}

}  // namespace agentenv::serve
