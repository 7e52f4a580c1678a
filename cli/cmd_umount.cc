// agentenv umount: unmounts a view that `agentenv mount REF DIR` made and releases its
// materialized node.
#include <algorithm>
#include <cstring>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"
#include "mounts/views.h"

namespace agentenv::cli {

int CmdUmount(int argc, char** argv) {
  Globals g;
  control::UmountRequest req;
  CLI::App app{"Unmount a view that `agentenv mount REF DIR` made and release its materialized node", "umount"};
  AddGlobals(app, g);
  app.add_option("dir", req.dir, "Where the view is mounted")->required();
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, client.Call(req), [](const control::UmountReply& r) {
    return "unmounted " + r.unmounted.dir + " (" + r.unmounted.node.substr(0, 12) + ")";
  });
}

}  // namespace agentenv::cli
