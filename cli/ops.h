// The control-plane operations shared by the daemon socket (`agentenv
// daemon`, `agentenv ctl`) and the MCP server (`agentenv mcp`): one JSON
// request shape, one JSON result shape, one implementation.
#pragma once

#include <nlohmann/json.hpp>

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

}  // namespace agentenv::cli
