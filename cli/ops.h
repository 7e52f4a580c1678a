// The control-plane operations shared by the daemon socket (`agentenv
// daemon`, `agentenv ctl`) and the MCP server (`agentenv mcp`): one JSON
// request shape, one JSON result shape, one implementation.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"
#include "snap/repo.h"

namespace agentenv::cli {

struct OpSpec {
  std::string name;
  std::string description;    // written for a model choosing a tool
  nlohmann::json input_schema;
  nlohmann::json output_schema;
  bool writes = false;        // changes history or the live tree
};

// Every operation, in a stable order.
const std::vector<OpSpec>& Ops();

// Runs `op` with `args` (an object) on `repo`. Errors: kInvalid for an
// unknown op or bad arguments, else whatever the repository reports.
// Thread-safe: writers serialize on the repository lock.
Result<nlohmann::json> RunOp(snap::Repo& repo, const std::string& op, const nlohmann::json& args);

// Receives the frames a streaming op (exec) produces before its result;
// returns false when nobody listens any more (the op then stops its
// command). A null frame is a probe: nothing is sent, the answer is whether
// anybody still listens.
using OpFrameSink = std::function<bool(nlohmann::json frame)>;

// RunOp for a caller that can take frames: exec streams its output to
// `emit` instead of collecting it into the result. Thread-safe.
Result<nlohmann::json> RunOpStream(snap::Repo& repo, const std::string& op, const nlohmann::json& args,
                                   const OpFrameSink& emit);

// Held by every writer of this process for its whole duration (writing
// ops, exec's command plus its snapshot, each automatic capture), so that an
// exec's changes land in the node labelled with its command.
std::mutex& WriterMutex();

}  // namespace agentenv::cli
