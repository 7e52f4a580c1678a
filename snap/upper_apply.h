// snap/upper_apply: an overlay upper directory's changes carried onto
// another directory, for commands whose overlay upper lived on a
// size-limited tmpfs (a disk quota, runner::Overlay::disk_bytes) and must
// outlive it.
#pragma once

#include <string>

#include "common/result.h"

namespace agentenv::snap {

enum class UpperTarget {
  kTree,   // a plain tree (the live tree): a whiteout deletes, an opaque
           // directory replaces, overlay xattrs are dropped
  kUpper,  // another upper below it (a workspace's): whiteouts and opaque
           // directories are kept as overlayfs marks them (userxattr)
};

// Applies the upper at `upper_fd` (a directory; whiteouts are character
// devices 0:0, opaque directories carry user.overlay.opaque=y) onto the
// directory at `target_fd`, as overlayfs would show the upper over it:
// every entry of the upper replaces the target's (a non-opaque directory is
// merged into a directory there), metadata (owner when `chown`, xattrs,
// mode, mtime) included, the root directory's too. Hardlinks inside the
// upper come out as separate files. Nothing is followed through a symlink.
// Errors: the first failure, `what`-relative path first (e.g. ENOSPC of the
// target); what was applied before it stays.
Result<void> ApplyUpper(int upper_fd, int target_fd, UpperTarget mode, bool chown, const std::string& what);

}  // namespace agentenv::snap
