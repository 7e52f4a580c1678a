#include "cli/cli.h"
#include "cli/commands.h"

namespace agentenv::cli {

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
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  if (name.empty()) {
    if (del) return ReportError(g, Error{"tag -d: which tag? (tag -d NAME)", 0, ErrorCode::kInvalid});
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
  if (del) {
    auto r = (*repo)->Untag(name);
    if (!r) return ReportError(g, r.error());
    return ReportOk(g, {{"deleted", name}}, "deleted tag " + name);
  }
  auto id = (*repo)->Tag(name, ref);
  if (!id) return ReportError(g, id.error());
  return ReportOk(g, {{"name", name}, {"id", id->Hex()}}, "tagged " + Short(*id) + " as " + name);
}

}  // namespace agentenv::cli
