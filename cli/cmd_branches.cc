// agentenv branches: show the tips of history (nodes without children), newest first
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdBranches(int argc, char** argv) {
  Globals g;
  g.data = true;  // -q keeps what it prints: the data asked for
  CLI::App app{"Show the tips of history (nodes without children), newest first", "branches"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, client.Call(control::BranchesRequest{}), [](const control::BranchesReply& r) {
    std::string text;
    for (const auto& b : r.branches) text += (b.head ? "* " : "  ") + NodeLine(b.node) + "\n";
    return text;
  });
}

}  // namespace agentenv::cli
