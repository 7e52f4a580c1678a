#include "watch/journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace agentenv::watch {
namespace {

constexpr uint32_t kDirMask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB |
                              IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |
                              IN_EXCL_UNLINK | IN_ONLYDIR;
// Room for many events per read(); each is 16 bytes plus its padded name.
constexpr size_t kBufferSize = 256 * 1024;
// How long a directory's IN_MOVED_FROM may wait for its IN_MOVED_TO. Both
// are queued inside one rename(2), so only a read racing that call sees a
// lone half; anything still unpaired after this left the tree.
constexpr int kMovePairWaitMs = 10;

std::string Join(const std::string& dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  std::string r;
  r.reserve(dir.size() + 1 + name.size());
  r += dir;
  r += '/';
  r += name;
  return r;
}

// "" for the root, else "/" + rel: for messages only.
std::string Shown(const std::string& root, const std::string& rel) {
  return rel.empty() ? root : root + "/" + rel;
}

// Benign races: the directory vanished or was swapped for a file or symlink
// before we got to it. The event that did it reaches us on its own.
bool Vanished(int err) { return err == ENOENT || err == ENOTDIR || err == ELOOP; }

struct DirCloser {
  void operator()(DIR* d) const { closedir(d); }
};

}  // namespace

Journal::~Journal() = default;

