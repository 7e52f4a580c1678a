// Paths of an unpack (archive/tarball.cc): which names an archive may
// use, and the removals a layer (or an entry that replaces an earlier one)
// makes, never through a symlink. All paths are relative to the current
// directory, the tree being unpacked.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <unordered_map>

#include "common/result.h"
#include "common/unique_fd.h"

namespace agentenv::archive {

// Whether `p` is relative and has no ".." component.
bool SafeRelative(std::string_view p);

// libarchive's secure-extraction checks work on relative paths from the
// current directory, so extraction runs inside `dest` and returns after.
// Not thread-safe: the current directory is the process's.
class WorkingDirectory {
 public:
  // Errors: "<dir>: <errno text>".
  static Result<WorkingDirectory> Enter(const std::string& dir);
  WorkingDirectory(WorkingDirectory&&) = default;
  ~WorkingDirectory();

 private:
  WorkingDirectory() = default;
  UniqueFd old_;
};

// Whether `name` exists, after checking that no directory above it is a
// symlink or not a directory. Errors: kInvalid "<archive>: entry '<name>'
// lies below '<dir>', which is not a directory; refusing the layer"; I/O.
Result<bool> ExistsBelowDirs(const std::string& archive, const std::string& name);

// Removes `name` and what is below it (a symlink itself, never its
// target). Errors: I/O.
Result<void> RemoveAll(const std::string& name);

// Whether `name`'s last component starts with ".wh." (an OCI whiteout).
bool IsWhiteout(const std::string& name);

// Applies the OCI whiteout `name` of a layer: ".wh.NAME" removes NAME from
// the layers below; ".wh..wh..opq" empties its directory of what the
// layers below put there (the entries of this layer, in `seen`, stay).
// Errors: kInvalid for a whiteout that names no entry or lies below a
// non-directory; I/O.
Result<void> ApplyWhiteout(const std::string& archive, const std::string& name,
                           const std::unordered_map<std::string, mode_t>& seen);

// Refuses (kInvalid) an entry below a whiteout's name, and a directory
// named as a whiteout: no tool agrees on what such a layer means.
Result<void> CheckWhiteoutName(const std::string& archive, const std::string& name, mode_t type);

}  // namespace agentenv::archive
