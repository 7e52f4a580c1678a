// Frames: what a streaming op (exec) sends before its result. Chunks of
// raw bytes travel as UTF-8 text when they are valid UTF-8, else as base64
// (common/text.h).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>

namespace agentenv::control {

// Receives the frames a streaming op (exec) produces before its result;
// returns false when nobody listens any more (the op then stops its
// command). A null frame is a probe: nothing is sent, the answer is whether
// anybody still listens.
using FrameSink = std::function<bool(nlohmann::json frame)>;

}  // namespace agentenv::control
