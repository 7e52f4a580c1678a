// mcp, supervise and shell: long-running commands whose work is in
// control/ (mcp.h, supervisor.h, shell.h).
#include <iostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "serve/mcp.h"
#include "serve/shell.h"
#include "serve/supervise.h"

namespace agentenv::cli {

int CmdMcp(int argc, char** argv) {
  Globals g;
  CLI::App app{"Serve the repository's tools to a model over MCP (stdio, JSON-RPC 2.0, one message per line)", "mcp"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  serve::ServeMcp(g.root, std::cin, std::cout);
  return kExitOk;
}

int CmdSupervise(int argc, char** argv) {
  Globals g;
  serve::SuperviseOptions opt;
  CLI::App app{"Run an agent inside the environment with automatic capture and both control sockets; an "
               "operator rollback (agentenv ctl rollback ref=...) kills every process of the env, restores "
               "and relaunches the agent; the agent's own rollback (socket /run/agentenv.sock inside) "
               "restores in place", "supervise"};
  AddGlobals(app, g);
  app.add_option("--network", opt.network, "allow or deny")->check(CLI::IsMember({"allow", "deny"}));
  app.add_option("--quiet-ms", opt.capture.quiet_ms, "Capture quiet period (default 300)");
  app.add_option("--max-delay-ms", opt.capture.max_delay_ms, "Capture maximum delay (default 3000)");
  uint64_t disk = 0;
  app.add_option("--disk", disk, "Not enforced by supervise: refused with the reason")->transform(CLI::AsSizeValue(false));
  app.add_option("command", opt.argv, "Agent command and arguments (after --)")->required();
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (disk)
    return ReportError(g, Fail(ErrorCode::kUnsupported,
                               "supervise --disk: the agent writes the live tree itself, where the automatic capture "
                               "sees its changes as they happen; no rootless limit holds those writes (a tmpfs "
                               "upper would hide them from the capture). Run the agent's commands with agentenv "
                               "exec --disk, or in a workspace (agentenv fork --disk)").error());
  auto r = serve::Supervise(g.root, opt);
  if (!r) return ReportError(g, r.error());
  return *r;
}

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
