#include "archive/tarball.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "archive/libarchive.h"
#include "archive/tar_stream.h"
#include "archive/unpack_meta.h"
#include "archive/unpack_paths.h"

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

// Names of one kind, for one warning: how many, and the first few.
class NameList {
 public:
  void Add(const std::string& name) {
    if (count_++ < 3) first_.push_back(name);
  }
  uint64_t count() const { return count_; }
  // "'a', 'b', 'c' and 4 more"
  std::string Text() const {
    std::string out;
    for (const std::string& n : first_) out += (out.empty() ? "'" : ", '") + n + "'";
    if (count_ > first_.size()) out += " and " + std::to_string(count_ - first_.size()) + " more";
    return out;
  }

 private:
  uint64_t count_ = 0;
  std::vector<std::string> first_;
};

timespec MtimeOf(const ArchiveLib& A, archive_entry* e) {
  return {time_t(A.archive_entry_mtime(e)), long(A.archive_entry_mtime_nsec(e))};
}

bool Newer(timespec a, timespec b) { return std::pair(a.tv_sec, a.tv_nsec) > std::pair(b.tv_sec, b.tv_nsec); }

// `raw` as a name relative to the tree: "./" prefixes and a trailing '/'
// dropped, leading '/' removed (as GNU tar and bsdtar remove it; *slash
// says so). "" is the root.
std::string Relative(std::string_view raw, bool* slash) {
  *slash = false;
  for (;;) {
    if (raw.starts_with("./")) {
      raw.remove_prefix(2);
    } else if (raw.starts_with('/')) {
      raw.remove_prefix(1);
      *slash = true;
    } else {
      break;
    }
  }
  while (!raw.empty() && raw.back() == '/') raw.remove_suffix(1);
  if (raw == ".") raw = "";
  return std::string(raw);
}

// One archive unpacked into the current directory (archive/tarball.h).
class Unpack {
 public:
  // Unpacks `path` into `dest`, the current directory.
  Unpack(const ArchiveLib& A, const std::string& path, const std::string& dest, bool layer,
         UnprivilegedDevices devices, const std::function<void(const std::string&)>& warn,
         const snap::PathFilter& ignored, Progress* progress, uint64_t* holes)
      : A(A), path_(path), dest_(dest), layer_(layer), devices_(devices), warn_(warn), ignored_(ignored),
        progress_(progress), holes_(holes) {}

  // Reads every entry of `in` and writes it through `out`, then applies
  // what libarchive leaves to the end and to us.
  Result<void> Run(::archive* in, ::archive* out);

 private:
  // Whether entry `e` (named `name`) is written; refusals are errors.
  Result<bool> Admit(archive_entry* e, const std::string& name, bool is_root);
  Result<void> CheckHardlink(archive_entry* e, const std::string& name);
  // An entry of a name an earlier one (or, in a layer, a lower layer) has:
  // the earlier goes, unless both are directories.
  Result<void> Replace(const std::string& name, mode_t type);
  Result<void> Write(::archive* in, ::archive* out, archive_entry* e, const std::string& name);
  Result<void> KeepParentTime(const std::string& name);
  Result<void> Finish(::archive* out);
  Result<bool> Reachable(const std::string& name) const { return ExistsBelowDirs(path_, name); }

  const ArchiveLib& A;
  const std::string path_, dest_;
  const bool layer_;
  const UnprivilegedDevices devices_;
  const std::function<void(const std::string&)>& warn_;
  IgnoredEntries ignored_;
  Progress* progress_;
  uint64_t* holes_;
  const bool root_ = ::geteuid() == 0;

  RootlessOwners owners_;
  AclXattrs acls_;
  ImpliedDirs implied_;
  NameList slashes_, link_slashes_, twice_;
  std::unordered_map<std::string, mode_t> seen_;  // entry name -> type
  std::unordered_set<std::string> repeated_;       // names given more than once
  // Without a root entry the root is 0755 with the newest mtime of the
  // entries: the same archive gives the same node (not the mode and time
  // of the directory it was unpacked into). libarchive sets the times of
  // a directory that exists (the root) at once, and its entries change
  // them again: they are set at the end.
  std::optional<timespec> root_mtime_, newest_;
  // A layer changes directories' mtimes by what it writes and removes in
  // them. The layer's own directories get theirs again at the end, the
  // others the one they had before the layer touched them.
  std::vector<std::pair<std::string, timespec>> dir_times_;
  std::map<std::string, timespec> kept_times_;
};

