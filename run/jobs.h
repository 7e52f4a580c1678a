// The jobs of a control::Server (environments started by exec and spawn)
// and the environment spec a run request asks for.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"
#include "runner/runner.h"
#include "common/fields.h"
#include "snap/repo.h"

namespace agentenv::run {

// exec and spawn: what to run and with which limits.
struct RunRequest {
  std::string command;             // a shell line for /bin/sh -c, or
  std::vector<std::string> argv;   // a program and its arguments
  std::optional<std::string> cwd;  // default "/", or the session's
  std::map<std::string, std::string> env;
  std::string network = "allow";
  std::optional<double> timeout_s;     // exec; default: 300 collected, none streamed
  std::optional<uint64_t> output_cap;  // exec; default: 64 KiB collected, none streamed
  uint64_t memory_bytes = 0, pids = 0;
  double cpus = 0;
  std::string session;  // exec only
  bool snapshot = true;  // exec only
  std::string workspace;  // exec only: run in this workspace, snapshot it
  uint64_t disk_bytes = 0;  // exec only: writes past it fail with ENOSPC (mounts/disk_limit.h); 0: the default
  template <class V> void Fields(V& v) {
    v("command", command); v("argv", argv); v("cwd", cwd); v("env", env); v("network", network);
    v("timeout_s", timeout_s); v("output_cap", output_cap); v("memory_bytes", memory_bytes); v("pids", pids);
    v("cpus", cpus); v("session", session); v("snapshot", snapshot); v("workspace", workspace);
    v("disk_bytes", disk_bytes);
  }
};
struct ProcessEntry {
  int64_t pid = 0, ns_pid = 0, ppid = 0;
  std::string cmdline;
  template <class V> void Fields(V& v) { v("pid", pid); v("ns_pid", ns_pid); v("ppid", ppid); v("cmdline", cmdline); }
};

// One env started by exec or spawn. `mu` guards env and status: the thread
// that runs an exec and a `kill` from another client both reach them.
struct Job {
  uint64_t id = 0;
  std::string kind;     // "exec" or "spawn"
  std::string command;  // as shown in ps and labels
  int64_t started_ns = 0;
  std::string log;      // spawn: host path of its output
  // The MCP session that started it ("" none: the CLI, the socket):
  // another session's ps and kill do not see it (control::CallContext).
  std::string owner;
  std::string workspace;  // the workspace it runs in; "" the live tree
  Mutex mu;
  std::optional<runner::Env> env GUARDED_BY(mu);           // until the job has ended and been reaped
  std::optional<runner::ExitStatus> status GUARDED_BY(mu);  // once it has ended
  bool killed GUARDED_BY(mu) = false;                       // ended by kill

  // Reaps the env if it has ended (never blocks).
  void PollLocked() REQUIRES(mu);
  // SIGKILLs every process of the env and reaps it.
  void KillLocked() REQUIRES(mu);
};

// Jobs of this process. Thread-safe.
class JobTable {
 public:
  // Registers a started env under an id from NextId().
  std::shared_ptr<Job> Add(uint64_t id, std::string kind, std::string command, runner::Env env, std::string log,
                           std::string owner = {}, std::string workspace = {});
  void Remove(uint64_t id);
  std::vector<std::shared_ptr<Job>> List();
  // Reserves an id (spawn names its log after it before the env starts).
  uint64_t NextId();

 private:
  Mutex mu_;
  uint64_t next_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<Job>> jobs_ GUARDED_BY(mu_);
};

// The environment for a run request in repository `repo`: exec (with its
// session, when one is named) or spawn. `collect`: the output goes into
// the reply (a model's call), which makes the defaults 300 s and 64 KiB
// per stream; a streamed or spawned run has neither limit by default.
// Errors: kInvalid naming the argument.
struct PlannedRun {
  runner::EnvSpec spec;
  std::string line;     // the command for labels, ps and logs
  std::string session_dir;  // exec with a session: its host directory
};
Result<PlannedRun> PlanRun(snap::Repo& repo, const RunRequest& r, bool is_exec, bool collect);

// Creates <work>/run if missing, keeping the root directory's mtime (a
// missing /run is no change worth a node): the runner mounts the env's /run
// tmpfs there only when the tree has it, and binds below it need it.
void EnsureRunDir(const std::string& work_dir);

// The processes of a running env, its own init left out.
std::vector<ProcessEntry> EnvProcesses(runner::Env& env);

// "allow" or "deny" as the runner's enum. Errors: kInvalid.
Result<runner::Network> ParseNetwork(const std::string& s);

// A timeout of `seconds` as the runner's (0: none). Errors: kInvalid
// "<what> must be a number of seconds from 0 to 1e9" (more than 31 years
// would overflow the milliseconds it is counted in).
Result<std::chrono::milliseconds> RunTimeout(double seconds, const std::string& what);

}  // namespace agentenv::run
