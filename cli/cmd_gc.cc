// retain and gc: keep huge histories bounded.
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/routed.h"
#include "snap/fsops.h"

namespace agentenv::cli {

Result<Reply> RetainLocked(snap::Repo& repo, const nlohmann::json& args) {
  snap::RetentionPolicy policy;
  bool dry_run = args.at("dry_run").get<bool>();
  policy.keep_last = args.at("keep_last").get<decltype(policy.keep_last)>();
  policy.keep_within = std::chrono::seconds(args.at("keep_within_s").get<int64_t>());
  AE_ASSIGN(snap::RetentionResult res, repo.Retain(policy, dry_run, snap::NowNs()));
  nlohmann::json dropped = nlohmann::json::array();
  std::string text;
  for (const auto& r : res.dropped) {
    dropped.push_back(NodeJson(r));
    if (dry_run) text += "would drop " + NodeLine(r) + "\n";
  }
  text += (dry_run ? "would drop " : "dropped ") + std::to_string(res.dropped.size()) + " nodes, keeping " +
          std::to_string(res.kept) + (dry_run ? "" : "; run `agentenv gc` to free their space");
  return Reply{{{"dry_run", dry_run}, {"dropped", dropped}, {"kept", res.kept}, {"reparented", res.reparented},
                {"released_objects", res.released}},
               text};
}

Result<Reply> GcLocked(snap::Repo& repo, const nlohmann::json& args) {
  store::CompactOptions compact;
  compact.min_dead_fraction = args.value("compact_above", 50.0) / 100;
  bool full = args.value("full", false);
  AE_ASSIGN(snap::GcResult res, repo.Gc(compact, full));
  std::string text = "dropped " + std::to_string(res.dropped_objects) + " unreferenced objects (" +
                     HumanBytes(res.dropped_bytes) + "); freed " + HumanBytes(res.bytes_freed) +
                     " on disk by rewriting " + std::to_string(res.packs_rewritten) + " packs; " +
                     std::to_string(res.live_objects) + " objects referenced";
  if (res.counted) text += " (reference counts rebuilt: " + std::to_string(res.objects_read) + " trees and manifests read)";
  return Reply{{{"live_objects", res.live_objects}, {"dropped_objects", res.dropped_objects},
                {"dropped_bytes", res.dropped_bytes}, {"bytes_freed", res.bytes_freed},
                {"packs_rewritten", res.packs_rewritten}, {"counted", res.counted},
                {"objects_read", res.objects_read}},
               text};
}

int CmdRetain(int argc, char** argv) {
  Globals g;
  bool dry_run = false;
  snap::RetentionPolicy policy;
  int64_t within_s = policy.keep_within.count();
  CLI::App app{"Thin history: keep the newest nodes and everything recent, then one node per minute for an hour, "
               "per 10 minutes for a day, per hour for a week, per day beyond; HEAD, roots, tags, branch points "
               "and tips always stay. Run gc afterwards to free the space", "retain"};
  AddGlobals(app, g);
  app.add_flag("--dry-run,-n", dry_run, "Only show what would be dropped");
  app.add_option("--keep-last", policy.keep_last, "Always keep this many newest nodes (default 50)");
  app.add_option("--keep-within", within_s, "Always keep nodes younger than this many seconds (default 600)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  return RunLocked(g, "retain", {{"dry_run", dry_run}, {"keep_last", policy.keep_last}, {"keep_within_s", within_s}});
}

int CmdGc(int argc, char** argv) {
  Globals g;
  double compact_above = 50;
  bool full = false;
  CLI::App app{"Free the storage of objects no node reaches (shared chunks stay) and compact packs", "gc"};
  AddGlobals(app, g);
  app.add_option("--compact-above", compact_above,
                 "Rewrite packs at least this percent dead (default 50; lower frees more now, copies more)")
      ->check(CLI::Range(0.0, 100.0));
  app.add_flag("--full", full,
               "Recount every reference from scratch and drop everything unreferenced (objects of snapshots "
               "interrupted before their node was saved); reads every tree once");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  return RunLocked(g, "gc", {{"compact_above", compact_above}, {"full", full}});
}

}  // namespace agentenv::cli