Result<void> Unpack::Run(::archive* in, ::archive* out) {
  for (;;) {
    archive_entry* e = nullptr;
    int r = A.archive_read_next_header(in, &e);
    if (r == ARCHIVE_EOF) break;
    // ARCHIVE_RETRY: a damaged header, skipped over by the next call.
    if (r < ARCHIVE_WARN || r == ARCHIVE_RETRY)
      return Fail(ErrorCode::kInvalid, path_ + ": " + Why(A, in, "unreadable header"));
    const char* raw = A.archive_entry_pathname(e);
    bool slash = false;
    std::string name = Relative(raw ? raw : "", &slash);
    // The root itself ("./", "." or "/"): `dest` takes its metadata. A
    // layer's root is the image's, not the layer's to set.
    const bool is_root = name.empty();
    if (is_root && layer_) continue;
    if (is_root) {
      if (A.archive_entry_filetype(e) != AE_IFDIR || A.archive_entry_hardlink(e))
        return Fail(ErrorCode::kInvalid, path_ + ": entry '" + std::string(raw && *raw ? raw : ".") +
                                              "' is the root, which must be a directory; refusing the archive");
      name = ".";
      root_mtime_ = MtimeOf(A, e);
    } else {
      if (slash) slashes_.Add(raw);
      if (!newest_ || Newer(MtimeOf(A, e), *newest_)) newest_ = MtimeOf(A, e);
    }
    AE_ASSIGN(bool admitted, Admit(e, name, is_root));
    if (!admitted) continue;
    AE_TRY(Write(in, out, e, name));
  }
  return Finish(out);
}

Result<bool> Unpack::Admit(archive_entry* e, const std::string& name, bool is_root) {
  if (!is_root && !SafeRelative(name))
    return Fail(ErrorCode::kInvalid, path_ + ": entry '" + name + "' contains '..'; refusing the archive");
  if (A.archive_entry_hardlink(e)) AE_TRY(CheckHardlink(e, name));
  mode_t type = A.archive_entry_filetype(e);
  if (uint64_t h = SparseHoles(A, e); h > 0) {
    *holes_ += h;
    if (*holes_ > kMaxSparseHoles)
      return Fail(ErrorCode::kInvalid, path_ + ": entry '" + name + "' is a sparse file of " +
                                           std::to_string(A.archive_entry_size(e)) + " bytes with " +
                                           std::to_string(h) + " bytes of holes; the archive's sparse files may " +
                                           "have at most " + std::to_string(kMaxSparseHoles >> 30) +
                                           " GiB of holes in all; refusing the archive");
  }
  if (layer_) {
    AE_TRY(CheckWhiteoutName(path_, name, type));
    AE_TRY(KeepParentTime(name));
    if (IsWhiteout(name)) {
      if (name.ends_with("/.wh..wh..opq")) AE_TRY(KeepParentTime(name.substr(0, name.rfind('/'))));
      AE_TRY(ApplyWhiteout(path_, name, seen_));
      return false;
    }
    if (type == AE_IFDIR) dir_times_.emplace_back(name, MtimeOf(A, e));
  }
  if ((type == AE_IFCHR || type == AE_IFBLK) && !root_) {
    if (devices_ == UnprivilegedDevices::kRefuse)
      return Fail(ErrorCode::kInvalid, path_ + ": entry '" + name +
                                           "' is a device node, which only root can create; refusing the archive");
    warn_(name + ": device node skipped (creating it needs privilege)");
    return false;
  }
  if (is_root) return true;
  // A name given twice: the last entry wins, as tar -x lets it (tar -r
  // appends a newer copy); what the earlier one made goes first.
  // A layer's entry replaces what the layers below left at its name, and
  // any entry a directory the unpack made for the entries below it.
  auto [it, fresh] = seen_.emplace(name, type);
  if (!fresh && !(type == AE_IFDIR && it->second == AE_IFDIR)) {
    if (!layer_ && repeated_.insert(name).second) twice_.Add(name);
    it->second = type;
    AE_TRY(Replace(name, type));
  } else if (fresh && (layer_ || (type != AE_IFDIR && implied_.Has(name)))) {
    AE_TRY(Replace(name, type));
  }
  AE_TRY(implied_.Before(name, type == AE_IFDIR, MtimeOf(A, e)));
  ignored_.See(name, type == AE_IFDIR);
  return true;
}

