// spawn, ps and kill: the Server's jobs (run/jobs.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
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

Result<JobOutputReply> Server::JobOutput(const JobOutputRequest& r, const CallContext& call) {
  std::shared_ptr<run::Job> job;
  for (const auto& j : jobs_.List())
    if (j->id == r.job && (call.sees_all || j->owner == call.owner)) job = j;
  if (!job) return Fail(ErrorCode::kNotFound, "job_output: no job " + std::to_string(r.job) + " (see ps)");
  if (job->log.empty())
    return Fail(ErrorCode::kNotFound, "job_output: job " + std::to_string(r.job) + " is an exec: its output came with its reply");
  JobOutputReply rep;
  rep.job = job->id;
  {
    MutexLock lock(job->mu);
    job->PollLocked();
    rep.running = !job->status.has_value();
    if (job->status && !job->status->signal) rep.exit_code = job->status->exit_code;
  }
  UniqueFd fd(::open(job->log.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return FailErrno(job->log, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return FailErrno(job->log, errno);
  rep.size = uint64_t(st.st_size);
  const uint64_t back = r.since < 0 ? uint64_t(-(r.since + 1)) + 1 : 0;
  rep.from = r.since < 0 ? (back >= rep.size ? 0 : rep.size - back) : std::min<uint64_t>(uint64_t(r.since), rep.size);
  const uint64_t want = std::min<uint64_t>({r.max_bytes, rep.size - rep.from, uint64_t{1} << 20});
  std::string bytes(want, '\0');
  ssize_t n = ::pread(fd.get(), bytes.data(), want, off_t(rep.from));
  if (n < 0) return FailErrno(job->log, errno);
  bytes.resize(size_t(n));
  // Whole UTF-8 characters only: the next call starts where this stopped.
  bool tail_ok = false;
  size_t whole = Utf8Prefix(bytes, &tail_ok);
  if (whole < bytes.size() && tail_ok) bytes.resize(whole);
  rep.next = rep.from + bytes.size();
  // Other invalid bytes become U+FFFD, as JSON must carry text.
  rep.data = json::parse(json(bytes).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
  return rep;
}

}  // namespace agentenv::control
