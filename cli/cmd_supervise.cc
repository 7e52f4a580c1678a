// agentenv supervise: owns history while an agent runs inside the env.
//
// Two sockets serve the same operations. The operator's socket
// (<root>/agentenv.sock) treats a rollback as "reset the world": every
// process of the env is killed, the tree restored, the agent relaunched.
// The agent's socket (<root>/agent.sock, bound at /run/agentenv.sock
// inside) restores in place and kills nothing, so the agent keeps its
// context. The supervisor itself lives outside the tree and is never
// rolled back.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <mutex>
#include <optional>

#include "cli/capture.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/control_socket.h"
#include "cli/jobs.h"
#include "cli/ops.h"
#include "cli/routed.h"
#include "runner/runner.h"

namespace agentenv::cli {
namespace {

// "cli.restore" is `agentenv restore` run through this process (cli/routed.h).
bool IsRollback(const std::string& op) {
  return op == "rollback" || op == "checkout" || op == "restore" || op == "cli.restore";
}

class Supervisor {
 public:
  Supervisor(snap::Repo& repo, runner::EnvSpec spec) : repo_(repo), spec_(std::move(spec)) {}

  Result<void> Launch() {
    std::lock_guard lock(mu_);
    AE_ASSIGN(runner::Env env, runner::Env::Start(spec_));
    DaemonLog("agent started (pid " + std::to_string(env.pid()) + ")");
    env_.emplace(std::move(env));
    return {};
  }

  // Operator rollback: stop the world, restore, relaunch.
  Result<nlohmann::json> OperatorRollback(const std::string& op, const nlohmann::json& args) {
    std::lock_guard lock(mu_);
    if (env_) {
      env_->KillAll();
      env_.reset();
    }
    Result<nlohmann::json> r = ServeRequest(repo_, op, args, nullptr);
    auto env = runner::Env::Start(spec_);
    if (!env) return Unexpected<Error>(env.error());
    DaemonLog("agent relaunched after rollback (pid " + std::to_string(env->pid()) + ")");
    env_.emplace(std::move(*env));
    if (r) (*r)["relaunched"] = true;
    return r;
  }

  // ps with the agent's env added: {"pid", "processes"}, or null while none runs.
  Result<nlohmann::json> Ps(const nlohmann::json& args, const FrameSink& emit) {
    AE_ASSIGN(nlohmann::json res, RunOpStream(repo_, "ps", args, emit));
    std::lock_guard lock(mu_);
    res["agent"] = nullptr;
    if (!env_) return res;
    nlohmann::json procs = nlohmann::json::array();
    if (auto ps = env_->Processes()) {
      for (const auto& p : *ps) {
        if (p.ns_pid == 1) continue;  // the env's init
        procs.push_back({{"pid", p.pid}, {"ns_pid", p.ns_pid}, {"ppid", p.ppid}, {"cmdline", p.cmdline}});
      }
    }
    res["agent"] = {{"pid", env_->pid()}, {"processes", procs}};
    return res;
  }

  // The pidfd of the running agent env, -1 while none runs.
  int pidfd() {
    std::lock_guard lock(mu_);
    return env_ ? env_->pidfd() : -1;
  }

  // Called when the pidfd is readable: the exit status if the agent ended
  // by itself (not killed for a relaunch).
  std::optional<runner::ExitStatus> Reap(int fd) {
    std::lock_guard lock(mu_);
    // The env may have been replaced meanwhile (even reusing the fd
    // number): only an env that has really ended is reaped.
    if (!env_ || env_->pidfd() != fd) return std::nullopt;
    auto st = env_->TryWait();
    if (st && !*st) return std::nullopt;
    env_.reset();
    return st ? **st : runner::ExitStatus{1, 0, false};
  }

  void Stop() {
    std::lock_guard lock(mu_);
    if (env_) env_->KillAll();
    env_.reset();
  }