Result<void> Unpack::CheckHardlink(archive_entry* e, const std::string& name) {
  bool slash = false;
  std::string target = Relative(A.archive_entry_hardlink(e), &slash);
  if (slash) link_slashes_.Add(name + " -> " + A.archive_entry_hardlink(e));
  if (target.empty() || !SafeRelative(target))
    return Fail(ErrorCode::kInvalid, path_ + ": hardlink '" + name + "' -> '" + target +
                                         "' points outside the archive; refusing it");
  auto it = seen_.find(target);
  if (it != seen_.end() && it->second == AE_IFDIR)
    return Fail(ErrorCode::kInvalid, path_ + ": hardlink '" + name + "' -> '" + target +
                                         "' names a directory, which cannot be hardlinked; refusing the archive");
  for (size_t slash_at = target.find('/'); slash_at != std::string::npos; slash_at = target.find('/', slash_at + 1))
    if (auto up = seen_.find(target.substr(0, slash_at)); up != seen_.end() && up->second == AE_IFLNK)
      return Fail(ErrorCode::kInvalid, path_ + ": hardlink '" + name + "' -> '" + target + "' goes through symlink '" +
                                           up->first + "'; refusing the archive");
  // A tar names the first path of a link group before its links; a
  // layer's link may also name a file of the layers below.
  if (it == seen_.end() && !layer_)
    return Fail(ErrorCode::kInvalid, path_ + ": hardlink '" + name + "' -> '" + target +
                                         "' names no entry before it; refusing the archive");
  // Data on a hardlink to a symlink would be written through it.
  if (it != seen_.end() && it->second == AE_IFLNK && A.archive_entry_size(e) > 0)
    return Fail(ErrorCode::kInvalid, path_ + ": hardlink '" + name + "' -> '" + target +
                                         "' carries data for a symlink; refusing the archive");
  A.archive_entry_set_hardlink(e, target.c_str());
  return {};
}

Result<void> Unpack::Replace(const std::string& name, mode_t type) {
  AE_ASSIGN(bool exists, ExistsBelowDirs(path_, name));
  struct stat st;
  if (!exists || ::lstat(name.c_str(), &st) != 0 || (S_ISDIR(st.st_mode) && type == AE_IFDIR)) return {};
  // A directory of this archive with entries in it is not replaced:
  // GNU tar and bsdtar refuse to (a layer replaces what lower layers left).
  if (!layer_ && S_ISDIR(st.st_mode) && !std::filesystem::is_empty(name))
    return Fail(ErrorCode::kInvalid, path_ + ": entry '" + name +
                                         "' appears again as a non-directory, which would replace a directory "
                                         "that is not empty; refusing the archive");
  return RemoveAll(name);
}

