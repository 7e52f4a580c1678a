// Text encodings shared by every module: UTF-8 validation and base64
// (RFC 4648, padded). Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace agentenv {

// Length of the longest prefix of s made of whole valid UTF-8 characters
// (no overlongs, no surrogates); *tail_ok: what follows is an incomplete
// but so far valid character (a read split it).
size_t Utf8Prefix(std::string_view s, bool* tail_ok);

std::string Base64Encode(std::string_view s);

// nullopt when s is not padded base64.
std::optional<std::string> Base64Decode(std::string_view s);

// Checks a name (a session id, a workspace name): 1-64 of [A-Za-z0-9._-],
// not starting with '.', so it is one path component and never "..".
// Errors: kInvalid "<kind> '<name>': ..." naming the rule.
Result<void> CheckName(std::string_view kind, const std::string& name);

}  // namespace agentenv
