#include "common/read_all.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/unique_fd.h"

namespace agentenv {

Result<std::string> ReadUpTo(int fd, std::string_view path, size_t limit) {
  std::string out;
  char buf[65536];
  while (out.size() < limit) {
    ssize_t n = ::read(fd, buf, std::min(sizeof buf, limit - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno(path, errno);
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

Result<std::string> ReadFileUpTo(const std::string& path, size_t limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return FailErrno(path, errno);
  return ReadUpTo(fd.get(), path, limit);
}

}  // namespace agentenv
