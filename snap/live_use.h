// snap/live_use: is anything using a btrfs subvolume right now?
//
// A restore may replace the whole live tree by another subvolume (an O(1)
// swap) only when no process would notice: a process whose working
// directory, root, open file or mapped file is in the old subvolume keeps
// that old tree after the swap, so it would go on working in a deleted
// copy. Each btrfs subvolume has its own anonymous device number (st_dev),
// so stat()ing /proc/<pid>/{cwd,root,fd/*} and comparing the device is
// enough; no path needs to be resolved. Mapped files are found in
// /proc/<pid>/maps, which names only the filesystem: those on the live
// tree's filesystem are statted through map_files/. A mount at or below the
// subvolume (in this mount namespace) counts too: it would stay on the old
// tree. What cannot be inspected (another user's process without
// privileges, map_files without CAP_SYS_ADMIN) counts as in use, except
// pid 1: a VM's or container's init may hold capabilities that even root
// here lacks, so nothing of it can be read, and it never works in a
// repository (were the live tree its root, it would be ours too, which
// this process checks on itself).
//
// Limits: per process, not per thread (a thread that unshared its
// filesystem attributes may have its own cwd); a process that starts using
// the tree after the check is not seen (the caller checks last, right
// before the swap).
#pragma once

#include <optional>
#include <string>

#include "common/result.h"

namespace agentenv::snap {

// Who uses the subvolume whose root is `dir`: nullopt when nothing does,
// else one reason, e.g. "pid 1234 (bash): cwd". Cost: a stat per process
// and open fd, and per mapping of a file on the same filesystem, of every
// process on the machine. Errors: I/O
// (`dir` or /proc unreadable). Thread-safe.
Result<std::optional<std::string>> FindSubvolumeUser(const std::string& dir);

}  // namespace agentenv::snap