Result<void> Unpack::Write(::archive* in, ::archive* out, archive_entry* e, const std::string& name) {
  A.archive_entry_set_pathname(e, name.c_str());
  if (!root_) owners_.Keep(A, e, name);
  acls_.Keep(A, e, name);
  int r = A.archive_write_header(out, e);
  if (r < ARCHIVE_WARN) return Unexpected<Error>(HeaderError(A, path_, name, out));
  if (r == ARCHIVE_WARN) warn_(name + ": " + Why(A, out, "warning"));
  if (A.archive_entry_size(e) > 0) {
    const void* buf;
    size_t len;
    la_int64_t off;
    while ((r = A.archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
      if (A.archive_write_data_block(out, buf, len, off) < ARCHIVE_OK)
        return Unexpected<Error>(WriteError(A, name, out));
    }
    if (r != ARCHIVE_EOF)
      return Fail(ErrorCode::kInvalid, path_ + ": " + Why(A, in, "unreadable data of '" + name + "'"));
  }
  // ARCHIVE_WARN: metadata not restored, such as ACLs where the
  // filesystem has none.
  r = A.archive_write_finish_entry(out);
  if (r < ARCHIVE_WARN) return Unexpected<Error>(WriteError(A, name, out));
  if (r == ARCHIVE_WARN) warn_(name + ": " + Why(A, out, "warning"));
  Advance(progress_, 1, uint64_t(std::max<la_int64_t>(A.archive_entry_size(e), 0)));
  return {};
}

Result<void> Unpack::KeepParentTime(const std::string& name) {
  size_t slash = name.rfind('/');
  std::string parent = slash == std::string::npos ? "." : name.substr(0, slash);
  if (kept_times_.count(parent)) return {};
  if (parent != ".") {
    AE_ASSIGN(bool exists, Reachable(parent));
    if (!exists) return {};
  }
  struct stat st;
  if (::lstat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) kept_times_.emplace(parent, st.st_mtim);
  return {};
}

Result<void> Unpack::Finish(::archive* out) {
  // Directory modes, mtimes and ACLs are applied here, after their contents.
  int closed = A.archive_write_close(out);
  if (closed < ARCHIVE_WARN) return Unexpected<Error>(WriteError(A, dest_, out));
  if (closed == ARCHIVE_WARN) warn_(dest_ + ": " + Why(A, out, "warning"));
  for (const auto& [dir, mtime] : dir_times_) kept_times_.erase(dir);
  std::vector<std::pair<std::string, timespec>> restore(kept_times_.begin(), kept_times_.end());
  restore.insert(restore.end(), dir_times_.begin(), dir_times_.end());
  for (const auto& [dir, mtime] : restore) {
    auto exists = Reachable(dir);  // never through a link the layer made later
    struct stat st;
    if (!exists || !*exists || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    struct timespec ts[2] = {{0, UTIME_OMIT}, mtime};
    if (::utimensat(AT_FDCWD, dir.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(dir, errno);
  }
  if (!layer_) {
    if (!root_mtime_ && ::chmod(".", 0755) != 0) return FailErrno(dest_, errno);
    struct timespec ts[2] = {{0, UTIME_OMIT}, root_mtime_.value_or(newest_.value_or(timespec{0, 0}))};
    if (::utimensat(AT_FDCWD, ".", ts, 0) != 0) return FailErrno(dest_, errno);
  }
  auto reachable = [this](const std::string& name) { return Reachable(name); };
  AE_TRY(implied_.Apply(reachable));
  AE_TRY(acls_.Apply(reachable, warn_));
  owners_.Report(warn_);
  if (slashes_.count())
    warn_(std::to_string(slashes_.count()) + " name(s) began with '/', removed as GNU tar and bsdtar remove it: " +
          slashes_.Text());
  if (link_slashes_.count())
    warn_(std::to_string(link_slashes_.count()) + " hardlink target(s) began with '/', removed as GNU tar and "
          "bsdtar remove it: " + link_slashes_.Text());
  if (twice_.count())
    warn_(std::to_string(twice_.count()) + " name(s) appear more than once (an archive appended to with tar -r): "
          "the last entry of each wins, as tar -x lets it: " + twice_.Text());
  ignored_.Report(warn_);
  return {};
}

// Unpacks the archive `path` (read from `fd` when it is not -1) into
// `dest`; `holes`: the holes of sparse entries so far.
Result<void> Extract(const std::string& path, int fd, const std::string& dest,
                     const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                     bool layer, Progress* progress, uint64_t* holes, const snap::PathFilter& ignored) {
  BeginPhase(progress, "unpacking");
  AE_ASSIGN(const ArchiveLib* lib, LoadArchiveLib());
  const ArchiveLib& A = *lib;
  std::unique_ptr<TarReader> reader;
  if (fd >= 0) {
    AE_ASSIGN(reader, TarReader::Open(A, fd, path));
  } else {
    AE_ASSIGN(reader, TarReader::Open(A, path));
  }
  int flags = ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR | ARCHIVE_EXTRACT_ACL |
              ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
              ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_SPARSE;
  if (::geteuid() == 0) flags |= ARCHIVE_EXTRACT_OWNER;
  // Entered first, left last: a writer freed on an error still applies
  // the modes and times of the directories it made, relative to the
  // current directory (and "." is `dest` itself).
  AE_ASSIGN(auto cwd, WorkingDirectory::Enter(dest));
  WriteDisk out(A.archive_write_disk_new(), A.archive_write_free);
  A.archive_write_disk_set_options(out.get(), flags);
  UseNumericOwners(A, out.get());
  Unpack unpack(A, path, dest, layer, devices, warn, ignored, progress, holes);
  return unpack.Run(reader->get(), out.get());
}

}  // namespace

Result<void> ExtractTarball(const std::string& archive, const std::string& dest,
                            const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                            Progress* progress, const snap::PathFilter& ignored) {
  uint64_t holes = 0;
  return Extract(archive, -1, dest, warn, devices, false, progress, &holes, ignored);
}

Result<void> ApplyLayer(const std::string& layer, const std::string& dest,
                        const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices) {
  uint64_t holes = 0;
  return Extract(layer, -1, dest, warn, devices, true, nullptr, &holes, {});
}

Result<void> ApplyLayer(int fd, const std::string& layer, const std::string& dest,
                        const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                        uint64_t* sparse_holes) {
  return Extract(layer, fd, dest, warn, devices, true, nullptr, sparse_holes, {});
}

}  // namespace agentenv::archive
