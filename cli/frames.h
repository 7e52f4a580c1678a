// Encoding of exec's output frames: chunks of raw bytes travel as UTF-8
// text when they are valid UTF-8, else as base64 (RFC 4648, padded).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace agentenv::cli {

// Length of the longest prefix of s made of whole valid UTF-8 characters
// (no overlongs, no surrogates); *tail_ok: what follows is an incomplete
// but so far valid character (a read split it).
size_t Utf8Prefix(std::string_view s, bool* tail_ok);

std::string Base64Encode(std::string_view s);

// nullopt when s is not padded base64.
std::optional<std::string> Base64Decode(std::string_view s);

}  // namespace agentenv::cli
