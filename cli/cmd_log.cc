// agentenv log: show history, newest first
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdLog(int argc, char** argv) {
  Globals g;
  g.data = true;  // -q keeps what it prints: the data asked for
  control::LogRequest req;
  req.limit = 20;  // a terminal shows more than a model's default page
  CLI::App app{"Show history, newest first: '*' marks HEAD; the column after the time says how a command ended "
               "(exit N, signal N, timed out, cancelled; blank: fine) and 'rollback' lines are HEAD moves", "log"};
  AddGlobals(app, g);
  app.add_option("-n,--limit", req.limit, "How many nodes (default 20)");
  app.add_option("--grep", req.grep, "Only nodes whose title or package deltas hold this text (any case)");
  bool digest = false;
  control::DigestRequest dreq;
  app.add_flag("--digest", digest, "A span of history in one page (default: the last day): phases, packages, "
                                   "rollbacks, tournaments, tags");
  app.add_option("--since", dreq.since, "With --digest: from this time (\"2 hours ago\", \"YYYY-MM-DD HH:MM\")");
  app.add_option("--until", dreq.until, "With --digest: up to this time (default now)");
  app.add_option("--max-tokens", dreq.max_tokens, "With --digest: budget of the page, as characters / 4 (default 2000)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  if (digest) return Print(g, client.Call(dreq), [](const control::DigestReply& r) { return r.text; });
  return Print(g, client.Call(req), [&req](const control::LogReply& r) {
    std::string text;
    size_t op = 0;  // both lists are newest first: a HEAD move goes above the nodes older than it
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      const auto& n = r.nodes[i];
      for (; op < r.operations.size() && r.operations[op].time_ns >= n.node.time_ns; ++op)
        text += OperationLine(r.operations[op]) + "\n";
      text += std::string(n.head ? "* " : "  ") + n.node.short_id + "  " + n.node.time + "  " + OutcomeColumn(n.node) +
              " " + (n.node.damaged ? "[damaged] " : "") + n.node.title;
      if (!n.tags.empty()) text += "  [" + n.tags + "]";
      bool next_is_parent = i + 1 < r.nodes.size() && n.node.parent && r.nodes[i + 1].node.id == *n.node.parent;
      if (n.node.parent && !next_is_parent) text += "  (parent " + n.node.parent->substr(0, 12) + ")";
      text += "\n";
    }
    for (; op < r.operations.size(); ++op) text += OperationLine(r.operations[op]) + "\n";
    if (r.more) text += "... older nodes not shown (agentenv log -n " + std::to_string(req.limit * 10) + ")\n";
    if (r.nodes.empty() && !r.more) return std::string(req.grep.empty() ? "no snapshots yet" : "no node matches");
    return text;
  });
}

}  // namespace agentenv::cli
