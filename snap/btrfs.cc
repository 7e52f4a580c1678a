#include "snap/btrfs.h"

#include <btrfsutil.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>

#include <cerrno>

#include "common/unique_fd.h"

namespace agentenv::snap::btrfs {
namespace {

// libbtrfsutil sets errno with its own code; the errno says more.
Unexpected<Error> FailUtil(const std::string& path, btrfs_util_error err) {
  if (err == BTRFS_UTIL_ERROR_NOT_BTRFS)
    return Fail(ErrorCode::kUnsupported, path + ": not on a btrfs filesystem");
  if (err == BTRFS_UTIL_ERROR_NOT_SUBVOLUME)
    return Fail(ErrorCode::kUnsupported, path + ": not a btrfs subvolume");
  int e = errno;
  if (e == 0) return Fail(path + ": " + btrfs_util_strerror(err));
  auto f = FailErrno(path, e);
  if (e == EEXIST) f.error().code = ErrorCode::kExists;
  return f;
}

}  // namespace

bool OnBtrfs(const std::string& path) {
  struct statfs fs;
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == BTRFS_SUPER_MAGIC;
}

bool IsSubvolume(const std::string& path) { return btrfs_util_is_subvolume(path.c_str()) == BTRFS_UTIL_OK; }

Result<void> CreateSubvolume(const std::string& path) {
  errno = 0;
  btrfs_util_error err = btrfs_util_create_subvolume(path.c_str(), 0, nullptr, nullptr);
  if (err != BTRFS_UTIL_OK) return FailUtil(path, err);
  return {};
}

Result<void> Snapshot(const std::string& src, const std::string& dst, bool read_only) {
  errno = 0;
  int flags = read_only ? BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY : 0;
  btrfs_util_error err = btrfs_util_create_snapshot(src.c_str(), dst.c_str(), flags, nullptr, nullptr);
  if (err != BTRFS_UTIL_OK) return FailUtil(dst, err);
  return {};
}

Result<void> DeleteSubvolume(const std::string& path) {
  errno = 0;
  btrfs_util_error err = btrfs_util_delete_subvolume(path.c_str(), 0);
  if (err == BTRFS_UTIL_OK) return {};
  if (errno == EPERM || errno == EACCES)
    return Fail(ErrorCode::kUnsupported,
                path + ": deleting a subvolume needs root or the user_subvol_rm_allowed mount option");
  return FailUtil(path, err);
}

Result<Creation> Created(const std::string& path) {
  errno = 0;
  struct btrfs_util_subvolume_info info {};
  btrfs_util_error err = btrfs_util_subvolume_info(path.c_str(), 0, &info);
  if (err != BTRFS_UTIL_OK) return FailUtil(path, err);
  return Creation{info.otransid, int64_t(info.otime.tv_sec) * 1'000'000'000 + info.otime.tv_nsec};
}

Result<bool> HasNestedSubvolumes(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return FailErrno(path, errno);
  btrfs_ioctl_get_subvol_rootref_args args{};
  if (::ioctl(fd.get(), BTRFS_IOC_GET_SUBVOL_ROOTREF, &args) != 0) {
    if (errno == EOVERFLOW) return true;  // more than one buffer of them
    return FailErrno(path, errno);
  }
  return args.num_items > 0;
}

}  // namespace agentenv::snap::btrfs
