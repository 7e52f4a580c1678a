// agentenv show: show one node
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdShow(int argc, char** argv) {
  Globals g;
  g.data = true;  // -q keeps what it prints: the data asked for
  control::ShowRequest req;
  req.packages = true;
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
    for (const auto& p : n.packages) text += "package  " + PackageLine(p) + "\n";
    if (!n.packages_omitted.empty()) text += "package  ... more not listed: " + n.packages_omitted + "\n";
    text += "changes  +" + std::to_string(d.added) + " ~" + std::to_string(d.modified) + " -" + std::to_string(d.deleted) + "\n";
    for (const auto& c : d.sample) text += "  " + ChangeLine(c) + "\n";
    uint64_t total = d.added + d.modified + d.deleted;
    if (total > d.sample.size()) text += "  ... " + std::to_string(total - d.sample.size()) + " more (agentenv diff)\n";
    return text;
  });
}

}  // namespace agentenv::cli
