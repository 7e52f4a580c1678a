// agentenv supervise: an agent run inside the environment with automatic capture and both
// control sockets (the operator's and the agent's).
#include <iostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "serve/mcp.h"
#include "serve/shell.h"
#include "serve/supervise.h"

namespace agentenv::cli {

int CmdSupervise(int argc, char** argv) {
  Globals g;
  serve::SuperviseOptions opt;
  CLI::App app{"Run an agent inside the environment with automatic capture and both control sockets; an "
               "operator rollback (agentenv ctl rollback ref=...) kills every process of the env, restores "
               "and relaunches the agent; the agent's own rollback (socket /run/agentenv.sock inside) "
               "restores in place", "supervise"};
  AddGlobals(app, g);
  app.add_option("--workspace", opt.workspace, "Run the agent in this workspace (see fork) and capture the workspace "
                                               "automatically from its overlay's upper; the live tree is left alone");
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

}  // namespace agentenv::cli
