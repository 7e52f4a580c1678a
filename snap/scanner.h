// snap/scanner.h: the walk's internals, shared by the full scan (scan.cc)
// and the scans of changed paths and overlay uppers (scan_paths.cc). Not
// part of snap's interface: scan.h is.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "snap/meta.h"
#include "snap/scan.h"
#include "snap/tree.h"

namespace agentenv::snap::scan_internal {

// An ignored directory is kept as a placeholder: the directory itself with
// its mode, owner and xattrs, but no contents and mtime 0 (its mtime moves
// with every file made inside, which is not a change of the tree). So a
// rootfs keeps /tmp (1777), /run and its mount points across restores and
// exports, while what is in them is never versioned.
void MakePlaceholder(Entry* e);
// Drops an overlay's own xattrs (user.overlay.*, trusted.overlay.*).
void StripOverlayXattrs(Xattrs* x);
// Whether xattrs mark an overlay directory opaque.
bool Opaque(const Xattrs& x);

// What the entry cache said of a directory, for its tree (walks with
// ScanContext::removals only).
struct DirCache {
  // The tree the cache recorded while the store's removals still read the
  // same: if the directory's tree comes out the same, it is stored.
  std::optional<store::ObjectId> hint;
  // The entry to record with the tree id once known: the one read from
  // disk (when not racy), or the cached one when it has no valid hint.
  std::optional<EntryStat> record;
};

struct ScanDir {
  std::string rel;
  DirCache cache;
  Tree entries;
  std::vector<std::pair<size_t, std::unique_ptr<ScanDir>>> subdirs;  // entry index, dir
  ScanDir* parent = nullptr;
  size_t index = 0;  // of this directory's entry in parent->entries
  // This directory's own listing plus its subdirectories not yet complete.
  std::atomic<size_t> pending{1};
  // A hardlinked file lies below: the tree waits for FixHardlinks.
  std::atomic<bool> deferred{false};
  std::optional<store::ObjectId> id;  // stored during the walk
};

// A directory for a walk's worker to list. Its fd is open already, or the
// worker opens it by name in its parent's fd, which the parent's pending
// subdirectories share: so the open fds of a walk are its parents still
// handing out subdirectories (about the depth per worker), not every
// directory queued (a directory of 3,000 subdirectories would pass the
// usual limit of 1,024 fds, and each growth of a threaded process's fd
// table waits for an RCU grace period).
struct WalkTask {
  ScanDir* dir = nullptr;
  UniqueFd fd;
  std::shared_ptr<const UniqueFd> parent;
};

// Component-wise path order: the order of a walk with sorted entries.
bool WalkOrder(const std::string& a, const std::string& b);

// State shared by the workers of one scan.
class Scanner {
 public:
  explicit Scanner(const ScanContext& ctx) : ctx_(ctx) {}

  // Fills in the entry for `name` (already lstat'ed) in `dirfd`, all but
  // e->name, which the caller sets. Regular files are looked up in the
  // stat cache or stored. A path that vanished meanwhile fails with
  // errno_value ENOENT. `dir`: for a directory the walk goes on into,
  // where its entry cache row goes (recorded with its tree by StoreDir)
  // instead of straight into out.entry_updates.
  Result<void> ReadEntry(int dirfd, const std::string& name, const std::string& rel,
                         const struct stat& st, const MetaDb::StatReader& cache, Entry* e,
                         DirCache* dir = nullptr);
  // Walks directory `fd` (tree-relative `rel`) and everything below it.
  Result<std::unique_ptr<ScanDir>> Walk(UniqueFd fd, const std::string& rel);
  // Turns all but the first path of each hardlink group into kHardlink
  // entries and returns (path, first path) pairs.
  std::vector<std::pair<std::string, std::string>> FixHardlinks();
  // Stores the trees of `d` bottom-up (those the walk has not stored
  // already); returns its tree id.
  Result<store::ObjectId> PutTrees(ScanDir& d);
  // Stores one tree and keeps its encoding in out.trees. A tree whose id is
  // `hint` (DirCache::hint) is known stored and not put.
  Result<store::ObjectId> PutTree(const Tree& t, const std::optional<store::ObjectId>& hint = std::nullopt);
  // The output, once the scan is over.
  ScanOutput Take() {
    out.read_entries = read_entries_.load();
    out.looked_up_trees = looked_up_trees_.load();
    return std::move(out);
  }

  ScanOutput out;
  Mutex mu;  // guards out, links_, prune_at_ while the walk runs
  // Entry cache entries one scan records at most (~100 bytes each).
  static constexpr size_t kMaxEntryUpdates = 65536;
  // out.trees is pruned of committed trees each time it grows by this many.
  static constexpr size_t kPruneEvery = 4096;
  size_t prune_at_ = kPruneEvery;

