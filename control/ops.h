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
#include "control/files.h"
#include "control/push.h"
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

// Every operation, declared once: X(Request, Reply, name, call, locks).
// `call` runs the request `r` on the Server `s` (frames of a streaming op
// go to `emit`); `locks` says whether it needs the repository lock (it then
// runs where the lock is: at a daemon when one serves the root). The typed
// entry points (Op<Req>), the JSON dispatch of CallJson and the checks of
// tests/control_test.cc are generated from this list; Ops() adds each
// one's description and schemas (that test fails when an op is in one and
// not the other, or its schema and its request's fields differ).
#define AGENTENV_OPS(X)                                                                  \
  X(SnapshotRequest, SnapshotReply, "snapshot", s.Snapshot(r, ctx), true)                \
  X(RollbackRequest, RollbackReply, "rollback", s.Rollback(r, ctx), true)                \
  X(LogRequest, LogReply, "log", s.Log(r), false)                                        \
  X(DiffRequest, DiffReply, "diff", s.Diff(r), r.to.empty())                             \
  X(ShowRequest, ShowReply, "show", s.Show(r), false)                                    \
  X(HeadRequest, HeadReply, "head", s.Head(r), false)                                    \
  X(DigestRequest, DigestReply, "digest", s.Digest(r), false)                            \
  X(BisectRequest, BisectReply, "bisect", s.Bisect(r), false)                          \
  X(BranchesRequest, BranchesReply, "branches", s.Branches(r), false)                    \
  X(TagRequest, TagReply, "tag", s.Tag(r), !r.name.empty())                              \
  X(StatusRequest, StatusReply, "status", s.Status(r), true)                             \
  X(RetainRequest, RetainReply, "retain", s.Retain(r), true)                             \
  X(GcRequest, GcReply, "gc", s.Gc(r), true)                                             \
  X(ImportRequest, ImportReply, "import", s.Import(r, ctx), true)                          \
  X(PushRequest, PushReply, "push", Push(s, r, ProgressFrames(emit)), false)             \
  X(ExecRequest, ExecReply, "exec", s.Exec(r, ctx), true)                                \
  X(SpawnRequest, SpawnReply, "spawn", s.Spawn(r, ctx), true)                            \
  X(PsRequest, PsReply, "ps", s.Ps(r, ctx), true)                                        \
  X(KillRequest, KillReply, "kill", s.Kill(r, ctx), true)                                \
  X(JobOutputRequest, JobOutputReply, "job_output", s.JobOutput(r, ctx), true)          \
  X(ForkRequest, ForkReply, "fork", s.Fork(r), false)                                    \
  X(WorkspacesRequest, WorkspacesReply, "workspaces", s.Workspaces(r), false)            \
  X(WorkspaceRmRequest, WorkspaceRmReply, "workspace_rm", s.WorkspaceRm(r), false)       \
  X(TournamentRequest, TournamentReply, "tournament", s.Tournament(r, ctx), true)        \
  X(MountRequest, MountReply, "mount", s.Mount(r), false)                                \
  X(UmountRequest, UmountReply, "umount", s.Umount(r), false)                            \
  X(MountsRequest, MountsReply, "mounts", s.Mounts(r), false)                            \
  X(TokenCreateRequest, TokenCreateReply, "token_create", s.TokenCreate(r), false)       \
  X(TokenLsRequest, TokenLsReply, "token_ls", s.TokenLs(r), false)                       \
  X(TokenRevokeRequest, TokenRevokeReply, "token_revoke", s.TokenRevoke(r), false)       \
  X(EnvLsRequest, EnvLsReply, "env_ls", s.EnvLs(r), true)                               \
  X(ReadFileRequest, ReadFileReply, "read_file", ReadFile(s, r), false)                  \
  X(WriteFileRequest, WriteFileReply, "write_file", WriteFile(s, r, ctx), true)          \
  X(ListDirRequest, ListDirReply, "list_dir", ListDir(s, r), false)                      \
  X(SearchRequest, SearchReply, "search", Search(s, r), false)                           \
  X(FileHistoryRequest, FileHistoryReply, "file_history", FileHistory(s, r), false)

// Op<Request>: how a typed request is run. kName is the socket's op name.
template <class Req> struct Op;
#define AGENTENV_OP(Req, Rep, name, call, locks)                                                             \
  template <> struct Op<Req> {                                                                               \
    using Reply = Rep;                                                                                       \
    static constexpr std::string_view kName = name;                                                          \
    static bool Locks([[maybe_unused]] const Req& r) { return locks; }                                       \
    static Result<Rep> Run(Server& s, const Req& r, [[maybe_unused]] const CallContext& ctx) {              \
      [[maybe_unused]] const FrameSink& emit = ctx.emit;                                                     \
      return ExplainFullDisk(call, s.repo().root());                                                         \
    }                                                                                                        \
  };
AGENTENV_OPS(AGENTENV_OP)
#undef AGENTENV_OP

// Calls f.template operator()<Req>() for every operation, in list order.
template <class F>
void ForEachOp(F&& f) {
#define AGENTENV_VISIT(Req, Rep, name, call, locks) f.template operator()<Req>();
  AGENTENV_OPS(AGENTENV_VISIT)
#undef AGENTENV_VISIT
}

// Runs `op` (a name or alias) with JSON `args` on `server`: the socket's
// and MCP's entry. Unknown ops, unknown argument keys and wrongly typed
// values are kInvalid errors naming them. Frames of a streaming op (exec)
// go to `call.emit`; without one its output is collected into the result.
// A writing op runs Server::writer_nice() below the calling thread's
// priority (common/thread_priority.h: a thread that cannot raise it back
// afterwards says so). Thread-safe.
Result<json> CallJson(Server& server, std::string_view op, const json& args, const CallContext& call);

}  // namespace agentenv::control
