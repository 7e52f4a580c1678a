#include "common/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "common/sha256.h"

namespace agentenv {

Result<std::string> RandomHex(size_t bytes) {
  std::vector<uint8_t> raw(bytes);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::getrandom(raw.data() + done, bytes - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno("getrandom", errno);
    done += size_t(n);
  }
  return HexEncode(raw);
}

}  // namespace agentenv