 private:
  // Lists `d` (open as `fd`) into d.entries and appends a task for each
  // subdirectory: with its fd when it had to be opened at once (see
  // DirAccess), else to be opened from `fd`.
  Result<void> ListDir(ScanDir& d, int fd, const MetaDb::StatReader& cache, std::vector<WalkTask>* subdirs);
  // Opens task.dir (not open yet) in `parent_fd`; nullopt when it was
  // deleted meanwhile: it is then recorded empty, and the deletion's own
  // change event brings the next snapshot up to date.
  Result<std::optional<UniqueFd>> OpenTask(const WalkTask& task, int parent_fd);
  // Called when `d` is listed and when each of its subdirectories is
  // complete: the last call stores d's tree (unless hardlinks defer it) and
  // completes its parent in turn. So trees are encoded and hashed by the
  // walk's workers, bottom-up, while other directories are still listed.
  Result<void> Done(ScanDir* d);
  // Stores d's tree (PutTree with its hint) and records its entry cache
  // row (DirCache::record) with the tree id.
  Result<store::ObjectId> StoreDir(ScanDir& d);
  // Appends to out.entry_updates, up to kMaxEntryUpdates. Takes mu.
  void RecordEntry(const std::string& rel, EntryStat e);

  // The stat fields a cache records for `st` (xattrs not read yet).
  StatFields FieldsOf(const struct stat& st) const { return StatFields::Of(st, ctx_.stat_dev); }

  const ScanContext& ctx_;
  std::atomic<uint64_t> read_entries_{0};  // out.read_entries, counted without mu
  std::atomic<uint64_t> looked_up_trees_{0};  // out.looked_up_trees, the same
  // Regular files with more than one link, by (dev, ino): where they are.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<std::pair<ScanDir*, size_t>>> links_;

 public:
  bool has_links() const { return !links_.empty(); }
  uid_t euid() const { return euid_; }

 private:
  // Read once per scan (a scan would otherwise ask once per directory),
  // not once per process: a forked child may have dropped privileges.
  const uid_t euid_ = ::geteuid();
};

// Unprivileged (`euid`, the scan's effective uid), reading our own file or
// directory whose mode denies us (e.g. 0000) needs a moment of owner
// access: chmod leaves mtime alone and the mode is put back on destruction.
class OwnerAccess {
 public:
  OwnerAccess(int dirfd, const std::string& name, const struct stat& st, uid_t euid) {
    mode_t need = S_ISDIR(st.st_mode) ? 0500 : S_ISREG(st.st_mode) ? 0400 : 0;
    if (need == 0 || (st.st_mode & need) == need || euid == 0 || st.st_uid != euid)
      return;
    if (::fchmodat(dirfd, name.c_str(), (st.st_mode & 07777) | need, AT_SYMLINK_NOFOLLOW) != 0) return;
    dirfd_ = dirfd;
    name_ = name;
    mode_ = st.st_mode & 07777;
  }
  ~OwnerAccess() {
    if (dirfd_ >= 0) ::fchmodat(dirfd_, name_.c_str(), mode_, AT_SYMLINK_NOFOLLOW);
  }
  OwnerAccess(const OwnerAccess&) = delete;
  OwnerAccess& operator=(const OwnerAccess&) = delete;

 private:
  int dirfd_ = -1;
  std::string name_;
  mode_t mode_ = 0;
};

// Lookups in our own directory that denies us search (e.g. 0000) work
// after granting the owner rwx on the open fd until destruction. Only
// then: the chmod moves the directory's ctime, and a directory just
// scanned (init --from) serves its files only while its ctime is older.
class DirAccess {
 public:
  DirAccess(int fd, uid_t euid) {
    struct stat st;
    if (euid == 0 || ::fstat(fd, &st) != 0 || st.st_uid != euid ||
        (st.st_mode & 0100) != 0 || ::fchmod(fd, (st.st_mode & 07777) | 0700) != 0)
      return;
    fd_ = fd;
    mode_ = st.st_mode & 07777;
  }
  ~DirAccess() {
    if (fd_ >= 0) ::fchmod(fd_, mode_);
  }
  // Whether lookups in the directory work only while this lives.
  bool granted() const { return fd_ >= 0; }
  DirAccess(const DirAccess&) = delete;
  DirAccess& operator=(const DirAccess&) = delete;

 private:
  int fd_ = -1;
  mode_t mode_ = 0;
};

// The names in directory `fd` (without . and ..), read with getdents64
// straight from the fd: no dup, no DIR stream. A restore's temp files are
// not part of any tree. `rewind`: the fd may have been read before (the
// caller's root fd, or a dup sharing its offset); a directory the scan
// opened itself is at offset 0 already, and a walk saves the syscall.
// The names are views into one buffer, each NUL-terminated: sorting moves
// 16-byte views, not strings (sorting strings was 8% of a walk's user time).
struct DirNames {
  std::string bytes;
  std::vector<std::string_view> names;
};
Result<void> ReadDirNames(int fd, const std::string& rel, DirNames* out, bool rewind);
// Sorts names in byte order (as std::sort of the views would).
void SortNames(std::vector<std::string_view>* names);

// OpenDirAt; our own directory that denies us is opened with OwnerAccess.
Result<UniqueFd> OpenScanDir(int fd, const std::string& name, const std::string& rel, uid_t euid);

// The root directory's metadata (fd open on it).
Result<Meta> RootMeta(int root_fd);

}  // namespace agentenv::snap::scan_internal
