// ReadUpTo: the bytes of an open file, read to its end or to a limit;
// ReadFileUpTo: the same for a file named by its path. The one way a
// whole file is read (docs/design.md, "Durable writes, one way").
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

// Opens `path` read-only and reads it as ReadUpTo does. Errors:
// "<path>: <strerror>" with errno_value set (ENOENT for a missing file, so
// a caller that takes absence for empty can tell). Thread-safe.
Result<std::string> ReadFileUpTo(const std::string& path, size_t limit);

}  // namespace agentenv
