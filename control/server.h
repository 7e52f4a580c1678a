// control::Server: one repository served to every caller of this process.
//
// A CLI call makes one for its single operation; a daemon, supervisor or
// MCP server makes one for its lifetime and serves the socket and MCP from
// it. It owns what the operations share:
//   - the repository (snap::Repo),
//   - the writer mutex: held by every writer of this process for its whole
//     duration (an operation that changes history, an exec from its
//     command's start to its snapshot, each automatic capture), so an exec's
//     changes land in the node labelled with its command;
//   - the jobs (exec and spawn environments) and their sessions;
//   - the automatic capture, when one runs.
// Typed operations are the methods below; control/ops.h maps names and
// JSON onto them. Every method is thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "common/mutex.h"
#include "common/result.h"
#include "capture/capture.h"
#include "control/frames.h"
#include "run/jobs.h"
#include "control/types.h"
#include "workspace/workspace.h"
#include "snap/repo.h"

namespace agentenv::control {

class Server {
 public:
  explicit Server(std::unique_ptr<snap::Repo> repo);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  snap::Repo& repo() { return *repo_; }
  // Whether rollbacks may replace the live tree by a btrfs snapshot when
  // nothing uses it (snap::RestoreMode::kSwapIfUnused): set for a
  // command's own server; a daemon's (an agent may run, a capture watches
  // the tree) keeps restoring in place.
  void set_swap_restores(bool on) { swap_restores_ = on; }
  // The nice value added to every command exec runs (runner::Limits::nice):
  // serve --listen runs agents' commands below its own threads, so that
  // reads keep a core while the agents keep it busy. Set before serving.
  void set_command_nice(int nice) { command_nice_ = nice; }
  // The nice value added, for the call's duration, to the thread that runs
  // a writing op through CallJson (OpSpec::writes: exec, snapshot, fork,
  // rollback...): serve --listen runs its writers' work (a snapshot's
  // hashing, an env's setup) below its reads. Commands exec starts run
  // set_command_nice further below. Set before serving.
  void set_writer_nice(int nice) { writer_nice_ = nice; }
  int writer_nice() const { return writer_nice_; }

  // History. Errors: whatever the repository reports (kNotFound for refs,
  // kInvalid for bad arguments, kBusy, kCorrupt, I/O).
  // `call.who` is recorded in the provenance of the nodes made.
  Result<SnapshotReply> Snapshot(const SnapshotRequest& r, const CallContext& call = {});
  // With a capture running, its pending changes become a node first
  // (Capture::Drain), so the restore saves nothing by walking the tree.
  Result<RollbackReply> Rollback(const RollbackRequest& r, const CallContext& call = {},
                                 const snap::OpOptions& op = {});
  // With `keep`, the live tree's log lists only the nodes it keeps (a
  // scoped caller's, control/confine.h).
  Result<LogReply> Log(const LogRequest& r, const std::function<bool(const snap::NodeRecord&)>& keep = {});
  Result<ShowReply> Show(const ShowRequest& r);
  // history/digest.h: a span of history in one page.
  Result<DigestReply> Digest(const DigestRequest& r, const std::function<bool(const snap::NodeRecord&)>& keep = {});
  // `ref` as environment `env` names it ("" the live tree: the
  // repository's refs; a workspace: HEAD and HEAD~N count along its lane).
  // Errors: kNotFound (no such node or workspace), kInvalid (the ref).
  Result<store::ObjectId> ResolveAt(const std::string& env, const std::string& ref);
  Result<DiffReply> Diff(const DiffRequest& r);
  Result<HeadReply> Head(const HeadRequest& r);
  Result<BranchesReply> Branches(const BranchesRequest& r);
  Result<TagReply> Tag(const TagRequest& r);
  Result<StatusReply> Status(const StatusRequest& r);
  Result<RetainReply> Retain(const RetainRequest& r);
  Result<GcReply> Gc(const GcRequest& r);
  Result<ImportReply> Import(const ImportRequest& r, const CallContext& call = {});

