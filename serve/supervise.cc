// supervise (serve/supervise.h).
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <optional>

#include "common/mutex.h"
#include "control/open_repo.h"
#include "run/jobs.h"
#include "control/ops.h"
#include "serve/log.h"
#include "serve/serving.h"
#include "serve/supervise.h"
#include "serve/workspace_capture.h"
#include "snap/layout.h"
#include "runner/runner.h"

namespace agentenv::serve {

using json = nlohmann::json;

namespace {

class Supervisor {
 public:
  Supervisor(control::Server& server, runner::EnvSpec spec) : server_(server), spec_(std::move(spec)) {}

  Result<void> Launch() {
    MutexLock lock(mu_);
    AE_ASSIGN(runner::Env env, runner::Env::Start(spec_));
    serve::Log("agent started (pid " + std::to_string(env.pid()) + ")");
    env_.emplace(std::move(env));
    return {};
  }

  // Operator rollback: stop the world, restore, relaunch.
  Result<json> OperatorRollback(const json& args) {
    AE_ASSIGN(control::RollbackRequest req, control::ReadRequest<control::RollbackRequest>("rollback", args));
    MutexLock lock(mu_);
    if (env_) {
      env_->KillAll();
      env_.reset();
    }
    Result<control::RollbackReply> r = server_.Rollback(req);
    auto env = runner::Env::Start(spec_);
    if (!env) return Unexpected<Error>(env.error());
    serve::Log("agent relaunched after rollback (pid " + std::to_string(env->pid()) + ")");
    env_.emplace(std::move(*env));
    if (!r) return Unexpected<Error>(r.error());
    r->relaunched = true;
    return control::ToJson(*r);
  }

  // ps with the agent's env added (null while none runs).
  Result<json> Ps(const json& args) {
    AE_ASSIGN(control::PsRequest req, control::ReadRequest<control::PsRequest>("ps", args));
    AE_ASSIGN(control::PsReply rep, server_.Ps(req));
    rep.supervised = true;
    MutexLock lock(mu_);
    if (env_) rep.agent = control::AgentEntry{env_->pid(), run::EnvProcesses(*env_)};
    return control::ToJson(rep);
  }

  // The pidfd of the running agent env, -1 while none runs.
  int pidfd() {
    MutexLock lock(mu_);
    return env_ ? env_->pidfd() : -1;
  }

  // Called when the pidfd is readable: the exit status if the agent ended
  // by itself (not killed for a relaunch).
  std::optional<runner::ExitStatus> Reap(int fd) {
    MutexLock lock(mu_);
    // The env may have been replaced meanwhile (even reusing the fd
    // number): only an env that has really ended is reaped.
    if (!env_ || env_->pidfd() != fd) return std::nullopt;
    auto st = env_->TryWait();
    if (st && !*st) return std::nullopt;
    env_.reset();
    return st ? **st : runner::ExitStatus{1, 0, false};
  }

  void Stop() {
    MutexLock lock(mu_);
    if (env_) env_->KillAll();
    env_.reset();
  }

