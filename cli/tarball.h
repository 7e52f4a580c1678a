// Unpacking a rootfs tarball (tar, tar.gz, tar.zst, ...) for `init --tarball`.
#pragma once

#include <functional>
#include <string>

#include "common/result.h"

namespace agentenv::cli {

// Extracts the archive at `archive` into the existing empty directory
// `dest`, keeping modes, numeric owners (when privileged), ns mtimes,
// xattrs, hardlinks and symlinks. Refuses (kInvalid) entries whose path is
// absolute or contains "..", hardlinks that point outside the archive, and
// any entry that would be written through a symlink. Device nodes that
// cannot be made without privilege are skipped and reported via `warn`.
// On error `dest` may hold a partial tree: the caller removes it.
Result<void> ExtractTarball(const std::string& archive, const std::string& dest,
                            const std::function<void(const std::string&)>& warn);

}  // namespace agentenv::cli
