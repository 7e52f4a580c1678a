#include "archive/unpack_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace agentenv::archive {

bool SafeRelative(std::string_view p) {
  if (p.empty() || p.front() == '/') return false;
  size_t i = 0;
  while (i <= p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    if (p.substr(i, j - i) == "..") return false;
    i = j + 1;
  }
  return true;
}

Result<WorkingDirectory> WorkingDirectory::Enter(const std::string& dir) {
  WorkingDirectory w;
  w.old_.reset(::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!w.old_) return FailErrno("current directory", errno);
  if (::chdir(dir.c_str()) != 0) return FailErrno(dir, errno);
  return w;
}

WorkingDirectory::~WorkingDirectory() {
  if (old_ && ::fchdir(old_.get()) != 0) std::abort();
}

// Whiteouts and replacements remove paths, never through a link.
Result<bool> ExistsBelowDirs(const std::string& archive, const std::string& name) {
  for (size_t i = name.find('/'); i != std::string::npos; i = name.find('/', i + 1)) {
    struct stat st;
    std::string dir = name.substr(0, i);
    if (::lstat(dir.c_str(), &st) != 0) {
      if (errno == ENOENT) return false;
      return FailErrno(dir, errno);
    }
    if (!S_ISDIR(st.st_mode))
      return Fail(ErrorCode::kInvalid, archive + ": entry '" + name + "' lies below '" + dir +
                                           "', which is not a directory; refusing the layer");
  }
  struct stat st;
  if (::lstat(name.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  return FailErrno(name, errno);
}

Result<void> RemoveAll(const std::string& name) {
  std::error_code ec;
  std::filesystem::remove_all(name, ec);
  if (ec) return FailErrno(name, ec.value());
  return {};
}

// An OCI whiteout in a layer: ".wh.NAME" removes NAME from the layers
// below; ".wh..wh..opq" empties its directory of what the layers below put
// there (entries of this layer, in `seen`, stay).
Result<void> ApplyWhiteout(const std::string& archive, const std::string& name,
                           const std::unordered_map<std::string, mode_t>& seen) {
  size_t slash = name.rfind('/');
  std::string dir = slash == std::string::npos ? "" : name.substr(0, slash + 1);
  std::string base = name.substr(dir.size());
  if (base == ".wh..wh..opq") {
    std::string d = dir.empty() ? "." : dir.substr(0, dir.size() - 1);
    // Every directory above the marker, its own included, must be one (a
    // symlink there would empty the directory it points to).
    AE_TRY(ExistsBelowDirs(archive, name));
    struct stat st;
    if (::lstat(d.c_str(), &st) != 0) return {};  // nothing below to hide
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) {
      std::string child = dir + e.path().filename().string();
      if (!seen.count(child)) AE_TRY(RemoveAll(child));
    }
    if (ec) return FailErrno(d, ec.value());
    return {};
  }
  std::string target = dir + base.substr(4);
  if (target == dir || base == ".wh.." || base == ".wh...")
    return Fail(ErrorCode::kInvalid, archive + ": whiteout '" + name + "' names no entry; refusing the layer");
  AE_ASSIGN(bool exists, ExistsBelowDirs(archive, target));
  if (exists) AE_TRY(RemoveAll(target));
  return {};
}

bool IsWhiteout(const std::string& name) {
  size_t slash = name.rfind('/');
  return name.compare(slash == std::string::npos ? 0 : slash + 1, 4, ".wh.") == 0;
}

// A whiteout is a marker file. One that is a directory, or an entry below
// a whiteout's name, would both remove a path and put one of the marker's
// name in the tree (which the next export would write as a whiteout
// again): no tool agrees on what such a layer means, so it is refused.
Result<void> CheckWhiteoutName(const std::string& archive, const std::string& name, mode_t type) {
  for (size_t start = 0, slash; (slash = name.find('/', start)) != std::string::npos; start = slash + 1)
    if (name.compare(start, 4, ".wh.") == 0)
      return Fail(ErrorCode::kInvalid, archive + ": entry '" + name + "' lies below whiteout '" +
                                           name.substr(0, slash) + "'; refusing the layer");
  if (S_ISDIR(type) && IsWhiteout(name))
    return Fail(ErrorCode::kInvalid, archive + ": entry '" + name +
                                         "' is a directory named as a whiteout ('.wh.'), which must be a file; "
                                         "refusing the layer");
  return {};
}

}  // namespace agentenv::archive
