// The operation table: every control operation once, with its name, the
// description a model reads, its JSON schemas and its typed entry point.
// The CLI (in process or through a daemon), the socket and MCP all go
// through it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "control/errors.h"
#include "control/server.h"
#include "control/types.h"

namespace agentenv::control {

// What `agentenv --version` and MCP's serverInfo say.
inline constexpr const char* kVersion = "0.2.0";

struct OpSpec {
  std::string name;
  std::vector<std::string> aliases;  // other names the socket accepts (CLI verbs)
  std::string description;           // written for a model choosing a tool
  json input_schema, output_schema;
  bool writes = false;       // changes history, the live tree or processes
  bool destructive = false;  // may discard work (MCP's destructiveHint)
  bool tool = true;          // offered as an MCP tool
};

// Every operation, in a stable order.
const std::vector<OpSpec>& Ops();
// The operation named `name` or one of its aliases; null if none.
const OpSpec* FindOp(std::string_view name);

// Op<Request>: how a typed request is run. kName is the socket's op name;
// Locks says whether the request needs the repository lock (it then runs
// where the lock is: at a daemon when one serves the root).
template <class Req> struct Op;
#define AGENTENV_OP(Req, Rep, name, method, locks)                                 \
  template <> struct Op<Req> {                                                     \
    using Reply = Rep;                                                             \
    static constexpr std::string_view kName = name;                                \
    static bool Locks([[maybe_unused]] const Req& r) { return locks; }             \
    static Result<Rep> Run(Server& s, const Req& r, [[maybe_unused]] const FrameSink& emit) {               \
      return ExplainFullDisk(method, s.repo().root());                                                       \
    }                                                                                                        \
  };
AGENTENV_OP(SnapshotRequest, SnapshotReply, "snapshot", s.Snapshot(r), true)
AGENTENV_OP(RollbackRequest, RollbackReply, "rollback", s.Rollback(r), true)
AGENTENV_OP(LogRequest, LogReply, "log", s.Log(r), false)
AGENTENV_OP(ShowRequest, ShowReply, "show", s.Show(r), false)
AGENTENV_OP(DigestRequest, DigestReply, "digest", s.Digest(r), false)
AGENTENV_OP(DiffRequest, DiffReply, "diff", s.Diff(r), r.to.empty())
AGENTENV_OP(HeadRequest, HeadReply, "head", s.Head(r), false)
AGENTENV_OP(BranchesRequest, BranchesReply, "branches", s.Branches(r), false)
AGENTENV_OP(TagRequest, TagReply, "tag", s.Tag(r), !r.name.empty())
AGENTENV_OP(StatusRequest, StatusReply, "status", s.Status(r), true)
AGENTENV_OP(RetainRequest, RetainReply, "retain", s.Retain(r), true)
AGENTENV_OP(GcRequest, GcReply, "gc", s.Gc(r), true)
AGENTENV_OP(ImportRequest, ImportReply, "import", s.Import(r), true)
AGENTENV_OP(ExecRequest, ExecReply, "exec", s.Exec(r, emit), true)
AGENTENV_OP(SpawnRequest, SpawnReply, "spawn", s.Spawn(r), true)
AGENTENV_OP(PsRequest, PsReply, "ps", s.Ps(r), true)
AGENTENV_OP(KillRequest, KillReply, "kill", s.Kill(r), true)
AGENTENV_OP(ForkRequest, ForkReply, "fork", s.Fork(r), false)
AGENTENV_OP(WorkspacesRequest, WorkspacesReply, "workspaces", s.Workspaces(r), false)
AGENTENV_OP(WorkspaceRmRequest, WorkspaceRmReply, "workspace_rm", s.WorkspaceRm(r), false)
AGENTENV_OP(TournamentRequest, TournamentReply, "tournament", s.Tournament(r), true)
AGENTENV_OP(MountRequest, MountReply, "mount", s.Mount(r), false)
AGENTENV_OP(UmountRequest, UmountReply, "umount", s.Umount(r), false)
AGENTENV_OP(MountsRequest, MountsReply, "mounts", s.Mounts(r), false)
#undef AGENTENV_OP

// Runs `op` (a name or alias) with JSON `args` on `server`: the socket's
// and MCP's entry. Unknown ops, unknown argument keys and wrongly typed
// values are kInvalid errors naming them. Frames of a streaming op (exec)
// go to `emit`; without one its output is collected into the result.
// Thread-safe.
Result<json> CallJson(Server& server, std::string_view op, const json& args, const FrameSink& emit);

}  // namespace agentenv::control
