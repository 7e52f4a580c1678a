// agentenv exec: one command inside the environment on this terminal, then
// a snapshot labelled with it. The command runs where every exec runs: at
// the daemon when one serves the root (this terminal passed to it, so the
// daemon's writer lock holds from the command's start to its node), else
// in this process.
#include <unistd.h>

#include <cstdlib>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

extern char** environ;

namespace agentenv::cli {

int CmdExec(int argc, char** argv) {
  Globals g;
  control::ExecRequest req;
  bool no_snap = false;
  double timeout_s = 0;
  std::string cwd = "/";
  CLI::App app{"Run one command inside the environment (rootless namespaces, the live tree as /) and snapshot "
               "the tree when it ends, labelled with the command; the command's exit code is passed through", "exec"};
  AddGlobals(app, g);
  app.add_option("--network", req.network, "allow or deny (deny: loopback only)")->check(CLI::IsMember({"allow", "deny"}));
  app.add_option("--cwd", cwd, "Working directory inside (default /)");
  app.add_option("--timeout", timeout_s, "Kill the whole process tree after this many seconds");
  app.add_flag("--no-snap", no_snap, "Do not snapshot afterwards");
  app.add_option("--workspace,-w", req.workspace, "Run in this workspace (see fork) and snapshot it");
  app.add_option("--disk", req.disk_bytes, "Bytes the command may write (500M, 2G; at least 1M): past it writes fail "
                 "with ENOSPC inside; held in memory (tmpfs) until the command ends. Default: the workspace's, "
                 "else the repository's (agentenv config disk)")->transform(CLI::AsSizeValue(false));
  app.add_option("command", req.argv, "Command and arguments (after --)")->required();
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  req.snapshot = !no_snap;
  req.cwd = cwd;
  req.timeout_s = timeout_s;  // none unless asked
  req.output_cap = 0;         // --json keeps all of it
  // The terminal's settings, not the daemon's.
  for (char** e = environ; *e; ++e) {
    std::string_view kv = *e;
    std::string_view name = kv.substr(0, kv.find('='));
    if (name == "TERM" || name == "LANG" || name.starts_with("LC_"))
      req.env[std::string(name)] = std::string(kv.substr(name.size() + 1));
  }
  control::CallContext call;
  if (!g.json) call.stdio = std::array<int, 3>{0, 1, 2};
  control::Client client(g.root);
  auto r = client.Call(req, call);
  if (!r) return ReportError(g, r.error());
  if (g.json) ReportOk(g, control::ToJson(*r), "");
  else if (r->node) std::fprintf(stderr, "agentenv: node %s: %s\n", r->node->short_id.c_str(), r->node->title.c_str());
  if (r->timed_out && !g.json) std::fprintf(stderr, "agentenv: timed out; every process was killed\n");
  return r->signal ? 128 + r->signal : r->exit_code.value_or(kExitFailed);
}

}  // namespace agentenv::cli
