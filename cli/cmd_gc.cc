// agentenv gc: free the storage of objects no node reaches (shared chunks stay) and compact packs
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/client.h"

namespace agentenv::cli {

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
