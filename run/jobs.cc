// The job table; planning the env of exec and spawn.
#include "run/jobs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unique_fd.h"
#include "run/session.h"
#include "snap/fsops.h"
#include "snap/layout.h"

namespace agentenv::run {
namespace {

// How many ended spawn jobs ps keeps showing.
constexpr size_t kKeepEnded = 64;

}  // namespace

std::vector<ProcessEntry> EnvProcesses(runner::Env& env) {
  std::vector<ProcessEntry> out;
  if (auto ps = env.Processes()) {
    for (const auto& p : *ps) {
      if (p.ns_pid == 1) continue;  // the env's own init
      out.push_back({p.pid, p.ns_pid, p.ppid, p.cmdline});
    }
  }
  return out;
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
                                   std::string log, std::string owner, std::string workspace) {
  auto j = std::make_shared<Job>();
  j->id = id;
  j->kind = std::move(kind);
  j->command = std::move(command);
  j->started_ns = snap::NowNs();
  j->log = std::move(log);
  j->owner = std::move(owner);
  j->workspace = std::move(workspace);
  {
    MutexLock jl(j->mu);
    j->env.emplace(std::move(env));
  }
  MutexLock lock(mu_);
  jobs_[id] = j;
  // Forget the oldest ended jobs beyond kKeepEnded (newest first here).
  std::vector<uint64_t> ended;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    MutexLock jl(it->second->mu);
    if (it->second->status) ended.push_back(it->first);
  }
  for (size_t i = kKeepEnded; i < ended.size(); ++i) jobs_.erase(ended[i]);
  return j;
}

uint64_t JobTable::NextId() {
  MutexLock lock(mu_);
  return next_++;
}

void JobTable::Remove(uint64_t id) {
  MutexLock lock(mu_);
  jobs_.erase(id);
}

std::vector<std::shared_ptr<Job>> JobTable::List() {
  MutexLock lock(mu_);
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
  // The env's own standard PATH, not the serving process's (a daemon
  // started from a shell would pass its user's tool directories in).
  if (!r.env.count("PATH")) s.set_env.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
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

}  // namespace agentenv::run
