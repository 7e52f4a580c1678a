// agentenv restore: put the live tree, or a workspace, back to a node
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdRestore(int argc, char** argv) {
  Globals g;
  control::RollbackRequest req;
  CLI::App app{"Put the live tree back to a node; uncommitted changes are first saved as a node", "restore"};
  AddGlobals(app, g);
  std::string at;
  auto* ref = app.add_option("ref", req.ref, "Node: id, id prefix, tag, HEAD, HEAD~N, @{10 minutes ago}");
  app.add_option("--at", at, "The newest node at or before this time: \"10 minutes ago\", \"2026-11-23 14:00\"")
      ->excludes(ref);
  app.add_option("paths", req.paths, "Only these tree-relative paths (after --); the rest of the live tree stays");
  app.add_option("--workspace", req.workspace,
                 "Put workspace NAME back instead, whole (HEAD~N counts along its lane)");
  bool in_place = false;
  app.add_flag("--in-place", in_place,
               "Rewrite what differs even where the node's btrfs snapshot could replace the live tree");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (!at.empty()) req.ref = "@{" + at + "}";
  if (in_place) req.in_place = true;
  if (req.ref.empty())
    return ReportError(g, Error{"restore: which node? (REF, or --at TIME)", 0, ErrorCode::kInvalid});
  control::Client client(g.root);
  auto result = WithProgress(g, client, [&] { return client.Call(req); });
  return Print(g, result, [&](const control::RollbackReply& r) {
    std::string text = Warnings(r.warnings);
    if (r.saved) text += "saved uncommitted changes as " + r.saved->substr(0, 12) + "\n";
    if (!req.workspace.empty())
      return text + "workspace " + req.workspace + " is at " + r.node.short_id + " \"" + r.node.title + "\"";
    if (r.swapped) return text + "restored " + r.node.short_id + " \"" + r.node.title + "\": swapped in its snapshot";
    if (r.not_swapped) text += "restoring in place: " + *r.not_swapped + "\n";
    return text + "restored " + r.node.short_id + " \"" + r.node.title + "\": wrote " + std::to_string(r.files_written) +
           " files (" + HumanBytes(r.bytes_written) +
           (r.files_cloned ? ", " + std::to_string(r.files_cloned) + " reflinked" : "") + "), created " +
           std::to_string(r.created) + " and removed " + std::to_string(r.removed) + " entries" +
           (r.meta_updated ? ", put back the metadata of " + std::to_string(r.meta_updated) : "");
  });
}

}  // namespace agentenv::cli
