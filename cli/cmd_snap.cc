// snap and restore: the two writes of the core loop.
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/client.h"

namespace agentenv::cli {
namespace {

std::string Warnings(const std::vector<std::string>& ws) {
  std::string text;
  for (const auto& w : ws) text += "warning: " + w + "\n";
  return text;
}

}  // namespace

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
  return Print(g, result, [](const control::RollbackReply& r) {
    std::string text = Warnings(r.warnings);
    if (r.saved) text += "saved uncommitted changes as " + r.saved->substr(0, 12) + "\n";
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
