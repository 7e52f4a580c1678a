// agentenv workspace: list workspaces (workspace ls) or remove one (workspace rm NAME; its
// snapshots stay).
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdWorkspace(int argc, char** argv) {
  Globals g;
  std::string name;
  CLI::App app{"List workspaces (workspace ls) or remove one (workspace rm NAME; its snapshots stay)", "workspace"};
  AddGlobals(app, g);
  app.require_subcommand(1);
  auto* ls = app.add_subcommand("ls", "List workspaces");
  auto* rm = app.add_subcommand("rm", "Remove a workspace and its unsnapshotted changes");
  rm->add_option("name", name, "Workspace")->required();
  for (auto* sub : {ls, rm}) {
    sub->add_option("--root", g.root, "Repository root");
    sub->add_flag("--json", g.json, "Print one JSON object on stdout");
    sub->add_flag("-q,--quiet", g.quiet, "No summary on success");
  }
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  if (rm->parsed())
    return Print(g, client.Call(control::WorkspaceRmRequest{name}),
                 [](const control::WorkspaceRmReply& r) {
                   return r.existed ? "removed workspace " + r.removed
                                    : "workspace " + r.removed + ": already gone, nothing to remove";
                 });
  g.data = true;  // a listing: -q keeps it
  return Print(g, client.Call(control::WorkspacesRequest{}), [](const control::WorkspacesReply& r) {
    std::string text;
    for (const auto& w : r.workspaces) text += WorkspaceLine(w) + "\n";
    return text.empty() ? std::string("no workspaces (agentenv fork REF makes one)") : text;
  });
}

}  // namespace agentenv::cli
