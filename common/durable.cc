#include "common/durable.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.h"
#include "common/write_all.h"

namespace agentenv {

Result<void> FsyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd || ::fsync(fd.get()) != 0) return FailErrno(dir, errno);
  return {};
}

Result<void> WriteFileDurably(const std::string& dir, const std::string& name, std::string_view data, mode_t mode) {
  std::string tmp = dir + "/." + name + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd) return FailErrno(tmp, errno);
  struct Unlink {
    const std::string& path;
    bool armed = true;
    ~Unlink() {
      if (armed) ::unlink(path.c_str());
    }
  } unlink_tmp{tmp};
  if (::fchmod(fd.get(), mode) != 0) return FailErrno(tmp, errno);
  AE_TRY(WriteAll(fd.get(), data.data(), data.size(), tmp));
  if (::fsync(fd.get()) != 0) return FailErrno(tmp, errno);
  std::string path = dir + "/" + name;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return FailErrno(path, errno);
  unlink_tmp.armed = false;
  return FsyncDir(dir);
}

}  // namespace agentenv
