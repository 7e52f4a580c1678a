// Workspaces: a node forked in O(1) as a kernel overlay (no FUSE, no
// daemon in the data path). Lower = the node materialized read-only
// (lowers/<tree id>, shared by every workspace of that tree); upper and
// overlayfs' work directory are the workspace's own. The overlay is only
// ever mounted inside a runner env's mount namespace, so no mount outlives
// the command that used it. A workspace's snapshot reads its upper alone:
// O(changes), no walk, no journal.
//
// Lifecycle (docs/design.md, "Shared state"): made as workspaces/.new-<name>-*
// (scratch, locked by its maker) and renamed into place when whole; in use
// while a command holds `lock`; removed by renaming to .rm-<name>-* first.
// Its state names its lower: a lease on it that lasts as long as the
// workspace (gc never removes a lower a workspace names).
//
// On disk, workspaces/<name>/:
//   state   JSON {"base","head","lower","created_ns","tournament","lease",
//           "disk_bytes"}, replaced
//           atomically (temp file, fsync, rename, fsync of the directory)
//   upper/  the changes (whiteouts: char 0:0; opaque dirs: user.overlay.opaque)
//   work/   overlayfs' scratch
//   root/   the mount point inside a runner env
//   lock    flock: held while a command or a snapshot uses the workspace
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "runner/runner.h"
#include "snap/repo.h"
#include "store/store.h"

namespace agentenv::workspace {

struct Workspace {
  std::string name;
  std::string dir;  // workspaces/<name>
  store::ObjectId base, head;
  std::string lower;  // lowers/<tree id>
  int64_t created_ns = 0;
  std::string tournament;  // the tournament that made it, if any
  // The holder of its lease on `base` (snap::Repo::LeaseNode), which keeps
  // retain from dropping the node the workspace's snapshots descend from:
  // "ws/<name>-<suffix>", unique to this workspace.
  std::string lease;
  // Its commands' writes are held to this many bytes (0: the repository's
  // default, mounts/disk_limit.h).
  uint64_t disk_bytes = 0;
  // Which upper and work directories hold its state: upper and work, then
  // upper.N and work.N after its Nth reset (ResetWorkspace makes the next
  // pair beside the current one and switches to it by writing the state).
  uint64_t generation = 0;

