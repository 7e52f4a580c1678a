// mounts/disk_limit: holding a command's writes to a number of bytes
// (`--disk`, `disk_bytes`), rootless. The writes go to an overlay upper on
// a tmpfs of that size mounted inside the env's own mount namespace
// (runner::Overlay::disk_bytes): past it a write fails with ENOSPC inside,
// and the host's disk and the repository never see the bytes. After the
// command its upper is carried onto where the changes belong
// (snap::ApplyUpper): the live tree, or the workspace's upper, then
// snapshotted as usual. A workspace's existing upper is a read-only layer
// below the tmpfs, so the limit counts what one command writes (copy-ups
// of files it changes included), not what the workspace held before.
//
// The repository's default is <root>/config (JSON {"disk_bytes": N}),
// used when neither the request nor the workspace names a limit.
#pragma once

#include <optional>
#include <string>

#include "common/result.h"
#include "runner/runner.h"
#include "snap/repo.h"
#include "snap/scratch.h"
#include "snap/upper_apply.h"

namespace agentenv::mounts {

struct RepoConfig {
  uint64_t disk_bytes = 0;  // default limit of exec and workspace commands; 0: none
  template <class V> void Fields(V& v) { v("disk_bytes", disk_bytes); }
};
// <root>/config; absent: the defaults. Errors: kCorrupt (not a config,
// or over 64 KiB), I/O.
Result<RepoConfig> LoadConfig(const std::string& root);
// Replaces it durably. Errors: I/O.
Result<void> SaveConfig(const std::string& root, const RepoConfig& c);

// The limit that applies: `requested`, else the workspace's, else the
// repository's default (0: none). Errors: as LoadConfig.
Result<uint64_t> DiskBytesFor(const std::string& root, uint64_t requested, uint64_t workspace);

// A limit set up on an env's spec, and what is needed to keep its changes.
class DiskLimit {
 public:
  // Limits `spec`'s writes to `bytes` (0: no limit, nothing changes). A
  // spec with an overlay (a workspace) gets the overlay's tmpfs; one on the
  // live tree gets an overlay over the live tree itself, its tmpfs mounted
  // over a scratch directory work/disk-* (locked while this object lives).
  // Errors: kInvalid (below 1 MiB: the tmpfs must hold overlayfs' own
  // directories), I/O.
  static Result<DiskLimit> Plan(snap::Repo& repo, runner::EnvSpec* spec, uint64_t bytes);
  bool active() const { return bytes_ != 0; }
  // After the env ended: what the command wrote (upper/ on the tmpfs at
  // `disk_fd`, runner::Env::disk) carried onto the live tree or the
  // workspace's upper. A no-op without a limit. Errors: snap::ApplyUpper's.
  Result<void> Keep(int disk_fd) const;

 private:
  uint64_t bytes_ = 0;
  std::string target_;
  snap::UpperTarget mode_ = snap::UpperTarget::kTree;
  std::optional<snap::ScratchDir> mount_point_;
};

}  // namespace agentenv::mounts
