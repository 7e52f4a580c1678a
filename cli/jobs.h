// The process ops of the control plane, next to the history ops of
// cli/ops.h and served the same way (socket, MCP):
//   exec   one command in a fresh env with limits; output streamed as frames
//          (or collected into the result when nobody takes frames); then a
//          snapshot labelled with the command; optional persistent session.
//   spawn  a background command in its own env; output to <root>/jobs/<id>.log.
//   ps     the jobs of this process (running execs and spawns) and their processes.
//   kill   one job or all of them (every process of the job's env).
// Jobs live in the serving process (daemon, supervisor or MCP server) and
// die with it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "cli/ops.h"

namespace agentenv::cli {

using JobOpFn = Result<nlohmann::json> (*)(snap::Repo&, const nlohmann::json&, const OpFrameSink&);

struct JobOp {
  OpSpec spec;
  JobOpFn fn;
};

// exec, spawn, ps, kill, in that order. Each fn is thread-safe; exec holds
// WriterMutex() from its command's start to its snapshot.
const std::vector<JobOp>& JobOps();

// Creates <work>/run if missing, keeping the root directory's mtime (a
// missing /run is no change worth a node): the runner mounts the env's /run
// tmpfs there only when the tree has it, and binds below it need it.
void EnsureRunDir(const std::string& work_dir);

}  // namespace agentenv::cli