  std::string upper() const { return dir + "/upper" + Suffix(); }
  std::string work() const { return dir + "/work" + Suffix(); }
  runner::Overlay overlay() const { return {lower, upper(), work()}; }
  std::string Suffix() const { return generation ? "." + std::to_string(generation) : ""; }
  std::string mount_point() const { return dir + "/root"; }
};

// Creates workspaces/<name> over `lower` for node `base`, with its lease
// on `base` taken while it is being made (under its scratch name, locked).
// With `held`, the workspace's lock (for `holder`, see LockWorkspace) is
// taken before it gets its name and handed to the caller there: nobody
// sees the workspace free until the caller lets go (a tournament's
// candidates waiting for their turn).
// Errors: kInvalid (the name), kExists, kNotFound (base left history
// meanwhile: retain dropped it), I/O.
Result<Workspace> CreateWorkspace(snap::Repo& repo, const std::string& name, const store::ObjectId& base,
                                  const std::string& lower, const std::string& tournament = "",
                                  uint64_t disk_bytes = 0, UniqueFd* held = nullptr, std::string_view holder = {});
// Errors: kInvalid (the name), kNotFound "workspace 'x': no such workspace".
Result<Workspace> LoadWorkspace(const std::string& root, const std::string& name);
// Writes the state file (head moved). Errors: I/O.
Result<void> SaveWorkspace(const Workspace& ws);
// Every workspace, by name.
Result<std::vector<Workspace>> ListWorkspaces(const std::string& root);
// The workspace's lock, held until the fd closes (an OFD lock, inherited
// with the fd); `holder` says what holds it ("exec: make test"), quoted to
// whoever finds it busy. Errors: kBusy naming the holder, kNotFound (the
// workspace was removed meanwhile), I/O.
Result<UniqueFd> LockWorkspace(const Workspace& ws, std::string_view holder);
// A workspace opened for a command (exec, shell, a tournament's
// candidate): its lock held, and its lower leased and checked — built again
// when it is missing or unmarked (its state is a lease, so only damage or
// an older version's gc could have taken it). All released when the
// object dies.
struct WorkspaceInUse {
  Workspace ws;
  UniqueFd lock;
  snap::LowerLease lower;
  // Makes `spec` run in the workspace: its overlay as the root, and the
  // lock and the lease held by the env itself, so that a command that
  // outlives its caller (killed) still keeps both.
  void Apply(runner::EnvSpec* spec) const {
    spec->root = ws.mount_point();
    spec->overlay = ws.overlay();
    spec->held_fds = {lock.get(), lower.fd()};
  }
};
// Errors: as LoadWorkspace, kBusy (another command runs in it), what
// Repo::LeaseLower reports.
Result<WorkspaceInUse> UseWorkspace(snap::Repo& repo, const std::string& name, std::string_view holder);

// Resolves `ref` and calls `lease(node)`, which leases the node (a
// workspace's creation does). retain may drop the node between the two
// (HEAD moved on and the node fell out of the kept set): lease then fails
// with kNotFound, and `ref` is resolved again, a few times.
template <class F>
auto LeaseResolved(snap::Repo& repo, const std::string& ref, F lease) -> decltype(lease(store::ObjectId{})) {
  for (int attempt = 0;; ++attempt) {
    AE_ASSIGN(store::ObjectId node, repo.Resolve(ref));
    auto leased = lease(node);
    if (leased || leased.error().code != ErrorCode::kNotFound || attempt == 3) return leased;
  }
}

// With the workspace's lock held by the caller: makes it node `node` again
// over `lower` (node's materialized tree, leased by the caller until this
// returns). Crash-atomic: an empty next upper and work are made beside the
// current ones and `node` leased under the workspace's next lease
// (NextLease); writing the state (base = head = node, lower, generation + 1)
// is the switch; then the workspace's lease moves to `node`, the next one
// is released and the old upper and work are removed. A kill before the
// state is written leaves the workspace as it was (ReleaseOrphanLeases
// drops the next lease, the next reset the half-made pair); after it, at
// `node` (ReleaseOrphanLeases finishes the lease's move,
// DropStaleDirectories the old pair). Errors: kNotFound (node left
// history), I/O.
Result<void> ResetWorkspace(snap::Repo& repo, Workspace& ws, const store::ObjectId& node, const std::string& lower);
// The lease a reset takes on its new node before it switches (see above).
std::string NextLease(const Workspace& ws);
// With the lock held: removes the upper and work directories of other
// generations and the removals a killed reset left (.rm-*). Errors: I/O.
Result<void> DropStaleDirectories(const Workspace& ws);

// Whether a command holds the lock now; tests it without taking it.
bool WorkspaceBusy(const Workspace& ws);
// Removes the workspace: renamed aside, then deleted, then its node lease
// released. Its lock is `held` (the caller's) or taken here. Errors:
// kBusy, I/O.
Result<void> RemoveWorkspace(snap::Repo& repo, const Workspace& ws, UniqueFd held = {});
// Finishes the removal of workspace `name` that a killed removal left
// renamed aside (and the leases no workspace holds any more); false when
// there is none. Errors: kInvalid (the name), kBusy (a removal of it is
// running), I/O.
Result<bool> FinishRemoval(snap::Repo& repo, const std::string& name);
// Releases the node leases of workspaces that are gone (a removal or a
// creation killed before it released or finished); a lease of a workspace
// being made (its scratch directory locked) stays. Returns how many.
// Errors: I/O.
Result<uint64_t> ReleaseOrphanLeases(snap::Repo& repo);

}  // namespace agentenv::workspace
