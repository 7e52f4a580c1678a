// snap/lowers: a node's tree as a read-only directory, lowers/<tree id>/,
// the lower layer shared by every workspace (and read-only view) of a node
// with that tree. A cache of the store: built on demand, removed by gc when
// nothing holds it, rebuilt when needed again.
//
// Lifecycle (docs/design.md, "Shared state"):
//   being built   lowers/.tmp-XXXXXX/t, a ScratchDir its builder locks;
//   ready         lowers/<tree id>, carrying the completion mark
//                 user.agentenv.lower = "<tree id>" (set after the tree
//                 is whole and synced, before the rename into place);
//   in use        leased: each process using it holds a LowerLease (flock
//                 LOCK_SH on the directory) for as long as it uses it — a
//                 fork until its workspace's state is durable, an exec,
//                 shell or tournament for its run, a `mount -- CMD` for
//                 CMD's; and each workspace whose state names it, and each
//                 mounted view whose record does (mounts/views.h), holds
//                 it for its whole life;
//   unused        no lease of either kind;
//   being removed lowers/.rm-<tree id>-XXXXXX, deleted by the one process
//                 that renamed it, holding LOCK_EX (Repo::SweepLowers).
// A lease is taken only on a directory still at its ready name and marked;
// anything else under that name (a lower an older version left unmarked,
// damaged) is retired and built again.
#pragma once

#include <string>

#include "common/unique_fd.h"

namespace agentenv::snap {

// A shared lock on a ready lower: while it lives, no gc removes the lower.
// Move-only; released when destroyed (or when the process dies).
class LowerLease {
 public:
  LowerLease() = default;
  LowerLease(std::string dir, UniqueFd fd, std::string method)
      : dir_(std::move(dir)), fd_(std::move(fd)), method_(std::move(method)) {}
  // lowers/<tree id>, as the repository root was given.
  const std::string& dir() const { return dir_; }
  // How it was obtained: "existing", "snapshot" (btrfs), "reflink", "copy"
  // or "hardlink (N files), reflink|copy (M)".
  const std::string& method() const { return method_; }
  bool held() const { return bool(fd_); }
  // The locked directory's descriptor (for a runner env to hold the lease
  // for its own lifetime: runner::EnvSpec::held_fds).
  int fd() const { return fd_.get(); }

 private:
  std::string dir_;
  UniqueFd fd_;
  std::string method_;
};

// The completion mark of a ready lower (an xattr on its top directory,
// which no workspace sees: an overlay's root shows its upper's metadata).
inline constexpr const char* kLowerMarkXattr = "user.agentenv.lower";

// Whether directory `fd` carries the completion mark of lower `tree_hex`.
bool IsMarkedLower(int fd, const std::string& tree_hex);

}  // namespace agentenv::snap
