// show and diff: what a node is and what changed.
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdShow(int argc, char** argv) {
  Globals g;
  control::ShowRequest req;
  CLI::App app{"Show one node: message, label, parent, sizes and the paths it changed", "show"};
  AddGlobals(app, g);
  app.add_option("ref", req.ref, "Node (default HEAD)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, client.Call(req), [](const control::ShowReply& r) {
    const control::NodeInfo& n = r.node;
    std::string text = "node     " + n.id + "\n";
    if (n.damaged) text += "DAMAGED  " + n.damage + "\n";
    if (!r.details) return text;
    const control::NodeDetails& d = *r.details;
    if (n.parent) text += "parent   " + *n.parent + "\n";
    text += "time     " + n.time + "\n";
    if (!d.message.empty()) text += "message  " + d.message + "\n";
    if (!d.label.empty()) text += "label    " + d.label + "\n";
    text += "tree     " + d.tree + "\n";
    text += "files    " + std::to_string(d.files) + " (" + HumanBytes(d.logical_bytes) + ")\n";
    text += "changes  +" + std::to_string(d.added) + " ~" + std::to_string(d.modified) + " -" + std::to_string(d.deleted) + "\n";
    for (const auto& c : d.sample) text += "  " + ChangeLine(c) + "\n";
    uint64_t total = d.added + d.modified + d.deleted;
    if (total > d.sample.size()) text += "  ... " + std::to_string(total - d.sample.size()) + " more (agentenv diff)\n";
    return text;
  });
}

int CmdDiff(int argc, char** argv) {
  Globals g;
  std::vector<std::string> refs;
  control::DiffRequest req;
  req.limit = 1000;
  CLI::App app{"Show changed paths: diff A B (two nodes), diff A (node vs live tree), diff (HEAD vs live tree)", "diff"};
  AddGlobals(app, g);
  app.add_option("refs", refs, "Zero, one or two nodes")->expected(0, 2);
  app.add_option("-n,--limit", req.limit, "Show at most this many paths (default 1000)");
  app.add_option("--workspace,-w", req.workspace, "Diff this workspace instead of the live tree (HEAD: its last node)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (!refs.empty()) req.from = refs[0];
  if (refs.size() == 2) req.to = refs[1];
  control::Client client(g.root);
  return Print(g, client.Call(req), [](const control::DiffReply& r) {
    if (r.total == 0) return std::string("no differences");
    std::string text;
    for (const auto& c : r.changes) text += ChangeLine(c) + "\n";
    if (r.truncated) text += "... " + std::to_string(r.total - r.changes.size()) + " more (use -n)\n";
    return text;
  });
}

}  // namespace agentenv::cli