  // Processes (server_exec.cc, server_jobs.cc; run/pipeline.h, run/jobs.h).
  // Jobs belong to this object and die with it. Exec streams its output to
  // `emit` as frames (see README "Control socket"), or collects it into the
  // reply when `emit` is null. An error with `partial` set: the command ran
  // but its snapshot failed.
  Result<ExecReply> Exec(const ExecRequest& r, const CallContext& call);
  // A call's jobs are its MCP session's (CallContext::owner); a call that
  // does not see all lists and kills only its own.
  Result<SpawnReply> Spawn(const SpawnRequest& r, const CallContext& call = {});
  Result<PsReply> Ps(const PsRequest& r, const CallContext& call = {});
  Result<KillReply> Kill(const KillRequest& r, const CallContext& call = {});
  // A spawned job's log from r.since; a call that does not see all reads
  // only its own jobs. Errors: kNotFound (no such job of the caller's, or
  // an exec's, which has no log), I/O reading it.
  Result<JobOutputReply> JobOutput(const JobOutputRequest& r, const CallContext& call = {});

  // Workspaces (server_workspace.cc; workspace/workspace.h) and tournaments
  // (trials/tournament.h). Snapshot, Diff and Exec act on a workspace
  // when the request names one. A workspace's command and snapshot hold
  // its lock (kBusy for a second one); nothing of it touches the live tree.
  Result<ForkReply> Fork(const ForkRequest& r);
  Result<WorkspacesReply> Workspaces(const WorkspacesRequest& r);
  Result<WorkspaceRmReply> WorkspaceRm(const WorkspaceRmRequest& r);
  // Forks one workspace per candidate from `base`, runs candidate then
  // test in each (up to `jobs` at once), snapshots each as a child of the
  // base, picks the first to pass (by finish time, ties by order) and,
  // unless !apply, rolls the live tree back to its node (unsaved changes
  // saved first). No winner: nothing applied, every node kept. `emit`
  // is only probed (null frames): once it answers false (the caller
  // cancelled or left) every candidate is killed, none is tested or
  // snapshotted, nothing is applied and the reply says `cancelled`.
  Result<TournamentReply> Tournament(const TournamentRequest& r, const CallContext& call = {});
  // trials/bisect.h: the first node where a test fails, K at a time.
  Result<BisectReply> Bisect(const BisectRequest& r);
  // Read-only views (mounts/views.h): mount a node's lower at a
  // directory in this process's mount namespace, unmount it, list them.
  Result<MountReply> Mount(const MountRequest& r);
  Result<UmountReply> Umount(const UmountRequest& r);
  Result<MountsReply> Mounts(const MountsRequest& r);
  // Scoped tokens of serve --listen (control/tokens.h).
  Result<TokenCreateReply> TokenCreate(const TokenCreateRequest& r);
  Result<TokenLsReply> TokenLs(const TokenLsRequest& r);
  Result<TokenRevokeReply> TokenRevoke(const TokenRevokeRequest& r);
  // The environments: the live tree and each workspace, with what runs in
  // them, their disk use and the scoped tokens that reach them.
  Result<EnvLsReply> EnvLs(const EnvLsRequest& r);

  // Starts the automatic capture of the live tree (a baseline snapshot
  // first). Call before serving anyone. Errors: I/O, bad ignore file.
  Result<void> StartCapture(const capture::CaptureOptions& opt);
  // Stops it; with deliver_pending its last changes become a node.
  void StopCapture(bool deliver_pending);
  // The writer mutex, for a caller that writes through the repository
  // directly (shell's final snapshot).
  std::unique_lock<Mutex> LockWriters() { return std::unique_lock(writer_mu_); }

 private:
  Result<SnapshotReply> SnapshotWorkspace(const SnapshotRequest& r, const snap::Requester& who);
  // With the workspace's lock held: snapshots it and moves its head.
  Result<SnapshotReply> SnapshotLocked(workspace::Workspace& ws, const snap::SnapOptions& opt);
  Result<DiffReply> DiffWorkspace(const DiffRequest& r);
  // Puts a workspace back to a node: its unsaved changes saved as a node
  // first, then made that node again (workspace::ResetWorkspace).
  Result<RollbackReply> RollbackWorkspace(const RollbackRequest& r, const CallContext& call);
  Result<SnapshotReply> SnapshotReplyOf(const snap::SnapResult& res);
  Result<DiffReply> DiffReplyOf(const store::ObjectId& from, const store::ObjectId& to, const DiffRequest& r);
  std::unique_ptr<snap::Repo> repo_;
  Mutex writer_mu_;  // see the file comment
  run::JobTable jobs_;         // thread-safe itself
  run::ExecQueue live_execs_;  // thread-safe itself
  // Set by StartCapture before any client is served, reset by
  // StopCapture after the last: read without a lock in between.
  std::unique_ptr<capture::Capture> capture_;
  bool swap_restores_ = false;
  int command_nice_ = 0;
  int writer_nice_ = 0;
};

}  // namespace agentenv::control
