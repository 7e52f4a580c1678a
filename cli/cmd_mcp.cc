// agentenv mcp: the repository's tools for a model over MCP on stdio (JSON-RPC 2.0, one message
// per line).
#include <iostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "serve/mcp.h"
#include "serve/shell.h"
#include "serve/supervise.h"

namespace agentenv::cli {

int CmdMcp(int argc, char** argv) {
  Globals g;
  CLI::App app{"Serve the repository's tools to a model over MCP (stdio, JSON-RPC 2.0, one message per line)", "mcp"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  serve::ServeMcp(g.root, std::cin, std::cout);
  return kExitOk;
}

}  // namespace agentenv::cli
