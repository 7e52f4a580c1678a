// spawn, ps and kill; the job table; planning the env of exec and spawn.
#include "control/jobs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unique_fd.h"
#include "control/render.h"
#include "control/server.h"
#include "control/session.h"
#include "snap/fsops.h"
#include "snap/layout.h"

namespace agentenv::control {
namespace {

// How many ended spawn jobs ps keeps showing.
constexpr size_t kKeepEnded = 64;

std::vector<ProcessEntry> ProcessesOf(runner::Env& env) {
  std::vector<ProcessEntry> out;
  if (auto ps = env.Processes()) {
    for (const auto& p : *ps) {
      if (p.ns_pid == 1) continue;  // the env's own init
      out.push_back({p.pid, p.ns_pid, p.ppid, p.cmdline});
    }
  }
  return out;
}

JobEntry Describe(Job& j) {
  std::lock_guard lock(j.mu);
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
  if (j.env && !j.status) e.processes = ProcessesOf(*j.env);
  return e;
}

}  // namespace

std::vector<ProcessEntry> EnvProcesses(runner::Env& env) { return ProcessesOf(env); }

Result<SpawnReply> Server::Spawn(const SpawnRequest& r) {
  AE_ASSIGN(PlannedRun run, PlanRun(*repo_, r.run, false, false));
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
  auto job = jobs_.Add(id, "spawn", run.line, std::move(env), log);
  return SpawnReply{job->id, pid, log};
}

Result<PsReply> Server::Ps(const PsRequest&) {
  PsReply rep;
  for (const auto& j : jobs_.List()) rep.jobs.push_back(Describe(*j));
  return rep;
}

Result<KillReply> Server::Kill(const KillRequest& r) {
  if (!r.all && !r.job) return Fail(ErrorCode::kInvalid, "kill: give job=<id> (see ps) or all=true");
  KillReply rep;
  bool found = false;
  for (const auto& j : jobs_.List()) {
    if (!r.all && j->id != *r.job) continue;
    found = true;
    std::lock_guard lock(j->mu);
    j->PollLocked();
    if (j->status) continue;
    j->KillLocked();
    rep.killed.push_back(j->id);
  }
  if (!r.all && !found) return Fail(ErrorCode::kNotFound, "kill: no job " + std::to_string(*r.job) + " (see ps)");
  return rep;
}

void Job::PollLocked() {
  if (status || !env) return;
  auto st = env->TryWait();
  if (!st) {
    status = runner::ExitStatus{1, 0, false};
  } else if (*st) {
    status = **st;
  } else {
    return;
  }
  env.reset();  // removes its cgroups
}

void Job::KillLocked() {
  if (status || !env) return;
  env->KillAll();
  auto st = env->Wait();
  status = st ? *st : runner::ExitStatus{-1, SIGKILL, false};
  killed = true;
  env.reset();
}

std::shared_ptr<Job> JobTable::Add(uint64_t id, std::string kind, std::string command, runner::Env env,
                                   std::string log) {
  auto j = std::make_shared<Job>();
  j->id = id;
  j->kind = std::move(kind);
  j->command = std::move(command);
  j->started_ns = snap::NowNs();
  j->log = std::move(log);
  j->env.emplace(std::move(env));
  std::lock_guard lock(mu_);
  jobs_[id] = j;
  // Forget the oldest ended jobs beyond kKeepEnded (newest first here).
  std::vector<uint64_t> ended;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    std::lock_guard jl(it->second->mu);
    if (it->second->status) ended.push_back(it->first);
  }
  for (size_t i = kKeepEnded; i < ended.size(); ++i) jobs_.erase(ended[i]);
  return j;
}

uint64_t JobTable::NextId() {
  std::lock_guard lock(mu_);
  return next_++;
}

void JobTable::Remove(uint64_t id) {
  std::lock_guard lock(mu_);
  jobs_.erase(id);
}

std::vector<std::shared_ptr<Job>> JobTable::List() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Job>> v;
  for (const auto& [id, j] : jobs_) v.push_back(j);
  return v;
}

void EnsureRunDir(const std::string& work_dir) {
  struct stat root_st;
  if (::stat(work_dir.c_str(), &root_st) == 0 && ::mkdir((work_dir + "/run").c_str(), 0755) == 0) {
    struct timespec ts[2] = {root_st.st_atim, root_st.st_mtim};
    ::utimensat(AT_FDCWD, work_dir.c_str(), ts, 0);
  }
}

Result<runner::Network> ParseNetwork(const std::string& s) {
  if (s == "allow") return runner::Network::kAllow;
  if (s == "deny") return runner::Network::kDeny;
  return Fail(ErrorCode::kInvalid, "argument 'network' must be allow or deny");
}

Result<std::chrono::milliseconds> RunTimeout(double seconds, const std::string& what) {
  if (!(seconds >= 0 && seconds <= 1e9)) return Fail(ErrorCode::kInvalid, what + " must be a number of seconds from 0 to 1e9");
  return std::chrono::milliseconds(int64_t(seconds * 1000));
}

Result<PlannedRun> PlanRun(snap::Repo& repo, const RunRequest& r, bool is_exec, bool collect) {
  PlannedRun run;
  runner::EnvSpec& s = run.spec;
  s.root = repo.work_dir();
  if (r.command.empty() == r.argv.empty())
    return Fail(ErrorCode::kInvalid, "give exactly one of 'command' (a shell command line) or 'argv' (an array)");
  for (const auto& a : r.argv) run.line += (run.line.empty() ? "" : " ") + a;
  if (!r.command.empty()) run.line = r.command;
  s.argv = r.argv.empty() ? std::vector<std::string>{"/bin/sh", "-c", r.command} : r.argv;
  s.cwd = r.cwd.value_or("/");
  for (const auto& [k, v] : r.env) {
    if (k.empty() || k.find('=') != std::string::npos)
      return Fail(ErrorCode::kInvalid, "argument 'env': '" + k + "' must be a name with a string value");
    s.set_env.push_back(k + "=" + v);
  }
  AE_ASSIGN(s.network, ParseNetwork(r.network));
  AE_ASSIGN(s.limits.timeout, RunTimeout(r.timeout_s.value_or(collect ? 300 : 0), "argument 'timeout_s'"));
  if (r.cpus < 0) return Fail(ErrorCode::kInvalid, "argument 'cpus' must be a non-negative number");
  s.limits.output_cap = r.output_cap.value_or(collect ? 65536 : 0);
  s.limits.memory_bytes = r.memory_bytes;
  s.limits.pids = r.pids;
  s.limits.cpus = r.cpus;
  if (!r.session.empty()) {
    if (!is_exec) return Fail(ErrorCode::kInvalid, "argument 'session' is for exec only");
    AE_ASSIGN(run.session_dir, SessionDir(repo.root(), r.session));
    // An explicit cwd moves the session there.
    WrapInSession(run.session_dir, r.command, r.argv, r.cwd.value_or(""), &s);
    EnsureRunDir(repo.work_dir());
  }
  return run;
}

}  // namespace agentenv::control
