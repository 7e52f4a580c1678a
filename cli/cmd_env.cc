// agentenv env ls: the environments (the live tree and each workspace, each an agent's) with
// their MCP endpoint, base, last node, running commands, disk use and the tokens that reach them.
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {
namespace {

std::string EnvLine(const control::EnvInfo& e) {
  std::string line = (e.name.empty() ? std::string("(live tree)") : e.name) + "  " + e.endpoint;
  if (!e.base.empty()) line += "  from " + e.base.substr(0, 12);
  line += "  at " + (e.last.empty() ? std::string("-") : e.last.substr(0, 12));
  line += "  " + std::to_string(e.running) + " running" + (e.busy && e.running == 0 ? " [busy]" : "");
  if (e.disk_bytes) line += "  " + HumanBytes(*e.disk_bytes) + " changed";
  std::string tokens;
  for (const auto& t : e.tokens) tokens += (tokens.empty() ? "" : ",") + t.id + (t.read_only ? " (read-only)" : "");
  line += "  tokens: " + (tokens.empty() ? std::string("operator only") : tokens + " + operator");
  return line;
}

}  // namespace

int CmdEnv(int argc, char** argv) {
  Globals g;
  CLI::App app{"The environments, each an agent's: the live tree (MCP at /mcp of serve --listen) and each workspace "
               "(/w/NAME/mcp), with base, last node, commands running, a workspace's disk use and the scoped tokens "
               "that reach each (env ls)",
               "env"};
  AddGlobals(app, g);
  app.require_subcommand(1);
  auto* ls = app.add_subcommand("ls", "List the environments");
  ls->add_option("--root", g.root, "Repository root");
  ls->add_flag("--json", g.json, "Print one JSON object on stdout");
  ls->add_flag("-q,--quiet", g.quiet, "No summary on success");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  g.data = true;  // a listing: -q keeps it
  return Print(g, client.Call(control::EnvLsRequest{}), [](const control::EnvLsReply& r) {
    std::string text;
    for (const auto& e : r.environments) text += EnvLine(e) + "\n";
    return text;
  });
}

}  // namespace agentenv::cli
