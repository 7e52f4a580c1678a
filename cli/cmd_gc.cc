// retain and gc: keep huge histories bounded.
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
    if (r.dry_run)
      for (const auto& n : r.dropped) text += "would drop " + NodeLine(n) + "\n";
    return text + (r.dry_run ? "would drop " : "dropped ") + std::to_string(r.dropped.size()) + " nodes, keeping " +
           std::to_string(r.kept) + (r.dry_run ? "" : "; run `agentenv gc` to free their space");
  });
}

int CmdGc(int argc, char** argv) {
  Globals g;
  control::GcRequest req;
  CLI::App app{"Free the storage of objects no node reaches (shared chunks stay) and compact packs", "gc"};
  AddGlobals(app, g);
  app.add_option("--compact-above", req.compact_above,
                 "Rewrite packs at least this percent dead (default 50; lower frees more now, copies more)")
      ->check(CLI::Range(0.0, 100.0));
  app.add_flag("--full", req.full,
               "Recount every reference from scratch and drop everything unreferenced (objects of snapshots "
               "interrupted before their node was saved); reads every tree once");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  auto result = WithProgress(g, client, [&] { return client.Call(req); });
  return Print(g, result, [](const control::GcReply& r) {
    std::string text = "dropped " + std::to_string(r.dropped_objects) + " unreferenced objects (" +
                       HumanBytes(r.dropped_bytes) + "); freed " + HumanBytes(r.bytes_freed) + " on disk by rewriting " +
                       std::to_string(r.packs_rewritten) + " packs; " + std::to_string(r.live_objects) +
                       " objects referenced";
    if (r.stale_cache_rows)
      text += "; forgot " + std::to_string(r.stale_cache_rows) + " stat cache rows of paths gone or changed";
    if (r.lowers_removed) text += "; removed " + std::to_string(r.lowers_removed) + " materialized nodes no workspace uses";
    if (r.scratch_removed)
      text += "; removed " + std::to_string(r.scratch_removed) + " directories killed commands left (" +
              HumanBytes(r.scratch_bytes) + ")";
    if (r.leases_released)
      text += "; released " + std::to_string(r.leases_released) + " node leases of workspaces that are gone";
    if (r.counted) text += " (reference counts rebuilt: " + std::to_string(r.objects_read) + " trees and manifests read)";
    return text;
  });
}

}  // namespace agentenv::cli
