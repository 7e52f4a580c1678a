// agentenv tournament: candidate commands run in parallel, each in a workspace forked from
// --base, then --test in each; the first to pass wins.
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {
namespace {

std::string Code(const std::optional<int>& c) { return c ? std::to_string(*c) : "-"; }

}  // namespace

int CmdTournament(int argc, char** argv) {
  Globals g;
  control::TournamentRequest req;
  bool no_apply = false;
  CLI::App app{"Run candidate commands in parallel, each in a workspace forked from --base, then --test in each; "
               "the first candidate to pass wins and is applied to the live tree (unsaved changes saved first). "
               "Every candidate stays in history as a branch. Exit 1 when none passes", "tournament"};
  AddGlobals(app, g);
  app.add_option("--base", req.base, "Node to fork the candidates from (default HEAD)");
  app.add_option("--test", req.test, "Shell command run after each candidate; exit 0 passes")->required();
  app.add_option("--jobs,-j", req.jobs, "Candidates run at once (default 4)")->check(CLI::Range(1, 256));
  app.add_option("--timeout", req.timeout_s, "Kill a command after this many seconds");
  app.add_option("--network", req.network, "allow or deny (deny: loopback only)")->check(CLI::IsMember({"allow", "deny"}));
  app.add_option("--keep", req.keep, "Workspaces kept afterwards: winner (default) or all")->check(CLI::IsMember({"winner", "all"}));
  app.add_flag("--no-apply", no_apply, "Do not restore the live tree to the winner");
  app.add_option("--disk", req.disk_bytes, "Bytes each candidate's and test's command may write (500M, 2G): past it "
                 "writes fail with ENOSPC inside")->transform(CLI::AsSizeValue(false));
  app.add_option("candidates", req.candidates, "Candidate shell commands (after --)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  req.apply = !no_apply;
  control::Client client(g.root);
  auto r = client.Call(req);
  int printed = Print(g, r, [](const control::TournamentReply& t) {
    char line[512];
    std::string text = "tournament " + t.id + " from " + t.base.substr(0, 12) + "\n";
    std::snprintf(line, sizeof line, "  %-3s %-32s %5s %5s %9s %7s  %s\n", "#", "candidate", "exit", "test", "ms",
                  "changed", "node");
    text += line;
    for (const auto& c : t.candidates) {
      std::string cand = c.candidate.size() > 32 ? c.candidate.substr(0, 29) + "..." : c.candidate;
      std::snprintf(line, sizeof line, "%s %-3llu %-32s %5s %5s %9llu %7llu  %s%s\n", c.winner ? "*" : " ",
                    (unsigned long long)c.index + 1, cand.c_str(), Code(c.exit_code).c_str(),
                    Code(c.test_exit_code).c_str(), (unsigned long long)c.duration_ms,
                    (unsigned long long)c.changed, c.node ? c.node->short_id.c_str() : "-",
                    c.error.empty() ? "" : ("  " + c.error).c_str());
      text += line;
    }
    if (!t.winner) return text + "no candidate passed: nothing applied; every candidate is kept as a branch";
    const auto& w = t.candidates[*t.winner];
    text += "winner: #" + std::to_string(*t.winner + 1) + " (" + w.node->short_id + ")";
    if (t.applied) text += t.saved ? "; applied (unsaved changes saved as " + t.saved->substr(0, 12) + ")" : "; applied";
    else text += "; not applied (agentenv restore " + w.node->short_id + ")";
    return text;
  });
  if (printed != kExitOk) return printed;
  return r->winner ? kExitOk : kExitFailed;
}

}  // namespace agentenv::cli
