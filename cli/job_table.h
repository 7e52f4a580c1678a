// Internal to cli/jobs.cc and cli/exec_op.cc: the table of running jobs and
// the request shape shared by exec and spawn.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "runner/runner.h"
#include "snap/repo.h"

namespace agentenv::cli {

// One env started by exec or spawn. `mu` guards env and status: the thread
// that runs an exec and a `kill` from another client both reach them.
struct Job {
  uint64_t id = 0;
  std::string kind;     // "exec" or "spawn"
  std::string command;  // as shown in ps and labels
  int64_t started_ns = 0;
  std::string log;      // spawn: host path of its output
  std::mutex mu;
  std::optional<runner::Env> env;           // until the job has ended and been reaped
  std::optional<runner::ExitStatus> status;  // once it has ended
  bool killed = false;                       // ended by kill

  // Under mu: reaps the env if it has ended (never blocks).
  void PollLocked();
  // Under mu: SIGKILLs every process of the env and reaps it.
  void KillLocked();
};

// Jobs of this process. Thread-safe.
class JobTable {
 public:
  // Registers a started env under an id from NextId().
  std::shared_ptr<Job> Add(uint64_t id, std::string kind, std::string command, runner::Env env, std::string log);
  void Remove(uint64_t id);
  std::vector<std::shared_ptr<Job>> List();
  // Reserves an id (spawn names its log after it before the env starts).
  uint64_t NextId();

 private:
  std::mutex mu_;
  uint64_t next_ = 1;
  std::map<uint64_t, std::shared_ptr<Job>> jobs_;
};

JobTable& Jobs();

// An exec or spawn request, parsed: the env to start and how to show it.
struct RunRequest {
  runner::EnvSpec spec;
  std::string line;     // the command for labels, ps and logs
  std::string session;  // exec: session id, "" for none
  std::string session_dir;
  bool snapshot = true;  // exec: snapshot afterwards
};

// Parses command|argv, cwd, env, network, timeout_s, output_cap,
// memory_bytes, pids, cpus, session (exec only), snapshot. Defaults for
// timeout and output cap depend on `collect` (a model's call: 300 s,
// 64 KiB per stream; a streamed call: none). Errors: kInvalid naming the argument.
Result<RunRequest> ParseRunRequest(snap::Repo& repo, const nlohmann::json& args, bool is_exec, bool collect);

}  // namespace agentenv::cli
