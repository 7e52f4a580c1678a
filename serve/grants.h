// Who may do what on `serve --listen`: the bearer token of a request
// turned into a Grant, once, for every surface on the listener (MCP's
// endpoints, the web DVR).
//   - the operator's token (<root>/http-token, --token-file) reaches
//     every environment and every operation;
//   - a scoped token (control/tokens.h) reaches its environment's MCP
//     endpoint only: /mcp for the live tree, /w/NAME/mcp for workspace
//     NAME. Anything else is 403, the same answer whether or not what it
//     asked for exists. A read-only one reads history and files and runs
//     and changes nothing; no scoped token runs the operator's
//     maintenance (retain, gc, workspace_rm, mounts, push, import) nor
//     lists the environments (env_ls).
// On a listener without a token (loopback, no --token-file) a request
// without one is the operator's, as before scoped tokens.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "control/ops.h"

namespace agentenv::serve {

struct Grant {
  bool is_operator = false;
  std::string env;       // scoped: "" the live tree, else a workspace
  bool read_only = false;
  std::string token_id;  // scoped: the token's id; "" for the operator
  // The operator's only because the listener requires no token: such a
  // client sees its own processes only (several share the listener).
  bool implicit = false;
};

class Grants {
 public:
  // `operator_token` empty: the listener requires none.
  Grants(std::string root, std::string operator_token);
  // The grant of the Authorization header value `authorization` ("" when
  // none was sent), or nullopt for a token that is none of this server's
  // (or expired, or revoked). Reads <root>/tokens. Thread-safe.
  std::optional<Grant> Authorize(std::string_view authorization) const;
  // The HTTP status that refuses `authorization` on `path` (0: it passes
  // this far): 401 for an unknown token, 403 for a scoped token outside
  // its environment's endpoint. For the listener's guard. Thread-safe.
  int Refuses(std::string_view authorization, std::string_view path) const;

 private:
  std::string root_;
  std::string operator_token_;
};

// Whether `grant` reaches environment `env`'s endpoint.
bool Reaches(const Grant& grant, const std::string& env);
// Whether `grant` may call `op`: kInvalid saying why not. Pure.
Result<void> MayCall(const Grant& grant, const control::OpSpec& op);

}  // namespace agentenv::serve
