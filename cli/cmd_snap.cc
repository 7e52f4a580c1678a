#include "cli/cli.h"
#include "cli/commands.h"

namespace agentenv::cli {

int CmdSnap(int argc, char** argv) {
  Globals g;
  snap::SnapOptions opt;
  std::vector<std::string> paths;
  CLI::App app{"Snapshot the live tree as a new node (no node when nothing changed)", "snap"};
  AddGlobals(app, g);
  app.add_option("-m,--message", opt.message, "Why: shown in log");
  app.add_option("--label", opt.label, "Automatic label (default: a summary of the changes)");
  app.add_flag("--allow-empty", opt.allow_empty, "Make a node even if nothing changed");
  app.add_option("paths", paths, "Only rescan these tree-relative paths (default: the whole tree)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (!paths.empty()) opt.paths = paths;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto res = (*repo)->Snapshot(opt);
  if (!res) return ReportError(g, res.error());
  nlohmann::json j = {{"created", bool(res->node)}, {"hashed_files", res->hashed_files},
                      {"hashed_bytes", res->hashed_bytes}, {"warnings", res->warnings}};
  std::string text;
  for (const auto& w : res->warnings) text += "warning: " + w + "\n";
  if (!res->node) {
    j["node"] = nullptr;
    return ReportOk(g, j, text + "nothing changed; no node made");
  }
  auto rec = (*repo)->Record(*res->node);
  if (!rec) return ReportError(g, rec.error());
  j["node"] = NodeJson(*rec);
  j["label"] = res->label;
  const auto& c = res->changes;
  text += "node " + Short(*res->node) + ": " + rec->title + "  (+" + std::to_string(c.added) + " ~" +
          std::to_string(c.modified) + " -" + std::to_string(c.deleted) + ")";
  return ReportOk(g, j, text);
}

}  // namespace agentenv::cli
