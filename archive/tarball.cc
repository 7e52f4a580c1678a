#include "archive/tarball.h"

#include "archive/libarchive.h"
#include "archive/tar_stream.h"
#include "archive/unpack_meta.h"
#include "snap/fsops.h"

#include "common/unique_fd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <map>
#include <unordered_map>
#include <vector>

namespace agentenv::archive {
namespace {

using WriteDisk = std::unique_ptr<::archive, decltype(&archive_write_free)>;

// The holes sparse entries may leave in the files of one archive, in all.
// A hole costs the archive nothing, but the tree it unpacks to is read and
// hashed byte by byte when it is recorded (and read again by export and
// restore): a 512-byte entry claiming a 1 TiB file kept an import busy for
// tens of minutes. A GiB of holes takes about 2 s to record (4 GiB: 20 s).
constexpr uint64_t kMaxSparseHoles = uint64_t(1) << 30;

// The bytes of entry `e` that its sparse map leaves out (0 for an entry
// that is not sparse).
uint64_t SparseHoles(const ArchiveLib& A, archive_entry* e) {
  la_int64_t size = A.archive_entry_size(e);
  if (size <= 0 || A.archive_entry_sparse_reset(e) <= 0) return 0;
  uint64_t data = 0;
  la_int64_t offset, length;
  while (A.archive_entry_sparse_next(e, &offset, &length) == ARCHIVE_OK) data += uint64_t(std::max<la_int64_t>(length, 0));
  return data >= uint64_t(size) ? 0 : uint64_t(size) - data;
}

// A path is safe when it is relative and no component is "..".
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

// libarchive's secure-extraction checks work on relative paths from the
// current directory, so extraction runs inside `dest` and returns after.
class WorkingDirectory {
 public:
  static Result<WorkingDirectory> Enter(const std::string& dir) {
    WorkingDirectory w;
    w.old_.reset(::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!w.old_) return FailErrno("current directory", errno);
    if (::chdir(dir.c_str()) != 0) return FailErrno(dir, errno);
    return w;
  }
  WorkingDirectory(WorkingDirectory&&) = default;
  ~WorkingDirectory() {
    if (old_ && ::fchdir(old_.get()) != 0) std::abort();
  }

 private:
  WorkingDirectory() = default;
  UniqueFd old_;
};

// libarchive's message for the last error of `a`, which it does not always
// set (a damaged stream can fail with none: a null string).
std::string Why(const ArchiveLib& A, ::archive* a, const std::string& none) {
  const char* m = A.archive_error_string(a);
  return m ? m : none;
}

// A refused entry (libarchive's security checks set no errno; an entry
// that would replace an earlier one or descend through a non-directory is
// the archive's fault too) is kInvalid; anything else is an I/O error.
Error HeaderError(const ArchiveLib& A, const std::string& path, const std::string& name, ::archive* out) {
  int err = A.archive_errno(out);
  std::string why = Why(A, out, "cannot extract");
  if (err <= 0 || err == EEXIST || err == ENOTDIR || err == ELOOP)
    return Error{path + ": entry '" + name + "': " + why + "; refusing the archive", 0, ErrorCode::kInvalid};
  return Error{name + ": " + why + ": " + std::strerror(err), err, ErrorCode::kIo};
}

// A failed write of `name`, with the errno libarchive saw (a full disk must
// say so, and carry ENOSPC for the remedy).
Error WriteError(const ArchiveLib& A, const std::string& name, ::archive* out) {
  int err = A.archive_errno(out);
  std::string why = Why(A, out, "write failed");
  if (err > 0) why += std::string(": ") + std::strerror(err);
  return Error{name + ": " + why, std::max(err, 0), ErrorCode::kIo};
}

std::string Strip(std::string_view p) {
  while (p.starts_with("./")) p.remove_prefix(2);
  return std::string(p);
}

// Whether `name` (relative to the current directory) exists, after
// checking that no directory above it is a symlink or not a directory:
// whiteouts and replacements remove paths, never through a link.
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
  if (type == AE_IFDIR && IsWhiteout(name))
    return Fail(ErrorCode::kInvalid, archive + ": entry '" + name +
                                         "' is a directory named as a whiteout ('.wh.'), which must be a file; "
                                         "refusing the layer");
  return {};
}

}  // namespace

