#include "store/nocow.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/vfs.h>

#include "common/unique_fd.h"

namespace agentenv::store {

void MarkNoCow(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct statfs fs;
  if (!fd || ::fstatfs(fd.get(), &fs) != 0 || fs.f_type != BTRFS_SUPER_MAGIC) return;
  int flags = 0;
  if (::ioctl(fd.get(), FS_IOC_GETFLAGS, &flags) != 0 || (flags & FS_NOCOW_FL)) return;
  flags |= FS_NOCOW_FL;
  ::ioctl(fd.get(), FS_IOC_SETFLAGS, &flags);  // best effort, see the header
}

}  // namespace agentenv::store
