// agentenv fork: fork a node into a new workspace
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdFork(int argc, char** argv) {
  Globals g;
  control::ForkRequest req;
  CLI::App app{"Fork a node into a new workspace: an overlay over the node (materialized read-only once, then "
               "shared), isolated from the live tree and from other workspaces", "fork"};
  AddGlobals(app, g);
  app.add_option("ref", req.ref, "Node to fork (default HEAD)");
  app.add_option("--name", req.name, "Workspace name (default ws-<node>-<n>)");
  app.add_option("--disk", req.disk_bytes, "Bytes each command in it may write (500M, 2G): past it writes fail with "
                 "ENOSPC inside (default: the repository's, agentenv config disk)")->transform(CLI::AsSizeValue(false));
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, client.Call(req), [](const control::ForkReply& r) {
    return "workspace " + r.workspace.name + " from " + r.workspace.base.substr(0, 12) + " (" + r.materialized +
           ", " + std::to_string(r.duration_ms) + " ms); use it: agentenv exec --workspace " + r.workspace.name +
           " -- CMD";
  });
}

}  // namespace agentenv::cli
