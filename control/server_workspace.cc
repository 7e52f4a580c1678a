// The workspace operations of control::Server: fork, list, remove, and the
// workspace forms of snapshot, diff and exec (workspace/workspace.h).
#include "workspace/workspace.h"
#include "mounts/views.h"

#include <chrono>
#include <thread>

#include "history/node_view.h"
#include "control/server.h"
#include "snap/diff.h"
#include "snap/layout.h"

namespace agentenv::control {
namespace {

MountInfo Describe(const mounts::MountRecord& m) {
  return {m.dir, m.node, m.lower, FormatTime(m.created_ns), m.uid, m.pid, m.mounted};
}

// `ref` in workspace `ws`: HEAD and HEAD~N count along its lane (its last
// node back through the parents); any other ref is the repository's.
Result<store::ObjectId> ResolveIn(const snap::Repo& repo, const workspace::Workspace& ws, const std::string& ref) {
  if (!ref.starts_with("HEAD")) return repo.Resolve(ref);
  const std::string rest = ref.substr(4);
  const bool counted = rest.size() > 1 && rest.size() < 8 && rest[0] == '~' &&
                       rest.find_first_not_of("0123456789", 1) == std::string::npos;
  if (!rest.empty() && !counted)
    return Fail(ErrorCode::kInvalid, "'" + ref + "': in a workspace give HEAD, HEAD~N or a node");
  store::ObjectId at = ws.head;
  for (uint64_t back = counted ? std::stoull(rest.substr(1)) : 0; back > 0; --back) {
    AE_ASSIGN(snap::NodeRecord rec, repo.Record(at));
    if (!rec.parent) return Fail(ErrorCode::kNotFound, "'" + ref + "': workspace '" + ws.name + "' has a shorter lane");
    at = *rec.parent;
  }
  return at;
}

// The workspace's lock for `holder`, waited for while another command
// holds it (an exec that just replied may hold it a moment longer: its
// env's last process is still exiting), up to kLockWait: a snapshot or a
// rollback queues like an exec of the same workspace. Then `*ws` is read
// again: a reset that held the lock may have switched its state.
constexpr auto kLockWait = std::chrono::seconds(30);
Result<UniqueFd> LockQueued(const std::string& root, workspace::Workspace* ws, std::string_view holder) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    auto lock = workspace::LockWorkspace(*ws, holder);
    if (lock) {
      AE_ASSIGN(*ws, workspace::LoadWorkspace(root, ws->name));
      return lock;
    }
    if (lock.error().code != ErrorCode::kBusy || std::chrono::steady_clock::now() - start > kLockWait)
      return lock;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

WorkspaceInfo Describe(const workspace::Workspace& ws) {
  return {ws.name, ws.base.Hex(), ws.head.Hex(), ws.lower, FormatTime(ws.created_ns), workspace::WorkspaceBusy(ws)};
}

}  // namespace

Result<store::ObjectId> Server::ResolveAt(const std::string& env, const std::string& ref) {
  if (env.empty()) return repo_->Resolve(ref);
  AE_ASSIGN(workspace::Workspace ws, workspace::LoadWorkspace(repo_->root(), env));
  return ResolveIn(*repo_, ws, ref);
}

Result<ForkReply> Server::Fork(const ForkRequest& r) {
  const auto start = std::chrono::steady_clock::now();
  ForkReply rep;
  // The workspace's state leases its base node (LeaseResolved). The
  // lower's lease is held until that state is durable: no gc can remove
  // the lower in between.
  AE_ASSIGN(workspace::Workspace ws, workspace::LeaseResolved(*repo_, r.ref, [&](const store::ObjectId& base) -> Result<workspace::Workspace> {
    std::string name = r.name;
    if (name.empty()) {
      // ws-<node>-<n>: the first free number.
      AE_ASSIGN(auto all, workspace::ListWorkspaces(repo_->root()));
      for (int n = 1;; ++n) {
        name = "ws-" + Short(base) + "-" + std::to_string(n);
        bool taken = false;
        for (const auto& w : all) taken |= w.name == name;
        if (!taken) break;
      }
    }
    AE_ASSIGN(snap::LowerLease lower, repo_->LeaseLower(base));
    rep.materialized = lower.method();
    return workspace::CreateWorkspace(*repo_, name, base, lower.dir(), "", r.disk_bytes);
  }));
  rep.workspace = Describe(ws);
  rep.endpoint = "/w/" + ws.name + "/mcp";
  rep.duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  return rep;
}

Result<WorkspacesReply> Server::Workspaces(const WorkspacesRequest&) {
  AE_ASSIGN(auto all, workspace::ListWorkspaces(repo_->root()));
  WorkspacesReply rep;
  for (const auto& ws : all) rep.workspaces.push_back(Describe(ws));
  return rep;
}

Result<WorkspaceRmReply> Server::WorkspaceRm(const WorkspaceRmRequest& r) {
  auto ws = workspace::LoadWorkspace(repo_->root(), r.name);
  if (!ws && ws.error().code == ErrorCode::kNotFound) {
    // A removal killed after its rename: finishing it is the removal. One
    // killed after it finished left nothing: the workspace is gone, as asked.
    AE_ASSIGN(bool finished, workspace::FinishRemoval(*repo_, r.name));
    return WorkspaceRmReply{r.name, finished};
  }
  if (!ws) return Unexpected<Error>(ws.error());
  AE_TRY(workspace::RemoveWorkspace(*repo_, *ws));
  return WorkspaceRmReply{r.name};
}

Result<MountReply> Server::Mount(const MountRequest& r) {
  if (r.dir.empty()) return Fail(ErrorCode::kInvalid, "mount: 'dir' is required");
  AE_ASSIGN(store::ObjectId node, repo_->Resolve(r.ref));
  AE_ASSIGN(mounts::MountRecord m, mounts::MountView(*repo_, node, r.dir));
  return MountReply{Describe(m)};
}

Result<UmountReply> Server::Umount(const UmountRequest& r) {
  AE_ASSIGN(mounts::MountRecord m, mounts::UnmountView(*repo_, r.dir));
  return UmountReply{Describe(m)};
}

Result<MountsReply> Server::Mounts(const MountsRequest&) {
  AE_ASSIGN(auto all, mounts::ListMounts(repo_->root()));
  MountsReply rep;
  for (const auto& m : all) rep.mounts.push_back(Describe(m));
  return rep;
}

Result<SnapshotReply> Server::SnapshotWorkspace(const SnapshotRequest& r, const snap::Requester& who) {
  if (r.paths) return Fail(ErrorCode::kInvalid, "snapshot: 'paths' is for the live tree; a workspace's upper says what changed");
  AE_ASSIGN(workspace::Workspace ws, workspace::LoadWorkspace(repo_->root(), r.workspace));
  AE_ASSIGN(UniqueFd lock, LockQueued(repo_->root(), &ws, "snapshot"));
  snap::SnapOptions opt;
  opt.message = r.message;
  opt.label = r.label;
  opt.allow_empty = r.allow_empty;
  snap::Provenance prov;
  prov.kind = snap::ProvenanceKind::kWorkspace;
  prov.workspace = ws.name;
  prov.base = ws.base;
  prov.who = who;
  prov.message = r.message;
  opt.provenance = std::move(prov);
  return SnapshotLocked(ws, opt);
}

Result<SnapshotReply> Server::SnapshotLocked(workspace::Workspace& ws, const snap::SnapOptions& opt) {
  AE_ASSIGN(snap::SnapResult res, run::RecordWorkspace(*repo_, ws, opt));
  return SnapshotReplyOf(res);
}

Result<RollbackReply> Server::RollbackWorkspace(const RollbackRequest& r, const CallContext& call) {
  if (!r.paths.empty())
    return Fail(ErrorCode::kInvalid, "rollback: a workspace goes back whole ('paths' is for the live tree)");
  AE_ASSIGN(workspace::Workspace ws, workspace::LoadWorkspace(repo_->root(), r.workspace));
  AE_ASSIGN(UniqueFd lock, LockQueued(repo_->root(), &ws, "rollback"));
  // What a killed reset left (workspace::ResetWorkspace).
  AE_TRY(workspace::DropStaleDirectories(ws));
  AE_ASSIGN(store::ObjectId target, ResolveIn(*repo_, ws, r.ref));
  // Unsaved changes become a node first: the rollback can be undone.
  snap::SnapOptions so;
  snap::Provenance prov;
  prov.kind = snap::ProvenanceKind::kWorkspace;
  prov.workspace = ws.name;
  prov.base = ws.base;
  prov.who = call.who;
  prov.message = "saved before a rollback";
  so.provenance = std::move(prov);
  AE_ASSIGN(snap::SnapResult saved, run::RecordWorkspace(*repo_, ws, so));
  RollbackReply rep;
  if (saved.node) rep.saved = saved.node->Hex();
  if (target != ws.head || saved.node) {
    AE_ASSIGN(snap::LowerLease lower, repo_->LeaseLower(target));
    AE_TRY(workspace::ResetWorkspace(*repo_, ws, target, lower.dir()));
  }
  AE_ASSIGN(snap::NodeRecord rec, repo_->Record(target));
  rep.node = MakeNodeInfo(rec);
  return rep;
}

Result<DiffReply> Server::DiffWorkspace(const DiffRequest& r) {
  AE_ASSIGN(workspace::Workspace ws, workspace::LoadWorkspace(repo_->root(), r.workspace));
  auto tree_of = [&](const std::string& ref) -> Result<store::ObjectId> {
    AE_ASSIGN(store::ObjectId id, ResolveIn(*repo_, ws, ref));
    AE_ASSIGN(snap::NodeRecord rec, repo_->Record(id));
    return rec.tree;
  };
  AE_ASSIGN(store::ObjectId from, tree_of(r.from));
  store::ObjectId to;
  if (r.to.empty()) {
    AE_ASSIGN(to, repo_->UpperTree(ws.upper(), ws.base));
  } else {
    AE_ASSIGN(to, tree_of(r.to));
  }
  return DiffReplyOf(from, to, r);
}


}  // namespace agentenv::control

namespace agentenv::control {

Result<TournamentReply> Server::Tournament(const TournamentRequest& r, const CallContext& call) {
  AE_ASSIGN(TournamentReply rep, trials::Tournament(*repo_, r, call.emit, call.who));
  if (r.apply && rep.winner && !rep.cancelled) {
    // Applied to the live tree through the normal restore: unsaved
    // changes are saved first, under the writer mutex.
    RollbackRequest back;
    back.ref = rep.candidates[*rep.winner].node->id;
    AE_ASSIGN(RollbackReply rb, Rollback(back, call, {snap::OpKind::kTournamentApply, call.who, rep.id}));
    rep.applied = true;
    rep.saved = rb.saved;
  }
  return rep;
}

}  // namespace agentenv::control

namespace agentenv::control {

Result<BisectReply> Server::Bisect(const BisectRequest& r) { return trials::Bisect(*repo_, r); }

}  // namespace agentenv::control
