// Calls made on one environment (control/confine.h).
#include "control/confine.h"

#include "workspace/workspace.h"

namespace agentenv::control {
namespace {

bool OfLiveTree(const snap::NodeRecord& rec) {
  return !rec.provenance || rec.provenance->workspace.empty() || rec.provenance->tournament.has_value();
}
const std::string& MadeIn(const snap::NodeRecord& rec) {
  static const std::string kLiveTree;
  return rec.provenance ? rec.provenance->workspace : kLiveTree;
}

// One call's view: the environment's refs and, for a confined caller,
// its Sight.
class Scope {
 public:
  static Result<Scope> Of(Server& s, const CallContext& call) {
    Scope scope(s, call);
    if (call.confined) {
      AE_ASSIGN(scope.sight_, Sight::Of(s.repo(), call.env));
    }
    return scope;
  }

  // `*ref` as the environment names it, replaced by the node's id; a node
  // a confined caller may not see is kNotFound, as one that does not exist.
  Result<void> Pin(std::string* ref) const {
    AE_ASSIGN(store::ObjectId id, s_.ResolveAt(call_.env, *ref));
    if (sight_) {
      AE_ASSIGN(snap::NodeRecord rec, s_.repo().Record(id));
      if (!sight_->Sees(rec)) return Fail(ErrorCode::kNotFound, "ref '" + *ref + "': no such node, tag or HEAD (see `agentenv log`)");
    }
    *ref = id.Hex();
    return {};
  }
  // Whether the caller sees node `hex` (an unreadable one: no).
  bool Sees(const std::string& hex) const {
    if (!sight_) return true;
    auto id = store::ObjectId::FromHex(hex);
    if (!id) return false;
    auto rec = s_.repo().Record(*id);
    return rec && sight_->Sees(*rec);
  }
  // The filter of listings: none for a caller who sees everything.
  std::function<bool(const snap::NodeRecord&)> Keep() const {
    if (!sight_) return {};
    return [sight = *sight_](const snap::NodeRecord& rec) { return sight.Sees(rec); };
  }
  // A request's `workspace` must be the environment's (serve fills it in).
  Result<void> Own(std::string_view op, const std::string& workspace) const {
    if (call_.confined && workspace != call_.env)
      return Fail(ErrorCode::kInvalid, std::string(op) + ": this token reaches " +
                                           (call_.env.empty() ? "the live tree" : "workspace '" + call_.env + "'") +
                                           " only; leave 'workspace' out");
    return {};
  }
  // A file reader's ref: empty reads the live tree, on the live tree only.
  Result<void> PinReader(std::string_view op, std::string* ref) const {
    if (!ref->empty()) return Pin(ref);
    if (!call_.env.empty())
      return Fail(ErrorCode::kInvalid, std::string(op) + " on workspace '" + call_.env +
                                           "' reads its nodes only: give ref= (a node of its log), or exec in it");
    return {};
  }

 private:
  Scope(Server& s, const CallContext& call) : s_(s), call_(call) {}
  Server& s_;
  const CallContext& call_;
  std::optional<Sight> sight_;
};

}  // namespace

Result<Sight> Sight::Of(const snap::Repo& repo, const std::string& env) {
  Sight sight;
  sight.env_ = env;
  if (env.empty()) return sight;
  AE_ASSIGN(workspace::Workspace ws, workspace::LoadWorkspace(repo.root(), env));
  sight.since_ns_ = ws.created_ns;
  std::optional<store::ObjectId> base = ws.base;
  for (int depth = 0; base && depth < kMaxForkDepth; ++depth) {
    AE_ASSIGN(snap::NodeRecord rec, repo.Record(*base));
    sight.past_.push_back({MadeIn(rec), rec.time_ns});
    base = MadeIn(rec).empty() ? std::nullopt : rec.provenance->base;
  }
  return sight;
}

bool Sight::Sees(const snap::NodeRecord& rec) const {
  if (env_.empty()) return OfLiveTree(rec);
  if (MadeIn(rec) == env_ && rec.time_ns >= since_ns_) return true;
  for (const Past& p : past_)
    if (rec.time_ns <= p.until_ns && (p.env.empty() ? OfLiveTree(rec) : MadeIn(rec) == p.env)) return true;
  return false;
}

Result<SnapshotReply> OnEnvironment(Server& s, SnapshotRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.Own("snapshot", r.workspace));
  return Op<SnapshotRequest>::Run(s, r, call);
}

Result<RollbackReply> OnEnvironment(Server& s, RollbackRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.Own("rollback", r.workspace));
  AE_TRY(scope.Pin(&r.ref));
  return Op<RollbackRequest>::Run(s, r, call);
}

Result<LogReply> OnEnvironment(Server& s, LogRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.Own("log", r.workspace));
  return s.Log(r, scope.Keep());
}

Result<DiffReply> OnEnvironment(Server& s, DiffRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.Own("diff", r.workspace));
  AE_TRY(scope.Pin(&r.from));
  if (!r.to.empty()) AE_TRY(scope.Pin(&r.to));
  return Op<DiffRequest>::Run(s, r, call);
}

Result<ShowReply> OnEnvironment(Server& s, ShowRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.Pin(&r.ref));
  return Op<ShowRequest>::Run(s, r, call);
}

Result<DigestReply> OnEnvironment(Server& s, DigestRequest& r, const CallContext& call) {
  if (call.confined && !call.env.empty())
    return Fail(ErrorCode::kInvalid, "digest reads the live tree's history; on workspace '" + call.env +
                                         "' log lists its lane");
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  return s.Digest(r, scope.Keep());
}

Result<BisectReply> OnEnvironment(Server& s, BisectRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.Pin(&r.bad));
  if (!r.good.empty()) AE_TRY(scope.Pin(&r.good));
  return Op<BisectRequest>::Run(s, r, call);
}

