#include "snap/fsops.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace agentenv::snap {
namespace {

// Path through /proc that names `name` in `dirfd` for the l*xattr calls,
// which have no *at() form; the last component is still not followed.
std::string ProcPath(int dirfd, const std::string& name) {
  return "/proc/self/fd/" + std::to_string(dirfd) + "/" + name;
}

bool NoXattrSupport(int e) { return e == ENOTSUP || e == EOPNOTSUPP; }

// The syscall number is the same on every architecture with the unified
// table; older headers do not name it.
#ifdef __NR_listxattrat
constexpr long kSysListxattrat = __NR_listxattrat;
#else
constexpr long kSysListxattrat = 465;
#endif

// chmod that never follows a symlink. glibc emulates AT_SYMLINK_NOFOLLOW
// with an O_PATH open, an fstat and a chmod through /proc (4 syscalls and a
// procfs lookup); Linux 6.6's fchmodat2 does it in one. Older kernels (and
// sandboxes that filter the call) fall back to the emulation.
int ChmodNoFollow(int dirfd, const char* name, mode_t mode) {
  static std::atomic<bool> no_fchmodat2{false};
  if (!no_fchmodat2.load(std::memory_order_relaxed)) {
    constexpr long kFchmodat2 = 452;
    if (::syscall(kFchmodat2, dirfd, name, mode, AT_SYMLINK_NOFOLLOW) == 0) return 0;
    if (errno != ENOSYS && errno != EPERM) return -1;
    if (errno == ENOSYS) no_fchmodat2.store(true, std::memory_order_relaxed);
  }
  return ::fchmodat(dirfd, name, mode, AT_SYMLINK_NOFOLLOW);
}

Result<void> RemoveContentsAt(int fd, const std::string& path) {
  UniqueFd dup(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!dup) return FailErrno(path, errno);
  DIR* d = ::fdopendir(dup.get());
  if (!d) return FailErrno(path, errno);
  (void)dup.release();
  std::vector<std::pair<std::string, bool>> names;
  while (dirent* de = ::readdir(d)) {
    std::string n = de->d_name;
    if (n != "." && n != "..") names.push_back({n, de->d_type == DT_DIR});
  }
  ::closedir(d);
  for (const auto& [name, is_dir] : names) {
    std::string sub = path + "/" + name;
    if (::unlinkat(fd, name.c_str(), 0) == 0 || errno == ENOENT) continue;
    if (errno != EISDIR && errno != EPERM) return FailErrno(sub, errno);
    ::fchmodat(fd, name.c_str(), 0700, 0);  // ours, but it may deny us
    UniqueFd child(::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!child) return FailErrno(sub, errno);
    AE_TRY(RemoveContentsAt(child.get(), sub));
    if (::unlinkat(fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return FailErrno(sub, errno);
  }
  return {};
}


}  // namespace

std::string Join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

Result<UniqueFd> OpenDirAt(int dirfd, const std::string& name, const std::string& rel) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return FailErrno(rel.empty() ? "." : rel, errno);
  return fd;
}

// listxattrat(2) (Linux 6.13): lists the xattrs of `name` in `dirfd`
// without building and resolving a /proc path. -1 with ENOSYS before 6.13.
ssize_t ListXattrAt(int dirfd, const std::string& name, char* list, size_t size) {
  static std::atomic<bool> missing{false};
  if (missing.load(std::memory_order_relaxed)) {
    errno = ENOSYS;
    return -1;
  }
  ssize_t n = ::syscall(kSysListxattrat, dirfd, name.c_str(), AT_SYMLINK_NOFOLLOW, list, size);
  if (n < 0 && errno == ENOSYS) missing = true;
  return n;
}

Result<Xattrs> ReadXattrs(int dirfd, const std::string& name, const std::string& rel) {
  Xattrs out;
  // Most paths have no xattrs: one listxattrat says so.
  ssize_t none = ListXattrAt(dirfd, name, nullptr, 0);
  if (none == 0 || (none < 0 && NoXattrSupport(errno))) return out;
  if (none < 0 && errno != ENOSYS) return FailErrno(rel, errno);
  std::string p = ProcPath(dirfd, name);
  std::vector<char> names;
  for (;;) {
    ssize_t n = ::llistxattr(p.c_str(), nullptr, 0);
    if (n < 0 && NoXattrSupport(errno)) return out;
    if (n < 0) return FailErrno(rel, errno);
    if (n == 0) return out;
    names.resize(n);
    n = ::llistxattr(p.c_str(), names.data(), names.size());
    if (n < 0 && errno == ERANGE) continue;  // grew meanwhile
    if (n < 0) return FailErrno(rel, errno);
    names.resize(n);
    break;
  }
  std::vector<char> value;
  for (size_t i = 0; i < names.size();) {
    std::string key(&names[i]);
    i += key.size() + 1;
    ssize_t n = ::lgetxattr(p.c_str(), key.c_str(), nullptr, 0);
    if (n < 0 && errno == ENODATA) continue;  // removed meanwhile
    if (n < 0) return FailErrno(rel + ": xattr " + key, errno);
    value.resize(n);
    n = ::lgetxattr(p.c_str(), key.c_str(), value.data(), value.size());
    if (n < 0) return FailErrno(rel + ": xattr " + key, errno);
    out.emplace_back(std::move(key), std::string(value.data(), n));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void TakeOwnerXattr(Meta* m) {
  auto it = std::find_if(m->xattrs.begin(), m->xattrs.end(), [](const auto& x) { return x.first == kOwnerXattr; });
  if (it == m->xattrs.end()) return;
  unsigned long uid = 0, gid = 0;
  int used = 0;
  if (std::sscanf(it->second.c_str(), "%lu:%lu%n", &uid, &gid, &used) != 2 || size_t(used) != it->second.size() ||
      uid > UINT32_MAX || gid > UINT32_MAX)
    return;
  m->uid = uint32_t(uid);
  m->gid = uint32_t(gid);
  m->xattrs.erase(it);
}

void PutOwnerXattr(Xattrs* x, uint32_t uid, uint32_t gid) {
  std::string value = std::to_string(uid) + ":" + std::to_string(gid);
  auto it = std::lower_bound(x->begin(), x->end(), std::string(kOwnerXattr),
                             [](const auto& e, const std::string& k) { return e.first < k; });
  if (it != x->end() && it->first == kOwnerXattr) it->second = std::move(value);
  else x->emplace(it, kOwnerXattr, std::move(value));
}

Result<void> ApplyMeta(int dirfd, const std::string& name, const Meta& m, bool is_symlink,
                       bool chown, const std::string& rel) {
  // What is already right is left alone: a restore fixes the metadata of
  // every parent of a changed path, and those rarely changed.
  struct stat st;
  bool known = ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  bool owned = known && st.st_uid == m.uid && st.st_gid == m.gid;
  if (chown && !owned) {
    if (::fchownat(dirfd, name.c_str(), m.uid, m.gid, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(rel, errno);
    known = false;  // chown may clear setuid/setgid: set the mode again
  }
  std::string p = ProcPath(dirfd, name);
  AE_ASSIGN(Xattrs have, ReadXattrs(dirfd, name, rel));
  for (const auto& [k, v] : have) {
    const std::string& key = k;  // clang 14 cannot capture a structured binding
    bool keep = std::any_of(m.xattrs.begin(), m.xattrs.end(), [&](const auto& x) { return x.first == key; });
    if (!keep && ::lremovexattr(p.c_str(), k.c_str()) != 0 && errno != ENODATA)
      return FailErrno(rel + ": xattr " + k, errno);
  }
  for (const auto& [k, v] : m.xattrs) {
    auto it = std::find(have.begin(), have.end(), std::pair(k, v));
    if (it == have.end() && ::lsetxattr(p.c_str(), k.c_str(), v.data(), v.size(), 0) != 0)
      return FailErrno(rel + ": xattr " + k, errno);
  }
  // NOFOLLOW: a symlink swapped in after the scan must not redirect the chmod.
  if (!is_symlink && !(known && (st.st_mode & 07777) == (m.mode & 07777)) &&
      ChmodNoFollow(dirfd, name.c_str(), m.mode & 07777) != 0)
    return FailErrno(rel, errno);
  struct timespec ts[2];
  ts[0].tv_sec = 0;
  ts[0].tv_nsec = UTIME_OMIT;
  ts[1].tv_sec = m.mtime_ns / 1000000000;
  ts[1].tv_nsec = m.mtime_ns % 1000000000;
  if (ts[1].tv_nsec < 0) {
    ts[1].tv_nsec += 1000000000;
    ts[1].tv_sec -= 1;
  }
  if (::utimensat(dirfd, name.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(rel, errno);
  return {};
}

int64_t ToNs(const struct timespec& ts) {
  int64_t ns;
  if (__builtin_mul_overflow(int64_t(ts.tv_sec), int64_t{1000000000}, &ns) || __builtin_add_overflow(ns, ts.tv_nsec, &ns))
    return ts.tv_sec < 0 ? INT64_MIN : INT64_MAX;
  return ns;
}

int64_t NowNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ToNs(ts);
}

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    if (slash > i) out.push_back(path.substr(i, slash - i));
    i = slash + 1;
  }
  return out;
}

Result<std::string> TreePath(const std::string& path) {
  std::vector<std::string> parts;
  for (std::string& part : SplitPath(path)) {
    if (part == ".") continue;
    if (part != "..") {
      parts.push_back(std::move(part));
    } else if (parts.empty()) {
      return Fail(ErrorCode::kInvalid, path + ": leads outside the tree (give a path inside it, e.g. etc/hosts)");
    } else {
      parts.pop_back();
    }
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

Result<void> RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Result<void>() : FailErrno(path, errno);
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return FailErrno(path, errno);
    return {};
  }
  ::chmod(path.c_str(), 0700);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return FailErrno(path, errno);
  AE_TRY(RemoveContentsAt(fd.get(), path));
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return FailErrno(path, errno);
  return {};
}

std::string RestoreTempName(uint64_t n) {
  return ".agentenv-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(n);
}

bool IsRestoreTempName(std::string_view name) {
  constexpr std::string_view kPrefix = ".agentenv-tmp-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return false;
  name.remove_prefix(kPrefix.size());
  size_t dash = name.find('-');
  auto digits = [](std::string_view d) {
    return !d.empty() && d.find_first_not_of("0123456789") == std::string_view::npos;
  };
  return dash != std::string_view::npos && digits(name.substr(0, dash)) && digits(name.substr(dash + 1));
}

}  // namespace agentenv::snap
