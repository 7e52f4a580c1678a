// Unpacking a tarball (tar, tar.gz, tar.zst, ...) for `init --tarball` and
// `import`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/progress.h"
#include "common/result.h"
#include "snap/scan.h"

namespace agentenv::archive {

// What to do with a device node when the process cannot create one.
enum class UnprivilegedDevices {
  kSkip,    // leave it out and warn (a rootfs for a rootless environment)
  kRefuse,  // refuse the archive (recording it would silently lose the node)
};

// Extracts the archive at `archive` into the existing empty directory
// `dest`, keeping modes, numeric owners (given as root, else kept in
// snap::kOwnerXattr; names are looked up only where the archive has no
// id), ns mtimes, xattrs, POSIX ACLs (as SCHILY.acl.* records or
// system.posix_acl_* xattrs; one the filesystem refuses is a warning),
// hardlinks and symlinks. `dest` itself takes the mode, owner and mtime of
// the archive's root entry ("./", "." or "/"; kInvalid when it is not a
// directory), or without one mode 0755 and the newest mtime of the
// entries (the owner stays the caller); a directory the archive leaves
// implicit takes mode 0755, the root's owner and the newest mtime of the
// entries below it. As GNU tar and bsdtar do, with one warning each: a
// leading '/' is removed from names and hardlink targets, and a name
// given twice (tar -r) is the last entry's. Refuses (kInvalid,
// "<archive>: entry '<name>' ...; refusing the archive") names with a
// ".." component, hardlinks that point outside the archive, any entry that
// would be written through a symlink, a non-directory that would replace a
// directory that is not empty, and sparse entries whose holes add up to
// more than 1 GiB (a hole costs the archive nothing, recording it costs a
// read and a hash of every byte). Device nodes that cannot be made without
// privilege are handled as `devices` says (skips are reported via `warn`).
// `ignored` (may be empty): the repository's ignore rules; the entries
// they will leave out of the node are counted in one warning. Errors
// writing `dest` are kIo. On error `dest` may hold a partial tree: the
// caller removes it. `progress` (may be null) counts entries and bytes
// unpacked. Changes the process's current directory while it runs: not
// to be run beside anything that uses it.
Result<void> ExtractTarball(const std::string& archive, const std::string& dest,
                            const std::function<void(const std::string&)>& warn,
                            UnprivilegedDevices devices = UnprivilegedDevices::kSkip,
                            Progress* progress = nullptr, const snap::PathFilter& ignored = {});

// Applies one image layer (tar, plain or compressed) onto `dest`, which
// holds the layers below it: the same refusals as ExtractTarball within
// the layer, but an entry replaces what lower layers left at its path
// (unless both are directories), ".wh.NAME" removes NAME and
// ".wh..wh..opq" empties its directory of the lower layers' entries. No
// removal goes through a symlink or below a non-directory, and a whiteout
// is a file: one that is a directory, or an entry below a whiteout's name,
// is refused (kInvalid).
Result<void> ApplyLayer(const std::string& layer, const std::string& dest,
                        const std::function<void(const std::string&)>& warn,
                        UnprivilegedDevices devices = UnprivilegedDevices::kSkip);
// The same, reading the layer from the open file `fd` (from its current
// offset; `layer` names it). `sparse_holes` carries the holes of sparse
// entries from layer to layer: the layers of one image share the limit
// of one archive.
Result<void> ApplyLayer(int fd, const std::string& layer, const std::string& dest,
                        const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                        uint64_t* sparse_holes);

}  // namespace agentenv::archive
