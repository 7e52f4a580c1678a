// Encoding of exec's output frames: chunks of raw bytes travel as UTF-8
// text when they are valid UTF-8, else as base64 (RFC 4648, padded).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace agentenv::control {

// Receives the frames a streaming op (exec) produces before its result;
// returns false when nobody listens any more (the op then stops its
// command). A null frame is a probe: nothing is sent, the answer is whether
// anybody still listens.
using FrameSink = std::function<bool(nlohmann::json frame)>;

// Length of the longest prefix of s made of whole valid UTF-8 characters
// (no overlongs, no surrogates); *tail_ok: what follows is an incomplete
// but so far valid character (a read split it).
size_t Utf8Prefix(std::string_view s, bool* tail_ok);

std::string Base64Encode(std::string_view s);

// nullopt when s is not padded base64.
std::optional<std::string> Base64Decode(std::string_view s);

}  // namespace agentenv::control
