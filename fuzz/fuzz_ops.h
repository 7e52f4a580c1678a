// The operation handler the socket and MCP targets serve: CallJson, the
// daemon's own entry, for the operations that read history only (log,
// show, a diff of two nodes, ...); every other operation (snapshot,
// rollback, exec, import, gc, status, push, mount, ...) has its arguments
// read exactly as CallJson reads them (ReadRequest) and is then not run: a
// fuzzer must neither run commands nor change the history that the next
// input sees. An operation added to AGENTENV_OPS is of the second kind
// until it is named here.
#pragma once

#include <string>
#include <string_view>

#include "run/jobs.h"
#include "control/ops.h"
#include "fuzz/fuzz_env.h"

namespace agentenv::fuzz {

using control::json;

template <class Req>
Result<json> ReadOnly(std::string_view name, const json& args) {
  AE_ASSIGN(Req req, control::ReadRequest<Req>(name, args));
  (void)req;
  return Fail(ErrorCode::kUnsupported, std::string(name) + ": not run by the fuzz target");
}

inline Result<json> GuardedCall(control::Server& server, const std::string& op, const json& args,
                                const control::FrameSink& emit) {
  using namespace control;
  const OpSpec* spec = FindOp(op);
  if (!spec) return CallJson(server, op, args, emit);  // "unknown op": runs nothing
  const std::string& name = spec->name;
  if (name == "log" || name == "show" || name == "head" || name == "digest" || name == "branches" ||
      name == "ps" || name == "workspaces" || name == "mounts")
    return CallJson(server, op, args, emit);
  // What reads the live tree (status, a diff against it) scans it: a few
  // ms each, for nothing an input decides but its arguments.
  if (name == "status") return ReadOnly<StatusRequest>(name, args);
  if (name == "diff") {
    AE_ASSIGN(DiffRequest r, ReadRequest<DiffRequest>(name, args));
    if (!r.to.empty() && r.workspace.empty()) return CallJson(server, op, args, emit);
    return Fail(ErrorCode::kUnsupported, "diff: only between two nodes in the fuzz target");
  }
  if (name == "tag") {
    AE_ASSIGN(TagRequest r, ReadRequest<TagRequest>(name, args));
    if (r.name.empty()) return CallJson(server, op, args, emit);  // a listing
    return Fail(ErrorCode::kUnsupported, "tag: not run by the fuzz target (it writes)");
  }
  // A run's arguments are planned as exec and spawn plan them (run::PlanRun);
  // a session's directory would be made, so one with a session is not.
  if (name == "exec" || name == "spawn") {
    bool exec = name == "exec";
    RunRequest run;
    if (exec) {
      AE_ASSIGN(ExecRequest r, ReadRequest<ExecRequest>(name, args));
      run = r;
    } else {
      AE_ASSIGN(SpawnRequest r, ReadRequest<SpawnRequest>(name, args));
      run = r.run;
    }
    if (run.session.empty()) AE_TRY(run::PlanRun(server.repo(), run, exec, /*collect=*/!emit));
    return Fail(ErrorCode::kUnsupported, name + ": not run by the fuzz target");
  }
#define AGENTENV_FUZZ_READ(Req, Rep, op_name, call, locks) \
  if (name == op_name) return ReadOnly<Req>(name, args);
  AGENTENV_OPS(AGENTENV_FUZZ_READ)
#undef AGENTENV_FUZZ_READ
  Die("an operation that is not in AGENTENV_OPS: " + name);
}

}  // namespace agentenv::fuzz