Result<HeadReply> OnEnvironment(Server& s, HeadRequest& r, const CallContext& call) {
  if (call.env.empty() && !call.confined) return Op<HeadRequest>::Run(s, r, call);
  ShowRequest show{"HEAD", r.packages};
  AE_ASSIGN(ShowReply shown, OnEnvironment(s, show, call));
  return HeadReply{std::move(shown.node)};
}

Result<BranchesReply> OnEnvironment(Server& s, BranchesRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_ASSIGN(BranchesReply rep, Op<BranchesRequest>::Run(s, r, call));
  std::erase_if(rep.branches, [&](const ListedNode& n) { return !scope.Sees(n.node.id); });
  return rep;
}

Result<TagReply> OnEnvironment(Server& s, TagRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  if (r.name.empty()) {
    AE_ASSIGN(TagReply rep, Op<TagRequest>::Run(s, r, call));
    if (rep.tags) std::erase_if(*rep.tags, [&](const TagEntry& t) { return !scope.Sees(t.id); });
    return rep;
  }
  if (call.confined) {
    // Tags are one namespace: a confined caller moves or deletes only the
    // tags of nodes it sees, and names no node with another's.
    AE_ASSIGN(auto tags, s.repo().Tags());
    for (const auto& [name, id] : tags)
      if (name == r.name && !scope.Sees(id.Hex())) {
        if (r.del) return Fail(ErrorCode::kNotFound, "tag '" + r.name + "': no such tag");
        return Fail(ErrorCode::kExists, "tag '" + r.name + "' is taken: give another name");
      }
  }
  if (!r.del) AE_TRY(scope.Pin(&r.ref));
  return Op<TagRequest>::Run(s, r, call);
}

Result<WorkspacesReply> OnEnvironment(Server& s, WorkspacesRequest& r, const CallContext& call) {
  AE_ASSIGN(WorkspacesReply rep, Op<WorkspacesRequest>::Run(s, r, call));
  if (call.confined) std::erase_if(rep.workspaces, [&](const WorkspaceInfo& w) { return w.name != call.env; });
  return rep;
}

Result<ForkReply> OnEnvironment(Server& s, ForkRequest& r, const CallContext& call) {
  if (call.confined)
    return Fail(ErrorCode::kInvalid, "fork makes a new environment, which this token would not reach: the operator's "
                                     "token forks");
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.Pin(&r.ref));
  return Op<ForkRequest>::Run(s, r, call);
}

Result<ExecReply> OnEnvironment(Server& s, ExecRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.Own("exec", r.workspace));
  return Op<ExecRequest>::Run(s, r, call);
}

// A job of another session is refused by the op itself (CallContext::owner).
Result<PsReply> OnEnvironment(Server& s, PsRequest& r, const CallContext& call) {
  return Op<PsRequest>::Run(s, r, call);
}
Result<KillReply> OnEnvironment(Server& s, KillRequest& r, const CallContext& call) {
  return Op<KillRequest>::Run(s, r, call);
}
Result<JobOutputReply> OnEnvironment(Server& s, JobOutputRequest& r, const CallContext& call) {
  return Op<JobOutputRequest>::Run(s, r, call);
}

namespace {

// An op of the live tree alone: refused on a workspace's endpoint.
template <class Req>
Result<typename Op<Req>::Reply> OnLiveTree(Server& s, Req& r, const CallContext& call) {
  if (!call.env.empty())
    return Fail(ErrorCode::kInvalid, std::string(Op<Req>::kName) + " acts on the live tree, not on workspace '" +
                                         call.env + "': call it on the live tree's endpoint /mcp");
  return Op<Req>::Run(s, r, call);
}

// A file reader: its ref as the environment names it (Scope::PinReader).
template <class Req>
Result<typename Op<Req>::Reply> OnReader(Server& s, Req& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.PinReader(Op<Req>::kName, &r.ref));
  return Op<Req>::Run(s, r, call);
}

}  // namespace

Result<StatusReply> OnEnvironment(Server& s, StatusRequest& r, const CallContext& call) { return OnLiveTree(s, r, call); }
Result<SpawnReply> OnEnvironment(Server& s, SpawnRequest& r, const CallContext& call) {
  if (call.env.empty()) {
    AE_ASSIGN(Scope scope, Scope::Of(s, call));
    AE_TRY(scope.Own("spawn", r.run.workspace));
  }
  return OnLiveTree(s, r, call);
}
Result<TournamentReply> OnEnvironment(Server& s, TournamentRequest& r, const CallContext& call) {
  return OnLiveTree(s, r, call);
}
Result<ImportReply> OnEnvironment(Server& s, ImportRequest& r, const CallContext& call) { return OnLiveTree(s, r, call); }
Result<WriteFileReply> OnEnvironment(Server& s, WriteFileRequest& r, const CallContext& call) {
  return OnLiveTree(s, r, call);
}

Result<ReadFileReply> OnEnvironment(Server& s, ReadFileRequest& r, const CallContext& call) { return OnReader(s, r, call); }
Result<ListDirReply> OnEnvironment(Server& s, ListDirRequest& r, const CallContext& call) { return OnReader(s, r, call); }
Result<SearchReply> OnEnvironment(Server& s, SearchRequest& r, const CallContext& call) { return OnReader(s, r, call); }
Result<FileHistoryReply> OnEnvironment(Server& s, FileHistoryRequest& r, const CallContext& call) {
  AE_ASSIGN(Scope scope, Scope::Of(s, call));
  AE_TRY(scope.Pin(&r.ref));
  return Op<FileHistoryRequest>::Run(s, r, call);
}

}  // namespace agentenv::control
