#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/routed.h"

namespace agentenv::cli {

Result<Reply> SnapLocked(snap::Repo& repo, const nlohmann::json& args) {
  snap::SnapOptions opt;
  opt.message = args.value("message", "");
  opt.label = args.value("label", "");
  opt.allow_empty = args.value("allow_empty", false);
  if (args.contains("paths")) opt.paths = args["paths"].get<std::vector<std::string>>();
  AE_ASSIGN(snap::SnapResult res, repo.Snapshot(opt));
  nlohmann::json j = {{"created", bool(res.node)}, {"hashed_files", res.hashed_files},
                      {"hashed_bytes", res.hashed_bytes}, {"warnings", res.warnings}};
  std::string text;
  for (const auto& w : res.warnings) text += "warning: " + w + "\n";
  if (!res.node) {
    j["node"] = nullptr;
    return Reply{j, text + "nothing changed; no node made"};
  }
  AE_ASSIGN(snap::NodeRecord rec, repo.Record(*res.node));
  j["node"] = NodeJson(rec);
  j["label"] = res.label;
  const auto& c = res.changes;
  text += "node " + Short(*res.node) + ": " + rec.title + "  (+" + std::to_string(c.added) + " ~" +
          std::to_string(c.modified) + " -" + std::to_string(c.deleted) + ")";
  return Reply{j, text};
}

int CmdSnap(int argc, char** argv) {
  Globals g;
  std::string message, label;
  bool allow_empty = false;
  std::vector<std::string> paths;
  CLI::App app{"Snapshot the live tree as a new node (no node when nothing changed)", "snap"};
  AddGlobals(app, g);
  app.add_option("-m,--message", message, "Why: shown in log");
  app.add_option("--label", label, "Automatic label (default: a summary of the changes)");
  app.add_flag("--allow-empty", allow_empty, "Make a node even if nothing changed");
  app.add_option("paths", paths, "Only rescan these tree-relative paths (default: the whole tree)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  nlohmann::json args = {{"message", message}, {"label", label}, {"allow_empty", allow_empty}};
  if (!paths.empty()) args["paths"] = paths;
  return RunLocked(g, "snap", args);
}

}  // namespace agentenv::cli
