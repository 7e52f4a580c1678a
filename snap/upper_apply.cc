// Carrying an overlay upper onto a tree or another upper (snap/upper_apply.h).
#include "snap/upper_apply.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "common/unique_fd.h"
#include "common/write_all.h"
#include "snap/fsops.h"

namespace agentenv::snap {
namespace {

constexpr std::string_view kOverlayPrefix = "user.overlay.";
constexpr const char* kOpaque = "user.overlay.opaque";

bool IsWhiteout(const struct stat& st) { return S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0); }

struct Applier {
  UpperTarget mode;
  bool chown;

  Result<Meta> MetaOf(int dirfd, const std::string& name, const struct stat& st, const std::string& rel) {
    Meta m{uint32_t(st.st_mode & 07777), st.st_uid, st.st_gid, ToNs(st.st_mtim), {}};
    AE_ASSIGN(m.xattrs, ReadXattrs(dirfd, name, rel));
    if (mode == UpperTarget::kTree)
      m.xattrs.erase(std::remove_if(m.xattrs.begin(), m.xattrs.end(),
                                    [](const auto& x) { return x.first.rfind(kOverlayPrefix, 0) == 0; }),
                     m.xattrs.end());
    return m;
  }

  // Removes `name` in `dirfd` (a whole subtree for a directory).
  Result<void> Remove(int dirfd, const std::string& name, const std::string& rel) {
    struct stat st;
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return {};
      return FailErrno(rel, errno);
    }
    if (!S_ISDIR(st.st_mode)) {
      if (::unlinkat(dirfd, name.c_str(), 0) != 0) return FailErrno(rel, errno);
      return {};
    }
    return RemoveTree("/proc/self/fd/" + std::to_string(dirfd) + "/" + name);
  }

  Result<void> CopyFile(int src_dir, int dst_dir, const std::string& name, const std::string& rel) {
    UniqueFd in(::openat(src_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!in) return FailErrno(rel, errno);
    UniqueFd out(::openat(dst_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) return FailErrno(rel, errno);
    std::vector<char> buf(1 << 20);
    for (;;) {
      ssize_t n = ::read(in.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FailErrno(rel, errno);
      if (n == 0) break;
      AE_TRY(WriteAll(out.get(), buf.data(), size_t(n), rel));
    }
    return {};
  }

  // Makes a copy of src entry `name` (not a directory) in dst_dir.
  Result<void> CopyLeaf(int src_dir, int dst_dir, const std::string& name, const struct stat& st,
                        const std::string& rel) {
    if (S_ISREG(st.st_mode)) {
      AE_TRY(CopyFile(src_dir, dst_dir, name, rel));
    } else if (S_ISLNK(st.st_mode)) {
      std::string target(size_t(st.st_size) + 1, '\0');
      ssize_t n = ::readlinkat(src_dir, name.c_str(), target.data(), target.size());
      if (n < 0) return FailErrno(rel, errno);
      target.resize(size_t(n));
      if (::symlinkat(target.c_str(), dst_dir, name.c_str()) != 0) return FailErrno(rel, errno);
    } else if (::mknodat(dst_dir, name.c_str(), st.st_mode & (S_IFMT | 07777), st.st_rdev) != 0) {
      return FailErrno(rel, errno);
    }
    AE_ASSIGN(Meta m, MetaOf(src_dir, name, st, rel));
    return ApplyMeta(dst_dir, name, m, S_ISLNK(st.st_mode), chown, rel);
  }

  // Applies directory src (an entry of the upper) onto dst, both open.
  Result<void> Dir(int src, int dst, bool opaque, const std::string& rel) {
    UniqueFd listing(::dup(src));
    if (!listing) return FailErrno(rel, errno);
    DIR* d = ::fdopendir(listing.release());
    if (!d) return FailErrno(rel, errno);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d))
      if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..") names.push_back(e->d_name);
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string at = Join(rel, name);
      struct stat st;
      if (::fstatat(src, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(at, errno);
      if (IsWhiteout(st)) {
        AE_TRY(Remove(dst, name, at));
        // Below an opaque directory nothing is hidden: a whiteout there is moot.
        if (mode == UpperTarget::kUpper && !opaque && ::mknodat(dst, name.c_str(), S_IFCHR, makedev(0, 0)) != 0)
          return FailErrno(at, errno);
        continue;
      }
      if (!S_ISDIR(st.st_mode)) {
        AE_TRY(Remove(dst, name, at));
        AE_TRY(CopyLeaf(src, dst, name, st, at));
        continue;
      }
      AE_ASSIGN(Xattrs xs, ReadXattrs(src, name, at));
      bool sub_opaque = opaque || std::any_of(xs.begin(), xs.end(), [](const auto& x) {
        return x.first == kOpaque && x.second == "y";
      });
      struct stat have;
      bool is_dir = ::fstatat(dst, name.c_str(), &have, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(have.st_mode);
      if (!is_dir || sub_opaque) {
        // An opaque directory hides what was below it: it replaces it whole.
        AE_TRY(Remove(dst, name, at));
        if (::mkdirat(dst, name.c_str(), 0700) != 0) return FailErrno(at, errno);
      }
      AE_ASSIGN(UniqueFd s, OpenDirAt(src, name, at));
      AE_ASSIGN(UniqueFd t, OpenDirAt(dst, name, at));
      AE_TRY(Dir(s.get(), t.get(), sub_opaque, at));
      AE_ASSIGN(Meta m, MetaOf(src, name, st, at));
      AE_TRY(ApplyMeta(dst, name, m, false, chown, at));
    }
    return {};
  }
};

}  // namespace

Result<void> ApplyUpper(int upper_fd, int target_fd, UpperTarget mode, bool chown, const std::string& what) {
  Applier a{mode, chown};
  AE_TRY(a.Dir(upper_fd, target_fd, false, what));
  struct stat st;
  if (::fstat(upper_fd, &st) != 0) return FailErrno(what, errno);
  AE_ASSIGN(Meta m, a.MetaOf(upper_fd, ".", st, what));
  return ApplyMeta(target_fd, ".", m, false, chown, what);
}

}  // namespace agentenv::snap
