// spawn, ps and kill: the Server's jobs (run/jobs.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unique_fd.h"
#include "history/node_view.h"
#include "control/server.h"
#include "snap/layout.h"

namespace agentenv::control {
namespace {

JobEntry Describe(run::Job& j) {
  MutexLock lock(j.mu);
  j.PollLocked();
  JobEntry e;
  e.job = j.id;
  e.kind = j.kind;
  e.command = j.command;
  e.started = FormatTime(j.started_ns);
  e.log = j.log;
  e.running = !j.status.has_value();
  if (j.status) {
    if (!j.status->signal) e.exit_code = j.status->exit_code;
    e.signal = j.status->signal;
    e.killed = j.killed;
  }
  if (j.env && !j.status) e.processes = run::EnvProcesses(*j.env);
  return e;
}

}  // namespace

Result<SpawnReply> Server::Spawn(const SpawnRequest& r, const CallContext& call) {
  AE_ASSIGN(run::PlannedRun run, run::PlanRun(*repo_, r.run, false, false));
  uint64_t id = jobs_.NextId();
  std::string dir = snap::layout::Jobs(repo_->root());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(dir, errno);
  std::string log = dir + "/" + std::to_string(id) + ".log";
  UniqueFd out(::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out) return FailErrno(log, errno);
  UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!in) return FailErrno("/dev/null", errno);
  AE_ASSIGN(runner::Env env, runner::Env::Start(run.spec, {in.get(), out.get(), out.get()}));
  pid_t pid = env.pid();
  auto job = jobs_.Add(id, "spawn", run.line, std::move(env), log, call.owner);
  return SpawnReply{job->id, pid, log};
}

Result<PsReply> Server::Ps(const PsRequest&, const CallContext& call) {
  PsReply rep;
  for (const auto& j : jobs_.List())
    if (call.sees_all || j->owner == call.owner) rep.jobs.push_back(Describe(*j));
  return rep;
}

Result<KillReply> Server::Kill(const KillRequest& r, const CallContext& call) {
  if (!r.all && !r.job) return Fail(ErrorCode::kInvalid, "kill: give job=<id> (see ps) or all=true");
  KillReply rep;
  bool found = false;
  for (const auto& j : jobs_.List()) {
    if ((!r.all && j->id != *r.job) || !(call.sees_all || j->owner == call.owner)) continue;
    found = true;
    MutexLock lock(j->mu);
    j->PollLocked();
    if (j->status) continue;
    j->KillLocked();
    rep.killed.push_back(j->id);
  }
  if (!r.all && !found) return Fail(ErrorCode::kNotFound, "kill: no job " + std::to_string(*r.job) + " (see ps)");
  return rep;
}

}  // namespace agentenv::control
