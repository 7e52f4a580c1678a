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
    return {};
  }
  // The file tools read a node, or else the live tree, which a workspace's
  // endpoint must not reach: there they read nodes only and write nothing.
  for (const char* reader : {"read_file", "list_dir", "search"}) {
    auto ref = args->find("ref");
    if (op.name == reader && (ref == args->end() || !ref->is_string() || ref->get<std::string>().empty()))
      return Fail(ErrorCode::kInvalid, op.name + " on workspace '" + env +
                                           "' reads its nodes only: give ref= (a node of its log), or exec in it");
  }
  // Tools that act on the live tree and have no workspace form.
  for (const char* live : {"status", "spawn", "import", "tournament", "write_file"})
    if (op.name == live)
      return Fail(ErrorCode::kInvalid, op.name + " acts on the live tree, not on workspace '" + env +
                                           "': call it on the live tree's endpoint /mcp");
  return {};
}

}  // namespace agentenv::serve
