// supervise: owns history while an agent runs inside the env.
//
// Two sockets serve the same operations. The operator's socket
// (<root>/agentenv.sock) treats a rollback as "reset the world": every
// process of the env is killed, the tree restored, the agent relaunched.
// The agent's socket (<root>/agent.sock, bound at /run/agentenv.sock
// inside) restores in place and kills nothing, so the agent keeps its
// context. The supervisor itself lives outside the tree and is never
// rolled back.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "capture/capture.h"

namespace agentenv::serve {

struct SuperviseOptions {
  std::vector<std::string> argv;  // the agent
  std::string network = "allow";
  capture::CaptureOptions capture;
  // Run the agent in this workspace (its overlay as the root, its lock
  // held) instead of the live tree, and capture the workspace
  // (serve/workspace_capture.h); the live tree is left alone, and there
  // is no agent socket (the agent reaches its environment over serve's
  // /w/NAME/mcp).
  std::string workspace;
};

// Runs the agent until it exits or SIGINT/SIGTERM arrives; returns its exit
// code (128+N for signal N; 128+SIGTERM when stopped by a signal). Progress
// goes to stderr. Errors: the repository's, kBusy (a daemon serves the
// root), the env's start-up.
Result<int> Supervise(const std::string& root, const SuperviseOptions& opt);

}  // namespace agentenv::serve
