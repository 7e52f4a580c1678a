// snap/scratch: directories that exist only while a process works on them
// (a lower being built, a workspace being made or removed, an archive being
// unpacked), and the reclaiming of what a killed process left.
//
// The rule, one for every kind: such a directory is flocked (LOCK_EX, on the
// directory itself, not on a file inside it) by the process that made it,
// from the moment it can be seen until it is renamed into place or removed.
// The kernel drops the lock when that process dies, however it dies, so
// "its lock is free" means "abandoned"; there is no lock file that a kill
// between mkdir and open could leave missing. Removal renames first (to
// `.rm-<name>-XXXXXX`, out of the names anyone looks up), then deletes,
// holding the lock; a killed removal leaves a `.rm-` directory whose lock
// is free, which the next reclaimer deletes.
//
// Owner of each kind and who reclaims it: docs/design.md, "Shared state".
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace agentenv::snap {

// A directory `parent`/`prefix`-XXXXXX, locked by this object; removed (with
// everything below it, read-only directories included) when the object
// dies, unless it was moved into place.
class ScratchDir {
 public:
  // Makes and locks it (mode 0700), after reclaiming the abandoned
  // `prefix`-* and `.rm-*` entries of `parent` (ReclaimLeftovers). A
  // reclaimer that removed it in the moment between mkdir and the lock is
  // detected and another is made.
  // Errors: kIo, path first.
  static Result<ScratchDir> Make(const std::string& parent, const std::string& prefix);
  ScratchDir(ScratchDir&& o) noexcept;
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir();

  const std::string& path() const { return path_; }  // absolute
  int fd() const { return lock_.get(); }             // the locked directory
  // Renames the directory to `target` (which must not exist: kExists), and
  // gives up removing it; the lock is released. Errors: kExists, I/O.
  Result<void> MoveTo(const std::string& target);

 private:
  ScratchDir() = default;
  std::string path_;
  UniqueFd lock_;
};

// An exclusive lock on a directory that is still at its path.
class DirLock {
 public:
  // Locks `path` (LOCK_EX without waiting) and checks that the path still
  // names the directory locked. Errors: kBusy (another process holds a
  // lock on it), kNotFound (gone, or replaced meanwhile), I/O.
  static Result<DirLock> TryExclusive(const std::string& path);
  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }

 private:
  friend Result<DirLock> RenameAside(DirLock lock);
  std::string path_;
  UniqueFd fd_;
};

// Renames the locked directory out of the way (`.rm-<name>-XXXXXX` in the
// same parent) and deletes it, holding the lock to the end. A crash leaves
// only the `.rm-` name. Errors: I/O (the rename; a failed delete leaves the
// `.rm-` directory for the next reclaimer and is reported).
Result<void> Retire(DirLock lock);
// Retire's first half: the rename, which is all that others see; the lock
// (now on the `.rm-` name) goes back to the caller, whose Retire of it
// deletes. Removing many: rename them all, then delete, so no name stays
// locked while others are deleted. Errors: I/O.
Result<DirLock> RenameAside(DirLock lock);

// The `.rm-` names that Retire gave directories once called `name`.
bool IsRetiredName(std::string_view entry, std::string_view name);

// What ReclaimLeftovers found (or removed): each abandoned directory.
struct Leftovers {
  struct Entry {
    std::string path;
    uint64_t bytes = 0;  // disk blocks in use below it
  };
  std::vector<Entry> entries;
  uint64_t bytes = 0;
  std::vector<Error> errors;  // removals that failed
};

// Entries of `parent` whose names start with one of `prefixes` (every
// scratch name has a fixed prefix) and whose lock is free: their maker or
// remover died. With `remove`, each is retired (renamed, deleted);
// without, only measured (status). Entries another process holds are left
// alone. Never fails: what it cannot do is in `errors`. Thread-safe.
Leftovers ReclaimLeftovers(const std::string& parent, const std::vector<std::string_view>& prefixes, bool remove);

// Whether `path` still names the directory open as `fd` (same device and
// inode): a lock taken on an fd protects a name only while this holds.
bool StillAt(int fd, const std::string& path);

// Disk bytes of the blocks below `path` (not following symlinks).
uint64_t DiskBytes(const std::string& path);

}  // namespace agentenv::snap
