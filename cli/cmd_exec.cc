// agentenv exec: one command inside the environment on this terminal, then
// a snapshot (through the daemon when one serves the root).
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdExec(int argc, char** argv) {
  Globals g;
  control::TerminalExecRequest req;
  bool no_snap = false;
  CLI::App app{"Run one command inside the environment (rootless namespaces, the live tree as /) and snapshot "
               "the tree when it ends, labelled with the command; the command's exit code is passed through", "exec"};
  AddGlobals(app, g);
  app.add_option("--network", req.network, "allow or deny (deny: loopback only)")->check(CLI::IsMember({"allow", "deny"}));
  app.add_option("--cwd", req.cwd, "Working directory inside (default /)");
  app.add_option("--timeout", req.timeout_s, "Kill the whole process tree after this many seconds");
  app.add_flag("--no-snap", no_snap, "Do not snapshot afterwards");
  app.add_option("--workspace,-w", req.workspace, "Run in this workspace (see fork) and snapshot it");
  app.add_option("--disk", req.disk_bytes, "Bytes the command may write (500M, 2G; at least 1M): past it writes fail "
                 "with ENOSPC inside; held in memory (tmpfs) until the command ends. Default: the workspace's, "
                 "else the repository's (agentenv config disk)")->transform(CLI::AsSizeValue(false));
  app.add_option("command", req.argv, "Command and arguments (after --)")->required();
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  req.snapshot = !no_snap;
  req.capture = g.json;
  control::Client client(g.root);
  auto r = control::ExecOnTerminal(client, req);
  if (!r) return ReportError(g, r.error());
  if (g.json) ReportOk(g, control::ToJson(*r), "");
  else if (!r->error.empty()) std::fprintf(stderr, "agentenv: %s\n", r->error.c_str());
  else if (r->node) std::fprintf(stderr, "agentenv: node %s: %s\n", r->node->substr(0, 12).c_str(), r->label.c_str());
  return r->signal ? 128 + r->signal : r->exit_code;
}

}  // namespace agentenv::cli
