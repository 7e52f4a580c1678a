// Scratch directories beside the live tree (import, push, pull) that a
// killed process cannot leak: each holds a flocked `lock` file while in use,
// and the next Make of any kind removes the ones whose lock nobody holds.
#pragma once

#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace agentenv::control {

class ScratchDir {
 public:
  // Makes `parent`/`prefix`-XXXXXX with a held lock, after removing stale
  // scratch directories of every prefix in `parent` (RemoveStaleScratch).
  // Errors: the directory or its lock cannot be made (kIo, path first).
  // The directory and its contents (read-only directories included) are
  // removed when the object dies.
  static Result<ScratchDir> Make(const std::string& parent, const std::string& prefix);
  ScratchDir(ScratchDir&& o) noexcept;
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir();
  const std::string& path() const { return path_; }  // absolute

 private:
  ScratchDir() = default;
  std::string path_;
  UniqueFd lock_;
};

// Removes the scratch directories in `parent` (names `<prefix>-XXXXXX` of
// the prefixes above) whose `lock` is not held: their process died. One
// without a lock file is left alone: it may be a moment old. Best effort;
// returns how many were removed. Thread-safe.
int RemoveStaleScratch(const std::string& parent);

}  // namespace agentenv::control
