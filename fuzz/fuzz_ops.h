// The operation handler the socket and MCP targets serve: CallJson, the
// daemon's own entry, for the operations that read history only (log,
// show, a diff of two nodes, ...); every other operation (snapshot,
// rollback, exec, import, gc, status, ...) has its arguments read exactly
// as CallJson reads them (ReadRequest) and is then not run: a fuzzer must
// neither run commands nor change the history that the next input sees.
#pragma once

#include <string>
#include <string_view>

#include "control/jobs.h"
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
  if (name == "log" || name == "show" || name == "head" || name == "branches" || name == "ps" ||
      name == "workspaces")
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
  if (name == "snapshot") return ReadOnly<SnapshotRequest>(name, args);
  if (name == "rollback") return ReadOnly<RollbackRequest>(name, args);
  if (name == "retain") return ReadOnly<RetainRequest>(name, args);
  if (name == "gc") return ReadOnly<GcRequest>(name, args);
  if (name == "import") return ReadOnly<ImportRequest>(name, args);
  // A run's arguments are planned as exec and spawn plan them (PlanRun);
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
    if (run.session.empty()) AE_TRY(PlanRun(server.repo(), run, exec, /*collect=*/!emit));
    return Fail(ErrorCode::kUnsupported, name + ": not run by the fuzz target");
  }
  if (name == "kill") return ReadOnly<KillRequest>(name, args);
  if (name == "fork") return ReadOnly<ForkRequest>(name, args);
  if (name == "workspace_rm") return ReadOnly<WorkspaceRmRequest>(name, args);
  if (name == "tournament") return ReadOnly<TournamentRequest>(name, args);
  Die("an operation the fuzz handler does not know: " + name + " (add it above)");
}

}  // namespace agentenv::fuzz
