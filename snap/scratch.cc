#include "snap/scratch.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "common/random.h"
#include "snap/fsops.h"

namespace agentenv::snap {
namespace {

// Opens a directory to lock it. One whose mode denies us reading (a tree
// being removed may have been made 0000) is opened up first: only
// directories that are scratch or about to be removed come here.
UniqueFd OpenToLock(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd && errno == EACCES && ::chmod(path.c_str(), 0700) == 0)
    fd.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  return fd;
}

// The six characters after a `.rm-<name>-` (IsRetiredName counts them).
Result<std::string> RetiredSuffix() { return RandomHex(3); }

// rename(2) that never replaces `to`: EEXIST when it exists.
int RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  // A filesystem without RENAME_NOREPLACE: a directory renamed onto an
  // existing one fails unless that one is empty, which ours never are.
  struct stat st;
  if (::lstat(to.c_str(), &st) == 0) {
    errno = EEXIST;
    return -1;
  }
  return ::rename(from.c_str(), to.c_str());
}

thread_local uint64_t disk_bytes_sum;

}  // namespace

bool StillAt(int fd, const std::string& path) {
  struct stat a, b;
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

Result<ScratchDir> ScratchDir::Make(const std::string& parent, const std::string& prefix) {
  std::error_code ec;
  std::string abs = std::filesystem::absolute(parent, ec).string();  // a daemon has another cwd
  if (ec) abs = parent;
  // The next maker of a kind reclaims what killed ones of its kind left.
  (void)ReclaimLeftovers(abs, {prefix + "-", ".rm-"}, true);
  for (int attempt = 0;; ++attempt) {
    ScratchDir d;
    d.path_ = abs + "/" + prefix + "-XXXXXX";
    if (!::mkdtemp(d.path_.data())) {
      int e = errno;
      d.path_.clear();
      return FailErrno(abs + ": making a scratch directory", e);
    }
    d.lock_.reset(::open(d.path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (d.lock_ && ::flock(d.lock_.get(), LOCK_EX) == 0 && StillAt(d.lock_.get(), d.path_)) return d;
    // A reclaimer took it for abandoned between mkdtemp and the lock.
    int e = errno;
    d.lock_.reset();
    d.path_.clear();
    if (attempt == 8) return FailErrno(abs + ": making a scratch directory", e ? e : EAGAIN);
  }
}

ScratchDir::ScratchDir(ScratchDir&& o) noexcept : path_(std::move(o.path_)), lock_(std::move(o.lock_)) {
  o.path_.clear();
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  // Renamed out of the way before the delete, like every removal, so that
  // a kill halfway leaves a `.rm-` name, never a half-deleted scratch.
  std::string gone = path_;
  std::string parent = std::filesystem::path(path_).parent_path().string();
  std::string name = std::filesystem::path(path_).filename().string();
  if (auto suffix = RetiredSuffix()) {
    std::string target = parent + "/.rm-" + name + "-" + *suffix;
    if (RenameNoReplace(path_, target) == 0) gone = target;
  }
  (void)RemoveTree(gone);
}

Result<void> ScratchDir::MoveTo(const std::string& target) {
  if (RenameNoReplace(path_, target) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY) return Fail(ErrorCode::kExists, target + ": exists");
    return FailErrno(target, errno);
  }
  path_.clear();
  lock_.reset();
  return {};
}

Result<DirLock> DirLock::TryExclusive(const std::string& path) {
  DirLock l;
  l.path_ = path;
  l.fd_ = OpenToLock(path);
  if (!l.fd_) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return Fail(ErrorCode::kNotFound, path + ": gone");
    return FailErrno(path, errno);
  }
  if (::flock(l.fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return Fail(ErrorCode::kBusy, path + ": in use by another command");
    return FailErrno(path, errno);
  }
  if (!StillAt(l.fd_.get(), path)) return Fail(ErrorCode::kNotFound, path + ": gone");
  return l;
}

bool IsRetiredName(std::string_view entry, std::string_view name) {
  constexpr std::string_view kRm = ".rm-";
  if (entry.size() != kRm.size() + name.size() + 7) return false;
  if (entry.substr(0, kRm.size()) != kRm || entry.substr(kRm.size(), name.size()) != name) return false;
  return entry[kRm.size() + name.size()] == '-';
}

Result<DirLock> RenameAside(DirLock lock) {
  std::filesystem::path p(lock.path());
  std::string parent = p.parent_path().string(), name = p.filename().string();
  if (name.rfind(".rm-", 0) == 0) return lock;
  for (int attempt = 0;; ++attempt) {
    AE_ASSIGN(std::string suffix, RetiredSuffix());
    std::string target = parent + "/.rm-" + name.substr(0, 200) + "-" + suffix;
    if (RenameNoReplace(lock.path(), target) == 0) {
      lock.path_ = target;
      return lock;
    }
    if (errno != EEXIST || attempt == 8) return FailErrno(lock.path(), errno);
  }
}

Result<void> Retire(DirLock lock) {
  AE_ASSIGN(DirLock aside, RenameAside(std::move(lock)));
  return RemoveTree(aside.path());  // the lock is held until this returns
}

Leftovers ReclaimLeftovers(const std::string& parent, const std::vector<std::string_view>& prefixes, bool remove) {
  Leftovers out;
  std::vector<std::string> names;
  if (DIR* d = ::opendir(parent.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string_view n = e->d_name;
      for (std::string_view p : prefixes)
        if (n.size() > p.size() && n.substr(0, p.size()) == p) names.emplace_back(n);
    }
    ::closedir(d);
  }
  for (const std::string& n : names) {
    std::string path = parent + "/" + n;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    auto lock = DirLock::TryExclusive(path);
    if (!lock) continue;  // held: its owner lives; gone: someone else took it
    Leftovers::Entry e{path, DiskBytes(path)};
    out.bytes += e.bytes;
    if (remove) {
      if (auto r = Retire(std::move(*lock)); !r) out.errors.push_back(r.error());
    }
    out.entries.push_back(std::move(e));
  }
  return out;
}

uint64_t DiskBytes(const std::string& path) {
  disk_bytes_sum = 0;
  ::nftw(path.c_str(), [](const char*, const struct stat* st, int, FTW*) {
    disk_bytes_sum += uint64_t(st->st_blocks) * 512;
    return 0;
  }, 32, FTW_PHYS);
  return disk_bytes_sum;
}

}  // namespace agentenv::snap
