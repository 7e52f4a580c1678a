// Random identifiers and secrets (tokens, session ids, download ids) from
// the kernel's CSPRNG, as lowercase hex. Thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "common/result.h"

namespace agentenv {

// `bytes` random bytes from getrandom(2), hex-encoded (2 * bytes
// characters). Errors: "getrandom: <strerror>" (never a weaker source).
Result<std::string> RandomHex(size_t bytes);

}  // namespace agentenv
