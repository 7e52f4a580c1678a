// agentenv snap: snapshot the live tree as a new node (no node when nothing changed)
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdSnap(int argc, char** argv) {
  Globals g;
  control::SnapshotRequest req;
  std::vector<std::string> paths;
  CLI::App app{"Snapshot the live tree as a new node (no node when nothing changed)", "snap"};
  AddGlobals(app, g);
  app.add_option("-m,--message", req.message, "Why: shown in log");
  app.add_option("--label", req.label, "Automatic label (default: a summary of the changes)");
  app.add_flag("--allow-empty", req.allow_empty, "Make a node even if nothing changed");
  app.add_option("paths", paths, "Only rescan these tree-relative paths (default: the whole tree)");
  app.add_option("--workspace,-w", req.workspace, "Snapshot this workspace (its changes over the node it was forked from)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (!paths.empty()) req.paths = paths;
  control::Client client(g.root);
  auto result = WithProgress(g, client, [&] { return client.Call(req); });
  return Print(g, result, [](const control::SnapshotReply& r) {
    if (!r.node) return Warnings(r.warnings) + "nothing changed; no node made";
    return Warnings(r.warnings) + "node " + r.node->short_id + ": " + r.node->title + "  (+" +
           std::to_string(r.added) + " ~" + std::to_string(r.modified) + " -" + std::to_string(r.deleted) + ")";
  });
}

}  // namespace agentenv::cli
