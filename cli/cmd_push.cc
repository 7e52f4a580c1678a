// agentenv push: push a node to an OCI registry as an image
#include <unistd.h>

#include <cstdio>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/oci.h"

namespace agentenv::cli {

int CmdPush(int argc, char** argv) {
  Globals g;
  control::PushRequest req;
  CLI::App app{"Push a node to an OCI registry as an image; layers the registry has are not sent again", "push"};
  AddGlobals(app, g);
  app.add_option("ref", req.ref, "Node to push")->required();
  app.add_option("target", req.target, "HOST[:PORT]/REPOSITORY[:TAG]")->required();
  app.add_option("--layers", req.layers, "squash, path (default) or full, as for export --oci");
  AddRegistryOptions(app, req.insecure, req.auth_file);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, control::Push(client, req, TtyProgress(g, "sent")), [](const control::PushReply& r) {
    return "pushed " + r.node.substr(0, 12) + " to " + r.target + ": " + std::to_string(r.layers) + " layer(s), " +
           std::to_string(r.blobs_sent) + " blob(s) sent (" + HumanBytes(r.bytes_sent) + "), " +
           std::to_string(r.blobs_skipped) + " already there; manifest " + r.manifest;
  });
}

}  // namespace agentenv::cli
