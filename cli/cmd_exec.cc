// agentenv exec: one command inside the environment, then a snapshot.
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/routed.h"
#include "runner/runner.h"

namespace agentenv::cli {

int CmdExec(int argc, char** argv) {
  Globals g;
  std::vector<std::string> cmd;
  std::string network = "allow", cwd = "/";
  double timeout_s = 0;
  bool no_snap = false;
  CLI::App app{"Run one command inside the environment (rootless namespaces, the live tree as /) and snapshot "
               "the tree when it ends, labelled with the command; the command's exit code is passed through", "exec"};
  AddGlobals(app, g);
  app.add_option("--network", network, "allow or deny (deny: loopback only)")->check(CLI::IsMember({"allow", "deny"}));
  app.add_option("--cwd", cwd, "Working directory inside (default /)");
  app.add_option("--timeout", timeout_s, "Kill the whole process tree after this many seconds");
  app.add_flag("--no-snap", no_snap, "Do not snapshot afterwards");
  app.add_option("command", cmd, "Command and arguments (after --)")->required();
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  runner::EnvSpec spec;
  spec.root = (*repo)->work_dir();
  spec.argv = cmd;
  spec.cwd = cwd;
  spec.network = network == "deny" ? runner::Network::kDeny : runner::Network::kAllow;
  spec.stdio = g.json ? runner::Stdio::kCapture : runner::Stdio::kInherit;
  spec.limits.timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
  auto run = runner::Run(spec);
  if (!run) return ReportError(g, run.error());
  std::string line;
  for (const auto& a : cmd) line += (line.empty() ? "" : " ") + a;
  nlohmann::json j = {{"exit_code", run->exit_code}, {"signal", run->signal}, {"timed_out", run->timed_out}};
  if (g.json) {
    j["stdout"] = run->out;
    j["stderr"] = run->err;
  }
  j["node"] = nullptr;
  if (!no_snap) {
    std::string label = "exec: " + line.substr(0, 180);
    auto s = CallLocked(g, "snap", {{"label", label}}, repo->get());
    if (!s) return ReportError(g, s.error());
    std::string node = s->json["node"].is_object() ? s->json["node"].value("id", "") : "";
    if (!node.empty()) j["node"] = node;
    if (!g.json && !node.empty()) std::fprintf(stderr, "agentenv: node %s: %s\n", node.substr(0, 12).c_str(), label.c_str());
  }
  if (g.json) ReportOk(g, j, "");
  if (run->signal) return 128 + run->signal;
  return run->exit_code;
}

}  // namespace agentenv::cli
