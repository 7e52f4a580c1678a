// Environments: the live tree, or one workspace, each served at its own
// MCP endpoint by `serve --listen` (/mcp for the live tree, /w/NAME/mcp
// for workspace NAME). A tool called on a workspace's endpoint acts on
// that workspace by default; one that can only act on the live tree is
// refused there rather than run on another agent's tree.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "control/ops.h"

namespace agentenv::serve {

// The path of environment `env`'s MCP endpoint ("" is the live tree).
std::string EndpointPath(const std::string& env);
// The regular expression (for the router) of a workspace endpoint's path;
// its first group is the name.
inline constexpr const char* kWorkspaceEndpointPattern = "/w/([A-Za-z0-9_][A-Za-z0-9._-]{0,63})/mcp";
// The workspace named by a workspace endpoint's path, or nullopt when
// `path` is not one.
std::optional<std::string> WorkspaceOfPath(std::string_view path);

// Scopes the arguments of a call to tool `op` made on environment `env`'s
// endpoint. On the live tree's ("") nothing changes, unless `confined`
// (a scoped token's call): then naming a workspace is kInvalid. A tool with a
// `workspace` argument gets `env` when it names none; naming another is
// kInvalid (an endpoint reaches its own environment only). The rest of an
// environment's rules (its refs, the tools that act on the live tree only,
// what a scoped token sees) are control's (control/confine.h), given
// CallContext::env and ::confined. Pure; thread-safe.
Result<void> ScopeToEnvironment(const std::string& env, const control::OpSpec& op, nlohmann::json* args,
                                bool confined = false);

}  // namespace agentenv::serve
