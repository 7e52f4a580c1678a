// Read-only views of nodes at directories of the caller's choice, without
// FUSE: the node's lower (lowers/<tree id>, the same cache workspaces
// overlay) bind-mounted read-only (runner/view.h).
//
// A view mounted in the caller's mount namespace outlives the command that
// made it (a bind mount survives its creator by nature), so it is owned by
// the repository: a record mounts/<id> (JSON: dir, node, lower, uid, pid,
// created_ns) that names its lower, a lease on it exactly as a workspace's
// state is (gc never removes a lower a record names). Its lifecycle:
//   being made   the record is written (durably) and flocked LOCK_EX by the
//                `mount` that writes it, then the bind is mounted, then the
//                lock is dropped;
//   mounted      the directory shows the lower (same device and inode);
//   stale        the record's directory no longer shows its lower (unmounted
//                by hand, a reboot, a `mount` killed before its bind): its
//                lock is free and its lease is void. gc, `umount` and the
//                next `mount` remove stale records (ReclaimStaleMounts).
// `umount DIR` unmounts and removes the record, ending the lease.
// Views for one command (`mount REF -- CMD`) have no record: they live in a
// mount namespace of their own and their lease is a flock held by the
// command (snap::LowerLease), so both end with it.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "runner/runner.h"
#include "snap/repo.h"

namespace agentenv::mounts {

struct MountRecord {
  std::string id;     // file name under mounts/
  std::string dir;    // where it is mounted (absolute, no symlinks)
  std::string node;   // the node shown (hex)
  std::string lower;  // lowers/<tree id>: the leased lower
  int64_t uid = 0, pid = 0;  // who mounted it
  int64_t created_ns = 0;
  bool mounted = false;      // not stored: whether `dir` shows `lower` now
};

// Mounts node's lower read-only at `dir` (an existing directory) in the
// caller's mount namespace and records it. Stale records are removed
// first. Errors: kInvalid (dir not a directory), kExists (a view is
// recorded at dir), kUnsupported (the caller may not mount here: needs
// CAP_SYS_ADMIN; nothing is left recorded), what Repo::LeaseLower reports.
Result<MountRecord> MountView(snap::Repo& repo, const store::ObjectId& node, const std::string& dir);
// Unmounts the view at `dir` and removes its record (a stale record is
// just removed). Errors: kNotFound (no view recorded there), kBusy (in
// use), kUnsupported (not allowed to unmount), I/O.
Result<MountRecord> UnmountView(snap::Repo& repo, const std::string& dir);
// Every record, `mounted` filled in, by directory. Errors: I/O.
Result<std::vector<MountRecord>> ListMounts(const std::string& root);
// Removes records whose view is gone (not being made: their lock is free);
// returns how many. Errors: I/O.
Result<uint64_t> ReclaimStaleMounts(const std::string& root);
// The lowers (tree ids) the records name: gc keeps them.
Result<std::set<std::string>> MountedLowers(const std::string& root);

// Runs argv with node's lower mounted read-only at `dir` in a mount
// namespace of the command's own (runner::RunWithView: rootless, nothing
// mounted in the caller's namespace) and waits for it; the lower's lease is
// a flock the command holds, so it ends with the command. `dir` empty: a
// new directory under $TMPDIR (or /tmp), removed afterwards. The command
// sees the directory as $AGENTENV_VIEW. Errors: kInvalid (dir), what
// Repo::LeaseLower and runner::RunWithView report.
Result<runner::ExitStatus> RunInView(snap::Repo& repo, const store::ObjectId& node, const std::string& dir,
                                     const std::vector<std::string>& argv);

}  // namespace agentenv::mounts
