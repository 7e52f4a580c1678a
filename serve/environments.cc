// Environments and their MCP endpoints (serve/environments.h).
#include "serve/environments.h"

#include <regex>

namespace agentenv::serve {

std::string EndpointPath(const std::string& env) { return env.empty() ? "/mcp" : "/w/" + env + "/mcp"; }

std::optional<std::string> WorkspaceOfPath(std::string_view path) {
  static const std::regex pattern(kWorkspaceEndpointPattern);
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(path.begin(), path.end(), m, pattern)) return std::nullopt;
  return m[1].str();
}

Result<void> ScopeToEnvironment(const std::string& env, const control::OpSpec& op, nlohmann::json* args,
                                bool confined) {
  if (env.empty()) {
    auto it = args->find("workspace");
    if (confined && it != args->end() && !(it->is_null() || (it->is_string() && it->get<std::string>().empty())))
      return Fail(ErrorCode::kInvalid, op.name + ": this endpoint serves the live tree only; leave 'workspace' out");
    return {};
  }
  const auto& props = op.input_schema.value("properties", nlohmann::json::object());
  if (props.contains("workspace")) {
    auto it = args->find("workspace");
    if (it == args->end() || it->is_null() || (it->is_string() && it->get<std::string>().empty())) {
      (*args)["workspace"] = env;
    } else if (!it->is_string() || it->get<std::string>() != env) {
      return Fail(ErrorCode::kInvalid, op.name + ": this endpoint serves workspace '" + env +
                                           "' only; leave 'workspace' out (or name '" + env + "')");
    }
  }
  return {};
}

}  // namespace agentenv::serve
