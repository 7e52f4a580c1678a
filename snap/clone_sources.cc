#include "snap/clone_sources.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "snap/fsops.h"
#include "snap/lowers.h"
#include "snap/scan.h"

namespace agentenv::snap {

std::shared_ptr<CloneSources> CloneSources::Open(const store::Store& s, const std::string& lowers_dir,
                                                 const std::optional<store::ObjectId>& except,
                                                 const std::string& live_dir, const MetaDb* meta,
                                                 uint64_t live_stat_dev) {
  std::shared_ptr<CloneSources> out(new CloneSources(s));
  if (!live_dir.empty() && meta) {
    auto reader = meta->ReadStats();
    out->live_.reset(::open(live_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    out->live_stat_dev_ = live_stat_dev;
    if (reader && out->live_) out->stats_ = std::move(*reader);
  }
  DIR* d = ::opendir(lowers_dir.c_str());
  if (!d) return out;
  while (dirent* de = ::readdir(d)) {
    auto id = store::ObjectId::FromHex(de->d_name);
    if (!id || (except && *id == *except)) continue;
    UniqueFd fd(::openat(::dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    // Only a ready lower serves, leased (LOCK_SH) for as long as this set
    // lives, so gc cannot remove it under a clone or a link; one that is
    // being removed (gc holds LOCK_EX) or is not marked is skipped.
    if (fd && ::flock(fd.get(), LOCK_SH | LOCK_NB) == 0 && IsMarkedLower(fd.get(), de->d_name))
      out->lowers_.push_back({*id, std::move(fd)});
  }
  ::closedir(d);
  // The same order every time: which lower serves a file must not vary.
  std::sort(out->lowers_.begin(), out->lowers_.end(),
            [](const Lower& a, const Lower& b) { return a.tree < b.tree; });
  return out;
}

std::shared_ptr<CloneSources> CloneSources::OpenScanned(const store::Store& s, const std::string& dir,
                                                        int64_t scanned_from_ns) {
  std::shared_ptr<CloneSources> out(new CloneSources(s));
  // A ctime inside the clock's coarse tick before the scan may belong to
  // a change the scan did not see.
  out->scanned_before_ns_ = scanned_from_ns - kRacyWindowNs;
  UniqueFd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st;
  bool unchanged = root && ::fstat(root.get(), &st) == 0 && ToNs(st.st_ctim) < out->scanned_before_ns_;
  out->scanned_dirs_.emplace("", unchanged ? std::make_shared<const UniqueFd>(std::move(root)) : nullptr);
  return out;
}

std::optional<Entry> CloneSources::FileAt(const Lower& l, const std::string& rel) const {
  std::vector<std::string> parts = SplitPath(rel);
  if (parts.empty()) return std::nullopt;
  store::ObjectId tree = l.tree;
  std::string dir;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::shared_ptr<const Tree> t;
    {
      std::lock_guard lock(mu_);
      auto it = dirs_.find({l.tree, dir});
      if (it != dirs_.end()) t = it->second;
    }
    if (!t) {
      auto loaded = LoadTree(s_, tree);
      if (!loaded) return std::nullopt;
      t = std::make_shared<const Tree>(std::move(*loaded));
      std::lock_guard lock(mu_);
      dirs_.emplace(std::make_pair(l.tree, dir), t);
    }
    auto e = std::lower_bound(t->begin(), t->end(), parts[i],
                              [](const Entry& x, const std::string& name) { return x.name < name; });
    if (e == t->end() || e->name != parts[i]) return std::nullopt;
    if (i + 1 == parts.size()) return e->kind == Kind::kFile ? std::optional<Entry>(*e) : std::nullopt;
    if (e->kind != Kind::kDir) return std::nullopt;
    tree = e->id;
    dir = Join(dir, parts[i]);
  }
  return std::nullopt;
}

UniqueFd CloneSources::OpenIn(int dirfd, const std::string& rel, int mode) {
  open_how how{};
  how.flags = uint64_t(mode | O_NOFOLLOW | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return UniqueFd(int(::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how)));
}

bool CloneSources::CloneTo(const std::string& rel, const Entry& e, int fd) const {
  for (const Lower& l : lowers_) {
    auto have = FileAt(l, rel);
    if (!have || have->id != e.id) continue;
    UniqueFd src = OpenIn(l.fd.get(), rel);
    if (!src) continue;  // e.g. a 0000 file, unprivileged
    if (::ioctl(fd, FICLONE, src.get()) == 0) return true;
    return false;  // no reflinks here: no other source will do better
  }
  return FromLive(rel, e, fd, false) || FromScanned(rel, e, fd, false);
}

bool CloneSources::CopyTo(const std::string& rel, const Entry& e, int fd) const {
  return FromLive(rel, e, fd, true) || FromScanned(rel, e, fd, true);
}

bool CloneSources::Transfer(int src, const struct stat& st, int fd, bool copy, const std::function<bool()>& unchanged,
                            Refusals* refused) {
  // Refused for every file of a source alike: not supported, or another filesystem.
  auto for_all = [](int e) { return e == EXDEV || e == EOPNOTSUPP || e == ENOTTY; };
  bool done = false;
  bool wrote = false;
  if (!copy) {
    done = wrote = ::ioctl(fd, FICLONE, src) == 0;
    if (!done && for_all(errno)) refused->clone = true;
  } else {
    // An in-kernel copy; not of a sparse file, which it would make dense.
    if (uint64_t(st.st_blocks) * 512 < uint64_t(st.st_size)) return false;
    off_t in = 0, out = 0;
    done = true;
    // Across filesystems copy_file_range says EXDEV: sendfile copies anyway.
    bool splice = refused->copy_range.load(std::memory_order_relaxed);
    while (done && in < st.st_size) {
      size_t want = size_t(st.st_size - in);
      ssize_t n = splice ? ::sendfile(fd, src, &in, want) : ::copy_file_range(src, &in, fd, &out, want, 0);
      if (n < 0 && !splice && in == 0 && (for_all(errno) || errno == EINVAL)) {
        if (for_all(errno)) refused->copy_range = true;
        splice = true;
        continue;
      }
      done = n > 0;
      wrote = wrote || n > 0;
    }
  }
  if (done && unchanged()) return true;
  if (wrote) (void)!::ftruncate(fd, 0);
  return false;
}

std::shared_ptr<const UniqueFd> CloneSources::ScannedDir(const std::string& dir) const {
  {
    std::lock_guard lock(mu_);
    auto it = scanned_dirs_.find(dir);
    if (it != scanned_dirs_.end()) return it->second;
    if (dir.empty()) return nullptr;  // not a scanned source
  }
  size_t slash = dir.rfind('/');
  std::shared_ptr<const UniqueFd> parent = ScannedDir(slash == std::string::npos ? "" : dir.substr(0, slash));
  std::shared_ptr<const UniqueFd> out;
  if (parent) {
    std::string name = slash == std::string::npos ? dir : dir.substr(slash + 1);
    UniqueFd fd(::openat(parent->get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (fd && ::fstat(fd.get(), &st) == 0 && ToNs(st.st_ctim) < scanned_before_ns_)
      out = std::make_shared<const UniqueFd>(std::move(fd));
  }
  std::lock_guard lock(mu_);
  if (scanned_dirs_.size() >= kMaxScannedDirs) {
    auto root = scanned_dirs_.extract("");
    scanned_dirs_.clear();
    scanned_dirs_.insert(std::move(root));
  }
  scanned_dirs_.emplace(dir, out);
  return out;
}

bool CloneSources::MayServe(const std::string& dir) const {
  return scanned_before_ns_ == 0 || ScannedDir(dir) != nullptr;
}

bool CloneSources::FromScanned(const std::string& rel, const Entry& e, int fd, bool copy) const {
  if (!copy && scanned_refused_.clone.load(std::memory_order_relaxed)) return false;
  size_t slash = rel.rfind('/');
  std::shared_ptr<const UniqueFd> dir = ScannedDir(slash == std::string::npos ? "" : rel.substr(0, slash));
  if (!dir) return false;
  std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  UniqueFd src(::openat(dir->get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  struct stat before;
  auto same = [&](const struct stat& st) {
    return S_ISREG(st.st_mode) && uint64_t(st.st_size) == e.size && ToNs(st.st_mtim) == e.meta.mtime_ns &&
           ToNs(st.st_ctim) < scanned_before_ns_;
  };
  if (!src || ::fstat(src.get(), &before) != 0 || !same(before)) return false;
  return Transfer(src.get(), before, fd, copy, [&] {
    struct stat st;
    return ::fstat(src.get(), &st) == 0 && same(st) && ToNs(st.st_ctim) == ToNs(before.st_ctim);
  }, &scanned_refused_);
}

bool CloneSources::FromLive(const std::string& rel, const Entry& e, int fd, bool copy) const {
  if (!stats_) return false;
  std::optional<StatEntry> cached;
  {
    std::lock_guard lock(mu_);
    cached = stats_->Get(rel);
  }
  if (!cached || cached->ref.id != e.id) return false;
  if (!copy && live_refused_.clone.load(std::memory_order_relaxed)) return false;
  UniqueFd src = OpenIn(live_.get(), rel);
  auto matches = [&](const struct stat& st) { return cached->Matches(StatFields::Of(st, live_stat_dev_)); };
  // Cached and unchanged before and after: the clone or copy holds that
  // content (a write meanwhile would have moved ctime).
  struct stat before;
  if (!src || ::fstat(src.get(), &before) != 0 || !matches(before)) return false;
  return Transfer(src.get(), before, fd, copy, [&] {
    struct stat st;
    return ::fstat(src.get(), &st) == 0 && matches(st);
  }, &live_refused_);
}

bool CloneSources::LinkTo(const std::string& rel, const Entry& e, int dirfd, const std::string& name) const {
  for (const Lower& l : lowers_) {
    auto have = FileAt(l, rel);
    if (!have || have->id != e.id || !(have->meta == e.meta)) continue;
    // Linked by fd (AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the
    // /proc/self/fd form does not) so that no path is followed; O_PATH
    // opens even a 0000 file.
    UniqueFd src = OpenIn(l.fd.get(), rel, O_PATH);
    if (!src) continue;
    std::string proc = "/proc/self/fd/" + std::to_string(src.get());
    if (::linkat(AT_FDCWD, proc.c_str(), dirfd, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return true;
  }
  return false;
}

}  // namespace agentenv::snap