 private:
  control::Server& server_;
  runner::EnvSpec spec_;
  Mutex mu_;  // rollbacks and the main loop race for env_
  std::optional<runner::Env> env_ GUARDED_BY(mu_);
};

// Waits for the agent (or a signal); its exit code.
template <class Sup>
int WaitForAgent(Sup& sup, Serving& serving) {
  for (;;) {
    int pfd = sup.pidfd();
    pollfd p[2] = {{serving.signal_fd(), POLLIN, 0}, {pfd, POLLIN, 0}};
    if (::poll(p, pfd >= 0 ? 2 : 1, 100) < 0 && errno != EINTR) return 1;
    if (p[0].revents) {
      serve::Log("stopping: signal; killing the env");
      sup.Stop();
      return 128 + SIGTERM;
    }
    if (pfd >= 0 && (p[1].revents & POLLIN)) {
      if (auto st = sup.Reap(pfd)) {
        const int code = st->signal ? 128 + st->signal : st->exit_code;
        serve::Log("agent exited with " + std::to_string(code));
        return code;
      }
    }
  }
}

// supervise --workspace: the agent in the workspace's overlay, the
// workspace captured from its upper; the operator's socket serves as the
// daemon's.
Result<int> SuperviseWorkspace(control::Server& server, const std::string& root, const SuperviseOptions& opt) {
  std::string holder = "supervise: " + (opt.argv.empty() ? std::string() : opt.argv.front());
  AE_ASSIGN(workspace::WorkspaceInUse in_ws, workspace::UseWorkspace(server.repo(), opt.workspace, holder));
  runner::EnvSpec spec;
  spec.argv = opt.argv;
  AE_ASSIGN(spec.network, run::ParseNetwork(opt.network));
  in_ws.Apply(&spec);
  Supervisor sup(server, spec);
  ServeOptions so;
  so.signals = {SIGINT, SIGTERM};
  so.sockets.push_back({snap::layout::Socket(root), [&](const std::string& op, const json& args, const control::CallContext& call) {
                          const control::OpSpec* s = control::FindOp(op);
                          if (s && s->name == "ps") return sup.Ps(args);
                          return control::CallJson(server, op, args, call);
                        }});
  AE_ASSIGN(auto serving, Serving::Start(server, std::move(so)));
  capture::CaptureOptions co = opt.capture;
  if (!co.log) co.log = Log;
  co.kind = snap::ProvenanceKind::kSupervise;
  co.who = {snap::Origin::kSupervise, opt.argv.empty() ? "" : opt.argv.front(), ""};
  AE_ASSIGN(auto capture, WorkspaceCapture::Start(server.repo(), in_ws.ws, co));
  AE_TRY(sup.Launch());
  const int exit_code = WaitForAgent(sup, *serving);
  capture->Stop(true);  // the agent's last changes still become a node
  serving->Stop(false);
  return exit_code;
}

}  // namespace

Result<int> Supervise(const std::string& root, const SuperviseOptions& opt) {
  AE_ASSIGN(auto repo, control::OpenRepo(root));
  control::Server server(std::move(repo));
  if (!opt.workspace.empty()) return SuperviseWorkspace(server, root, opt);
  runner::EnvSpec spec;
  spec.root = server.repo().work_dir();
  spec.argv = opt.argv;
  AE_ASSIGN(spec.network, run::ParseNetwork(opt.network));
  // /run is ignored (never versioned), so a restored tree may lack it; the
  // runner mounts a tmpfs there and binds the agent socket inside.
  run::EnsureRunDir(server.repo().work_dir());
  std::string agent_sock = snap::layout::AgentSocket(root);
  spec.binds.push_back({agent_sock, runner::kSocketPath, false});
  Supervisor sup(server, spec);

  ServeOptions so;
  so.signals = {SIGINT, SIGTERM};
  so.sockets.push_back({agent_sock, [&server](const std::string& op, const json& args, const control::CallContext& call) {
                          return control::CallJson(server, op, args, call);  // in place: the agent keeps running
                        }});
  so.sockets.push_back({snap::layout::Socket(root), [&](const std::string& op, const json& args, const control::CallContext& call) {
                          const control::OpSpec* spec = control::FindOp(op);
                          if (spec && spec->name == "rollback") return sup.OperatorRollback(args);
                          if (spec && spec->name == "ps") return sup.Ps(args);
                          return control::CallJson(server, op, args, call);
                        }});
  so.capture = opt.capture;
  // The agent's changes: supervise's capture, made by the agent it runs.
  so.capture->kind = snap::ProvenanceKind::kSupervise;
  so.capture->who = {snap::Origin::kSupervise, opt.argv.empty() ? "" : opt.argv.front(), ""};
  AE_ASSIGN(auto serving, Serving::Start(server, std::move(so)));
  AE_TRY(sup.Launch());

  const int exit_code = WaitForAgent(sup, *serving);
  serving->Stop(true);  // the agent's last changes still become a node
  return exit_code;
}

}  // namespace agentenv::serve
