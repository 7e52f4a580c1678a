// Frames: what a streaming op (exec) sends before its result. Chunks of
// raw bytes travel as UTF-8 text when they are valid UTF-8, else as base64
// (common/text.h).
#pragma once

#include <nlohmann/json.hpp>

#include "run/pipeline.h"

#include <array>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

namespace agentenv::control {

// Receives the frames a streaming op produces (run/pipeline.h).
using run::FrameSink;

// What comes with a request besides its JSON arguments.
struct CallContext {
  CallContext() = default;
  // A sink alone (any callable a FrameSink takes) is the common call.
  template <class F>
    requires(!std::is_same_v<std::decay_t<F>, CallContext> && std::is_constructible_v<FrameSink, F>)
  CallContext(F&& sink) : emit(std::forward<F>(sink)) {}  // NOLINT(google-explicit-constructor)

  FrameSink emit;
  // exec only: the command's stdin, stdout and stderr are these descriptors
  // of the caller (its terminal: `agentenv exec`, passed over the socket
  // with SCM_RIGHTS, or its own in process), not pipes: its output goes
  // there, never into frames or the reply. Valid for the whole call.
  std::optional<std::array<int, 3>> stdio;
  // Who asked (the CLI, a socket client, an MCP client and its session, the
  // web DVR): recorded in the provenance of the nodes the call makes.
  snap::Requester who;
  // The MCP session making the call ("" none): the jobs it starts are its
  // own, and with !sees_all its ps and kill reach only those.
  std::string owner;
  bool sees_all = true;
  // The environment the call is made on ("" the live tree, else a
  // workspace: serve --listen's endpoint /w/NAME/mcp): its refs (HEAD,
  // HEAD~N) count along that environment's lane (control/confine.h).
  std::string env;
  // A scoped caller (a token of one environment, serve/grants.h): it sees
  // `env`'s history only, and ops with no scoped form are refused.
  bool confined = false;
};

}  // namespace agentenv::control