 private:
  snap::Repo& repo_;
  runner::EnvSpec spec_;
  std::mutex mu_;  // guards env_: rollbacks and the main loop race for it
  std::optional<runner::Env> env_;
};

}  // namespace

int CmdSupervise(int argc, char** argv) {
  Globals g;
  std::vector<std::string> cmd;
  std::string network = "allow";
  int quiet_ms = 300, max_delay_ms = 3000;
  CLI::App app{"Run an agent inside the environment with automatic capture and both control sockets; an "
               "operator rollback (agentenv ctl rollback ref=...) kills every process of the env, restores "
               "and relaunches the agent; the agent's own rollback (socket /run/agentenv.sock inside) "
               "restores in place", "supervise"};
  AddGlobals(app, g);
  app.add_option("--network", network, "allow or deny")->check(CLI::IsMember({"allow", "deny"}));
  app.add_option("--quiet-ms", quiet_ms, "Capture quiet period (default 300)");
  app.add_option("--max-delay-ms", max_delay_ms, "Capture maximum delay (default 3000)");
  app.add_option("command", cmd, "Agent command and arguments (after --)")->required();
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  snap::Repo& r = **repo;

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  UniqueFd sfd(::signalfd(-1, &sigs, SFD_CLOEXEC));
  if (!sfd) return ReportError(g, Error{std::string("signalfd: ") + std::strerror(errno), errno, ErrorCode::kIo});

  runner::EnvSpec spec;
  spec.root = r.work_dir();
  spec.argv = cmd;
  spec.network = network == "deny" ? runner::Network::kDeny : runner::Network::kAllow;
  // /run is ignored (never versioned), so a restored tree may lack it; the
  // runner mounts a tmpfs there and binds the agent socket inside.
  EnsureRunDir(r.work_dir());
  std::string agent_sock = g.root + "/agent.sock";
  spec.binds.push_back({agent_sock, runner::kSocketPath, false});
  Supervisor sup(r, spec);

  auto agent_server = ControlServer::Start(agent_sock, [&r](const std::string& op, const nlohmann::json& args,
                                                            const FrameSink& emit) {
    return RunOpStream(r, op, args, emit);  // in place: the agent keeps running
  });
  if (!agent_server) return ReportError(g, agent_server.error());
  auto op_server = ControlServer::Start(SocketPath(g.root), [&](const std::string& op, const nlohmann::json& args,
                                                                 const FrameSink& emit) {
    if (IsRollback(op)) return sup.OperatorRollback(op, args);
    if (op == "ps") return sup.Ps(args, emit);
    return ServeRequest(r, op, args, emit);
  });
  if (!op_server) return ReportError(g, op_server.error());
  if (auto held = r.HoldLock(); !held) return ReportError(g, held.error());
  auto capture = Capture::Start(r, {quiet_ms, max_delay_ms});
  if (!capture) return ReportError(g, capture.error());
  if (auto l = sup.Launch(); !l) return ReportError(g, l.error());

  int exit_code = 0;
  for (;;) {
    int pfd = sup.pidfd();
    pollfd p[2] = {{sfd.get(), POLLIN, 0}, {pfd, POLLIN, 0}};
    if (::poll(p, pfd >= 0 ? 2 : 1, 100) < 0 && errno != EINTR) break;
    if (p[0].revents) {
      DaemonLog("stopping: signal; killing the env");
      sup.Stop();
      exit_code = 128 + SIGTERM;
      break;
    }
    if (pfd >= 0 && (p[1].revents & POLLIN)) {
      if (auto st = sup.Reap(pfd)) {
        exit_code = st->signal ? 128 + st->signal : st->exit_code;
        DaemonLog("agent exited with " + std::to_string(exit_code));
        break;
      }
    }
  }
  (*capture)->Stop(true);  // the agent's last changes still become a node
  (*op_server)->Stop();
  (*agent_server)->Stop();
  return exit_code;
}

}  // namespace agentenv::cli
