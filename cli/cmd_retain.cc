// agentenv retain: thin history
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdRetain(int argc, char** argv) {
  Globals g;
  control::RetainRequest req;
  CLI::App app{"Thin history: keep the newest nodes and everything recent, then one node per minute for an hour, "
               "per 10 minutes for a day, per hour for a week, per day beyond; HEAD, roots, tags, branch points "
               "and tips always stay. Run gc afterwards to free the space", "retain"};
  AddGlobals(app, g);
  app.add_flag("--dry-run,-n", req.dry_run, "Only show what would be dropped");
  app.add_option("--keep-last", req.keep_last, "Always keep this many newest nodes (default 50)");
  app.add_option("--keep-within", req.keep_within_s, "Always keep nodes younger than this many seconds (default 600)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, client.Call(req), [](const control::RetainReply& r) {
    std::string text;
    if (r.dry_run) {
      for (const auto& n : r.dropped) text += "would drop " + NodeLine(n) + "\n";
      if (r.dropped_nodes > r.dropped.size())
        text += "... and " + std::to_string(r.dropped_nodes - r.dropped.size()) + " newer nodes\n";
    }
    return text + (r.dry_run ? "would drop " : "dropped ") + std::to_string(r.dropped_nodes) + " nodes, keeping " +
           std::to_string(r.kept) + (r.dry_run ? "" : "; run `agentenv gc` to free their space");
  });
}

}  // namespace agentenv::cli