Result<Journal> Journal::Open(std::string root, JournalOptions options) {
  Journal j;
  j.root_path_ = std::move(root);
  j.options_ = std::move(options);
  j.root_fd_.reset(::open(j.root_path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!j.root_fd_) return FailErrno(j.root_path_, errno);
  j.inotify_.reset(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!j.inotify_) return FailErrno(j.root_path_ + ": inotify_init1", errno);
  // Without /proc, fall back to path names (bounded by PATH_MAX).
  j.use_proc_fd_ = ::access("/proc/self/fd", X_OK) == 0;
  j.buffer_ = std::make_unique<char[]>(kBufferSize);
  UniqueFd dir(::openat(j.root_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return FailErrno(j.root_path_, errno);
  j.WatchTree(std::move(dir), "");
  return j;
}

void Journal::Warn(const std::string& message) {
  if (options_.on_warning) options_.on_warning(message);
}

void Journal::Track(int wd, const std::string& rel) {
  auto [it, inserted] = wd_path_.try_emplace(wd, rel);
  if (!inserted && it->second != rel) {
    // Same inode seen under a new name: a rename we learn about by scanning.
    auto old = path_wd_.find(it->second);
    if (old != path_wd_.end() && old->second == wd) path_wd_.erase(old);
    it->second = rel;
  }
  path_wd_[rel] = wd;
}

void Journal::Untrack(int wd) {
  auto it = wd_path_.find(wd);
  if (it == wd_path_.end()) return;
  auto p = path_wd_.find(it->second);
  if (p != path_wd_.end() && p->second == wd) path_wd_.erase(p);
  wd_path_.erase(it);
}

void Journal::WatchTree(UniqueFd dir, const std::string& rel) {
  // Watch first, then list: whatever appears after the listing is reported
  // by the watch, whatever appeared before it is covered by the caller's
  // kSubtree report of this directory.
  std::string target = use_proc_fd_ ? "/proc/self/fd/" + std::to_string(dir.get())
                                    : Shown(root_path_, rel);
  // IN_DONT_FOLLOW would watch the /proc magic link itself; the fd was
  // opened with O_NOFOLLOW, which gives the same protection.
  int wd = inotify_add_watch(inotify_.get(), target.c_str(),
                             kDirMask | (use_proc_fd_ ? 0 : IN_DONT_FOLLOW));
  if (wd >= 0) {
    Track(wd, rel);
  } else if (errno == ENOSPC) {
    if (!degraded_) {
      degraded_ = true;
      Warn(Shown(root_path_, rel) +
           ": inotify watch limit reached (fs.inotify.max_user_watches); directories beyond "
           "it are caught by periodic full scans");
    }
  } else if (!Vanished(errno)) {
    Warn(Shown(root_path_, rel) + ": inotify_add_watch: " + std::strerror(errno));
  }

  std::unique_ptr<DIR, DirCloser> d(::fdopendir(dir.get()));
  if (!d) return;
  dir.release();
  while (struct dirent* e = ::readdir(d.get())) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = ::fstatat(dirfd(d.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st.st_mode);
    }
    if (!is_dir) continue;
    std::string child = Join(rel, name);
    if (options_.ignore.Matches(child, true)) continue;
    UniqueFd c(::openat(dirfd(d.get()), e->d_name,
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!c) {
      if (!Vanished(errno)) Warn(Shown(root_path_, child) + ": " + std::strerror(errno));
      continue;
    }
    WatchTree(std::move(c), child);
  }
}

void Journal::WatchNewDir(const std::string& rel) {
  // One component at a time with O_NOFOLLOW: a symlink swapped in anywhere
  // along the path must not make us watch something outside the tree, and
  // this has no PATH_MAX limit.
  UniqueFd cur;
  size_t start = 0;
  while (start < rel.size()) {
    size_t slash = rel.find('/', start);
    if (slash == std::string::npos) slash = rel.size();
    std::string comp = rel.substr(start, slash - start);
    bool last = slash == rel.size();
    int at = cur ? cur.get() : root_fd_.get();
    UniqueFd next(::openat(at, comp.c_str(),
                           (last ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      if (!Vanished(errno)) Warn(Shown(root_path_, rel) + ": " + std::strerror(errno));
      return;
    }
    cur = std::move(next);
    start = slash + 1;
  }
  if (cur) WatchTree(std::move(cur), rel);
}

std::vector<std::pair<std::string, int>> Journal::DetachSubtree(const std::string& rel) {
  std::vector<std::pair<std::string, int>> out;
  auto exact = path_wd_.find(rel);
  if (exact != path_wd_.end()) {
    out.emplace_back(exact->first, exact->second);
    path_wd_.erase(exact);
  }
  // Keys "rel/..." form one range: '0' is the byte after '/'.
  auto first = path_wd_.lower_bound(rel + "/");
  auto last = path_wd_.lower_bound(rel + "0");
  for (auto it = first; it != last; ++it) out.emplace_back(it->first, it->second);
  path_wd_.erase(first, last);
  return out;
}

void Journal::ResolvePendingMoves() {
  // Unpaired: the directory left the tree. Its watches would keep reporting
  // from wherever it went, so drop them.
  for (auto& [cookie, move] : pending_moves_) DropWatches(move.watches);
  pending_moves_.clear();
}

void Journal::DropWatches(const std::vector<std::pair<std::string, int>>& watches) {
  for (auto& [path, wd] : watches) {
    // A scan may have found the directory again elsewhere in the tree
    // (moved into a directory we were not watching yet): keep those.
    auto it = wd_path_.find(wd);
    if (it == wd_path_.end() || it->second != path) continue;
    inotify_rm_watch(inotify_.get(), wd);
    wd_path_.erase(it);
  }
}

void Journal::Rewalk() {
  // The queue overflowed: creates, deletes and renames were lost, so the
  // map may be stale. Re-adding a watch on a watched inode returns its old
  // descriptor, so a fresh walk rebuilds the map; leftovers are gone dirs.
  std::unordered_map<int, std::string> old = std::move(wd_path_);
  wd_path_.clear();
  path_wd_.clear();
  pending_moves_.clear();
  UniqueFd dir(::openat(root_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) {
    Warn(root_path_ + ": " + std::strerror(errno));
    return;
  }
  WatchTree(std::move(dir), "");
  for (auto& [wd, path] : old)
    if (!wd_path_.count(wd)) inotify_rm_watch(inotify_.get(), wd);
}

void Journal::HandleEvent(const ::inotify_event& ev, ChangeSet& out) {
  if (ev.mask & IN_Q_OVERFLOW) {
    out.rescan_all = true;
    overflowed_ = true;
    return;
  }
  auto it = wd_path_.find(ev.wd);
  if (it == wd_path_.end()) return;  // a watch we already dropped
  const std::string dir = it->second;
  if (ev.mask & IN_IGNORED) {  // watch gone: directory deleted or unmounted
    Untrack(ev.wd);
    return;
  }
  if (ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
    // For other directories the parent's event says where they went.
    if (dir.empty()) {
      Warn(root_path_ + ": the watched tree root was " +
           ((ev.mask & IN_MOVE_SELF) ? "moved" : "deleted"));
      out.rescan_all = true;
    }
    return;
  }
  if (ev.len == 0) {  // about the watched directory itself (IN_ATTRIB)
    out.Add(dir, Scope::kEntry);
    return;
  }
  std::string rel = Join(dir, std::string_view(ev.name));
  bool is_dir = ev.mask & IN_ISDIR;
  if (options_.ignore.Matches(rel, is_dir)) {
    // A watched directory renamed to an ignored name leaves the journal.
    if ((ev.mask & IN_MOVED_TO) && is_dir) {
      auto p = pending_moves_.find(ev.cookie);
      if (p != pending_moves_.end()) {
        DropWatches(p->second.watches);
        pending_moves_.erase(p);
      }
    }
    return;
  }
  if (is_dir && (ev.mask & IN_MOVED_FROM)) {
    out.Add(rel, Scope::kEntry);
    pending_moves_[ev.cookie] = PendingMove{rel, DetachSubtree(rel)};
    return;
  }
  if (is_dir && (ev.mask & IN_MOVED_TO)) {
    auto p = pending_moves_.find(ev.cookie);
    if (p == pending_moves_.end()) {
      WatchNewDir(rel);  // moved in from outside the tree
    } else {
      const PendingMove& move = p->second;
      for (auto& [path, wd] : move.watches) Track(wd, rel + path.substr(move.old_path.size()));
      // Renamed before its creation was processed (the scan then found
      // nothing under the old name): it has no watch yet.
      bool watched = !move.watches.empty() && move.watches.front().first == move.old_path;
      pending_moves_.erase(p);
      if (!watched) WatchNewDir(rel);
    }
    out.Add(rel, Scope::kSubtree);
    return;
  }
  if (is_dir && (ev.mask & IN_CREATE)) {
    // Already watched when an ancestor's scan got here first.
    if (!path_wd_.count(rel)) WatchNewDir(rel);
    out.Add(rel, Scope::kSubtree);
    return;
  }
  if (is_dir && (ev.mask & IN_DELETE)) DetachSubtree(rel);
  out.Add(std::move(rel), Scope::kEntry);
}

Result<size_t> Journal::Read(ChangeSet& into) {
  size_t events = 0;
  bool waited = false;
  while (true) {
    ssize_t n = ::read(inotify_.get(), buffer_.get(), kBufferSize);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return FailErrno(root_path_ + ": read inotify events", errno);
      if (pending_moves_.empty() || waited) break;
      waited = true;
      struct pollfd pfd = {inotify_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, kMovePairWaitMs) > 0) continue;
      break;
    }
    for (char* p = buffer_.get(); p < buffer_.get() + n;) {
      auto* ev = reinterpret_cast<struct inotify_event*>(p);
      HandleEvent(*ev, into);
      ++events;
      p += sizeof(struct inotify_event) + ev->len;
    }
  }
  ResolvePendingMoves();
  if (overflowed_) {
    overflowed_ = false;
    Rewalk();
  }
  return events;
}

}  // namespace agentenv::watch
