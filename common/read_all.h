// ReadUpTo: the bytes of an open file, read to its end or to a limit.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/result.h"

namespace agentenv {

// Reads `fd` from its offset to the end, or until `limit` bytes are read
// (a caller that refuses files over N bytes passes N + 1 and checks the
// size), retrying EINTR. Errors: "<path>: <strerror>". Thread-safe.
Result<std::string> ReadUpTo(int fd, std::string_view path, size_t limit);

}  // namespace agentenv
