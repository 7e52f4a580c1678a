// Grants of the listener's tokens (serve/grants.h).
#include "serve/grants.h"

#include <strings.h>

#include "control/tokens.h"
#include "serve/environments.h"
#include "serve/http.h"
#include "snap/fsops.h"

namespace agentenv::serve {

Grants::Grants(std::string root, std::string operator_token)
    : root_(std::move(root)), operator_token_(std::move(operator_token)) {}

std::optional<Grant> Grants::Authorize(std::string_view authorization) const {
  if (authorization.empty()) {
    if (operator_token_.empty()) return Grant{true, "", false, "", true};
    return std::nullopt;
  }
  const std::string header(authorization);
  if (!operator_token_.empty() && BearerMatches(header, operator_token_)) return Grant{true};
  if (header.size() < 7 || ::strncasecmp(header.c_str(), "bearer ", 7) != 0) return std::nullopt;
  auto tokens = control::LoadTokens(root_);
  if (!tokens) return std::nullopt;
  auto t = control::FindToken(*tokens, std::string_view(header).substr(7), snap::NowNs());
  if (!t) {
    // Without an operator token a listener trusts whoever reaches it (a
    // loopback bind): an unknown token is the same as none.
    if (operator_token_.empty()) return Grant{true, "", false, "", true};
    return std::nullopt;
  }
  return Grant{false, t->env, t->read_only, t->id};
}

int Grants::Refuses(std::string_view authorization, std::string_view path) const {
  auto g = Authorize(authorization);
  if (!g) return 401;
  if (g->is_operator) return 0;
  const auto ws = WorkspaceOfPath(path);
  const std::string env = ws ? *ws : path == "/mcp" ? "" : "\n";  // "\n": no environment's endpoint
  return Reaches(*g, env) ? 0 : 403;
}

bool Reaches(const Grant& grant, const std::string& env) { return grant.is_operator || grant.env == env; }

Result<void> MayCall(const Grant& grant, const control::OpSpec& op) {
  if (grant.is_operator) return {};
  for (const char* maintenance : {"retain", "gc", "workspace_rm", "mount", "umount", "push", "import", "env_ls"})
    if (op.name == maintenance)
      return Fail(ErrorCode::kInvalid, op.name + " is the operator's: this token reaches one environment only");
  if (grant.read_only && op.writes)
    return Fail(ErrorCode::kInvalid, op.name + " changes or runs something: this token is read-only (it reads "
                                               "history and files)");
  return {};
}

}  // namespace agentenv::serve
