// agentenv head: show the current node (HEAD)
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdHead(int argc, char** argv) {
  Globals g;
  g.data = true;  // -q keeps what it prints: the data asked for
  CLI::App app{"Show the current node (HEAD)", "head"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, client.Call(control::HeadRequest{}), [](const control::HeadReply& r) { return NodeLine(r.node); });
}

}  // namespace agentenv::cli
