// agentenv shell: an interactive shell inside the environment on a pty, captured while it
// runs and snapshotted when it exits.
#include <iostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "serve/mcp.h"
#include "serve/shell.h"
#include "serve/supervise.h"

namespace agentenv::cli {

int CmdShell(int argc, char** argv) {
  Globals g;
  serve::ShellOptions opt;
  CLI::App app{"Open an interactive shell inside the environment (on a pty) with automatic capture while it "
               "runs and a snapshot when it exits; the shell's exit code is passed through", "shell"};
  AddGlobals(app, g);
  app.add_option("--network", opt.network, "allow or deny (deny: loopback only)")->check(CLI::IsMember({"allow", "deny"}));
  app.add_option("--cwd", opt.cwd, "Working directory inside (default /)");
  app.add_option("--quiet-ms", opt.capture.quiet_ms, "Capture quiet period (default 300)")->check(CLI::Range(10, 600000));
  app.add_option("--max-delay-ms", opt.capture.max_delay_ms, "Capture maximum delay (default 3000)")->check(CLI::Range(10, 3600000));
  app.add_option("--workspace,-w", opt.workspace, "A shell in this workspace (see fork); snapshot it on exit");
  app.add_option("command", opt.argv, "Shell to run (after --; default /bin/bash -i if the tree has it, else /bin/sh -i)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto r = serve::RunShell(g.root, opt);
  if (!r) return ReportError(g, r.error());
  json j = {{"exit_code", r->exit_code}, {"node", r->node ? json(*r->node) : json(nullptr)}};
  if (g.json) ReportOk(g, j, "");
  else if (r->node) std::fprintf(stderr, "agentenv: node %s: %s\n", r->node->substr(0, 12).c_str(), r->label.c_str());
  return r->exit_code;
}

}  // namespace agentenv::cli