namespace {

// Unpacks the archive `path` (read from `fd` when it is not -1) into
// `dest`; `holes`: the holes of sparse entries so far.
Result<void> Extract(const std::string& path, int fd, const std::string& dest,
                     const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                     bool layer, Progress* progress, uint64_t* holes) {
  BeginPhase(progress, "unpacking");
  AE_ASSIGN(const ArchiveLib* lib, LoadArchiveLib());
  const ArchiveLib& A = *lib;
  std::unique_ptr<TarReader> reader;
  if (fd >= 0) {
    AE_ASSIGN(reader, TarReader::Open(A, fd, path));
  } else {
    AE_ASSIGN(reader, TarReader::Open(A, path));
  }
  ::archive* in = reader->get();

  const bool root = ::geteuid() == 0;
  int flags = ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR | ARCHIVE_EXTRACT_ACL |
              ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
              ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_SPARSE;
  if (root) flags |= ARCHIVE_EXTRACT_OWNER;
  // A layer replaces what the layers below hold (removed first, below).
  if (root && !layer) flags |= ARCHIVE_EXTRACT_NO_OVERWRITE;
  // Entered first, left last: a writer freed on an error still applies
  // the modes and times of the directories it made, relative to the
  // current directory (and "." is `dest` itself).
  AE_ASSIGN(auto cwd, WorkingDirectory::Enter(dest));
  WriteDisk out(A.archive_write_disk_new(), A.archive_write_free);
  A.archive_write_disk_set_options(out.get(), flags);
  A.archive_write_disk_set_standard_lookup(out.get());

  RootlessOwners owners;
  AclXattrs acls;
  std::unordered_map<std::string, mode_t> seen;  // entry name -> type
  // Without a root entry the root is 0755 with the newest mtime of the
  // entries: the same archive gives the same node (not the mode and time
  // of the directory it was unpacked into).
  // libarchive sets the times of a directory that exists (the root) at
  // once, and its entries change them again: they are set at the end.
  std::optional<timespec> root_mtime, newest;
  // A layer changes directories' mtimes by what it writes and removes in
  // them. The layer's own directories get theirs again at the end, the
  // others the one they had before the layer touched them.
  std::vector<std::pair<std::string, timespec>> dir_times;
  std::map<std::string, timespec> kept_times;
  auto keep_parent_time = [&](const std::string& name) -> Result<void> {
    size_t slash = name.rfind('/');
    std::string parent = slash == std::string::npos ? "." : name.substr(0, slash);
    if (kept_times.count(parent)) return {};
    if (parent != ".") {
      AE_ASSIGN(bool exists, ExistsBelowDirs(path, parent));
      if (!exists) return {};
    }
    struct stat st;
    if (::lstat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) kept_times.emplace(parent, st.st_mtim);
    return {};
  };
  for (;;) {
    archive_entry* e = nullptr;
    int r = A.archive_read_next_header(in, &e);
    if (r == ARCHIVE_EOF) break;
    // ARCHIVE_RETRY: a damaged header, skipped over by the next call.
    if (r < ARCHIVE_WARN || r == ARCHIVE_RETRY)
      return Fail(ErrorCode::kInvalid, path + ": " + Why(A, in, "unreadable header"));
    const char* raw = A.archive_entry_pathname(e);
    std::string name = Strip(raw ? raw : "");
    while (name.size() > 1 && name.back() == '/') name.pop_back();  // "dir/" is "dir"
    // The root itself ("./", "." or "/"): `dest` takes its metadata. A
    // layer's root is the image's, not the layer's to set.
    const bool is_root = name.empty() || name == "." || name == "/";
    if (is_root && layer) continue;
    if (is_root) {
      if (A.archive_entry_filetype(e) != AE_IFDIR || A.archive_entry_hardlink(e))
        return Fail(ErrorCode::kInvalid, path + ": entry '" + std::string(raw && *raw ? raw : ".") +
                                             "' is the root, which must be a directory; refusing the archive");
      name = ".";
      root_mtime = timespec{time_t(A.archive_entry_mtime(e)), long(A.archive_entry_mtime_nsec(e))};
    } else {
      timespec t{time_t(A.archive_entry_mtime(e)), long(A.archive_entry_mtime_nsec(e))};
      if (!newest || std::pair(t.tv_sec, t.tv_nsec) > std::pair(newest->tv_sec, newest->tv_nsec)) newest = t;
    }
    if (!is_root && !SafeRelative(name))
      return Fail(ErrorCode::kInvalid, path + ": entry '" + name +
                                           "' is absolute or contains '..'; refusing the archive");
    if (const char* hl = A.archive_entry_hardlink(e)) {
      std::string target = Strip(hl);
      if (!SafeRelative(target))
        return Fail(ErrorCode::kInvalid, path + ": hardlink '" + name + "' -> '" + target +
                                             "' points outside the archive; refusing it");
      auto it = seen.find(target);
      if (it != seen.end() && it->second == AE_IFDIR)
        return Fail(ErrorCode::kInvalid, path + ": hardlink '" + name + "' -> '" + target +
                                             "' names a directory, which cannot be hardlinked; refusing the archive");
      for (size_t slash = target.find('/'); slash != std::string::npos; slash = target.find('/', slash + 1))
        if (auto up = seen.find(target.substr(0, slash)); up != seen.end() && up->second == AE_IFLNK)
          return Fail(ErrorCode::kInvalid, path + ": hardlink '" + name + "' -> '" + target + "' goes through symlink '" +
                                               up->first + "'; refusing the archive");
      // A tar names the first path of a link group before its links; a
      // layer's link may also name a file of the layers below.
      if (it == seen.end() && !layer)
        return Fail(ErrorCode::kInvalid, path + ": hardlink '" + name + "' -> '" + target +
                                             "' names no entry before it; refusing the archive");
      // Data on a hardlink to a symlink would be written through it.
      if (it != seen.end() && it->second == AE_IFLNK && A.archive_entry_size(e) > 0)
        return Fail(ErrorCode::kInvalid, path + ": hardlink '" + name + "' -> '" + target +
                                             "' carries data for a symlink; refusing the archive");
      A.archive_entry_set_hardlink(e, target.c_str());
    }
    mode_t type = A.archive_entry_filetype(e);
    if (uint64_t h = SparseHoles(A, e); h > 0) {
      *holes += h;
      if (*holes > kMaxSparseHoles)
        return Fail(ErrorCode::kInvalid, path + ": entry '" + name + "' is a sparse file of " +
                                             std::to_string(A.archive_entry_size(e)) + " bytes with " +
                                             std::to_string(h) + " bytes of holes; the archive's sparse files may " +
                                             "have at most " + std::to_string(kMaxSparseHoles >> 30) +
                                             " GiB of holes in all; refusing the archive");
    }
    if (layer) AE_TRY(CheckWhiteoutName(path, name, type));
    if (layer) AE_TRY(keep_parent_time(name));
    if (layer && IsWhiteout(name)) {
      if (name.ends_with("/.wh..wh..opq")) AE_TRY(keep_parent_time(name.substr(0, name.rfind('/'))));
      AE_TRY(ApplyWhiteout(path, name, seen));
      continue;
    }
    if (layer && type == AE_IFDIR)
      dir_times.emplace_back(name, timespec{time_t(A.archive_entry_mtime(e)), long(A.archive_entry_mtime_nsec(e))});
    if ((type == AE_IFCHR || type == AE_IFBLK) && !root) {
      if (devices == UnprivilegedDevices::kRefuse)
        return Fail(ErrorCode::kInvalid, path + ": entry '" + name +
                                             "' is a device node, which only root can create; refusing the archive");
      warn(name + ": device node skipped (creating it needs privilege)");
      continue;
    }
    // A second entry of the same name would replace (or, when privileged
    // and not overwriting, silently not replace) the first: whichever the
    // archive meant, it is not a plain tree.
    if (auto [it, fresh] = seen.emplace(name, type); !fresh && !(type == AE_IFDIR && it->second == AE_IFDIR))
      return Fail(ErrorCode::kInvalid, path + ": entry '" + name + "' appears twice in the archive; refusing the archive");
    if (layer) {
      // What a lower layer left there goes, unless both are directories.
      struct stat st;
      AE_ASSIGN(bool exists, ExistsBelowDirs(path, name));
      if (exists && (::lstat(name.c_str(), &st) != 0 || !(S_ISDIR(st.st_mode) && type == AE_IFDIR)))
        AE_TRY(RemoveAll(name));
    }
    A.archive_entry_set_pathname(e, name.c_str());
    if (!root) owners.Keep(A, e, name);
    acls.Keep(A, e, name);
    // `dest` exists: told not to overwrite, libarchive would leave its
    // metadata as it is.
    if (is_root) A.archive_write_disk_set_options(out.get(), flags & ~ARCHIVE_EXTRACT_NO_OVERWRITE);
    r = A.archive_write_header(out.get(), e);
    if (is_root) A.archive_write_disk_set_options(out.get(), flags);
    if (r < ARCHIVE_WARN) return Unexpected<Error>(HeaderError(A, path, name, out.get()));
    if (r == ARCHIVE_WARN) warn(name + ": " + Why(A, out.get(), "warning"));
    if (A.archive_entry_size(e) > 0) {
      const void* buf;
      size_t len;
      la_int64_t off;
      while ((r = A.archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
        if (A.archive_write_data_block(out.get(), buf, len, off) < ARCHIVE_OK)
          return Unexpected<Error>(WriteError(A, name, out.get()));
      }
      if (r != ARCHIVE_EOF)
        return Fail(ErrorCode::kInvalid, path + ": " + Why(A, in, "unreadable data of '" + name + "'"));
    }
    // ARCHIVE_WARN: metadata not restored, such as ACLs where the
    // filesystem has none.
    r = A.archive_write_finish_entry(out.get());
    if (r < ARCHIVE_WARN) return Unexpected<Error>(WriteError(A, name, out.get()));
    if (r == ARCHIVE_WARN) warn(name + ": " + Why(A, out.get(), "warning"));
    Advance(progress, 1, uint64_t(std::max<la_int64_t>(A.archive_entry_size(e), 0)));
  }
  // Directory modes, mtimes and ACLs are applied here, after their contents.
  int closed = A.archive_write_close(out.get());
  if (closed < ARCHIVE_WARN) return Unexpected<Error>(WriteError(A, dest, out.get()));
  if (closed == ARCHIVE_WARN) warn(dest + ": " + Why(A, out.get(), "warning"));
  for (const auto& [dir, mtime] : dir_times) kept_times.erase(dir);
  std::vector<std::pair<std::string, timespec>> restore(kept_times.begin(), kept_times.end());
  restore.insert(restore.end(), dir_times.begin(), dir_times.end());
  for (const auto& [dir, mtime] : restore) {
    auto exists = ExistsBelowDirs(path, dir);  // never through a link the layer made later
    struct stat st;
    if (!exists || !*exists || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    struct timespec ts[2] = {{0, UTIME_OMIT}, mtime};
    if (::utimensat(AT_FDCWD, dir.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(dir, errno);
  }
  if (!layer) {
    if (!root_mtime && ::chmod(".", 0755) != 0) return FailErrno(dest, errno);
    struct timespec ts[2] = {{0, UTIME_OMIT}, root_mtime.value_or(newest.value_or(timespec{0, 0}))};
    if (::utimensat(AT_FDCWD, ".", ts, 0) != 0) return FailErrno(dest, errno);
  }
  AE_TRY(acls.Apply([&](const std::string& name) { return ExistsBelowDirs(path, name); }, warn));
  owners.Report(warn);
  return {};
}

}  // namespace

Result<void> ExtractTarball(const std::string& archive, const std::string& dest,
                            const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                            Progress* progress) {
  uint64_t holes = 0;
  return Extract(archive, -1, dest, warn, devices, false, progress, &holes);
}

Result<void> ApplyLayer(const std::string& layer, const std::string& dest,
                        const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices) {
  uint64_t holes = 0;
  return Extract(layer, -1, dest, warn, devices, true, nullptr, &holes);
}

Result<void> ApplyLayer(int fd, const std::string& layer, const std::string& dest,
                        const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                        uint64_t* sparse_holes) {
  return Extract(layer, fd, dest, warn, devices, true, nullptr, sparse_holes);
}

}  // namespace agentenv::archive
