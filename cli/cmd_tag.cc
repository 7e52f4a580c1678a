#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/routed.h"

namespace agentenv::cli {

Result<Reply> TagLocked(snap::Repo& repo, const nlohmann::json& args) {
  std::string name = args.at("name").get<std::string>();
  if (args.value("delete", false)) {
    AE_TRY(repo.Untag(name));
    return Reply{{{"deleted", name}}, "deleted tag " + name};
  }
  AE_ASSIGN(store::ObjectId id, repo.Tag(name, args.value("ref", "HEAD")));
  return Reply{{{"name", name}, {"id", id.Hex()}}, "tagged " + Short(id) + " as " + name};
}

int CmdTag(int argc, char** argv) {
  Globals g;
  std::string name, ref = "HEAD";
  bool del = false;
  CLI::App app{"List tags (no arguments), tag a node (tag NAME [REF]), or delete a tag (tag -d NAME)", "tag"};
  AddGlobals(app, g);
  app.add_option("name", name, "Tag name");
  app.add_option("ref", ref, "Node to tag (default HEAD)");
  app.add_flag("-d,--delete", del, "Delete the tag");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (name.empty() && del) return ReportError(g, Error{"tag -d: which tag? (tag -d NAME)", 0, ErrorCode::kInvalid});
  if (!name.empty()) return RunLocked(g, "tag", {{"name", name}, {"ref", ref}, {"delete", del}});
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto tags = (*repo)->Tags();
  if (!tags) return ReportError(g, tags.error());
  nlohmann::json arr = nlohmann::json::array();
  std::string text;
  for (const auto& [n, id] : *tags) {
    arr.push_back({{"name", n}, {"id", id.Hex()}});
    text += n + "  " + Short(id) + "\n";
  }
  return ReportOk(g, {{"tags", arr}}, text.empty() ? "no tags" : text);
}

}  // namespace agentenv::cli
