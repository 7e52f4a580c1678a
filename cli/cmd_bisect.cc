// agentenv bisect: the first node where a test fails, K nodes tested at a time in forked
// workspaces (trials/bisect.h).
#include <cstdio>

#include "cli/cli.h"
#include "cli/commands.h"
#include "trials/bisect.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdBisect(int argc, char** argv) {
  Globals g;
  control::BisectRequest req;
  CLI::App app{"Find the first node where --test fails on the path from --good to --bad, testing --jobs nodes at a "
               "time, each in a workspace forked from it (the live tree is untouched). The test's exit code: 0 good, "
               "125 skip, 1-127 bad, 128+ aborts (as git bisect run). Exit 0 when found, 2 when only skipped nodes "
               "are left to tell", "bisect"};
  AddGlobals(app, g);
  app.add_option("--test", req.test, "Shell command run in each tested node")->required();
  app.add_option("--good", req.good, "A node where the test passes (default: the root of --bad's history)");
  app.add_option("--bad", req.bad, "A node where it fails (default HEAD)");
  app.add_option("--jobs,-j", req.jobs, "Nodes tested at once (default 4)")->check(CLI::Range(1, 256));
  app.add_option("--timeout", req.timeout_s, "Kill a test after this many seconds (aborts the bisect)");
  app.add_option("--network", req.network, "allow or deny (default deny: loopback only)")
      ->check(CLI::IsMember({"allow", "deny"}));
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  auto r = client.Call(req);
  int printed = Print(g, r, [](const control::BisectReply& b) {
    std::string text = std::to_string(b.path) + " nodes on the path\n";
    for (size_t i = 0; i < b.rounds.size(); ++i) {
      text += "round " + std::to_string(i + 1) + ":";
      for (const auto& t : b.rounds[i].tried) text += " " + t.short_id + " " + t.verdict;
      text += "  (" + std::to_string(b.rounds[i].left) + " left)\n";
    }
    if (!b.found) {
      text += "only skipped nodes are left: the first bad node is one of";
      for (const auto& c : b.candidates) text += " " + c.substr(0, 12);
      return text;
    }
    const control::NodeInfo& n = *b.first_bad;
    text += "first bad node: " + NodeLine(n) + "\n";
    if (b.last_good) text += "last good node: " + b.last_good->substr(0, 12) + "\n";
    for (const auto& p : n.packages) text += "  package " + PackageLine(p) + "\n";
    text += "  changes +" + std::to_string(b.added) + " ~" + std::to_string(b.modified) + " -" +
            std::to_string(b.deleted) + "\n";
    for (const auto& c : b.sample) text += "    " + ChangeLine(c) + "\n";
    uint64_t total = b.added + b.modified + b.deleted;
    if (total > b.sample.size()) text += "    ... " + std::to_string(total - b.sample.size()) + " more (agentenv diff)";
    return text;
  });
  if (printed != 0 || !r) return printed;
  return r->found ? 0 : 2;
}

}  // namespace agentenv::cli
