// Calls made on one environment (CallContext::env, CallContext::confined):
// serve --listen's endpoint /w/NAME/mcp, and scoped tokens
// (serve/grants.h).
//
// On an environment's endpoint every ref a request names (HEAD, HEAD~N, a
// short id, a tag) is read as that environment names it (Server::ResolveAt:
// in a workspace HEAD counts along its lane), and `head` is its last node.
//
// A confined caller, besides, sees its environment's history only
// (Sight): every ref it names must be such a node, else kNotFound exactly
// as for a node that does not exist; listings (log, branches, tags,
// workspaces, the digest) leave the other environments' nodes and names
// out; fork (a new environment, which its token would not reach) and every
// op with no scoped form here are refused. Which environment a confined
// caller may call on at all is serve's rule (serve/grants.h); a request's
// `workspace`, if it has one, must be that environment.
#pragma once

#include <string>

#include "common/result.h"
#include "control/frames.h"
#include "control/ops.h"
#include "snap/meta.h"
#include "snap/repo.h"

namespace agentenv::control {

// What an environment's history is, to a confined caller:
//   - the live tree (""): the nodes made on it (no workspace in their
//     provenance, or none recorded) and tournaments' candidates (a
//     tournament runs from the live tree);
//   - workspace W: the nodes made in W since it was created (an earlier
//     workspace of that name is another environment), and its past: its
//     base node and the nodes of the base's environment no newer than the
//     base, and so on down a fork of a fork (at most kMaxForkDepth).
// A value: built once per call (one workspace and a few records read).
class Sight {
 public:
  static constexpr int kMaxForkDepth = 16;
  // Errors: kNotFound (workspace `env` does not exist), the repository's.
  static Result<Sight> Of(const snap::Repo& repo, const std::string& env);
  // Whether `rec` is of the environment's history. Pure.
  bool Sees(const snap::NodeRecord& rec) const;

 private:
  struct Past {
    std::string env;  // the environment the nodes were made in
    int64_t until_ns;  // no newer than this
  };
  std::string env_;
  int64_t since_ns_ = 0;  // a workspace's creation
  std::vector<Past> past_;
};

// The op as environment call.env sees it: what CallJson runs when call.env
// is a workspace or call.confined is set. One overload per op with a
// scoped form (confine.cc); the template runs the others unchanged, or
// refuses them for a confined caller. Errors: kNotFound (a ref a confined
// caller may not see, as for one that does not exist), kInvalid (an op or
// a `workspace` outside the environment), the op's.
template <class Req>
Result<typename Op<Req>::Reply> OnEnvironment(Server& s, Req& r, const CallContext& call) {
  if (call.confined)
    return Fail(ErrorCode::kInvalid, std::string(Op<Req>::kName) +
                                         " is not open to a token of one environment: the operator's token runs it");
  return Op<Req>::Run(s, r, call);
}
Result<SnapshotReply> OnEnvironment(Server& s, SnapshotRequest& r, const CallContext& call);
Result<RollbackReply> OnEnvironment(Server& s, RollbackRequest& r, const CallContext& call);
Result<LogReply> OnEnvironment(Server& s, LogRequest& r, const CallContext& call);
Result<DiffReply> OnEnvironment(Server& s, DiffRequest& r, const CallContext& call);
Result<ShowReply> OnEnvironment(Server& s, ShowRequest& r, const CallContext& call);
Result<DigestReply> OnEnvironment(Server& s, DigestRequest& r, const CallContext& call);
Result<BisectReply> OnEnvironment(Server& s, BisectRequest& r, const CallContext& call);
Result<HeadReply> OnEnvironment(Server& s, HeadRequest& r, const CallContext& call);
Result<BranchesReply> OnEnvironment(Server& s, BranchesRequest& r, const CallContext& call);
Result<TagReply> OnEnvironment(Server& s, TagRequest& r, const CallContext& call);
Result<WorkspacesReply> OnEnvironment(Server& s, WorkspacesRequest& r, const CallContext& call);
// Forks the environment's node; a confined caller may not (its token would
// not reach the new workspace).
Result<ForkReply> OnEnvironment(Server& s, ForkRequest& r, const CallContext& call);
Result<ExecReply> OnEnvironment(Server& s, ExecRequest& r, const CallContext& call);
Result<PsReply> OnEnvironment(Server& s, PsRequest& r, const CallContext& call);
Result<KillReply> OnEnvironment(Server& s, KillRequest& r, const CallContext& call);
Result<JobOutputReply> OnEnvironment(Server& s, JobOutputRequest& r, const CallContext& call);
// The live tree's own ops: on a workspace they are kInvalid.
Result<StatusReply> OnEnvironment(Server& s, StatusRequest& r, const CallContext& call);
Result<SpawnReply> OnEnvironment(Server& s, SpawnRequest& r, const CallContext& call);
Result<TournamentReply> OnEnvironment(Server& s, TournamentRequest& r, const CallContext& call);
Result<ImportReply> OnEnvironment(Server& s, ImportRequest& r, const CallContext& call);
Result<WriteFileReply> OnEnvironment(Server& s, WriteFileRequest& r, const CallContext& call);
// The file readers: their ref as the environment names it (empty, the live
// tree itself, only on the live tree).
Result<ReadFileReply> OnEnvironment(Server& s, ReadFileRequest& r, const CallContext& call);
Result<ListDirReply> OnEnvironment(Server& s, ListDirRequest& r, const CallContext& call);
Result<SearchReply> OnEnvironment(Server& s, SearchRequest& r, const CallContext& call);
Result<FileHistoryReply> OnEnvironment(Server& s, FileHistoryRequest& r, const CallContext& call);

}  // namespace agentenv::control
