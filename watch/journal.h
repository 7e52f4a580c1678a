// Journal: a recursive inotify watch on one directory tree that turns
// kernel events into a ChangeSet of tree-relative paths.
//
// Every directory that the IgnoreRules keep gets one watch. New or moved-in
// directories get watches and are scanned right away (entries created
// before their watch existed would otherwise be missed for good) and are
// reported as Scope::kSubtree. Renames inside the tree re-key the watched
// subtree, moves out of the tree drop its watches. A queue overflow re-walks
// the whole tree and reports rescan_all. When the per-user watch limit is
// hit (ENOSPC) the journal keeps going with the watches it has, sets
// degraded() and warns once: the caller must then also scan periodically.
//
// Not thread-safe: one thread reads it (see Watcher in debounce.h).
#pragma once

#include <sys/inotify.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "watch/change_set.h"
#include "watch/ignore.h"

namespace agentenv::watch {

struct JournalOptions {
  IgnoreRules ignore = IgnoreRules::Defaults();
  // Problems that do not stop the journal: watch limit reached (once),
  // directories that cannot be opened or watched. Called on the reading
  // thread; must not call back into the journal.
  std::function<void(const std::string&)> on_warning;
};

class Journal {
 public:
  // Opens `root` (following symlinks in `root` itself) and watches every
  // kept directory below it; nothing is reported for what exists now, so
  // open the journal before reading the baseline snapshot. Errors: root
  // cannot be opened or is not a directory; inotify_init fails (EMFILE:
  // per-user instance limit). Running out of watches is not an error.
  static Result<Journal> Open(std::string root, JournalOptions options = {});

  Journal(Journal&&) = default;
  Journal& operator=(Journal&&) = default;
  ~Journal();

  // The inotify descriptor (non-blocking): readable when events are queued.
  // For poll/epoll only; do not read from it.
  int fd() const { return inotify_.get(); }

  // Reads every queued event without blocking and adds the resulting paths
  // to `into`; returns how many events were read. May wait up to ~10 ms
  // when a directory rename's second half has not been queued yet. Errors:
  // read() on the inotify descriptor failed (not EAGAIN).
  Result<size_t> Read(ChangeSet& into);

  // The watch limit was hit at least once: some directories are unwatched.
  bool degraded() const { return degraded_; }
  size_t watch_count() const { return wd_path_.size(); }
  const std::string& root() const { return root_path_; }

 private:
  struct PendingMove {  // a directory's IN_MOVED_FROM awaiting its IN_MOVED_TO
    std::string old_path;
    std::vector<std::pair<std::string, int>> watches;  // (path, wd) detached
  };

  Journal() = default;
  void Warn(const std::string& message);
  void HandleEvent(const ::inotify_event& ev, ChangeSet& out);
  // Watches directory `rel` (opened as `dir`) and, recursively, its kept
  // subdirectories. Holds one descriptor per level of depth.
  void WatchTree(UniqueFd dir, const std::string& rel);
  // Opens `rel` below the root without following any symlink, then WatchTree.
  void WatchNewDir(const std::string& rel);
  void Track(int wd, const std::string& rel);
  void Untrack(int wd);
  // Removes and returns the watches of `rel` and everything below it.
  std::vector<std::pair<std::string, int>> DetachSubtree(const std::string& rel);
  void ResolvePendingMoves();
  // inotify_rm_watch for detached watches not re-tracked since.
  void DropWatches(const std::vector<std::pair<std::string, int>>& watches);
  void Rewalk();

  std::string root_path_;
  UniqueFd root_fd_;
  UniqueFd inotify_;
  JournalOptions options_;
  bool degraded_ = false;
  bool overflowed_ = false;  // IN_Q_OVERFLOW seen: re-walk after this read
  bool use_proc_fd_ = true;  // add watches via /proc/self/fd/N (no path length limit)
  std::unordered_map<int, std::string> wd_path_;
  std::map<std::string, int> path_wd_;  // ordered: a subtree is one key range
  std::unordered_map<uint32_t, PendingMove> pending_moves_;  // by cookie
  std::unique_ptr<char[]> buffer_;
};

}  // namespace agentenv::watch
