#include "control/tarball.h"

#include "control/libarchive.h"
#include "snap/fsops.h"

#include "common/unique_fd.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>

namespace agentenv::control {
namespace {

using ReadArchive = std::unique_ptr<archive, decltype(&archive_read_free)>;
using WriteDisk = std::unique_ptr<archive, decltype(&archive_write_free)>;

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

// A refused entry (libarchive's security checks set no errno; an entry
// that would replace an earlier one or descend through a non-directory is
// the archive's fault too) is kInvalid; anything else is an I/O error.
Error HeaderError(const ArchiveLib& A, const std::string& path, const std::string& name, archive* out) {
  int err = A.archive_errno(out);
  std::string why = A.archive_error_string(out) ? A.archive_error_string(out) : "cannot extract";
  if (err <= 0 || err == EEXIST || err == ENOTDIR || err == ELOOP)
    return Error{path + ": entry '" + name + "': " + why + "; refusing the archive", 0, ErrorCode::kInvalid};
  return Error{name + ": " + why + ": " + std::strerror(err), err, ErrorCode::kIo};
}

std::string Strip(std::string_view p) {
  while (p.starts_with("./")) p.remove_prefix(2);
  return std::string(p);
}

}  // namespace

// Unpacking without privilege, the owners the archive names are kept in
// snap::kOwnerXattr (scans record them from there), and the entry is
// written as ours, so that libarchive keeps its setuid/setgid bits (it
// drops them from a file whose owner it could not set).
class RootlessOwners {
 public:
  void Keep(const ArchiveLib& A, archive_entry* e, const std::string& name) {
    uint64_t uid = uint64_t(A.archive_entry_uid(e)), gid = uint64_t(A.archive_entry_gid(e));
    if (uid == uid_ && gid == gid_) return;
    mode_t type = A.archive_entry_filetype(e);
    if (A.archive_entry_hardlink(e)) return;  // the inode has its owner from the first entry
    if (type != AE_IFREG && type != AE_IFDIR) {
      if (lost_++ == 0) first_lost_ = name + ": owner " + std::to_string(uid) + ":" + std::to_string(gid);
      return;
    }
    std::string value = std::to_string(uid) + ":" + std::to_string(gid);
    A.archive_entry_xattr_add_entry(e, snap::kOwnerXattr, value.data(), value.size());
    A.archive_entry_set_uid(e, uid_);
    A.archive_entry_set_gid(e, gid_);
  }
  void Report(const std::function<void(const std::string&)>& warn) const {
    if (lost_ == 0) return;
    warn(first_lost_ + " not kept (needs root: only files and directories can carry " + snap::kOwnerXattr + "); " +
         std::to_string(lost_) + " symlink(s) or special file(s) belong to the unpacking user");
  }

 private:
  uint64_t uid_ = ::geteuid(), gid_ = ::getegid();
  uint64_t lost_ = 0;
  std::string first_lost_;
};

Result<void> ExtractTarball(const std::string& path, const std::string& dest,
                            const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                            Progress* progress) {
  BeginPhase(progress, "unpacking");
  AE_ASSIGN(const ArchiveLib* lib, LoadArchiveLib());
  const ArchiveLib& A = *lib;
  ReadArchive in(A.archive_read_new(), A.archive_read_free);
  // Tar only (plain, gzip, xz, zstd): libarchive reads many formats, and
  // with all of them any text file reads as an mtree manifest.
  A.archive_read_support_format_tar(in.get());
  A.archive_read_support_filter_gzip(in.get());
  A.archive_read_support_filter_xz(in.get());
  A.archive_read_support_filter_zstd(in.get());
  if (A.archive_read_open_filename(in.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
    return Fail(ErrorCode::kInvalid, path + ": " + A.archive_error_string(in.get()) +
                                         " (a tar archive, plain or .gz/.xz/.zst, is expected)");

  const bool root = ::geteuid() == 0;
  int flags = ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR |
              ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
              ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_SPARSE;
  if (root) flags |= ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_NO_OVERWRITE;
  WriteDisk out(A.archive_write_disk_new(), A.archive_write_free);
  A.archive_write_disk_set_options(out.get(), flags);
  A.archive_write_disk_set_standard_lookup(out.get());

  RootlessOwners owners;
  AE_ASSIGN(auto cwd, WorkingDirectory::Enter(dest));
  std::unordered_map<std::string, mode_t> seen;  // entry name -> type
  for (;;) {
    archive_entry* e = nullptr;
    int r = A.archive_read_next_header(in.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) return Fail(ErrorCode::kInvalid, path + ": " + A.archive_error_string(in.get()));
    const char* raw = A.archive_entry_pathname(e);
    std::string name = Strip(raw ? raw : "");
    if (name.empty() || name == "." || name == "./") continue;  // the root itself
    if (!SafeRelative(name))
      return Fail(ErrorCode::kInvalid, path + ": entry '" + name +
                                           "' is absolute or contains '..'; refusing the archive");
    if (const char* hl = A.archive_entry_hardlink(e)) {
      std::string target = Strip(hl);
      if (!SafeRelative(target))
        return Fail(ErrorCode::kInvalid, path + ": hardlink '" + name + "' -> '" + target +
                                             "' points outside the archive; refusing it");
      // Data on a hardlink to a symlink would be written through it.
      if (auto it = seen.find(target); it != seen.end() && it->second == AE_IFLNK && A.archive_entry_size(e) > 0)
        return Fail(ErrorCode::kInvalid, path + ": hardlink '" + name + "' -> '" + target +
                                             "' carries data for a symlink; refusing the archive");
      A.archive_entry_set_hardlink(e, target.c_str());
    }
    mode_t type = A.archive_entry_filetype(e);
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
    A.archive_entry_set_pathname(e, name.c_str());
    if (!root) owners.Keep(A, e, name);
    r = A.archive_write_header(out.get(), e);
    if (r < ARCHIVE_WARN) return Unexpected<Error>(HeaderError(A, path, name, out.get()));
    if (r == ARCHIVE_WARN) warn(name + ": " + A.archive_error_string(out.get()));
    if (A.archive_entry_size(e) > 0) {
      const void* buf;
      size_t len;
      la_int64_t off;
      while ((r = A.archive_read_data_block(in.get(), &buf, &len, &off)) == ARCHIVE_OK) {
        if (A.archive_write_data_block(out.get(), buf, len, off) < ARCHIVE_OK)
          return Fail(name + ": " + A.archive_error_string(out.get()));
      }
      if (r != ARCHIVE_EOF)
        return Fail(ErrorCode::kInvalid, path + ": " + A.archive_error_string(in.get()));
    }
    if (A.archive_write_finish_entry(out.get()) < ARCHIVE_WARN)
      return Fail(name + ": " + A.archive_error_string(out.get()));
    Advance(progress, 1, uint64_t(std::max<la_int64_t>(A.archive_entry_size(e), 0)));
  }
  // Directory modes and mtimes are applied here, after their contents.
  if (A.archive_write_close(out.get()) < ARCHIVE_WARN)
    return Fail(dest + ": " + A.archive_error_string(out.get()));
  owners.Report(warn);
  return {};
}

}  // namespace agentenv::control
