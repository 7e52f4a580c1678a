// agentenv pull: pull an image from an OCI registry as a new node (child of HEAD)
#include <unistd.h>

#include <cstdio>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/oci.h"

namespace agentenv::cli {

int CmdPull(int argc, char** argv) {
  Globals g;
  control::PullRequest req;
  CLI::App app{"Pull an image from an OCI registry as a new node (child of HEAD); the live tree is not touched: "
               "restore it to use it", "pull"};
  AddGlobals(app, g);
  app.add_option("source", req.source, "HOST[:PORT]/REPOSITORY[:TAG|@DIGEST]")->required();
  app.add_option("-m,--message", req.message, "Message of the node (default: pulled <source>)");
  AddRegistryOptions(app, req.insecure, req.auth_file);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, control::Pull(client, req, TtyProgress(g, "received")), [](const control::PullReply& r) {
    std::string text;
    for (const auto& w : r.warnings) text += "warning: " + w + "\n";
    std::string s = r.node.substr(0, 12);
    return text + "pulled " + r.source + " as " + s + " (agentenv restore " + s + " to use it)";
  });
}

}  // namespace agentenv::cli
